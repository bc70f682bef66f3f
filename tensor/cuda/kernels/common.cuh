// tensor/cuda/kernels/common.cuh: what the ahead-of-time CUDA kernels share: kiln's dtypes as CUDA
// types, conversions with the CPU kernels' rounding, and the launch shape.
//
// Every kernel is `extern "C"` and named kiln_<what>_<dtype suffix> (f16, bf16, f32, f64, b8, u8,
// i8, i16, i32, i64), the names tensor/cuda/embedded_kernels.h looks up. KILN_FOR_EACH_* instantiate
// a kernel template once per dtype under those names.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace kiln {

// The type arithmetic happens in (PyTorch's opmath_type): float for the 16-bit floats.
template <typename T> struct OpMath { using type = T; };
template <> struct OpMath<__half> { using type = float; };
template <> struct OpMath<__nv_bfloat16> { using type = float; };
template <typename T> using opmath_t = typename OpMath<T>::type;

// static_cast<T>(v) as the CPU kernels do it: round to nearest even for the 16-bit floats.
template <typename T, typename V> __device__ __forceinline__ T Cast(V v) { return static_cast<T>(v); }
template <> __device__ __forceinline__ __half Cast<__half, float>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 Cast<__nv_bfloat16, float>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half Cast<__half, int64_t>(int64_t v) { return __float2half_rn(static_cast<float>(v)); }
template <> __device__ __forceinline__ __nv_bfloat16 Cast<__nv_bfloat16, int64_t>(int64_t v) {
  return __float2bfloat16_rn(static_cast<float>(v));
}
template <> __device__ __forceinline__ float Cast<float, __half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float Cast<float, __nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

// Reports bad input through the device's error word (runtime/cuda/device_errors.h): the first
// report claims the word (device memory: an atomic on mapped host memory is not allowed on every
// host) and writes its number, then its code, into the host memory the word points to; the host
// raises them at its next synchronisation.
__device__ __forceinline__ void ReportDeviceError(int32_t* word, int32_t code, int64_t number = 0) {
  if (atomicCAS(word, 0, code) == 0) {
    volatile int32_t* report = *reinterpret_cast<int32_t* const*>(word + 2);
    *reinterpret_cast<volatile long long*>(report + 2) = static_cast<long long>(number);
    __threadfence_system();
    report[0] = code;
    __threadfence_system();
  }
}

// Atomic addition for the dtypes the scatter-adds support (16-bit floats: sm_70/sm_80 and later;
// int64 as two's complement unsigned).
__device__ __forceinline__ void AtomicAdd(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void AtomicAdd(double* p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void AtomicAdd(__half* p, __half v) { atomicAdd(p, v); }
__device__ __forceinline__ void AtomicAdd(__nv_bfloat16* p, __nv_bfloat16 v) { atomicAdd(p, v); }
__device__ __forceinline__ void AtomicAdd(int32_t* p, int32_t v) { atomicAdd(p, v); }
__device__ __forceinline__ void AtomicAdd(int64_t* p, int64_t v) {
  atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
}

// A 1-D grid-stride loop over [0, n): kernels are launched with tensor/cuda/embedded_kernels.h's
// LaunchGrid, which sizes the grid for n.
#define KILN_GRID_STRIDE_LOOP(i, n)                                                             \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

}  // namespace kiln

#define KILN_FOR_EACH_FLOATING(M) M(__half, f16) M(__nv_bfloat16, bf16) M(float, f32) M(double, f64)
#define KILN_FOR_EACH_INTEGRAL(M) M(bool, b8) M(uint8_t, u8) M(int8_t, i8) M(int16_t, i16) M(int32_t, i32) M(int64_t, i64)
#define KILN_FOR_EACH_TYPE(M) KILN_FOR_EACH_FLOATING(M) KILN_FOR_EACH_INTEGRAL(M)
