"""Pointwise lowerings: unary and binary math, comparisons, activations and their backwards,
where/clamp, copies and constant fills; each composes its inputs' index functions."""

import functools
import math

from kiln import _C
from kiln._C._inductor import kernel_ir as kir
from kiln._C._inductor.kernel_ir import ops
from kiln._ops import overload_named
from kiln._inductor.ir import Pointwise, ir_dtype
from kiln._C._inductor.lowering import check_integer_divisor, lower_elementwise, one_element_in_float
from kiln._inductor.lowering.common import (INF, Fallback, scalar_as, aten, broadcast_indices, const, loader, opmath,
                                            ops_of, pointwise, register, shape_of)


# Note [Pointwise ops as kernel IR] (tensor/ops/pointwise_ir.h): an op of a pointwise family
# (unary.cc's and binary.cc's tables) lowers to its own element function, which the registry gives
# as kernel IR, so eager and compiled compute the same formula (libm's asinf and hypot where eager
# calls them, binary.cc's floor division of floats) and a new row in a family is a new lowering. The
# lowerings further down replace it where an op needs more (pow of integers, gelu's approximate
# argument) or computes differently here.
def _builder(function):
    """fn(*operand exprs) -> the element function (its operand i a load of buffer i) over them."""
    return functools.partial(kir.substitute, function)


def element_function_lowering(op):
    """op's lowering from its element function (C++: inductor/lowering, Note [Pointwise values]):
    operands read in the dtype the registry computes in (binary ops' promoted one; alpha, where
    not 1, a further operand), integer divisions whose divisor may be 0 left to eager (Note
    [Integer division by zero]). An activation's number arguments (elu's alpha, scale,
    input_scale) are constants of its element function."""
    name, full = op.overloadpacket.__name__, op._full_name
    if _C._inductor.pointwise_num_params(full):
        return _parameterized_lowering(name, full)

    def lower(out, *operands, alpha=None):
        return lower_elementwise(full, out.dtype, list(out.shape), operands, alpha)

    return lower


def _parameterized_lowering(name, full):
    functions = {}

    def lower(out, x, *params, **kwargs):
        try:
            key = (ir_dtype(x.dtype), params, tuple(sorted(kwargs.items())))
            if key not in functions:
                function = _C._inductor.pointwise_ir(full, [key[0]], params, kwargs)
                functions[key] = function, _builder(function.expr)
        except TypeError as e:  # a number argument that is not a number here (a symbolic one)
            raise Fallback(str(e)) from None
        function, build = functions[key]
        return pointwise(name, out, [x], build, function.compute)

    return lower


for _full in _C._inductor.pointwise_ops():
    _op = overload_named(_full)
    register(_op)(element_function_lowering(_op))


# Note [Integer pow]: eager raises integers to integer powers by repeated squaring in int64, so a
# result past 2^63 wraps around (3 ** 41 is -420491770248316829); the kernel IR's pow computes
# integers through double, exact only below 2^53, and an overflow came out INT64_MIN (fuzz seed
# 171, program 5882). A constant exponent is unrolled into multiplications, which wrap as eager's
# do; the IR is a tree without shared values (x ** 8 is a product of 8 loads, merged again by
# LLVM), so only small exponents are, and the rest run eager's kernel, as PyTorch's Inductor
# runs ATen's for a tensor exponent.
_UNROLLED_INTEGER_POW_MAX = 64


_float_pow = element_function_lowering(aten.pow.Tensor_Tensor)


@register("pow.Tensor_Scalar", "pow.Tensor_Tensor", "pow.Scalar")
def _pow(out, a, b):
    if _is_float(ir_dtype(out.dtype)):
        return _float_pow(out, a, b)
    if not isinstance(b, int) or isinstance(b, bool) or not 0 <= b <= _UNROLLED_INTEGER_POW_MAX:
        raise Fallback("integer pow by a tensor or a large exponent (Note [Integer pow])")
    return pointwise("pow", out, [a], lambda x: _integer_power(x, b, ir_dtype(out.dtype)))


