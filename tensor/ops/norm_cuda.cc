// tensor/ops/norm_cuda.cc: layer_norm, batch_norm and group_norm (and their backward) on CUDA as generated
// kernels: the statistics as reductions in float (double for float64; tensor/cuda/reduce.h), two
// passes (the mean, then the centred squares), then one pointwise kernel that normalises, scales and
// shifts; layer_norm's rows that fit in registers take layer_norm.cu's one-pass kernels instead
// (Note [One-pass layer_norm]). Called by the ops in norm.cc / norm_backward.cc after their checks
// and allocation.
#include <cmath>
#include <functional>
#include <tuple>

#include "tensor/cuda/embedded_kernels.h"
#include "tensor/cuda/kernels/row_args.h"
#include "tensor/cuda/reduce.h"
#include "tensor/empty.h"
#include "tensor/ops/common.h"
#include "tensor/ops/reduce_cuda.h"

namespace kiln {

using codegen::DType;
using codegen::Expr;
using codegen::ReduceKind;
using IR = codegen::ExprPtr;

// --- layer_norm ----------------------------------------------------------------------------------

namespace {

// The mask over `t`'s last `n` dims (norm: true) or over the others (norm: false).
std::vector<bool> LastDims(const Tensor& t, int64_t n, bool norm) {
  std::vector<bool> mask(t.dim(), !norm);
  for (int64_t d = t.dim() - n; d < t.dim(); ++d) mask[d] = norm;
  return mask;
}

cuda::PointwiseInput AccNumber(double v, DType acc) { return cuda::PointwiseInput::Number(Scalar(v), cuda::AccScalarType(acc)); }

// `stat` (mean or rstd as the op returns it) from its value in the accumulator's type.
void Store(const Tensor& stat, const Tensor& value) {
  if (stat.is_same(value)) return;
  Tensor s = stat;
  ops::copy_(s, value);
}

// y * w + b for the normalisations' last step, in acc: w and b (either may be null; live tensors,
// broadcastable to the output) appended to the kernel's inputs.
IR Affine(IR y, const Tensor* w, const Tensor* b, std::vector<cuda::PointwiseInput>& inputs, DType acc) {
  if (w) {
    inputs.push_back(cuda::PointwiseInput::Of(*w));
    y = Expr::Op(codegen::OpCode::kMul, {y, Expr::Cast(cuda::Input(static_cast<int>(inputs.size()) - 1), acc)});
  }
  if (b) {
    inputs.push_back(cuda::PointwiseInput::Of(*b));
    y = Expr::Op(codegen::OpCode::kAdd, {y, Expr::Cast(cuda::Input(static_cast<int>(inputs.size()) - 1), acc)});
  }
  return y;
}

// The per-element terms of layer_norm's and group_norm's backward, in acc: {g, g * w, xh = (x - mean)
// * rstd}, `in(i)` reading input i of 0 grad, 1 x, 2 mean, 3 rstd, 4 weight (when has_weight) — as a
// pointwise kernel's input or a reduction's load.
std::tuple<IR, IR, IR> BackwardTerms(const std::function<IR(int)>& in, bool has_weight, DType acc) {
  IR g = Expr::Cast(in(0), acc);
  IR xh = Expr::Op(codegen::OpCode::kMul, {Expr::Op(codegen::OpCode::kSub, {Expr::Cast(in(1), acc), Expr::Cast(in(2), acc)}),
                                           Expr::Cast(in(3), acc)});
  IR gw = has_weight ? Expr::Op(codegen::OpCode::kMul, {g, Expr::Cast(in(4), acc)}) : g;
  return std::make_tuple(g, gw, xh);
}

// Note [One-pass layer_norm]: rows of up to 8192 elements (4096 for float64) of contiguous tensors,
// with parameters of the input's dtype and statistics of the accumulator's, run layer_norm.cu's
// kernels, which hold each row in registers and so read it once (forward and grad_input); the rest
// take the generated reductions below.
bool OnePassLayerNorm(const Tensor& input, int64_t n, const std::vector<const Tensor*>& tensors,
                      const std::vector<const Tensor*>& params, const std::vector<const Tensor*>& stats, DType acc) {
  if (!cuda::RowKernelFits(input.dtype(), n)) return false;
  for (const Tensor* t : tensors) {
    if (!t->is_contiguous() || t->dtype() != input.dtype()) return false;
  }
  for (const Tensor* t : params) {
    if (t && (!t->is_contiguous() || t->dtype() != input.dtype())) return false;
  }
  for (const Tensor* t : stats) {
    if (!t->is_contiguous() || t->dtype() != cuda::AccScalarType(acc)) return false;
  }
  return true;
}

void LaunchOnePassLayerNorm(const char* kernel, LayerNormArgs& a, const Tensor& input,
                            const std::vector<const Tensor*>& rows) {
  const int device = input.device().index;
  const std::string name = StrCat("kiln_layer_norm_", kernel, "_", cuda::KernelSuffix(input.dtype()),
                                  cuda::RowKernelVectorizable(a.n, rows) ? "_vec" : "");
  std::vector<void*> args = {&a};
  cuda::LaunchRowKernel(cuda::EmbeddedKernel(cuda::LayerNormKernels(), device, name.c_str(), "layer_norm"), device, a.rows,
                   a.n, args);
}

const void* DataOrNull(const Tensor* t) { return t ? t->raw_data() : nullptr; }

}  // namespace

void LayerNormCUDA(const Tensor& input, int64_t normalized_dims, const Tensor* weight, const Tensor* bias, double eps,
                   const Tensor& out, const Tensor& mean, const Tensor& rstd) {
  const DType acc = cuda::AccumulatorOf(input.dtype(), "layer_norm");
  const DimVector shape = input.sizes();
  int64_t n = 1;
  for (int64_t d = input.dim() - normalized_dims; d < input.dim(); ++d) n *= shape[d];
  if (mean.numel() == 0) return;
  if (OnePassLayerNorm(input, n, {&input, &out}, {weight, bias}, {&mean, &rstd}, acc)) {  // Note [One-pass layer_norm]
    LayerNormArgs a{input.raw_data(), nullptr, DataOrNull(weight), DataOrNull(bias), out.raw_data(), mean.raw_data(),
                    rstd.raw_data(), input.numel() / n, n, eps};
    LaunchOnePassLayerNorm("forward", a, input, {&input, &out, weight, bias});
    return;
  }
  const DimVector keep = mean.sizes();
  // the statistics in the accumulator's type (the op's own outputs when they have it)
  Tensor mu = mean.dtype() == cuda::AccScalarType(acc) ? mean : EmptyTensor(keep, cuda::AccScalarType(acc), input.device());
  Tensor rs = rstd.dtype() == cuda::AccScalarType(acc) ? rstd : EmptyTensor(keep, cuda::AccScalarType(acc), input.device());
  if (n == 0) {  // an empty row: mean 0, rstd NaN (the CPU kernel's 0 / 0)
    Tensor m = mu, r = rs;
    ops::fill_(m, Scalar(0.0));
    ops::fill_(r, Scalar(std::nan("")));
  } else {
    const std::vector<bool> mask = LastDims(input, normalized_dims, true);
    SumCUDA(input, mask, mu, 1.0 / static_cast<double>(n));
    auto in = [&](int i) { return cuda::ReduceInput(i, ReduceKind::kSum); };
    IR centred = Expr::Op(codegen::OpCode::kSub, {Expr::Cast(in(0), acc), in(1)});
    IR var = Expr::Op(codegen::OpCode::kMul, {Expr::Acc(0), in(2)});
    IR floor0 = Expr::Op(codegen::OpCode::kMax, {var, Expr::Const(0.0, acc)});
    IR post = Expr::Op(codegen::OpCode::kDiv, {Expr::Const(1.0, acc), Expr::Op(codegen::OpCode::kSqrt, {Expr::Op(codegen::OpCode::kAdd, {floor0, in(3)})})});
    cuda::LaunchReduce(cuda::ReduceOp{"layer_norm_rstd", ReduceKind::kSum, acc, Expr::Op(codegen::OpCode::kMul, {centred, centred}), post},
                       rs, nullptr,
                       {cuda::PointwiseInput::Of(input), cuda::PointwiseInput::Of(mu), AccNumber(1.0 / static_cast<double>(n), acc),
                        AccNumber(eps, acc)},
                       shape, mask);
  }
  if (out.numel() > 0) {
    std::vector<cuda::PointwiseInput> inputs = {cuda::PointwiseInput::Of(input), cuda::PointwiseInput::Of(mu),
                                                cuda::PointwiseInput::Of(rs)};
    IR y = Expr::Op(codegen::OpCode::kMul, {Expr::Op(codegen::OpCode::kSub, {Expr::Cast(cuda::Input(0), acc), cuda::Input(1)}), cuda::Input(2)});
    y = Affine(y, weight, bias, inputs, acc);
    cuda::LaunchPointwise("layer_norm", out, inputs, y);
  }
  Store(mean, mu);
  Store(rstd, rs);
}

void LayerNormBackwardCUDA(const Tensor& grad, const Tensor& input, int64_t normalized_dims, const Tensor& mean,
                           const Tensor& rstd, const Tensor* weight, const Tensor* grad_input, const Tensor* grad_weight,
                           const Tensor* grad_bias) {
  const DType acc = cuda::AccumulatorOf(input.dtype(), "native_layer_norm_backward");
  const DimVector shape = input.sizes();
  int64_t n = 1;
  for (int64_t d = input.dim() - normalized_dims; d < input.dim(); ++d) n *= shape[d];
  // inputs of every kernel below: 0 grad, 1 x, 2 mean, 3 rstd, 4 weight (when there is one)
  std::vector<cuda::PointwiseInput> inputs = {cuda::PointwiseInput::Of(grad), cuda::PointwiseInput::Of(input),
                                              cuda::PointwiseInput::Of(mean), cuda::PointwiseInput::Of(rstd)};
  if (weight) inputs.push_back(cuda::PointwiseInput::Of(*weight));
  auto terms = [&](const std::function<IR(int)>& in) { return BackwardTerms(in, weight != nullptr, acc); };
  auto red = [](int i) { return cuda::ReduceInput(i, ReduceKind::kSum); };
  if (grad_input && grad_input->numel() > 0 &&
      OnePassLayerNorm(input, n, {&grad, &input, grad_input}, {weight}, {&mean, &rstd}, acc)) {  // Note [One-pass layer_norm]
    LayerNormArgs a{input.raw_data(), grad.raw_data(), DataOrNull(weight), nullptr, grad_input->raw_data(),
                    mean.raw_data(), rstd.raw_data(), input.numel() / n, n, 0.0};
    LaunchOnePassLayerNorm("backward", a, input, {&grad, &input, grad_input, weight});
  } else if (grad_input && grad_input->numel() > 0) {
    const std::vector<bool> rows = LastDims(input, normalized_dims, true);
    const DimVector keep = mean.sizes();
    auto [g, gw, xh] = terms(red);
    // the row means of gw and gw * xh (the reductions' inputs end with 1 / N)
    std::vector<cuda::PointwiseInput> with_n = inputs;
    with_n.push_back(AccNumber(1.0 / static_cast<double>(n), acc));
    IR mean_of = Expr::Op(codegen::OpCode::kMul, {Expr::Acc(0), red(static_cast<int>(with_n.size()) - 1)});
    auto row_mean = [&](const char* name, const IR& pre) {
      Tensor m = EmptyTensor(keep, cuda::AccScalarType(acc), input.device());
      cuda::LaunchReduce(cuda::ReduceOp{name, ReduceKind::kSum, acc, pre, mean_of}, m, nullptr, with_n, shape, rows);
      return m;
    };
    Tensor a = row_mean("layer_norm_backward_mean", gw);
    Tensor b = row_mean("layer_norm_backward_dot", Expr::Op(codegen::OpCode::kMul, {gw, xh}));
    std::vector<cuda::PointwiseInput> pw = inputs;
    const int ia = static_cast<int>(pw.size());
    pw.push_back(cuda::PointwiseInput::Of(a));
    pw.push_back(cuda::PointwiseInput::Of(b));
    auto [pg, pgw, pxh] = terms(cuda::Input);
    IR mean_terms = Expr::Op(codegen::OpCode::kAdd, {cuda::Input(ia), Expr::Op(codegen::OpCode::kMul, {pxh, cuda::Input(ia + 1)})});
    IR gi = Expr::Op(codegen::OpCode::kMul, {Expr::Cast(cuda::Input(3), acc), Expr::Op(codegen::OpCode::kSub, {pgw, mean_terms})});
    cuda::LaunchPointwise("layer_norm_backward", *grad_input, pw, gi);
  }
  const std::vector<bool> cols = LastDims(input, normalized_dims, false);
  if (grad_weight) {
    auto [g, gw, xh] = terms(red);
    cuda::LaunchReduce(cuda::ReduceOp{"layer_norm_backward_weight", ReduceKind::kSum, acc, Expr::Op(codegen::OpCode::kMul, {g, xh}),
                                      Expr::Acc(0)},
                       *grad_weight, nullptr, inputs, shape, cols);
  }
  if (grad_bias) {
    cuda::LaunchReduce(cuda::ReduceOp{"layer_norm_backward_bias", ReduceKind::kSum, acc, Expr::Cast(red(0), acc), Expr::Acc(0)},
                       *grad_bias, nullptr, {cuda::PointwiseInput::Of(grad)}, shape, cols);
  }
}

// --- batch_norm ----------------------------------------------------------------------------------

namespace {

// The mask over every dim but the channels (dim 1).
std::vector<bool> AllButChannels(const Tensor& t) {
  std::vector<bool> mask(t.dim(), true);
  mask[1] = false;
  return mask;
}

// A per-channel vector [C] as [1, C, 1, ...], broadcastable to `like`.
Tensor PerChannel(const Tensor& v, const Tensor& like) {
  std::vector<SymInt> shape(like.dim(), SymInt(1));
  shape[1] = SymInt(v.numel());
  return ops::view(v, shape);
}

// 1 / sqrt(var + eps) in acc.
IR InvStd(const IR& var, const IR& eps, DType acc) {
  return Expr::Op(codegen::OpCode::kDiv,
            {Expr::Const(1.0, acc), Expr::Op(codegen::OpCode::kSqrt, {Expr::Op(codegen::OpCode::kAdd, {Expr::Cast(var, acc), eps})})});
}

// stat = momentum * value * factor + (1 - momentum) * stat, in place, in acc.
void UpdateRunning(const char* name, const Tensor& stat, const Tensor& value, double momentum, double factor,
                   DType acc) {
  const IR scaled = Expr::Op(codegen::OpCode::kMul, {Expr::Op(codegen::OpCode::kMul, {Expr::Cast(cuda::Input(1), acc), cuda::Input(2)}),
                                              cuda::Input(3)});
  const IR kept = Expr::Op(codegen::OpCode::kMul, {Expr::Cast(cuda::Input(0), acc), cuda::Input(4)});
  cuda::LaunchPointwise(name, stat,
                        {cuda::PointwiseInput::Of(stat), cuda::PointwiseInput::Of(value), AccNumber(factor, acc),
                         AccNumber(momentum, acc), AccNumber(1 - momentum, acc)},
                        Expr::Op(codegen::OpCode::kAdd, {scaled, kept}));
}

}  // namespace

void BatchNormCUDA(const Tensor& input, const Tensor* weight, const Tensor* bias, const Tensor* running_mean,
                   const Tensor* running_var, bool training, double momentum, double eps, const Tensor& out,
                   const Tensor& save_mean, const Tensor& save_invstd) {
  const DType acc = cuda::AccumulatorOf(input.dtype(), "batch_norm");
  const ScalarType acc_type = cuda::AccScalarType(acc);
  const DimVector shape = input.sizes();
  const int64_t C = input.size(1), n = input.numel() / std::max<int64_t>(C, 1);
  // the per-channel mean and biased variance (training) or the running ones
  Tensor mean, var;
  if (training) {
    const std::vector<bool> mask = AllButChannels(input);
    mean = save_mean.dtype() == acc_type ? save_mean : EmptyTensor(DimVector{C}, acc_type, input.device());
    SumCUDA(input, mask, mean, 1.0 / static_cast<double>(n));
    var = EmptyTensor(DimVector{C}, acc_type, input.device());
    const Tensor mean_b = PerChannel(mean, input);
    auto in = [&](int i) { return cuda::ReduceInput(i, ReduceKind::kSum); };
    const IR centred = Expr::Op(codegen::OpCode::kSub, {Expr::Cast(in(0), acc), in(1)});
    cuda::LaunchReduce(cuda::ReduceOp{"batch_norm_var", ReduceKind::kSum, acc,
                                      Expr::Op(codegen::OpCode::kMul, {centred, centred}),
                                      Expr::Op(codegen::OpCode::kMul, {Expr::Acc(0), in(2)})},
                       var, nullptr,
                       {cuda::PointwiseInput::Of(input), cuda::PointwiseInput::Of(mean_b),
                        AccNumber(1.0 / static_cast<double>(n), acc)},
                       shape, mask);
    Store(save_mean, mean);
    cuda::LaunchPointwise("batch_norm_invstd", save_invstd, {cuda::PointwiseInput::Of(var), AccNumber(eps, acc)},
                          InvStd(cuda::Input(0), cuda::Input(1), acc));
    if (running_mean) UpdateRunning("batch_norm_running_mean", *running_mean, mean, momentum, 1.0, acc);
    if (running_var) {  // with the unbiased variance
      UpdateRunning("batch_norm_running_var", *running_var, var, momentum,
                    static_cast<double>(n) / static_cast<double>(n - 1), acc);
    }
  } else {
    mean = *running_mean;
    var = *running_var;
  }
  // y = (x - mean) * invstd * w + b
  const Tensor mean_b = PerChannel(mean, input), var_b = PerChannel(var, input);
  std::vector<cuda::PointwiseInput> inputs = {cuda::PointwiseInput::Of(input), cuda::PointwiseInput::Of(mean_b),
                                              cuda::PointwiseInput::Of(var_b), AccNumber(eps, acc)};
  IR y = Expr::Op(codegen::OpCode::kMul,
            {Expr::Op(codegen::OpCode::kSub, {Expr::Cast(cuda::Input(0), acc), Expr::Cast(cuda::Input(1), acc)}),
             InvStd(cuda::Input(2), cuda::Input(3), acc)});
  const Tensor w_b = weight ? PerChannel(*weight, input) : Tensor(), b_b = bias ? PerChannel(*bias, input) : Tensor();
  y = Affine(y, weight ? &w_b : nullptr, bias ? &b_b : nullptr, inputs, acc);
  cuda::LaunchPointwise("batch_norm", out, inputs, y);
}

void BatchNormBackwardCUDA(const Tensor& grad, const Tensor& input, const Tensor* weight, const Tensor& mean,
                           const Tensor& invstd_or_var, bool train, double eps, const Tensor* grad_input,
                           const Tensor* grad_weight, const Tensor* grad_bias) {
  const DType acc = cuda::AccumulatorOf(input.dtype(), "native_batch_norm_backward");
  const DimVector shape = input.sizes();
  const int64_t C = input.size(1), n = input.numel() / std::max<int64_t>(C, 1);
  const std::vector<bool> mask = AllButChannels(input);
  // inputs of the kernels over the input: 0 grad, 1 x, 2 mean, 3 invstd (train) or running_var (eval),
  // 4 eps, 5 weight (when there is one); the per-channel ones broadcast
  const Tensor mean_b = PerChannel(mean, input), stat_b = PerChannel(invstd_or_var, input);
  const Tensor w_b = weight ? PerChannel(*weight, input) : Tensor();
  std::vector<cuda::PointwiseInput> inputs = {cuda::PointwiseInput::Of(grad), cuda::PointwiseInput::Of(input),
                                              cuda::PointwiseInput::Of(mean_b), cuda::PointwiseInput::Of(stat_b),
                                              AccNumber(eps, acc)};
  if (weight) inputs.push_back(cuda::PointwiseInput::Of(w_b));
  auto invstd = [&](const IR& stat, const IR& eps_in) { return train ? Expr::Cast(stat, acc) : InvStd(stat, eps_in, acc); };
  auto red = [](int i) { return cuda::ReduceInput(i, ReduceKind::kSum); };
  auto channel_sum = [&](const char* name, const IR& pre) {
    Tensor s = EmptyTensor(DimVector{C}, cuda::AccScalarType(acc), input.device());
    cuda::LaunchReduce(cuda::ReduceOp{name, ReduceKind::kSum, acc, pre, Expr::Acc(0)}, s, nullptr, inputs, shape, mask);
    return s;
  };
  // sum(g) and sum(g * (x - mean)) per channel
  const Tensor sum_g = channel_sum("batch_norm_backward_sum", Expr::Cast(red(0), acc));
  const IR xmu = Expr::Op(codegen::OpCode::kSub, {Expr::Cast(red(1), acc), Expr::Cast(red(2), acc)});
  const Tensor dot = channel_sum("batch_norm_backward_dot", Expr::Op(codegen::OpCode::kMul, {Expr::Cast(red(0), acc), xmu}));
  if (grad_bias) Store(*grad_bias, sum_g);
  if (grad_weight) {  // dot * invstd, per channel
    cuda::LaunchPointwise("batch_norm_backward_weight", *grad_weight,
                          {cuda::PointwiseInput::Of(dot), cuda::PointwiseInput::Of(invstd_or_var), AccNumber(eps, acc)},
                          Expr::Op(codegen::OpCode::kMul, {cuda::Input(0), invstd(cuda::Input(1), cuda::Input(2))}));
  }
  if (grad_input && grad_input->numel() > 0) {
    std::vector<cuda::PointwiseInput> pw = inputs;
    const int at = static_cast<int>(pw.size());
    const Tensor sum_b = PerChannel(sum_g, input), dot_b = PerChannel(dot, input);
    pw.push_back(cuda::PointwiseInput::Of(sum_b));
    pw.push_back(cuda::PointwiseInput::Of(dot_b));
    pw.push_back(AccNumber(1.0 / static_cast<double>(n), acc));
    const IR g = Expr::Cast(cuda::Input(0), acc), is = invstd(cuda::Input(3), cuda::Input(4));
    const IR scale = weight ? Expr::Op(codegen::OpCode::kMul, {is, Expr::Cast(cuda::Input(5), acc)}) : is;
    IR dx = g;
    if (train) {  // g - sum(g) / n - (x - mean) * invstd^2 * dot / n
      const IR inv_n = cuda::Input(at + 2);
      const IR x_mu = Expr::Op(codegen::OpCode::kSub, {Expr::Cast(cuda::Input(1), acc), Expr::Cast(cuda::Input(2), acc)});
      const IR mean_g = Expr::Op(codegen::OpCode::kMul, {cuda::Input(at), inv_n});
      const IR k = Expr::Op(codegen::OpCode::kMul,
                      {Expr::Op(codegen::OpCode::kMul, {Expr::Op(codegen::OpCode::kMul, {is, is}), cuda::Input(at + 1)}), inv_n});
      dx = Expr::Op(codegen::OpCode::kSub, {Expr::Op(codegen::OpCode::kSub, {g, mean_g}), Expr::Op(codegen::OpCode::kMul, {x_mu, k})});
    }
    cuda::LaunchPointwise("batch_norm_backward", *grad_input, pw, Expr::Op(codegen::OpCode::kMul, {dx, scale}));
  }
}

}  // namespace kiln

