// tensor/cuda/kernels/optim.cu: the Adam/AdamW and SGD steps over many tensors in one launch (PyTorch's
// multi_tensor_apply): a launch carries up to kAdamTensors tensors and kAdamChunks chunks of
// kAdamChunk elements in its parameter block (by value, inside the 4 KB a kernel's parameters may
// take), and block b updates chunk b. Each element does what the single-tensor step does (python/kiln/
// optim/adam.py), in the opmath type (float for 16-bit floats): weight decay, the moments' lerp and
// update, the bias-corrected denominator, the parameter's addcdiv; each stored tensor is rounded once.
// SGD's likewise (python/kiln/optim/sgd.py): weight decay, the momentum buffer, Nesterov, the update,
// each intermediate the single-tensor step stores rounded to the parameter's dtype.
// Also clip_grad_norm_'s two passes over the gradients (sum of squares per chunk, then the scale).
#include "tensor/cuda/kernels/common.cuh"
#include "tensor/cuda/kernels/optim_args.h"

namespace kiln {

// PyTorch's lerp: exact at both ends of the weight.
template <typename M>
__device__ __forceinline__ M Lerp(M a, M b, M w) {
  return w < M(0.5) ? a + w * (b - a) : b - (b - a) * (M(1) - w);
}

template <typename T>
__device__ void AdamStep(const AdamLaunch& l) {
  using M = opmath_t<T>;
  const int t = l.chunk_tensor[blockIdx.x];
  const int64_t begin = int64_t(l.chunk_index[blockIdx.x]) * kAdamChunk;
  const int64_t end = begin + kAdamChunk < l.numel[t] ? begin + kAdamChunk : l.numel[t];
  T* p = static_cast<T*>(l.param[t]);
  const T* g = static_cast<const T*>(l.grad[t]);
  T* m = static_cast<T*>(l.exp_avg[t]);
  T* v = static_cast<T*>(l.exp_avg_sq[t]);
  T* vmax = static_cast<T*>(l.max_exp_avg_sq[t]);
  const M lr = static_cast<M>(l.lr), wd = static_cast<M>(l.weight_decay), b1 = static_cast<M>(1 - l.beta1),
          beta2 = static_cast<M>(l.beta2), b2 = static_cast<M>(1 - l.beta2), eps = static_cast<M>(l.eps);
  const M step_size = static_cast<M>(l.step_size[t]), bc2_sqrt = static_cast<M>(l.bias_correction2_sqrt[t]);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    M grad = Cast<M>(g[i]);
    if (l.maximize) grad = -grad;
    M param = Cast<M>(p[i]);
    if (wd != M(0)) {
      if (l.decoupled) param = Cast<M>(Cast<T>(param * (M(1) - lr * wd)));
      else grad = fma(wd, param, grad);  // grad.add(p, alpha=wd): fused, as PyTorch's CPU and CUDA kernels
    }
    const M avg = Cast<M>(Cast<T>(Lerp(Cast<M>(m[i]), grad, b1)));
    const M avg_sq = Cast<M>(Cast<T>(Cast<M>(Cast<T>(Cast<M>(v[i]) * beta2)) + b2 * grad * grad));
    m[i] = Cast<T>(avg);
    v[i] = Cast<T>(avg_sq);
    M second = avg_sq;
    if (vmax != nullptr) {
      const M old = Cast<M>(vmax[i]);
      second = old > avg_sq ? old : avg_sq;
      vmax[i] = Cast<T>(second);
    }
    const M denom = sqrt(second) / bc2_sqrt + eps;
    p[i] = Cast<T>(param - step_size * (avg / denom));
  }
}

