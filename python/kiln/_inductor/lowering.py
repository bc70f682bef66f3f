"""Lowerings: aten ops of AOTAutograd's graphs as Pointwise/Reduction values (ir.py).

Each lowering receives the values of the node's arguments (Buffers, lazy values, Python scalars)
and the node's fake output (its dtype and shape), and returns a lazy value. Pointwise ops compose
their inputs' index functions; views remap indices; reductions reduce one axis at a time. An op
without a lowering, or a case a lowering does not cover (it raises Fallback), runs its eager
kernel from the wrapper (graph.py), named in the debug log.
"""

import math

import kiln
from kiln._inductor.ir import Affine, Buffer, Pointwise, Reduction, contiguous_strides, ir_dtype

aten = kiln.ops.aten
LOWERINGS = {}


class Fallback(Exception):
    """This node runs its eager kernel."""


def register(*ops):
    """Registers fn for the given overloads, as objects or "name.overload" strings (names kiln's
    registry lacks are skipped)."""
    def wrap(fn):
        for op in ops:
            if isinstance(op, str):
                packet, overload = op.split(".")
                op = getattr(getattr(aten, packet, None), overload, None) if hasattr(aten, packet) else None
                if op is None:
                    continue
            LOWERINGS[op] = fn
        return fn

    return wrap


# --- reading values --------------------------------------------------------------------------------
def loader(value, dtype=None):
    """fn(ctx, indices) -> expr reading `value` (a Buffer, lazy value or scalar), cast to dtype."""
    if isinstance(value, (bool, int, float)):
        d = dtype or ("f32" if isinstance(value, float) else "bool" if isinstance(value, bool) else "i64")
        return lambda ctx, idx: ("const", _const(value, d), d)
    if isinstance(value, Buffer):
        fn = lambda ctx, idx: ctx.load(value, idx)  # noqa: E731
        src = ir_dtype(value.dtype)
    elif isinstance(value, Pointwise):
        fn, src = value.fn, ir_dtype(value.dtype)
    elif isinstance(value, Reduction):
        fn = lambda ctx, idx: ctx.reduction_value(value, idx)  # noqa: E731
        src = ir_dtype(value.dtype)
    else:
        raise Fallback(f"argument of type {type(value).__name__}")
    if dtype is None or dtype == src:
        return fn
    return lambda ctx, idx: ("cast", fn(ctx, idx), dtype)


def _const(value, dtype):
    if dtype == "bool":
        return bool(value)
    if dtype in ("i64", "i32"):
        return int(value)
    return float(value)


def broadcast_indices(idx, in_shape, out_shape):
    """Indices into an input of in_shape broadcast to out_shape."""
    lead = len(out_shape) - len(in_shape)
    out = []
    for d, size in enumerate(in_shape):
        out.append(Affine(0) if size == 1 and out_shape[lead + d] != 1 else idx[lead + d])
    return out


def shape_of(value):
    if isinstance(value, (bool, int, float)):
        return []
    return value.shape


def ops_of(*values):
    ops = set()
    for v in values:
        ops |= getattr(v, "ops", set())
    return ops


def opmath(dtype):
    """The dtype of a formula's own constants for values of `dtype`: float32 for bfloat16 (kernels
    compute bfloat16 in float32, but a bfloat16 constant is rounded to 8 significant bits)."""
    return "f32" if dtype == "bf16" else dtype


def const(value, dtype):
    return ("const", _const(value, dtype), dtype)


def pointwise(name, out, inputs, combine, compute=None):
    """A Pointwise of out's shape whose value is combine(*input exprs) (inputs broadcast)."""
    out_dtype = ir_dtype(out.dtype)
    compute = compute or out_dtype
    loaders = [(loader(v, compute), shape_of(v)) for v in inputs]
    shape = list(out.shape)

    def fn(ctx, idx):
        exprs = [ld(ctx, broadcast_indices(idx, s, shape)) for ld, s in loaders]
        value = combine(*exprs)
        return value if compute == out_dtype else ("cast", value, out_dtype)

    return Pointwise(out.dtype, shape, fn, ops_of(*inputs) | {name})


# --- pointwise ops ---------------------------------------------------------------------------------
_UNARY = {"neg.default": "neg", "abs.default": "abs", "exp.default": "exp", "log.default": "log",
          "log1p.default": "log1p", "expm1.default": "expm1", "sqrt.default": "sqrt",
          "rsqrt.default": "rsqrt", "sin.default": "sin", "cos.default": "cos", "tanh.default": "tanh",
          "sigmoid.default": "sigmoid", "erf.default": "erf", "floor.default": "floor",
          "ceil.default": "ceil", "round.default": "round", "trunc.default": "trunc",
          "reciprocal.default": "reciprocal", "relu.default": "relu", "sign.default": "sign",
          "logical_not.default": "logical_not"}
_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "pow": "pow", "maximum": "max",
           "minimum": "min", "eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge",
           "logical_and": "logical_and", "logical_or": "logical_or", "atan2": "atan2", "remainder": "mod",
           "floor_divide": "floordiv"}
_COMPARE = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or"}


def _unary(ir_op):
    def lower(out, x):
        return pointwise(ir_op, out, [x], lambda a: (ir_op, a))

    return lower


def erfc_abs_expr(a, d):
    """erfc(|a|) as exp and a polynomial (Numerical Recipes' erfc, fractional error < 1.2e-7):
    every piece vectorises, where a libm erf call would run one element at a time."""
    c = lambda v: ("const", v, d)  # noqa: E731
    z = ("abs", a)
    t = ("div", c(1.0), ("add", c(1.0), ("mul", c(0.5), z)))
    poly = c(0.17087277)
    for k in (-0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806, 0.09678418, 0.37409196, 1.00002368):
        poly = ("add", c(k), ("mul", t, poly))
    return ("mul", t, ("exp", ("add", ("sub", ("neg", ("mul", z, z)), c(1.26551223)), ("mul", t, poly))))


