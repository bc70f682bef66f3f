// tensor/ops/loss.cc: loss functions (nll_loss and its 2d/nd forms, cross_entropy_loss, mse_loss,
// l1_loss, smooth_l1_loss, huber_loss, binary_cross_entropy(_with_logits)), embedding, and
// dropout (native_dropout + the dropout composite).
//
// `reduction` is PyTorch's enum: 0 None, 1 Mean, 2 Sum. nll_loss_forward is the one class-index
// kernel; nll_loss2d(_forward) and nll_loss_nd move the class dim last, flatten, and call it, and
// cross_entropy_loss composes log_softmax with them (or, for probability targets, with mul/sum).
// native_dropout draws its mask from the Philox stream of the device's default generator: each call
// reserves ceil(n / 4) blocks, so results depend only on the seed and the calls before (and a CUDA
// tensor gets the CPU's mask for the same generator state).
#include <cmath>

#include "tensor/cuda/embedded_kernels.h"
#include "tensor/ops/common.h"
#include "tensor/ops/index_cuda.h"
#include "tensor/ops/loss_cuda.h"
#include "tensor/ops/reduce_cuda.h"
#include "tensor/ops/scalar_t_math.h"

namespace kiln {
namespace {

enum Reduction : int64_t { kNone = 0, kMean = 1, kSum = 2 };

void CheckReduction(int64_t reduction) {
  KILN_CHECK_VALUE(reduction >= kNone && reduction <= kSum, reduction, " is not a valid value for reduction");
}

Tensor ApplyReduction(const Tensor& loss, int64_t reduction) {
  if (reduction == kMean) return CallOp<Tensor>(KILN_OP("aten::mean"), loss, std::optional<ScalarType>());
  if (reduction == kSum) return ops::sum(loss, std::nullopt);
  return loss;
}

using OptTensor = std::optional<Tensor>;

// --- nll_loss ----------------------------------------------------------------------------------

std::tuple<TensorMeta, TensorMeta> NllLossForwardMeta(const Tensor& self, const Tensor& target,
                                                      const OptTensor& weight, int64_t reduction, SymInt) {
  CheckReduction(reduction);
  KILN_CHECK(self.dim() > 0 && self.dim() <= 2, "input tensor should be 1D or 2D");
  KILN_CHECK(target.dim() <= 1, "0D or 1D target tensor expected, multi-target not supported");
  // A 1-D input is one sample: its target is 0-D or of size 1 (never read past an empty target).
  KILN_CHECK_VALUE(!(self.dim() == 1 && target.dim() == 1) || target->sym_sizes()[0] == SymInt(1),
                   "For 1D input, 1D target must have size 1, but got target size: ", target->sym_sizes()[0].str());
  const bool no_batch_dim = self.dim() == 1 && target.dim() == 0;
  KILN_CHECK(no_batch_dim || self->sym_sizes()[0] == target->sym_sizes()[0], "size mismatch (got input: ",
             ShapeStr(self), ", target: ", ShapeStr(target), ")");
  const SymInt n_classes = self->sym_sizes().back();
  KILN_CHECK(!weight || (weight->dim() == 1 && (*weight)->sym_numel() == n_classes),
             "weight tensor should be defined either for all ", n_classes, " classes or no classes but got weight "
             "tensor of shape: ", weight ? ShapeStr(*weight) : std::string("[]"));
  KILN_CHECK_NOT_IMPLEMENTED(IsFloating(self.dtype()), "\"nll_loss_out_frame\" not implemented for '",
                             ScalarTypeDisplayName(self.dtype()), "'");
  KILN_CHECK(target.dtype() == ScalarType::Int64 || target.dtype() == ScalarType::UInt8,
             "expected scalar type Long but found ", ScalarTypeDisplayName(target.dtype()));
  TensorMeta out{{}, {}, self.dtype(), self.device()};
  if (reduction == kNone && self.dim() == 2) out.sizes = {self->sym_sizes()[0]};
  TensorMeta total{{}, {}, self.dtype(), self.device()};
  return {out, total};
}

template <typename T, typename Index>
void NllLossKernel(const Tensor& x, const Tensor& target, const Tensor* weight, int64_t reduction,
                   int64_t ignore_index, const Tensor& out, const Tensor& total_weight) {
  using Acc = acc_t<T>;
  const int64_t n_classes = x.size(-1);
  const int64_t batch = x.dim() == 1 ? 1 : x.size(0);
  const T* xp = x.data_ptr<T>();
  const Index* tp = target.data_ptr<Index>();
  const T* wp = weight ? weight->data_ptr<T>() : nullptr;
  T* op = out.data_ptr<T>();
  Acc loss_sum = 0, weight_sum = 0;
  for (int64_t i = 0; i < batch; ++i) {
    const int64_t t = static_cast<int64_t>(tp[i]);
    if (t == ignore_index) {
      if (reduction == kNone) op[i] = T(0);
      continue;
    }
    KILN_CHECK_INDEX(t >= 0 && t < n_classes, "Target ", t, " is out of bounds.");
    const Acc w = wp ? static_cast<Acc>(wp[t]) : Acc(1);
    const Acc l = -static_cast<Acc>(xp[i * n_classes + t]) * w;
    if (reduction == kNone) op[i] = static_cast<T>(l);
    loss_sum += l;
    weight_sum += w;
  }
  // PyTorch leaves total_weight at 0 for an unreduced batch (it is only a mean's divisor).
  total_weight.data_ptr<T>()[0] = reduction == kNone && x.dim() == 2 ? T(0) : static_cast<T>(weight_sum);
  if (reduction == kMean) op[0] = static_cast<T>(loss_sum / weight_sum);  // all ignored: 0 / 0 = nan
  else if (reduction == kSum) op[0] = static_cast<T>(loss_sum);
}

std::tuple<Tensor, Tensor> NllLossForward(const Tensor& self, const Tensor& target, const OptTensor& weight,
                                          int64_t reduction, SymInt ignore_index) {
  auto [om, tm] = NllLossForwardMeta(self, target, weight, reduction, ignore_index);
  Tensor out = EmptyFromMeta(om), total = EmptyFromMeta(tm);
  if (self.device().is_cuda()) {
    CheckSameDevice("nll_loss_forward", self, target);
    Tensor w = weight ? CastTo(*weight, self.dtype()) : Tensor();
    if (weight) CheckSameDevice("nll_loss_forward", self, w);
    NllLossForwardCUDA(self, target, weight ? &w : nullptr, reduction, ignore_index.expect_int(), out, total);
    return {out, total};
  }
  Tensor x = ops::contiguous(self), t = ops::contiguous(target);
  Tensor w = weight ? ops::contiguous(CastTo(*weight, self.dtype())) : Tensor();
  const int64_t ignore = ignore_index.expect_int();
  KILN_DISPATCH_FLOATING(self.dtype(), "nll_loss_out_frame", [&] {
    if (t.dtype() == ScalarType::UInt8)
      NllLossKernel<scalar_t, uint8_t>(x, t, weight ? &w : nullptr, reduction, ignore, out, total);
    else
      NllLossKernel<scalar_t, int64_t>(x, t, weight ? &w : nullptr, reduction, ignore, out, total);
  });
  return {out, total};
}

std::tuple<Tensor, Tensor> CallNllForward(const Tensor& x, const Tensor& t, const OptTensor& weight,
                                          int64_t reduction, const SymInt& ignore_index) {
  return CallOp<std::tuple<Tensor, Tensor>>(KILN_OP("aten::nll_loss_forward"), x, t, weight, reduction, ignore_index);
}

// (N, C, d1, ..., dk) input and (N, d1, ..., dk) target: the class dim moved last and flattened
// into nll_loss_forward; reduction None gives the target's shape back.
std::tuple<Tensor, Tensor> NllFlat(const Tensor& self, const Tensor& target, const OptTensor& weight,
                                   int64_t reduction, const SymInt& ignore_index) {
  if (self.dim() <= 2) return CallNllForward(self, target, weight, reduction, ignore_index);
  const SymInt c = self->sym_sizes()[1];
  Tensor x = ops::reshape(CallOp<Tensor>(KILN_OP("aten::movedim.int"), self, int64_t(1), int64_t(-1)), {SymInt(-1), c});
  Tensor t = ops::reshape(target, {SymInt(-1)});
  auto [out, total] = CallNllForward(x, t, weight, reduction, ignore_index);
  if (reduction == kNone) {
    const SymDimVector& ts = target->sym_sizes();
    out = ops::reshape(out, std::vector<SymInt>(ts.begin(), ts.end()));
  }
  return {out, total};
}

Tensor NllLoss(const Tensor& self, const Tensor& target, const OptTensor& weight, int64_t reduction,
               SymInt ignore_index) {
  return std::get<0>(CallNllForward(self, target, weight, reduction, ignore_index));
}

void CheckNll2d(const Tensor& self, const Tensor& target) {
  KILN_CHECK(self.dim() == 4, "only batches of spatial inputs supported (4D tensors), but got input of size: ",
             ShapeStr(self));
  KILN_CHECK(target.dim() == 3, "only batches of spatial targets supported (3D tensors) but got targets of size: ",
             ShapeStr(target));
  const auto& s = self->sym_sizes();
  const auto& t = target->sym_sizes();
  KILN_CHECK(s[0] == t[0] && s[2] == t[1] && s[3] == t[2], "input and target batch or spatial sizes don't match: "
             "target ", ShapeStr(target), ", input ", ShapeStr(self));
}
Tensor NllLoss2d(const Tensor& self, const Tensor& target, const OptTensor& weight, int64_t reduction,
                 SymInt ignore_index) {
  CheckNll2d(self, target);
  return std::get<0>(NllFlat(self, target, weight, reduction, ignore_index));
}

// nll_loss2d_forward: nll_loss2d's (output, total_weight), the pair nll_loss2d_backward reads.
std::tuple<Tensor, Tensor> NllLoss2dForward(const Tensor& self, const Tensor& target, const OptTensor& weight,
                                            int64_t reduction, SymInt ignore_index) {
  CheckNll2d(self, target);
  return NllFlat(self, target, weight, reduction, ignore_index);
}
std::tuple<TensorMeta, TensorMeta> NllLoss2dForwardMeta(const Tensor& self, const Tensor& target,
                                                        const OptTensor& weight, int64_t reduction, SymInt) {
  CheckNll2d(self, target);
  CheckReduction(reduction);
  KILN_CHECK(!weight || (*weight)->sym_numel() == self->sym_sizes()[1], "weight tensor should be defined either for "
             "all ", self->sym_sizes()[1], " classes or no classes but got weight tensor of shape: ",
             weight ? ShapeStr(*weight) : std::string("[]"));
  KILN_CHECK_NOT_IMPLEMENTED(IsFloating(self.dtype()), "\"nll_loss2d_forward_out_frame\" not implemented for '",
                             ScalarTypeDisplayName(self.dtype()), "'");
  TensorMeta out{reduction == kNone ? target->sym_sizes() : SymDimVector{}, {}, self.dtype(), self.device()};
  return {out, TensorMeta{{}, {}, self.dtype(), self.device()}};
}

void CheckNllNd(const Tensor& self, const Tensor& target) {
  KILN_CHECK_VALUE(self.dim() >= 1, "Expected 1 or more dimensions (got ", self.dim(), ")");
  KILN_CHECK_VALUE(self.dim() == 1 || target.dim() >= 1, "Expected input batch_size (", self->sym_sizes()[0].str(),
                   ") to match target batch_size (0).");
  KILN_CHECK_VALUE(self.dim() == 1 || self->sym_sizes()[0] == target->sym_sizes()[0], "Expected input batch_size (",
                   self->sym_sizes()[0].str(), ") to match target batch_size (", target->sym_sizes()[0].str(), ").");
  if (self.dim() > 2) {
    SymDimVector want{self->sym_sizes()[0]};
    for (int64_t d = 2; d < self.dim(); ++d) want.push_back(self->sym_sizes()[d]);
    KILN_CHECK(target->sym_sizes() == want, "Expected target size ", SizesToString(want), ", got ",
               ShapeStr(target));
  }
}
std::tuple<Tensor, Tensor> NllNdWithTotal(const Tensor& self, const Tensor& target, const OptTensor& weight,
                                          int64_t reduction, const SymInt& ignore_index) {
  CheckNllNd(self, target);
  return NllFlat(self, target, weight, reduction, ignore_index);
}
Tensor NllLossNd(const Tensor& self, const Tensor& target, const OptTensor& weight, int64_t reduction,
                 SymInt ignore_index) {
  return std::get<0>(NllNdWithTotal(self, target, weight, reduction, ignore_index));
}

// --- cross_entropy_loss ------------------------------------------------------------------------

// `weight` ([C]) shaped to broadcast along the class dim of a `ndim`-dim input.
Tensor WeightAlongClassDim(const Tensor& weight, int64_t class_dim, int64_t ndim) {
  std::vector<SymInt> shape(ndim, SymInt(1));
  shape[class_dim] = weight->sym_sizes()[0];
  return ops::reshape(weight, shape);
}

Tensor CrossEntropyLoss(const Tensor& self, const Tensor& target, const OptTensor& weight, int64_t reduction,
                        SymInt ignore_index, double label_smoothing) {
  CheckReduction(reduction);
  KILN_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0,
             "label_smoothing must be between 0.0 and 1.0. Got: ", label_smoothing);
  KILN_CHECK_VALUE(self.dim() >= 1, "Expected 1 or more dimensions (got ", self.dim(), ")");
  const int64_t class_dim = self.dim() == 1 ? 0 : 1;
  const SymInt n_classes = self->sym_sizes()[class_dim];
  const int64_t ignore = ignore_index.guard_int(__FILE__, __LINE__);
  const bool prob_target = self->sym_sizes() == target->sym_sizes();
  if (prob_target) {  // the target checks come first, as in PyTorch (before log_softmax rejects a dtype)
    KILN_CHECK(IsFloating(target.dtype()), "Expected floating point type for target with class probabilities, got ",
               ScalarTypeDisplayName(target.dtype()));
    KILN_CHECK(ignore < 0, "ignore_index is not supported for floating point target");
  }
  Tensor logp = CallOp<Tensor>(KILN_OP("aten::log_softmax.int"), self, class_dim, std::optional<ScalarType>());
  const std::optional<std::vector<int64_t>> class_dims = std::vector<int64_t>{class_dim};

