// tensor/ops/loss_cuda.h: the pointwise losses' element functions on CUDA (loss_cuda.cc), called by
// loss.cc / loss_backward.cc after their checks, with operands already in the computing dtype.
#pragma once

#include "tensor/tensor_impl.h"

namespace kiln {

// The kinds, numbered as loss.cc's and loss_backward.cc's.
enum class PwLoss : int { kMse, kSmoothL1, kHuber };

// loss = mse (d * d), smooth_l1 (|d| < beta ? 0.5 * |d| * |d| / beta : |d| - 0.5 * beta) or huber
// (|d| < delta ? 0.5 * |d| * |d| : delta * (|d| - 0.5 * delta)) of d = x - y, as PyTorch's CUDA
// kernels compute them: on the dtype, so each step of a 16-bit loss rounds; the parameter read as
// the dtype.
void PointwiseLossCUDA(PwLoss kind, const Tensor& loss, const Tensor& x, const Tensor& y, double param);
// Their gradients: mse norm * d * g; smooth_l1 d < -beta ? -norm * g : d > beta ? norm * g :
// norm * d * g / beta; huber d < -delta ? -norm * g * delta : d > delta ? norm * g * delta :
// norm * d * g (norm = 2 / N, 2, 1 / N or 1).
void PointwiseLossBackwardCUDA(PwLoss kind, const Tensor& out, const Tensor& x, const Tensor& y,
                               const Tensor& g, double norm, double param);

// binary_cross_entropy: -w * (y * max(log x, -100) + (1 - y) * max(log1p(-x), -100)); an input
// outside [0, 1] raises RuntimeError (checked on the host: one synchronisation). With logits:
// ((1 - y) * x - ((pw - 1) * y + 1) * log_sigmoid(x)) * w. weight and pos_weight may be null.
void BceCUDA(bool logits, const Tensor& loss, const Tensor& x, const Tensor& y, const Tensor* weight,
             const Tensor* pos_weight);
// binary_cross_entropy_backward: g * (x - y) / max((1 - x) * x, 1e-12) * w * scale.
void BceBackwardCUDA(const Tensor& out, const Tensor& g, const Tensor& x, const Tensor& y, const Tensor* weight,
                     double scale);

}  // namespace kiln