def erf_expr(a, d):
    """erf(a) = +-(1 - erfc(|a|)), vectorisable (erfc_abs_expr)."""
    erfc = erfc_abs_expr(a, d)
    return ("where", ("ge", a, ("const", 0.0, d)), ("sub", ("const", 1.0, d), erfc), ("sub", erfc, ("const", 1.0, d)))


for _op, _name in _UNARY.items():
    register(_op)(_unary(_name))


@register("erf.default")
def _erf(out, x):
    d = ir_dtype(out.dtype)
    if d not in ("f32", "bf16"):  # f64 keeps libm's erf (the approximation is float precision)
        return pointwise("erf", out, [x], lambda a: ("erf", a))
    return pointwise("erf", out, [x], lambda a: erf_expr(a, "f32"))
del _op


def _binary_lowering(name, ir_op):
    def lower(out, a, b, alpha=None):
        compute = _common_dtype(a, b) if ir_op in _COMPARE else None
        if alpha is not None and alpha != 1:
            d = compute or ir_dtype(out.dtype)
            scale = ("const", _const(alpha, d), d)
            return pointwise(name, out, [a, b], lambda x, y: (ir_op, x, ("mul", y, scale)), compute)
        return pointwise(name, out, [a, b], lambda x, y: (ir_op, x, y), compute)

    return lower


def _common_dtype(a, b):
    kinds = []
    for v in (a, b):
        if isinstance(v, (Buffer, Pointwise, Reduction)):
            kinds.append(ir_dtype(v.dtype))
    if "f64" in kinds:
        return "f64"
    if any(k in ("f32", "bf16") for k in kinds) or any(isinstance(v, float) for v in (a, b)):
        return "f32"
    if kinds and all(k == "bool" for k in kinds) and all(not isinstance(v, (int, float)) or isinstance(v, bool)
                                                         for v in (a, b)):
        return "bool"
    return "i64"


for _name, _ir in _BINARY.items():
    for _overload in ("Tensor", "Scalar", "default"):
        _packet = getattr(aten, _name, None)
        if _packet is not None and hasattr(_packet, _overload):
            register(getattr(_packet, _overload))(_binary_lowering(_name, _ir))
register("pow.Tensor_Scalar", "pow.Tensor_Tensor")(_binary_lowering("pow", "pow"))
register("div.Tensor", "div.Scalar")(_binary_lowering("div", "div"))


@register("where.self")
def _where(out, cond, a, b):
    cl = loader(cond, "bool")
    return pointwise_with_cond("where", out, cond, cl, a, b)


def pointwise_with_cond(name, out, cond, cond_loader, a, b):
    dtype = ir_dtype(out.dtype)
    la, lb = loader(a, dtype), loader(b, dtype)
    sc, sa, sb, shape = shape_of(cond), shape_of(a), shape_of(b), list(out.shape)

    def fn(ctx, idx):
        return ("where", cond_loader(ctx, broadcast_indices(idx, sc, shape)),
                la(ctx, broadcast_indices(idx, sa, shape)), lb(ctx, broadcast_indices(idx, sb, shape)))

    return Pointwise(out.dtype, shape, fn, ops_of(cond, a, b) | {name})


@register("silu.default")
def _silu(out, x):
    return pointwise("silu", out, [x], lambda a: ("mul", a, ("sigmoid", a)))


@register("gelu.default")
def _gelu(out, x, approximate="none"):
    d = ir_dtype(out.dtype)
    c = lambda v: ("const", v, d)  # noqa: E731
    if approximate == "tanh":
        def f(a):
            inner = ("mul", c(math.sqrt(2 / math.pi)), ("add", a, ("mul", c(0.044715), ("mul", a, ("mul", a, a)))))
            return ("mul", ("mul", c(0.5), a), ("add", c(1.0), ("tanh", inner)))
    else:
        def f(a):
            return ("mul", ("mul", c(0.5), a), ("add", c(1.0), _erf_of(("mul", a, c(1 / math.sqrt(2))), d)))
    return pointwise("gelu", out, [x], f)


def _erf_of(a, d):
    return erf_expr(a, d) if d in ("f32", "bf16") else ("erf", a)


@register("gelu_backward.default")
def _gelu_backward(out, grad, x, approximate="none"):
    if approximate != "none":
        raise Fallback("gelu_backward(approximate='tanh')")
    d = ir_dtype(out.dtype)
    c = lambda v: ("const", v, d)  # noqa: E731

    def f(g, a):
        cdf = ("mul", c(0.5), ("add", c(1.0), _erf_of(("mul", a, c(1 / math.sqrt(2))), d)))
        pdf = ("mul", c(1 / math.sqrt(2 * math.pi)), ("exp", ("mul", c(-0.5), ("mul", a, a))))
        return ("mul", g, ("add", cdf, ("mul", a, pdf)))

    return pointwise("gelu_backward", out, [grad, x], f)


@register("silu_backward.default")
def _silu_backward(out, grad, x):
    d = ir_dtype(out.dtype)

    def f(g, a):
        s = ("sigmoid", a)
        return ("mul", g, ("mul", s, ("add", ("const", 1.0, d), ("mul", a, ("sub", ("const", 1.0, d), s)))))

    return pointwise("silu_backward", out, [grad, x], f)


@register("threshold_backward.default")
def _threshold_backward(out, grad, x, threshold):
    d = ir_dtype(out.dtype)
    return pointwise("threshold_backward", out, [grad, x],
                     lambda g, a: ("where", ("le", a, ("const", _const(threshold, d), d)), ("const", _const(0, d), d), g))


@register("sigmoid_backward.default")
def _sigmoid_backward(out, grad, y):
    d = ir_dtype(out.dtype)
    return pointwise("sigmoid_backward", out, [grad, y], lambda g, s: ("mul", g, ("mul", s, ("sub", ("const", 1.0, d), s))))


