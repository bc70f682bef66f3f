// codegen/float_math.h: float32 exp, sigmoid, silu, erf, GELU and tanh for eager kernels and the
// Inductor code generator alike: the algorithms of float_math.inc and the scalar backends.
//
// Note [One float math]: each function is written once, in float_math.inc, as a template over an
// arithmetic backend, and instantiated three times: for `float` (ScalarF32 below: eager's element
// functions, which GCC vectorises), for `__m512` (tensor/vec_avx512.h: eager's hand-vectorised
// runs, Note [Hand-vectorised runs]) and for LLVM IR values (codegen/llvm_math.cc: Inductor's
// kernels, CPU and NVPTX). Every backend rounds each operation once and alike (multiply-adds
// fused exactly where the algorithm says Fma), so a compiled exp, sigmoid, erf or GELU returns
// the bits eager's does (tests/test_float_math.py compares them over every float pattern class).
// Before, Inductor had its own exp (other coefficients, 2^n from a biased rounding sum) and a
// sigmoid by reciprocal estimate, and compiled and eager differed by an ulp on many inputs.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "codegen/erf_polynomials.h"

namespace kiln::fmath {

#define KILN_FMATH_INLINE [[gnu::always_inline]] inline
#include "codegen/float_math.inc"  // NOLINT(build/include)
#undef KILN_FMATH_INLINE

// The arithmetic the scalar backends share, on one T, each operation rounded once.
template <typename T>
struct ScalarArith {
  using F = T;
  using M = bool;
  static F Const(T v) { return v; }
  static F Add(F a, F b) { return a + b; }
  static F Sub(F a, F b) { return a - b; }
  static F Mul(F a, F b) { return a * b; }
  static F Div(F a, F b) { return a / b; }
  static F Fma(F a, F b, F c) { return std::fma(a, b, c); }
  static F Fnma(F a, F b, F c) { return std::fma(-a, b, c); }
  static M Lt(F a, F b) { return a < b; }
  static F Select(M m, F a, F b) { return m ? a : b; }
};

// One float: eager's element functions (`out[i] = fmath::Exp(s, x[i])` vectorises).
struct ScalarF32 : ScalarArith<float> {
  static F Neg(F a) { return -a; }
  static F NegMul(F a, F b) { return -(a * b); }
  static F Abs(F a) { return std::fabs(a); }
  static F CopySign(F magnitude, F sign) { return std::copysign(magnitude, sign); }
  static M Gt(F a, F b) { return a > b; }
  static M IsNaN(F a) { return a != a; }
  static F ClampKeepNaN(F x, F lo, F hi) {
    const F y = x > hi ? hi : x;
    return y < lo ? lo : y;
  }
  // 2^n as two exponent-field factors 2^(n/2), each a normal float for n in [-150, 128], so a
  // result in the subnormal range is rounded once, by the second product
  static F ScaleByPow2(F p, F n) {
    const int32_t ni = static_cast<int32_t>(n), half = ni >> 1;
    const int32_t b1 = (half + 127) << 23, b2 = (ni - half + 127) << 23;
    float s1, s2;
    std::memcpy(&s1, &b1, 4);
    std::memcpy(&s2, &b2, 4);
    return p * s1 * s2;
  }
};

// One double: the arithmetic of eager's float tanh (Note [tanhf in double] in float_math.inc).
struct ScalarF64 : ScalarArith<double> {
  static F Pow2FromRoundingSum(F t) {
    int64_t bits;
    std::memcpy(&bits, &t, 8);
    const uint64_t scale_bits = static_cast<uint64_t>(bits + 1023) << 52;  // n + 1023 in the exponent
    double scale;
    std::memcpy(&scale, &scale_bits, 8);
    return scale;
  }
};

// float tanh, correctly rounded (Note [tanhf in double] in float_math.inc).
inline float TanhF32(float x) {
  double a = std::fabs(static_cast<double>(x));
  a = a > 10.0 ? 10.0 : a;  // NaN fails the comparison and stays NaN
  const float r = static_cast<float>(TanhOfAbsInDouble(ScalarF64{}, a));
  return std::copysign(r, x);  // odd: tanh(-0) = -0 too
}

}  // namespace kiln::fmath
