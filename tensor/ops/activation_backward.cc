// tensor/ops/activation_backward.cc: the backward ops of the activations (threshold_backward,
// gelu_backward, sigmoid_backward, tanh_backward, silu_backward, leaky_relu_backward,
// hardtanh_backward, elu_backward, softplus_backward, hardsigmoid_backward, hardswish_backward,
// mish_backward, logit_backward) and of softmax (_softmax_backward_data,
// _log_softmax_backward_data), as aten ops of their own so autograd's formulas and the tracers
// see aten-level nodes.
//
// The pointwise ones share one table, as the forward activations do (activation.cc): a BwOp, its
// Scalar parameters, and an element function f(grad, x) over the opmath type. grad_output and the
// saved tensor broadcast together and promote to a common dtype (PyTorch's binary TensorIterator);
// the loop is CpuKernel's, so contiguous and broadcast-scalar operands take its fast paths and
// large tensors run in parallel. The softmax backward ops view their inputs as [outer, dim, inner]
// like the forward and reduce each line in the acc type. The pointwise ones' table, element functions
// and loops are in activation_backward_kernels.h; the loops compile in activation_backward_kernels_*.cc.
#include <array>
#include <cmath>
#include <limits>

#include "tensor/cuda/pointwise.h"
#include "tensor/ops/activation_backward_kernels.h"
#include "tensor/ops/common.h"
#include "tensor/ops/reduce_cuda.h"
#include "tensor/ops/softmax_rows.h"

