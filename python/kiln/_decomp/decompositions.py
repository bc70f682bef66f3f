"""Decompositions of the pointwise ops, activations and their backward ops, and the softmaxes.

Each function is written over kiln.ops.aten OpOverloads; it reads only metadata (shape, dtype)
of its tensor arguments in Python, so a tracer records the ops it calls and nothing else.
"""

import functools
import math

import kiln
from kiln._decomp import register_decomposition
from kiln._ops import ops

aten = ops.aten

_FLOAT_MAX = {
    kiln.float16: 65504.0,
    kiln.bfloat16: 3.3895313892515355e38,
    kiln.float32: 3.4028234663852886e38,
    kiln.float64: 1.7976931348623157e308,
}


# --- helpers shared by the decomposition files ---------------------------------------------------

def numel(shape):
    """The product of a shape's sizes."""
    n = 1
    for s in shape:
        n *= s
    return n


def broadcast_shape(a, b):
    """The broadcast of two shapes, with PyTorch's error when they do not broadcast."""
    out = []
    for i in range(max(len(a), len(b))):
        x = a[len(a) - 1 - i] if i < len(a) else 1
        y = b[len(b) - 1 - i] if i < len(b) else 1
        if x != y and x != 1 and y != 1:
            raise RuntimeError(f"The size of tensor a ({x}) must match the size of tensor b ({y}) at non-singleton "
                               f"dimension {i}")
        out.append(y if x == 1 else x)
    return list(reversed(out))


def scalar(value, like, dtype=None):
    """A 0-dim tensor holding `value`, of `like`'s dtype (or `dtype`) and device."""
    return aten.scalar_tensor.default(value, dtype=dtype or like.dtype, device=like.device)


def to_dtype(x, dtype):
    """x converted to dtype (x itself when it already has it)."""
    return x if x.dtype == dtype else aten._to_copy.default(x, dtype=dtype)


def to_float(x):
    """x as a floating tensor: integer and bool tensors convert to the default dtype."""
    return x if x.dtype.is_floating_point else aten._to_copy.default(x, dtype=kiln.get_default_dtype())


_LOW_PRECISION = (kiln.float16, kiln.bfloat16)


def _promoted_float(args):
    """The floating dtype the tensors among args promote to (0-d tensors weak beside dimensioned
    ones, as in eager), or None."""
    tensors = [a for a in args if isinstance(a, kiln.Tensor)]
    dims = [t for t in tensors if t.dim() > 0] or tensors
    floats = [t.dtype for t in dims if t.dtype.is_floating_point]
    return functools.reduce(kiln.promote_types, floats) if floats else None