@register("tanh_backward.default")
def _tanh_backward(out, grad, y):
    d = ir_dtype(out.dtype)
    return pointwise("tanh_backward", out, [grad, y], lambda g, t: ("mul", g, ("sub", ("const", 1.0, d), ("mul", t, t))))


@register("clamp.default")
def _clamp(out, x, min=None, max=None):
    d = ir_dtype(out.dtype)

    def f(a):
        if min is not None:
            a = ("max", a, ("const", _const(min, d), d))
        if max is not None:
            a = ("min", a, ("const", _const(max, d), d))
        return a

    return pointwise("clamp", out, [x], f)


# Ops without an IR operator of their own, composed from the IR's (inductor/README.md). Formula
# constants use opmath (float32 for bfloat16); scalars an op compares with or clamps to use the
# tensor's dtype, as eager converts them to it.
def _is_float(d):
    return d in ("f32", "f64", "bf16")


def _float_unary(name, build):
    """A unary op on floats (integer inputs give float32, as promotion does): build(a, c) -> expr,
    c(v) a constant."""
    def lower(out, x):
        d = opmath(ir_dtype(out.dtype))
        return pointwise(name, out, [x], lambda a: build(a, lambda v: const(v, d)))

    return lower


_LN2 = math.log(2.0)
_HUGE = 1e8  # asinh/acosh above it: log(2x); x * x would overflow float32 near 1.8e19


def _asinh(a, c):
    s = ("abs", a)
    small = ("log1p", ("add", s, ("div", ("mul", s, s), ("add", c(1.0), ("sqrt", ("add", c(1.0), ("mul", s, s)))))))
    r = ("where", ("gt", s, c(_HUGE)), ("add", ("log", s), c(_LN2)), small)
    return ("where", ("lt", a, c(0.0)), ("neg", r), r)


def _acosh(a, c):
    t = ("sub", a, c(1.0))  # log1p(t + sqrt(t (a + 1))): no cancellation near 1; NaN below 1
    small = ("log1p", ("add", t, ("sqrt", ("mul", t, ("add", a, c(1.0))))))
    return ("where", ("gt", a, c(_HUGE)), ("add", ("log", a), c(_LN2)), small)


_COMPOSED_UNARY = {
    "atan": lambda a, c: ("atan2", a, c(1.0)),
    "tan": lambda a, c: ("div", ("sin", a), ("cos", a)),
    "sinh": lambda a, c: ("mul", c(0.5), ("sub", ("expm1", a), ("expm1", ("neg", a)))),  # no cancellation near 0
    "asinh": _asinh,
    "acosh": _acosh,
    # asin/acos through atan2 of sqrt((1 - a)(1 + a)): exact at +-1, NaN outside [-1, 1]
    "asin": lambda a, c: ("atan2", a, ("sqrt", ("mul", ("sub", c(1.0), a), ("add", c(1.0), a)))),
    "acos": lambda a, c: ("atan2", ("sqrt", ("mul", ("sub", c(1.0), a), ("add", c(1.0), a))), a),
    "atanh": lambda a, c: ("mul", c(0.5), ("log1p", ("div", ("mul", c(2.0), a), ("sub", c(1.0), a)))),
    "log2": lambda a, c: ("mul", ("log", a), c(1.0 / _LN2)),
    "log10": lambda a, c: ("mul", ("log", a), c(1.0 / math.log(10.0))),
    "exp2": lambda a, c: ("pow", c(2.0), a),
    "frac": lambda a, c: ("sub", a, ("trunc", a)),
}
for _name, _build in _COMPOSED_UNARY.items():
    register(f"{_name}.default")(_float_unary(_name, _build))


@register("erfc.default")
def _erfc(out, x):
    d = opmath(ir_dtype(out.dtype))
    if d == "f64":  # libm's erf: 1 - erf loses relative precision only where erfc < 1e-9
        return pointwise("erfc", out, [x], lambda a: ("sub", const(1.0, d), ("erf", a)))
    return pointwise("erfc", out, [x], lambda a: ("where", ("ge", a, const(0.0, d)), erfc_abs_expr(a, d),
                                                    ("sub", const(2.0, d), erfc_abs_expr(a, d))))


@register("square.default")
def _square(out, x):
    return pointwise("square", out, [x], lambda a: ("mul", a, a))


def signbit_expr(a, d):
    """The sign bit of a (of compute dtype d): -0.0 counts as negative (1 / -0.0 is -inf); a NaN's
    sign bit is not visible to the IR's operators and reads as clear."""
    if not _is_float(d):
        return ("lt", a, const(0, d))
    zero = const(0.0, d)
    return ("logical_or", ("lt", a, zero), ("logical_and", ("eq", a, zero), ("lt", ("div", const(1.0, d), a), zero)))


def _classify(name, on_floats, on_others):
    """A bool-valued test of a value: on_floats(a, d) for float inputs, on_others(a) otherwise."""
    def lower(out, x):
        d = ir_dtype(x.dtype)
        if _is_float(d):
            return pointwise(name, out, [x], lambda a: on_floats(a, opmath(d)), d)
        return pointwise(name, out, [x], on_others, "i64" if d != "bool" else "bool")

    return lower


_INF = float("inf")
register("isnan.default")(_classify("isnan", lambda a, d: ("ne", a, a), lambda a: const(False, "bool")))
register("isinf.default")(_classify("isinf", lambda a, d: ("eq", ("abs", a), const(_INF, d)),
                                    lambda a: const(False, "bool")))
register("isfinite.default")(_classify("isfinite", lambda a, d: ("lt", ("abs", a), const(_INF, d)),
                                       lambda a: const(True, "bool")))
register("signbit.default")(_classify("signbit", signbit_expr, lambda a: ("lt", a, const(0, "i64"))))


