// runtime/cuda/driver_api.h: kiln's own declarations of the CUDA driver API entry points it uses,
// so that kiln builds with no CUDA headers or libraries; libcuda is dlopen'ed at run time
// (runtime/cuda/loader.h). Values are those of CUDA 13.0's cuda.h. Versioned entry points are
// looked up by their exported names (cuMemAlloc_v2, ...), which is what the header's macros
// select; the per-thread-default-stream (_ptsz) variants are never used.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
struct CUevent_st;
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
using CUstream = CUstream_st*;
using CUevent = CUevent_st*;

inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
inline constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
inline constexpr CUresult CUDA_ERROR_NOT_READY = 600;

inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1;
inline constexpr int CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10;
inline constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
inline constexpr int CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;

inline constexpr unsigned CU_STREAM_NON_BLOCKING = 0x1;
inline constexpr unsigned CU_EVENT_DEFAULT = 0x0;
inline constexpr unsigned CU_EVENT_DISABLE_TIMING = 0x2;
inline constexpr unsigned CU_MEMHOSTALLOC_PORTABLE = 0x1;

// The table of entry points, filled by the loader. X(name, exported symbol, return, params).
#define KILN_CUDA_DRIVER_FUNCTIONS(X)                                                              \
  X(cuInit, "cuInit", CUresult, (unsigned flags))                                                  \
  X(cuDriverGetVersion, "cuDriverGetVersion", CUresult, (int* version))                           \
  X(cuGetErrorName, "cuGetErrorName", CUresult, (CUresult error, const char** name))              \
  X(cuGetErrorString, "cuGetErrorString", CUresult, (CUresult error, const char** text))          \
  X(cuDeviceGetCount, "cuDeviceGetCount", CUresult, (int* count))                                  \
  X(cuDeviceGet, "cuDeviceGet", CUresult, (CUdevice * device, int ordinal))                        \
  X(cuDeviceGetName, "cuDeviceGetName", CUresult, (char* name, int len, CUdevice device))         \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute", CUresult, (int* value, int attr, CUdevice dev)) \
  X(cuDeviceTotalMem, "cuDeviceTotalMem_v2", CUresult, (size_t * bytes, CUdevice dev))            \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", CUresult, (CUcontext * ctx, CUdevice dev)) \
  X(cuCtxSetCurrent, "cuCtxSetCurrent", CUresult, (CUcontext ctx))                                 \
  X(cuCtxGetCurrent, "cuCtxGetCurrent", CUresult, (CUcontext * ctx))                               \
  X(cuCtxSynchronize, "cuCtxSynchronize", CUresult, ())                                            \
  X(cuMemGetInfo, "cuMemGetInfo_v2", CUresult, (size_t * free_bytes, size_t * total_bytes))       \
  X(cuMemAlloc, "cuMemAlloc_v2", CUresult, (CUdeviceptr * ptr, size_t bytes))                      \
  X(cuMemFree, "cuMemFree_v2", CUresult, (CUdeviceptr ptr))                                        \
  X(cuMemHostAlloc, "cuMemHostAlloc", CUresult, (void** ptr, size_t bytes, unsigned flags))        \
  X(cuMemFreeHost, "cuMemFreeHost", CUresult, (void* ptr))                                         \
  X(cuMemcpyAsync, "cuMemcpyAsync", CUresult, (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s)) \
  X(cuMemsetD8Async, "cuMemsetD8Async", CUresult, (CUdeviceptr dst, unsigned char v, size_t n, CUstream s)) \
  X(cuMemsetD16Async, "cuMemsetD16Async", CUresult, (CUdeviceptr dst, unsigned short v, size_t n, CUstream s)) \
  X(cuMemsetD32Async, "cuMemsetD32Async", CUresult, (CUdeviceptr dst, unsigned v, size_t n, CUstream s)) \
  X(cuStreamCreateWithPriority, "cuStreamCreateWithPriority", CUresult,                           \
    (CUstream * stream, unsigned flags, int priority))                                             \
  X(cuCtxGetStreamPriorityRange, "cuCtxGetStreamPriorityRange", CUresult, (int* least, int* greatest)) \
  X(cuStreamDestroy, "cuStreamDestroy_v2", CUresult, (CUstream stream))                            \
  X(cuStreamSynchronize, "cuStreamSynchronize", CUresult, (CUstream stream))                       \
  X(cuStreamQuery, "cuStreamQuery", CUresult, (CUstream stream))                                   \
  X(cuStreamWaitEvent, "cuStreamWaitEvent", CUresult, (CUstream s, CUevent e, unsigned flags))     \
  X(cuEventCreate, "cuEventCreate", CUresult, (CUevent * event, unsigned flags))                   \
  X(cuEventDestroy, "cuEventDestroy_v2", CUresult, (CUevent event))                                \
  X(cuEventRecord, "cuEventRecord", CUresult, (CUevent event, CUstream stream))                    \
  X(cuEventQuery, "cuEventQuery", CUresult, (CUevent event))                                       \
  X(cuEventSynchronize, "cuEventSynchronize", CUresult, (CUevent event))                           \
  X(cuEventElapsedTime, "cuEventElapsedTime", CUresult, (float* ms, CUevent start, CUevent end))  \
  X(cuModuleLoadData, "cuModuleLoadData", CUresult, (CUmodule * module, const void* image))       \
  X(cuModuleUnload, "cuModuleUnload", CUresult, (CUmodule module))                                 \
  X(cuModuleGetFunction, "cuModuleGetFunction", CUresult, (CUfunction * fn, CUmodule m, const char* name)) \
  X(cuFuncSetAttribute, "cuFuncSetAttribute", CUresult, (CUfunction fn, int attr, int value))      \
  X(cuLaunchKernel, "cuLaunchKernel", CUresult,                                                    \
    (CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,  \
     unsigned shared_bytes, CUstream stream, void** params, void** extra))

struct DriverApi {
#define KILN_CUDA_DECLARE_FIELD(name, symbol, ret, params) ret(*name) params = nullptr;
  KILN_CUDA_DRIVER_FUNCTIONS(KILN_CUDA_DECLARE_FIELD)
#undef KILN_CUDA_DECLARE_FIELD
};

}  // namespace kiln::cuda
