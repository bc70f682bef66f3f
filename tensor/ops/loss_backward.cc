// tensor/ops/loss_backward.cc: the backward ops of the losses (nll_loss_backward,
// nll_loss2d_backward, mse_loss_backward, smooth_l1_loss_backward, huber_loss_backward,
// binary_cross_entropy_backward), of embedding (embedding_dense_backward) and of dropout
// (native_dropout_backward).
//
// `reduction` is PyTorch's enum (0 None, 1 Mean, 2 Sum); a Mean divides by the input's numel,
// or, for nll_loss, by the total_weight its forward returned. The pointwise losses run through
// CpuKernel over (input, target, grad_output) broadcast to one shape, like the forward kernels;
// nll_loss writes one element per sample into a zeroed gradient, and embedding_dense_backward
// accumulates grad rows into their weight rows in index order (deterministic).
#include <cmath>

#include "tensor/cuda/pointwise.h"
#include "tensor/ops/common.h"
#include "tensor/ops/index_cuda.h"
#include "tensor/ops/loss_cuda.h"
#include "tensor/ops/reduce_cuda.h"
#include "tensor/ops/scalar_t_math.h"

namespace kiln {
namespace {

using OptTensor = std::optional<Tensor>;

enum Reduction : int64_t { kNone = 0, kMean = 1, kSum = 2 };

void CheckReduction(const char* op, int64_t reduction) {
  KILN_CHECK_VALUE(reduction >= kNone && reduction <= kSum, "[", op, "] ", reduction,
                   " is not a valid value for reduction");
}

// --- nll_loss ------------------------------------------------------------------------------------

void CheckNllGrad(const char* op, const Tensor& grad, const Tensor& total_weight, bool unreduced,
                  const SymDimVector& unreduced_sizes) {
  KILN_CHECK(total_weight->sym_numel() == SymInt(1), "[", op, "] expected total_weight to be a single element "
             "tensor, got: ", ShapeStr(total_weight), " (", total_weight->sym_numel().str(), " elements)");
  if (unreduced) {
    KILN_CHECK(grad->sym_sizes() == unreduced_sizes, "[", op, "] expected grad_output of size ",
               SizesToString(unreduced_sizes), " (the unreduced loss), but got ", ShapeStr(grad));
  } else {
    KILN_CHECK(grad->sym_numel() == SymInt(1), "[", op, "] Expected a single element grad_output tensor, but got: ",
               ShapeStr(grad));
  }
}

void CheckNllCommon(const char* op, const Tensor& grad, const Tensor& self, const Tensor& target,
                    const OptTensor& weight, int64_t reduction, const SymInt& n_classes) {
  CheckReduction(op, reduction);
  KILN_CHECK_NOT_IMPLEMENTED(IsFloating(self.dtype()), "\"", op, "\" not implemented for '",
                             ScalarTypeDisplayName(self.dtype()), "'");
  KILN_CHECK(target.dtype() == ScalarType::Int64 || target.dtype() == ScalarType::UInt8, "[", op,
             "] expected scalar type Long but found ", ScalarTypeDisplayName(target.dtype()));
  KILN_CHECK(!weight || (*weight)->sym_numel() == n_classes, "[", op, "] weight tensor should be defined either for "
             "all ", n_classes.str(), " classes or no classes but got weight tensor of shape: ",
             weight ? ShapeStr(*weight) : std::string("[]"));
  CheckSameDevice(op, grad, self);
}

constexpr const char* kNll = "nll_loss_backward";
constexpr const char* kNll2d = "nll_loss2d_backward";

TensorMeta NllBwMeta(const Tensor& grad, const Tensor& self, const Tensor& target, const OptTensor& weight,
                     int64_t reduction, SymInt ignore_index, const Tensor& total_weight) {
  (void)ignore_index;
  KILN_CHECK(self.dim() > 0 && self.dim() <= 2, "[", kNll, "] input tensor should be 1D or 2D, got ", ShapeStr(self));
  KILN_CHECK(target.dim() <= 1, "[", kNll, "] 0D or 1D target tensor expected, multi-target not supported");
  const bool no_batch_dim = self.dim() == 1 && target.dim() == 0;
  KILN_CHECK(no_batch_dim || self->sym_sizes()[0] == target->sym_sizes()[0], "[", kNll, "] size mismatch (got input: ",
             ShapeStr(self), ", target: ", ShapeStr(target), ")");
  CheckNllCommon(kNll, grad, self, target, weight, reduction, self->sym_sizes().back());
  const bool unreduced = reduction == kNone && self.dim() == 2;
  CheckNllGrad(kNll, grad, total_weight, unreduced, unreduced ? SymDimVector{self->sym_sizes()[0]} : SymDimVector{});
  return TensorMeta{self->sym_sizes(), {}, self.dtype(), self.device()};
}

TensorMeta Nll2dBwMeta(const Tensor& grad, const Tensor& self, const Tensor& target, const OptTensor& weight,
                       int64_t reduction, SymInt ignore_index, const Tensor& total_weight) {
  (void)ignore_index;
  KILN_CHECK(self.dim() == 4, "[", kNll2d, "] only batches of spatial inputs supported (4D tensors), but got input "
             "of size: ", ShapeStr(self));
  KILN_CHECK(target.dim() == 3, "[", kNll2d, "] only batches of spatial targets supported (3D tensors) but got "
             "targets of size: ", ShapeStr(target));
  const auto& s = self->sym_sizes();
  const auto& t = target->sym_sizes();
  KILN_CHECK(s[0] == t[0] && s[2] == t[1] && s[3] == t[2], "[", kNll2d, "] input and target batch or spatial sizes "
             "don't match: target ", ShapeStr(target), ", input ", ShapeStr(self));
  CheckNllCommon(kNll2d, grad, self, target, weight, reduction, s[1]);
  CheckNllGrad(kNll2d, grad, total_weight, reduction == kNone, t);
  return TensorMeta{s, {}, self.dtype(), self.device()};
}

// grad_input[b, t_b, s] = -w[t_b] * g (g per element when unreduced; / total_weight for a mean), for
// self viewed as [B, C, S] and target as [B, S].
Tensor NllBwImpl(const char* op, const TensorMeta& m, const Tensor& grad, const Tensor& target, const OptTensor& weight,
                 int64_t reduction, int64_t ignore, const Tensor& total_weight, int64_t B, int64_t C, int64_t S) {
  Tensor out = EmptyFromMeta(m);
  ops::fill_(out, 0);
  if (out.numel() == 0 || B * S == 0) return out;
  Tensor t = ops::contiguous(CastTo(target, ScalarType::Int64));
  Tensor g = ops::contiguous(CastTo(grad, m.dtype));
  Tensor w = weight ? ops::contiguous(CastTo(*weight, m.dtype)) : Tensor();
  Tensor tw = CastTo(total_weight, m.dtype);
  const bool unreduced = reduction == kNone && g.numel() == B * S && !(g.dim() == 0);
  const int64_t* tp = t.data_ptr<int64_t>();
  for (int64_t i = 0; i < B * S; ++i) {
    KILN_CHECK_INDEX(tp[i] == ignore || (tp[i] >= 0 && tp[i] < C), "[", op, "] Target ", tp[i], " is out of bounds.");
  }
  KILN_DISPATCH_FLOATING(m.dtype, op, [&] {
    using T = scalar_t;
    using M = opmath_t<T>;
    const T* gp = g.data_ptr<T>();
    const T* wp = weight ? w.data_ptr<T>() : nullptr;
    T* op_ = out.data_ptr<T>();
    const M total = static_cast<M>(tw.data_ptr<T>()[0]);
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t s = 0; s < S; ++s) {
        const int64_t i = b * S + s, cls = tp[i];
        if (cls == ignore) continue;
        const M gv = static_cast<M>(gp[unreduced ? i : 0]);
        const M wv = wp ? static_cast<M>(wp[cls]) : M(1);
        op_[(b * C + cls) * S + s] = static_cast<T>(reduction == kMean ? -(gv / total) * wv : -gv * wv);
      }
    }
  });
  return out;
}

