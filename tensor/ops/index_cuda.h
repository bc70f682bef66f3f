// tensor/ops/index_cuda.h: the CUDA kernels of the ops that gather or scatter rows by an index
// (index_cuda.cc over tensor/cuda/kernels/index.cu), called by each op's implementation after its
// checks and output allocation. Indices are checked on the device: one out of range raises at the
// next synchronisation (Note [Device-side errors] in runtime/cuda/device_errors.h), with `message`.
#pragma once

#include "tensor/scalar.h"
#include "tensor/tensor_impl.h"

namespace kiln {

// out = self.index_select(dim, index) (index: int64 or int32, 0-d or 1-d; out allocated, any layout).
void IndexSelectCUDA(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& out, const char* message);

// self.index_add_(dim, index, source, alpha=alpha) with atomics: float32/64, 16-bit floats, int32 and
// int64 (NotImplementedError for other dtypes).
void IndexAddCUDA(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha);

// out (zeroed here; [num_weights, D]) = embedding_dense_backward(grad [..., D], indices): each row the
// sum of its indices' grad rows in index order, in float for the 16-bit floats, from the sorted
// indices (deterministic, Note [Deterministic embedding backward] in kernels/index.cu); rows at
// padding_idx left out; scale_grad_by_freq divides by the index's count.
void EmbeddingBackwardCUDA(const Tensor& grad, const Tensor& indices, int64_t padding_idx, bool scale_grad_by_freq,
                           const Tensor& out);

}  // namespace kiln
