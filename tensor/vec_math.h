// tensor/vec_math.h: branch-free float math the compiler can vectorise (exp, sigmoid, silu, tanh and
// erf for float32).
//
// std::expf is a library call, so a loop over it stays scalar; these are plain arithmetic, so
// `out[i] = ExpF(x[i])` becomes AVX2 code. exp, sigmoid, silu, erf and GELU are codegen/
// float_math.h's algorithms on one float (Note [One float math]): Inductor's kernels and the
// AVX-512 runs (vec_avx512.h) compute the same ones, bit for bit.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "codegen/float_math.h"

namespace kiln {

// e^x within 2 ulp of expf over the whole float range (fmath::Exp).
inline float ExpF(float x) { return fmath::Exp(fmath::ScalarF32{}, x); }

// exp that vectorises for float; std::exp otherwise.
template <typename M>
inline M Exp(M x) {
  if constexpr (std::is_same_v<M, float>) return ExpF(x);
  else return std::exp(x);
}

// Note [tanhf in double]: float tanh is computed in double and rounded once, so it is correctly
// rounded (measured: within 0.4999999 ulp on 47M floats in [-10.5, 10.5]), as PyTorch's Sleef
// tanhf is to within 0.513 ulp. The older float formulas were 1.26 ulp off and differed from
// PyTorch by an ulp on 12% of inputs in [-1, 1], which trunc(tanh(v) / ...) magnified to a
// whole unit (fuzz seed 391, program 2408); now they differ on 1e-4 of inputs, where Sleef is
// not correctly rounded. The double arithmetic still vectorises (4 lanes, no library call) and
// ran at 0.6-0.8x PyTorch's time. Cephes' double tanh: a rational odd function below 0.625 and
// 1 - 2 / (e^2a + 1) above, both computed and one selected. Every multiply-add is an explicit
// fma, so Inductor's copy (VectorMath::TanhF32) rounds bit for bit as this one does.
//
// e^y for y in [0, 20]: y = n ln2 + r (ln2 in two parts), Cephes' rational e^r, times 2^n from
// the rounding sum's low bits (no double-to-int conversion, which AVX2 lacks).
inline double ExpForTanhD(double y) {
  const double kRound = 6755399441055744.0;  // 1.5 * 2^52
  const double t = std::fma(y, 1.4426950408889634, kRound);
  const double n = t - kRound;
  double r = std::fma(-n, 6.93145751953125e-1, y);
  r = std::fma(-n, 1.42860682030941723212e-6, r);
  const double rr = r * r;
  const double px = r * std::fma(std::fma(1.26177193074810590878e-4, rr, 3.02994407707441961300e-2), rr,
                                 9.99999999999999999910e-1);
  const double qx = std::fma(std::fma(std::fma(3.00198505138664455042e-6, rr, 2.52448340349684104192e-3), rr,
                                      2.27265548208155028766e-1), rr, 2.00000000000000000009e0);
  const double e = std::fma(2.0, px / (qx - px), 1.0);
  int64_t t_bits;
  std::memcpy(&t_bits, &t, 8);
  const uint64_t scale_bits = static_cast<uint64_t>(t_bits + 1023) << 52;  // n + 1023 in the exponent
  double scale;
  std::memcpy(&scale, &scale_bits, 8);
  return e * scale;
}

inline float TanhF(float x) {
  double a = std::fabs(static_cast<double>(x));
  a = a > 10.0 ? 10.0 : a;  // tanh(10) rounds to 1.f; NaN fails the comparison and stays NaN
  const double z = a * a;
  const double p = std::fma(std::fma(-9.64399179425052238628e-1, z, -9.92877231001918586564e1), z,
                            -1.61468768441708447952e3);
  const double q = std::fma(std::fma(z + 1.12811678491632931402e2, z, 2.23548839060100448583e3), z,
                            4.84406305325125486048e3);
  const double small = std::fma(a * z, p / q, a);
  const double large = 1.0 - 2.0 / (ExpForTanhD(2.0 * a) + 1.0);
  const float r = static_cast<float>(a < 0.625 ? small : large);
  return std::copysign(r, x);  // odd: tanh(-0) = -0 too
}

template <typename M>
inline M Tanh(M x) {
  if constexpr (std::is_same_v<M, float>) return TanhF(x);
  else return std::tanh(x);
}

// erf by Abramowitz and Stegun 7.1.26 (fmath::ErfAbramowitzStegun: absolute error below 1.5e-7),
// the approximation PyTorch's vectorized float GELU uses, so gelu(-6.) is 0 as in PyTorch.
inline float ErfF(float x) { return fmath::ErfAbramowitzStegun(fmath::ScalarF32{}, x); }

// gelu for float32, 0.5 * fma(x, erf(x / sqrt 2), x) (fmath::Gelu).
inline float GeluF(float x) { return fmath::Gelu(fmath::ScalarF32{}, x); }

// gelu_backward for float32, g * (cdf(x) + x pdf(x)), with one exp (fmath::GeluBackward).
inline float GeluBackwardF(float g, float x) { return fmath::GeluBackward(fmath::ScalarF32{}, g, x); }

// sigmoid and silu for float32 (fmath::Sigmoid, fmath::Silu): 1 / (1 + e^-x), x / (1 + e^-x).
inline float SigmoidF(float x) { return fmath::Sigmoid(fmath::ScalarF32{}, x); }
inline float SiluF(float x) { return fmath::Silu(fmath::ScalarF32{}, x); }

// erf for float32, within about 2 ulp of glibc's erf (fmath::Erf, the polynomials of
// codegen/erf_polynomials.h): eager's erf op (libm's erff is a call per element: eager erf took 9x
// PyTorch's vectorised one). GELU keeps ErfF above, as PyTorch's does.
inline float ErfPolyF(float x) { return fmath::Erf(fmath::ScalarF32{}, x); }

// The standard normal CDF, 0.5 * (1 + erf(x / sqrt(2))), as PyTorch's gelu computes it.
template <typename M>
inline M NormalCdf(M x) {
  if constexpr (std::is_same_v<M, float>) return fmath::NormalCdf(fmath::ScalarF32{}, x);
  else return M(0.5) * (M(1) + std::erf(x * M(M_SQRT1_2)));
}

}  // namespace kiln