def pw_opmath(fn):
    """Runs a pointwise decomposition in float32 for float16/bfloat16 inputs and rounds its
    results once, as the eager kernels do (they compute in the "opmath" type)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        low = _promoted_float(args)
        if low not in _LOW_PRECISION:  # a float16 input beside a float32 one computes in float32
            return fn(*args, **kwargs)

        def up(v):
            return to_dtype(v, kiln.float32) if isinstance(v, kiln.Tensor) and v.dtype in _LOW_PRECISION else v

        def down(o):
            return to_dtype(o, low) if isinstance(o, kiln.Tensor) and o.dtype == kiln.float32 else o
        out = fn(*[up(a) for a in args], **{k: up(v) for k, v in kwargs.items()})
        return tuple(down(o) for o in out) if isinstance(out, (tuple, list)) else down(out)
    return wrapper


def where(cond, a, b):
    """where over tensors or numbers: a number takes the dtype of the tensor beside it."""
    if not isinstance(a, kiln.Tensor):
        a = scalar(a, b)
    if not isinstance(b, kiln.Tensor):
        b = scalar(b, a)
    return aten.where.self(cond, a, b)


def rsub_scalar(x, value):
    """value - x for a number `value` (exactly, through negation)."""
    return aten.add.Scalar(aten.neg.default(x), value)


def reduce_loss(loss, reduction):
    """reduction: 0 none, 1 mean, 2 sum (PyTorch's Reduction enum)."""
    if reduction == 1:
        return aten.mean.default(loss)
    if reduction == 2:
        return aten.sum.dim_IntList(loss, None)
    return loss


def dims_of(x, dim):
    """A dim argument (None, int or list; empty means all) as a sorted list of non-negative dims."""
    n = max(x.dim(), 1)
    if dim is None:
        return list(range(x.dim()))
    if isinstance(dim, int):
        dim = [dim]
    if len(dim) == 0:
        return list(range(x.dim()))
    return sorted(d % n for d in dim)


# --- pointwise binary ------------------------------------------------------------------------

@register_decomposition(aten.fmax.default)
def fmax(self, other):
    return where(aten.isnan.default(other), self,
                 where(aten.isnan.default(self), other, aten.maximum.default(self, other)))


@register_decomposition(aten.fmin.default)
def fmin(self, other):
    return where(aten.isnan.default(other), self,
                 where(aten.isnan.default(self), other, aten.minimum.default(self, other)))


@register_decomposition(aten.hypot.default)
@pw_opmath
def hypot(self, other):
    return aten.sqrt.default(aten.add.Tensor(aten.mul.Tensor(self, self), aten.mul.Tensor(other, other)))


@register_decomposition(aten.copysign.Tensor)
def copysign(self, other):
    dtype = kiln.result_type(self, other)
    if not dtype.is_floating_point:
        dtype = kiln.get_default_dtype()
    magnitude = aten.abs.default(to_dtype(self, dtype))
    return where(aten.signbit.default(other), aten.neg.default(magnitude), magnitude)


def _number_as_tensor(value, tensor):
    """A number operand as a 0-d tensor of the op's result dtype (the Scalar overloads' promotion)."""
    return scalar(value, tensor, dtype=kiln.result_type(tensor, value))


@register_decomposition(aten.copysign.Scalar)
def copysign_scalar(self, other):
    return copysign(self, _number_as_tensor(other, self))


@register_decomposition(aten.floor_divide.default)
def floor_divide_tensor(self, other):
    return aten.div.Tensor_mode(self, other, rounding_mode="floor")


@register_decomposition(aten.floor_divide.Scalar)
def floor_divide_scalar(self, other):
    return aten.div.Scalar_mode(self, other, rounding_mode="floor")


@register_decomposition(aten.xlogy.Tensor)
@pw_opmath
def xlogy(self, other):
    dtype = kiln.result_type(self, other)
    if not dtype.is_floating_point:
        dtype = kiln.get_default_dtype()
    x, y = to_dtype(self, dtype), to_dtype(other, dtype)
    # x == 0 reads log(1) = 0, so neither the value nor the gradient sees log(0).
    safe_y = where(aten.eq.Scalar(x, 0), 1.0, y)
    product = aten.mul.Tensor(x, aten.log.default(safe_y))
    return where(aten.isnan.default(y), math.nan, product)


@register_decomposition(aten.xlogy.Scalar_Other)
def xlogy_scalar_other(self, other):
    return xlogy(self, _number_as_tensor(other, self))


@register_decomposition(aten.xlogy.Scalar_Self)
def xlogy_scalar_self(self, other):
    return xlogy(_number_as_tensor(self, other), other)


@register_decomposition(aten.remainder.Scalar_Tensor)
def remainder_scalar_tensor(self, other):
    return aten.remainder.Tensor(_number_as_tensor(self, other), other)


@register_decomposition([aten.bitwise_left_shift.Tensor_Scalar, aten.__lshift__.Scalar])
def bitwise_left_shift_scalar(self, other):
    # the number in the result dtype: `bools << 2` shifts int64s, as eager's promotion gives
    return aten.bitwise_left_shift.Tensor(self, _number_as_tensor(other, self))


@register_decomposition([aten.bitwise_right_shift.Tensor_Scalar, aten.__rshift__.Scalar])
def bitwise_right_shift_scalar(self, other):
    return aten.bitwise_right_shift.Tensor(self, _number_as_tensor(other, self))


@register_decomposition(aten.bitwise_left_shift.Scalar_Tensor)
def bitwise_left_shift_scalar_tensor(self, other):
    return aten.bitwise_left_shift.Tensor(_number_as_tensor(self, other), other)


@register_decomposition(aten.bitwise_right_shift.Scalar_Tensor)
def bitwise_right_shift_scalar_tensor(self, other):
    return aten.bitwise_right_shift.Tensor(_number_as_tensor(self, other), other)


@register_decomposition(aten.__lshift__.Tensor)
def lshift_tensor(self, other):
    return aten.bitwise_left_shift.Tensor(self, other)


@register_decomposition(aten.__rshift__.Tensor)
def rshift_tensor(self, other):
    return aten.bitwise_right_shift.Tensor(self, other)


@register_decomposition(aten.rsub.Tensor)
def rsub_tensor(self, other, alpha=1):
    return aten.sub.Tensor(other, self, alpha=alpha)


@register_decomposition(aten.rsub.Scalar)
def rsub(self, other, alpha=1):
    scaled = aten.neg.default(self) if alpha == 1 else aten.mul.Scalar(aten.neg.default(self), alpha)
    return aten.add.Scalar(scaled, other)


@register_decomposition(aten.max.other)
def max_other(self, other):
    return aten.maximum.default(self, other)


@register_decomposition(aten.min.other)
def min_other(self, other):
    return aten.minimum.default(self, other)


@register_decomposition(aten.clamp_min.default)
def clamp_min(self, min):
    return aten.clamp.default(self, min, None)


@register_decomposition(aten.clamp_max.default)
def clamp_max(self, max):
    return aten.clamp.default(self, None, max)


@register_decomposition(aten.clamp_min.Tensor)
def clamp_min_tensor(self, min):
    return aten.clamp.Tensor(self, min, None)


@register_decomposition(aten.clamp_max.Tensor)
def clamp_max_tensor(self, max):
    return aten.clamp.Tensor(self, None, max)


@register_decomposition(aten.lerp.Scalar)
def lerp_scalar(self, end, weight):
    return lerp_tensor(self, end, scalar(weight, self))


@register_decomposition(aten.lerp.Tensor)
@pw_opmath
def lerp_tensor(self, end, weight):
    # The two-sided form keeps lerp exact at both ends: small weights step from self, large from end.
    diff = aten.sub.Tensor(end, self)
    low = aten.add.Tensor(self, aten.mul.Tensor(weight, diff))
    high = aten.sub.Tensor(end, aten.mul.Tensor(diff, rsub_scalar(weight, 1)))
    return aten.where.self(aten.lt.Scalar(aten.abs.default(weight), 0.5), low, high)


@register_decomposition(aten.addcmul.default)
@pw_opmath
def addcmul(self, tensor1, tensor2, value=1):
    product = aten.mul.Tensor(tensor1, tensor2)
    if value != 1:
        product = aten.mul.Scalar(product, value)
    return aten.add.Tensor(self, product)


@register_decomposition(aten.addcdiv.default)
@pw_opmath
def addcdiv(self, tensor1, tensor2, value=1):
    quotient = aten.div.Tensor(tensor1, tensor2)
    if value != 1:
        quotient = aten.mul.Scalar(quotient, value)
    return aten.add.Tensor(self, quotient)


@register_decomposition(aten.masked_fill.Scalar)
def masked_fill_scalar(self, mask, value):
    return aten.where.self(mask, scalar(value, self), self)


@register_decomposition(aten.masked_fill.Tensor)
def masked_fill_tensor(self, mask, value):
    if value.dim() != 0:
        raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                           f"{value.dim()} dimension(s).")
    return aten.where.self(mask, to_dtype(value, self.dtype), self)


