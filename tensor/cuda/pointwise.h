// tensor/cuda/pointwise.h: eager CUDA pointwise ops as generated kernels.
//
// An op describes its element function as kernel IR (codegen/kernel_ir.h) over its inputs, and
// LaunchPointwise runs it: the inputs are lined up on the output's shape (broadcast, size-1 dims
// dropped, dims merged where every operand is contiguous across them, as ElementwiseIter does on
// the CPU), a kernel for that expression and layout class is generated through LLVM NVPTX and
// nvJitLink once per process and device (codegen/nvptx_codegen.h), and launched on the current
// stream. One kernel serves every size: sizes and strides are launch parameters. Compiled kernels are
// kept on disk too (Note [Pointwise kernel cache] in pointwise.cc).
#pragma once

#include <vector>

#include "codegen/kernel_ir.h"
#include "tensor/scalar.h"
#include "tensor/tensor_impl.h"

namespace kiln::cuda {

// One input: a tensor on the output's device (broadcast to the output's shape), or a number passed
// to the kernel by value (in `dtype`'s compute type: float for float32/16-bit floats, double for
// float64, int64 for integers and bool). A 0-d CPU tensor counts as a number, as in PyTorch.
struct PointwiseInput {
  static PointwiseInput Of(const Tensor& t) { return PointwiseInput{&t, Scalar(int64_t(0)), t.dtype()}; }
  // The input holds a pointer: a temporary would be gone before the launch reads it.
  static PointwiseInput Of(const Tensor&& t) = delete;
  static PointwiseInput Number(const Scalar& value, ScalarType dtype) { return PointwiseInput{nullptr, value, dtype}; }
  const Tensor* tensor;
  Scalar value;
  ScalarType dtype;
};

// The kernel IR dtype of a tensor dtype; NotImplementedError naming `op` for complex dtypes.
codegen::DType CodegenDType(ScalarType t, const char* op);

// ("load", 1 + i): input i at the current element (in its own dtype; ops cast as they need).
codegen::ExprPtr Input(int i);
// PyTorch's opmath type as a kernel IR dtype: float for float16/bfloat16, else `compute` itself.
codegen::DType OpmathDType(ScalarType compute, const char* op);
// Input i cast to the opmath type of `compute` (float for float16/bfloat16, else `compute` itself):
// PyTorch's CUDA kernels compute 16-bit floats in float and round once on the store, and read a
// Python number in opmath without rounding it to the 16-bit type first.
codegen::ExprPtr OpmathInput(int i, ScalarType compute, const char* op);
// A number input converted to `dtype` first, then read in its opmath type: a PyTorch kernel's
// Scalar bound taken as scalar_t (threshold, hardtanh), rounded to a 16-bit float's precision.
codegen::ExprPtr InputAsElement(int i, ScalarType dtype, const char* op);

// out = expr(inputs) element by element, on out's device's current stream. `name` (an identifier)
// names the kernel in profiles. Throws PyTorch's device-mismatch error when a tensor input is on
// another device, and kiln::Error when generating or compiling the kernel fails.
void LaunchPointwise(const char* name, const Tensor& out, const std::vector<PointwiseInput>& inputs,
                     const codegen::ExprPtr& expr);

// Counters for tests, over every generated kernel (pointwise and reduction): kernels generated and
// compiled, kernels loaded from the disk cache, launches that found theirs in memory.
struct PointwiseCacheStats {
  int64_t compiled = 0, disk_hits = 0, hits = 0;
};
PointwiseCacheStats GetPointwiseCacheStats();

}  // namespace kiln::cuda
