// runtime/allocator.cc: the CPU allocator with a small cache of large blocks.
//
// Note [CPU block cache]: glibc returns large blocks (mmap) to the kernel on free, so an eager
// `x * y + 1` on 16M elements would fault in 64 MB of fresh pages per op. Blocks of 64 KiB and up
// are kept in a per-size free list (bounded in total bytes) and handed out again.
#include "runtime/allocator.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <new>

#include "runtime/error.h"

namespace kiln {
namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kCacheMinBytes = 64 << 10;
constexpr size_t kCacheMaxTotal = size_t(1) << 30;

class CPUAllocator final : public Allocator {
 public:
  DataPtr Allocate(size_t nbytes) override {
    size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
    if (rounded == 0) rounded = kAlignment;
    void* p = nullptr;
    if (rounded >= kCacheMinBytes) {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = cache_.find(rounded);
      if (it != cache_.end()) {
        p = it->second;
        cached_bytes_ -= rounded;
        cache_.erase(it);
      }
    }
    if (p == nullptr) {
      p = std::aligned_alloc(kAlignment, rounded);
      if (p == nullptr) {
        Trim();
        p = std::aligned_alloc(kAlignment, rounded);
      }
      KILN_CHECK(p != nullptr, "[CPU allocator] out of memory: tried to allocate ", nbytes, " bytes");
    }
    return DataPtr(p, [this, rounded](void* q) { Free(q, rounded); }, Device(DeviceType::CPU));
  }

 private:
  void Free(void* p, size_t rounded) {
    if (rounded >= kCacheMinBytes) {
      std::lock_guard<std::mutex> lock(mu_);
      if (cached_bytes_ + rounded <= kCacheMaxTotal) {
        cache_.emplace(rounded, p);
        cached_bytes_ += rounded;
        return;
      }
    }
    std::free(p);
  }
  void Trim() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [size, p] : cache_) std::free(p);
    cache_.clear();
    cached_bytes_ = 0;
  }

  std::mutex mu_;
  std::multimap<size_t, void*> cache_;
  size_t cached_bytes_ = 0;
};

}  // namespace

Allocator* GetCPUAllocator() {
  static CPUAllocator* allocator = new CPUAllocator();  // never destroyed: frees may come late
  return allocator;
}

}  // namespace kiln