@register("logical_xor.default")
def _logical_xor(out, a, b):
    return pointwise("logical_xor", out, [a, b], lambda x, y: ("ne", x, y), "bool")


def _bitwise(name, logical):
    """Bitwise ops of bools are logical ones; integer bit operations are not in the kernel IR."""
    def lower(out, a, b):
        if ir_dtype(out.dtype) != "bool":
            raise Fallback(f"{name} of integers (no bitwise operators in the kernel IR)")
        return pointwise(name, out, [a, b], lambda x, y: (logical, x, y), "bool")

    return lower


for _name, _logical in (("bitwise_and", "logical_and"), ("bitwise_or", "logical_or"), ("bitwise_xor", "ne")):
    register(f"{_name}.Tensor", f"{_name}.Scalar")(_bitwise(_name, _logical))


@register("bitwise_not.default")
def _bitwise_not(out, x):
    d = ir_dtype(out.dtype)
    if d == "bool":
        return pointwise("bitwise_not", out, [x], lambda a: ("logical_not", a))
    return pointwise("bitwise_not", out, [x], lambda a: ("sub", const(-1, d), a))  # two's complement: ~a = -1 - a


def fmod_expr(x, y, d):
    """C's fmod (the sign of the dividend, -0.0 included) as the IR's mod (Python's: the sign of
    the divisor) of the magnitudes, where the two agree and mod is exact."""
    m = ("mod", ("abs", x), ("abs", y))
    return ("where", signbit_expr(x, d), ("neg", m), m)


def floor_div_expr(x, y, d):
    """PyTorch's floor division of floats (div_floor_floating): through fmod, so 1 // 0.1 is 9 where
    floor(1 / 0.1) is 10; division by zero gives x / 0."""
    c = lambda v: const(v, d)  # noqa: E731
    mod = fmod_expr(x, y, d)
    div = ("div", ("sub", x, mod), y)
    div = ("where", ("logical_and", ("ne", mod, c(0.0)), ("ne", ("lt", y, c(0.0)), ("lt", mod, c(0.0)))),
           ("sub", div, c(1.0)), div)
    fl = ("floor", div)
    fl = ("where", ("gt", ("sub", div, fl), c(0.5)), ("add", fl, c(1.0)), fl)
    q = ("div", x, y)
    out = ("where", ("ne", div, c(0.0)), fl, ("mul", c(0.0), q))  # a zero takes the quotient's sign
    return ("where", ("eq", y, c(0.0)), q, out)


@register("fmod.Tensor", "fmod.Scalar")
def _fmod(out, a, b):
    d = ir_dtype(out.dtype)
    return pointwise("fmod", out, [a, b], lambda x, y: fmod_expr(x, y, opmath(d)))


@register("floor_divide.Tensor", "floor_divide.Scalar")
def _floor_divide(out, a, b):
    d = ir_dtype(out.dtype)
    if _is_float(d):
        return pointwise("floor_divide", out, [a, b], lambda x, y: floor_div_expr(x, y, opmath(d)))
    return pointwise("floor_divide", out, [a, b], lambda x, y: ("floordiv", x, y))


@register("div.Tensor_mode", "div.Scalar_mode")
def _div_mode(out, a, b, rounding_mode=None):
    d = ir_dtype(out.dtype)
    if rounding_mode == "floor":
        return _floor_divide(out, a, b)
    if rounding_mode == "trunc" and _is_float(d):
        return pointwise("div", out, [a, b], lambda x, y: ("trunc", ("div", x, y)))
    return pointwise("div", out, [a, b], lambda x, y: ("div", x, y))  # true division, or integers' (truncating)


def _nan_aware(ir_op):
    """fmax/fmin: the other operand where one is NaN."""
    return lambda x, y: ("where", ("ne", x, x), y, ("where", ("ne", y, y), x, (ir_op, x, y)))


register("fmax.default")(lambda out, a, b: pointwise("fmax", out, [a, b], _nan_aware("max")))
register("fmin.default")(lambda out, a, b: pointwise("fmin", out, [a, b], _nan_aware("min")))


@register("hypot.default")
def _hypot(out, a, b):
    return pointwise("hypot", out, [a, b], lambda x, y: ("sqrt", ("add", ("mul", x, x), ("mul", y, y))))


@register("copysign.default")
def _copysign(out, a, b):
    d = ir_dtype(out.dtype)
    return pointwise("copysign", out, [a, b],
                     lambda x, y: ("where", signbit_expr(y, opmath(d)), ("neg", ("abs", x)), ("abs", x)))


# activations
@register("leaky_relu.default")
def _leaky_relu(out, x, negative_slope=0.01):
    d = ir_dtype(out.dtype)
    return pointwise("leaky_relu", out, [x],
                     lambda a: ("where", ("gt", a, const(0, d)), a, ("mul", a, const(negative_slope, opmath(d)))))


@register("hardtanh.default")
def _hardtanh(out, x, min_val=-1, max_val=1):
    d = ir_dtype(out.dtype)  # min then max: with min_val > max_val every value is max_val, as eager
    return pointwise("hardtanh", out, [x], lambda a: ("min", ("max", a, const(min_val, d)), const(max_val, d)))


@register("elu.default")
def _elu(out, x, alpha=1, scale=1, input_scale=1):
    d = opmath(ir_dtype(out.dtype))
    c = lambda v: const(v, d)  # noqa: E731
    return pointwise("elu", out, [x], lambda a: ("where", ("le", a, c(0.0)),
                                                  ("mul", ("expm1", ("mul", a, c(input_scale))), c(alpha * scale)),
                                                  ("mul", a, c(scale))))


@register("softplus.default")
def _softplus(out, x, beta=1, threshold=20):
    d = opmath(ir_dtype(out.dtype))
    c = lambda v: const(v, d)  # noqa: E731
    return pointwise("softplus", out, [x], lambda a: ("where", ("gt", ("mul", a, c(beta)), c(threshold)), a,
                                                      ("div", ("log1p", ("exp", ("mul", a, c(beta)))), c(beta))))