Tensor NllBw(const Tensor& grad, const Tensor& self, const Tensor& target, const OptTensor& weight, int64_t reduction,
             SymInt ignore_index, const Tensor& total_weight) {
  TensorMeta m = NllBwMeta(grad, self, target, weight, reduction, ignore_index, total_weight);
  if (self.device().is_cuda()) {
    Tensor out = EmptyFromMeta(m);
    if (out.numel() == 0) return out;
    CheckSameDevice(kNll, self, target);
    Tensor w = weight ? CastTo(*weight, m.dtype) : Tensor();
    NllLossBackwardCUDA(grad, target, weight ? &w : nullptr, reduction, ignore_index.expect_int(), total_weight, out);
    return out;
  }
  const int64_t B = self.dim() == 1 ? 1 : self.size(0);
  // (A 1-D input's loss is 0-dim even unreduced: its grad takes the single-element path.)
  return NllBwImpl(kNll, m, grad, target, weight, reduction, ignore_index.expect_int(), total_weight, B,
                   self.size(-1), 1);
}

Tensor Nll2dBw(const Tensor& grad, const Tensor& self, const Tensor& target, const OptTensor& weight, int64_t reduction,
               SymInt ignore_index, const Tensor& total_weight) {
  TensorMeta m = Nll2dBwMeta(grad, self, target, weight, reduction, ignore_index, total_weight);
  if (self.device().is_cuda()) {  // nll_loss_backward's kernel over [N * H * W, C], moved back to [N, C, H, W]
    Tensor out = EmptyFromMeta(m);
    if (out.numel() == 0) return out;
    CheckSameDevice(kNll2d, self, target);
    const int64_t N = self.size(0), C = self.size(1), H = self.size(2), W = self.size(3);
    Tensor flat = EmptyTensor(DimVector{N * H * W, C}, m.dtype, self.device());
    Tensor w = weight ? CastTo(*weight, m.dtype) : Tensor();
    const bool unreduced = reduction == kNone;
    NllLossBackwardCUDA(unreduced ? ops::reshape(grad, {SymInt(-1)}) : grad, ops::reshape(target, {SymInt(-1)}),
                        weight ? &w : nullptr, reduction, ignore_index.expect_int(), total_weight, flat);
    ops::copy_(out, ops::permute(ops::view(flat, {SymInt(N), SymInt(H), SymInt(W), SymInt(C)}), {0, 3, 1, 2}));
    return out;
  }
  return NllBwImpl(kNll2d, m, grad, target, weight, reduction, ignore_index.expect_int(), total_weight, self.size(0),
                   self.size(1), self.size(2) * self.size(3));
}

