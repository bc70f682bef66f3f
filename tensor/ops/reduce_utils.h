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