@register("threshold.default")
def _threshold(out, x, threshold, value):
    d = ir_dtype(out.dtype)
    return pointwise("threshold", out, [x], lambda a: ("where", ("le", a, const(threshold, d)), const(value, d), a))


def _relu6_of(a, d):
    return ("min", ("max", ("add", a, const(3.0, d)), const(0.0, d)), const(6.0, d))


@register("hardsigmoid.default")
def _hardsigmoid(out, x):
    d = opmath(ir_dtype(out.dtype))
    return pointwise("hardsigmoid", out, [x], lambda a: ("div", _relu6_of(a, d), const(6.0, d)))


@register("hardswish.default")
def _hardswish(out, x):
    d = opmath(ir_dtype(out.dtype))
    return pointwise("hardswish", out, [x], lambda a: ("div", ("mul", a, _relu6_of(a, d)), const(6.0, d)))


@register("logit.default")
def _logit(out, x, eps=None):
    d = opmath(ir_dtype(out.dtype))
    c = lambda v: const(v, d)  # noqa: E731

    def f(a):
        if eps is not None:  # clamped to [eps, 1 - eps]; NaN stays NaN
            a = ("where", ("lt", a, c(eps)), c(eps), ("where", ("gt", a, c(1.0 - eps)), c(1.0 - eps), a))
        return ("log", ("div", a, ("sub", c(1.0), a)))

    return pointwise("logit", out, [x], f)


_FLOAT_MAX = {"f32": 3.4028234663852886e38, "f64": 1.7976931348623157e308, "bf16": 3.3895313892515355e38}


@register("nan_to_num.default")
def _nan_to_num(out, x, nan=None, posinf=None, neginf=None):
    d = ir_dtype(out.dtype)
    if not _is_float(d):  # integers and bools have no NaN or infinity: a copy
        return pointwise("nan_to_num", out, [x], lambda a: a)
    big = _FLOAT_MAX[d]
    c = lambda v: const(v, opmath(d))  # noqa: E731
    nan, posinf, neginf = 0.0 if nan is None else nan, big if posinf is None else posinf, -big if neginf is None else neginf
    return pointwise("nan_to_num", out, [x], lambda a: ("where", ("ne", a, a), c(nan), (
        "where", ("eq", a, c(_INF)), c(posinf), ("where", ("eq", a, c(-_INF)), c(neginf), a))))


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
    return Pointwise(out.dtype, out.shape, lambda ctx, idx: ("const", _const(value, d), d), {"full"})


@register("scalar_tensor.default")
def _scalar_tensor(out, value, **kwargs):
    d = ir_dtype(out.dtype)
    return Pointwise(out.dtype, [], lambda ctx, idx: ("const", _const(value, d), d), {"scalar_tensor"})


def _like(fixed):
    def lower(out, x, *args, **kwargs):
        value = fixed if fixed is not None else args[0]
        d = ir_dtype(out.dtype)
        return Pointwise(out.dtype, out.shape, lambda ctx, idx: ("const", _const(value, d), d), {"full"})

    return lower


register("zeros_like.default")(_like(0))
register("ones_like.default")(_like(1))
register("full_like.default")(_like(None))


# --- views -----------------------------------------------------------------------------------------
def strided_view(x, shape, strides, offset):
    """A view of Buffer x as another strided Buffer over the same memory (no kernel, no copy: a
    fallback op receives it as a strided tensor)."""
    return Buffer(None, x.dtype, shape, strides, offset, origin=x)


def _view_layout(x, out, map_indices):
    """The strides and offset of out's view of Buffer x: the affine image of out's indices."""
    idx = [Affine.var(k) for k in range(len(out.shape))]
    src = map_indices(idx)
    total = Affine(x.offset)
    for i, s in zip(src, x.stride):
        total = total + i.scale(s)
    return [total.coeffs.get(k, 0) for k in range(len(out.shape))], total.offset


def view_of(x, out, map_indices, name):
    """A view: out indices -> x indices (affine). Of a Buffer, a strided Buffer; else lazy."""
    if isinstance(x, Buffer):
        strides, offset = _view_layout(x, out, map_indices)
        return strided_view(x, list(out.shape), strides, offset)
    ld = loader(x)
    return Pointwise(out.dtype, out.shape, lambda ctx, idx: ld(ctx, map_indices(idx)), ops_of(x))


@register("permute.default")
def _permute(out, x, dims):
    dims = [d % len(x.shape) for d in dims]

    def m(idx):
        src = [None] * len(dims)
        for o, d in enumerate(dims):
            src[d] = idx[o]
        return src

    return view_of(x, out, m, "permute")


@register("t.default")
def _t(out, x):
    return view_of(x, out, lambda idx: list(reversed(idx)), "t")


@register("transpose.int")
def _transpose(out, x, a, b):
    n = len(x.shape)
    a, b = a % n, b % n

    def m(idx):
        idx = list(idx)
        idx[a], idx[b] = idx[b], idx[a]
        return idx

    return view_of(x, out, m, "transpose")


@register("expand.default")
def _expand(out, x, size, implicit=False):
    return view_of(x, out, lambda idx: broadcast_indices(idx, x.shape, out.shape), "expand")


@register("unsqueeze.default")
def _unsqueeze(out, x, dim):
    dim = dim % len(out.shape)
    return view_of(x, out, lambda idx: idx[:dim] + idx[dim + 1:], "unsqueeze")


@register("squeeze.dim", "squeeze.dims", "squeeze.default")
def _squeeze(out, x, dims=None):
    if dims is None:
        dims = [d for d, s in enumerate(x.shape) if s == 1]
    dims = {d % len(x.shape) for d in (dims if isinstance(dims, (list, tuple)) else [dims]) if x.shape[d] == 1}

    def m(idx):
        it = iter(idx)
        return [Affine(0) if d in dims else next(it) for d in range(len(x.shape))]

    return view_of(x, out, m, "squeeze")


