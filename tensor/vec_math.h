// tensor/vec_math.h: branch-free float math the compiler can vectorise (exp, tanh and erf for float32).
//
// std::expf is a library call, so a loop over it stays scalar; ExpF below is plain arithmetic
// (range reduction by ln 2, a degree-6 polynomial on [-ln2/2, ln2/2], scaling by 2^n through the
// exponent bits), so `out[i] = ExpF(x[i])` becomes AVX2 code. Accuracy: within 2 ulp of expf over
// the whole float range; overflow and underflow saturate to inf and 0 as expf does.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "codegen/erf_polynomials.h"

namespace kiln {

inline float ExpF(float x) {
  const float kMax = 88.72283935546875f, kMin = -103.972084045410f;
  const bool overflow = x > kMax, underflow = x < kMin;
  float xc = x > kMax ? kMax : x;
  xc = xc < kMin ? kMin : xc;
  // n = round(x / ln2) by the 1.5 * 2^23 trick (a library nearbyint call would keep the loop
  // scalar); r = x - n ln2 (ln2 split in two for exactness)
  // Every multiply-add is written out (as GCC fuses them at -O2 and above), so an unoptimised
  // build rounds alike and vec_avx512.h's ExpF can match it bit for bit.
  const float kRound = 12582912.0f;
  float n = std::fma(xc, 1.44269504088896341f, kRound) - kRound;
  float r = std::fma(-n, 0.693145751953125f, xc);
  r = std::fma(-n, 1.428606765330187045e-06f, r);
  float p = 1.9875691500e-4f;
  p = std::fma(p, r, 1.3981999507e-3f);
  p = std::fma(p, r, 8.3334519073e-3f);
  p = std::fma(p, r, 4.1665795894e-2f);
  p = std::fma(p, r, 1.6666665459e-1f);
  p = std::fma(p, r, 5.0000001201e-1f);
  p = std::fma(p * r, r, r) + 1.0f;
  // 2^n through the exponent field as two factors 2^(n/2), each a normal float for n in
  // [-150, 128], so results in the subnormal range still come out right.
  int32_t ni = static_cast<int32_t>(n);
  int32_t half = ni >> 1;
  int32_t b1 = (half + 127) << 23, b2 = (ni - half + 127) << 23;
  float s1, s2;
  std::memcpy(&s1, &b1, 4);
  std::memcpy(&s2, &b2, 4);
  float result = p * s1 * s2;
  result = underflow ? 0.0f : result;
  return overflow ? INFINITY : (x != x ? x : result);
}

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

// erf for float by Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7) over ExpF, the
// approximation PyTorch's vectorized float kernels use: erf of |x| > ~4 rounds to exactly +-1, so
// gelu(-6.) is 0 as in PyTorch (an erfc-based CDF kept a tiny tail). Branch-free: loops vectorise.
// erf(z) = copysign(1 - e^(-z^2) t r(t), z) with t = 1 / (1 + p|z|): ErfRationalF gives t and
// r(t), so gelu's backward can share its e^(-z^2) with the normal PDF.
struct ErfPartsF {
  float t, r;
};
inline ErfPartsF ErfRationalF(float z) {
  const float t = 1.0f / std::fma(0.3275911f, std::fabs(z), 1.0f);
  float r = std::fma(1.061405429f, t, -1.453152027f);
  r = std::fma(r, t, 1.421413741f);
  r = std::fma(r, t, -0.284496736f);
  r = std::fma(r, t, 0.254829592f);
  return {t, r};
}
// e = e^(-z^2)
inline float ErfFromPartsF(float z, float e, ErfPartsF parts) {
  return std::copysign(std::fma(-(e * parts.t), parts.r, 1.0f), z);
}
inline float ErfF(float x) { return ErfFromPartsF(x, ExpF(-(x * x)), ErfRationalF(x)); }

// gelu_backward for float32, g * (cdf(x) + x pdf(x)), with one exp: for z = x / sqrt 2, the CDF's
// erf takes e^(-z^2), which is e^(-x^2 / 2), and the PDF is that over sqrt(2 pi). Every
// multiply-add is written out, so GCC fuses none of its own and a vector body, its remainder and
// the AVX-512 run (vec_avx512.h) round alike.
inline float GeluBackwardF(float g, float x) {
  const float z = x * float(M_SQRT1_2);
  const float e = ExpF(-(z * z));
  const float cdf = 0.5f * (1.0f + ErfFromPartsF(z, e, ErfRationalF(z)));
  const float pdf = e * float(M_2_SQRTPI * M_SQRT1_2 * 0.5);  // 1 / sqrt(2 pi)
  return g * std::fma(x, pdf, cdf);
}

// erf for float by the polynomials the Inductor code generator emits (codegen/erf_polynomials.h,
// Note [Inline erff] in codegen/llvm_math.cc): x + x q(x^2) below 0.921875, 1 - e^(-x^2) c(|x|)
// above, |x| clamped to 4, both computed and one picked so the loop vectorises (libm's erff is a
// call per element: eager erf took 9x PyTorch's vectorised one). Within about 2 ulp of glibc's erf;
// NaN propagates, +-inf gives +-1, the sign of -0.0 stays. Eager's erf op; gelu keeps ErfF above
// (PyTorch's gelu rounds as Abramowitz and Stegun's formula does).
template <int N>
[[gnu::always_inline]] inline float HornerF(float x, const double (&c)[N]) {
  float p = static_cast<float>(c[N - 1]);
#pragma GCC unroll 16  // a loop left in the element loop keeps that loop scalar
  for (int i = N - 2; i >= 0; --i) p = std::fma(p, x, static_cast<float>(c[i]));
  return p;
}

inline float ErfPolyF(float x) {
  const float a = std::fabs(x);
  const float near = std::fma(a, HornerF(a * a, codegen::kErfNear), a);
  const float clamp = static_cast<float>(codegen::kErfFarClamp);
  const float ac = a > clamp ? clamp : a;  // NaN stays NaN
  const float far = 1.0f - ExpF(-(ac * ac)) * HornerF(ac - static_cast<float>(codegen::kErfFarCentre),
                                                     codegen::kErfFar);
  return std::copysign(a < static_cast<float>(codegen::kErfNearLimit) ? near : far, x);
}

// The standard normal CDF, 0.5 * (1 + erf(x / sqrt(2))), as PyTorch's gelu computes it.
template <typename M>
inline M NormalCdf(M x) {
  if constexpr (std::is_same_v<M, float>) return 0.5f * (1.0f + ErfF(x * float(M_SQRT1_2)));
  else return M(0.5) * (M(1) + std::erf(x * M(M_SQRT1_2)));
}

}  // namespace kiln
