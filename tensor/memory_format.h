// tensor/memory_format.h: the channels-last layout of 4-D (N, C, H, W) tensors: its strides,
// whether a tensor is in it, and whether an op's result should be (PyTorch's
// suggest_memory_format), so conv/clone/contiguous/to lay results out as PyTorch does.
#pragma once

#include <initializer_list>

#include "tensor/tensor_impl.h"

namespace kiln {

// Row-major strides in (N, H, W, C) order for 4-D sizes: [H*W*C, 1, W*C, C].
SymDimVector ChannelsLastStrides(const SymDimVector& sizes);
// Whether `strides` over `sizes` are dense with the dims in `inner_first` order (innermost first:
// {1, 3, 2, 0} is channels-last, n-1 .. 0 row-major), size-1 dimensions ignored.
bool DenseInOrder(const SymDimVector& sizes, const SymDimVector& strides, const std::vector<int64_t>& inner_first);
// Dense in (N, H, W, C) order, size-1 dimensions ignored (tensor.is_contiguous(channels_last)).
bool IsChannelsLastContiguous(const Tensor& t);
// 4-D strides that order the dimensions as channels-last does (PyTorch's
// is_channels_last_strides_2d): the layout an op's result should keep (a row-major tensor with C
// == 1 and ambiguous strides counts as row-major).
bool SuggestsChannelsLast(const Tensor& t);
// t itself when it is channels-last contiguous, else a channels-last copy of the 4-D t (for
// kernels that read (N, H, W, C) order).
Tensor ChannelsLastCopy(const Tensor& t);

}  // namespace kiln
