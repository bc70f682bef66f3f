// runtime/cuda/cuda_allocator.cc: per-device caching allocators as kiln Allocators, and the pinned
// host allocator.
#include "runtime/cuda/cuda_allocator.h"

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "runtime/cuda/driver.h"
#include "runtime/cuda/stream.h"
#include "runtime/error.h"

namespace kiln::cuda {
namespace {

constexpr int kMaxDevices = 64;

class DeviceAllocator final : public Allocator {
 public:
  explicit DeviceAllocator(int device) : device_(device), caching_(DriverMemoryOps(device), device) {}

  DataPtr Allocate(size_t nbytes) override {
    EnsureContext(device_);
    StreamHandle stream = CurrentStream(device_).id();
    void* p = caching_.Allocate(nbytes, stream);
    // Frees come from any thread (a tensor dies wherever its last reference goes); the caching
    // allocator keys the block by the stream it was allocated on, not the freeing thread's.
    return DataPtr(p, [this](void* q) { caching_.Free(q); }, Device(DeviceType::CUDA, static_cast<int16_t>(device_)));
  }

  CachingAllocator& caching() { return caching_; }

 private:
  int device_;
  CachingAllocator caching_;
};

DeviceAllocator& ForDevice(int device) {
  EnsureContext(device);  // validates the index
  static auto* allocators = new std::array<std::unique_ptr<DeviceAllocator>, kMaxDevices>();
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = (*allocators)[device];
  if (!slot) slot = std::make_unique<DeviceAllocator>(device);
  return *slot;
}

// Note [Pinned host cache]: cuMemHostAlloc pins pages through the kernel and costs far more than
// malloc; DataLoader's pin_memory() pins every batch, so freed blocks are kept by size and reused.
class PinnedAllocator final : public Allocator {
 public:
  DataPtr Allocate(size_t nbytes) override {
    size_t rounded = RoundUp(nbytes);
    void* p = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(rounded);
      if (it != free_.end()) {
        p = it->second;
        free_.erase(it);
      }
    }
    if (p == nullptr) {
      EnsureContext(CurrentDevice());
      KILN_CUDA_CHECK(Api().cuMemHostAlloc(&p, rounded, CU_MEMHOSTALLOC_PORTABLE));
      std::lock_guard<std::mutex> lock(mu_);
      live_.emplace(p, rounded);
    }
    return DataPtr(p, [this, rounded](void* q) {
      std::lock_guard<std::mutex> lock(mu_);
      free_.emplace(rounded, q);
    }, Device(DeviceType::CPU));
  }

  bool Owns(const void* ptr) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.upper_bound(const_cast<void*>(ptr));
    if (it == live_.begin()) return false;
    --it;
    return static_cast<const char*>(ptr) < static_cast<const char*>(it->first) + it->second;
  }

 private:
  static size_t RoundUp(size_t n) {
    size_t r = 512;
    while (r < n) r <<= 1;  // powers of two: a few sizes serve every batch
    return r;
  }
  std::mutex mu_;
  std::multimap<size_t, void*> free_;
  std::map<void*, size_t> live_;
};

PinnedAllocator& Pinned() {
  static auto* a = new PinnedAllocator();
  return *a;
}

}  // namespace

Allocator* GetCUDAAllocator(int device) { return &ForDevice(device); }
CachingAllocator& DeviceCachingAllocator(int device) { return ForDevice(device).caching(); }
Allocator* GetPinnedHostAllocator() { return &Pinned(); }
bool IsPinned(const void* ptr) { return Available() && Pinned().Owns(ptr); }

}  // namespace kiln::cuda
