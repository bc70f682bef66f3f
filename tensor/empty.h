// tensor/empty.h: allocating tensors: empty with sizes (and strides), from a TensorMeta, like another.
#pragma once

#include "tensor/dispatcher.h"
#include "tensor/tensor_impl.h"

namespace kiln {

// Uninitialised tensor. CPU allocates; meta gets a data-less storage; CUDA raises until CUDA
// kernels exist. Inside a fake op (TlsFakeAllocContext() set) it makes a fake tensor instead, on
// `device`, or on the op's common device when `device` is meta (fake_tensor.h).
Tensor EmptyTensor(const SymDimVector& sizes, ScalarType dtype, Device device,
                   const SymDimVector& strides = {});
Tensor EmptyTensor(const DimVector& sizes, ScalarType dtype, Device device);
// Same sizes/dtype/device as `like`, contiguous.
Tensor EmptyLike(const Tensor& like);
Tensor EmptyLike(const Tensor& like, ScalarType dtype);
// A new view of `base`'s storage with other sizes/strides/offset (shares the version counter).
Tensor MakeView(const Tensor& base, SymDimVector sizes, SymDimVector strides, SymInt offset);
// Marks the views one op returned as its several outputs (split, chunk, unbind): kMultiOutput
// under grad mode (under no_grad they stay kNoGrad), Note [View creation].
void MarkMultiOutputViews(const std::vector<Tensor>& views);
// Number of bytes a strided layout spans (0 when any size is 0). Raises RuntimeError when the count
// overflows int64, a stride over a dim of size > 1 is negative, or the offset is negative.
int64_t StorageBytesFor(const DimVector& sizes, const DimVector& strides, int64_t offset, int64_t itemsize);
// The same for a contiguous layout (PyTorch's computeStorageNbytesContiguous and its message).
int64_t ContiguousStorageBytesFor(const DimVector& sizes, int64_t itemsize);
// The same over SymInt (symbolic when any input is; then the 0-size case is not special-cased).
SymInt SymStorageBytesFor(const SymDimVector& sizes, const SymDimVector& strides, const SymInt& offset,
                          int64_t itemsize);

}  // namespace kiln
