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

// Note [The error word lives in device memory]: it was pinned host memory mapped into the device,
// claimed by kernels with a system-scope atomicCAS. Atomics on host memory are only allowed where
// the host link supports them natively: on an H100 host compute-sanitizer's memcheck stopped the
// first reporting kernel ("Invalid __global__ system-scoped atomic ... Access is not allowed"),
// and without it the report worked by luck. So kernels claim a word in device memory (an atomic
// there is always valid) and the winner writes its report with plain stores into pinned host
// memory mapped into the device, whose address the device word holds: the host still reads the
// report with no copy, and clears the claim only after an error.
struct Device {
  std::atomic<int32_t*> word{nullptr};  // device memory: [0] the claim, [2..3] the report's device address
  int32_t* report = nullptr;            // mapped pinned host memory: [0] the code, [2..3] the number
};

struct Words {
  std::mutex mu;
  Device device[kMaxDevices];
  std::vector<std::pair<int, std::string>> messages;  // code >> 4 - 1 -> (kind, message)
};
Words& GetWords() {
  static Words* w = new Words;  // never freed: kernels may report until the process ends
  return *w;
}

}  // namespace

int32_t* DeviceErrorWord(int device) {
  KILN_CHECK(device >= 0 && device < kMaxDevices, "DeviceErrorWord: bad device index ", device);
  Device& d = GetWords().device[device];
  if (int32_t* p = d.word.load(std::memory_order_acquire)) return p;
  std::lock_guard<std::mutex> lock(GetWords().mu);
  if (int32_t* p = d.word.load()) return p;
  EnsureContext(device);
  void* report = nullptr;
  KILN_CUDA_CHECK(Api().cuMemHostAlloc(&report, 16, CU_MEMHOSTALLOC_PORTABLE | kHostAllocDeviceMap));
  std::memset(report, 0, 16);
  CUdeviceptr word = 0;
  KILN_CUDA_CHECK(Api().cuMemAlloc(&word, 16));
  // Under unified addressing (every 64-bit platform CUDA supports) a mapped host pointer is also
  // the device's pointer to it.
  int32_t init[4] = {0, 0};
  std::memcpy(init + 2, &report, sizeof report);
  KILN_CUDA_CHECK(Api().cuMemcpyAsync(word, reinterpret_cast<CUdeviceptr>(init), sizeof init, nullptr));
  KILN_CUDA_CHECK(Api().cuStreamSynchronize(nullptr));
  d.report = static_cast<int32_t*>(report);
  d.word.store(reinterpret_cast<int32_t*>(word), std::memory_order_release);
  return reinterpret_cast<int32_t*>(word);
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
  Device& d = w.device[device];
  int32_t* word = d.word.load(std::memory_order_acquire);
  if (word == nullptr) return;
  volatile int32_t* report = d.report;
  const int32_t code = report[0];
  if (code == 0) return;
  const int64_t number = *reinterpret_cast<volatile int64_t*>(const_cast<int32_t*>(report) + 2);
  report[0] = 0;
  // the claim, so the next bad input reports again
  EnsureContext(device);
  KILN_CUDA_CHECK(Api().cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(word), 0, 1, nullptr));
  KILN_CUDA_CHECK(Api().cuStreamSynchronize(nullptr));
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