# where with numbers: the C++ composites' calls (tensor/ops/index.cc), which are PyTorch's
@register_decomposition(aten.where.ScalarOther)
def where_scalar_other(condition, self, other):
    dtype = kiln.result_type(self, other)
    return aten.where.self(condition, to_dtype(self, dtype), scalar(other, self, dtype))


@register_decomposition(aten.where.ScalarSelf)
def where_scalar_self(condition, self, other):
    dtype = kiln.result_type(other, self)
    return aten.where.self(condition, scalar(self, other, dtype), to_dtype(other, dtype))


@register_decomposition(aten.where.Scalar)
def where_scalar(condition, self, other):
    values = (self, other)
    if any(isinstance(v, float) for v in values):
        dtype = kiln.get_default_dtype()
    elif any(not isinstance(v, bool) for v in values):
        dtype = kiln.int64
    else:
        dtype = kiln.bool
    b = aten.scalar_tensor.default(other, dtype=dtype, device=condition.device)
    a = aten.scalar_tensor.default(self, dtype=dtype, device=condition.device)
    return aten.where.self(condition, a, b)


# --- pointwise unary -------------------------------------------------------------------------

@register_decomposition(aten.exp2.default)
@pw_opmath
def exp2(self):
    return aten.pow.Scalar(2.0, to_float(self))