namespace kiln {
namespace {

using namespace activation_backward;  // NOLINT: the op enum, kBw and the loops (activation_backward_kernels.h)

using RunBwFn = void (*)(const ElementwiseIter&, ScalarType, const BwParams&);
template <int... I>
constexpr std::array<RunBwFn, sizeof...(I)> MakeBwTable(std::integer_sequence<int, I...>) {
  return {&RunBw<I>...};
}
constexpr auto kRunBw = MakeBwTable(std::make_integer_sequence<int, kNumBwOps>{});

// CUDA: ApplyBw as kernel IR over g and x (in opmath m) and the parameters a, b, c (numbers in
// opmath), with PyTorch's CUDA formulas (its kernels have one lambda each: the scalar ones').
codegen::ExprPtr BwExpr(int op, const codegen::ExprPtr& g, const codegen::ExprPtr& x, const codegen::ExprPtr& a,
                        const codegen::ExprPtr& b, const codegen::ExprPtr& c, codegen::DType m) {
  using codegen::OpCode;
  using IR = codegen::ExprPtr;
  auto k = [&](double v) { return codegen::Expr::Const(v, m); };
  auto f = [](OpCode o, std::vector<IR> args) { return codegen::Expr::Op(o, std::move(args)); };
  auto mul = [&](IR l, IR r) { return f(OpCode::kMul, {l, r}); };
  auto add = [&](IR l, IR r) { return f(OpCode::kAdd, {l, r}); };
  auto sub = [&](IR l, IR r) { return f(OpCode::kSub, {l, r}); };
  auto where = [&](IR cond, IR t, IR e) { return f(OpCode::kWhere, {cond, t, e}); };
  auto either = [&](IR l, IR r) { return f(OpCode::kLogicalOr, {l, r}); };
  auto both = [&](IR l, IR r) { return f(OpCode::kLogicalAnd, {l, r}); };
  auto sigmoid = [&](IR v) { return f(OpCode::kDiv, {k(1), add(k(1), f(OpCode::kExp, {f(OpCode::kNeg, {v})}))}); };
  switch (op) {
    case kThresholdBw: return where(f(OpCode::kLe, {x, a}), k(0), g);
    case kGeluBw: {
      IR cdf = mul(k(0.5), add(k(1), f(OpCode::kErf, {mul(x, k(M_SQRT1_2))})));
      IR pdf = mul(f(OpCode::kExp, {mul(mul(k(-0.5), x), x)}), k(M_2_SQRTPI * M_SQRT1_2 * 0.5));
      return mul(g, add(cdf, mul(x, pdf)));
    }
    case kGeluTanhBw: {
      IR beta = k(M_SQRT2 * M_2_SQRTPI * 0.5), kappa = k(0.044715);
      IR x2 = mul(x, x);
      IR t = f(OpCode::kTanh, {mul(beta, add(x, mul(mul(kappa, x2), x)))});
      IR dleft = mul(k(0.5), add(k(1), t));
      IR dright = mul(mul(mul(mul(k(0.5), x), sub(k(1), mul(t, t))), beta), add(k(1), mul(mul(k(3), kappa), x2)));
      return mul(g, add(dleft, dright));
    }
    case kSigmoidBw: return mul(mul(g, sub(k(1), x)), x);
    case kTanhBw: return mul(g, sub(k(1), mul(x, x)));
    case kSiluBw: {
      IR s = sigmoid(x);
      return mul(mul(g, s), add(k(1), mul(x, sub(k(1), s))));
    }
    case kLeakyReluBw: return where(f(OpCode::kGt, {x, k(0)}), g, mul(g, a));
    case kHardtanhBw: return where(either(f(OpCode::kLe, {x, a}), f(OpCode::kGe, {x, b})), k(0), g);
    case kEluBw:
      return where(f(OpCode::kLe, {x, k(0)}), mul(mul(mul(g, c), a), f(OpCode::kExp, {mul(x, c)})), mul(g, b));
    case kEluResultBw: return where(f(OpCode::kLe, {x, k(0)}), mul(mul(g, c), add(x, a)), mul(g, b));
    case kSoftplusBw: {
      IR z = f(OpCode::kExp, {mul(x, a)});
      return where(f(OpCode::kGt, {mul(x, a), b}), g, f(OpCode::kDiv, {mul(g, z), add(z, k(1))}));
    }
    case kHardsigmoidBw:
      return where(both(f(OpCode::kGt, {x, k(-3)}), f(OpCode::kLt, {x, k(3)})), mul(g, k(1.0f / 6.0f)), k(0));
    case kHardswishBw:
      return where(f(OpCode::kLe, {x, k(-3)}), k(0),
                   where(f(OpCode::kLt, {x, k(3)}), mul(g, add(f(OpCode::kDiv, {x, k(3)}), k(0.5))), g));
    case kMishBw: {
      IR s = sigmoid(x);
      IR t = f(OpCode::kTanh, {f(OpCode::kLog1p, {f(OpCode::kExp, {x})})});
      return mul(g, add(t, mul(mul(x, s), sub(k(1), mul(t, t)))));
    }
    case kLogitBw: {  // PyTorch's CUDA kernel: a = lo, b = hi, c < 0 without eps (NaN outside [0, 1])
      const IR no_eps = f(OpCode::kLt, {c, k(0)});
      const IR outside = f(OpCode::kLogicalOr, {f(OpCode::kLt, {x, f(OpCode::kWhere, {no_eps, k(0), a})}),
                                               f(OpCode::kGt, {x, f(OpCode::kWhere, {no_eps, k(1), b})})});
      return f(OpCode::kWhere, {outside, f(OpCode::kWhere, {no_eps, k(std::nan("")), k(0)}),
                                f(OpCode::kDiv, {g, mul(x, sub(k(1), x))})});
    }
  }
  KILN_INTERNAL_ASSERT(false, "no CUDA expression for ", kBw[op].op);
  return g;
}

// grad_output and x broadcast together; the result has their promoted dtype, contiguous.
TensorMeta BwMeta(int op, const Tensor& grad, const Tensor& x) {
  const ScalarType dt = ResultType(grad, x);
  const bool ok = IsFloating(dt) || (kBw[op].integral && IsIntegral(dt, /*include_bool=*/false));
  KILN_CHECK_NOT_IMPLEMENTED(ok, "\"", kBw[op].kernel, "\" not implemented for '", ScalarTypeDisplayName(dt),
                             "' (", kBw[op].op, ")");
  return ElementwiseMeta(kBw[op].op, grad, x, dt);
}

Tensor BwRun(int op, const Tensor& grad, const Tensor& x, const BwParams& p) {
  Tensor out = EmptyFromMeta(BwMeta(op, grad, x));
  if (out.numel() == 0) return out;
  if (out.device().is_cuda()) {
    const ScalarType t = out.dtype();
    const char* name = kBw[op].op;
    const codegen::DType m = cuda::OpmathDType(t, name);
    std::vector<cuda::PointwiseInput> inputs = {cuda::PointwiseInput::Of(grad), cuda::PointwiseInput::Of(x)};
    BwParams q = p;
    if (op == kLogitBw) q = BwParams{p.a, 1.0 - p.a, p.a};  // lo = eps, hi = 1 - eps, c < 0: no eps
    for (double v : {q.a, q.b, q.c}) inputs.push_back(cuda::PointwiseInput::Number(Scalar(v), t));
    auto param = [&](int i) {  // bounds are Scalars converted to the tensor's dtype (threshold, hardtanh)
      return op == kThresholdBw || op == kHardtanhBw ? cuda::InputAsElement(i, t, name) : cuda::OpmathInput(i, t, name);
    };
    cuda::LaunchPointwise(name, out, inputs,
                          BwExpr(op, cuda::OpmathInput(0, t, name), cuda::OpmathInput(1, t, name), param(2), param(3),
                                 param(4), m));
    return out;
  }
  Tensor g = CastTo(grad, out.dtype()), v = CastTo(x, out.dtype());
  ElementwiseIter iter({out, g, v});
  kRunBw[op](iter, out.dtype(), p);
  return out;
}

// (grad_output, self) ops with no parameters.
template <int kOp>
struct Bw0 {
  static Tensor Fn(const Tensor& g, const Tensor& x) { return BwRun(kOp, g, x, {}); }
  static TensorMeta Meta(const Tensor& g, const Tensor& x) { return BwMeta(kOp, g, x); }
};

Tensor ThresholdBw(const Tensor& g, const Tensor& x, const Scalar& th) {
  return BwRun(kThresholdBw, g, x, {th.to_double()});
}
TensorMeta ThresholdBwMeta(const Tensor& g, const Tensor& x, const Scalar&) { return BwMeta(kThresholdBw, g, x); }

int GeluBwOp(const std::string& approximate) {
  KILN_CHECK(approximate == "none" || approximate == "tanh",
             "[gelu_backward] approximate argument must be either none or tanh, got '", approximate, "'");
  return approximate == "tanh" ? kGeluTanhBw : kGeluBw;
}
Tensor GeluBw(const Tensor& g, const Tensor& x, std::string approximate) {
  return BwRun(GeluBwOp(approximate), g, x, {});
}
TensorMeta GeluBwMeta(const Tensor& g, const Tensor& x, std::string approximate) {
  return BwMeta(GeluBwOp(approximate), g, x);
}

void CheckLeakyRelu(const Scalar& slope, bool self_is_result) {
  KILN_CHECK(!self_is_result || slope.to_double() >= 0.0,
             "In-place leakyReLu backward calculation is triggered with a negative slope which is not supported. This "
             "is caused by calling in-place forward function with a negative slope, please call out-of-place version "
             "instead. File an issue at https://github.com/pytorch/pytorch if you do require supporting in-place "
             "leakRelu backward calculation with negative slope");
}
Tensor LeakyReluBw(const Tensor& g, const Tensor& x, const Scalar& slope, bool self_is_result) {
  CheckLeakyRelu(slope, self_is_result);
  return BwRun(kLeakyReluBw, g, x, {slope.to_double()});
}
TensorMeta LeakyReluBwMeta(const Tensor& g, const Tensor& x, const Scalar& slope, bool self_is_result) {
  CheckLeakyRelu(slope, self_is_result);
  return BwMeta(kLeakyReluBw, g, x);
}

Tensor HardtanhBw(const Tensor& g, const Tensor& x, const Scalar& lo, const Scalar& hi) {
  return BwRun(kHardtanhBw, g, x, {lo.to_double(), hi.to_double()});
}
TensorMeta HardtanhBwMeta(const Tensor& g, const Tensor& x, const Scalar&, const Scalar&) {
  return BwMeta(kHardtanhBw, g, x);
}

BwParams EluParams(const Scalar& alpha, const Scalar& scale, const Scalar& input_scale, bool is_result) {
  KILN_CHECK(!is_result || alpha.to_double() >= 0.0,
             "In-place elu backward calculation is triggered with a negative slope which is not supported. This is "
             "caused by calling in-place forward function with a negative slope, please call out-of-place version "
             "instead.");
  return {alpha.to_double() * scale.to_double(), scale.to_double(), input_scale.to_double()};
}
Tensor EluBw(const Tensor& g, const Scalar& alpha, const Scalar& scale, const Scalar& input_scale, bool is_result,
             const Tensor& self_or_result) {
  BwParams p = EluParams(alpha, scale, input_scale, is_result);
  return BwRun(is_result ? kEluResultBw : kEluBw, g, self_or_result, p);
}
TensorMeta EluBwMeta(const Tensor& g, const Scalar& alpha, const Scalar& scale, const Scalar& input_scale,
                     bool is_result, const Tensor& self_or_result) {
  EluParams(alpha, scale, input_scale, is_result);
  return BwMeta(kEluBw, g, self_or_result);
}

Tensor SoftplusBw(const Tensor& g, const Tensor& x, const Scalar& beta, const Scalar& threshold) {
  return BwRun(kSoftplusBw, g, x, {beta.to_double(), threshold.to_double()});
}
TensorMeta SoftplusBwMeta(const Tensor& g, const Tensor& x, const Scalar&, const Scalar&) {
  return BwMeta(kSoftplusBw, g, x);
}

Tensor LogitBw(const Tensor& g, const Tensor& x, std::optional<double> eps) {
  return BwRun(kLogitBw, g, x, {eps && *eps >= 0 ? *eps : -1.0});
}
TensorMeta LogitBwMeta(const Tensor& g, const Tensor& x, std::optional<double>) { return BwMeta(kLogitBw, g, x); }

// --- softmax / log_softmax backward ----------------------------------------------------------

template <bool kLog>
constexpr const char* SoftmaxBwName() {
  return kLog ? "_log_softmax_backward_data" : "_softmax_backward_data";
}

// PyTorch's meta: grad and output of one size; the result has grad's dtype, except that a float
// grad of a half input comes back half (CUDA's half_to_float; the CPU kernel then refuses it).
template <bool kLog>
TensorMeta SoftmaxBwMeta(const Tensor& grad, const Tensor& output, int64_t dim, ScalarType input_dtype) {
  KILN_CHECK(grad->sym_sizes() == output->sym_sizes(), "[", SoftmaxBwName<kLog>(), "] grad_output of size ",
             ShapeStr(grad), " and output of size ", ShapeStr(output), " must have the same size");
  WrapDim(dim, grad.dim());
  ScalarType dt = grad.dtype();
  if (dt != input_dtype && dt == ScalarType::Float32 && input_dtype == ScalarType::Float16) dt = ScalarType::Float16;
  return TensorMeta{grad->sym_sizes(), {}, dt, grad.device()};
}

template <bool kLog, typename T>
void SoftmaxBwKernel(const T* g, const T* y, T* out, int64_t outer, int64_t n, int64_t inner) {
  using Acc = acc_t<T>;
  if constexpr (std::is_same_v<T, float>) {
    if (inner == 1) {  // contiguous rows (Note [Softmax rows])
      ParallelFor(0, outer, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
        softmax_rows::Backward<kLog>(g, y, out, n, b, e);
      });
      return;
    }
  }
  ParallelFor(0, outer * inner, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
    for (int64_t line = b; line < e; ++line) {
      const int64_t base = (line / inner) * n * inner + line % inner;
      const T* gp = g + base;
      const T* yp = y + base;
      T* op = out + base;
      Acc sum = 0;
      for (int64_t k = 0; k < n; ++k) {
        const Acc gv = static_cast<Acc>(gp[k * inner]);
        sum += kLog ? gv : gv * static_cast<Acc>(yp[k * inner]);
      }
      for (int64_t k = 0; k < n; ++k) {
        const Acc gv = static_cast<Acc>(gp[k * inner]), yv = static_cast<Acc>(yp[k * inner]);
        op[k * inner] = static_cast<T>(kLog ? gv - std::exp(yv) * sum : yv * (gv - sum));
      }
    }
  });
}

