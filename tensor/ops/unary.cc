// tensor/ops/unary.cc: unary pointwise ops (exp, log, sqrt, sigmoid, relu, gelu, abs, floor, ...).
//
// Like binary.cc, each op is a table row: a name, the element function, and its dtype rule
// (Float: integer inputs compute in the default float dtype; Same: keep the input dtype; Bool:
// predicates). From each row come the functional op, the in-place `op_` and `op.out`.
#include <cmath>

#include "tensor/cuda/pointwise.h"
#include "tensor/ops/common.h"
#include "tensor/ops/complex_cuda.h"
#include "tensor/ops/pointwise_ir.h"
#include "tensor/vec_avx512.h"
#include "tensor/vec_math.h"

namespace kiln {
namespace {

enum class UnaryResult { Float, Same, Bool };
enum UnaryOp : int {
  kExp, kExp2, kLog, kLog2, kLog10, kLog1p, kExpm1, kSqrt, kRsqrt, kSigmoid, kTanh, kSin, kCos, kTan, kAsin,
  kAcos, kAtan, kSinh, kCosh, kAsinh, kAcosh, kAtanh, kErf, kErfc, kErfinv, kLgamma, kDigamma, kSilu, kMish,
  kNeg, kAbs, kSign, kReciprocal, kFloor, kCeil, kRound, kTrunc, kFrac, kRelu, kLogicalNot,
  kBitwiseNot, kIsnan, kIsinf, kIsfinite, kSignbit, kSpecialNdtr, kNumUnary
};

struct UnarySpec {
  const char* name;
  UnaryResult result;
  bool allow_bool;
};

constexpr UnarySpec kUnary[kNumUnary] = {
    {"exp", UnaryResult::Float, true}, {"exp2", UnaryResult::Float, true}, {"log", UnaryResult::Float, true},
    {"log2", UnaryResult::Float, true}, {"log10", UnaryResult::Float, true}, {"log1p", UnaryResult::Float, true},
    {"expm1", UnaryResult::Float, true}, {"sqrt", UnaryResult::Float, true}, {"rsqrt", UnaryResult::Float, true},
    {"sigmoid", UnaryResult::Float, true}, {"tanh", UnaryResult::Float, true}, {"sin", UnaryResult::Float, true},
    {"cos", UnaryResult::Float, true}, {"tan", UnaryResult::Float, true}, {"asin", UnaryResult::Float, true},
    {"acos", UnaryResult::Float, true}, {"atan", UnaryResult::Float, true}, {"sinh", UnaryResult::Float, true},
    {"cosh", UnaryResult::Float, true}, {"asinh", UnaryResult::Float, true}, {"acosh", UnaryResult::Float, true},
    {"atanh", UnaryResult::Float, true}, {"erf", UnaryResult::Float, true}, {"erfc", UnaryResult::Float, true},
    {"erfinv", UnaryResult::Float, true}, {"lgamma", UnaryResult::Float, true},
    {"digamma", UnaryResult::Float, true}, {"silu", UnaryResult::Same, false}, {"mish", UnaryResult::Same, false},
    {"neg", UnaryResult::Same, false}, {"abs", UnaryResult::Same, false}, {"sign", UnaryResult::Same, true},
    {"reciprocal", UnaryResult::Float, true}, {"floor", UnaryResult::Same, false},
    {"ceil", UnaryResult::Same, false}, {"round", UnaryResult::Same, false}, {"trunc", UnaryResult::Same, false},
    {"frac", UnaryResult::Same, false}, {"relu", UnaryResult::Same, false},
    {"logical_not", UnaryResult::Bool, true}, {"bitwise_not", UnaryResult::Same, true},
    {"isnan", UnaryResult::Bool, true}, {"isinf", UnaryResult::Bool, true}, {"isfinite", UnaryResult::Bool, true},
    {"signbit", UnaryResult::Bool, true}, {"special_ndtr", UnaryResult::Float, true},
};

double ErfInv(double y) {
  if (y <= -1) return y == -1 ? -INFINITY : NAN;
  if (y >= 1) return y == 1 ? INFINITY : NAN;
  // Initial guess (Giles' approximation), then two Newton steps on erf(x) - y.
  double w = -std::log((1.0 - y) * (1.0 + y)), x;
  if (w < 6.25) {
    w -= 3.125;
    x = -3.6444120640178196996e-21; x = -1.685059138182016589e-19 + x * w; x = 1.2858480715256400167e-18 + x * w;
    x = 1.115787767802518096e-17 + x * w; x = -1.333171662854620906e-16 + x * w; x = 2.0972767875968561637e-17 + x * w;
    x = 6.6376381343583238325e-15 + x * w; x = -4.0545662729752068639e-14 + x * w; x = -8.1519341976054721522e-14 + x * w;
    x = 2.6335093153082322977e-12 + x * w; x = -1.2975133253453532498e-11 + x * w; x = -5.4154120542946279317e-11 + x * w;
    x = 1.051212273321532285e-09 + x * w; x = -4.1126339803469836976e-09 + x * w; x = -2.9070369957882005086e-08 + x * w;
    x = 4.2347877827932403518e-07 + x * w; x = -1.3654692000834678645e-06 + x * w; x = -1.3882523362786468719e-05 + x * w;
    x = 0.0001867342080340571352 + x * w; x = -0.00074070253416626697512 + x * w; x = -0.0060336708714301490533 + x * w;
    x = 0.24015818242558961693 + x * w; x = 1.6536545626831027356 + x * w;
  } else {
    w = std::sqrt(w) - 3.25;
    x = 2.2137376921775787049e-09; x = 9.0756561938885390979e-08 + x * w; x = -2.7517406297064545428e-07 + x * w;
    x = 1.8239629214389227755e-08 + x * w; x = 1.5027403968909827627e-06 + x * w; x = -4.013867526981545969e-06 + x * w;
    x = 2.9234449089955446044e-06 + x * w; x = 1.2475304481671778723e-05 + x * w; x = -4.7318229009055733981e-05 + x * w;
    x = 6.8284851459573175448e-05 + x * w; x = 2.4031110387097893999e-05 + x * w; x = -0.0003550375203628474796 + x * w;
    x = 0.00095328937973738049703 + x * w; x = -0.0016882755560235047313 + x * w; x = 0.0024914420961078508066 + x * w;
    x = -0.0037512085075692412107 + x * w; x = 0.005370914553590063617 + x * w; x = 1.0052589676941592334 + x * w;
    x = 3.0838856104922207635 + x * w;
  }
  x *= y;
  for (int i = 0; i < 2; ++i) x -= (std::erf(x) - y) / (2.0 / std::sqrt(M_PI) * std::exp(-x * x));
  return x;
}

// std::signbit, through the bits (GCC 12 crashes vectorising std::signbit on AVX2).
template <typename M> inline bool SignBit(M x) {
  if constexpr (sizeof(M) == 4) { uint32_t b; std::memcpy(&b, &x, 4); return b >> 31; }
  else { uint64_t b; std::memcpy(&b, &x, 8); return b >> 63; }
}

// Cephes' psi, as PyTorch's calc_digamma: the recurrence up to x >= 10, then the asymptotic
// series (with 5 terms from x >= 6 it was 1e-11 off PyTorch's float64 values).
double Digamma(double x) {
  constexpr double kPsi10 = 2.25175258906672110764;  // digamma(10)
  if (x == 0) return SignBit(x) ? INFINITY : -INFINITY;
  if (x < 0) {
    if (x == std::floor(x)) return NAN;
    double whole;
    const double frac = std::modf(x, &whole);  // tan(pi * x) through the fraction: exact periods
    return Digamma(1 - x) - M_PI / std::tan(M_PI * frac);
  }
  double result = 0;
  while (x < 10) { result -= 1 / x; x += 1; }
  if (x == 10) return result + kPsi10;
  constexpr double kA[] = {8.33333333333333333333E-2, -2.10927960927960927961E-2, 7.57575757575757575758E-3,
                           -4.16666666666666666667E-3, 3.96825396825396825397E-3, -8.33333333333333333333E-3,
                           8.33333333333333333333E-2};
  double y = 0;
  if (x < 1.0e17) {
    const double z = 1 / (x * x);
    double p = kA[0];
    for (int i = 1; i < 7; ++i) p = p * z + kA[i];
    y = z * p;
  }
  return result + std::log(x) - 0.5 / x - y;
}

template <typename T>
T RoundHalfEven(T x) { return std::nearbyint(x); }

// erf as the erf op computes it (kErf; special_ndtr's too)
template <typename M>
[[gnu::always_inline]] inline M ErfOf(M x) {
  if constexpr (std::is_same_v<M, float>) return ErfPolyF(x);  // vectorises (vec_math.h)
  else return std::erf(x);
}

// Element function over opmath type M (float/double for floating; the integer type otherwise).

template <typename M>
[[gnu::always_inline]] inline M ApplyUnary(int op, M x) {
  if constexpr (std::is_floating_point_v<M>) {
    switch (op) {
      case kExp: return Exp(x);
      case kExp2: return std::exp2(x);
      case kLog: return std::log(x);
      case kLog2: return std::log2(x);
      case kLog10: return std::log10(x);
      case kLog1p: return std::log1p(x);
      case kExpm1: return std::expm1(x);
      case kSqrt: return std::sqrt(x);
      case kRsqrt: return M(1) / std::sqrt(x);
      case kSigmoid:
        if constexpr (std::is_same_v<M, float>) return SigmoidF(x);  // Note [One float math]
        else return M(1) / (M(1) + Exp(-x));
      case kTanh: return Tanh(x);
      case kSin: return std::sin(x);
      case kCos: return std::cos(x);
      case kTan: return std::tan(x);
      case kAsin: return std::asin(x);
      case kAcos: return std::acos(x);
      case kAtan: return std::atan(x);
      case kSinh: return std::sinh(x);
      case kCosh: return std::cosh(x);
      case kAsinh: return std::asinh(x);
      case kAcosh: return std::acosh(x);
      case kAtanh: return std::atanh(x);
      case kErf: return ErfOf(x);
      case kErfc: return std::erfc(x);
      case kErfinv: return static_cast<M>(ErfInv(x));
      case kLgamma: return std::lgamma(x);
      case kDigamma: return static_cast<M>(Digamma(x));
      case kSilu:
        if constexpr (std::is_same_v<M, float>) return SiluF(x);
        else return x / (M(1) + Exp(-x));
      case kMish: return x * std::tanh(std::log1p(std::exp(x)));
      case kNeg: return -x;
      case kAbs: return std::abs(x);
      case kSign: return x > 0 ? M(1) : x < 0 ? M(-1) : M(0);  // NaN and -0 give +0, as in PyTorch
      case kReciprocal: return M(1) / x;
      case kFloor: return std::floor(x);
      case kCeil: return std::ceil(x);
      case kRound: return RoundHalfEven(x);
      case kTrunc: return std::trunc(x);
      case kFrac: return x - std::trunc(x);
      // NaN and -0.0 pass through, as PyTorch's clamp_min(x, 0) (max(0, x) keeps x when equal)
      case kRelu: return x < 0 ? M(0) : x;
      case kLogicalNot: return x == 0;
      case kIsnan: return x != x;
      case kIsinf: return std::isinf(x);
      case kIsfinite: return std::isfinite(x);
      case kSignbit: return SignBit(x);
      // PyTorch's calc_ndtr, whose lower tail is 0 once erf rounds to -1 (ndtr(-8) in float32)
      case kSpecialNdtr: return (M(1) + ErfOf(x * M(M_SQRT1_2))) * M(0.5);
    }
  } else {
    switch (op) {
      // -INT_MIN wraps to INT_MIN, as PyTorch's gives (C++ leaves it undefined)
      case kNeg: return static_cast<M>(uint64_t(0) - static_cast<uint64_t>(x));
      case kAbs:
        if constexpr (std::is_signed_v<M>) return x < 0 ? static_cast<M>(uint64_t(0) - static_cast<uint64_t>(x)) : x;
        else return x;
      case kSign: if constexpr (std::is_same_v<M, bool>) return x; else return static_cast<M>((x > 0) - (x < 0));
      case kFloor: case kCeil: case kRound: case kTrunc: return x;
      case kFrac: return 0;
      case kRelu: if constexpr (std::is_signed_v<M>) return x > 0 ? x : M(0); else return x;
      case kLogicalNot: return !x;
      case kBitwiseNot: if constexpr (std::is_same_v<M, bool>) return !x; else return static_cast<M>(~x);
      case kIsnan: case kIsinf: return false;
      case kIsfinite: return true;
      case kSignbit: if constexpr (std::is_signed_v<M>) return x < 0; else return false;
    }
  }
  return x;
}

// The unary ops complex numbers have, on std::complex (abs is |x|, a real value in a complex slot
// until UnaryInto writes its real part; the predicates test either part).
bool ComplexUnarySupported(int op) {
  switch (op) {
    case kExp: case kLog: case kSqrt: case kRsqrt: case kSigmoid: case kTanh: case kSin: case kCos: case kTan:
    case kSinh: case kCosh: case kNeg: case kAbs: case kReciprocal: case kIsnan: case kIsinf:
    case kIsfinite: case kLogicalNot:
      return true;
    default:
      return false;
  }
}
template <typename C>
C ApplyComplexUnary(int op, C x) {
  using R = typename C::value_type;
  switch (op) {
    case kExp: return std::exp(x);
    case kLog: return std::log(x);
    case kSqrt: return std::sqrt(x);
    case kRsqrt: return C(1) / std::sqrt(x);
    case kSigmoid: return C(1) / (C(1) + std::exp(-x));
    case kTanh: return std::tanh(x);
    case kSin: return std::sin(x);
    case kCos: return std::cos(x);
    case kTan: return std::tan(x);
    case kSinh: return std::sinh(x);
    case kCosh: return std::cosh(x);
    case kNeg: return -x;
    case kAbs: return C(std::abs(x), R(0));
    case kReciprocal: return C(1) / x;
    case kIsnan: return C(std::isnan(x.real()) || std::isnan(x.imag()));
    case kIsinf: return C(std::isinf(x.real()) || std::isinf(x.imag()));
    case kIsfinite: return C(std::isfinite(x.real()) && std::isfinite(x.imag()));
    case kLogicalNot: return C(x == C(0));
  }
  return x;
}

// The CUDA kernel of a complex unary op (CheckUnaryDtype admitted only ComplexUnarySupported's).
ComplexUnary ToComplexUnary(int op) {
  switch (op) {
    case kExp: return ComplexUnary::kExp;
    case kLog: return ComplexUnary::kLog;
    case kSqrt: return ComplexUnary::kSqrt;
    case kRsqrt: return ComplexUnary::kRsqrt;
    case kSigmoid: return ComplexUnary::kSigmoid;
    case kTanh: return ComplexUnary::kTanh;
    case kSin: return ComplexUnary::kSin;
    case kCos: return ComplexUnary::kCos;
    case kTan: return ComplexUnary::kTan;
    case kSinh: return ComplexUnary::kSinh;
    case kCosh: return ComplexUnary::kCosh;
    case kNeg: return ComplexUnary::kNeg;
    case kAbs: return ComplexUnary::kAbs;
    case kReciprocal: return ComplexUnary::kReciprocal;
    case kIsnan: return ComplexUnary::kIsnan;
    case kIsinf: return ComplexUnary::kIsinf;
    case kIsfinite: return ComplexUnary::kIsfinite;
    case kLogicalNot: return ComplexUnary::kLogicalNot;
  }
  KILN_INTERNAL_ASSERT(false, "no complex kernel for ", kUnary[op].name);
  return ComplexUnary::kNeg;
}

ScalarType UnaryComputeType(int op, ScalarType in) {
  const UnarySpec& spec = kUnary[op];
  if (spec.result == UnaryResult::Float && IsIntegral(in, true)) return GetDefaultDtype();
  return in;
}

void CheckUnaryDtype(int op, ScalarType in) {
  const UnarySpec& spec = kUnary[op];
  KILN_CHECK_NOT_IMPLEMENTED(!IsComplex(in) || ComplexUnarySupported(op), "\"", spec.name,
                             "\" not implemented for '", ScalarTypeDisplayName(in), "'");
  KILN_CHECK(!(op == kNeg && in == ScalarType::Bool), "Negation, the `-` operator, on a bool tensor is not "
             "supported. If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.");
  KILN_CHECK(!(op == kRelu && in == ScalarType::Bool), "Boolean inputs not supported for relu");  // as PyTorch's
  KILN_CHECK_NOT_IMPLEMENTED(spec.allow_bool || in != ScalarType::Bool, "\"", spec.name, "\" not implemented for 'Bool'");
  if (op == kBitwiseNot) KILN_CHECK_NOT_IMPLEMENTED(IsIntegral(in, true), "\"bitwise_not\" not implemented for '", ScalarTypeDisplayName(in), "'");
  if (op == kSilu || op == kMish) KILN_CHECK_NOT_IMPLEMENTED(IsFloating(in), "\"", spec.name, "\" not implemented for '", ScalarTypeDisplayName(in), "'");
  if (op == kFrac) KILN_CHECK_NOT_IMPLEMENTED(IsFloating(in), "\"frac\" not implemented for '", ScalarTypeDisplayName(in), "'");
}

ScalarType UnaryResultType(int op, ScalarType in) {
  if (op == kAbs && IsComplex(in)) return ToRealValueType(in);
  return kUnary[op].result == UnaryResult::Bool ? ScalarType::Bool : UnaryComputeType(op, in);
}

// out = f(self) for complex self: the loop writes complex values (or bools); abs's real part
// goes to its real result through a copy.
template <int kOp>
void ComplexUnaryInto(const Tensor& out, const Tensor& self) {
  const bool to_bool = kUnary[kOp].result == UnaryResult::Bool;
  const ScalarType loop_out = to_bool ? ScalarType::Bool : self.dtype();
  Tensor dst = out.dtype() == loop_out ? out : EmptyLike(out, loop_out);
  ElementwiseIter iter({dst, self});
  KILN_DISPATCH_COMPLEX(self.dtype(), kUnary[kOp].name, [&] {
    using C = scalar_t;
    if constexpr (kUnary[kOp].result == UnaryResult::Bool)
      CpuKernel<bool, C>(iter, [](C x) -> bool { return ApplyComplexUnary<C>(kOp, x) != C(0); });
    else CpuKernel<C, C>(iter, [](C x) -> C { return ApplyComplexUnary<C>(kOp, x); });
  });
  if (!dst.is_same(out)) {
    Tensor o = out;
    ops::copy_(o, dst);
  }
}

// --- the element functions as kernel IR: CUDA's kernels and Inductor's lowerings -------------
// (tensor/cuda/pointwise.h; Note [Pointwise ops as kernel IR] in pointwise_ir.h)

// Ops with an expression (and so a CUDA kernel and a lowering): all but erfinv and digamma (no IR
// operator and no libdevice function).
constexpr bool HasIr(int op) { return op != kErfinv && op != kDigamma; }

// The dtype the expression computes in: the opmath type of `compute`, except that isinf/isfinite
// of integers compare a float.
codegen::DType UnaryOpmath(int op, ScalarType compute) {
  if (!IsFloating(compute) && (op == kIsinf || op == kIsfinite)) return codegen::DType::F32;
  return cuda::OpmathDType(compute, kUnary[op].name);
}

codegen::ExprPtr UnaryExpr(int op, codegen::ExprPtr x, codegen::DType m, DeviceType device) {
  using codegen::OpCode;
  auto ir = [](OpCode o, codegen::ExprPtr a) { return codegen::Expr::Op(o, {std::move(a)}); };
  auto ir2 = [](OpCode o, codegen::ExprPtr a, codegen::ExprPtr b) { return codegen::Expr::Op(o, {std::move(a), std::move(b)}); };
  auto c = [&](double v) { return codegen::Expr::Const(v, m); };
  switch (op) {
    case kExp: return ir(OpCode::kExp, x);
    case kExp2: return ir(OpCode::kExp2, x);
    case kLog: return ir(OpCode::kLog, x);
    case kLog2: return ir(OpCode::kLog2, x);
    case kLog10: return ir(OpCode::kLog10, x);
    case kLog1p: return ir(OpCode::kLog1p, x);
    case kExpm1: return ir(OpCode::kExpm1, x);
    case kSqrt: return ir(OpCode::kSqrt, x);
    case kRsqrt: return ir(OpCode::kRsqrt, x);
    case kSigmoid: return ir(OpCode::kSigmoid, x);
    case kTanh: return ir(OpCode::kTanh, x);
    case kSin: return ir(OpCode::kSin, x);
    case kCos: return ir(OpCode::kCos, x);
    case kTan: return ir(OpCode::kTan, x);
    case kAsin: return ir(OpCode::kAsin, x);
    case kAcos: return ir(OpCode::kAcos, x);
    case kAtan: return ir(OpCode::kAtan, x);
    case kSinh: return ir(OpCode::kSinh, x);
    case kCosh: return ir(OpCode::kCosh, x);
    case kAsinh: return ir(OpCode::kAsinh, x);
    case kAcosh: return ir(OpCode::kAcosh, x);
    case kAtanh: return ir(OpCode::kAtanh, x);
    case kErf: return ir(OpCode::kErf, x);
    case kErfc: return ir(OpCode::kErfc, x);
    case kLgamma: return ir(OpCode::kLgamma, x);
    case kSilu: return ir2(OpCode::kDiv, x, ir2(OpCode::kAdd, c(1), ir(OpCode::kExp, ir(OpCode::kNeg, x))));
    case kMish: return ir2(OpCode::kMul, x, ir(OpCode::kTanh, ir(OpCode::kLog1p, ir(OpCode::kExp, x))));
    case kNeg: return ir(OpCode::kNeg, x);
    case kAbs: return ir(OpCode::kAbs, x);
    case kSign: return ir(OpCode::kSign, x);
    case kReciprocal: return ir(OpCode::kReciprocal, x);
    case kFloor: return ir(OpCode::kFloor, x);
    case kCeil: return ir(OpCode::kCeil, x);
    case kRound: return ir(OpCode::kRound, x);
    case kTrunc: return ir(OpCode::kTrunc, x);
    case kFrac: return ir2(OpCode::kSub, x, ir(OpCode::kTrunc, x));
    case kRelu:  // PyTorch's CUDA relu is max(x, 0): +0.0 for -0.0 (its CPU one keeps -0.0); NaN stays
      if (!codegen::IsFloatDType(m) || device != DeviceType::CUDA) return ir(OpCode::kRelu, x);
      return codegen::Expr::Op(OpCode::kWhere, {ir2(OpCode::kLe, x, c(0)), c(0), x});
    case kLogicalNot: return ir(OpCode::kLogicalNot, x);
    case kBitwiseNot: return ir(OpCode::kBitNot, x);
    case kIsnan: return ir2(OpCode::kNe, x, x);
    case kIsinf: return ir2(OpCode::kEq, ir(OpCode::kAbs, x), c(INFINITY));
    case kIsfinite: return ir2(OpCode::kLt, ir(OpCode::kAbs, x), c(INFINITY));
    case kSignbit: return ir(OpCode::kSignbit, x);
    case kSpecialNdtr:
      return ir2(OpCode::kMul, ir2(OpCode::kAdd, c(1), ir(OpCode::kErf, ir2(OpCode::kMul, x, c(M_SQRT1_2)))), c(0.5));
  }
  KILN_INTERNAL_ASSERT(false, "no CUDA expression for ", kUnary[op].name);
  return x;
}

template <int kOp>
void UnaryCUDA(const Tensor& out, const Tensor& self, ScalarType compute) {
  const char* name = kUnary[kOp].name;
  cuda::LaunchPointwise(
      name, out, {cuda::PointwiseInput::Of(self)},
      UnaryExpr(kOp, cuda::OpmathInput(0, compute, name), UnaryOpmath(kOp, compute), DeviceType::CUDA));
}

template <int kOp>
void UnaryInto(const Tensor& out, const Tensor& self) {
  if (out.numel() == 0) return;
  ScalarType compute = UnaryComputeType(kOp, self.dtype());
  if (out.device().is_cuda()) {
    if (IsComplex(self.dtype())) return ComplexUnaryCUDA(ToComplexUnary(kOp), out, self, kUnary[kOp].name);
    if constexpr (HasIr(kOp)) return UnaryCUDA<kOp>(out, self, compute);
  }
  if (IsComplex(self.dtype())) return ComplexUnaryInto<kOp>(out, self);
  Tensor in = CastTo(self, compute);
  const bool to_bool = kUnary[kOp].result == UnaryResult::Bool;
  Tensor dst = out.dtype() == (to_bool ? ScalarType::Bool : compute) ? out : EmptyLike(out, to_bool ? ScalarType::Bool : compute);
  ElementwiseIter iter({dst, in});
  // Only the loops that can run are compiled (as Note [Only the kernels that can run] in
  // binary_kernels.h): the output type the op's result kind gives, and for float-valued ops
  // (exp, sin, ...) only floating compute types, UnaryComputeType having promoted integers.
  KILN_DISPATCH_ALL(compute, kUnary[kOp].name, [&] {
    using C = scalar_t;
    using M = opmath_t<C>;
    if constexpr (kUnary[kOp].result == UnaryResult::Float && std::is_integral_v<C>)
      KILN_INTERNAL_ASSERT(false, kUnary[kOp].name, " computes in a floating type");
    else if constexpr (kUnary[kOp].result == UnaryResult::Bool)
      CpuKernel<bool, C>(iter, [](C x) -> bool { return ApplyUnary<M>(kOp, M(x)) != M(0); });
    else if constexpr (std::is_same_v<C, float> && (kOp == kExp || kOp == kSigmoid || kOp == kSilu || kOp == kErf)) {
      constexpr auto run = kOp == kExp       ? avx512::ExpRun
                           : kOp == kSigmoid ? avx512::SigmoidRun
                           : kOp == kSilu    ? avx512::SiluRun
                                             : avx512::ErfRun;
      CpuKernelVec<float, float>(iter, [](float x) { return ApplyUnary<float>(kOp, x); }, run);
    } else CpuKernel<C, C>(iter, [](C x) -> C { return C(ApplyUnary<M>(kOp, M(x))); });
  });
  if (!dst.is_same(out)) {
    Tensor o = out;
    ops::copy_(o, dst);
  }
}

template <int kOp> TensorMeta UnaryMeta(const Tensor& self) {
  CheckUnaryDtype(kOp, self.dtype());
  return TensorMeta{self->sym_sizes(), LayoutOfInputs(self->sym_sizes(), {&self}), UnaryResultType(kOp, self.dtype()),
                    self.device()};
}
template <int kOp> Tensor UnaryFunctional(const Tensor& self) {
  Tensor out = EmptyFromMeta(UnaryMeta<kOp>(self));
  UnaryInto<kOp>(out, self);
  return out;
}
template <int kOp> Tensor UnaryInplaceImpl(Tensor self, bool run) {
  CheckUnaryDtype(kOp, self.dtype());
  ScalarType result = UnaryResultType(kOp, self.dtype());
  KILN_CHECK(CanCast(result, self.dtype()), "result type ", ScalarTypeDisplayName(result),
             " can't be cast to the desired output type ", ScalarTypeDisplayName(self.dtype()));
  if (run) UnaryInto<kOp>(self, self);
  return self;
}
template <int kOp> Tensor UnaryInplace(Tensor self) { return UnaryInplaceImpl<kOp>(self, true); }
template <int kOp> Tensor UnaryInplaceMeta(Tensor self) { return UnaryInplaceImpl<kOp>(self, false); }
template <int kOp> Tensor UnaryOut(const Tensor& self, Tensor out) {
  ResizeOut(kUnary[kOp].name, out, UnaryMeta<kOp>(self));
  UnaryInto<kOp>(out, self);
  return out;
}

template <int kOp>
void DefUnary(Registry& r, bool inplace = true) {
  std::string name = kUnary[kOp].name;
  // the same kernels on CUDA, where UnaryInto launches the op's generated kernel
  constexpr bool cuda = HasIr(kOp);
  // torch.special's ops are functions of that module only (kiln.special.ndtr: python/kiln/special)
  const Variants variants = name.rfind("special_", 0) == 0 ? kFunction : kFunctionAndMethod;
  Op* functional = r.Def(name + "(Tensor self) -> Tensor", {Tag::pointwise, Tag::core}, variants)
                       .template CPUAndCUDA<&UnaryFunctional<kOp>>(cuda)
                       .template Meta<&UnaryMeta<kOp>>()
                       .op();
  if constexpr (HasIr(kOp)) {
    PointwiseIr ir;
    ir.compute = [](const std::vector<ScalarType>& in) { return UnaryComputeType(kOp, in.at(0)); };
    ir.build = [](std::vector<codegen::ExprPtr> in, ScalarType compute, DeviceType device) {
      return UnaryExpr(kOp, std::move(in.at(0)), UnaryOpmath(kOp, compute), device);
    };
    RegisterPointwiseIr(*functional, std::move(ir));
  }
  if (inplace) {
    r.Def(name + "_(Tensor(a!) self) -> Tensor(a!)", {Tag::pointwise}, variants)
        .template CPUAndCUDA<&UnaryInplace<kOp>>(cuda)
        .template Impl<&UnaryInplaceMeta<kOp>>(DispatchKey::Meta)
        .template Impl<&UnaryInplaceMeta<kOp>>(DispatchKey::Fake);
  }
  r.Def(name + ".out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)", {Tag::pointwise})
      .template CPUAndCUDA<&UnaryOut<kOp>>(cuda);
}

template <int... I>
void DefAll(Registry& r, std::integer_sequence<int, I...>) {
  (DefUnary<I>(r, !(I == kIsnan || I == kIsinf || I == kIsfinite || I == kSignbit || I == kSpecialNdtr)), ...);
}

// Ops PyTorch exposes under other spellings.
Tensor Absolute(const Tensor& self) { return CallOp<Tensor>(KILN_OP("aten::abs"), self); }
Tensor Negative(const Tensor& self) { return CallOp<Tensor>(KILN_OP("aten::neg"), self); }
// square is pow(self, 2), as PyTorch's composite (graphs record pow.Tensor_Scalar, autograd
// PowBackward0; bool squares to int64). Complex numbers multiply instead: kiln has no complex pow.
Tensor Square(const Tensor& self) {
  if (IsComplex(self.dtype())) return ops::mul(self, self);
  return CallOp<Tensor>(KILN_OP("aten::pow.Tensor_Scalar"), self, Scalar(int64_t(2)));
}
Tensor Square_(Tensor self) {
  if (IsComplex(self.dtype())) return CallOp<Tensor>(KILN_OP("aten::mul_.Tensor"), self, Tensor(self));
  return CallOp<Tensor>(KILN_OP("aten::pow_.Scalar"), self, Scalar(int64_t(2)));
}
Tensor Positive(const Tensor& self) {
  KILN_CHECK(self.dtype() != ScalarType::Bool, "The `+` operator, on a bool tensor is not supported.");
  return self;
}

// round(x, decimals=d), as PyTorch's round_decimals_kernel: x * 10^d rounded half to even and
// divided back (for d < 0, x / 10^-d rounded and multiplied back), in the opmath type.
void RoundDecimalsInto(const Tensor& out, const Tensor& self, int64_t decimals) {
  if (out.numel() == 0) return;
  const bool negative = decimals < 0;
  if (out.device().is_cuda()) {  // as the CPU loop: nearbyint(x * 10^d) / 10^d, or * / for d < 0
    const ScalarType t = self.dtype();
    KILN_CHECK_NOT_IMPLEMENTED(IsFloating(t), "\"round_cuda\" not implemented for '", ScalarTypeDisplayName(t), "'");
    using codegen::OpCode;
    const codegen::ExprPtr x = cuda::OpmathInput(0, t, "round"), p = cuda::OpmathInput(1, t, "round");
    auto op = [](OpCode o, std::vector<codegen::ExprPtr> a) { return codegen::Expr::Op(o, std::move(a)); };
    const codegen::ExprPtr value =
        negative ? op(OpCode::kMul, {op(OpCode::kRound, {op(OpCode::kDiv, {x, p})}), p})
                 : op(OpCode::kDiv, {op(OpCode::kRound, {op(OpCode::kMul, {x, p})}), p});
    const double ten_pow = std::pow(10.0, static_cast<double>(negative ? -decimals : decimals));
    cuda::LaunchPointwise("round_decimals", out,
                          {cuda::PointwiseInput::Of(self), cuda::PointwiseInput::Number(Scalar(ten_pow), t)}, value);
    return;
  }
  Tensor dst = out.dtype() == self.dtype() ? out : EmptyLike(out, self.dtype());
  ElementwiseIter iter({dst, self});
  KILN_DISPATCH_FLOATING(self.dtype(), decimals == 0 ? "round_vml_cpu" : "round_cpu", [&] {
    using C = scalar_t;
    using M = opmath_t<C>;
    const M ten_pow = static_cast<M>(std::pow(10.0, static_cast<double>(negative ? -decimals : decimals)));
    CpuKernel<C, C>(iter, [ten_pow, negative](C x) -> C {
      return C(negative ? std::nearbyint(M(x) / ten_pow) * ten_pow : std::nearbyint(M(x) * ten_pow) / ten_pow);
    });
  });
  if (!dst.is_same(out)) {
    Tensor o = out;
    ops::copy_(o, dst);
  }
}
TensorMeta RoundDecimalsMeta(const Tensor& self, int64_t) { return UnaryMeta<kRound>(self); }
Tensor RoundDecimals(const Tensor& self, int64_t decimals) {
  Tensor out = EmptyFromMeta(RoundDecimalsMeta(self, decimals));
  RoundDecimalsInto(out, self, decimals);
  return out;
}
Tensor RoundDecimalsInplace(Tensor self, int64_t decimals) {
  RoundDecimalsInto(self, self, decimals);
  return self;
}
Tensor RoundDecimalsInplaceMeta(Tensor self, int64_t) { return self; }
Tensor RoundDecimalsOut(const Tensor& self, int64_t decimals, Tensor out) {
  ResizeOut("round", out, RoundDecimalsMeta(self, decimals));
  RoundDecimalsInto(out, self, decimals);
  return out;
}

}  // namespace

void RegisterUnaryOps(Registry& r) {
  DefAll(r, std::make_integer_sequence<int, kNumUnary>{});
  r.Def("absolute(Tensor self) -> Tensor", {}, kFunctionAndMethod).Composite<&Absolute>();
  r.Def("negative(Tensor self) -> Tensor", {}, kFunctionAndMethod).Composite<&Negative>();
  r.Def("positive(Tensor(a) self) -> Tensor(a)", {}, kFunctionAndMethod).Composite<&Positive>();
  r.Def("square(Tensor self) -> Tensor", {Tag::pointwise}, kFunctionAndMethod).Composite<&Square>();
  r.Def("square_(Tensor(a!) self) -> Tensor(a!)", {Tag::pointwise}, kFunctionAndMethod).Composite<&Square_>();
  r.Def("round.decimals(Tensor self, *, int decimals) -> Tensor", {Tag::pointwise}, kFunctionAndMethod)
      .CPUAndCUDA<&RoundDecimals>().Meta<&RoundDecimalsMeta>();
  r.Def("round_.decimals(Tensor(a!) self, *, int decimals) -> Tensor(a!)", {Tag::pointwise}, kFunctionAndMethod)
      .CPUAndCUDA<&RoundDecimalsInplace>()
      .Impl<&RoundDecimalsInplaceMeta>(DispatchKey::Meta)
      .Impl<&RoundDecimalsInplaceMeta>(DispatchKey::Fake);
  r.Def("round.decimals_out(Tensor self, *, int decimals, Tensor(a!) out) -> Tensor(a!)", {Tag::pointwise})
      .CPUAndCUDA<&RoundDecimalsOut>();
}

}  // namespace kiln