@register("slice.Tensor")
def _slice(out, x, dim=0, start=None, end=None, step=1):
    dim = dim % len(x.shape)
    size = x.shape[dim]
    start = 0 if start is None else (start + size if start < 0 else start)
    start = max(0, min(start, size))

    def m(idx):
        idx = list(idx)
        idx[dim] = idx[dim].scale(step) + start
        return idx

    return view_of(x, out, m, "slice")


@register("select.int")
def _select(out, x, dim, index):
    dim = dim % len(x.shape)
    index = index + x.shape[dim] if index < 0 else index
    return view_of(x, out, lambda idx: idx[:dim] + [Affine(index)] + idx[dim:], "select")


@register("view.default", "_unsafe_view.default", "reshape.default")
def _view(out, x, size):
    if list(out.shape) == list(x.shape):
        return x
    if isinstance(x, Buffer) and x.is_contiguous():
        strides = []
        running = 1
        for s in reversed(out.shape):
            strides.append(running)
            running *= s
        strides.reverse()
        return Buffer(None, out.dtype, out.shape, strides, x.offset, origin=x)  # named by GraphLowering.define
    if isinstance(x, Buffer):  # strided: a view where eager's view would be one (x[:, ::2].flatten())
        strides = view_strides(x.shape, x.stride, list(out.shape))
        if strides is not None:
            return Buffer(None, out.dtype, out.shape, strides, x.offset, origin=x)
    raise Fallback("view of a non-contiguous or unrealized value")  # graph.py realizes and retries


def view_strides(shape, stride, new_shape):
    """The strides of a view of (shape, stride) as new_shape, or None where no view exists
    (PyTorch's computeStride: each run of dimensions that is contiguous within itself may be
    split or merged)."""
    numel = 1
    for s in shape:
        numel *= s
    if numel == 0 or not shape:
        return contiguous_strides(new_shape)
    new_stride = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base_stride = stride[-1]
    tensor_numel = view_numel = 1
    for tensor_d in range(len(shape) - 1, -1, -1):
        tensor_numel *= shape[tensor_d]
        if tensor_d == 0 or (shape[tensor_d - 1] != 1 and stride[tensor_d - 1] != tensor_numel * chunk_base_stride):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_stride[view_d] = view_numel * chunk_base_stride
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = stride[tensor_d - 1]
                tensor_numel = view_numel = 1
    return new_stride if view_d == -1 else None


# --- reductions ------------------------------------------------------------------------------------
def _reduced_axes(x, dims):
    """dims (an int, a list, or None/[] for every dimension) as sorted non-negative axes."""
    n = len(x.shape)
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(n))
    return sorted({d % n for d in (dims if isinstance(dims, (list, tuple)) else [dims])}) if n else []


def _reduce(out, x, dims, keepdim, kind, name, finish=None):
    shape = list(x.shape)
    dims = _reduced_axes(x, dims)
    if not dims:  # a 0-d tensor: its one element, finished (a mean divides by 1, a variance by 1 - correction)
        return pointwise(name, out, [x], finish or (lambda a: a))
    if len(dims) > 1:
        return _reduce_axes(out, x, dims, keepdim, kind, name, finish)
    axis = dims[0]
    kept = shape[:axis] + shape[axis + 1:]
    keep_shape = shape[:axis] + [1] + shape[axis + 1:]
    # sum and prod accumulate in out's compute dtype (float32 for bfloat16: a bfloat16 partial
    # result read back would be rounded)
    ld = loader(x, opmath(ir_dtype(out.dtype)) if kind in ("sum", "prod") else None)

    def source(ctx, kept_idx, r):
        return ld(ctx, kept_idx[:axis] + [r] + kept_idx[axis:])

    red = Reduction(out.dtype, kept, shape[axis], kind, source, ops_of(x) | {name}, keep_shape, finish)
    red.axis = axis
    if keepdim:
        return red
    return Pointwise(out.dtype, out.shape, lambda ctx, idx: ctx.reduction_value(red, idx[:axis] + [Affine(0)] + idx[axis:]),
                     red.ops)


class _Like:
    """The dtype and shape of an intermediate result (what lowerings read from `out`)."""

    def __init__(self, dtype, shape):
        self.dtype, self.shape = dtype, list(shape)


def acc_dtype(dtype):
    """The dtype of intermediate results towards a `dtype` result: float32 for bfloat16 (partial
    sums, means, maxima realized as buffers keep their precision), else dtype itself."""
    return kiln.float32 if dtype == kiln.bfloat16 else dtype


def _reduce_axes(out, x, dims, keepdim, kind, name, finish):
    """A reduction over several axes as one reduction per axis, the last axis first, each keeping
    its axis (size 1) so the others keep their positions; valid for sum, prod, max and min (and
    mean, whose finish divides by the whole count at the end)."""
    shape = list(x.shape)
    value = x
    for i, axis in enumerate(reversed(dims)):
        shape[axis] = 1
        last = i == len(dims) - 1
        value = _reduce(_Like(out.dtype if last else acc_dtype(out.dtype), shape), value, [axis], True, kind, name,
                        finish if last else None)
    if keepdim:
        return value
    reduced = set(dims)

    def fn(ctx, idx):
        it = iter(idx)
        full = [Affine(0) if d in reduced else next(it) for d in range(len(shape))]
        return ctx.reduction_value(value, full)

    return Pointwise(out.dtype, out.shape, fn, value.ops)


@register("sum.dim_IntList")
def _sum(out, x, dims=None, keepdim=False, dtype=None):
    return _reduce(out, x, dims, keepdim, "sum", "sum")


@register("sum.default")
def _sum_all(out, x, dtype=None):
    return _reduce(out, x, None, False, "sum", "sum")