@register_decomposition(aten.silu.default)
@pw_opmath
def silu(self):
    return aten.mul.Tensor(self, aten.sigmoid.default(self))


@register_decomposition(aten.mish.default)
@pw_opmath
def mish(self):
    return aten.mul.Tensor(self, aten.tanh.default(aten.softplus.default(self)))


@register_decomposition(aten.frac.default)
def frac(self):
    return aten.sub.Tensor(self, aten.trunc.default(self))


@register_decomposition(aten.round.decimals)
@pw_opmath
def round_decimals(self, *, decimals):
    # the eager kernel's arithmetic (tensor/ops/unary.cc, RoundDecimalsInto), in the opmath type
    ten_pow = 10.0 ** abs(decimals)
    if decimals < 0:
        return aten.mul.Tensor(aten.round.default(aten.div.Tensor(self, ten_pow)), ten_pow)
    return aten.div.Tensor(aten.round.default(aten.mul.Tensor(self, ten_pow)), ten_pow)


@register_decomposition(aten.square.default)
def square(self):
    x = to_dtype(self, kiln.int64) if self.dtype == kiln.bool else self  # bool squares to int64
    return aten.mul.Tensor(x, x)


@register_decomposition(aten.isfinite.default)
def isfinite(self):
    return aten.logical_not.default(aten.logical_or.default(aten.isnan.default(self), aten.isinf.default(self)))


@register_decomposition(aten.absolute.default)
def absolute(self):
    return aten.abs.default(self)


@register_decomposition(aten.negative.default)
def negative(self):
    return aten.neg.default(self)


@register_decomposition(aten.positive.default)
def positive(self):
    if self.dtype == kiln.bool:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return aten.alias.default(self)


# --- activations -----------------------------------------------------------------------------

@register_decomposition(aten.relu6.default)
def relu6(self):
    return aten.hardtanh.default(self, 0, 6)


@register_decomposition(aten.softplus.default)
@pw_opmath
def softplus(self, beta=1, threshold=20):
    scaled = aten.mul.Scalar(self, beta)
    soft = aten.div.Scalar(aten.log1p.default(aten.exp.default(scaled)), beta)
    return aten.where.self(aten.gt.Scalar(scaled, threshold), self, soft)


@register_decomposition(aten.threshold.default)
def threshold(self, threshold, value):
    return aten.where.self(aten.le.Scalar(self, threshold), scalar(value, self), self)


@register_decomposition(aten.hardsigmoid.default)
@pw_opmath
def hardsigmoid(self):
    return aten.div.Scalar(aten.clamp.default(aten.add.Scalar(self, 3), 0, 6), 6)


@register_decomposition(aten.hardswish.default)
@pw_opmath
def hardswish(self):
    return aten.div.Scalar(aten.mul.Tensor(self, aten.clamp.default(aten.add.Scalar(self, 3), 0, 6)), 6)


@register_decomposition(aten.logit.default)
@pw_opmath
def logit(self, eps=None):
    x = to_float(self)
    if eps is not None:
        x = aten.clamp.default(x, eps, 1 - eps)
    return aten.log.default(aten.div.Tensor(x, rsub_scalar(x, 1)))