// --- group_norm ----------------------------------------------------------------------------------

namespace kiln {
namespace {

// The four-dim view [N, G, D, HxW] group_norm's kernels work on (D = C / G channels a group), of a
// contiguous tensor with N * C * HxW elements, and its masks: the group's elements (the statistics)
// or every dim but the channel's (the parameter gradients).
struct GroupView {
  int64_t N, G, D, HxW;
  std::vector<SymInt> Shape() const { return {SymInt(N), SymInt(G), SymInt(D), SymInt(HxW)}; }
  DimVector Dims() const { return {N, G, D, HxW}; }
  Tensor Of(const Tensor& t) const { return ops::view(ops::contiguous(t), Shape()); }
  Tensor Stat(const Tensor& s) const { return ops::view(s, {SymInt(N), SymInt(G), SymInt(1), SymInt(1)}); }
  Tensor Param(const Tensor& p) const { return ops::view(p, {SymInt(1), SymInt(G), SymInt(D), SymInt(1)}); }
  int64_t GroupSize() const { return D * HxW; }
};
const std::vector<bool> kGroupElements = {false, false, true, true};
const std::vector<bool> kChannelPeers = {true, false, false, true};

}  // namespace

void GroupNormCUDA(const Tensor& input, const Tensor* weight, const Tensor* bias, int64_t N, int64_t C, int64_t HxW,
                   int64_t group, double eps, const Tensor& out, const Tensor& mean, const Tensor& rstd) {
  if (mean.numel() == 0) return;
  const DType acc = cuda::AccumulatorOf(input.dtype(), "group_norm");
  const ScalarType acc_type = cuda::AccScalarType(acc);
  const GroupView v{N, group, C / group, HxW};
  Tensor mu = mean.dtype() == acc_type ? mean : EmptyTensor(mean.sizes(), acc_type, input.device());
  Tensor rs = rstd.dtype() == acc_type ? rstd : EmptyTensor(rstd.sizes(), acc_type, input.device());
  const Tensor x = v.Of(input);
  const int64_t n = v.GroupSize();
  if (n == 0) {  // an empty group: mean 0, rstd NaN, as layer_norm's empty rows
    ops::fill_(mu, Scalar(0.0));
    ops::fill_(rs, Scalar(std::nan("")));
  } else {
    SumCUDA(x, kGroupElements, mu, 1.0 / static_cast<double>(n));
    auto in = [&](int i) { return cuda::ReduceInput(i, ReduceKind::kSum); };
    const IR centred = Expr::Op(codegen::OpCode::kSub, {Expr::Cast(in(0), acc), in(1)});
    const IR var = Expr::Op(codegen::OpCode::kMax, {Expr::Op(codegen::OpCode::kMul, {Expr::Acc(0), in(2)}),
                                                    Expr::Const(0.0, acc)});
    const Tensor mu4 = v.Stat(mu);
    cuda::LaunchReduce(cuda::ReduceOp{"group_norm_rstd", ReduceKind::kSum, acc,
                                      Expr::Op(codegen::OpCode::kMul, {centred, centred}), InvStd(var, in(3), acc)},
                       rs, nullptr,
                       {cuda::PointwiseInput::Of(x), cuda::PointwiseInput::Of(mu4),
                        AccNumber(1.0 / static_cast<double>(n), acc), AccNumber(eps, acc)},
                       v.Dims(), kGroupElements);
  }
  if (out.numel() > 0) {
    const Tensor mu4 = v.Stat(mu), rs4 = v.Stat(rs);
    const Tensor w4 = weight ? v.Param(*weight) : Tensor(), b4 = bias ? v.Param(*bias) : Tensor();
    std::vector<cuda::PointwiseInput> inputs = {cuda::PointwiseInput::Of(x), cuda::PointwiseInput::Of(mu4),
                                                cuda::PointwiseInput::Of(rs4)};
    IR y = Expr::Op(codegen::OpCode::kMul,
                    {Expr::Op(codegen::OpCode::kSub, {Expr::Cast(cuda::Input(0), acc), cuda::Input(1)}), cuda::Input(2)});
    y = Affine(y, weight ? &w4 : nullptr, bias ? &b4 : nullptr, inputs, acc);
    cuda::LaunchPointwise("group_norm", ops::view(out, v.Shape()), inputs, y);
  }
  Store(mean, mu);
  Store(rstd, rs);
}

void GroupNormBackwardCUDA(const Tensor& grad, const Tensor& input, const Tensor& mean, const Tensor& rstd,
                           const Tensor* weight, int64_t N, int64_t C, int64_t HxW, int64_t group,
                           const Tensor* grad_input, const Tensor* grad_weight, const Tensor* grad_bias) {
  const DType acc = cuda::AccumulatorOf(input.dtype(), "native_group_norm_backward");
  const GroupView v{N, group, C / group, HxW};
  // inputs of every kernel below: 0 grad, 1 x, 2 mean, 3 rstd, 4 weight (when there is one)
  const Tensor g4 = v.Of(grad), x4 = v.Of(input), mean4 = v.Stat(mean), rstd4 = v.Stat(rstd);
  const Tensor w4 = weight ? v.Param(*weight) : Tensor();
  std::vector<cuda::PointwiseInput> inputs = {cuda::PointwiseInput::Of(g4), cuda::PointwiseInput::Of(x4),
                                              cuda::PointwiseInput::Of(mean4), cuda::PointwiseInput::Of(rstd4)};
  if (weight) inputs.push_back(cuda::PointwiseInput::Of(w4));
  auto terms = [&](const std::function<IR(int)>& in) { return BackwardTerms(in, weight != nullptr, acc); };
  auto red = [](int i) { return cuda::ReduceInput(i, ReduceKind::kSum); };
  if (grad_input && grad_input->numel() > 0) {  // rstd * (gw - mean(gw) - xh * mean(gw * xh)) over each group
    auto [g, gw, xh] = terms(red);
    std::vector<cuda::PointwiseInput> with_n = inputs;
    with_n.push_back(AccNumber(1.0 / static_cast<double>(v.GroupSize()), acc));
    const IR mean_of = Expr::Op(codegen::OpCode::kMul, {Expr::Acc(0), red(static_cast<int>(with_n.size()) - 1)});
    auto group_mean = [&](const char* name, const IR& pre) {
      Tensor m = EmptyTensor(DimVector{N, group}, cuda::AccScalarType(acc), input.device());
      cuda::LaunchReduce(cuda::ReduceOp{name, ReduceKind::kSum, acc, pre, mean_of}, m, nullptr, with_n, v.Dims(),
                         kGroupElements);
      return v.Stat(m);
    };
    const Tensor a = group_mean("group_norm_backward_mean", gw);
    const Tensor b = group_mean("group_norm_backward_dot", Expr::Op(codegen::OpCode::kMul, {gw, xh}));
    std::vector<cuda::PointwiseInput> pw = inputs;
    const int ia = static_cast<int>(pw.size());
    pw.push_back(cuda::PointwiseInput::Of(a));
    pw.push_back(cuda::PointwiseInput::Of(b));
    auto [pg, pgw, pxh] = terms(cuda::Input);
    const IR mean_terms = Expr::Op(codegen::OpCode::kAdd, {cuda::Input(ia), Expr::Op(codegen::OpCode::kMul, {pxh, cuda::Input(ia + 1)})});
    const IR gi = Expr::Op(codegen::OpCode::kMul, {Expr::Cast(cuda::Input(3), acc), Expr::Op(codegen::OpCode::kSub, {pgw, mean_terms})});
    cuda::LaunchPointwise("group_norm_backward", ops::view(*grad_input, v.Shape()), pw, gi);
  }
  const std::vector<SymInt> per_channel = {SymInt(group), SymInt(v.D)};
  if (grad_weight) {
    auto [g, gw, xh] = terms(red);
    cuda::LaunchReduce(cuda::ReduceOp{"group_norm_backward_weight", ReduceKind::kSum, acc,
                                      Expr::Op(codegen::OpCode::kMul, {g, xh}), Expr::Acc(0)},
                       ops::view(*grad_weight, per_channel), nullptr, inputs, v.Dims(), kChannelPeers);
  }
  if (grad_bias) {
    cuda::LaunchReduce(cuda::ReduceOp{"group_norm_backward_bias", ReduceKind::kSum, acc, Expr::Cast(red(0), acc),
                                      Expr::Acc(0)},
                       ops::view(*grad_bias, per_channel), nullptr, {cuda::PointwiseInput::Of(g4)}, v.Dims(),
                       kChannelPeers);
  }
}

}  // namespace kiln
