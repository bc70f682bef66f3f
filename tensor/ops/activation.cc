// tensor/ops/activation.cc: activation functions (_softmax/_log_softmax and their softmax.int
// composites, gelu, leaky_relu, hardtanh, elu, softplus, threshold, hardsigmoid, hardswish,
// relu6, logit, nan_to_num).
//
// The pointwise activations share one table: an ActOp, the Scalar parameters of its schema
// (ActParams), a dtype rule, and an element function over the opmath type (float for the 16-bit
// floats). Each gets a functional op and an in-place `op_`, both with meta functions; the functional
// one's CPU element function also registers as kernel IR (ActExprCpu, RegisterActIr), from which
// Inductor lowers it with its numbers as constants (gelu and nan_to_num keep Python lowerings).
// Softmax views its input as [outer, dim, inner] and normalises each (outer, inner) line in the
// input's opmath type (float for float32, as PyTorch), after subtracting the line's max.
#include <array>
#include <cmath>
#include <type_traits>

#include "tensor/cuda/pointwise.h"
#include "tensor/ops/common.h"
#include "tensor/ops/pointwise_ir.h"
#include "tensor/ops/reduce_cuda.h"
#include "tensor/ops/softmax_rows.h"
#include "tensor/vec_avx512.h"
#include "tensor/vec_math.h"

