// tensor/cuda/kernels/loss.cu: nll_loss_forward, reading each sample's target class: x [B, C] (any
// strides), target [B] (int64 or uint8), weight [C] or none. Unreduced, a thread per sample writes
// -w[t] * x[i, t] (0 for ignore_index); reduced, one block sums the losses and the weights in the
// accumulator type (float; double for float64) in a fixed order, so the result is deterministic, and
// thread 0 writes the sum or the mean and total_weight. A target outside [0, C) that is not
// ignore_index is reported through the device's error word (runtime/cuda/device_errors.h).
#include "tensor/cuda/kernels/common.cuh"
#include "tensor/cuda/kernels/loss_args.h"

namespace kiln {

template <typename T, typename Target>
__device__ void NllLoss(const NllArgs& a) {
  using Acc = opmath_t<T>;
  const T* x = static_cast<const T*>(a.x);
  const Target* target = static_cast<const Target*>(a.target);
  const T* w = static_cast<const T*>(a.weight);
  T* out = static_cast<T*>(a.out);
  // sample i's (loss, weight); (0, 0) when ignored or out of range
  auto sample = [&](int64_t i, Acc* weight) -> Acc {
    const int64_t t = static_cast<int64_t>(target[i * a.target_stride]);
    *weight = Acc(0);
    if (t == a.ignore_index) return Acc(0);
    if (t < 0 || t >= a.classes) {
      ReportDeviceError(a.error_word, a.error_code, t);
      return Acc(0);
    }
    *weight = w != nullptr ? Cast<Acc>(w[t]) : Acc(1);
    return -Cast<Acc>(x[i * a.x_batch_stride + t * a.x_class_stride]) * *weight;
  };
  if (a.reduction == 0) {
    KILN_GRID_STRIDE_LOOP(i, a.batch) {
      Acc weight;
      out[i * a.out_stride] = Cast<T>(sample(i, &weight));
    }
    return;
  }
  __shared__ Acc losses[kNllThreads], weights[kNllThreads];
  Acc loss = 0, weight_sum = 0;
  for (int64_t i = threadIdx.x; i < a.batch; i += blockDim.x) {
    Acc weight;
    loss += sample(i, &weight);
    weight_sum += weight;
  }
  losses[threadIdx.x] = loss;
  weights[threadIdx.x] = weight_sum;
  __syncthreads();
  for (int half = kNllThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      losses[threadIdx.x] += losses[threadIdx.x + half];
      weights[threadIdx.x] += weights[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    out[0] = Cast<T>(a.reduction == 1 ? losses[0] / weights[0] : losses[0]);  // all ignored: 0 / 0 = nan
    if (a.total_weight != nullptr) static_cast<T*>(a.total_weight)[0] = Cast<T>(weights[0]);
  }
}

}  // namespace kiln

#define KILN_NLL(T, S)                                                                                 \
  extern "C" __global__ void kiln_nll_loss_##S##_i64(const kiln::NllArgs a) { kiln::NllLoss<T, int64_t>(a); } \
  extern "C" __global__ void kiln_nll_loss_##S##_u8(const kiln::NllArgs a) { kiln::NllLoss<T, uint8_t>(a); }
KILN_FOR_EACH_FLOATING(KILN_NLL)
