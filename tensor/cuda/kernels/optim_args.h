// tensor/cuda/kernels/optim_args.h: the parameter block of the multi-tensor optimizer kernels
// (optim.cu), shared with the host code that fills it (tensor/ops/optim_cuda.cc). Plain data: the
// same layout on both sides, passed by value (its size stays inside the 4 KB of kernel parameters).
#pragma once

#include <stdint.h>

namespace kiln {

constexpr int kAdamTensors = 24;    // tensors one launch updates
constexpr int kAdamChunks = 320;    // chunks (= blocks) one launch runs
constexpr int kAdamChunk = 65536;   // elements a block updates
constexpr int kAdamThreads = 512;

struct AdamLaunch {
  void* param[kAdamTensors];
  void* grad[kAdamTensors];
  void* exp_avg[kAdamTensors];
  void* exp_avg_sq[kAdamTensors];
  void* max_exp_avg_sq[kAdamTensors];  // null without amsgrad
  int64_t numel[kAdamTensors];
  double step_size[kAdamTensors];              // lr / (1 - beta1^step), per tensor (its own step)
  double bias_correction2_sqrt[kAdamTensors];  // sqrt(1 - beta2^step)
  double lr, beta1, beta2, eps, weight_decay;
  int32_t chunk_index[kAdamChunks];  // chunk b covers elements [i * kAdamChunk, ...) of tensor chunk_tensor[b]
  uint8_t chunk_tensor[kAdamChunks];
  uint8_t decoupled, maximize;
};
static_assert(sizeof(AdamLaunch) <= 4096, "a kernel's parameters must fit in 4 KB");

// The SGD step (optim.cu: kiln_sgd_*), as AdamLaunch's packing: momentum_buffer[t] is null without
// momentum; first[t] says the buffer starts as the (decayed) gradient, as the single-tensor step's
// clone on its first step.
struct SgdLaunch {
  void* param[kAdamTensors];
  void* grad[kAdamTensors];
  void* momentum_buffer[kAdamTensors];
  int64_t numel[kAdamTensors];
  uint8_t first[kAdamTensors];
  double lr, momentum, dampening, weight_decay;
  int32_t chunk_index[kAdamChunks];
  uint8_t chunk_tensor[kAdamChunks];
  uint8_t nesterov, maximize;
};
static_assert(sizeof(SgdLaunch) <= 4096, "a kernel's parameters must fit in 4 KB");

// The gradient-clipping kernels (optim.cu: kiln_sum_squares_*, kiln_clip_scale_*) over one list of
// tensors: chunk b of a launch writes its sum of squares to partials[first_partial + b]; the scale
// kernel multiplies by min(max_norm / (*total_norm + 1e-6), 1), read on the device.
constexpr int kListTensors = 96;

struct ListLaunch {
  void* data[kListTensors];
  int64_t numel[kListTensors];
  int32_t chunk_index[kAdamChunks];
  uint8_t chunk_tensor[kAdamChunks];
  void* partials;           // float (double for float64) per chunk, over all launches
  int64_t first_partial;
  const void* total_norm;   // the scale kernel's: a 0-d tensor of the partials' dtype
  double max_norm;
};
static_assert(sizeof(ListLaunch) <= 4096, "a kernel's parameters must fit in 4 KB");

}  // namespace kiln
