// tensor/cuda/multi_tensor.h: optimizer steps over many tensors in few launches (PyTorch's
// multi_tensor_apply; tensor/cuda/kernels/optim.cu), for kiln.optim's default path on CUDA.
#pragma once

#include <vector>

#include "tensor/tensor_impl.h"

namespace kiln::cuda {

struct AdamHyper {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled;  // AdamW: p *= 1 - lr * weight_decay; Adam: grad += weight_decay * p
  bool maximize;
};

// One Adam/AdamW step of every params[i] (its grads[i], exp_avgs[i], exp_avg_sqs[i] and, with
// amsgrad, max_exp_avg_sqs[i]; empty without), with per-tensor step_sizes[i] = lr / (1 - beta1^step)
// and bias_correction2_sqrts[i] = sqrt(1 - beta2^step). All tensors contiguous, of one floating dtype,
// on one CUDA device, each index's of one size: ValueError otherwise (the caller then takes the
// single-tensor path).
void MultiTensorAdam(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                     const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                     const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<double>& step_sizes,
                     const std::vector<double>& bias_correction2_sqrts, const AdamHyper& h);

struct SgdHyper {
  double lr, momentum, dampening, weight_decay;
  bool nesterov, maximize;
};

// One SGD step of every params[i] with grads[i] and, with momentum, momentum_buffers[i] (empty
// without); first[i]: the buffer is new and starts as the gradient. Checks as MultiTensorAdam's.
void MultiTensorSgd(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                    const std::vector<Tensor>& momentum_buffers, const std::vector<bool>& first, const SgdHyper& h);

// clip_grad_norm_ (norm 2) over `grads` (contiguous, of one floating dtype, on one CUDA device;
// ValueError otherwise): GradNorm returns their joint 2-norm as a 0-d float tensor (double for
// float64), from per-chunk sums of squares; ClipGradsByNorm multiplies each by
// min(max_norm / (total_norm + 1e-6), 1), computed on the device (no synchronisation).
Tensor GradNorm(const std::vector<Tensor>& grads);
void ClipGradsByNorm(const std::vector<Tensor>& grads, const Tensor& total_norm, double max_norm);

}  // namespace kiln::cuda
