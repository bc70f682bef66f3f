"""PyTorch's pointwise functions that kiln composes from its own ops (issue 17): deg2rad, rad2deg,
sinc, float_power, heaviside, gcd, lcm, ldexp, frexp, isposinf, isneginf, isreal, and the scan
logcumsumexp.

Each follows torch 2.13's result dtype (integers promote to the default float where torch's
kernel does), its in-place variant writes through kiln's in-place ops (so it returns self and
bumps the version), and its gradient is the composition's, equal to torch's formula.
"""

import math

from kiln import _C, return_types
from kiln._composites import _broadcast_shape, _is_fake, _kiln, _type_name, _wrap_dim

__all__ = ["deg2rad", "deg2rad_", "rad2deg", "rad2deg_", "sinc", "sinc_", "float_power", "heaviside", "gcd", "gcd_",
           "lcm", "lcm_", "ldexp", "ldexp_", "frexp", "isposinf", "isneginf", "isreal", "logcumsumexp"]


def _as_float(input):
    """An integer or bool tensor as the default float dtype (torch's unary float ops promote so)."""
    return input if input.dtype.is_floating_point else input.to(_C.get_default_dtype())


def _result(value, out):
    return value if out is None else out.copy_(value)


# --- angle conversions and sinc -------------------------------------------------------------------
def deg2rad(input, *, out=None):
    return _result(_as_float(input) * (math.pi / 180.0), out)


def rad2deg(input, *, out=None):
    return _result(_as_float(input) * (180.0 / math.pi), out)


def _require_float_in_place(op, input):
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"result type Float can't be cast to the desired output type {_type_name(input.dtype)}")


def deg2rad_(input):
    _require_float_in_place("deg2rad_", input)
    return input.mul_(math.pi / 180.0)


def rad2deg_(input):
    _require_float_in_place("rad2deg_", input)
    return input.mul_(180.0 / math.pi)


def sinc(input, *, out=None):
    """sin(pi x) / (pi x), and 1 at x = 0. The 0 is replaced by 1 before dividing, so that neither the
    value nor the gradient (torch's: 0 there) sees a 0/0."""
    k = _kiln()
    x = _as_float(input)
    zero = x == 0
    safe = k.where(zero, k.ones((), dtype=x.dtype), x)
    scaled = safe * math.pi
    return _result(k.where(zero, k.ones((), dtype=x.dtype), scaled.sin() / scaled), out)


def sinc_(input):
    _require_float_in_place("sinc_", input)
    return input.copy_(sinc(input))


# --- powers -------------------------------------------------------------------------------------
def float_power(input, exponent, *, out=None):
    """input ** exponent computed in float64 (whatever the operands' dtypes), as torch's."""
    k = _kiln()
    if not isinstance(input, k.Tensor) and not isinstance(exponent, k.Tensor):
        raise TypeError("float_power() received an invalid combination of arguments")
    base = input.to(_C.float64) if isinstance(input, k.Tensor) else float(input)
    power = exponent.to(_C.float64) if isinstance(exponent, k.Tensor) else float(exponent)
    if not isinstance(base, k.Tensor):
        base = k.tensor(base, dtype=_C.float64)
    return _result(k.pow(base, power), out)


def float_power_(input, exponent):
    if input.dtype != _C.float64:
        raise RuntimeError(f"the base given to float_power_ has dtype {_type_name(input.dtype)} but the operation's "
                           "result requires dtype Double")
    return input.pow_(exponent.to(_C.float64) if isinstance(exponent, _kiln().Tensor) else exponent)


def ldexp(input, other, *, out=None):
    """input * 2 ** other (torch's own composition: mul(input, pow(2.0, other)))."""
    k = _kiln()
    return _result(k.mul(input, k.pow(2.0, other)), out)


def ldexp_(input, other):
    return input.mul_(_kiln().pow(2.0, other))


def frexp(input, *, out=None):
    """(mantissa, exponent) with input = mantissa * 2 ** exponent and 0.5 <= |mantissa| < 1 (0, inf and
    NaN keep exponent 0 and mantissa = input). The exponent is estimated by log2 in float64 and then
    corrected by one either way, so it is exact; the mantissa is input times two exact powers of two
    (one would overflow for the extreme exponents), and its gradient is 2 ** -exponent, as torch's."""
    k = _kiln()
    if not input.dtype.is_floating_point:
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    with k.no_grad():
        magnitude = input.detach().abs().to(_C.float64)
        finite = magnitude.isfinite() & (magnitude != 0)
        safe = k.where(finite, magnitude, k.ones((), dtype=_C.float64))
        exponent = safe.log2().floor() + 1
        for _ in range(2):  # |mantissa| must land in [0.5, 1): the log2 estimate may be one off
            first, second = _inverse_power_halves(exponent)
            scaled = safe * first * second
            exponent = exponent + (scaled >= 1).to(_C.float64) - (scaled < 0.5).to(_C.float64)
        exponent = k.where(finite, exponent, k.zeros((), dtype=_C.float64))
        first, second = (p.to(input.dtype) for p in _inverse_power_halves(exponent))
    mantissa = input * first * second
    exponent = exponent.to(_C.int32)
    if out is not None:
        out[0].copy_(mantissa)
        out[1].copy_(exponent)
        mantissa, exponent = out
    return return_types.frexp((mantissa, exponent))