// --- pointwise losses ----------------------------------------------------------------------------

enum PointwiseLossKind : int { kMse, kSmoothL1, kHuber };
constexpr const char* kPwNames[] = {"mse_loss_backward", "smooth_l1_loss_backward", "huber_loss_backward"};

// The dtype PyTorch's TensorIterator computes in (0-d operands weak, Note [Weak Python numbers]).
ScalarType PwLossBwCommonType(const Tensor& grad, const Tensor& self, const Tensor& target) {
  ResultTypeState state;
  for (const Tensor* t : {&self, &target, &grad}) state.Update(*t);
  return state.Result();
}

// The result has self's dtype and the broadcast shape of (self, target, grad_output), as
// PyTorch's zeros_like(self) resized by its TensorIterator. mse's and smooth_l1's iterators promote
// the three inputs to their common dtype, compute in it and cast the result to self's dtype (a
// float16 input with a float32 target: its gradient is computed in float32); huber's promotes
// nothing, so each operand must have self's dtype.
TensorMeta PwLossBwMeta(int kind, const Tensor& grad, const Tensor& self, const Tensor& target, int64_t reduction) {
  const char* op = kPwNames[kind];
  CheckReduction(op, reduction);
  if (kind == kHuber) {
    for (const Tensor* t : {&target, &grad})
      KILN_CHECK(t->dtype() == self.dtype(), "Found dtype ", ScalarTypeDisplayName(t->dtype()), " but expected ",
                 ScalarTypeDisplayName(self.dtype()));
  } else {
    const ScalarType common = PwLossBwCommonType(grad, self, target);
    KILN_CHECK(CanCast(common, self.dtype()), "result type ", ScalarTypeDisplayName(common),
               " can't be cast to the desired output type ", ScalarTypeDisplayName(self.dtype()));
  }
  const bool ok = kind == kMse ? self.dtype() != ScalarType::Bool : IsFloating(self.dtype());
  KILN_CHECK_NOT_IMPLEMENTED(ok, "\"", op, "\" not implemented for '", ScalarTypeDisplayName(self.dtype()), "'");
  CheckSameDevice(op, self, target);
  CheckSameDevice(op, self, grad);
  SymDimVector sizes = BroadcastShapes(op, BroadcastShapes(op, self->sym_sizes(), target->sym_sizes()),
                                       grad->sym_sizes());
  return TensorMeta{sizes, {}, self.dtype(), self.device()};
}