  if (prob_target) {
    // Probability targets: -sum_c w_c * p_c * log q_c, averaged over the batch elements.
    Tensor p = target;
    if (label_smoothing > 0) {
      const double eps_per_class = label_smoothing / static_cast<double>(n_classes.guard_int(__FILE__, __LINE__));
      p = ops::add(ops::mul(target, Scalar(1 - label_smoothing)), Scalar(eps_per_class));
    }
    Tensor prod = ops::mul(logp, p);
    if (weight) prod = ops::mul(prod, WeightAlongClassDim(*weight, class_dim, self.dim()));
    Tensor loss = ops::mul(ops::sum(prod, class_dims), Scalar(int64_t(-1)));
    return ApplyReduction(loss, reduction);
  }

  // Class-index targets.
  KILN_CHECK(IsIntegral(target.dtype(), false), "expected scalar type Long but found ",
             ScalarTypeDisplayName(target.dtype()));
  auto [nll, total_weight] = NllNdWithTotal(logp, target, weight, reduction, ignore_index);
  if (label_smoothing <= 0) return nll;
  // Label smoothing adds eps / C * (-sum_c w_c log q_c) per non-ignored element; a mean divides by
  // the same total weight nll_loss does.
  Tensor smooth = weight ? ops::mul(logp, WeightAlongClassDim(*weight, class_dim, self.dim())) : logp;
  smooth = ops::mul(ops::sum(smooth, class_dims), Scalar(int64_t(-1)));
  Tensor keep = CallOp<Tensor>(KILN_OP("aten::ne.Scalar"), target, Scalar(ignore));
  smooth = ops::mul(smooth, keep);
  Tensor ret = smooth;
  if (reduction == kMean) ret = ops::div(ops::sum(smooth, std::nullopt), total_weight);
  else if (reduction == kSum) ret = ops::sum(smooth, std::nullopt);
  const double eps_per_class = label_smoothing / static_cast<double>(n_classes.guard_int(__FILE__, __LINE__));
  return ops::add(ops::mul(nll, Scalar(1 - label_smoothing)), ops::mul(ret, Scalar(eps_per_class)));
}

// --- pointwise losses --------------------------------------------------------------------------

enum PointwiseLossKind : int { kMse, kSmoothL1, kHuber };
constexpr const char* kPointwiseNames[] = {"mse_loss", "smooth_l1_loss", "huber_loss"};

TensorMeta PointwiseLossMeta(int kind, const Tensor& self, const Tensor& target, int64_t reduction) {
  CheckReduction(reduction);
  const char* name = kPointwiseNames[kind];
  ScalarType dtype = ResultType(self, target);
  if (kind == kHuber) {
    // PyTorch writes huber_loss into empty_like(input): the input's dtype, if the common one casts to it.
    KILN_CHECK(CanCast(dtype, self.dtype()), "result type ", ScalarTypeDisplayName(dtype),
               " can't be cast to the desired output type ", ScalarTypeDisplayName(self.dtype()));
    dtype = self.dtype();
  }
  KILN_CHECK_NOT_IMPLEMENTED(IsFloating(dtype), "\"", name, "\" not implemented for '", ScalarTypeDisplayName(dtype),
                             "'");
  TensorMeta m = ElementwiseMeta(name, self, target, dtype);
  if (reduction != kNone) m.sizes.clear(), m.strides.clear();
  return m;
}

template <int kKind>
Tensor PointwiseLoss(const Tensor& self, const Tensor& target, int64_t reduction, double param) {
  TensorMeta m = PointwiseLossMeta(kKind, self, target, reduction);
  TensorMeta elem = ElementwiseMeta(kPointwiseNames[kKind], self, target, m.dtype);
  Tensor loss = EmptyFromMeta(elem);
  Tensor a = CastTo(self, m.dtype), b = CastTo(target, m.dtype);
  if (loss.device().is_cuda()) {
    CheckSameDevice(kPointwiseNames[kKind], a, b);
    PointwiseLossCUDA(static_cast<PwLoss>(kKind), loss, a, b, param);
    return ApplyReduction(loss, reduction);
  }
  ElementwiseIter iter({loss, a, b});
  // PyTorch's kernels (mse_kernel, smooth_l1_kernel, huber_kernel) compute on scalar_t, rounding
  // every step of a float16/bfloat16 loss (scalar_t_math.h), except smooth_l1's bfloat16 and
  // huber's float16 kernels, which compute in float (measured against 2.13); the parameter is
  // rounded to scalar_t first where the steps are.
  KILN_DISPATCH_FLOATING(m.dtype, kPointwiseNames[kKind], [&] {
    using C = scalar_t;
    using M = opmath_t<C>;
    constexpr bool kInFloat = (kKind == kSmoothL1 && std::is_same_v<C, BFloat16>) ||
                              (kKind == kHuber && std::is_same_v<C, Half>);
    auto r = [](M v) -> M { return kInFloat ? v : RoundTo<C>(v); };
    const M p = r(static_cast<M>(param));
    CpuKernel<C, C, C>(iter, [p, r](C x, C y) -> C {
      const M d = r(static_cast<M>(x) - static_cast<M>(y));
      const M ad = std::abs(d);
      if constexpr (kKind == kMse) return static_cast<C>(d * d);
      else if constexpr (kKind == kSmoothL1)
        return static_cast<C>(ad < p ? r(r(M(0.5) * ad) * ad) / p : ad - r(M(0.5) * p));
      else return static_cast<C>(ad < p ? r(M(0.5) * ad) * ad : p * r(ad - r(M(0.5) * p)));
    });
  });
  return ApplyReduction(loss, reduction);
}

Tensor MseLoss(const Tensor& self, const Tensor& target, int64_t reduction) {
  return PointwiseLoss<kMse>(self, target, reduction, 0);
}
TensorMeta MseLossMeta(const Tensor& self, const Tensor& target, int64_t reduction) {
  return PointwiseLossMeta(kMse, self, target, reduction);
}
Tensor SmoothL1Loss(const Tensor& self, const Tensor& target, int64_t reduction, double beta) {
  KILN_CHECK(beta >= 0, "smooth_l1_loss does not support negative values for beta.");
  if (beta == 0) return CallOp<Tensor>(KILN_OP("aten::l1_loss"), self, target, reduction);
  return PointwiseLoss<kSmoothL1>(self, target, reduction, beta);
}
TensorMeta SmoothL1LossMeta(const Tensor& self, const Tensor& target, int64_t reduction, double beta) {
  KILN_CHECK(beta >= 0, "smooth_l1_loss does not support negative values for beta.");
  return PointwiseLossMeta(kSmoothL1, self, target, reduction);
}
Tensor HuberLoss(const Tensor& self, const Tensor& target, int64_t reduction, double delta) {
  KILN_CHECK(delta > 0, "huber_loss does not support non-positive values for delta.");
  return PointwiseLoss<kHuber>(self, target, reduction, delta);
}
TensorMeta HuberLossMeta(const Tensor& self, const Tensor& target, int64_t reduction, double delta) {
  KILN_CHECK(delta > 0, "huber_loss does not support non-positive values for delta.");
  return PointwiseLossMeta(kHuber, self, target, reduction);
}
// l1_loss is a composite, as in PyTorch.
Tensor L1Loss(const Tensor& self, const Tensor& target, int64_t reduction) {
  CheckReduction(reduction);
  Tensor diff = CallOp<Tensor>(KILN_OP("aten::abs"), ops::sub(self, target));
  return ApplyReduction(diff, reduction);
}

// --- binary cross entropy ----------------------------------------------------------------------

// Checks that an optional weight broadcasts to `self` (the loss is computed in self's shape).
void CheckBroadcastsTo(const char* op, const char* what, const OptTensor& w, const Tensor& self) {
  if (!w) return;
  SymDimVector joined = BroadcastShapes(op, (*w)->sym_sizes(), self->sym_sizes());
  KILN_CHECK(joined == self->sym_sizes(), "[", op, "] ", what, " of shape ", ShapeStr(*w),
             " cannot be broadcast to the input's shape ", ShapeStr(self));
}

TensorMeta BceMeta(const Tensor& self, const Tensor& target, const OptTensor& weight, int64_t reduction) {
  CheckReduction(reduction);
  // aten's op broadcasts the target (RuntimeError when it cannot); kiln takes equal shapes only.
  KILN_CHECK(self->sym_sizes() == target->sym_sizes(), "Using a target size (", ShapeStr(target),
             ") that is different to the input size (", ShapeStr(self), ") is deprecated. Please ensure they "
             "have the same size.");
  KILN_CHECK_NOT_IMPLEMENTED(IsFloating(self.dtype()), "\"binary_cross_entropy\" not implemented for '",
                             ScalarTypeDisplayName(self.dtype()), "'");
  CheckBroadcastsTo("binary_cross_entropy", "weight", weight, self);
  return TensorMeta{reduction == kNone ? self->sym_sizes() : SymDimVector{}, {}, self.dtype(), self.device()};
}

TensorMeta BceLogitsMeta(const Tensor& self, const Tensor& target, const OptTensor& weight,
                         const OptTensor& pos_weight, int64_t reduction) {
  CheckReduction(reduction);
  KILN_CHECK(self->sym_sizes() == target->sym_sizes(), "Target size (", ShapeStr(target),
             ") must be the same as input size (", ShapeStr(self), ")");
  KILN_CHECK_NOT_IMPLEMENTED(IsFloating(self.dtype()), "\"binary_cross_entropy_with_logits\" not implemented for '",
                             ScalarTypeDisplayName(self.dtype()), "'");
  CheckBroadcastsTo("binary_cross_entropy_with_logits", "weight", weight, self);
  CheckBroadcastsTo("binary_cross_entropy_with_logits", "pos_weight", pos_weight, self);
  return TensorMeta{reduction == kNone ? self->sym_sizes() : SymDimVector{}, {}, self.dtype(), self.device()};
}

// loss[i] = f(x[i], y[i], w[i], pw[i]); absent weights read a broadcast 1.
template <bool kLogits>
Tensor BceImpl(const Tensor& self, const Tensor& target, const OptTensor& weight, const OptTensor& pos_weight,
               int64_t reduction) {
  const ScalarType dt = self.dtype();
  Tensor loss = EmptyTensor(self->sym_sizes(), dt, self.device());
  Tensor y = CastTo(target, dt);
  Tensor w = weight ? CastTo(*weight, dt) : Tensor();
  Tensor pw = pos_weight ? CastTo(*pos_weight, dt) : Tensor();
  if (self.device().is_cuda()) {
    for (const Tensor* t : {&y, weight ? &w : nullptr, pos_weight ? &pw : nullptr}) {
      if (t) CheckSameDevice(kLogits ? "binary_cross_entropy_with_logits" : "binary_cross_entropy", self, *t);
    }
    BceCUDA(kLogits, loss, self, y, weight ? &w : nullptr, pos_weight ? &pw : nullptr);
    return ApplyReduction(loss, reduction);
  }
  KILN_DISPATCH_FLOATING(dt, kLogits ? "binary_cross_entropy_with_logits" : "binary_cross_entropy", [&] {
    using C = scalar_t;
    using M = opmath_t<C>;
    const C one = C(1.0f);
    ElementwiseIter iter({loss, self, y, weight ? Operand(w) : Operand::Broadcast(&one),
                          pos_weight ? Operand(pw) : Operand::Broadcast(&one)});
    CpuKernel<C, C, C, C, C>(iter, [](C xc, C yc, C wc, C pwc) -> C {
      const M x = static_cast<M>(xc), t = static_cast<M>(yc), w = static_cast<M>(wc);
      if constexpr (kLogits) {
        // log_sigmoid(x) = min(x, 0) - log1p(exp(-|x|))
        const M log_sig = std::min(x, M(0)) - std::log1p(std::exp(-std::abs(x)));
        const M log_weight = (static_cast<M>(pwc) - M(1)) * t + M(1);
        return static_cast<C>(((M(1) - t) * x - log_weight * log_sig) * w);
      } else {
        if (!(x >= M(0) && x <= M(1))) throw Error("all elements of input should be between 0 and 1");
        const M log_x = std::max(std::log(x), M(-100));
        const M log_1mx = std::max(std::log1p(-x), M(-100));
        return static_cast<C>(-w * (t * log_x + (M(1) - t) * log_1mx));
      }
    });
  });
  return ApplyReduction(loss, reduction);
}
Tensor Bce(const Tensor& self, const Tensor& target, const OptTensor& weight, int64_t reduction) {
  BceMeta(self, target, weight, reduction);
  return BceImpl<false>(self, target, weight, std::nullopt, reduction);
}
Tensor BceLogits(const Tensor& self, const Tensor& target, const OptTensor& weight, const OptTensor& pos_weight,
                 int64_t reduction) {
  BceLogitsMeta(self, target, weight, pos_weight, reduction);
  return BceImpl<true>(self, target, weight, pos_weight, reduction);
}

// --- embedding ---------------------------------------------------------------------------------

TensorMeta EmbeddingMeta(const Tensor& weight, const Tensor& indices, SymInt, bool, bool) {
  KILN_CHECK(weight.dim() == 2, "'weight' must be 2-D");
  KILN_CHECK(indices.dtype() == ScalarType::Int64 || indices.dtype() == ScalarType::Int32,
             "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; but "
             "got ", ScalarTypeDisplayName(indices.dtype()), " instead (while checking arguments for embedding)");
  SymDimVector sizes = indices->sym_sizes();
  sizes.push_back(weight->sym_sizes()[1]);
  return TensorMeta{sizes, {}, weight.dtype(), weight.device()};
}

Tensor Embedding(const Tensor& weight, const Tensor& indices, SymInt padding_idx, bool scale, bool sparse) {
  Tensor out = EmptyFromMeta(EmbeddingMeta(weight, indices, padding_idx, scale, sparse));
  const int64_t n = indices.numel(), rows = weight.size(0), dim = weight.size(1);
  if (out.numel() == 0 && n == 0) return out;
  if (out.device().is_cuda()) {  // indices checked on the device (index_cuda.h)
    IndexSelectCUDA(weight, 0, ops::reshape(indices, {SymInt(n)}), ops::reshape(out, {SymInt(n), SymInt(dim)}),
                    "index out of range in self");
    return out;
  }
  Tensor idx = ops::contiguous(CastTo(indices, ScalarType::Int64));
  Tensor w = ops::contiguous(weight);
  const int64_t* ip = idx.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) KILN_CHECK_INDEX(ip[i] >= 0 && ip[i] < rows, "index out of range in self");
  const int64_t row_bytes = dim * weight->itemsize();
  const char* src = static_cast<const char*>(w.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  ParallelFor(0, n, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(dim, 1)), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) std::memcpy(dst + i * row_bytes, src + ip[i] * row_bytes, row_bytes);
  });
  return out;
}

