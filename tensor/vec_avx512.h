// tensor/vec_avx512.h: float32 exp, sigmoid, silu and GELU's forward and backward runs
// hand-vectorised for AVX-512, bit for bit the element functions of vec_math.h, unary.cc and the
// activation files.
//
// Note [Hand-vectorised runs]: GCC vectorises vec_math.h's ExpF and ErfF from scalar code, but
// not well: it turns ExpF's clamps and overflow checks into a dozen mask operations, and 2^n into
// seven integer ones, about 37 instructions per 16 exps where these take 20 (vminps/vmaxps keep
// a NaN as the clamps do, vscalefps multiplies by 2^n with the same single rounding as the two
// exponent-field factors, subnormal results included). A float32 GELU is mostly that exp: with
// these, 1024x256 forward 105 -> 83 us at one thread. The runs compute the same operations in the
// same order, multiply-adds fused where the scalar code calls std::fma, so they return the same
// bits as the scalar functions (checked on every float: tests/test_cpu_capability.py runs both),
// but for a NaN's sign out of sigmoid (GCC turns 1 + (-x) into 1 - x, which keeps x's).
// CpuKernelVec (loops.h) calls a run for contiguous operands on an AVX-512 CPU; other layouts and
// other CPUs take the scalar element function.
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>

namespace kiln::avx512 {

#define KILN_AVX512_INLINE __attribute__((target("arch=x86-64-v4"), always_inline)) inline

KILN_AVX512_INLINE __m512 Splat(float v) { return _mm512_set1_ps(v); }

// vec_math.h's ExpF.
KILN_AVX512_INLINE __m512 ExpF(__m512 x) {
  const __m512 max = Splat(88.72283935546875f), min = Splat(-103.972084045410f), round = Splat(12582912.0f);
  // _mm512_min_ps(a, b) is a < b ? a : b, so a NaN x (the second operand) passes through both
  const __m512 xc = _mm512_max_ps(min, _mm512_min_ps(max, x));
  const __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(xc, Splat(1.44269504088896341f), round), round);
  __m512 r = _mm512_fnmadd_ps(n, Splat(0.693145751953125f), xc);
  r = _mm512_fnmadd_ps(n, Splat(1.428606765330187045e-06f), r);
  __m512 p = Splat(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, Splat(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, Splat(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, Splat(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, Splat(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, Splat(5.0000001201e-1f));
  p = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), Splat(1.0f));
  __m512 result = _mm512_scalef_ps(p, n);  // n in [-150, 128]: p * 2^n rounded once
  result = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, min, _CMP_NLT_UQ), result);
  result = _mm512_mask_mov_ps(result, _mm512_cmp_ps_mask(x, max, _CMP_GT_OQ), Splat(INFINITY));
  return _mm512_mask_mov_ps(result, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

// copysign(magnitude, sign): the sign bit from `sign`, the rest from `magnitude`.
KILN_AVX512_INLINE __m512 CopySign(__m512 magnitude, __m512 sign) {
  const __m512i mask = _mm512_set1_epi32(static_cast<int32_t>(0x80000000u));
  return _mm512_castsi512_ps(
      _mm512_ternarylogic_epi32(mask, _mm512_castps_si512(sign), _mm512_castps_si512(magnitude), 0xCA));
}

// Abramowitz and Stegun's rational part of erf: t = 1 / (1 + p|z|) and its polynomial r(t), so
// erf(z) = copysign(1 - e^(-z^2) t r, z).
struct ErfParts {
  __m512 t, r;
};
KILN_AVX512_INLINE ErfParts ErfRational(__m512 z) {
  const __m512 a = _mm512_abs_ps(z);
  const __m512 t = _mm512_div_ps(Splat(1.0f), _mm512_fmadd_ps(Splat(0.3275911f), a, Splat(1.0f)));
  __m512 r = _mm512_fmadd_ps(Splat(1.061405429f), t, Splat(-1.453152027f));
  r = _mm512_fmadd_ps(r, t, Splat(1.421413741f));
  r = _mm512_fmadd_ps(r, t, Splat(-0.284496736f));
  r = _mm512_fmadd_ps(r, t, Splat(0.254829592f));
  return {t, r};
}
// copysign(1 - e t r, z), e = e^(-z^2); fma(-(e t), r, 1) is fnmadd(e t, r, 1) exactly.
KILN_AVX512_INLINE __m512 ErfFromParts(__m512 z, __m512 e, ErfParts parts) {
  return CopySign(_mm512_fnmadd_ps(_mm512_mul_ps(e, parts.t), parts.r, Splat(1.0f)), z);
}

// vec_math.h's ErfF. -(z * z) is fnmadd(z, z, -0.): the negated rounded square, -0. for 0.
KILN_AVX512_INLINE __m512 ErfF(__m512 z) {
  return ErfFromParts(z, ExpF(_mm512_fnmadd_ps(z, z, Splat(-0.0f))), ErfRational(z));
}

// gelu, float32 (activation.cc): 0.5 * fma(x, erf(x / sqrt 2), x).
KILN_AVX512_INLINE __m512 Gelu(__m512 x) {
  const __m512 erf = ErfF(_mm512_mul_ps(x, Splat(static_cast<float>(M_SQRT1_2))));
  return _mm512_mul_ps(Splat(0.5f), _mm512_fmadd_ps(x, erf, x));
}

// gelu_backward, float32 (activation_backward.cc, GeluBackwardF): one exp for the CDF and the PDF.
KILN_AVX512_INLINE __m512 GeluBackward(__m512 g, __m512 x) {
  const __m512 z = _mm512_mul_ps(x, Splat(static_cast<float>(M_SQRT1_2)));
  const __m512 e = ExpF(_mm512_fnmadd_ps(z, z, Splat(-0.0f)));
  const __m512 erf = ErfFromParts(z, e, ErfRational(z));
  const __m512 cdf = _mm512_mul_ps(Splat(0.5f), _mm512_add_ps(Splat(1.0f), erf));
  const __m512 pdf = _mm512_mul_ps(e, Splat(static_cast<float>(M_2_SQRTPI * M_SQRT1_2 * 0.5)));
  return _mm512_mul_ps(g, _mm512_fmadd_ps(x, pdf, cdf));
}

// sigmoid and silu (unary.cc): 1 / (1 + exp(-x)) and x / (1 + exp(-x)).
KILN_AVX512_INLINE __m512 Negate(__m512 x) { return _mm512_xor_ps(x, Splat(-0.0f)); }
KILN_AVX512_INLINE __m512 Sigmoid(__m512 x) {
  return _mm512_div_ps(Splat(1.0f), _mm512_add_ps(Splat(1.0f), ExpF(Negate(x))));
}
KILN_AVX512_INLINE __m512 Silu(__m512 x) { return _mm512_div_ps(x, _mm512_add_ps(Splat(1.0f), ExpF(Negate(x)))); }

// out[i] = f(in[i]...) for i < n, the last n % 16 under a mask.
template <typename F, typename... In>
KILN_AVX512_INLINE void Run(float* out, int64_t n, const In*... in) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, F::Apply(_mm512_loadu_ps(in + i)...));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(out + i, m, F::Apply(_mm512_maskz_loadu_ps(m, in + i)...));
  }
}
struct ExpFn {
  static KILN_AVX512_INLINE __m512 Apply(__m512 x) { return ExpF(x); }
};
struct SigmoidFn {
  static KILN_AVX512_INLINE __m512 Apply(__m512 x) { return Sigmoid(x); }
};
struct SiluFn {
  static KILN_AVX512_INLINE __m512 Apply(__m512 x) { return Silu(x); }
};
struct GeluFn {
  static KILN_AVX512_INLINE __m512 Apply(__m512 x) { return Gelu(x); }
};
struct GeluBackwardFn {
  static KILN_AVX512_INLINE __m512 Apply(__m512 g, __m512 x) { return GeluBackward(g, x); }
};

__attribute__((target("arch=x86-64-v4"))) inline void ExpRun(float* out, const float* x, int64_t n) {
  Run<ExpFn>(out, n, x);
}
__attribute__((target("arch=x86-64-v4"))) inline void SigmoidRun(float* out, const float* x, int64_t n) {
  Run<SigmoidFn>(out, n, x);
}
__attribute__((target("arch=x86-64-v4"))) inline void SiluRun(float* out, const float* x, int64_t n) {
  Run<SiluFn>(out, n, x);
}
__attribute__((target("arch=x86-64-v4"))) inline void GeluRun(float* out, const float* x, int64_t n) {
  Run<GeluFn>(out, n, x);
}
__attribute__((target("arch=x86-64-v4"))) inline void GeluBackwardRun(float* out, const float* g, const float* x,
                                                                      int64_t n) {
  Run<GeluBackwardFn>(out, n, g, x);
}

#undef KILN_AVX512_INLINE

}  // namespace kiln::avx512