template <typename T>
__device__ void SgdStep(const SgdLaunch& l) {
  using M = opmath_t<T>;
  const int t = l.chunk_tensor[blockIdx.x];
  const int64_t begin = int64_t(l.chunk_index[blockIdx.x]) * kAdamChunk;
  const int64_t end = begin + kAdamChunk < l.numel[t] ? begin + kAdamChunk : l.numel[t];
  T* p = static_cast<T*>(l.param[t]);
  const T* g = static_cast<const T*>(l.grad[t]);
  T* buf = static_cast<T*>(l.momentum_buffer[t]);
  const bool first = l.first[t] != 0;
  const M lr = static_cast<M>(l.lr), wd = static_cast<M>(l.weight_decay), momentum = static_cast<M>(l.momentum),
          keep = static_cast<M>(1 - l.dampening);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    M grad = Cast<M>(g[i]);
    if (l.maximize) grad = -grad;
    const M param = Cast<M>(p[i]);
    if (wd != M(0)) grad = Cast<M>(Cast<T>(fma(wd, param, grad)));  // grad.add(p, alpha=wd), fused as Adam's
    if (buf != nullptr) {
      // buf.mul_(momentum).add_(grad, alpha=1 - dampening), or grad itself on the first step
      const M b = first ? grad : Cast<M>(Cast<T>(fma(keep, grad, Cast<M>(Cast<T>(Cast<M>(buf[i]) * momentum)))));
      buf[i] = Cast<T>(b);
      grad = l.nesterov ? Cast<M>(Cast<T>(fma(momentum, b, grad))) : b;
    }
    p[i] = Cast<T>(fma(-lr, grad, param));  // p.add_(grad, alpha=-lr)
  }
}

// Chunk b's sum of squares, in the accumulator type, by a block tree (deterministic).
template <typename T>
__device__ void SumSquares(const ListLaunch& l) {
  using Acc = opmath_t<T>;
  __shared__ Acc part[kAdamThreads];
  const int t = l.chunk_tensor[blockIdx.x];
  const int64_t begin = int64_t(l.chunk_index[blockIdx.x]) * kAdamChunk;
  const int64_t end = begin + kAdamChunk < l.numel[t] ? begin + kAdamChunk : l.numel[t];
  const T* x = static_cast<const T*>(l.data[t]);
  Acc sum = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const Acc v = Cast<Acc>(x[i]);
    sum += v * v;
  }
  part[threadIdx.x] = sum;
  __syncthreads();
  for (int half = kAdamThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) static_cast<Acc*>(l.partials)[l.first_partial + blockIdx.x] = part[0];
}

// x *= min(max_norm / (total_norm + 1e-6), 1): clip_grad_norm_'s scale, the coefficient rounded to
// the gradient's dtype as kiln's (and PyTorch's) clip_coef_clamped.to(g.dtype).
template <typename T>
__device__ void ClipScale(const ListLaunch& l) {
  using Acc = opmath_t<T>;
  const Acc total = *static_cast<const Acc*>(l.total_norm);
  const Acc coef = static_cast<Acc>(l.max_norm) / (total + static_cast<Acc>(1e-6));
  const Acc scale = Cast<Acc>(Cast<T>(coef < Acc(1) ? coef : Acc(1)));
  const int t = l.chunk_tensor[blockIdx.x];
  const int64_t begin = int64_t(l.chunk_index[blockIdx.x]) * kAdamChunk;
  const int64_t end = begin + kAdamChunk < l.numel[t] ? begin + kAdamChunk : l.numel[t];
  T* x = static_cast<T*>(l.data[t]);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) x[i] = Cast<T>(Cast<Acc>(x[i]) * scale);
}

}  // namespace kiln

#define KILN_LIST(T, S)                                                                                 \
  extern "C" __global__ void kiln_sum_squares_##S(const kiln::ListLaunch l) { kiln::SumSquares<T>(l); } \
  extern "C" __global__ void kiln_clip_scale_##S(const kiln::ListLaunch l) { kiln::ClipScale<T>(l); }
KILN_LIST(float, f32)
KILN_LIST(double, f64)
KILN_LIST(__half, f16)
KILN_LIST(__nv_bfloat16, bf16)

#define KILN_STEPS(T, S)                                                                          \
  extern "C" __global__ void kiln_adam_##S(const kiln::AdamLaunch l) { kiln::AdamStep<T>(l); } \
  extern "C" __global__ void kiln_sgd_##S(const kiln::SgdLaunch l) { kiln::SgdStep<T>(l); }
KILN_STEPS(float, f32)
KILN_STEPS(double, f64)
KILN_STEPS(__half, f16)
KILN_STEPS(__nv_bfloat16, bf16)
