// inductor/lowering/pointwise_ops.h: the pointwise lowerings that are no registry row's element
// function as it stands (Note [Pointwise ops as kernel IR] covers the rest): integer pow (Note
// [Integer pow]), where, gelu and the activations' backwards in eager's formulas per dtype, clamp,
// rounding division, round with decimals, nan_to_num, copies and constant fills.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "inductor/ir/values.h"
#include "inductor/lowering/pointwise.h"

namespace kiln::inductor::lowering {

// Each is given the result's dtype and shape (the node's meta value) and the op's arguments.

// pow: a float result from the registry's element function; integers raised to a constant
// exponent in [0, 64] by multiplications, which wrap around as eager's repeated squaring does
// (Fallback for a tensor or larger exponent).
std::shared_ptr<Pointwise> LowerPow(ScalarType dtype, std::vector<int64_t> shape, const Operand& a, const Operand& b);
// where(cond, a, b), cond read as bool, a and b in the result's type.
std::shared_ptr<Pointwise> LowerWhere(ScalarType dtype, std::vector<int64_t> shape, const Operand& cond,
                                      const Operand& a, const Operand& b);
// gelu ("none" or "tanh") and its backward ("none" only: Fallback for "tanh"), as eager computes
// each dtype (Note [gelu's two loops] in tensor/ops/activation.cc, Note [One float math]).
std::shared_ptr<Pointwise> LowerGelu(ScalarType dtype, std::vector<int64_t> shape, const Operand& x,
                                     const std::string& approximate);
std::shared_ptr<Pointwise> LowerGeluBackward(ScalarType dtype, std::vector<int64_t> shape, const Operand& grad,
                                             const Operand& x, const std::string& approximate);
// silu_backward(grad, x), sigmoid_backward(grad, y), tanh_backward(grad, y),
// threshold_backward(grad, x, threshold): `name` picks one.
std::shared_ptr<Pointwise> LowerActivationBackward(const std::string& name, ScalarType dtype,
                                                   std::vector<int64_t> shape, const Operand& grad, const Operand& x,
                                                   const Scalar& threshold = Scalar());
// clamp(x, min, max), each bound absent, a number or a value (clamp.Tensor, clamp_min.Tensor...).
std::shared_ptr<Pointwise> LowerClamp(ScalarType dtype, std::vector<int64_t> shape, const Operand& x,
                                      const std::optional<Operand>& min, const std::optional<Operand>& max);
// div with rounding_mode unset (true division, or integers' truncating), "trunc" or "floor".
std::shared_ptr<Pointwise> LowerDivMode(ScalarType dtype, std::vector<int64_t> shape, const Operand& a,
                                        const Operand& b, const std::optional<std::string>& rounding_mode);
// round(x, decimals) in eager's arithmetic (RoundDecimalsInto): floats only.
std::shared_ptr<Pointwise> LowerRoundDecimals(ScalarType dtype, std::vector<int64_t> shape, const Operand& x,
                                              int64_t decimals);
std::shared_ptr<Pointwise> LowerNanToNum(ScalarType dtype, std::vector<int64_t> shape, const Operand& x,
                                         std::optional<double> nan, std::optional<double> posinf,
                                         std::optional<double> neginf);
// x itself (clone, _to_copy, alias, lift_fresh_copy: `name` the kernel's).
std::shared_ptr<Pointwise> LowerCopy(ScalarType dtype, std::vector<int64_t> shape, const Operand& x);
// `value` everywhere (fill, full, scalar_tensor, zeros_like...: `name` the kernel's).
std::shared_ptr<Pointwise> LowerFill(const std::string& name, ScalarType dtype, std::vector<int64_t> shape,
                                     const Scalar& value);

}  // namespace kiln::inductor::lowering
