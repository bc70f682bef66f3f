// tensor/ops/sort_scan_cuda.h: the CUDA kernels of sort/topk (sort_cuda.cc over
// tensor/cuda/kernels/sort.cu) and cumsum/cumprod (scan_cuda.cc over kernels/scan.cu), called by
// the ops in shape_ops.cc after their checks and output allocation.
#pragma once

#include "tensor/tensor_impl.h"

namespace kiln {

// values / indices (the op's outputs: self's shape, any layout; values of self's dtype, indices
// int64) = self sorted stably along `dim` (wrapped), NaN largest, as the CPU kernel.
void SortCUDA(const Tensor& self, int64_t dim, bool descending, const Tensor& values, const Tensor& indices);

// out (the op's output, of `input`'s dtype) = the running sum (product) of `input` along `dim`
// (wrapped), accumulated in float (16-bit floats, float32), double or int64, as PyTorch's CUDA
// kernels.
void ScanCUDA(bool prod, const Tensor& input, int64_t dim, const Tensor& out);

}  // namespace kiln