template <bool kLog>
Tensor SoftmaxBw(const Tensor& grad, const Tensor& output, int64_t dim, ScalarType input_dtype) {
  TensorMeta m = SoftmaxBwMeta<kLog>(grad, output, dim, input_dtype);
  KILN_CHECK(output.dtype() == grad.dtype(), "[", SoftmaxBwName<kLog>(), "] expected scalar type ",
             ScalarTypeDisplayName(grad.dtype()), " but found ", ScalarTypeDisplayName(output.dtype()));
  if (grad.device().is_cuda()) {  // a float32 gradient of a half_to_float softmax gives a 16-bit one there
    CheckSameDevice(SoftmaxBwName<kLog>(), grad, output);
    Tensor out = EmptyFromMeta(m);
    if (out.numel() > 0) SoftmaxBackwardCUDA(kLog, grad, output, WrapDim(dim, grad.dim()), out);
    return out;
  }
  KILN_CHECK(m.dtype == grad.dtype(), "[", SoftmaxBwName<kLog>(),
             "] softmax backward with half to float conversion is not supported on CPU");
  Tensor out = EmptyFromMeta(m);
  if (out.numel() == 0) return out;
  const int64_t d = WrapDim(dim, grad.dim());
  int64_t outer = 1, n = 1, inner = 1;
  for (int64_t k = 0; k < grad.dim(); ++k) {
    if (k < d) outer *= grad.size(k);
    else if (k == d) n = grad.size(k);
    else inner *= grad.size(k);
  }
  Tensor g = ops::contiguous(grad), y = ops::contiguous(output);
  KILN_DISPATCH_FLOATING(grad.dtype(), kLog ? "log_softmax_backward_kernel_impl" : "softmax_backward_kernel_impl", [&] {
    SoftmaxBwKernel<kLog, scalar_t>(g.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), outer,
                                    n, inner);
  });
  return out;
}

}  // namespace

