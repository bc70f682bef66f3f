// tensor/ops/view_strides.h: the strides view() gives a tensor, for kernels that need a view's
// layout without making the view (index.Tensor's and index_put_'s operand layouts).
#pragma once

#include <optional>

#include "tensor/tensor_impl.h"

namespace kiln {

// Strides of `self` viewed with `new_sizes` (which hold no -1) without copying, if possible
// (PyTorch's rule: each chunk of merged old dims must be contiguous within itself); nullopt when
// view() would refuse.
std::optional<SymDimVector> ComputeViewStrides(const Tensor& self, const SymDimVector& new_sizes);

}  // namespace kiln