@register_decomposition(aten.nan_to_num.default)
def nan_to_num(self, nan=None, posinf=None, neginf=None):
    if not self.dtype.is_floating_point:
        return aten.clone.default(self)
    big = _FLOAT_MAX[self.dtype]
    out = where(aten.isnan.default(self), 0.0 if nan is None else nan, self)
    out = where(aten.eq.Scalar(self, math.inf), big if posinf is None else posinf, out)
    return where(aten.eq.Scalar(self, -math.inf), -big if neginf is None else neginf, out)


@register_decomposition(aten.softmax.int)
def softmax(self, dim, dtype=None):
    x = self if dtype is None else to_dtype(self, dtype)
    return aten._softmax.default(x, dim, False)


@register_decomposition(aten.log_softmax.int)
def log_softmax(self, dim, dtype=None):
    x = self if dtype is None else to_dtype(self, dtype)
    return aten._log_softmax.default(x, dim, False)


# --- activation backward ops -----------------------------------------------------------------

@register_decomposition(aten.threshold_backward.default)
@pw_opmath
def threshold_backward(grad_output, self, threshold):
    return where(aten.le.Scalar(self, threshold), 0, grad_output)


@register_decomposition(aten.gelu_backward.default)
@pw_opmath
def gelu_backward(grad_output, self, approximate="none"):
    x = self
    if approximate == "tanh":
        beta = math.sqrt(2.0) * 2.0 / math.sqrt(math.pi) * 0.5
        kappa = 0.044715
        x2 = aten.mul.Tensor(x, x)
        inner = aten.mul.Scalar(aten.add.Tensor(x, aten.mul.Scalar(aten.mul.Tensor(x2, x), kappa)), beta)
        t = aten.tanh.default(inner)
        dleft = aten.mul.Scalar(aten.add.Scalar(t, 1), 0.5)
        dright = aten.mul.Tensor(aten.mul.Scalar(aten.mul.Tensor(aten.mul.Scalar(x, 0.5),
                                                                 rsub_scalar(aten.mul.Tensor(t, t), 1)), beta),
                                 aten.add.Scalar(aten.mul.Scalar(x2, 3 * kappa), 1))
        return aten.mul.Tensor(grad_output, aten.add.Tensor(dleft, dright))
    cdf = aten.mul.Scalar(aten.add.Scalar(aten.erf.default(aten.mul.Scalar(x, math.sqrt(0.5))), 1), 0.5)
    pdf = aten.mul.Scalar(aten.exp.default(aten.mul.Scalar(aten.mul.Tensor(x, x), -0.5)), 1 / math.sqrt(2 * math.pi))
    return aten.mul.Tensor(grad_output, aten.add.Tensor(cdf, aten.mul.Tensor(x, pdf)))


@register_decomposition(aten.sigmoid_backward.default)
@pw_opmath
def sigmoid_backward(grad_output, output):
    return aten.mul.Tensor(aten.mul.Tensor(grad_output, rsub_scalar(output, 1)), output)


@register_decomposition(aten.tanh_backward.default)
@pw_opmath
def tanh_backward(grad_output, output):
    return aten.mul.Tensor(grad_output, rsub_scalar(aten.mul.Tensor(output, output), 1))


@register_decomposition(aten.silu_backward.default)
@pw_opmath
def silu_backward(grad_output, self):
    s = aten.sigmoid.default(self)
    inner = aten.add.Scalar(aten.mul.Tensor(self, rsub_scalar(s, 1)), 1)
    return aten.mul.Tensor(aten.mul.Tensor(grad_output, s), inner)


@register_decomposition(aten.leaky_relu_backward.default)
@pw_opmath
def leaky_relu_backward(grad_output, self, negative_slope, self_is_result):
    return aten.where.self(aten.gt.Scalar(self, 0), grad_output, aten.mul.Scalar(grad_output, negative_slope))


