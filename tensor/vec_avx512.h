// tensor/vec_avx512.h: float32 exp, sigmoid, silu, erf and GELU's forward and backward runs
// hand-vectorised for AVX-512: codegen/float_math.inc's algorithms on sixteen floats, bit for bit
// the element functions of vec_math.h.
//
// Note [Hand-vectorised runs]: GCC vectorises vec_math.h's ExpF and ErfF from scalar code, but
// not well: it turns ExpF's clamps and overflow checks into a dozen mask operations, and 2^n into
// seven integer ones, about 37 instructions per 16 exps where these take 20 (vminps/vmaxps keep
// a NaN as the clamps do, vscalefps multiplies by 2^n with the same single rounding as the two
// exponent-field factors, subnormal results included). A float32 GELU is mostly that exp: with
// these, 1024x256 forward 105 -> 83 us at one thread. The runs instantiate the algorithms the
// scalar functions instantiate (Note [One float math]) with the Backend below: the same operations
// in the same order, so they return the same bits (checked on every float in a harness, and on
// 8M patterns by tests/test_cpu_capability.py, which runs both),
// but for a NaN's sign out of sigmoid (GCC turns 1 + (-x) into 1 - x, which keeps x's).
// CpuKernelVec (loops.h) calls a run for contiguous operands on an AVX-512 CPU; other layouts and
// other CPUs take the scalar element function.
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "codegen/erf_polynomials.h"

namespace kiln::avx512 {

#define KILN_AVX512_INLINE __attribute__((target("arch=x86-64-v4"), always_inline)) inline

KILN_AVX512_INLINE __m512 Splat(float v) { return _mm512_set1_ps(v); }

// float_math.inc's algorithms again (Note [One float math]), here under the AVX-512 target: its
// intrinsics may only be inlined into functions compiled for it.
#define KILN_FMATH_INLINE KILN_AVX512_INLINE
#include "codegen/float_math.inc"  // NOLINT(build/include)
#undef KILN_FMATH_INLINE

// Sixteen floats. Each operation is one instruction where the scalar code's is: vminps/vmaxps
// keep a NaN as the scalar clamps do (_mm512_min_ps(a, b) is a < b ? a : b, so a NaN b passes),
// fnmadd(a, b, -0.) is -(a * b) rounded once, and vscalefps multiplies by 2^n with the same single
// rounding as the scalar code's two exponent-field factors, subnormal results included.
struct Backend {
  using F = __m512;
  using M = __mmask16;
  static KILN_AVX512_INLINE F Const(float v) { return Splat(v); }
  static KILN_AVX512_INLINE F Add(F a, F b) { return _mm512_add_ps(a, b); }
  static KILN_AVX512_INLINE F Sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static KILN_AVX512_INLINE F Mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static KILN_AVX512_INLINE F Div(F a, F b) { return _mm512_div_ps(a, b); }
  static KILN_AVX512_INLINE F Neg(F a) { return _mm512_xor_ps(a, Splat(-0.0f)); }
  static KILN_AVX512_INLINE F NegMul(F a, F b) { return _mm512_fnmadd_ps(a, b, Splat(-0.0f)); }
  static KILN_AVX512_INLINE F Fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static KILN_AVX512_INLINE F Fnma(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); }
  static KILN_AVX512_INLINE F Abs(F a) { return _mm512_abs_ps(a); }
  // the sign bit from `sign`, the rest from `magnitude`
  static KILN_AVX512_INLINE F CopySign(F magnitude, F sign) {
    const __m512i mask = _mm512_set1_epi32(static_cast<int32_t>(0x80000000u));
    return _mm512_castsi512_ps(
        _mm512_ternarylogic_epi32(mask, _mm512_castps_si512(sign), _mm512_castps_si512(magnitude), 0xCA));
  }
  static KILN_AVX512_INLINE M Gt(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
  static KILN_AVX512_INLINE M Lt(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static KILN_AVX512_INLINE M IsNaN(F a) { return _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q); }
  static KILN_AVX512_INLINE F Select(M m, F a, F b) { return _mm512_mask_mov_ps(b, m, a); }
  static KILN_AVX512_INLINE F ClampKeepNaN(F x, F lo, F hi) { return _mm512_max_ps(lo, _mm512_min_ps(hi, x)); }
  static KILN_AVX512_INLINE F ScaleByPow2(F p, F n) { return _mm512_scalef_ps(p, n); }
};

// out[i] = f(in[i]...) for i < n, the last n % 16 under a mask. Two vectors an iteration, as
// PyTorch's vectorized loops take them: their chains (a division, an exp) interleave, and GELU's
// forward went from 134 to 126 us on 1024x256 (tools/bench/hot_ops_bench.py --only gelu).
template <typename F, typename... In>
KILN_AVX512_INLINE void Run(float* out, int64_t n, const In*... in) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 a = F::Apply(_mm512_loadu_ps(in + i)...);
    const __m512 b = F::Apply(_mm512_loadu_ps(in + i + 16)...);
    _mm512_storeu_ps(out + i, a);
    _mm512_storeu_ps(out + i + 16, b);
  }
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, F::Apply(_mm512_loadu_ps(in + i)...));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(out + i, m, F::Apply(_mm512_maskz_loadu_ps(m, in + i)...));
  }
}
// A run's element function: one of float_math.inc's algorithms on the Backend.
template <__m512 (*F)(const Backend&, __m512)>
struct UnaryFn {
  static KILN_AVX512_INLINE __m512 Apply(__m512 x) { return F(Backend{}, x); }
};
struct GeluBackwardFn {
  static KILN_AVX512_INLINE __m512 Apply(__m512 g, __m512 x) { return GeluBackward(Backend{}, g, x); }
};

__attribute__((target("arch=x86-64-v4"))) inline void ExpRun(float* out, const float* x, int64_t n) {
  Run<UnaryFn<&Exp<Backend>>>(out, n, x);
}
__attribute__((target("arch=x86-64-v4"))) inline void SigmoidRun(float* out, const float* x, int64_t n) {
  Run<UnaryFn<&Sigmoid<Backend>>>(out, n, x);
}
__attribute__((target("arch=x86-64-v4"))) inline void SiluRun(float* out, const float* x, int64_t n) {
  Run<UnaryFn<&Silu<Backend>>>(out, n, x);
}
__attribute__((target("arch=x86-64-v4"))) inline void ErfRun(float* out, const float* x, int64_t n) {
  Run<UnaryFn<&Erf<Backend>>>(out, n, x);
}
__attribute__((target("arch=x86-64-v4"))) inline void GeluRun(float* out, const float* x, int64_t n) {
  Run<UnaryFn<&Gelu<Backend>>>(out, n, x);
}
__attribute__((target("arch=x86-64-v4"))) inline void GeluBackwardRun(float* out, const float* g, const float* x,
                                                                      int64_t n) {
  Run<GeluBackwardFn>(out, n, g, x);
}

#undef KILN_AVX512_INLINE

}  // namespace kiln::avx512
