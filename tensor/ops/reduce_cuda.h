// tensor/ops/reduce_cuda.h: the reduction families' CUDA kernels (reduce_cuda.cc), called by each
// op's implementation after its checks and output allocation, as binary.cc calls BinaryCUDA:
// each op is defined once and runs on either device.
#pragma once

#include <vector>

#include "tensor/tensor_impl.h"

namespace kiln {

// out = sum(input over mask) * scale (scale != 1: a mean), accumulated in float for 16-bit
// floats and float32, in double for float64, in int64 for integers and bool (PyTorch's CUDA acc
// types). `input` is already in the dtype the op sums.
void SumCUDA(const Tensor& input, const std::vector<bool>& mask, const Tensor& out, double scale);
// out = the product, accumulated as SumCUDA accumulates.
void ProdCUDA(const Tensor& input, const std::vector<bool>& mask, const Tensor& out);
// values / indices (either may be null) = the largest (smallest) element over mask and its index
// in the row-major order of the reduced dims; NaN propagates, ties report the first index.
void MinMaxCUDA(bool max, const Tensor& input, const std::vector<bool>& mask, const Tensor* values,
                const Tensor* indices);
// out = whether any (all) elements over mask are nonzero, or (count) how many are.
enum class LogicalReduce { kAny, kAll, kCount };
void LogicalCUDA(LogicalReduce kind, const Tensor& input, const std::vector<bool>& mask, const Tensor& out);

}  // namespace kiln