// --- dropout -----------------------------------------------------------------------------------

std::tuple<TensorMeta, TensorMeta> NativeDropoutMeta(const Tensor& input, double p, std::optional<bool>) {
  KILN_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  KILN_CHECK(IsFloating(input.dtype()), "result type Float can't be cast to the desired output type ",
             ScalarTypeDisplayName(input.dtype()));
  TensorMeta out{input->sym_sizes(), {}, input.dtype(), input.device()};
  TensorMeta mask{input->sym_sizes(), {}, ScalarType::Bool, input.device()};
  return {out, mask};
}

std::tuple<Tensor, Tensor> NativeDropout(const Tensor& input, double p, std::optional<bool> train) {
  auto [om, mm] = NativeDropoutMeta(input, p, train);
  Tensor mask = EmptyFromMeta(mm);
  if (input.numel() == 0) return {ops::clone(input), mask};
  if (train.has_value() && !*train) {
    ops::fill_(mask, Scalar(true));
    return {ops::clone(input), mask};
  }
  Tensor out = EmptyFromMeta(om);
  Tensor x = ops::contiguous(input);
  const int64_t n = x.numel();
  const double p1m = 1.0 - p;
  const double scale = p1m == 0 ? 0.0 : 1.0 / p1m;
  const uint64_t blocks = static_cast<uint64_t>((n + 3) / 4);
  if (input.device().is_cuda()) {  // the same mask from the device's generator (tensor/cuda/kernels/random.cu)
    const int device = input.device().index;
    KILN_DISPATCH_FLOATING(input.dtype(), "native_dropout", [&] {
      auto [seed, base] = DefaultCUDAGenerator(device)->ReserveWithSeed(blocks);
      cuda::CUfunction fn = cuda::EmbeddedKernel(cuda::RandomKernels(), device,
                                           StrCat("kiln_dropout_", cuda::KernelSuffix(input.dtype())).c_str(),
                                           "native_dropout");
      const void* xp = x.raw_data();
      void *op = out.raw_data(), *mp = mask.raw_data();
      int64_t count = n;
      double keep = p1m, s = scale;
      std::vector<void*> args = {&xp, &op, &mp, &count, &seed, &base, &keep, &s};
      cuda::LaunchGrid(fn, device, static_cast<int64_t>(blocks), args);
    });
    return {out, mask};
  }
  Generator gen = DefaultCPUGenerator();
  const uint64_t seed = gen->initial_seed();
  const uint64_t counter = gen->Reserve(blocks);
  bool* mp = mask.data_ptr<bool>();
  KILN_DISPATCH_FLOATING(input.dtype(), "native_dropout", [&] {
    using C = scalar_t;
    using M = opmath_t<C>;
    const C* xp = x.data_ptr<C>();
    C* op = out.data_ptr<C>();
    ParallelFor(0, static_cast<int64_t>(blocks), kGrainSize / 4, [&](int64_t b, int64_t e) {
      for (int64_t blk = b; blk < e; ++blk) {
        uint32_t r[4];
        Philox::Block(seed, counter + static_cast<uint64_t>(blk), r);
        for (int k = 0; k < 4; ++k) {
          const int64_t i = blk * 4 + k;
          if (i >= n) break;
          const float u = static_cast<float>(r[k] >> 8) * (1.0f / 16777216.0f);  // [0, 1), 24 bits
          const bool keep = u < p1m;
          mp[i] = keep;
          op[i] = static_cast<C>(static_cast<M>(xp[i]) * M(keep ? 1 : 0) * static_cast<M>(scale));
        }
      }
    });
  });
  return {out, mask};
}

