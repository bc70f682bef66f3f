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

// The standard normal CDF, 0.5 * erfc(-x / sqrt(2)): for float, Numerical Recipes' erfcc (relative
// error below 1.2e-7 for the exact polynomial) over ExpF, so gelu and gelu_backward's loops vectorise.
template <typename M>
inline M NormalCdf(M x) {
  if constexpr (std::is_same_v<M, float>) {
    const float z = std::fabs(x) * float(M_SQRT1_2);
    const float t = 1.0f / (1.0f + 0.5f * z);
    const float poly =
        -1.26551223f +
        t * (1.00002368f +
             t * (0.37409196f +
                  t * (0.09678418f +
                       t * (-0.18628806f +
                            t * (0.27886807f + t * (-1.13520398f + t * (1.48851587f + t * (-0.82215223f +
                                                                                          t * 0.17087277f))))))));
    const float tail = t * ExpF(-z * z + poly);  // erfc(|x| / sqrt(2))
    return 0.5f * (x > 0.0f ? 2.0f - tail : tail);
  } else {
    return M(0.5) * (M(1) + std::erf(x * M(M_SQRT1_2)));
  }
}

}  // namespace kiln
