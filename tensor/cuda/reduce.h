// tensor/cuda/reduce.h: eager CUDA reductions as generated kernels.
//
// An op describes its reduction as kernel IR (codegen/nvptx_reduce.h): what each element
// contributes (`pre`, over the inputs), how contributions combine (a ReduceKind), and what the
// output is made of the result (`post`, over ("acc", 0) and number inputs). LaunchReduce lines the
// inputs up on one shape, reduces the dims `mask` marks, and picks the kernel's layout the way
// PyTorch's Reduce.cuh does: threads of a row reduce together (with 16-byte loads) where the
// reduction is innermost in memory, threads of a row cover neighbouring outputs where the outputs
// are, and the reduction is split across blocks, then finished by a second kernel over the partial
// results, when there are too few outputs to fill the device (Note [Reduction layout] in reduce.cc).
#pragma once

#include <vector>

#include "codegen/nvptx_reduce.h"
#include "tensor/cuda/pointwise.h"
#include "tensor/tensor_impl.h"

namespace kiln::cuda {

struct ReduceOp {
  const char* name;          // an identifier: names the kernel in profiles and errors
  codegen::ReduceKind kind;  // kSum, kProd, kMax, kMin, kArgmax, kArgmin
  codegen::DType acc;        // F32, F64 or I64
  codegen::ExprPtr pre;      // ReduceInput(i, kind): input i at the current element
  codegen::ExprPtr post;     // ("acc", 0): the result; ReduceInput(i, kind) of a number input
};

// ("load", operand of input i): operands 0 (and 1 for argmax/argmin) are the outputs.
codegen::ExprPtr ReduceInput(int i, codegen::ReduceKind kind);

// PyTorch's CUDA accumulator for `t`: float for float32 and the 16-bit floats, double for float64,
// int64 for integers and bool; NotImplementedError naming `op` for complex dtypes.
codegen::DType AccumulatorOf(ScalarType t, const char* op);
// The dtype that holds accumulator values: float32, float64 or int64.
ScalarType AccScalarType(codegen::DType acc);

// out (contiguous, the kept dims of `shape` in order, with or without keepdim's 1s) = the
// reduction over the dims of `shape` that `mask` marks; `indices` (argmax/argmin only; int64, as
// out) gets each result's position in the row-major order of the reduced dims. Inputs are tensors
// broadcastable to `shape` on out's device, or numbers. An empty reduction writes post(identity)
// (sum: 0, prod: 1); ops without an identity check for it before.
void LaunchReduce(const ReduceOp& op, const Tensor& out, const Tensor* indices, const std::vector<PointwiseInput>& inputs,
                  const DimVector& shape, const std::vector<bool>& mask);

}  // namespace kiln::cuda
