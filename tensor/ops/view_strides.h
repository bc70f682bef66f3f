// tensor/ops/view_strides.h: the strides view() gives a tensor, for kernels that need a view's
// layout without making the view (index.Tensor's and index_put_'s operand layouts), and for
// Inductor's view lowering, over a buffer's plain sizes and strides (inductor/lowering/views.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <type_traits>

#include "tensor/tensor_impl.h"

namespace kiln {

// Strides of `self` viewed with `new_sizes` (which hold no -1) without copying, if possible
// (PyTorch's rule: each chunk of merged old dims must be contiguous within itself); nullopt when
// view() would refuse.
std::optional<SymDimVector> ComputeViewStrides(const Tensor& self, const SymDimVector& new_sizes);

// PyTorch's chunk rule, over sizes and strides of any integer type (SymInt or int64_t) holding
// at least one element: the old dimensions are walked innermost first in chunks laid out
// contiguously with one another, and each chunk must be covered by a run of the new dimensions
// (size-1 ones carry the stride on); nullopt where one is not.
template <typename Sizes>
std::optional<Sizes> ChunkedViewStrides(const Sizes& old_sizes, const Sizes& old_strides, const Sizes& sizes) {
  using Int = std::decay_t<decltype(sizes[0])>;
  Sizes new_strides(sizes.size());
  int64_t view_d = static_cast<int64_t>(sizes.size()) - 1;
  Int chunk_base_stride = old_strides.empty() ? Int(1) : old_strides.back();
  Int tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_sizes.size()) - 1; d >= 0; d--) {
    tensor_numel *= old_sizes[d];
    if (d == 0 || (old_sizes[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || sizes[view_d] == 1)) {
        new_strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= sizes[view_d];
        view_d--;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = old_strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

}  // namespace kiln