namespace kiln {
namespace {

enum ActOp : int {
  kGelu, kGeluTanh, kGeluLibmErf, kLeakyRelu, kHardtanh, kElu, kSoftplus, kThreshold, kHardsigmoid, kHardswish, kLogit,
  kNanToNum, kNumActs,
};

// Which dtypes an activation takes: floating only, any numeric type (not bool), integers promoted
// to the default float (logit), or every dtype (nan_to_num).
enum class ActDtypes { Floating, NumericNoBool, IntToFloat, All };

struct ActSpec {
  const char* name;
  ActDtypes dtypes;
};

const ActSpec kActs[] = {
    {"gelu", ActDtypes::Floating},        {"gelu", ActDtypes::Floating},     {"gelu", ActDtypes::Floating},
    {"leaky_relu", ActDtypes::Floating},  {"hardtanh", ActDtypes::NumericNoBool},
    {"elu", ActDtypes::Floating},         {"softplus", ActDtypes::Floating},
    {"threshold", ActDtypes::NumericNoBool}, {"hardsigmoid", ActDtypes::Floating},
    {"hardswish", ActDtypes::Floating},   {"logit", ActDtypes::IntToFloat},
    {"nan_to_num", ActDtypes::All},
};

// The scalar arguments, as doubles (a, b, c in schema order).
struct ActParams {
  double a = 0, b = 0, c = 0;
};

// M: the op-math type the value is computed in; C: the tensor's element type.
template <typename M, typename C = M>
[[gnu::always_inline]] inline M ApplyAct(int op, M x, const ActParams& p) {
  if constexpr (std::is_floating_point_v<M>) {
    switch (op) {
      case kGelu:
        // float32: 0.5 * fma(x, erf, x), which is what PyTorch's vectorized float kernel computes
        // (+0. below about -5.8 and at -0., where x * cdf gives -0.); float64 and the 16-bit
        // types (computed in float): x * 0.5 * (1 + erf), as PyTorch's
        if constexpr (std::is_same_v<C, float>) return GeluF(x);
        else return x * NormalCdf(x);
      case kGeluLibmErf:  // PyTorch's scalar loop: libm's erf (Note [gelu's two loops])
        return x * M(0.5) * (M(1) + std::erf(x * M(M_SQRT1_2)));
      case kGeluTanh: {  // PyTorch's order: x^3 first, its multiply-add fused (as its build does)
        const M k = M(M_2_SQRTPI * M_SQRT1_2);  // sqrt(2 / pi)
        const M x_cube = x * x * x;
        return M(0.5) * x * (M(1) + Tanh(k * std::fma(M(0.044715), x_cube, x)));
      }
      case kLeakyRelu: return x > M(0) ? x : x * M(p.a);
      case kHardtanh: {  // clamp(x, min, max): max wins when min > max, as in PyTorch
        const M y = x < M(p.a) ? M(p.a) : x;
        return y > M(p.b) ? M(p.b) : y;
      }
      case kElu: return x <= M(0) ? std::expm1(x * M(p.c)) * M(p.a * p.b) : x * M(p.b);
      case kSoftplus: return x * M(p.a) > M(p.b) ? x : std::log1p(std::exp(x * M(p.a))) / M(p.a);
      case kThreshold: return x <= M(p.a) ? M(p.b) : x;
      case kHardsigmoid: return std::min(std::max(x + M(3), M(0)), M(6)) / M(6);
      case kHardswish: return x * std::min(std::max(x + M(3), M(0)), M(6)) / M(6);
      case kLogit: {
        if (p.a >= 0) x = x < M(p.a) ? M(p.a) : (x > M(1 - p.a) ? M(1 - p.a) : x);
        return std::log(x / (M(1) - x));
      }
      case kNanToNum:
        if (x != x) return M(p.a);
        if (x == std::numeric_limits<M>::infinity()) return M(p.b);
        if (x == -std::numeric_limits<M>::infinity()) return M(p.c);
        return x;
    }
  } else {
    switch (op) {
      case kHardtanh: {
        const M lo = static_cast<M>(p.a), hi = static_cast<M>(p.b);
        const M y = x < lo ? lo : x;
        return y > hi ? hi : y;
      }
      case kThreshold: return x <= static_cast<M>(p.a) ? static_cast<M>(p.b) : x;
    }
  }
  return x;
}

void CheckActDtype(int op, ScalarType t) {
  const ActSpec& spec = kActs[op];
  bool ok = spec.dtypes == ActDtypes::All || spec.dtypes == ActDtypes::IntToFloat ||
            (spec.dtypes == ActDtypes::Floating && IsFloating(t)) ||
            (spec.dtypes == ActDtypes::NumericNoBool && t != ScalarType::Bool);
  KILN_CHECK_NOT_IMPLEMENTED(ok, "\"", spec.name, "\" not implemented for '", ScalarTypeDisplayName(t), "'");
}
ScalarType ActResultType(int op, ScalarType t) {
  return kActs[op].dtypes == ActDtypes::IntToFloat && IsIntegral(t, true) ? GetDefaultDtype() : t;
}

// The elementwise loop of one activation, with the op fixed at compile time.
template <int kOp>
void RunAct(const ElementwiseIter& iter, ScalarType dtype, const ActParams& p) {
  KILN_DISPATCH_ALL(dtype, kActs[kOp].name, [&] {
    using C = scalar_t;
    using M = opmath_t<C>;
    if constexpr (kOp == kNanToNum && !std::is_floating_point_v<M>) {
      CpuKernel<C, C>(iter, [](C x) { return x; });  // integers hold no NaN or inf
    } else if constexpr (kOp == kGelu && std::is_same_v<C, float>) {
      CpuKernelVec<float, float>(iter, [p](float x) { return ApplyAct<float, float>(kOp, x, p); }, avx512::GeluRun);
    } else {
      CpuKernel<C, C>(iter, [p](C x) -> C { return static_cast<C>(ApplyAct<M, C>(kOp, static_cast<M>(x), p)); });
    }
  });
}
using RunActFn = void (*)(const ElementwiseIter&, ScalarType, const ActParams&);
template <int... I>
constexpr std::array<RunActFn, sizeof...(I)> MakeActTable(std::integer_sequence<int, I...>) {
  return {&RunAct<I>...};
}
constexpr auto kRunAct = MakeActTable(std::make_integer_sequence<int, kNumActs>{});

// CUDA: the element function as kernel IR over x (in opmath m) and the parameters a, b, c (numbers
// read in opmath), with PyTorch's CUDA formulas (gelu: x * 0.5 * (1 + erf(x / sqrt 2)) in opmath).
codegen::ExprPtr ActExpr(int op, const codegen::ExprPtr& x, const codegen::ExprPtr& a, const codegen::ExprPtr& b,
                         const codegen::ExprPtr& c, codegen::DType m, const ActParams& p) {
  using codegen::OpCode;
  using IR = codegen::ExprPtr;
  auto k = [&](double v) { return codegen::Expr::Const(v, m); };
  auto f = [](OpCode o, std::vector<IR> args) { return codegen::Expr::Op(o, std::move(args)); };
  auto where = [&](IR cond, IR t, IR e) { return f(OpCode::kWhere, {cond, t, e}); };
  auto relu6 = [&](IR v) { return f(OpCode::kMin, {f(OpCode::kMax, {f(OpCode::kAdd, {v, k(3)}), k(0)}), k(6)}); };
  switch (op) {
    case kGelu: case kGeluLibmErf:
      return f(OpCode::kMul, {f(OpCode::kMul, {x, k(0.5)}),
                              f(OpCode::kAdd, {k(1), f(OpCode::kErf, {f(OpCode::kMul, {x, k(M_SQRT1_2)})})})});
    case kGeluTanh: {
      IR cube = f(OpCode::kMul, {f(OpCode::kMul, {x, x}), x});
      IR inner = f(OpCode::kMul, {k(M_SQRT2 * M_2_SQRTPI * 0.5), f(OpCode::kAdd, {x, f(OpCode::kMul, {k(0.044715), cube})})});
      return f(OpCode::kMul, {f(OpCode::kMul, {k(0.5), x}), f(OpCode::kAdd, {k(1), f(OpCode::kTanh, {inner})})});
    }
    case kLeakyRelu: return where(f(OpCode::kGt, {x, k(0)}), x, f(OpCode::kMul, {x, a}));
    case kHardtanh: {
      IR y = where(f(OpCode::kLt, {x, a}), a, x);
      return where(f(OpCode::kGt, {y, b}), b, y);
    }
    case kElu:
      return where(f(OpCode::kLe, {x, k(0)}), f(OpCode::kMul, {f(OpCode::kExpm1, {f(OpCode::kMul, {x, c})}), f(OpCode::kMul, {a, b})}),
                   f(OpCode::kMul, {x, b}));
    case kSoftplus: {
      IR xa = f(OpCode::kMul, {x, a});
      return where(f(OpCode::kGt, {xa, b}), x, f(OpCode::kDiv, {f(OpCode::kLog1p, {f(OpCode::kExp, {xa})}), a}));
    }
    case kThreshold: return where(f(OpCode::kLe, {x, a}), b, x);
    case kHardsigmoid: return f(OpCode::kDiv, {relu6(x), k(6)});
    case kHardswish: return f(OpCode::kDiv, {f(OpCode::kMul, {x, relu6(x)}), k(6)});
    case kLogit: {
      IR y = x;
      if (p.a >= 0) {
        IR hi = f(OpCode::kSub, {k(1), a});
        y = where(f(OpCode::kLt, {x, a}), a, where(f(OpCode::kGt, {x, hi}), hi, x));
      }
      return f(OpCode::kLog, {f(OpCode::kDiv, {y, f(OpCode::kSub, {k(1), y})})});
    }
    case kNanToNum:
      if (!codegen::IsFloatDType(m)) return x;
      return where(f(OpCode::kNe, {x, x}), a,
                   where(f(OpCode::kEq, {x, k(INFINITY)}), b, where(f(OpCode::kEq, {x, k(-INFINITY)}), c, x)));
  }
  KILN_INTERNAL_ASSERT(false, "no CUDA expression for activation ", op);
  return x;
}

// ApplyAct's CPU element function as kernel IR, for Inductor (Note [Pointwise ops as kernel IR] in
// pointwise_ir.h): the same operations in the same order over x in opmath m, its parameters the
// constants ApplyAct makes of them (elu's alpha * scale multiplied in double), std::max(a, b) and
// std::min(a, b) as their definitions' selects (a NaN a passes, -0. stays -0.), so a compiled
// activation gives eager's bits (expm1, log1p and log within libmvec's ulps).
codegen::ExprPtr ActExprCpu(int op, const codegen::ExprPtr& x, codegen::DType m, const ActParams& p) {
  using codegen::OpCode;
  using IR = codegen::ExprPtr;
  auto k = [&](double v) { return codegen::Expr::Const(v, m); };
  auto f = [](OpCode o, std::vector<IR> args) { return codegen::Expr::Op(o, std::move(args)); };
  auto where = [&](IR cond, IR t, IR e) { return f(OpCode::kWhere, {std::move(cond), std::move(t), std::move(e)}); };
  auto max = [&](IR a, IR b) { return where(f(OpCode::kLt, {a, b}), b, a); };  // std::max: a < b ? b : a
  auto min = [&](IR a, IR b) { return where(f(OpCode::kLt, {b, a}), b, a); };  // std::min: b < a ? b : a
  auto relu6 = [&](IR v) { return min(max(f(OpCode::kAdd, {v, k(3)}), k(0)), k(6)); };
  switch (op) {
    case kLeakyRelu: return where(f(OpCode::kGt, {x, k(0)}), x, f(OpCode::kMul, {x, k(p.a)}));
    case kHardtanh: {
      IR y = where(f(OpCode::kLt, {x, k(p.a)}), k(p.a), x);
      return where(f(OpCode::kGt, {y, k(p.b)}), k(p.b), y);
    }
    case kElu:
      return where(f(OpCode::kLe, {x, k(0)}),
                   f(OpCode::kMul, {f(OpCode::kExpm1, {f(OpCode::kMul, {x, k(p.c)})}), k(p.a * p.b)}),
                   f(OpCode::kMul, {x, k(p.b)}));
    case kSoftplus: {
      IR xa = f(OpCode::kMul, {x, k(p.a)});
      return where(f(OpCode::kGt, {xa, k(p.b)}), x, f(OpCode::kDiv, {f(OpCode::kLog1p, {f(OpCode::kExp, {xa})}), k(p.a)}));
    }
    case kThreshold: return where(f(OpCode::kLe, {x, k(p.a)}), k(p.b), x);
    case kHardsigmoid: return f(OpCode::kDiv, {relu6(x), k(6)});
    case kHardswish: return f(OpCode::kDiv, {f(OpCode::kMul, {x, relu6(x)}), k(6)});
    case kLogit: {
      IR y = x;
      if (p.a >= 0) y = where(f(OpCode::kLt, {x, k(p.a)}), k(p.a), where(f(OpCode::kGt, {x, k(1 - p.a)}), k(1 - p.a), x));
      return f(OpCode::kLog, {f(OpCode::kDiv, {y, f(OpCode::kSub, {k(1), y})})});
    }
  }
  KILN_INTERNAL_ASSERT(false, "no CPU expression for activation ", op);
  return x;
}

void ActCUDA(int op, const Tensor& out, const Tensor& self, const ActParams& p) {
  const ScalarType t = out.dtype();
  const char* name = kActs[op].name;
  const codegen::DType m = cuda::OpmathDType(t, name);
  std::vector<cuda::PointwiseInput> inputs = {cuda::PointwiseInput::Of(self)};
  for (double v : {p.a, p.b, p.c}) inputs.push_back(cuda::PointwiseInput::Number(Scalar(v), t));
  auto param = [&](int i) {  // bounds are Scalars converted to the tensor's dtype (threshold, hardtanh)
    return op == kThreshold || op == kHardtanh ? cuda::InputAsElement(i, t, name) : cuda::OpmathInput(i, t, name);
  };
  cuda::LaunchPointwise(name, out, inputs,
                        ActExpr(op, cuda::OpmathInput(0, t, name), param(1), param(2), param(3), m, p));
}

// Note [gelu's two loops]: PyTorch's float32 gelu runs its vectorized loop (erf by Abramowitz and
// Stegun over Sleef's exp, ErfF here) over every element, a tail too, except when the tensor has
// one element: then its scalar loop's libm erf. Near x = -2.9, 1 + erf cancels and the two erfs'
// results differ by 500 ulps: gelu of a 0-d amin(), -2.91, divided into 1.36 and floored, gave
// -259 in kiln and -260 in PyTorch (fuzz seed 381, program 3444; measured on PyTorch 2.13). Its
// 16-bit and float64 scalar loops are the same formula in their opmath type.
//
// out = act(self); out has the result dtype and self's shape (out may be self).
void ActInto(int op, const Tensor& out, const Tensor& self, ActParams p) {
  if (out.numel() == 0) return;
  if (out.device().is_cuda()) return ActCUDA(op, out, self, p);
  Tensor in = CastTo(self, out.dtype());
  if (op == kGelu && out.numel() == 1) op = kGeluLibmErf;
  ElementwiseIter iter({out, in});
  kRunAct[op](iter, out.dtype(), p);
}

TensorMeta ActMeta(int op, const Tensor& self) {
  CheckActDtype(op, self.dtype());
  return TensorMeta{self->sym_sizes(), LayoutOfInputs(self->sym_sizes(), {&self}), ActResultType(op, self.dtype()),
                    self.device()};
}
Tensor ActFunctional(int op, const Tensor& self, const ActParams& p) {
  Tensor out = EmptyFromMeta(ActMeta(op, self));
  ActInto(op, out, self, p);
  return out;
}
Tensor ActInplace(int op, Tensor self, const ActParams& p, bool run) {
  CheckActDtype(op, self.dtype());
  ScalarType result = ActResultType(op, self.dtype());
  KILN_CHECK(CanCast(result, self.dtype()), "result type ", ScalarTypeDisplayName(result),
             " can't be cast to the desired output type ", ScalarTypeDisplayName(self.dtype()));
  if (run) ActInto(op, self, self, p);
  return self;
}

// --- per-op argument handling ----------------------------------------------------------------

int GeluOp(const std::string& approximate) {
  KILN_CHECK(approximate == "none" || approximate == "tanh", "approximate argument must be either none or tanh.");
  return approximate == "tanh" ? kGeluTanh : kGelu;
}
Tensor Gelu(const Tensor& self, std::string approximate) { return ActFunctional(GeluOp(approximate), self, {}); }
TensorMeta GeluMeta(const Tensor& self, std::string approximate) { return ActMeta(GeluOp(approximate), self); }
Tensor Gelu_(Tensor self, std::string approximate) { return ActInplace(GeluOp(approximate), self, {}, true); }
Tensor Gelu_Meta(Tensor self, std::string approximate) { return ActInplace(GeluOp(approximate), self, {}, false); }

// Ops whose parameters are Scalars: one template per arity.
template <int kOp>
struct Act0 {
  static constexpr int kOpId = kOp, kNumParams = 0;
  static Tensor Fn(const Tensor& self) { return ActFunctional(kOp, self, {}); }
  static TensorMeta Meta(const Tensor& self) { return ActMeta(kOp, self); }
  static Tensor Inplace(Tensor self) { return ActInplace(kOp, self, {}, true); }
  static Tensor InplaceMeta(Tensor self) { return ActInplace(kOp, self, {}, false); }
};
template <int kOp>
struct Act1 {
  static constexpr int kOpId = kOp, kNumParams = 1;
  static Tensor Fn(const Tensor& self, const Scalar& a) { return ActFunctional(kOp, self, {a.to_double()}); }
  static TensorMeta Meta(const Tensor& self, const Scalar&) { return ActMeta(kOp, self); }
  static Tensor Inplace(Tensor self, const Scalar& a) { return ActInplace(kOp, self, {a.to_double()}, true); }
  static Tensor InplaceMeta(Tensor self, const Scalar& a) { return ActInplace(kOp, self, {a.to_double()}, false); }
};
// PyTorch converts threshold's Scalars to an integer input's type with an overflow check
// (threshold(uint8, 0.5, -1) raises rather than wrapping -1 to 255).
void CheckScalarFits(ScalarType t, const Scalar& s) {
  if (!IsIntegral(t, /*include_bool=*/false)) return;
  double lo = 0, hi = 0;
  const char* name = "";
  switch (t) {
    case ScalarType::UInt8: lo = 0, hi = 255, name = "uint8_t"; break;
    case ScalarType::Int8: lo = -128, hi = 127, name = "int8_t"; break;
    case ScalarType::Int16: lo = -32768, hi = 32767, name = "int16_t"; break;
    case ScalarType::Int32: lo = -2147483648.0, hi = 2147483647.0, name = "int32_t"; break;
    default: return;  // int64 holds every integral Scalar
  }
  const double v = s.to_double();
  KILN_CHECK(v >= lo && v <= hi, "value cannot be converted to type ", name, " without overflow");
}

template <int kOp>
struct Act2 {
  static constexpr int kOpId = kOp, kNumParams = 2;
  static ActParams P(ScalarType t, const Scalar& a, const Scalar& b) {
    if constexpr (kOp == kThreshold) {
      CheckScalarFits(t, a);
      CheckScalarFits(t, b);
    }
    return {a.to_double(), b.to_double()};
  }
  static Tensor Fn(const Tensor& self, const Scalar& a, const Scalar& b) {
    return ActFunctional(kOp, self, P(self.dtype(), a, b));
  }
  static TensorMeta Meta(const Tensor& self, const Scalar& a, const Scalar& b) {
    P(self.dtype(), a, b);
    return ActMeta(kOp, self);
  }
  static Tensor Inplace(Tensor self, const Scalar& a, const Scalar& b) {
    return ActInplace(kOp, self, P(self.dtype(), a, b), true);
  }
  static Tensor InplaceMeta(Tensor self, const Scalar& a, const Scalar& b) {
    return ActInplace(kOp, self, P(self.dtype(), a, b), false);
  }
};
template <int kOp>
struct Act3 {
  static constexpr int kOpId = kOp, kNumParams = 3;
  static ActParams P(const Scalar& a, const Scalar& b, const Scalar& c) {
    return {a.to_double(), b.to_double(), c.to_double()};
  }
  static Tensor Fn(const Tensor& self, const Scalar& a, const Scalar& b, const Scalar& c) {
    return ActFunctional(kOp, self, P(a, b, c));
  }
  static TensorMeta Meta(const Tensor& self, const Scalar&, const Scalar&, const Scalar&) { return ActMeta(kOp, self); }
  static Tensor Inplace(Tensor self, const Scalar& a, const Scalar& b, const Scalar& c) {
    return ActInplace(kOp, self, P(a, b, c), true);
  }
  static Tensor InplaceMeta(Tensor self, const Scalar& a, const Scalar& b, const Scalar& c) {
    return ActInplace(kOp, self, P(a, b, c), false);
  }
};

// hardtanh on unsigned integers cannot take negative bounds (PyTorch's check).
void CheckHardtanh(const Tensor& self, const Scalar& min_val, const Scalar& max_val) {
  KILN_CHECK(self.dtype() != ScalarType::Bool, "Bool inputs not supported for hardtanh");
  if (self.dtype() == ScalarType::UInt8) {
    // PyTorch truncates the bounds to integers first: -0.5 is a bound of 0 and is accepted.
    KILN_CHECK(static_cast<int64_t>(min_val.to_double()) >= 0 && static_cast<int64_t>(max_val.to_double()) >= 0,
               "cannot do hardtanh on an unsigned type with negative limits");
  }
}
Tensor Hardtanh(const Tensor& self, const Scalar& lo, const Scalar& hi) {
  CheckHardtanh(self, lo, hi);
  return Act2<kHardtanh>::Fn(self, lo, hi);
}
Tensor Hardtanh_(Tensor self, const Scalar& lo, const Scalar& hi) {
  CheckHardtanh(self, lo, hi);
  return Act2<kHardtanh>::Inplace(self, lo, hi);
}
Tensor Relu6(const Tensor& self) {
  return CallOp<Tensor>(KILN_OP("aten::hardtanh"), self, Scalar(int64_t(0)), Scalar(int64_t(6)));
}
Tensor Relu6_(Tensor self) {
  return CallOp<Tensor>(KILN_OP("aten::hardtanh_"), self, Scalar(int64_t(0)), Scalar(int64_t(6)));
}

ActParams LogitParams(std::optional<double> eps) { return {eps ? *eps : -1.0}; }
Tensor Logit(const Tensor& self, std::optional<double> eps) { return ActFunctional(kLogit, self, LogitParams(eps)); }
TensorMeta LogitMeta(const Tensor& self, std::optional<double>) { return ActMeta(kLogit, self); }
Tensor Logit_(Tensor self, std::optional<double> eps) { return ActInplace(kLogit, self, LogitParams(eps), true); }
Tensor Logit_Meta(Tensor self, std::optional<double> eps) { return ActInplace(kLogit, self, LogitParams(eps), false); }

// nan_to_num: infinities default to the largest finite values of the tensor's own dtype.
ActParams NanToNumParams(ScalarType t, std::optional<double> nan, std::optional<double> posinf,
                         std::optional<double> neginf) {
  ActParams p{nan.value_or(0.0), 0, 0};
  if (!IsFloating(t)) return p;
  KILN_DISPATCH_FLOATING(t, "nan_to_num", [&] {
    p.b = posinf ? *posinf : static_cast<double>(static_cast<float>(std::numeric_limits<scalar_t>::max()));
    p.c = neginf ? *neginf : static_cast<double>(static_cast<float>(std::numeric_limits<scalar_t>::lowest()));
    if constexpr (std::is_same_v<scalar_t, double>) {
      if (!posinf) p.b = std::numeric_limits<double>::max();
      if (!neginf) p.c = std::numeric_limits<double>::lowest();
    }
  });
  return p;
}
using OptF = std::optional<double>;
Tensor NanToNum(const Tensor& self, OptF nan, OptF posinf, OptF neginf) {
  return ActFunctional(kNanToNum, self, NanToNumParams(self.dtype(), nan, posinf, neginf));
}
TensorMeta NanToNumMeta(const Tensor& self, OptF, OptF, OptF) { return ActMeta(kNanToNum, self); }
Tensor NanToNum_(Tensor self, OptF nan, OptF posinf, OptF neginf) {
  return ActInplace(kNanToNum, self, NanToNumParams(self.dtype(), nan, posinf, neginf), true);
}
Tensor NanToNum_Meta(Tensor self, OptF, OptF, OptF) { return ActInplace(kNanToNum, self, {}, false); }

// --- softmax / log_softmax -------------------------------------------------------------------

template <bool kLog>
TensorMeta SoftmaxMeta(const Tensor& self, int64_t dim, bool half_to_float) {
  const int64_t wrapped = WrapDim(dim, self.dim());
  if (half_to_float) {
    KILN_CHECK(self.dtype() == ScalarType::Float16, "conversion is supported for Half type only");
  }
  // PyTorch returns an empty integer input as is: the kernel (and its dtype check) never runs.
  bool empty = false;
  for (const SymInt& s : self->sym_sizes()) empty = empty || s == SymInt(0);
  if (!IsFloating(self.dtype()) && !empty) {
    const bool last = self.dim() > 0 && wrapped == self.dim() - 1;
    throw NotImplementedError(StrCat("\"", kLog ? "log_softmax" : "softmax",
                                     last ? "_lastdim_kernel_impl" : "_kernel_impl", "\" not implemented for '",
                                     ScalarTypeDisplayName(self.dtype()), "'"));
  }
  return TensorMeta{self->sym_sizes(), {}, half_to_float ? ScalarType::Float32 : self.dtype(), self.device()};
}

// `last_dim`: dim is the input's last (PyTorch's lastdim kernels; trailing sizes of 1 do not count).
template <bool kLog, typename In, typename Out>
void SoftmaxKernel(const In* x, Out* y, int64_t outer, int64_t n, int64_t inner, bool last_dim) {
  // float for float32 and the 16-bit floats, as PyTorch's vectorized kernels: a double sum kept
  // log(1 + 4.5e-11) = -4.5e-11 where PyTorch's float sum rounds to 1 and gives 0, so
  // log_softmax(x) < 0 disagreed (fuzz seed 301, program 17642)
  using Acc = opmath_t<In>;
  const int64_t lines = outer * inner;
  if constexpr (std::is_same_v<In, float> && std::is_same_v<Out, float>) {
    if (inner == 1) {  // contiguous rows (Note [Softmax rows])
      ParallelFor(0, lines, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
        softmax_rows::Forward<kLog>(x, y, n, b, e);
      });
      return;
    }
  }
  ParallelFor(0, lines, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
    for (int64_t line = b; line < e; ++line) {
      const int64_t o = line / inner, i = line % inner;
      const In* src = x + o * n * inner + i;
      Out* dst = y + o * n * inner + i;
      Acc mx = -std::numeric_limits<Acc>::infinity();
      for (int64_t k = 0; k < n; ++k) {
        const Acc v = static_cast<Acc>(src[k * inner]);
        if (v > mx || v != v) mx = (mx != mx) ? mx : v;
      }
      Acc sum = 0;
      for (int64_t k = 0; k < n; ++k) sum += std::exp(static_cast<Acc>(src[k * inner]) - mx);
      if constexpr (kLog) {
        // (x - max) - log(sum), in PyTorch's order: a row [-0.] gives +0. (x - (max + log(sum))
        // gave -0.; fuzz seed 191, program 4329)
        Acc log_sum = std::log(sum);
        if constexpr (!std::is_same_v<In, Acc> && std::is_same_v<In, Out>) {
          // Over the last dim PyTorch keeps a 16-bit float row's sum and its log in the input's
          // type (serial_vec_log_softmax_lastdim_range's scalar_t arrays), rounding each: of
          // bfloat16 [-1.75, 2, 2.625] the last is -0.435546875, not the nearer -0.4375, and a
          // floor division by it gave -7 in PyTorch, -6 in kiln (fuzz seed 371, program 3296).
          if (last_dim) log_sum = static_cast<Acc>(static_cast<In>(std::log(static_cast<Acc>(static_cast<In>(sum)))));
        }
        for (int64_t k = 0; k < n; ++k)
          dst[k * inner] = static_cast<Out>((static_cast<Acc>(src[k * inner]) - mx) - log_sum);
      } else {
        const Acc inv = Acc(1) / sum;
        for (int64_t k = 0; k < n; ++k)
          dst[k * inner] = static_cast<Out>(std::exp(static_cast<Acc>(src[k * inner]) - mx) * inv);
      }
    }
  });
}

