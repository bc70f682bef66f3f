// tensor/ops/softmax_rows.h: float32 softmax and log_softmax over contiguous rows (the last dim),
// forward and backward, vectorised: PyTorch's lastdim kernels for the case every transformer's
// attention and every cross_entropy runs.
//
// Note [Softmax rows]: as PyTorch's _vec_softmax_lastdim / _vec_log_softmax_lastdim, each row is
// reduced in float over vector lanes (kRowLanes partial results, then combined), not serially:
// the max, the sum of exp(x - max) (exp by ExpF, which vectorises; a library expf call would keep
// the loop scalar) and, backward, the sum of the gradient (times the output for softmax). A lane
// sum is at least as accurate as a serial one and rounds as PyTorch's own lane sums do, not bit
// for bit (its lanes are its vector width's). NaN anywhere in a row gives a NaN max, so the row's
// results are NaN, as in PyTorch; a row of -inf gives NaN too (exp(-inf - -inf)).
// The row loops run through RunForCpu (AVX2 or AVX-512, by the CPU: Note [CPU instruction sets]).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "tensor/loops.h"
#include "tensor/vec_math.h"

namespace kiln {
namespace softmax_rows {

constexpr int kRowLanes = 16;

// x + y + ... over lanes, pairwise (the order a vector register's halves are added in).
[[gnu::always_inline]] inline float LaneSum(float* v) {
  for (int w = kRowLanes / 2; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) v[l] = v[l] + v[l + w];
  return v[0];
}

// max that keeps a NaN from either side
[[gnu::always_inline]] inline float MaxNaN(float m, float v) { return ((v > m) | (v != v)) ? v : m; }

// The max of a row, NaN if any is: 4 vectors of 8 lanes (GCC's vector extension: a loop of
// compare-and-select does not auto-vectorise), combined at the end.
using Floats8 = float __attribute__((vector_size(32)));
[[gnu::always_inline]] inline float RowMax(const float* x, int64_t n) {
  constexpr int kVecs = 4, kStep = 8 * kVecs;
  Floats8 m[kVecs];
  for (Floats8& v : m) v = Floats8{} - std::numeric_limits<float>::infinity();
  int64_t k = 0;
  for (; k + kStep <= n; k += kStep) {
    for (int j = 0; j < kVecs; ++j) {
      Floats8 v;
      std::memcpy(&v, x + k + 8 * j, sizeof v);
      m[j] = ((v > m[j]) | (v != v)) ? v : m[j];
    }
  }
  float r = -std::numeric_limits<float>::infinity();
  for (int j = 0; j < kVecs; ++j)
    for (int l = 0; l < 8; ++l) r = MaxNaN(r, m[j][l]);
  for (; k < n; ++k) r = MaxNaN(r, x[k]);
  return r;
}

// sum of exp(x - mx) over the row; kStore: the exps are stored in e too.
template <bool kStore>
[[gnu::always_inline]] inline float ExpSum(const float* x, float mx, float* e, int64_t n) {
  float s[kRowLanes] = {};
  int64_t k = 0;
  for (; k + kRowLanes <= n; k += kRowLanes) {
    for (int l = 0; l < kRowLanes; ++l) {
      const float v = ExpF(x[k + l] - mx);
      if constexpr (kStore) e[k + l] = v;
      s[l] += v;
    }
  }
  for (; k < n; ++k) {
    const float v = ExpF(x[k] - mx);
    if constexpr (kStore) e[k] = v;
    s[k % kRowLanes] += v;
  }
  return LaneSum(s);
}

// sum of a[k] * b[k] (kProduct) or of a[k] over the row
template <bool kProduct>
[[gnu::always_inline]] inline float DotSum(const float* a, const float* b, int64_t n) {
  float s[kRowLanes] = {};
  int64_t k = 0;
  for (; k + kRowLanes <= n; k += kRowLanes)
    for (int l = 0; l < kRowLanes; ++l) s[l] += kProduct ? a[k + l] * b[k + l] : a[k + l];
  for (; k < n; ++k) s[k % kRowLanes] += kProduct ? a[k] * b[k] : a[k];
  return LaneSum(s);
}

// y = softmax(x) or log_softmax(x) over rows of n, for rows [begin, end).
template <bool kLog>
void Forward(const float* x, float* y, int64_t n, int64_t begin, int64_t end) {
  RunForCpu([&] {
    for (int64_t row = begin; row < end; ++row) {
      const float* xr = x + row * n;
      float* yr = y + row * n;
      const float mx = RowMax(xr, n);
      if constexpr (kLog) {
        // (x - max) - log(sum), in PyTorch's order (Note in SoftmaxKernel)
        const float log_sum = std::log(ExpSum<false>(xr, mx, nullptr, n));
        for (int64_t k = 0; k < n; ++k) yr[k] = (xr[k] - mx) - log_sum;
      } else {
        const float inv = 1.0f / ExpSum<true>(xr, mx, yr, n);
        for (int64_t k = 0; k < n; ++k) yr[k] = yr[k] * inv;
      }
    }
  });
}

// grad_input of softmax (y * (g - sum(g * y))) or log_softmax (g - exp(y) * sum(g)), y the
// forward's output, for rows [begin, end).
template <bool kLog>
void Backward(const float* g, const float* y, float* out, int64_t n, int64_t begin, int64_t end) {
  RunForCpu([&] {
    for (int64_t row = begin; row < end; ++row) {
      const float* gr = g + row * n;
      const float* yr = y + row * n;
      float* o = out + row * n;
      if constexpr (kLog) {
        const float sum = DotSum<false>(gr, nullptr, n);
        for (int64_t k = 0; k < n; ++k) o[k] = gr[k] - ExpF(yr[k]) * sum;
      } else {
        const float sum = DotSum<true>(gr, yr, n);
        for (int64_t k = 0; k < n; ++k) o[k] = yr[k] * (gr[k] - sum);
      }
    }
  });
}

}  // namespace softmax_rows
}  // namespace kiln
