// tensor/ops/pointwise_ir.h: the element functions of the pointwise op families as kernel IR,
// keyed by Op*: one source for eager's generated CUDA kernels and Inductor's lowerings.
//
// Note [Pointwise ops as kernel IR]: a family's table row (unary.cc's kUnary, ...) gives an op its
// CPU loop, and, through the family's expression builder (UnaryExpr), the same element function
// as kernel IR (codegen/kernel_ir.h). The family registers that builder here for each functional
// overload it defines, so the compiler needs no table of op names of its own: Inductor lowers an
// op found here by asking for its expression (python/csrc/python_inductor.cc, `pointwise_ir`),
// and a new row in a family is a new lowering. Where CPU and CUDA kernels differ (relu of -0.0:
// PyTorch's CPU kernel keeps it, its CUDA kernel gives +0.0), the builder takes the device.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "codegen/kernel_ir.h"
#include "tensor/dispatcher.h"
#include "tensor/scalar_type.h"

namespace kiln {

struct PointwiseIr {
  // Tensor operands the element function reads (1 for unary ops, 2 for binary ones).
  int arity = 1;
  // A further operand, add's and sub's multiplier (self + alpha * other), where it is not 1.
  bool has_alpha = false;
  // Eager raises ZeroDivisionError for integers divided by zero (//, %, fmod, rounding division):
  // a kernel cannot raise, so a compiled graph runs eager's kernel where the divisor may be 0.
  bool integer_division = false;
  // Note [16-bit floats times a scalar] in binary.cc: a one-element `other` of a 16-bit float op
  // is read in float, unrounded.
  bool reads_scalar_in_opmath = false;
  // The dtype the op computes in for operands of these dtypes (exp of an int64 tensor: float32).
  std::function<ScalarType(const std::vector<ScalarType>& operands)> compute;
  // f(operands) as kernel IR: operand i is `operands[i]` (alpha last), in the opmath type of `compute`
  // (float for float16/bfloat16); the result is in that opmath type (or bool, for predicates).
  std::function<codegen::ExprPtr(std::vector<codegen::ExprPtr> operands, ScalarType compute, DeviceType device)>
      build;
  // Ops with number arguments after their tensor operands (leaky_relu's negative_slope; elu's
  // alpha, scale and input_scale): how many, and, set instead of `build`, the element function for
  // given values of them in schema order (an absent optional one as nullopt). They are constants
  // of the kernel, folded as eager folds them (elu's alpha * scale in double).
  int num_params = 0;
  std::function<codegen::ExprPtr(std::vector<codegen::ExprPtr> operands, ScalarType compute, DeviceType device,
                                 const std::vector<std::optional<double>>& params)>
      build_with_params;
};

void RegisterPointwiseIr(const Op& op, PointwiseIr ir);
// nullptr when op has no element function as kernel IR (not pointwise, or no IR for it: digamma).
const PointwiseIr* FindPointwiseIr(const Op& op);
// Every op that has one, in registration order.
std::vector<const Op*> OpsWithPointwiseIr();

// The core aten op that computes one kernel IR operator on tensors, read off the families' rows
// rather than kept as a table of names: the first core op whose operands are all tensors and whose
// element function, on float32, is that operator over its operands in order (aten::exp for exp,
// add.Tensor for add, maximum for max, remainder.Tensor for mod). `where` is no family's row
// (ternary.cc's kernel): aten::where.self. nullptr when no core op computes it alone (gelu,
// normal_cdf, the shifts of bitwise_left_shift.Tensor, which is no core op). Decompositions built
// from element functions (python/kiln/_decomp/element_functions.py) evaluate IR through it.
const Op* CoreOpOf(codegen::OpCode op);

}  // namespace kiln
