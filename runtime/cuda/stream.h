// runtime/cuda/stream.h: CUDA streams and events as PyTorch exposes them.
//
// Each device's default stream is the legacy NULL stream (handle 0), as PyTorch's: work on it is
// ordered with every blocking stream. kiln.cuda.Stream() hands out kiln's own non-blocking streams
// from a per-device pool (32 per priority, round robin, created on first use and never destroyed),
// so creating Stream objects in a loop costs no driver call after the pool is full — PyTorch's
// design. The current stream is per thread and per device.
#pragma once

#include <cstdint>

#include "runtime/cuda/driver_api.h"

namespace kiln::cuda {

struct Stream {
  int device = 0;
  CUstream handle = nullptr;  // nullptr: the default (legacy NULL) stream
  int priority = 0;           // 0 normal, -1 high (lower is higher, as CUDA's)

  uintptr_t id() const { return reinterpret_cast<uintptr_t>(handle); }
  bool operator==(const Stream& o) const { return device == o.device && handle == o.handle; }
  bool operator!=(const Stream& o) const { return !(*this == o); }

  void Synchronize() const;
  bool Query() const;  // true when all work queued on it has finished
  void WaitEvent(CUevent event) const;
};

Stream DefaultStream(int device);
Stream CurrentStream(int device);  // the calling thread's; the default stream until set
void SetCurrentStream(const Stream& stream);
// A stream from the device's pool; priority < 0 takes the high-priority pool.
Stream StreamFromPool(int device, int priority = 0);
// Every stream of the device: cuCtxSynchronize.
void SynchronizeDevice(int device);

// An event: created lazily on its first record (like PyTorch's), so an unrecorded Event costs
// nothing and queries as complete.
class Event {
 public:
  explicit Event(bool enable_timing = false, bool blocking = false)
      : enable_timing_(enable_timing), blocking_(blocking) {}
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void Record(const Stream& stream);
  void Wait(const Stream& stream) const;  // the stream waits for the event; the host does not
  bool Query() const;
  void Synchronize() const;
  float ElapsedTime(const Event& end) const;  // milliseconds; both need enable_timing
  bool recorded() const { return event_ != nullptr; }
  int device() const { return device_; }

 private:
  bool enable_timing_;
  bool blocking_;
  int device_ = -1;
  CUevent event_ = nullptr;
};

}  // namespace kiln::cuda