template <bool kLog>
Tensor Softmax(const Tensor& self, int64_t dim, bool half_to_float) {
  TensorMeta m = SoftmaxMeta<kLog>(self, dim, half_to_float);
  Tensor out = EmptyFromMeta(m);
  if (out.numel() == 0) return out;
  const int64_t d = WrapDim(dim, self.dim());
  if (self.device().is_cuda()) {
    SoftmaxCUDA(kLog, self, d, out);
    return out;
  }
  Tensor in = ops::contiguous(self);
  int64_t outer = 1, n = 1, inner = 1;
  for (int64_t k = 0; k < self.dim(); ++k) {
    if (k < d) outer *= self.size(k);
    else if (k == d) n = self.size(k);
    else inner *= self.size(k);
  }
  KILN_DISPATCH_FLOATING(self.dtype(), kLog ? "log_softmax" : "softmax", [&] {
    using In = scalar_t;
    const bool last_dim = self.dim() > 0 && d == self.dim() - 1;
    if (half_to_float) {
      SoftmaxKernel<kLog, In, float>(in.data_ptr<In>(), out.data_ptr<float>(), outer, n, inner, last_dim);
    } else {
      SoftmaxKernel<kLog, In, In>(in.data_ptr<In>(), out.data_ptr<In>(), outer, n, inner, last_dim);
    }
  });
  return out;
}

