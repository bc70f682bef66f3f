// runtime/cuda/device_errors.cc: the per-device error words (device_errors.h).
#include "runtime/cuda/device_errors.h"

#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

#include "runtime/cuda/driver.h"
#include "runtime/error.h"

namespace kiln::cuda {
namespace {

constexpr int kMaxDevices = 64;
constexpr unsigned kHostAllocDeviceMap = 0x2;  // CU_MEMHOSTALLOC_DEVICEMAP

struct Words {
  std::mutex mu;
  std::atomic<int32_t*> word[kMaxDevices] = {};
  std::vector<std::pair<int, std::string>> messages;  // code >> 4 - 1 -> (kind, message)
};
Words& GetWords() {
  static Words* w = new Words;  // never freed: kernels may report until the process ends
  return *w;
}

}  // namespace

int32_t* DeviceErrorWord(int device) {
  KILN_CHECK(device >= 0 && device < kMaxDevices, "DeviceErrorWord: bad device index ", device);
  Words& w = GetWords();
  if (int32_t* p = w.word[device].load(std::memory_order_acquire)) return p;
  std::lock_guard<std::mutex> lock(w.mu);
  if (int32_t* p = w.word[device].load()) return p;
  EnsureContext(device);
  void* p = nullptr;
  // Under unified addressing (every 64-bit platform CUDA supports) a mapped host pointer is also
  // the device's pointer to it.
  KILN_CUDA_CHECK(Api().cuMemHostAlloc(&p, 16, CU_MEMHOSTALLOC_PORTABLE | kHostAllocDeviceMap));
  std::memset(p, 0, 16);
  w.word[device].store(static_cast<int32_t*>(p), std::memory_order_release);
  return static_cast<int32_t*>(p);
}

int32_t DeviceErrorCode(int kind, const std::string& message) {
  Words& w = GetWords();
  std::lock_guard<std::mutex> lock(w.mu);
  size_t i = 0;
  while (i < w.messages.size() && w.messages[i] != std::make_pair(kind, message)) ++i;
  if (i == w.messages.size()) w.messages.emplace_back(kind, message);
  return static_cast<int32_t>(kind | ((i + 1) << 4));
}

void ThrowReportedDeviceError(int device) {
  if (device < 0 || device >= kMaxDevices) return;
  Words& w = GetWords();
  volatile int32_t* word = w.word[device].load(std::memory_order_acquire);
  if (word == nullptr || *word == 0) return;
  const int32_t code = *word;
  const int64_t number = *reinterpret_cast<volatile int64_t*>(const_cast<int32_t*>(word) + 2);
  *word = 0;
  std::pair<int, std::string> m{KILN_DEVICE_ERROR_RUNTIME, "a CUDA kernel reported an unknown error"};
  {
    std::lock_guard<std::mutex> lock(w.mu);
    const size_t i = static_cast<size_t>(code >> 4);
    if (i >= 1 && i <= w.messages.size()) m = w.messages[i - 1];
  }
  const size_t at = m.second.find("{}");
  if (at != std::string::npos) m.second.replace(at, 2, std::to_string(number));
  if (m.first == KILN_DEVICE_ERROR_INDEX) throw IndexError(m.second);
  throw Error(m.second);  // RuntimeError in Python
}

}  // namespace kiln::cuda
