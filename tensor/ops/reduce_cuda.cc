// tensor/ops/reduce_cuda.cc: the reductions as generated CUDA kernels (tensor/cuda/reduce.h): each
// is an accumulator dtype, a combine, what an element contributes and what the output is made of.
#include "tensor/ops/reduce_cuda.h"

#include "tensor/cuda/reduce.h"
#include "tensor/ops/common.h"

namespace kiln {
namespace {

using codegen::DType;
using codegen::Expr;
using codegen::ReduceKind;
using IR = codegen::ExprPtr;

// PyTorch's CUDA accumulator: float for float32 and the 16-bit floats, double for float64, int64 for
// integers and bool.
DType AccOf(ScalarType t, const char* op) {
  DType c = codegen::ComputeDType(cuda::CodegenDType(t, op));
  return c == DType::Bool ? DType::I64 : c;
}

DimVector Shape(const Tensor& t) { return t.sizes(); }

}  // namespace

void SumCUDA(const Tensor& input, const std::vector<bool>& mask, const Tensor& out, double scale) {
  const char* name = scale != 1.0 ? "mean" : "sum";
  DType acc = AccOf(input.dtype(), name);
  IR pre = Expr::Cast(cuda::ReduceInput(0, ReduceKind::kSum), acc);
  std::vector<cuda::PointwiseInput> inputs = {cuda::PointwiseInput::Of(input)};
  IR post = Expr::Acc(0);
  if (scale != 1.0) {  // PyTorch's MeanOps: the sum times 1/n in the accumulator's type
    inputs.push_back(cuda::PointwiseInput::Number(Scalar(scale), acc == DType::F64 ? ScalarType::Float64 : ScalarType::Float32));
    post = Expr::Op(codegen::OpCode::kMul, {post, cuda::ReduceInput(1, ReduceKind::kSum)});
  }
  cuda::LaunchReduce(cuda::ReduceOp{name, ReduceKind::kSum, acc, pre, post}, out, nullptr, inputs, Shape(input), mask);
}

void ProdCUDA(const Tensor& input, const std::vector<bool>& mask, const Tensor& out) {
  DType acc = AccOf(input.dtype(), "prod");
  IR pre = Expr::Cast(cuda::ReduceInput(0, ReduceKind::kProd), acc);
  cuda::LaunchReduce(cuda::ReduceOp{"prod", ReduceKind::kProd, acc, pre, Expr::Acc(0)}, out, nullptr,
                     {cuda::PointwiseInput::Of(input)}, Shape(input), mask);
}

void MinMaxCUDA(bool max, const Tensor& input, const std::vector<bool>& mask, const Tensor* values,
                const Tensor* indices) {
  const char* name = indices ? (max ? "argmax" : "argmin") : (max ? "amax" : "amin");
  const ReduceKind kind = indices ? (max ? ReduceKind::kArgmax : ReduceKind::kArgmin)
                                  : (max ? ReduceKind::kMax : ReduceKind::kMin);
  DType acc = AccOf(input.dtype(), name);
  IR pre = Expr::Cast(cuda::ReduceInput(0, kind), acc);
  // the value output is the input's dtype; argmax alone writes its values into a scratch tensor
  Tensor scratch = values ? Tensor() : EmptyLike(*indices, input.dtype());
  cuda::LaunchReduce(cuda::ReduceOp{name, kind, acc, pre, Expr::Acc(0)}, values ? *values : scratch, indices,
                     {cuda::PointwiseInput::Of(input)}, Shape(input), mask);
}

void LogicalCUDA(LogicalReduce kind, const Tensor& input, const std::vector<bool>& mask, const Tensor& out) {
  const char* name = kind == LogicalReduce::kAny ? "any" : kind == LogicalReduce::kAll ? "all" : "count_nonzero";
  // counts of nonzero (all: of zero) elements, so an empty reduction is 0 and needs no special case
  IR x = cuda::ReduceInput(0, ReduceKind::kSum);
  cuda::CodegenDType(input.dtype(), name);  // complex: NotImplementedError naming the op
  IR zero = Expr::ConstInt(0, DType::I64);
  IR counted = Expr::Op(kind == LogicalReduce::kAll ? codegen::OpCode::kEq : codegen::OpCode::kNe, {x, zero});
  IR pre = Expr::Cast(counted, DType::I64);
  IR post = Expr::Acc(0);
  if (kind == LogicalReduce::kAny) post = Expr::Op(codegen::OpCode::kGt, {post, zero});
  if (kind == LogicalReduce::kAll) post = Expr::Op(codegen::OpCode::kEq, {post, zero});
  cuda::LaunchReduce(cuda::ReduceOp{name, ReduceKind::kSum, DType::I64, pre, post}, out, nullptr,
                     {cuda::PointwiseInput::Of(input)}, Shape(input), mask);
}

}  // namespace kiln
