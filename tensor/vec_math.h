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

namespace kiln {

inline float ExpF(float x) {
  const float kMax = 88.72283935546875f, kMin = -103.972084045410f;
  const bool overflow = x > kMax, underflow = x < kMin;
  float xc = std::fmin(std::fmax(x, kMin), kMax);
  // n = round(x / ln2); r = x - n ln2 (ln2 split in two for exactness)
  float n = std::nearbyint(xc * 1.44269504088896341f);
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

}  // namespace kiln