template <int kKind>
Tensor PwLossBw(const Tensor& grad, const Tensor& self, const Tensor& target, int64_t reduction, double param) {
  TensorMeta m = PwLossBwMeta(kKind, grad, self, target, reduction);
  const ScalarType result_dtype = m.dtype;
  m.dtype = PwLossBwCommonType(grad, self, target);  // huber's: self's (checked)
  Tensor out = EmptyFromMeta(m);
  if (out.numel() == 0) return CastTo(out, result_dtype);
  const double norm_d = (kKind == kMse ? 2.0 : 1.0) / (reduction == kMean ? static_cast<double>(self.numel()) : 1.0);
  Tensor x = CastTo(self, m.dtype), y = CastTo(target, m.dtype), g = CastTo(grad, m.dtype);
  if (out.device().is_cuda()) {
    PointwiseLossBackwardCUDA(static_cast<PwLoss>(kKind), out, x, y, g, norm_d, param);
    return CastTo(out, result_dtype);
  }
  // PyTorch's kernels (mse_backward, smooth_l1_backward, huber_backward): on scalar_t, every step
  // of a float16/bfloat16 gradient rounded (scalar_t_math.h), except smooth_l1's 16-bit kernel,
  // which computes in float; norm and the parameter rounded to scalar_t first. smooth_l1's and
  // huber's two lambdas differ (Note [PyTorch's two lambdas]): the vectorised one computes
  // norm * (|x| >= beta ? +-1 : x / beta) * grad and norm * (|x| >= delta ? +-delta : x) * grad,
  // the scalar one norm * x * grad / beta and +-norm * grad * delta with beta and delta in double.
  KILN_DISPATCH_NUMERIC(m.dtype, kPwNames[kKind], [&] {
    using C = scalar_t;
    using M = opmath_t<C>;
    constexpr bool kInFloat = kKind == kSmoothL1 && (std::is_same_v<C, Half> || std::is_same_v<C, BFloat16>);
    auto r = [](M v) -> M { return kInFloat ? v : RoundTo<C>(v); };
    const M norm = r(static_cast<M>(norm_d)), p = r(static_cast<M>(param));
    ElementwiseIter iter({out, x, y, g});
    if constexpr (kKind == kMse || std::is_integral_v<M>) {
      auto f = [norm, r](C xc, C yc, C gc) -> C {
        return static_cast<C>(r(norm * r(static_cast<M>(xc) - static_cast<M>(yc))) * static_cast<M>(gc));
      };
      if (g.numel() == 1) {  // a reduced loss: read its one-element grad once (CpuKernel's fast path)
        const C gc = ops::contiguous(g).data_ptr<C>()[0];
        CpuKernel<C, C, C>(ElementwiseIter({out, x, y}), [f, gc](C xc, C yc) { return f(xc, yc, gc); });
      } else {
        CpuKernel<C, C, C, C>(iter, f);
      }
    } else {
      auto vec_f = [norm, p, r](C xc, C yc, C gc) -> C {
        const M d = r(static_cast<M>(xc) - static_cast<M>(yc));
        const M sign = d > M(0) ? M(1) : M(-1);
        const M slope = kKind == kSmoothL1 ? (std::abs(d) >= p ? sign : r(d / p))
                                           : (std::abs(d) >= p ? r(sign * p) : d);
        return static_cast<C>(r(norm * slope) * static_cast<M>(gc));
      };
      auto scalar_f = [norm, param, r](C xc, C yc, C gc) -> C {
        const M d = r(static_cast<M>(xc) - static_cast<M>(yc)), gv = static_cast<M>(gc);
        const double dd = static_cast<double>(d);
        if constexpr (kKind == kSmoothL1) {
          if (dd <= -param) return static_cast<C>(-norm * gv);
          if (dd >= param) return static_cast<C>(norm * gv);
          return static_cast<C>(static_cast<M>(static_cast<double>(r(r(norm * d) * gv)) / param));
        } else {
          if (dd <= -param) return static_cast<C>(static_cast<M>(static_cast<double>(r(-norm * gv)) * param));
          if (dd >= param) return static_cast<C>(static_cast<M>(static_cast<double>(r(norm * gv)) * param));
          return static_cast<C>(r(norm * d) * gv);
        }
      };
      CpuKernelTwoLambdas<C, C, C, C>(iter, vec_f, scalar_f);
    }
  });
  return CastTo(out, result_dtype);
}