def _inverse_power_halves(exponent):
    """2 ** -exponent as two factors, each within float range where the whole is not (2 ** 1074)."""
    k = _kiln()
    half = (-exponent / 2).floor()
    return k.pow(2.0, half), k.pow(2.0, -exponent - half)


# --- integer arithmetic -----------------------------------------------------------------------------
def _check_integral(kernel, *tensors):
    for t in tensors:
        if t.dtype.is_floating_point or t.dtype == _C.bool:
            raise NotImplementedError(f"\"{kernel}\" not implemented for '{_type_name(t.dtype)}'")


def _euclid_steps(dtype):
    """An upper bound on Euclid's steps for operands of this dtype (consecutive Fibonacci numbers are
    the worst case: about log_phi(2 ** bits) steps), so a trace unrolls a fixed number of them."""
    bits = {_C.uint8: 8, _C.int8: 8, _C.int16: 16, _C.int32: 32}.get(dtype, 64)
    return int(math.ceil(bits * math.log(2) / math.log((1 + 5 ** 0.5) / 2))) + 2


def gcd(input, other, *, out=None):
    k = _kiln()
    _check_integral("gcd_cpu", input, other)
    dtype = _C.result_type(input, other)
    a, b = input.to(dtype).abs(), other.to(dtype).abs()
    shape = _broadcast_shape(a.shape, b.shape)
    a, b = a.expand(shape), b.expand(shape)
    zero = k.zeros((), dtype=dtype)
    concrete = not (_is_fake(a) or _is_fake(b))
    for _ in range(_euclid_steps(dtype)):
        if concrete and not bool((b != 0).any()):
            break  # eager: stop once every pair is done (the fixed bound is for traces)
        nonzero = b != 0
        a, b = k.where(nonzero, b, a), k.where(nonzero, k.remainder(a, k.where(nonzero, b, 1)), zero)
    return _result(a, out)


def gcd_(input, other):
    return input.copy_(gcd(input, other))


def lcm(input, other, *, out=None):
    k = _kiln()
    _check_integral("lcm_cpu", input, other)
    g = gcd(input, other)
    dtype = g.dtype
    safe = k.where(g == 0, k.ones((), dtype=dtype), g)
    value = k.where(g == 0, k.zeros((), dtype=dtype), (k.div(input.to(dtype), safe, rounding_mode="trunc") *
                                                     other.to(dtype)).abs())
    return _result(value, out)


def lcm_(input, other):
    return input.copy_(lcm(input, other))


def heaviside(input, values, *, out=None):
    """0 where input < 0, `values` where input == 0, 1 where input > 0. Like torch's, it has no
    gradient: asked for one, it raises, as torch's."""
    k = _kiln()
    if input.dtype != values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes")
    if input.dtype == _C.bool:
        raise NotImplementedError("\"heaviside_cpu\" not implemented for 'Bool'")
    x, v = input.detach(), values.detach()
    value = k.where(x == 0, v, (x > 0).to(x.dtype))
    if k.is_grad_enabled() and (input.requires_grad or values.requires_grad):
        value = _no_derivative("heaviside").apply(value, input, values)
    return _result(value, out)


_NO_DERIVATIVE = {}


def _no_derivative(op):
    """An autograd Function that passes its first input through and, as torch for an op with no
    derivative formula, raises when asked for the gradient (so the result still requires grad)."""
    if op not in _NO_DERIVATIVE:
        k = _kiln()

        class NotImplementedBackward(k.autograd.Function):
            @staticmethod
            def forward(ctx, value, *inputs):
                return value

            @staticmethod
            def backward(ctx, grad):
                raise RuntimeError(f"derivative for aten::{op} is not implemented")

        _NO_DERIVATIVE[op] = NotImplementedBackward
    return _NO_DERIVATIVE[op]


def heaviside_(input, values):
    return input.copy_(heaviside(input, values))


# --- classification -------------------------------------------------------------------------------
def isposinf(input, *, out=None):
    k = _kiln()
    value = input == math.inf if input.dtype.is_floating_point else k.zeros_like(input, dtype=_C.bool)
    return _result(value, out)


def isneginf(input, *, out=None):
    k = _kiln()
    value = input == -math.inf if input.dtype.is_floating_point else k.zeros_like(input, dtype=_C.bool)
    return _result(value, out)


def isreal(input):
    """Whether each value's imaginary part is 0 (always, for a real dtype)."""
    if input.dtype.is_complex:
        return input.imag == 0
    return _kiln().ones_like(input, dtype=_C.bool)


# --- scans ------------------------------------------------------------------------------------------
def logcumsumexp(input, dim, *, out=None):
    """log(cumsum(exp(input))) along dim, by a log-depth (Hillis-Steele) scan of logaddexp: each
    element adds the partial result 1, 2, 4, ... places before it. Every step is logaddexp, so no
    exp under- or overflows (a single shift by the maximum would lose the small leading terms)."""
    k = _kiln()
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"logcumsumexp_out_cpu\" not implemented for '{_type_name(input.dtype)}'")
    dim = _wrap_dim(dim, input.ndim)
    if input.ndim == 0:
        return _result(input.clone(), out)
    size = input.shape[dim]
    result, step = input, 1
    while step < size:
        pad_shape = list(result.shape)
        pad_shape[dim] = step
        earlier = k.cat([k.full(pad_shape, -math.inf, dtype=input.dtype, device=input.device), result.narrow(dim, 0, size - step)], dim)
        result = k.logaddexp(result, earlier)
        step *= 2
    return _result(result if result is not input else input.clone(), out)