Tensor SoftmaxInt(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  Tensor in = dtype ? CastTo(self, *dtype) : self;
  return CallOp<Tensor>(KILN_OP("aten::_softmax"), in, dim, false);
}
Tensor LogSoftmaxInt(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  Tensor in = dtype ? CastTo(self, *dtype) : self;
  return CallOp<Tensor>(KILN_OP("aten::_log_softmax"), in, dim, false);
}

// The CPU element function of activation `op` as kernel IR, for Inductor: its `num_params` number
// arguments become ActParams as the eager op makes them (logit's absent eps is -1).
void RegisterActIr(const Op& functional, int op, int num_params) {
  PointwiseIr ir;
  ir.num_params = num_params;
  ir.compute = [op](const std::vector<ScalarType>& in) { return ActResultType(op, in.at(0)); };
  ir.build_with_params = [op](std::vector<codegen::ExprPtr> in, ScalarType compute, DeviceType,
                              const std::vector<std::optional<double>>& params) {
    ActParams p;
    double* slots[] = {&p.a, &p.b, &p.c};
    for (size_t i = 0; i < params.size() && i < 3; ++i) *slots[i] = params[i].value_or(0.0);
    if (op == kLogit) p = LogitParams(params.at(0));
    return ActExprCpu(op, in.at(0), cuda::OpmathDType(compute, kActs[op].name), p);
  };
  RegisterPointwiseIr(functional, std::move(ir));
}