Tensor MseBw(const Tensor& grad, const Tensor& self, const Tensor& target, int64_t reduction) {
  return PwLossBw<kMse>(grad, self, target, reduction, 0);
}
TensorMeta MseBwMeta(const Tensor& grad, const Tensor& self, const Tensor& target, int64_t reduction) {
  return PwLossBwMeta(kMse, grad, self, target, reduction);
}
Tensor SmoothL1Bw(const Tensor& grad, const Tensor& self, const Tensor& target, int64_t reduction, double beta) {
  KILN_CHECK(beta >= 0, "[smooth_l1_loss_backward] smooth_l1_loss does not support negative values for beta.");
  return PwLossBw<kSmoothL1>(grad, self, target, reduction, beta);
}
TensorMeta SmoothL1BwMeta(const Tensor& grad, const Tensor& self, const Tensor& target, int64_t reduction,
                          double beta) {
  KILN_CHECK(beta >= 0, "[smooth_l1_loss_backward] smooth_l1_loss does not support negative values for beta.");
  return PwLossBwMeta(kSmoothL1, grad, self, target, reduction);
}
Tensor HuberBw(const Tensor& grad, const Tensor& self, const Tensor& target, int64_t reduction, double delta) {
  return PwLossBw<kHuber>(grad, self, target, reduction, delta);
}
TensorMeta HuberBwMeta(const Tensor& grad, const Tensor& self, const Tensor& target, int64_t reduction, double) {
  return PwLossBwMeta(kHuber, grad, self, target, reduction);
}

// --- binary cross entropy ------------------------------------------------------------------------

constexpr const char* kBce = "binary_cross_entropy_backward";

TensorMeta BceBwMeta(const Tensor& grad, const Tensor& self, const Tensor& target, const OptTensor& weight,
                     int64_t reduction) {
  CheckReduction(kBce, reduction);
  KILN_CHECK_NOT_IMPLEMENTED(IsFloating(self.dtype()), "\"", kBce, "\" not implemented for '",
                             ScalarTypeDisplayName(self.dtype()), "'");
  for (const auto& [what, t] : {std::pair<const char*, const Tensor*>{"grad_output", &grad}, {"target", &target},
                                {"weight", weight ? &*weight : nullptr}}) {
    if (!t) continue;
    CheckSameDevice(kBce, self, *t);
    KILN_CHECK(BroadcastShapes(kBce, (*t)->sym_sizes(), self->sym_sizes()) == self->sym_sizes(), "[", kBce, "] ",
               what, " of size ", ShapeStr(*t), " cannot be broadcast to the input's size ", ShapeStr(self));
  }
  return TensorMeta{self->sym_sizes(), {}, self.dtype(), self.device()};
}

Tensor BceBw(const Tensor& grad, const Tensor& self, const Tensor& target, const OptTensor& weight,
             int64_t reduction) {
  TensorMeta m = BceBwMeta(grad, self, target, weight, reduction);
  Tensor out = EmptyFromMeta(m);
  if (out.numel() == 0) return out;
  const ScalarType dt = m.dtype;
  Tensor g = CastTo(grad, dt), y = CastTo(target, dt);
  Tensor w = weight ? CastTo(*weight, dt) : Tensor();
  const double inv_n = reduction == kMean ? 1.0 / static_cast<double>(self.numel()) : 1.0;
  if (out.device().is_cuda()) {
    BceBackwardCUDA(out, g, self, y, weight ? &w : nullptr, inv_n);
    return out;
  }
  KILN_DISPATCH_FLOATING(dt, kBce, [&] {
    using C = scalar_t;
    using M = opmath_t<C>;
    const C one = C(1.0f);
    ElementwiseIter iter({out, g, self, y, weight ? Operand(w) : Operand::Broadcast(&one)});
    const M scale = static_cast<M>(inv_n);
    CpuKernel<C, C, C, C, C>(iter, [scale](C gc, C xc, C yc, C wc) -> C {
      const M x = static_cast<M>(xc);
      const M d = std::max((M(1) - x) * x, M(1e-12));
      return static_cast<C>(static_cast<M>(gc) * (x - static_cast<M>(yc)) / d * static_cast<M>(wc) * scale);
    });
  });
  return out;
}

