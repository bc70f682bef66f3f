"""Pointwise lowerings: unary and binary math, comparisons, activations and their backwards,
where/clamp, copies and constant fills, built in C++ (inductor/lowering: the registry's element
functions, Note [Pointwise ops as kernel IR], and pointwise_ops.h); each composes its inputs'
index functions."""

from kiln import _C
from kiln._C._inductor import lowering as c
from kiln._C._inductor.lowering import lower_elementwise, lower_with_params
from kiln._ops import overload_named
from kiln._inductor.lowering.common import register


# Note [Pointwise ops as kernel IR] (tensor/ops/pointwise_ir.h): an op of a pointwise family
# (unary.cc's and binary.cc's tables) lowers to its own element function, which the registry gives
# as kernel IR, so eager and compiled compute the same formula (libm's asinf and hypot where eager
# calls them, binary.cc's floor division of floats) and a new row in a family is a new lowering. The
# lowerings further down replace it where an op needs more (pow of integers, gelu's approximate
# argument) or computes differently here.
def element_function_lowering(op):
    """op's lowering from its element function (C++: inductor/lowering, Note [Pointwise values]):
    operands read in the dtype the registry computes in (binary ops' promoted one; alpha, where
    not 1, a further operand), integer divisions whose divisor may be 0 left to eager (Note
    [Integer division by zero]). An activation's number arguments (elu's alpha, scale,
    input_scale) are constants of its element function."""
    full = op._full_name
    if _C._inductor.pointwise_num_params(full):
        return _parameterized_lowering(full)

    def lower(out, *operands, alpha=None):
        return lower_elementwise(full, out.dtype, list(out.shape), operands, alpha)

    return lower


def _parameterized_lowering(full):
    def lower(out, x, *params, **kwargs):
        return lower_with_params(full, out.dtype, list(out.shape), x, params, kwargs)

    return lower


for _full in _C._inductor.pointwise_ops():
    _op = overload_named(_full)
    register(_op)(element_function_lowering(_op))


# The ops below lower in C++ (inductor/lowering/pointwise_ops.h: Note [Integer pow], where, gelu
# and the activations' backwards in eager's formulas per dtype, clamp, rounding division, round
# with decimals, nan_to_num, copies and fills); here, their arguments as aten passes them.
def _shape(out):
    return list(out.shape)


@register("pow.Tensor_Scalar", "pow.Tensor_Tensor", "pow.Scalar")
def _pow(out, a, b):
    return c.pow(out.dtype, _shape(out), a, b)


@register("where.self")
def _where(out, cond, a, b):
    return c.where(out.dtype, _shape(out), cond, a, b)


@register("gelu.default")
def _gelu(out, x, approximate="none"):
    return c.gelu(out.dtype, _shape(out), x, approximate)


@register("gelu_backward.default")
def _gelu_backward(out, grad, x, approximate="none"):
    return c.gelu_backward(out.dtype, _shape(out), grad, x, approximate)


def _activation_backward(name):
    def lower(out, grad, x, threshold=None):
        return c.activation_backward(name, out.dtype, _shape(out), grad, x, threshold)

    return lower


for _name in ("silu_backward", "sigmoid_backward", "tanh_backward", "threshold_backward"):
    register(f"{_name}.default")(_activation_backward(_name))


@register("clamp.default")
def _clamp(out, x, min=None, max=None):
    return c.clamp(out.dtype, _shape(out), x, min, max)


@register("div.Tensor_mode", "div.Scalar_mode")
def _div_mode(out, a, b, rounding_mode=None):
    return c.div_mode(out.dtype, _shape(out), a, b, rounding_mode)


@register("round.decimals")
def _round_decimals(out, x, *, decimals):
    return c.round_decimals(out.dtype, _shape(out), x, decimals)


# Activations with number arguments (leaky_relu, hardtanh, elu, softplus, threshold, logit) and
# hardsigmoid/hardswish lower from the registry (activation.cc's ActExprCpu), above.
@register("nan_to_num.default")
def _nan_to_num(out, x, nan=None, posinf=None, neginf=None):
    return c.nan_to_num(out.dtype, _shape(out), x, nan, posinf, neginf)


@register("fill.Scalar")
def _fill(out, x, value):
    return c.fill("fill", out.dtype, _shape(out), value)


def _copy(out, x, **kwargs):
    return c.copy(out.dtype, _shape(out), x)


register("clone.default", "_to_copy.default", "alias.default", "lift_fresh_copy.default")(_copy)


@register("full.default")
def _full(out, size, value, **kwargs):
    return c.fill("full", out.dtype, _shape(out), value)


@register("scalar_tensor.default")
def _scalar_tensor(out, value, **kwargs):
    return c.fill("scalar_tensor", out.dtype, [], value)


def _like(fixed):
    def lower(out, x, *args, **kwargs):
        return c.fill("full", out.dtype, _shape(out), fixed if fixed is not None else args[0])

    return lower


register("zeros_like.default")(_like(0))
register("ones_like.default")(_like(1))
register("full_like.default")(_like(None))
