// inductor/lowering/pointwise.h: pointwise values from aten ops -- the element functions the
// registry gives as kernel IR (Note [Pointwise ops as kernel IR] in tensor/ops/pointwise_ir.h),
// applied to their operands broadcast to the output's shape.
//
// Note [Pointwise values]: a pointwise lowering is one element's expression over its operands,
// each read at its broadcast index (a size-1 dimension of an operand stays at 0 where the output's
// is larger), in the dtype the op computes in, and cast to the output's dtype. A bfloat16 result
// is rounded at every op (Note [bfloat16 rounds at every op]): bfloat16 math runs in float32 (the
// IR has no bfloat16 arithmetic) and each op's result is cast back to bfloat16 as eager's kernel
// stores it, also where it is computed inline in a fused kernel -- unrounded, `sqrt(sigmoid_(x))`
// fed min() float32 values, and min's backward, comparing them with the bfloat16 result, sent the
// gradient nowhere (fuzz seed 301, program 3415). Python numbers are constants of the expression,
// in the dtype they are read in. The value joins a reduction loop as its epilogue when an operand
// of its shape is a value of that loop (`space`: bias + GELU after a generated matmul).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codegen/kernel_ir.h"
#include "inductor/ir/values.h"
#include "runtime/error.h"
#include "tensor/dispatcher.h"
#include "tensor/scalar.h"

namespace kiln::inductor::lowering {

using ir::Pointwise;
using ir::Value;

// This node runs its eager kernel (Python: kiln._inductor.lowering.Fallback), and why.
class Fallback : public Error {
 public:
  using Error::Error;
};

// A lowering met a value it cannot index as it needs (a view of one not realized, or not laid out
// contiguously): the graph realizes the value in its meta layout and lowers the node again
// (Python: kiln._inductor.lowering.ViewOfUnrealized).
class ViewOfUnrealized : public Fallback {
 public:
  using Fallback::Fallback;
};

// An operand of a pointwise op: a value of the graph, or a Python number (weak in promotion).
struct Operand {
  std::shared_ptr<Value> value;
  Scalar number;
  bool is_value() const { return value != nullptr; }
};

// `number` as a constant of kernel IR type `dtype` (bool, integer or float, as the type holds it).
codegen::ExprPtr Constant(const Scalar& number, codegen::DType dtype);

// A Pointwise of `shape` and `dtype` computing combine(operand expressions), each operand read in
// load_as[i] where set, else in `compute` (the output's kernel type when unset). `name` joins the
// operands' ops (kernel names).
std::shared_ptr<Pointwise> MakePointwise(const std::string& name, ScalarType dtype, std::vector<int64_t> shape,
                                         const std::vector<Operand>& operands,
                                         const std::function<codegen::ExprPtr(std::vector<codegen::ExprPtr>)>& combine,
                                         std::optional<codegen::DType> compute = std::nullopt,
                                         const std::vector<std::optional<codegen::DType>>& load_as = {});

// The kernel IR type a binary op's operands are read in: PyTorch's promotion, where a 0-d value or
// a number ranks below a value with dims (`v == x` of a bfloat16 vector and a float32 0-d x rounds
// x to bfloat16 first: fuzz seed 431, program 13552).
codegen::DType Promoted(const Operand& a, const Operand& b);

// Throws Fallback for an integer division by `divisor` that may be 0 (Note [Integer division by
// zero]): a value, or the number 0.
void CheckIntegerDivisor(const std::string& name, const Operand& divisor);

// Note [16-bit floats times a scalar] (tensor/ops/binary.cc): a bfloat16 op's `other` that is a
// number or a one-element value is read in float, unrounded ({unset, f32}); empty otherwise.
std::vector<std::optional<codegen::DType>> OneElementInFloat(ScalarType out, const Operand& b);

// `op` (one with an element function and no number arguments) lowered over its operands (one, or
// two and alpha where not 1), giving a value of `dtype` and `shape`. Throws Fallback for an
// integer division whose divisor may be 0 (Note [Integer division by zero]).
std::shared_ptr<Pointwise> LowerElementwise(const Op& op, ScalarType dtype, std::vector<int64_t> shape,
                                            std::vector<Operand> operands, std::optional<Scalar> alpha);

// `op` (an element function with number arguments, PointwiseIr::num_params: leaky_relu's
// negative_slope, elu's alpha, scale and input_scale) over x, with the values of its number
// arguments in schema order (nullopt: an absent optional one), constants of the function.
std::shared_ptr<Pointwise> LowerWithParams(const Op& op, ScalarType dtype, std::vector<int64_t> shape, const Operand& x,
                                           const std::vector<std::optional<double>>& params);

}  // namespace kiln::inductor::lowering