// --- embedding -----------------------------------------------------------------------------------

constexpr const char* kEmb = "embedding_dense_backward";

TensorMeta EmbeddingBwMeta(const Tensor& grad, const Tensor& indices, SymInt num_weights, SymInt padding_idx,
                           bool scale_grad_by_freq) {
  (void)padding_idx;
  (void)scale_grad_by_freq;
  KILN_CHECK(indices.dtype() == ScalarType::Int64 || indices.dtype() == ScalarType::Int32,
             "[", kEmb, "] Expected tensor for argument #2 'indices' to have one of the following scalar types: Long, "
             "Int; but got ", ScalarTypeDisplayName(indices.dtype()), " instead");
  KILN_CHECK(grad.dim() >= 1, "[", kEmb, "] expected grad_output with at least 1 dimension, got a 0-dim tensor");
  KILN_CHECK(num_weights >= 0, "[", kEmb, "] num_weights must be non-negative, got ", num_weights.str());
  const SymInt dim = grad->sym_sizes().back();
  KILN_CHECK(grad->sym_numel() == indices->sym_numel() * dim, "[", kEmb, "] shape '[", indices->sym_numel().str(), ", ",
             dim.str(), "]' is invalid for grad_output of size ", grad->sym_numel().str(), " (indices of size ",
             ShapeStr(indices), ", grad_output of size ", ShapeStr(grad), ")");
  CheckSameDevice(kEmb, grad, indices);
  KILN_CHECK_NOT_IMPLEMENTED(grad.dtype() != ScalarType::Bool, "\"", kEmb, "\" not implemented for 'Bool'");
  return TensorMeta{{num_weights, dim}, {}, grad.dtype(), grad.device()};
}

Tensor EmbeddingBw(const Tensor& grad, const Tensor& indices, SymInt num_weights, SymInt padding_idx,
                   bool scale_grad_by_freq) {
  Tensor out = EmptyFromMeta(EmbeddingBwMeta(grad, indices, num_weights, padding_idx, scale_grad_by_freq));
  if (out.device().is_cuda()) {
    EmbeddingBackwardCUDA(grad, indices, padding_idx.expect_int(), scale_grad_by_freq, out);
    return out;
  }
  ops::fill_(out, 0);
  const int64_t n = indices.numel(), rows = out.size(0), D = out.size(1), pad = padding_idx.expect_int();
  if (n == 0 || D == 0) return out;
  Tensor idx = ops::contiguous(CastTo(indices, ScalarType::Int64)), g = ops::contiguous(grad);
  const int64_t* ip = idx.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    KILN_CHECK_INDEX(ip[i] >= 0 && ip[i] < rows, "[", kEmb, "] index ", ip[i], " is out of range for ", rows,
                     " embeddings");
  }
  std::vector<int64_t> counts;
  if (scale_grad_by_freq) {
    counts.assign(rows, 0);
    for (int64_t i = 0; i < n; ++i) ++counts[ip[i]];
  }
  KILN_DISPATCH_NUMERIC(grad.dtype(), kEmb, [&] {
    using T = scalar_t;
    using M = opmath_t<T>;
    const T* gp = g.data_ptr<T>();
    T* op = out.data_ptr<T>();
    // Columns in parallel, indices in order within each: deterministic sums.
    ParallelFor(0, D, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(n, 1)), [&](int64_t lo, int64_t hi) {
      for (int64_t i = 0; i < n; ++i) {
        const int64_t r = ip[i];
        if (r == pad) continue;
        T* dst = op + r * D;
        const T* src = gp + i * D;
        if (scale_grad_by_freq) {
          const M c = static_cast<M>(counts[r]);
          for (int64_t j = lo; j < hi; ++j)
            dst[j] = static_cast<T>(static_cast<M>(dst[j]) + static_cast<M>(src[j]) / c);
        } else {
          for (int64_t j = lo; j < hi; ++j) dst[j] = static_cast<T>(static_cast<M>(dst[j]) + static_cast<M>(src[j]));
        }
      }
    });
  });
  return out;
}

// --- dropout -------------------------------------------------------------------------------------

