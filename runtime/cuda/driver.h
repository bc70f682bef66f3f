// runtime/cuda/driver.h: the CUDA driver, loaded once per process: availability, devices and
// their properties, one primary context per device retained lazily, and typed errors.
//
// No GPU, no driver, or a driver that fails cuInit: Available() is false, UnavailableReason() says
// why, and nothing else here may be called (each entry point checks and throws). Loading never
// throws and never prints: kiln.cuda.is_available() answers False quietly, as PyTorch's does.
#pragma once

#include <string>

#include "runtime/cuda/device_memory.h"
#include "runtime/cuda/driver_api.h"

namespace kiln::cuda {

bool Available();                     // loads the driver on first call
const std::string& UnavailableReason();
int DeviceCount();                    // 0 when unavailable
int DriverVersion();                  // 13000 for CUDA 13.0; 0 when unavailable
const std::string& DriverLibraryPath();

// The driver table; throws RuntimeError ("Found no NVIDIA driver ...") when unavailable.
const DriverApi& Api();

// Throws for a failed call: OutOfMemoryError for CUDA_ERROR_OUT_OF_MEMORY, otherwise
// AcceleratorError "CUDA error: <driver's text> (<NAME>) in <what>", as PyTorch's are raised.
void Check(CUresult result, const char* what);
#define KILN_CUDA_CHECK(call) ::kiln::cuda::Check((call), #call)

// Validates `device` against DeviceCount() (IndexError-shaped RuntimeError like PyTorch's
// "Invalid device ordinal"), retains the device's primary context on first use and makes it
// current on this thread.
void EnsureContext(int device);

// Whether any device's context exists yet (torch.cuda.is_initialized: a CUDA tensor, a stream or
// an explicit call made one).
bool Initialized();

// The calling thread's current device (torch.cuda.current_device / set_device).
int CurrentDevice();
void SetCurrentDevice(int device);

struct DeviceProperties {
  std::string name;
  int major = 0, minor = 0;
  int multi_processor_count = 0;
  int max_threads_per_block = 0;
  int max_threads_per_multi_processor = 0;
  int warp_size = 0;
  int l2_cache_size = 0;
  int shared_memory_per_block_optin = 0;
  size_t total_memory = 0;
};
const DeviceProperties& GetDeviceProperties(int device);

// DeviceMemoryOps over the driver for one device (what the caching allocator uses there).
DeviceMemoryOps* DriverMemoryOps(int device);

}  // namespace kiln::cuda