template <typename A>
OpDef DefAct(Registry& r, const std::string& schema_args, const std::string& name) {
  const Op* functional = r.Def(name + "(Tensor self" + schema_args + ") -> Tensor", {Tag::pointwise, Tag::core},
                               kFunction)
                             .template CPUAndCUDA<&A::Fn>()
                             .template Meta<&A::Meta>()
                             .op();
  RegisterActIr(*functional, A::kOpId, A::kNumParams);
  return r.Def(name + "_(Tensor(a!) self" + schema_args + ") -> Tensor(a!)", {Tag::pointwise}, kFunction)
      .template CPUAndCUDA<&A::Inplace>()
      .template Impl<&A::InplaceMeta>(DispatchKey::Meta)
      .template Impl<&A::InplaceMeta>(DispatchKey::Fake);
}

}  // namespace

void RegisterActivationOps(Registry& r) {
  std::initializer_list<Tag> pw = {Tag::pointwise, Tag::core};
  r.Def("_softmax(Tensor self, int dim, bool half_to_float) -> Tensor", {Tag::core}).Cost(CostClass::kMemoryBound)
      .CPUAndCUDA<&Softmax<false>>().Meta<&SoftmaxMeta<false>>();
  r.Def("_log_softmax(Tensor self, int dim, bool half_to_float) -> Tensor", {Tag::core}).Cost(CostClass::kMemoryBound)
      .CPUAndCUDA<&Softmax<true>>().Meta<&SoftmaxMeta<true>>();
  r.Def("softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor", {}, kFunctionAndMethod)
      .Composite<&SoftmaxInt>();
  r.Def("log_softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor", {}, kFunctionAndMethod)
      .Composite<&LogSoftmaxInt>();
  r.Alias("special_softmax", "softmax", kModuleOnly);  // Note [Op aliases] in dispatcher.h
  r.Alias("special_log_softmax", "log_softmax", kModuleOnly);

  r.Def("gelu(Tensor self, *, str approximate='none') -> Tensor", pw, kFunction)
      .CPUAndCUDA<&Gelu>().Meta<&GeluMeta>();
  r.Def("gelu_(Tensor(a!) self, *, str approximate='none') -> Tensor(a!)", {Tag::pointwise}, kFunction)
      .CPUAndCUDA<&Gelu_>().Impl<&Gelu_Meta>(DispatchKey::Meta).Impl<&Gelu_Meta>(DispatchKey::Fake);
  DefAct<Act1<kLeakyRelu>>(r, ", Scalar negative_slope=0.01", "leaky_relu");
  RegisterActIr(*r.Def("hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor", pw, kFunction)
                      .CPUAndCUDA<&Hardtanh>()
                      .Meta<&Act2<kHardtanh>::Meta>()
                      .op(),
                kHardtanh, 2);
  r.Def("hardtanh_(Tensor(a!) self, Scalar min_val=-1, Scalar max_val=1) -> Tensor(a!)", {Tag::pointwise},
        kFunction)
      .CPUAndCUDA<&Hardtanh_>()
      .Impl<&Act2<kHardtanh>::InplaceMeta>(DispatchKey::Meta)
      .Impl<&Act2<kHardtanh>::InplaceMeta>(DispatchKey::Fake);
  r.Def("relu6(Tensor self) -> Tensor", {Tag::pointwise}, kFunction).Composite<&Relu6>();
  r.Def("relu6_(Tensor(a!) self) -> Tensor(a!)", {Tag::pointwise}, kFunction).Composite<&Relu6_>();
  DefAct<Act3<kElu>>(r, ", Scalar alpha=1, Scalar scale=1, Scalar input_scale=1", "elu");
  RegisterActIr(*r.Def("softplus(Tensor self, Scalar beta=1, Scalar threshold=20) -> Tensor", pw, kFunction)
                      .CPUAndCUDA<&Act2<kSoftplus>::Fn>()
                      .Meta<&Act2<kSoftplus>::Meta>()
                      .op(),
                kSoftplus, 2);
  // PyTorch's threshold_ skips TensorIterator's overlap check: an expanded self is written.
  DefAct<Act2<kThreshold>>(r, ", Scalar threshold, Scalar value", "threshold").AllowsOverlappingWrites();
  DefAct<Act0<kHardsigmoid>>(r, "", "hardsigmoid");
  DefAct<Act0<kHardswish>>(r, "", "hardswish");
  RegisterActIr(*r.Def("logit(Tensor self, float? eps=None) -> Tensor", pw, kFunctionAndMethod)
                      .CPUAndCUDA<&Logit>()
                      .Meta<&LogitMeta>()
                      .op(),
                kLogit, 1);
  r.Def("logit_(Tensor(a!) self, float? eps=None) -> Tensor(a!)", {Tag::pointwise}, kFunctionAndMethod)
      .CPUAndCUDA<&Logit_>().Impl<&Logit_Meta>(DispatchKey::Meta).Impl<&Logit_Meta>(DispatchKey::Fake);
  r.Alias("special_logit", "logit", kModuleOnly);
  r.Def("nan_to_num(Tensor self, float? nan=None, float? posinf=None, float? neginf=None) -> Tensor", pw,
        kFunctionAndMethod)
      .CPUAndCUDA<&NanToNum>().Meta<&NanToNumMeta>();
  r.Def("nan_to_num_(Tensor(a!) self, float? nan=None, float? posinf=None, float? neginf=None) -> Tensor(a!)",
        {Tag::pointwise}, kFunctionAndMethod)
      .CPUAndCUDA<&NanToNum_>()
      .Impl<&NanToNum_Meta>(DispatchKey::Meta)
      .Impl<&NanToNum_Meta>(DispatchKey::Fake);
}

}  // namespace kiln
