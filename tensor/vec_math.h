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

// float tanh in double, rounded once (fmath::TanhF32: Note [tanhf in double] in
// codegen/float_math.inc).
inline float TanhF(float x) { return fmath::TanhF32(x); }

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
