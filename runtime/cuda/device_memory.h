// runtime/cuda/device_memory.h: what the CUDA caching allocator asks of the driver, as an interface,
// so that its bookkeeping is tested against a fake on machines without a GPU (CI has none).
//
// The real implementation (runtime/cuda/driver.cc) forwards to cuMemAlloc_v2 / cuMemFree_v2 /
// cuMemGetInfo_v2 and the cuEvent* calls with the device's primary context current.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln::cuda {

// Opaque driver handles as integers: a CUstream (0 is the legacy default stream) and a CUevent.
using StreamHandle = uintptr_t;
using EventHandle = uintptr_t;

class DeviceMemoryOps {
 public:
  virtual ~DeviceMemoryOps() = default;
  // Device memory of `bytes`; false when the device is out of memory (any other failure throws).
  virtual bool Malloc(void** ptr, size_t bytes) = 0;
  virtual void Free(void* ptr) = 0;
  virtual void MemGetInfo(size_t* free_bytes, size_t* total_bytes) = 0;
  // Events that guard reuse of a block freed while other streams may still read it (record_stream).
  virtual EventHandle CreateEvent() = 0;  // timing disabled
  virtual void DestroyEvent(EventHandle event) = 0;
  virtual void RecordEvent(EventHandle event, StreamHandle stream) = 0;
  virtual bool QueryEvent(EventHandle event) = 0;        // true once the work before it is done
  virtual void SynchronizeEvent(EventHandle event) = 0;  // blocks until it is done
  virtual void SynchronizeDevice() = 0;                  // empty_cache waits for all streams first
};

}  // namespace kiln::cuda
