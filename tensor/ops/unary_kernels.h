// tensor/ops/unary_kernels.h: the unary pointwise ops' table, element functions and CPU loops
// (unary.cc), shared with the files that compile the loops (unary_kernels_*.cc).
//
// Note [Unary kernels in several files]: each op's loop is a template instantiated per compute
// type (and for exp/sigmoid/silu/erf per instruction set), which made unary.cc take 143 s to build
// here (one core, -O3): one edit to a unary op cost more than two minutes. As binary's (Note
// [Binary kernels in several files] in binary_kernels.h), the loops are declared here and
// instantiated in unary_kernels_exp_log.cc, unary_kernels_special.cc and unary_kernels_other.cc
// (extern templates keep unary.cc from instantiating them again), so they build in parallel; each
// op's table row (kUnary), element function (ApplyUnary) and registration (unary.cc) stay in one
// place each.
#pragma once

#include <cmath>
#include <cstring>
#include <type_traits>

#include "tensor/ops/common.h"
#include "tensor/vec_avx512.h"
#include "tensor/vec_math.h"

namespace kiln::unary {

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

inline constexpr UnarySpec kUnary[kNumUnary] = {
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

inline double ErfInv(double y) {
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
inline double Digamma(double x) {
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
inline T RoundHalfEven(T x) { return std::nearbyint(x); }

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
inline bool ComplexUnarySupported(int op) {
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
inline C ApplyComplexUnary(int op, C x) {
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

// out = f(x) over the iterator (out, in): in holds the compute type (UnaryComputeType in unary.cc),
// out the compute type or bool (predicates).
template <int kOp>
void RunUnary(const ElementwiseIter& iter, ScalarType compute) {
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
}

// The same over complex values (`complex`: the input's type); out is complex, or bool for the
// predicates (abs writes |x| into a complex slot: unary.cc copies its real part out).
template <int kOp>
void RunComplexUnary(const ElementwiseIter& iter, ScalarType complex) {
  KILN_DISPATCH_COMPLEX(complex, kUnary[kOp].name, [&] {
    using C = scalar_t;
    if constexpr (kUnary[kOp].result == UnaryResult::Bool)
      CpuKernel<bool, C>(iter, [](C x) -> bool { return ApplyComplexUnary<C>(kOp, x) != C(0); });
    else CpuKernel<C, C>(iter, [](C x) -> C { return ApplyComplexUnary<C>(kOp, x); });
  });
}

// The ops whose loops each unary_kernels_*.cc compiles (every op in one list).
#define KILN_UNARY_EXP_LOG_OPS(X) \
  X(kExp) X(kExp2) X(kLog) X(kLog2) X(kLog10) X(kLog1p) X(kExpm1) X(kSqrt) X(kRsqrt) X(kSigmoid) X(kTanh) \
  X(kReciprocal)
#define KILN_UNARY_SPECIAL_OPS(X) \
  X(kSin) X(kCos) X(kTan) X(kAsin) X(kAcos) X(kAtan) X(kSinh) X(kCosh) X(kAsinh) X(kAcosh) X(kAtanh) X(kErf) \
  X(kErfc) X(kErfinv) X(kLgamma) X(kDigamma) X(kSpecialNdtr)
#define KILN_UNARY_OTHER_OPS(X) \
  X(kSilu) X(kMish) X(kNeg) X(kAbs) X(kSign) X(kFloor) X(kCeil) X(kRound) X(kTrunc) X(kFrac) X(kRelu) \
  X(kLogicalNot) X(kBitwiseNot) X(kIsnan) X(kIsinf) X(kIsfinite) X(kSignbit)
#define KILN_UNARY_DECLARE(op)                                                  \
  extern template void RunUnary<op>(const ElementwiseIter&, ScalarType); \
  extern template void RunComplexUnary<op>(const ElementwiseIter&, ScalarType);
#define KILN_UNARY_INSTANTIATE(op)                                       \
  template void RunUnary<op>(const ElementwiseIter&, ScalarType); \
  template void RunComplexUnary<op>(const ElementwiseIter&, ScalarType);
#ifndef KILN_UNARY_KERNELS_TU
KILN_UNARY_EXP_LOG_OPS(KILN_UNARY_DECLARE)
KILN_UNARY_SPECIAL_OPS(KILN_UNARY_DECLARE)
KILN_UNARY_OTHER_OPS(KILN_UNARY_DECLARE)
#endif

}  // namespace kiln::unary