@register("mean.dim")
def _mean(out, x, dims=None, keepdim=False, dtype=None):
    n = len(x.shape)
    axes = [d % n for d in (dims if dims else range(n))]
    count = 1
    for a in axes:
        count *= x.shape[a]
    d = opmath(ir_dtype(out.dtype))  # a bfloat16 count above 256 would be rounded
    return _reduce(out, x, dims, keepdim, "sum", "mean", finish=lambda acc: ("div", acc, ("const", float(count), d)))


@register("amax.default")
def _amax(out, x, dims=(), keepdim=False):
    return _reduce(out, x, dims, keepdim, "max", "amax")


@register("amin.default")
def _amin(out, x, dims=(), keepdim=False):
    return _reduce(out, x, dims, keepdim, "min", "amin")


@register("prod.dim_int")
def _prod(out, x, dim, keepdim=False, dtype=None):
    return _reduce(out, x, [dim], keepdim, "prod", "prod")


@register("prod.default")
def _prod_all(out, x, dtype=None):
    return _reduce(out, x, None, False, "prod", "prod")


@register("max.default")
def _max_all(out, x):
    return _reduce(out, x, None, False, "max", "max")


@register("min.default")
def _min_all(out, x):
    return _reduce(out, x, None, False, "min", "min")


def _keep_shape(x, axes):
    return [1 if d in axes else s for d, s in enumerate(x.shape)]


def _at_reduced(idx, axes):
    """Indices into a keepdim result (size 1 along `axes`) from indices of the full shape."""
    return [Affine(0) if d in axes else i for d, i in enumerate(idx)]


def _drop_axes(out, value, axes, keepdim, name, post=None, compute=None):
    """out from `value`, a keepdim-shaped lazy result: post(expr) of it, with the reduced axes
    dropped unless keepdim."""
    ld = loader(value, compute)
    n = len(value.shape)

    def fn(ctx, idx):
        if not keepdim:
            it = iter(idx)
            idx = [Affine(0) if d in axes else next(it) for d in range(n)]
        e = ld(ctx, idx)
        return post(e) if post else e

    d = ir_dtype(out.dtype)
    cast = (lambda ctx, idx: ("cast", fn(ctx, idx), d)) if compute and compute != d else fn
    return Pointwise(out.dtype, out.shape, cast, ops_of(value) | {name})


def _count(x, dims, test, name):
    """The number of elements where test(a) (a bool expr) holds along dims: int64, keepdim."""
    axes = _reduced_axes(x, dims)
    hits = pointwise(name, _Like(kiln.bool, x.shape), [x], test, ir_dtype(x.dtype))
    return axes, _reduce(_Like(kiln.int64, _keep_shape(x, axes)), hits, axes, True, "sum", name)


def _nonzero(a):
    return ("cast", a, "bool")  # NaN counts as nonzero, as in C++


def _any_all(name):
    """any: a nonzero element; all: no zero element. Counted, so empty gives False and True."""
    test = _nonzero if name == "any" else (lambda a: ("logical_not", _nonzero(a)))

    def lower(out, x, dims=None, keepdim=False):
        axes, counts = _count(x, dims, test, name)
        return _drop_axes(out, counts, axes, keepdim, name,
                          lambda n: (("gt" if name == "any" else "eq"), n, ("const", 0, "i64")))

    return lower


register("any.default", "any.dim", "any.dims")(_any_all("any"))
register("all.default", "all.dim", "all.dims")(_any_all("all"))


@register("count_nonzero.dim_IntList", "count_nonzero.default")
def _count_nonzero(out, x, dims=None):
    axes, counts = _count(x, dims, _nonzero, "count_nonzero")
    return _drop_axes(out, counts, axes, False, "count_nonzero")


def _arg_reduce(kind):
    """argmax/argmin along one axis (the first index of the extreme, or of the first NaN); over
    every axis through a flat view of a contiguous input."""
    def lower(out, x, dim=None, keepdim=False):
        shape = list(x.shape)
        if not shape:
            return Pointwise(out.dtype, out.shape, lambda ctx, idx: ("const", 0, "i64"), {kind})
        if dim is None and len(shape) > 1:
            if not (isinstance(x, Buffer) and x.is_contiguous()):  # graph.py realizes a lazy x and retries
                raise Fallback(f"view of a non-contiguous or unrealized value ({kind} over every axis reads it flat)")
            numel = x.numel()
            x = strided_view(x, [numel], [1], x.offset)
            shape = [numel]
        axis = 0 if dim is None else dim % len(shape)
        ld = loader(x)
        red = Reduction(out.dtype, shape[:axis] + shape[axis + 1:], shape[axis], kind,
                        lambda ctx, kept, r: ld(ctx, kept[:axis] + [r] + kept[axis:]), ops_of(x) | {kind},
                        shape[:axis] + [1] + shape[axis + 1:])
        red.axis = axis
        if dim is None:  # out is 0-d, or all ones with keepdim
            return Pointwise(out.dtype, out.shape, lambda ctx, idx: ctx.reduction_value(red, [Affine(0)]), red.ops)
        return red if keepdim else _drop_axes(out, red, [axis], False, kind)

    return lower


register("argmax.default")(_arg_reduce("argmax"))
register("argmin.default")(_arg_reduce("argmin"))


