// tensor/cuda/kernels/softmax.cu: softmax and log_softmax over rows of up to 8192 contiguous
// elements (float64: 4096), and their backward, each reading its inputs once: the row lives in the
// registers of the threads that own it (rows.cuh), reduced with warp shuffles and, for rows of more
// than one warp, shared memory — PyTorch's softmax_warp_forward / cunn_SoftMaxForward idea. In the
// opmath type (float for 16-bit floats); an output may be float32 for 16-bit inputs (half_to_float),
// a gradient 16-bit from float32 ones. Epilogues as the CPU kernels': exp(x - max) * (1 / sum),
// (x - max) - log(sum); y * (g - sum(g * y)), g - exp(y) * sum(g).
#include <cuda/std/limits>

#include "tensor/cuda/kernels/common.cuh"
#include "tensor/cuda/kernels/rows.cuh"

namespace kiln {

template <typename T, typename O, int kVec>
__device__ void SoftmaxForward(const SoftmaxArgs& a) {
  using M = opmath_t<T>;
  constexpr M kLowest = -cuda::std::numeric_limits<M>::infinity();
  __shared__ M shared[32 * 32];
  ForEachRow(a.rows, [&](int64_t r, bool active) {  // inactive rows take part in the reductions
    M v[kRowPerThread];
    LoadRow<kVec>(static_cast<const T*>(a.x) + (active ? r : 0) * a.n, a.n, active, kLowest, v);
    M mx = kLowest;
#pragma unroll
    for (int k = 0; k < kRowPerThread; ++k) mx = v[k] > mx ? v[k] : mx;
    mx = RowReduce<true>(mx, shared);
    M sum = M(0);
#pragma unroll
    for (int k = 0; k < kRowPerThread; ++k) {
      v[k] -= mx;  // outside the row: -inf - mx, whose exp adds 0
      if (!a.log) v[k] = exp(v[k]);
      sum += a.log ? exp(v[k]) : v[k];
    }
    sum = RowReduce<false>(sum, shared);
    if (!active) return;
    // as the CPU kernels: (x - max) - log(sum), exp(x - max) * (1 / sum)
    const M log_sum = a.log ? log(sum) : M(0), inv = a.log ? M(0) : M(1) / sum;
#pragma unroll
    for (int k = 0; k < kRowPerThread; ++k) v[k] = a.log ? v[k] - log_sum : v[k] * inv;
    StoreRow<kVec>(static_cast<O*>(a.out) + r * a.n, a.n, v);
  });
}

template <typename T, typename O, int kVec>
__device__ void SoftmaxBackward(const SoftmaxArgs& a) {
  using M = opmath_t<T>;
  __shared__ M shared[32 * 32];
  ForEachRow(a.rows, [&](int64_t r, bool active) {  // inactive rows take part in the reductions
    M g[kRowPerThread], y[kRowPerThread];
    LoadRow<kVec>(static_cast<const T*>(a.x) + (active ? r : 0) * a.n, a.n, active, M(0), g);
    LoadRow<kVec>(static_cast<const T*>(a.y) + (active ? r : 0) * a.n, a.n, active, M(0), y);
    M sum = M(0);
#pragma unroll
    for (int k = 0; k < kRowPerThread; ++k) sum += a.log ? g[k] : g[k] * y[k];
    sum = RowReduce<false>(sum, shared);
    if (!active) return;
#pragma unroll
    for (int k = 0; k < kRowPerThread; ++k) g[k] = a.log ? g[k] - exp(y[k]) * sum : y[k] * (g[k] - sum);
    StoreRow<kVec>(static_cast<O*>(a.out) + r * a.n, a.n, g);
  });
}

}  // namespace kiln

// kiln_softmax_{forward,backward}_<in>_<out>, and _vec for rows whose length is a multiple of
// VecWidth<in>;
// at most kThreads threads a block, so each thread's registers stay within what a full block allows.
#define KILN_SOFTMAX_KERNELS(T, TS, O, OS, kThreads)                                                                  \
  extern "C" __global__ void __launch_bounds__(kThreads) kiln_softmax_forward_##TS##_##OS(kiln::SoftmaxArgs a) {      \
    kiln::SoftmaxForward<T, O, 1>(a);                                                                                 \
  }                                                                                                                   \
  extern "C" __global__ void __launch_bounds__(kThreads) kiln_softmax_forward_##TS##_##OS##_vec(kiln::SoftmaxArgs a) {\
    kiln::SoftmaxForward<T, O, kiln::VecWidth<T>()>(a);                                                               \
  }                                                                                                                   \
  extern "C" __global__ void __launch_bounds__(kThreads) kiln_softmax_backward_##TS##_##OS(kiln::SoftmaxArgs a) {     \
    kiln::SoftmaxBackward<T, O, 1>(a);                                                                                \
  }                                                                                                                   \
  extern "C" __global__ void __launch_bounds__(kThreads) kiln_softmax_backward_##TS##_##OS##_vec(kiln::SoftmaxArgs a) {\
    kiln::SoftmaxBackward<T, O, kiln::VecWidth<T>()>(a);                                                              \
  }
KILN_SOFTMAX_KERNELS(float, f32, float, f32, 1024)
KILN_SOFTMAX_KERNELS(double, f64, double, f64, 512)  // kRowMaxThreads64
KILN_SOFTMAX_KERNELS(__half, f16, __half, f16, 1024)
KILN_SOFTMAX_KERNELS(__nv_bfloat16, bf16, __nv_bfloat16, bf16, 1024)
KILN_SOFTMAX_KERNELS(__half, f16, float, f32, 1024)          // half_to_float
KILN_SOFTMAX_KERNELS(__nv_bfloat16, bf16, float, f32, 1024)  // half_to_float
KILN_SOFTMAX_KERNELS(float, f32, __half, f16, 1024)          // the backward of half_to_float
KILN_SOFTMAX_KERNELS(float, f32, __nv_bfloat16, bf16, 1024)