void RegisterActivationBackwardOps(Registry& r) {
  std::initializer_list<Tag> pw = {Tag::pointwise};
  r.Def("threshold_backward(Tensor grad_output, Tensor self, Scalar threshold) -> Tensor", pw)
      .CPUAndCUDA<&ThresholdBw>().Meta<&ThresholdBwMeta>();
  r.Def("gelu_backward(Tensor grad_output, Tensor self, *, str approximate='none') -> Tensor", pw)
      .CPUAndCUDA<&GeluBw>().Meta<&GeluBwMeta>();
  r.Def("sigmoid_backward(Tensor grad_output, Tensor output) -> Tensor", pw)
      .CPUAndCUDA<&Bw0<kSigmoidBw>::Fn>().Meta<&Bw0<kSigmoidBw>::Meta>();
  r.Def("tanh_backward(Tensor grad_output, Tensor output) -> Tensor", pw)
      .CPUAndCUDA<&Bw0<kTanhBw>::Fn>().Meta<&Bw0<kTanhBw>::Meta>();
  r.Def("silu_backward(Tensor grad_output, Tensor self) -> Tensor", pw)
      .CPUAndCUDA<&Bw0<kSiluBw>::Fn>().Meta<&Bw0<kSiluBw>::Meta>();
  r.Def("leaky_relu_backward(Tensor grad_output, Tensor self, Scalar negative_slope, bool self_is_result) -> Tensor")
      .CPUAndCUDA<&LeakyReluBw>().Meta<&LeakyReluBwMeta>();
  r.Def("hardtanh_backward(Tensor grad_output, Tensor self, Scalar min_val, Scalar max_val) -> Tensor")
      .CPUAndCUDA<&HardtanhBw>().Meta<&HardtanhBwMeta>();
  r.Def("elu_backward(Tensor grad_output, Scalar alpha, Scalar scale, Scalar input_scale, bool is_result, "
        "Tensor self_or_result) -> Tensor")
      .CPUAndCUDA<&EluBw>().Meta<&EluBwMeta>();
  r.Def("softplus_backward(Tensor grad_output, Tensor self, Scalar beta, Scalar threshold) -> Tensor")
      .CPUAndCUDA<&SoftplusBw>().Meta<&SoftplusBwMeta>();
  r.Def("hardsigmoid_backward(Tensor grad_output, Tensor self) -> Tensor")
      .CPUAndCUDA<&Bw0<kHardsigmoidBw>::Fn>().Meta<&Bw0<kHardsigmoidBw>::Meta>();
  r.Def("hardswish_backward(Tensor grad_output, Tensor self) -> Tensor")
      .CPUAndCUDA<&Bw0<kHardswishBw>::Fn>().Meta<&Bw0<kHardswishBw>::Meta>();
  r.Def("mish_backward(Tensor grad_output, Tensor self) -> Tensor")
      .CPUAndCUDA<&Bw0<kMishBw>::Fn>().Meta<&Bw0<kMishBw>::Meta>();
  r.Def("logit_backward(Tensor grad_output, Tensor self, float? eps=None) -> Tensor", pw)
      .CPUAndCUDA<&LogitBw>().Meta<&LogitBwMeta>();
  r.Def("_softmax_backward_data(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor")
      .Cost(CostClass::kMemoryBound)
      .CPUAndCUDA<&SoftmaxBw<false>>().Meta<&SoftmaxBwMeta<false>>();
  r.Def("_log_softmax_backward_data(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor")
      .Cost(CostClass::kMemoryBound)
      .CPUAndCUDA<&SoftmaxBw<true>>().Meta<&SoftmaxBwMeta<true>>();
}

}  // namespace kiln