@register("logsumexp.default")
def _logsumexp(out, x, dims, keepdim=False):
    """max + log(sum(exp(x - max))), the max taken as 0 where it is infinite (as eager does)."""
    axes = _reduced_axes(x, dims)
    d, acc = ir_dtype(out.dtype), acc_dtype(out.dtype)
    c = opmath(d)
    keep = _keep_shape(x, axes)
    mx = _reduce(_Like(acc, keep), x, axes, True, "max", "amax")
    read_mx, ld = loader(mx, c), loader(x, c)

    def shift(ctx, idx):
        m = read_mx(ctx, idx)
        return ("where", ("eq", ("abs", m), ("const", _INF, c)), ("const", 0.0, c), m)

    exps = Pointwise(acc, x.shape, lambda ctx, idx: ("exp", ("sub", ld(ctx, idx), shift(ctx, _at_reduced(idx, axes)))),
                     ops_of(x) | {"exp"})
    total = _reduce(_Like(acc, keep), exps, axes, True, "sum", "sum")
    read_total = loader(total, c)
    result = Pointwise(acc, keep, lambda ctx, idx: ("add", ("log", read_total(ctx, idx)), shift(ctx, idx)),
                       ops_of(total, mx) | {"log", "logsumexp"})
    return _drop_axes(out, result, axes, keepdim, "logsumexp")


@register("linalg_vector_norm.default")
def _vector_norm(out, x, ord=2, dims=None, keepdim=False, dtype=None):
    """sum(|x|^p)^(1/p) over dims: p = 1, 2 without pow, +-inf as amax/amin of |x|, 0 counting."""
    axes = _reduced_axes(x, dims)
    d, acc = ir_dtype(out.dtype), acc_dtype(out.dtype)
    c = opmath(d)
    p = float(ord)
    if p == _INF or p == -_INF:
        kind, elem, post = "max" if p > 0 else "min", lambda a: ("abs", a), None
    elif p == 0:
        kind, elem, post = "sum", lambda a: ("cast", ("ne", a, ("const", 0.0, c)), c), None
    elif p == 1:
        kind, elem, post = "sum", lambda a: ("abs", a), None
    elif p == 2:
        kind, elem, post = "sum", lambda a: ("mul", a, a), lambda s: ("sqrt", s)
    else:
        kind, elem = "sum", lambda a: ("pow", ("abs", a), ("const", p, c))
        post = lambda s: ("pow", s, ("const", 1.0 / p, c))  # noqa: E731
    terms = pointwise("linalg_vector_norm", _Like(acc, x.shape), [x], elem, c)
    total = _reduce(_Like(acc, _keep_shape(x, axes)), terms, axes, True, kind, "linalg_vector_norm")
    return _drop_axes(out, total, axes, keepdim, "linalg_vector_norm", post, c)


def _var_lowering(take_sqrt):
    """sum((x - mean)^2) / max(0, N - correction) over dims, two passes (the mean first)."""
    def lower(out, x, dims=None, correction=None, keepdim=False):
        axes = _reduced_axes(x, dims)
        d, acc = ir_dtype(out.dtype), acc_dtype(out.dtype)
        c = opmath(d)
        count = 1
        for a in axes:
            count *= x.shape[a]
        divisor = max(0.0, count - (1.0 if correction is None else float(correction)))
        keep = _keep_shape(x, axes)
        mean = _reduce(_Like(acc, keep), x, axes, True, "sum", "mean",
                       finish=lambda s: ("div", s, ("const", float(count), c)))
        read_mean, ld = loader(mean, c), loader(x, c)

        def sq_dev(ctx, idx):
            dev = ("sub", ld(ctx, idx), read_mean(ctx, _at_reduced(idx, axes)))
            return ("mul", dev, dev)

        dev2 = Pointwise(acc, x.shape, sq_dev, ops_of(x) | {"sub", "mul"})
        name = "std" if take_sqrt else "var"
        total = _reduce(_Like(acc, keep), dev2, axes, True, "sum", name,
                        finish=lambda s: ("div", s, ("const", divisor, c)))
        return _drop_axes(out, total, axes, keepdim, name, (lambda v: ("sqrt", v)) if take_sqrt else None, c)

    return lower


register("var.correction")(_var_lowering(False))
register("std.correction")(_var_lowering(True))


def _softmax_lowering(is_log):
    return lambda out, x, dim, half_to_float=False: _softmax(out, x, dim, is_log)


def _softmax(out, x, dim, is_log):
    """exp(x - max) / sum(exp(x - max)) along dim (log: x - max - log(sum)); along the last dim
    the max, the sum and the result are one kernel."""
    n = len(x.shape)
    d = ir_dtype(out.dtype)
    if n == 0:  # one element: 1 (log: 0), NaN for a NaN or an infinity as exp(x - x) gives
        return pointwise("log_softmax" if is_log else "softmax", out, [x],
                         lambda a: ("sub", a, a) if is_log else ("exp", ("sub", a, a)))
    dim = dim % n
    shape = list(x.shape)
    keep = shape[:dim] + [1] + shape[dim + 1:]
    mx = _reduce(_Like(out.dtype, keep), x, [dim], True, "max", "amax")
    ld = loader(x, d)

    def shifted(ctx, idx):
        return ("sub", ld(ctx, idx), ctx.reduction_value(mx, idx[:dim] + [Affine(0)] + idx[dim + 1:]))

    exp_sum = Reduction(acc_dtype(out.dtype), shape[:dim] + shape[dim + 1:], shape[dim], "sum",
                        lambda ctx, kept, r: ("exp", shifted(ctx, kept[:dim] + [r] + kept[dim:])), {"exp", "sum"}, keep)
    exp_sum.axis = dim

    def fn(ctx, idx):
        s = ctx.reduction_value(exp_sum, idx[:dim] + [Affine(0)] + idx[dim + 1:])
        if is_log:
            return ("sub", shifted(ctx, idx), ("log", s))
        return ("div", ("exp", shifted(ctx, idx)), s)

    return Pointwise(out.dtype, shape, fn, ops_of(x) | {"amax", "exp", "sum", "log_softmax" if is_log else "softmax"})


register("_softmax.default")(_softmax_lowering(False))
register("_log_softmax.default")(_softmax_lowering(True))


def lower(target, out, args, kwargs):
    fn = LOWERINGS.get(target)
    if fn is None:
        raise Fallback(f"no lowering for {target}")
    return fn(out, *args, **kwargs)

