// tensor/memory_format.cc: see memory_format.h.
#include "tensor/memory_format.h"

#include "tensor/empty.h"
#include "tensor/ops/common.h"

namespace kiln {

SymDimVector ChannelsLastStrides(const SymDimVector& sizes) {
  KILN_CHECK(sizes.size() == 4, "required rank 4 tensor to use channels_last format");
  SymDimVector strides(4);
  SymInt expected = 1;
  for (int d : {1, 3, 2, 0}) {
    strides[d] = expected;
    expected = expected * sym_max(sizes[d], SymInt(1));
  }
  return strides;
}

bool DenseInOrder(const SymDimVector& sizes, const SymDimVector& strides, const std::vector<int64_t>& inner_first) {
  SymInt expected = 1;
  for (int64_t d : inner_first) {
    if (sizes[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected = expected * sizes[d];
  }
  return true;
}

bool IsChannelsLastContiguous(const Tensor& t) {
  return t.dim() == 4 && DenseInOrder(t->sym_sizes(), t->sym_strides(), {1, 3, 2, 0});
}

bool SuggestsChannelsLast(const Tensor& t) {
  if (t.dim() != 4 || t->is_symbolic()) return false;
  const DimVector sizes = t.sizes(), strides = t.strides();
  int64_t min = 0;
  for (int d : {1, 3, 2, 0}) {  // PyTorch's is_channels_last_strides_2d_s4
    if (sizes[d] == 0) return false;
    if (strides[d] < min) return false;
    if (d == 0 && min == strides[1]) return false;  // N x 1 x H x W with ambiguous strides
    min = strides[d];
    if (sizes[d] > 1) min *= sizes[d];
  }
  return true;
}

Tensor ChannelsLastCopy(const Tensor& t) {
  if (IsChannelsLastContiguous(t)) return t;
  Tensor out = EmptyTensor(t->sym_sizes(), t.dtype(), t.device(), ChannelsLastStrides(t->sym_sizes()));
  ops::copy_(out, t);
  return out;
}

}  // namespace kiln