@register_decomposition(aten.hardtanh_backward.default)
@pw_opmath
def hardtanh_backward(grad_output, self, min_val, max_val):
    outside = aten.logical_or.default(aten.le.Scalar(self, min_val), aten.ge.Scalar(self, max_val))
    return where(outside, 0, grad_output)


@register_decomposition(aten.elu_backward.default)
@pw_opmath
def elu_backward(grad_output, alpha, scale, input_scale, is_result, self_or_result):
    x = self_or_result
    negcoef = alpha * scale
    positive = aten.mul.Scalar(grad_output, scale)
    if is_result:
        negative = aten.mul.Tensor(aten.mul.Scalar(grad_output, input_scale), aten.add.Scalar(x, negcoef))
    else:
        negative = aten.mul.Tensor(aten.mul.Scalar(aten.mul.Scalar(grad_output, input_scale), negcoef),
                                   aten.exp.default(aten.mul.Scalar(x, input_scale)))
    return aten.where.self(aten.le.Scalar(x, 0), negative, positive)


@register_decomposition(aten.softplus_backward.default)
@pw_opmath
def softplus_backward(grad_output, self, beta, threshold):
    scaled = aten.mul.Scalar(self, beta)
    z = aten.exp.default(scaled)
    soft = aten.div.Tensor(aten.mul.Tensor(grad_output, z), aten.add.Scalar(z, 1))
    return aten.where.self(aten.gt.Scalar(scaled, threshold), grad_output, soft)


@register_decomposition(aten.hardsigmoid_backward.default)
@pw_opmath
def hardsigmoid_backward(grad_output, self):
    inside = aten.logical_and.default(aten.gt.Scalar(self, -3), aten.lt.Scalar(self, 3))
    sixth = scalar(1.0, grad_output, kiln.float32)  # PyTorch's kernel scales by the float 1/6
    sixth = aten.div.Scalar(sixth, 6)
    return where(inside, aten.mul.Tensor(grad_output, to_dtype(sixth, grad_output.dtype)), 0)


@register_decomposition(aten.hardswish_backward.default)
@pw_opmath
def hardswish_backward(grad_output, self):
    middle = aten.mul.Tensor(grad_output, aten.add.Scalar(aten.div.Scalar(self, 3), 0.5))
    upper = where(aten.lt.Scalar(self, 3), middle, grad_output)
    return where(aten.le.Scalar(self, -3), 0, upper)


@register_decomposition(aten.mish_backward.default)
@pw_opmath
def mish_backward(grad_output, self):
    s = aten.sigmoid.default(self)
    t = aten.tanh.default(aten.log1p.default(aten.exp.default(self)))
    inner = aten.add.Tensor(t, aten.mul.Tensor(aten.mul.Tensor(self, s), rsub_scalar(aten.mul.Tensor(t, t), 1)))
    return aten.mul.Tensor(grad_output, inner)


@register_decomposition(aten.logit_backward.default)
@pw_opmath
def logit_backward(grad_output, self, eps=None):
    x = self
    grad = aten.div.Tensor(grad_output, aten.mul.Tensor(x, rsub_scalar(x, 1)))
    if eps is None:
        outside = aten.logical_or.default(aten.lt.Scalar(x, 0), aten.gt.Scalar(x, 1))
        return where(outside, math.nan, grad)
    outside = aten.logical_or.default(aten.lt.Scalar(x, eps), aten.gt.Scalar(x, 1 - eps))
    return where(outside, 0.0, grad)


@register_decomposition(aten._softmax_backward_data.default)
def softmax_backward_data(grad_output, output, dim, input_dtype):
    dot = aten.sum.dim_IntList(aten.mul.Tensor(grad_output, output), [dim], True)
    return to_dtype(aten.mul.Tensor(output, aten.sub.Tensor(grad_output, dot)), input_dtype)


@register_decomposition(aten._log_softmax_backward_data.default)
def log_softmax_backward_data(grad_output, output, dim, input_dtype):
    total = aten.sum.dim_IntList(grad_output, [dim], True)
    return to_dtype(aten.sub.Tensor(grad_output, aten.mul.Tensor(aten.exp.default(output), total)), input_dtype)