// grad * mask * scale: the dtype of grad * mask, lifted to the default float when integral.
TensorMeta DropoutBwMeta(const Tensor& grad, const Tensor& mask, double scale) {
  (void)scale;
  ScalarType dt = ResultType(grad, mask);
  if (!IsFloating(dt)) dt = GetDefaultDtype();
  return ElementwiseMeta("native_dropout_backward", grad, mask, dt);
}

Tensor DropoutBw(const Tensor& grad, const Tensor& mask, double scale) {
  TensorMeta m = DropoutBwMeta(grad, mask, scale);
  Tensor out = EmptyFromMeta(m);
  if (out.numel() == 0) return out;
  if (out.device().is_cuda()) {  // as below: both operands in out's dtype, then multiplied in its opmath type
    const ScalarType t = out.dtype();
    const char* name = "native_dropout_backward";
    const codegen::DType c = cuda::CodegenDType(t, name), acc = cuda::OpmathDType(t, name);
    auto operand = [&](int i) { return codegen::Expr::Cast(codegen::Expr::Cast(cuda::Input(i), c), acc); };
    auto mul = [](codegen::ExprPtr a, codegen::ExprPtr b) { return codegen::Expr::Op(codegen::OpCode::kMul, {a, b}); };
    cuda::LaunchPointwise(name, out, {cuda::PointwiseInput::Of(grad), cuda::PointwiseInput::Of(mask),
                                      cuda::PointwiseInput::Number(Scalar(scale), t)},
                          mul(mul(operand(0), operand(1)), cuda::OpmathInput(2, t, name)));
    return out;
  }
  Tensor g = CastTo(grad, m.dtype), k = CastTo(mask, m.dtype);
  ElementwiseIter iter({out, g, k});
  KILN_DISPATCH_FLOATING(m.dtype, "native_dropout_backward", [&] {
    using C = scalar_t;
    using M = opmath_t<C>;
    const M s = static_cast<M>(scale);
    CpuKernel<C, C, C>(iter, [s](C gc, C mc) -> C {
      return static_cast<C>(static_cast<M>(gc) * static_cast<M>(mc) * s);
    });
  });
  return out;
}

}  // namespace

void RegisterLossBackwardOps(Registry& r) {
  r.Def("nll_loss_backward(Tensor grad_output, Tensor self, Tensor target, Tensor? weight, int reduction, "
        "SymInt ignore_index, Tensor total_weight) -> Tensor")
      .CPUAndCUDA<&NllBw>().Meta<&NllBwMeta>();
  r.Def("nll_loss2d_backward(Tensor grad_output, Tensor self, Tensor target, Tensor? weight, int reduction, "
        "SymInt ignore_index, Tensor total_weight) -> Tensor")
      .CPUAndCUDA<&Nll2dBw>().Meta<&Nll2dBwMeta>();
  r.Def("mse_loss_backward(Tensor grad_output, Tensor self, Tensor target, int reduction) -> Tensor")
      .CPUAndCUDA<&MseBw>().Meta<&MseBwMeta>();
  r.Def("smooth_l1_loss_backward(Tensor grad_output, Tensor self, Tensor target, int reduction, float beta) -> Tensor")
      .CPUAndCUDA<&SmoothL1Bw>().Meta<&SmoothL1BwMeta>();
  r.Def("huber_loss_backward(Tensor grad_output, Tensor self, Tensor target, int reduction, float delta) -> Tensor")
      .CPUAndCUDA<&HuberBw>().Meta<&HuberBwMeta>();
  r.Def("binary_cross_entropy_backward(Tensor grad_output, Tensor self, Tensor target, Tensor? weight=None, "
        "int reduction=Mean) -> Tensor")
      .CPUAndCUDA<&BceBw>().Meta<&BceBwMeta>();
  r.Def("embedding_dense_backward(Tensor grad_output, Tensor indices, SymInt num_weights, SymInt padding_idx, "
        "bool scale_grad_by_freq) -> Tensor", {Tag::core})
      .CPUAndCUDA<&EmbeddingBw>().Meta<&EmbeddingBwMeta>();
  r.Def("native_dropout_backward(Tensor grad_output, Tensor mask, float scale) -> Tensor", {Tag::pointwise})
      .CPUAndCUDA<&DropoutBw>().Meta<&DropoutBwMeta>();
}

}  // namespace kiln
