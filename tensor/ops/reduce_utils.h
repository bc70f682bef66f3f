// tensor/ops/reduce_utils.h: the per-output reduction loop and checks shared by the reduction
// families (reduce_more.cc, reduce_stats.cc).
//
// ForEachOutput runs body(o, visit) for every output element o, in parallel over outputs;
// visit(g) calls g(x) for each reduced element of o, in row-major order of the reduced dims, so a
// running counter in g is the flat index argmax/max.dim report.
#pragma once

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "tensor/ops/common.h"

namespace kiln {

using OptDims = std::optional<std::vector<int64_t>>;

template <typename T, typename Body>
void ForEachOutput(const ReduceIter& iter, const Body& body) {
  const int64_t work = std::max<int64_t>(iter.reduce_size(), 1);
  ParallelFor(0, iter.num_outputs(), std::max<int64_t>(1, kGrainSize / work), [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      auto visit = [&](auto&& g) {
        iter.ForEachRun(o, [&](const char* p, int64_t n, int64_t stride) {
          if (stride == static_cast<int64_t>(sizeof(T))) {
            const T* x = reinterpret_cast<const T*>(p);
            for (int64_t i = 0; i < n; ++i) g(x[i]);
          } else {
            for (int64_t i = 0; i < n; ++i) g(detail::Load<T>(p + i * stride));
          }
        });
      };
      body(o, visit);
    }
  });
}

// Note [Outer sums]: a contiguous input whose reduced dims sit between leading and trailing kept
// dims is [P, R, K] (R reduced), and its outputs [P, K]. Summing each output down its strided column
// (SumKernel) touches one element per cache line and does not vectorise: g.sum(0) on 1024x1024 ran
// 40x slower than PyTorch. Instead each task adds whole rows of a block of columns into accumulators
// (float32 rows in float groups: Note [Outer sums in float] in reduce.cc; other types in acc_t, r
// ascending, as the per-output path), which vectorises and reads memory in order.
struct OuterShape {
  int64_t P = 1, R = 1, K = 1;
};
inline std::optional<OuterShape> AsOuterSum(const Tensor& input, const std::vector<bool>& mask) {
  if (!input.is_contiguous() || input.dim() < 2) return std::nullopt;
  const int64_t nd = input.dim();
  int64_t d = 0;
  OuterShape s;
  for (; d < nd && !mask[d]; ++d) s.P *= input.size(d);
  const int64_t first_reduced = d;
  for (; d < nd && mask[d]; ++d) s.R *= input.size(d);
  if (d == first_reduced || d == nd) return std::nullopt;  // nothing reduced, or no trailing kept dims
  for (; d < nd; ++d) {
    if (mask[d]) return std::nullopt;
    s.K *= input.size(d);
  }
  return s;
}

// The sum of f(x[i]) over a contiguous run, in double, as kLanes independent partial sums added
// pairwise at the end: a loop that vectorises, where one running double sum waits on each add
// (norm(dim=-1) of 1024x2048 float32 took 16x PyTorch's time).
template <typename T, typename F>
[[gnu::always_inline]] inline double LaneSumRun(const T* x, int64_t n, const F& f) {
  constexpr int kLanes = 32;
  double s[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) s[l] += f(x[i + l]);
  for (; i < n; ++i) s[i % kLanes] += f(x[i]);
  for (int w = kLanes / 2; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) s[l] += s[l + w];
  return s[0];
}

// A double (or float/int accumulator) value converted to the element type T.
template <typename T, typename V>
inline T FromAcc(V v) {
  if constexpr (std::is_same_v<T, bool>) return v != V(0);
  else return static_cast<T>(static_cast<opmath_t<T>>(v));
}

template <typename T>
inline bool IsNan(T v) {
  if constexpr (std::is_integral_v<T>) return false;
  else return v != v;
}

// Number of elements each output reduces over `mask`.
inline int64_t ReducedCount(const Tensor& t, const std::vector<bool>& mask) {
  int64_t n = 1;
  for (size_t d = 0; d < mask.size(); ++d)
    if (mask[d]) n *= t.size(static_cast<int64_t>(d));
  return n;
}

inline bool SymNumelIsZero(const Tensor& t) {
  for (const SymInt& s : t->sym_sizes())
    if (s == SymInt(0)) return true;
  return false;
}

// PyTorch's zero_numel_check_dims: reducing an empty tensor needs dims of non-zero size
// (IndexError), or dims at all (RuntimeError) for ops without an identity (max, amax, ...).
void ZeroNumelCheckDim(const char* fn, const Tensor& self, int64_t dim);
void ZeroNumelCheckDims(const char* fn, const Tensor& self, const std::vector<int64_t>& dims);

// The meta of a reduction over `dims` (all when none/empty) with result dtype `out`.
TensorMeta ReduceMetaOf(const char* op, const Tensor& self, const OptDims& dims, bool keepdim, ScalarType out);

}  // namespace kiln