Tensor Dropout(const Tensor& input, double p, bool train) {
  KILN_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  if (!train || p == 0 || input.numel() == 0) return input;
  return std::get<0>(CallOp<std::tuple<Tensor, Tensor>>(KILN_OP("aten::native_dropout"), input, p,
                                                        std::optional<bool>(true)));
}

Tensor Dropout_(Tensor self, double p, bool train) {
  KILN_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  if (!train || p == 0 || self.numel() == 0) return self;
  Tensor out = std::get<0>(CallOp<std::tuple<Tensor, Tensor>>(KILN_OP("aten::native_dropout"), self, p,
                                                              std::optional<bool>(true)));
  return ops::copy_(self, out);
}

}  // namespace

void RegisterLossOps(Registry& r) {
  r.Def("nll_loss_forward(Tensor self, Tensor target, Tensor? weight, int reduction, SymInt ignore_index) -> "
        "(Tensor output, Tensor total_weight)", {Tag::core})
      .CPUAndCUDA<&NllLossForward>().Meta<&NllLossForwardMeta>();
  r.Def("nll_loss(Tensor self, Tensor target, Tensor? weight=None, int reduction=Mean, SymInt ignore_index=-100) -> "
        "Tensor").Composite<&NllLoss>();
  r.Def("nll_loss2d(Tensor self, Tensor target, Tensor? weight=None, int reduction=Mean, SymInt ignore_index=-100) "
        "-> Tensor").Composite<&NllLoss2d>();
  r.Def("nll_loss2d_forward(Tensor self, Tensor target, Tensor? weight, int reduction, SymInt ignore_index) -> "
        "(Tensor output, Tensor total_weight)")
      .CPUAndCUDA<&NllLoss2dForward>().Meta<&NllLoss2dForwardMeta>();
  r.Def("nll_loss_nd(Tensor self, Tensor target, Tensor? weight=None, int reduction=Mean, SymInt ignore_index=-100) "
        "-> Tensor").Composite<&NllLossNd>();
  r.Def("cross_entropy_loss(Tensor self, Tensor target, Tensor? weight=None, int reduction=Mean, "
        "SymInt ignore_index=-100, float label_smoothing=0.0) -> Tensor").Composite<&CrossEntropyLoss>();
  r.Def("mse_loss(Tensor self, Tensor target, int reduction=Mean) -> Tensor")
      .CPUAndCUDA<&MseLoss>().Meta<&MseLossMeta>();
  r.Def("l1_loss(Tensor self, Tensor target, int reduction=Mean) -> Tensor").Composite<&L1Loss>();
  r.Def("smooth_l1_loss(Tensor self, Tensor target, int reduction=Mean, float beta=1.0) -> Tensor")
      .CPUAndCUDA<&SmoothL1Loss>().Meta<&SmoothL1LossMeta>();
  r.Def("huber_loss(Tensor self, Tensor target, int reduction=Mean, float delta=1.0) -> Tensor")
      .CPUAndCUDA<&HuberLoss>().Meta<&HuberLossMeta>();
  r.Def("binary_cross_entropy(Tensor self, Tensor target, Tensor? weight=None, int reduction=Mean) -> Tensor")
      .CPUAndCUDA<&Bce>().Meta<&BceMeta>();
  r.Def("binary_cross_entropy_with_logits(Tensor self, Tensor target, Tensor? weight=None, Tensor? pos_weight=None, "
        "int reduction=Mean) -> Tensor")
      .CPUAndCUDA<&BceLogits>().Meta<&BceLogitsMeta>();
  r.Def("embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False, "
        "bool sparse=False) -> Tensor", {Tag::core})
      .CPUAndCUDA<&Embedding>().Meta<&EmbeddingMeta>();
  r.Def("native_dropout(Tensor input, float p, bool? train) -> (Tensor, Tensor)",
        {Tag::nondeterministic_seeded, Tag::core})
      .CPUAndCUDA<&NativeDropout>().Meta<&NativeDropoutMeta>();
  r.Def("dropout(Tensor input, float p, bool train) -> Tensor", {Tag::nondeterministic_seeded})
      .Composite<&Dropout>();
  r.Def("dropout_(Tensor(a!) self, float p, bool train) -> Tensor(a!)", {Tag::nondeterministic_seeded})
      .Composite<&Dropout_>();
}

}  // namespace kiln
