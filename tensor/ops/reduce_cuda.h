// tensor/ops/reduce_cuda.h: the reduction families' CUDA kernels (reduce_cuda.cc), called by each
// op's implementation after its checks and output allocation, as binary.cc calls BinaryCUDA:
// each op is defined once and runs on either device.
#pragma once

#include <vector>

#include "tensor/tensor_impl.h"

namespace kiln {

// out = sum(input over mask) * scale (scale != 1: a mean), accumulated in float for 16-bit
// floats and float32, in double for float64, in int64 for integers and bool (PyTorch's CUDA acc
// types; complex as their (real, imag) halves). `input` is already in the dtype the op sums.
void SumCUDA(const Tensor& input, const std::vector<bool>& mask, const Tensor& out, double scale);
// var (std when take_sqrt) and, when non-null, mean over mask: the mean, then the centred squares
// sum / max(N - correction, 0), two passes in the accumulator's type; var and mean are the ops' own.
void VarMeanCUDA(const Tensor& input, const std::vector<bool>& mask, double correction, bool take_sqrt,
                 const Tensor& var, const Tensor* mean);
// out = the product, accumulated as SumCUDA accumulates.
void ProdCUDA(const Tensor& input, const std::vector<bool>& mask, const Tensor& out);
// values / indices (either may be null) = the largest (smallest) element over mask and its index
// in the row-major order of the reduced dims; NaN propagates, ties report the first index.
void MinMaxCUDA(bool max, const Tensor& input, const std::vector<bool>& mask, const Tensor* values,
                const Tensor* indices);
// out = the ord-p vector norm over mask: max |x| (inf), min |x| (-inf), the count of nonzeros (0),
// sum |x| (1), sqrt(sum x^2) (2), else (sum |x|^p)^(1/p); in float (double for float64).
void VectorNormCUDA(const Tensor& input, double p, const std::vector<bool>& mask, const Tensor& out);
// out = whether any (all) elements over mask are nonzero, or (count) how many are.
enum class LogicalReduce { kAny, kAll, kCount };
void LogicalCUDA(LogicalReduce kind, const Tensor& input, const std::vector<bool>& mask, const Tensor& out);

// softmax / log_softmax of `input` over `dim` into out (same shape; out's dtype may be float32 for a
// float16 input): the row's max and sum of exp(x - max) as reductions in float (double for
// float64), then one pointwise kernel, with PyTorch's CUDA epilogues: exp(x - max) / sum and
// x - (max + log(sum)).
void SoftmaxCUDA(bool log, const Tensor& input, int64_t dim, const Tensor& out);
// Their backward: softmax y * (g - sum(g * y)), log_softmax g - exp(y) * sum(g), over `dim`.
void SoftmaxBackwardCUDA(bool log, const Tensor& grad, const Tensor& output, int64_t dim, const Tensor& out);

// native_layer_norm (norm_cuda.cc) over the last `normalized_dims` dims of `input`: the row's mean, then its
// centred sum of squares (two passes, in float; double for float64), rstd = 1 / sqrt(max(var, 0) +
// eps), then y = (x - mean) * rstd * w + b in one pointwise kernel. out, mean and rstd are the op's
// (mean/rstd of the meta's dtype, [*, 1, ...]); weight and bias may be null.
void LayerNormCUDA(const Tensor& input, int64_t normalized_dims, const Tensor* weight, const Tensor* bias, double eps,
                   const Tensor& out, const Tensor& mean, const Tensor& rstd);
// Its backward, for the outputs that are non-null: with xh = (x - mean) * rstd and gw = g * w,
// grad_input = rstd * (gw - (sum(gw) + xh * sum(gw * xh)) / N) (two row means, then a pointwise
// kernel), grad_weight = the column sum of g * xh, grad_bias the column sum of g.
void LayerNormBackwardCUDA(const Tensor& grad, const Tensor& input, int64_t normalized_dims, const Tensor& mean,
                           const Tensor& rstd, const Tensor* weight, const Tensor* grad_input, const Tensor* grad_weight,
                           const Tensor* grad_bias);

// native_batch_norm (norm_cuda.cc): training, the per-channel mean into save_mean and 1 / sqrt(var +
// eps) into save_invstd (the biased variance from the centred squares, two passes, in float; double
// for float64), and the running statistics (either may be null) moved toward the mean and the
// unbiased variance by `momentum`; evaluation, the running statistics. Then y = (x - mean) * invstd *
// w + b in one pointwise kernel. weight and bias may be null.
void BatchNormCUDA(const Tensor& input, const Tensor* weight, const Tensor* bias, const Tensor* running_mean,
                   const Tensor* running_var, bool training, double momentum, double eps, const Tensor& out,
                   const Tensor& save_mean, const Tensor& save_invstd);
// Its backward for the outputs that are non-null, from the saved mean and invstd (train) or the
// running mean and variance (eval): sum(g) and sum(g * (x - mean)) per channel, then grad_input in one
// pointwise kernel (train: (g - sum(g) / n - (x - mean) * invstd^2 * sum(g * (x - mean)) / n) *
// invstd * w; eval: g * invstd * w), grad_weight = sum(g * (x - mean)) * invstd, grad_bias = sum(g).
void BatchNormBackwardCUDA(const Tensor& grad, const Tensor& input, const Tensor* weight, const Tensor& mean,
                           const Tensor& invstd_or_var, bool train, double eps, const Tensor* grad_input,
                           const Tensor* grad_weight, const Tensor* grad_bias);

// native_group_norm (norm_cuda.cc) of input [N, C, *] (HxW elements a channel) in `group` groups:
// mean and rstd [N, group] of each group's C / group * HxW elements, as layer_norm's, then y = (x -
// mean) * rstd * w + b per channel in one pointwise kernel. weight and bias may be null.
void GroupNormCUDA(const Tensor& input, const Tensor* weight, const Tensor* bias, int64_t N, int64_t C, int64_t HxW,
                   int64_t group, double eps, const Tensor& out, const Tensor& mean, const Tensor& rstd);
// Its backward for the outputs that are non-null, layer_norm's over each group with w per channel:
// grad_input = rstd * (g * w - mean(g * w) - xh * mean(g * w * xh)), grad_weight = sum(g * xh) and
// grad_bias = sum(g) over all but the channel.
void GroupNormBackwardCUDA(const Tensor& grad, const Tensor& input, const Tensor& mean, const Tensor& rstd,
                           const Tensor* weight, int64_t N, int64_t C, int64_t HxW, int64_t group,
                           const Tensor* grad_input, const Tensor* grad_weight, const Tensor* grad_bias);

// nll_loss_forward for x [B, C] (or [C] with a 0-d target) and target [B]: out is [B] (reduction
// none) or 0-d, total_weight 0-d (the summed weights of the counted targets; 0 for none): one launch of
// tensor/cuda/kernels/loss.cu. A target outside [0, C) that is not ignore_index raises IndexError at
// the next synchronisation (Note [Device-side errors]; PyTorch's CUDA kernel asserts on the device).
void NllLossForwardCUDA(const Tensor& x, const Tensor& target, const Tensor* weight, int64_t reduction,
                        int64_t ignore_index, const Tensor& out, const Tensor& total_weight);
// grad_input [B, C] (or [C]) = -w[t] * g (g per sample for none; g / total_weight for a mean) at
// each sample's target class, 0 elsewhere.
void NllLossBackwardCUDA(const Tensor& grad, const Tensor& target, const Tensor* weight, int64_t reduction,
                         int64_t ignore_index, const Tensor& total_weight, const Tensor& grad_input);

}  // namespace kiln
