// tensor/vec_math.h: branch-free float math the compiler can vectorise (exp for float32).
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

namespace kiln {

inline float ExpF(float x) {
  const float kMax = 88.72283935546875f, kMin = -103.972084045410f;
  const bool overflow = x > kMax, underflow = x < kMin;
  float xc = x > kMax ? kMax : x;
  xc = xc < kMin ? kMin : xc;
  // n = round(x / ln2) by the 1.5 * 2^23 trick (a library nearbyint call would keep the loop
  // scalar); r = x - n ln2 (ln2 split in two for exactness)
  const float kRound = 12582912.0f;
  float n = (xc * 1.44269504088896341f + kRound) - kRound;
  float r = xc - n * 0.693145751953125f;
  r = r - n * 1.428606765330187045e-06f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
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

// tanh for float without a library call: Cephes' odd polynomial below |x| = 0.625, and
// 1 - 2 / (exp(2|x|) + 1) above it (both computed, one selected, so the loop vectorises).
inline float TanhF(float x) {
  const float ax = std::fabs(x);
  const float z = ax * ax;
  const float small = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z +
                        1.33314422036e-1f) * z - 3.33332819422e-1f) * z * ax + ax;
  const float large = 1.0f - 2.0f / (ExpF(2.0f * ax) + 1.0f);
  return std::copysign(ax < 0.625f ? small : large, x);  // odd: tanh(-0) = -0 too
}

template <typename M>
inline M Tanh(M x) {
  if constexpr (std::is_same_v<M, float>) return TanhF(x);
  else return std::tanh(x);
}

// erf for float by Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7) over ExpF, the
// approximation PyTorch's vectorized float kernels use: erf of |x| > ~4 rounds to exactly +-1, so
// gelu(-6.) is 0 as in PyTorch (an erfc-based CDF kept a tiny tail). Branch-free: loops vectorise.
inline float ErfF(float x) {
  const float a = std::fabs(x);
  const float t = 1.0f / std::fma(0.3275911f, a, 1.0f);
  float r = std::fma(1.061405429f, t, -1.453152027f);
  r = std::fma(r, t, 1.421413741f);
  r = std::fma(r, t, -0.284496736f);
  r = std::fma(r, t, 0.254829592f);
  const float y = std::fma(-ExpF(-(x * x)) * t, r, 1.0f);
  return std::copysign(y, x);
}

// The standard normal CDF, 0.5 * (1 + erf(x / sqrt(2))), as PyTorch's gelu computes it.
template <typename M>
inline M NormalCdf(M x) {
  if constexpr (std::is_same_v<M, float>) return 0.5f * (1.0f + ErfF(x * float(M_SQRT1_2)));
  else return M(0.5) * (M(1) + std::erf(x * M(M_SQRT1_2)));
}

}  // namespace kiln
