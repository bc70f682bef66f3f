// runtime/cuda/stream.cc: the per-device stream pools, the current stream, events.
#include "runtime/cuda/stream.h"

#include <array>
#include <atomic>
#include <mutex>
#include <vector>

#include "runtime/cuda/device_errors.h"
#include "runtime/cuda/driver.h"
#include "runtime/error.h"

namespace kiln::cuda {
namespace {

constexpr int kStreamsPerPool = 32;
constexpr int kMaxDevices = 64;

struct DevicePools {
  std::once_flag once;
  std::array<CUstream, kStreamsPerPool> normal{}, high{};
  std::atomic<unsigned> next_normal{0}, next_high{0};
  int least_priority = 0, greatest_priority = 0;
};

DevicePools& Pools(int device) {
  static auto* pools = new std::array<DevicePools, kMaxDevices>();
  DevicePools& p = (*pools)[device];
  std::call_once(p.once, [&] {
    EnsureContext(device);
    KILN_CUDA_CHECK(Api().cuCtxGetStreamPriorityRange(&p.least_priority, &p.greatest_priority));
    for (int i = 0; i < kStreamsPerPool; ++i) {
      KILN_CUDA_CHECK(Api().cuStreamCreateWithPriority(&p.normal[i], CU_STREAM_NON_BLOCKING, p.least_priority));
      KILN_CUDA_CHECK(Api().cuStreamCreateWithPriority(&p.high[i], CU_STREAM_NON_BLOCKING, p.greatest_priority));
    }
  });
  return p;
}

// Per thread, per device: the current stream (nullptr handle = the default stream).
thread_local std::array<CUstream, kMaxDevices> tls_current{};
thread_local std::array<int, kMaxDevices> tls_priority{};

}  // namespace

void Stream::Synchronize() const {
  EnsureContext(device);
  KILN_CUDA_CHECK(Api().cuStreamSynchronize(handle));
  ThrowReportedDeviceError(device);  // Note [Device-side errors]
}

bool Stream::Query() const {
  EnsureContext(device);
  CUresult r = Api().cuStreamQuery(handle);
  if (r == CUDA_ERROR_NOT_READY) return false;
  Check(r, "cuStreamQuery");
  return true;
}

void Stream::WaitEvent(CUevent event) const {
  EnsureContext(device);
  KILN_CUDA_CHECK(Api().cuStreamWaitEvent(handle, event, 0));
}

Stream DefaultStream(int device) {
  EnsureContext(device);
  return Stream{device, nullptr, 0};
}

Stream CurrentStream(int device) {
  EnsureContext(device);
  return Stream{device, tls_current[device], tls_priority[device]};
}

void SetCurrentStream(const Stream& stream) {
  EnsureContext(stream.device);
  tls_current[stream.device] = stream.handle;
  tls_priority[stream.device] = stream.priority;
}

Stream StreamFromPool(int device, int priority) {
  EnsureContext(device);
  DevicePools& p = Pools(device);
  if (priority < 0) return Stream{device, p.high[p.next_high++ % kStreamsPerPool], -1};
  return Stream{device, p.normal[p.next_normal++ % kStreamsPerPool], 0};
}

void SynchronizeDevice(int device) {
  EnsureContext(device);
  KILN_CUDA_CHECK(Api().cuCtxSynchronize());
  ThrowReportedDeviceError(device);
}

Event::~Event() {
  if (event_ != nullptr && Available()) Api().cuEventDestroy(event_);  // no throw from a destructor
}

void Event::Record(const Stream& stream) {
  EnsureContext(stream.device);
  if (event_ == nullptr) {
    unsigned flags = enable_timing_ ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING;
    if (blocking_) flags |= 0x1;  // CU_EVENT_BLOCKING_SYNC
    KILN_CUDA_CHECK(Api().cuEventCreate(&event_, flags));
    device_ = stream.device;
  }
  KILN_CHECK(device_ == stream.device, "Event device ", device_, " does not match recording stream's device ",
             stream.device, ".");
  KILN_CUDA_CHECK(Api().cuEventRecord(event_, stream.handle));
}

void Event::Wait(const Stream& stream) const {
  if (event_ == nullptr) return;  // PyTorch: waiting on an unrecorded event is a no-op
  stream.WaitEvent(event_);
}

bool Event::Query() const {
  if (event_ == nullptr) return true;
  EnsureContext(device_);
  CUresult r = Api().cuEventQuery(event_);
  if (r == CUDA_ERROR_NOT_READY) return false;
  Check(r, "cuEventQuery");
  return true;
}

void Event::Synchronize() const {
  if (event_ == nullptr) return;
  EnsureContext(device_);
  KILN_CUDA_CHECK(Api().cuEventSynchronize(event_));
  ThrowReportedDeviceError(device_);
}

float Event::ElapsedTime(const Event& end) const {
  KILN_CHECK(enable_timing_ && end.enable_timing_,
             "Both events must be created with argument 'enable_timing=True'.");
  KILN_CHECK(event_ != nullptr && end.event_ != nullptr,
             "Both events must be recorded before calculating elapsed time.");
  EnsureContext(device_);
  float ms = 0;
  KILN_CUDA_CHECK(Api().cuEventElapsedTime(&ms, event_, end.event_));
  return ms;
}

}  // namespace kiln::cuda
