// tensor/ops/index_util.h: what index.cc (gather, scatter, index_add, nonzero, ...) and
// index_advanced.cc (index.Tensor, index_put_) share.
#pragma once

#include <initializer_list>
#include <optional>
#include <type_traits>
#include <vector>

#include "tensor/ops/common.h"

namespace kiln {

using OptTensorVec = std::vector<std::optional<Tensor>>;

inline std::vector<SymInt> ToSymList(const SymDimVector& v) { return std::vector<SymInt>(v.begin(), v.end()); }

template <typename T> inline bool IsNonzero(T v) { return static_cast<opmath_t<T>>(v) != opmath_t<T>(0); }

// a + b in T's op-math type (or for bool); what accumulating index ops add.
template <typename T> inline T AddValues(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) return a || b;
  else return static_cast<T>(static_cast<opmath_t<T>>(a) + static_cast<opmath_t<T>>(b));
}

// Checks every value of an int64 `index` lies in [-size, size) (or [0, size) without
// `negative_ok`) before an in-place op writes anything; IndexError when `index_error`, else
// RuntimeError (gather/scatter), naming the value, the dim and its size.
void CheckIndexValues(const Tensor& index, int64_t size, int64_t dim, bool negative_ok, bool index_error);

// PyTorch's device check of an index op: each of `others` (null or undefined ones skipped) on self's
// device. Without it a CUDA index or source of a CPU self was read on the host by the CPU kernel.
inline void CheckOnSelfDevice(const char* op, const Tensor& self, std::initializer_list<const Tensor*> others) {
  for (const Tensor* t : others)
    if (t != nullptr && t->defined() && t->device() != self.device())
      throw Error(StrCat(op, "(): Expected all tensors to be on the same device, but found at least two devices, ",
                         self.device().str(), " and ", t->device().str(), "!"));
}

// The [n, self.dim()] int64 coordinates of self's nonzero elements, in row-major order (CPU).
Tensor NonzeroCPU(const Tensor& self);

}  // namespace kiln
