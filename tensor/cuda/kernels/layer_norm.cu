// tensor/cuda/kernels/layer_norm.cu: layer_norm over rows of up to 8192 contiguous elements
// (float64: 4096), forward and grad_input, each reading its inputs once with the row held in
// registers (rows.cuh). As the generated kernels of tensor/ops/norm_cuda.cc compute them, in the
// opmath type: mean = sum / n, rstd = 1 / sqrt(max(sum((x - mean)^2) / n, 0) + eps), y = (x - mean)
// * rstd * w + b; grad_input = rstd * (g*w - (mean(g*w) + xh * mean(g*w * xh))), xh = (x - mean) *
// rstd. The parameters' gradients (column sums) stay generated reductions.
#include "tensor/cuda/kernels/common.cuh"
#include "tensor/cuda/kernels/rows.cuh"

namespace kiln {

template <typename T, int kVec>
__device__ void LayerNormForward(const LayerNormArgs& a) {
  using M = opmath_t<T>;
  __shared__ M shared[32 * 32];
  const M inv_n = M(1) / static_cast<M>(a.n);
  ForEachRow(a.rows, [&](int64_t r, bool active) {  // inactive rows take part in the reductions
    M v[kRowPerThread], w[kRowPerThread], b[kRowPerThread];
    LoadRow<kVec>(static_cast<const T*>(a.x) + (active ? r : 0) * a.n, a.n, active, M(0), v);
    M sum = M(0);
#pragma unroll
    for (int k = 0; k < kRowPerThread; ++k) sum += v[k];
    const M mean = RowReduce<false>(sum, shared) * inv_n;
    M sq = M(0);
#pragma unroll
    for (int k = 0; k < kRowPerThread; ++k) {
      v[k] -= mean;
      if (InRow<kVec>(k, a.n)) sq += v[k] * v[k];
    }
    const M var = RowReduce<false>(sq, shared) * inv_n;
    const M rstd = M(1) / sqrt((var > M(0) ? var : M(0)) + static_cast<M>(a.eps));
    if (!active) return;
    if (threadIdx.x == 0) {
      static_cast<M*>(a.mean)[r] = mean;
      static_cast<M*>(a.rstd)[r] = rstd;
    }
    if (a.weight) LoadRow<kVec>(static_cast<const T*>(a.weight), a.n, true, M(1), w);
    if (a.bias) LoadRow<kVec>(static_cast<const T*>(a.bias), a.n, true, M(0), b);
#pragma unroll
    for (int k = 0; k < kRowPerThread; ++k) {
      v[k] *= rstd;
      if (a.weight) v[k] *= w[k];
      if (a.bias) v[k] += b[k];
    }
    StoreRow<kVec>(static_cast<T*>(a.out) + r * a.n, a.n, v);
  });
}

template <typename T, int kVec>
__device__ void LayerNormBackward(const LayerNormArgs& a) {
  using M = opmath_t<T>;
  __shared__ M shared[32 * 32];
  const M inv_n = M(1) / static_cast<M>(a.n);
  ForEachRow(a.rows, [&](int64_t r, bool active) {  // inactive rows take part in the reductions
    const int64_t at = active ? r : 0;
    const M mean = static_cast<const M*>(a.mean)[at], rstd = static_cast<const M*>(a.rstd)[at];
    M gw[kRowPerThread], xh[kRowPerThread];
    LoadRow<kVec>(static_cast<const T*>(a.g) + at * a.n, a.n, active, M(0), gw);
    LoadRow<kVec>(static_cast<const T*>(a.x) + at * a.n, a.n, active, M(0), xh);
    if (a.weight) {
      M w[kRowPerThread];
      LoadRow<kVec>(static_cast<const T*>(a.weight), a.n, true, M(0), w);
#pragma unroll
      for (int k = 0; k < kRowPerThread; ++k) gw[k] *= w[k];
    }
    M sum_gw = M(0), sum_dot = M(0);
#pragma unroll
    for (int k = 0; k < kRowPerThread; ++k) {
      xh[k] = (xh[k] - mean) * rstd;
      sum_gw += gw[k];
      sum_dot += gw[k] * xh[k];  // 0 outside the row: gw is 0 there
    }
    const M mean_gw = RowReduce<false>(sum_gw, shared) * inv_n;
    const M mean_dot = RowReduce<false>(sum_dot, shared) * inv_n;
    if (!active) return;
#pragma unroll
    for (int k = 0; k < kRowPerThread; ++k) gw[k] = rstd * (gw[k] - (mean_gw + xh[k] * mean_dot));
    StoreRow<kVec>(static_cast<T*>(a.out) + r * a.n, a.n, gw);
  });
}

}  // namespace kiln

// kiln_layer_norm_{forward,backward}_<dtype>, and _vec for rows whose length is a multiple of
// VecWidth<dtype>; at most kThreads threads a block.
#define KILN_LAYER_NORM_KERNELS(T, S, kThreads)                                                                    \
  extern "C" __global__ void __launch_bounds__(kThreads) kiln_layer_norm_forward_##S(kiln::LayerNormArgs a) {      \
    kiln::LayerNormForward<T, 1>(a);                                                                               \
  }                                                                                                                \
  extern "C" __global__ void __launch_bounds__(kThreads) kiln_layer_norm_forward_##S##_vec(kiln::LayerNormArgs a) { \
    kiln::LayerNormForward<T, kiln::VecWidth<T>()>(a);                                                             \
  }                                                                                                                \
  extern "C" __global__ void __launch_bounds__(kThreads) kiln_layer_norm_backward_##S(kiln::LayerNormArgs a) {     \
    kiln::LayerNormBackward<T, 1>(a);                                                                              \
  }                                                                                                                \
  extern "C" __global__ void __launch_bounds__(kThreads) kiln_layer_norm_backward_##S##_vec(kiln::LayerNormArgs a) { \
    kiln::LayerNormBackward<T, kiln::VecWidth<T>()>(a);                                                            \
  }
KILN_LAYER_NORM_KERNELS(float, f32, 1024)
KILN_LAYER_NORM_KERNELS(double, f64, 512)
KILN_LAYER_NORM_KERNELS(__half, f16, 1024)
KILN_LAYER_NORM_KERNELS(__nv_bfloat16, bf16, 1024)