def _integer_power(x, n, dtype):
    """x ** n (n >= 0) as multiplications by squaring, which wrap around as eager's."""
    if n == 0:
        return kir.const(1, dtype)
    if n == 1:
        return x
    half = _integer_power(x, n // 2, dtype)
    square = ops.mul(half, half)
    return ops.mul(square, x) if n % 2 else square


@register("where.self")
def _where(out, cond, a, b):
    cl = loader(cond, "bool")
    return pointwise_with_cond("where", out, cond, cl, a, b)


def pointwise_with_cond(name, out, cond, cond_loader, a, b):
    dtype = ir_dtype(out.dtype)
    la, lb = loader(a, dtype), loader(b, dtype)
    sc, sa, sb, shape = shape_of(cond), shape_of(a), shape_of(b), list(out.shape)

    def fn(ctx, idx):
        return ops.where(cond_loader(ctx, broadcast_indices(idx, sc, shape)),
                la(ctx, broadcast_indices(idx, sa, shape)), lb(ctx, broadcast_indices(idx, sb, shape)))

    return Pointwise(out.dtype, shape, fn, ops_of(cond, a, b) | {name})


_INV_SQRT_2PI = 1.12837916709551257390 * 0.70710678118654752440 * 0.5  # M_2_SQRTPI * M_SQRT1_2 / 2, as eager's


@register("gelu.default")
def _gelu(out, x, approximate="none"):
    d = ir_dtype(out.dtype)
    c = lambda v: kir.const(v, d)  # noqa: E731
    if approximate == "tanh":
        def f(a):
            # eager's order (x^3 first); eager fuses the multiply-add, which this IR cannot say
            inner = ops.mul(c(math.sqrt(2 / math.pi)), ops.add(a, ops.mul(c(0.044715), ops.mul(ops.mul(a, a), a))))
            return ops.mul(ops.mul(c(0.5), a), ops.add(c(1.0), ops.tanh(inner)))
    elif all(isinstance(n, int) and n == 1 for n in out.shape):
        # one element: eager's scalar loop, x * 0.5 * (1 + erf(x / sqrt 2)) with libm's erf, in the
        # opmath type (Note [gelu's two loops] in tensor/ops/activation.cc)
        m = opmath(d)

        def f(a):
            return ops.mul(ops.mul(a, const(0.5, m)),
                           ops.add(const(1.0, m), ops.erf(ops.mul(a, const(math.sqrt(0.5), m)))))
    elif d == "f32":
        # eager's float32 kernel: 0.5 * fma(x, erf, x) with its erf (Note [Gelu's erf] in codegen/float_math.inc)
        def f(a):
            return ops.gelu(a)
    else:
        # float64, and the 16-bit types computed in float32: x * cdf, as eager's
        def f(a):
            return ops.mul(a, ops.normal_cdf(a))
    return pointwise("gelu", out, [x], f)


@register("gelu_backward.default")
def _gelu_backward(out, grad, x, approximate="none"):
    if approximate != "none":
        raise Fallback("gelu_backward(approximate='tanh')")
    d = ir_dtype(out.dtype)
    c = lambda v: kir.const(v, d)  # noqa: E731

    if d == "f32":
        # eager's float32 kernel, one exp shared by the CDF's erf and the PDF (fmath::GeluBackward):
        # the same bits (Note [One float math])
        def f(g, a):
            return ops.gelu_backward(g, a)
    else:
        # cdf + x * exp(-0.5 * x * x) / sqrt(2 pi), as eager's other dtypes
        def f(g, a):
            pdf = ops.mul(ops.exp(ops.mul(ops.mul(c(-0.5), a), a)), c(_INV_SQRT_2PI))
            return ops.mul(g, ops.add(ops.normal_cdf(a), ops.mul(a, pdf)))

    return pointwise("gelu_backward", out, [grad, x], f)


@register("silu_backward.default")
def _silu_backward(out, grad, x):
    d = ir_dtype(out.dtype)

    def f(g, a):
        s = ops.sigmoid(a)
        return ops.mul(g, ops.mul(s, ops.add(kir.const(1.0, d), ops.mul(a, ops.sub(kir.const(1.0, d), s)))))

    return pointwise("silu_backward", out, [grad, x], f)


@register("threshold_backward.default")
def _threshold_backward(out, grad, x, threshold):
    d = ir_dtype(out.dtype)
    return pointwise("threshold_backward", out, [grad, x],
                     lambda g, a: ops.where(ops.le(a, const(threshold, d)), const(0, d), g))


@register("sigmoid_backward.default")
def _sigmoid_backward(out, grad, y):
    d = ir_dtype(out.dtype)
    return pointwise("sigmoid_backward", out, [grad, y], lambda g, s: ops.mul(g, ops.mul(s, ops.sub(const(1.0, d), s))))


@register("tanh_backward.default")
def _tanh_backward(out, grad, y):
    d = ir_dtype(out.dtype)
    return pointwise("tanh_backward", out, [grad, y], lambda g, t: ops.mul(g, ops.sub(const(1.0, d), ops.mul(t, t))))


@register("clamp.default")
def _clamp(out, x, min=None, max=None):
    d = ir_dtype(out.dtype)

    def f(a):
        if min is not None:
            a = ops.max(a, kir.const(scalar_as(min, d), d))
        if max is not None:
            a = ops.min(a, kir.const(scalar_as(max, d), d))
        return a

    return pointwise("clamp", out, [x], f)


def _is_float(d):
    return d in ("f32", "f64", "bf16")


_floor_divide = element_function_lowering(aten.floor_divide.default)


@register("div.Tensor_mode", "div.Scalar_mode")
def _div_mode(out, a, b, rounding_mode=None):
    d = ir_dtype(out.dtype)
    if rounding_mode == "floor":
        return _floor_divide(out, a, b)
    if rounding_mode == "trunc" and _is_float(d):
        return pointwise("div", out, [a, b], lambda x, y: ops.trunc(ops.div(x, y)),
                         load_as=one_element_in_float(out.dtype, b))
    if rounding_mode is not None:
        check_integer_divisor("div", b)
    # true division, or integers' (truncating)
    return pointwise("div", out, [a, b], lambda x, y: ops.div(x, y), load_as=one_element_in_float(out.dtype, b))


@register("round.decimals")
def _round_decimals(out, x, *, decimals):
    """Eager's arithmetic (tensor/ops/unary.cc, RoundDecimalsInto): x * 10^d rounded half to even
    and divided back, or for d < 0 x / 10^-d rounded and multiplied back, in the opmath type."""
    d = ir_dtype(out.dtype)
    if not _is_float(d):
        raise Fallback("round with decimals of integers (eager raises NotImplementedError)")
    scale = const(10.0 ** abs(decimals), opmath(d))
    if decimals < 0:
        return pointwise("round", out, [x], lambda a: ops.mul(ops.round(ops.div(a, scale)), scale))
    return pointwise("round", out, [x], lambda a: ops.div(ops.round(ops.mul(a, scale)), scale))


# Activations with number arguments (leaky_relu, hardtanh, elu, softplus, threshold, logit) and
# hardsigmoid/hardswish lower from the registry (activation.cc's ActExprCpu), above.
_FLOAT_MAX = {"f32": 3.4028234663852886e38, "f64": 1.7976931348623157e308, "bf16": 3.3895313892515355e38}


@register("nan_to_num.default")
def _nan_to_num(out, x, nan=None, posinf=None, neginf=None):
    d = ir_dtype(out.dtype)
    if not _is_float(d):  # integers and bools have no NaN or infinity: a copy
        return pointwise("nan_to_num", out, [x], lambda a: a)
    big = _FLOAT_MAX[d]
    c = lambda v: const(v, opmath(d))  # noqa: E731
    nan, posinf, neginf = 0.0 if nan is None else nan, big if posinf is None else posinf, -big if neginf is None else neginf
    return pointwise("nan_to_num", out, [x], lambda a: ops.where(ops.ne(a, a), c(nan), ops.where(
        ops.eq(a, c(INF)), c(posinf), ops.where(ops.eq(a, c(-INF)), c(neginf), a))))


@register("fill.Scalar")
def _fill(out, x, value):
    d = ir_dtype(out.dtype)
    return Pointwise(out.dtype, out.shape, lambda ctx, idx: const(value, d), {"fill"})


def _copy(out, x, **kwargs):
    return pointwise("clone", out, [x], lambda a: a)


for _name in ("clone.default", "_to_copy.default", "alias.default", "lift_fresh_copy.default"):
    _packet, _overload = _name.split(".")
    if hasattr(aten, _packet) and hasattr(getattr(aten, _packet), _overload):
        register(getattr(getattr(aten, _packet), _overload))(_copy)


@register("full.default")
def _full(out, size, value, **kwargs):
    d = ir_dtype(out.dtype)
    return Pointwise(out.dtype, out.shape, lambda ctx, idx: kir.const(scalar_as(value, d), d), {"full"})


@register("scalar_tensor.default")
def _scalar_tensor(out, value, **kwargs):
    d = ir_dtype(out.dtype)
    return Pointwise(out.dtype, [], lambda ctx, idx: kir.const(scalar_as(value, d), d), {"scalar_tensor"})


def _like(fixed):
    def lower(out, x, *args, **kwargs):
        value = fixed if fixed is not None else args[0]
        d = ir_dtype(out.dtype)
        return Pointwise(out.dtype, out.shape, lambda ctx, idx: kir.const(scalar_as(value, d), d), {"full"})

    return lower


register("zeros_like.default")(_like(0))
register("ones_like.default")(_like(1))
register("full_like.default")(_like(None))
