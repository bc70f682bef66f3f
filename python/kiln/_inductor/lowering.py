"""Lowerings: aten ops of AOTAutograd's graphs as Pointwise/Reduction values (ir.py).

Each lowering receives the values of the node's arguments (Buffers, lazy values, Python scalars)
and the node's fake output (its dtype and shape), and returns a lazy value. Pointwise ops compose
their inputs' index functions; views remap indices; reductions reduce one axis at a time. An op
without a lowering, or a case a lowering does not cover (it raises Fallback), runs its eager
kernel from the wrapper (graph.py), named in the debug log.
"""

import math

import kiln
from kiln._inductor.ir import V, Affine, Buffer, Pointwise, Reduction, contiguous_strides, ir_dtype

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

    result = Pointwise(out.dtype, shape, fn, ops_of(*inputs) | {name})
    result.space = epilogue_space(inputs, shape)
    return result


def epilogue_space(inputs, shape):
    """The reduction loop a pointwise op joins as an epilogue: that of an input computed over a
    reduction's loop (a matmul template, a variance) when the op keeps its shape (so bias + GELU
    after a generated matmul is the same kernel); None when inputs disagree."""
    spaces = {tuple(map(repr, v.space)): v.space for v in inputs
              if isinstance(v, Pointwise) and v.space is not None and list(v.shape) == list(shape)}
    return next(iter(spaces.values())) if len(spaces) == 1 else None


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
    if isinstance(x, Buffer):
        strides = view_strides(x.shape, x.stride, list(out.shape))
        if strides is not None:
            return Buffer(None, out.dtype, out.shape, strides, x.offset, origin=x)  # named by GraphLowering.define
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
        merged = merge_reduced_dims(x, dims)
        if merged is not None:  # adjacent reduced axes of a buffer read as one (longer inner loops)
            xm, mdims, to_merged = merged
            keep = [1 if d in mdims else s for d, s in enumerate(xm.shape)]
            red = _reduce(_Like(out.dtype, keep), xm, mdims, True, kind, name, finish)
            return _read_merged(out, red, dims, keepdim, len(shape), to_merged)
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
    value = Pointwise(out.dtype, out.shape,
                      lambda ctx, idx: ctx.reduction_value(red, idx[:axis] + [Affine(0)] + idx[axis:]), red.ops)
    value.squeeze_of = red
    return value


def merge_reduced_dims(x, dims):
    """x (a Buffer) seen with each run of adjacent reduced axes merged into one axis, when its
    strides allow (NCHW's H and W for batch norm): (view, its reduced axes, a map from indices of
    the keepdim result to indices of the merged keepdim result); None when nothing merges."""
    if isinstance(x, Buffer):
        shape, stride = list(x.shape), list(x.stride)
        mergeable = lambda d: stride[d - 1] == stride[d] * shape[d]  # noqa: E731
    elif isinstance(x, Pointwise):
        shape = list(x.shape)
        coeffs = _load_coefficients(x)
        if coeffs is None:
            return None
        # every load walks axes d-1 and d as one axis: its stride for d-1 is shape[d] times d's
        mergeable = lambda d: all(c.get(d - 1, 0) == c.get(d, 0) * shape[d] for c in coeffs)  # noqa: E731
    else:
        return None
    groups = []  # runs of axes: [axes], reduced?
    for d in range(len(shape)):
        if groups and d in dims and groups[-1][1] and mergeable(d):
            groups[-1][0].append(d)
        else:
            groups.append(([d], d in dims))
    if len(groups) == len(shape):
        return None
    m_shape, m_stride, m_dims = [], [], []
    for axes, reduced in groups:
        n = 1
        for a in axes:
            n *= shape[a]
        if reduced:
            m_dims.append(len(m_shape))
        m_shape.append(n)
        m_stride.append(stride[axes[-1]] if isinstance(x, Buffer) else None)
    if isinstance(x, Buffer):
        view = Buffer(None, x.dtype, m_shape, m_stride, x.offset, origin=x)
    else:
        def fn(ctx, idx):  # a merged axis' index walks its group's last axis (the others at 0)
            full = [None] * len(shape)
            for (axes, _), i in zip(groups, idx):
                for a in axes:
                    full[a] = Affine(0)
                full[axes[-1]] = i
            return x.fn(ctx, full)

        view = Pointwise(x.dtype, m_shape, fn, x.ops)

    def to_merged(idx):  # idx: per original axis (reduced ones are 0 in a keepdim result)
        return [Affine(0) if reduced else idx[axes[0]] for axes, reduced in groups]

    return view, m_dims, to_merged


class _LoadProbe:
    """A stand-in KernelBuilder recording the affine index of every load of an expression."""

    def __init__(self):
        self.coeffs, self.reads_reduction = [], False

    def load(self, buf, idx):
        _, _, affine = buf.load(idx)
        self.coeffs.append(affine.coeffs)
        return ("load", None, None)

    def reduction_value(self, red, idx):
        self.reads_reduction = True
        return ("acc", 0)


def _load_coefficients(value):
    """Per load of a lazy value: its index's coefficient for each of the value's axes; None when
    it reads a reduction (whose index is not a memory layout)."""
    probe = _LoadProbe()
    expr = value.fn(probe, [Affine.var(k) for k in range(len(value.shape))])
    if probe.reads_reduction or _uses_loop_index(expr):  # the loop index itself is no memory layout
        return None
    return probe.coeffs


def _uses_loop_index(expr):
    if not isinstance(expr, tuple):
        return False
    if expr[0] == "index":
        return True
    if expr[0] in ("load", "const", "acc"):
        return False
    return any(_uses_loop_index(e) for e in expr[1:])


def _read_merged(out, red, dims, keepdim, ndim, to_merged):
    """The result of a reduction over merged axes, seen in the original (keepdim or not) shape."""
    reduced = set(dims)

    def fn(ctx, idx):
        if keepdim:
            full = list(idx)
        else:
            it = iter(idx)
            full = [Affine(0) if d in reduced else next(it) for d in range(ndim)]
        return ctx.reduction_value(red, to_merged(full)) if isinstance(red, Reduction) else \
            red.fn(ctx, to_merged(full))

    value = Pointwise(out.dtype, out.shape, fn, red.ops)
    value.squeeze_of = red
    return value


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

    result = Pointwise(out.dtype, out.shape, fn, value.ops)
    result.squeeze_of = value
    return result


@register("sum.dim_IntList")
def _sum(out, x, dims=None, keepdim=False, dtype=None):
    return _reduce(out, x, dims, keepdim, "sum", "sum")


@register("sum.default")
def _sum_all(out, x, dtype=None):
    return _reduce(out, x, None, False, "sum", "sum")


@register("mean.dim")
def _mean(out, x, dims=None, keepdim=False, dtype=None):
    n = len(x.shape)
    axes = _reduced_axes(x, dims)
    count = 1
    for a in axes:
        count *= x.shape[a]
    d = opmath(ir_dtype(out.dtype))  # a bfloat16 count above 256 would be rounded
    known = V.graph.statistics.get((id(x), tuple(sorted(set(axes))))) if V.graph is not None else None
    if known is not None and known[0].dtype == out.dtype:  # computed with a variance already
        mean_keep, to_merged, merged = known
        return _from_keepdim(out, mean_keep, sorted(set(axes)), keepdim, n, to_merged, merged)
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


def _stats_dtype(dtype):
    """Partial statistics (means, squared deviations) keep float64 for float64, else float32."""
    return kiln.float64 if dtype == kiln.float64 else kiln.float32


@register("std.correction")
def _std(out, x, dims=None, correction=None, keepdim=False):
    var = _var(_Like(_stats_dtype(out.dtype), out.shape), x, dims, correction, keepdim)
    d = ir_dtype(out.dtype)
    return Pointwise(out.dtype, out.shape, lambda ctx, idx: _cast(("sqrt", var.fn(ctx, idx)), ir_dtype(var.dtype), d),
                     var.ops | {"std"})


@register("var.correction")
def _var(out, x, dims=None, correction=None, keepdim=False):
    """Variance from Welford's partial statistics: along the innermost reduced axis, each row's
    mean and sum of squared deviations from it (two passes over the row in one kernel: stable
    where the sum of squares minus the squared sum is not, and both loops vectorise); along each
    further axis the partial (mean, m2) pairs combine as in Chan's parallel form of Welford's
    update: mean = the mean of the means, m2 = the sum of the m2s + count * the sum of the
    squared deviations of the means."""
    n = len(x.shape)
    if n == 0:  # one element: no deviation, divided by max(0, 1 - correction) (0 / 0: NaN, as eager)
        correction = 1 if correction is None else correction
        zero = ("const", 0.0, ir_dtype(out.dtype))
        return pointwise("var", out, [x], lambda a: ("div", ("mul", a, zero),
                                                     ("const", float(max(1 - correction, 0)), ir_dtype(out.dtype))))
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        dims = list(range(n))
    dims = sorted({d % n for d in (dims if isinstance(dims, (list, tuple)) else [dims])})
    count = 1
    for d in dims:
        count *= x.shape[d]
    correction = 1 if correction is None else correction
    sd = _stats_dtype(out.dtype)
    to_merged = lambda idx: idx  # noqa: E731
    src, src_dims = x, dims
    merged = merge_reduced_dims(x, dims)
    if merged is not None:
        src, src_dims, to_merged = merged
    keep = list(src.shape)
    axes = list(reversed(src_dims))  # the innermost first
    mean, m2 = _row_mean_m2(src, axes[0], sd)
    partial = keep[axes[0]]
    keep[axes[0]] = 1
    for axis in axes[1:]:
        mean, m2 = _chan_combine(mean, m2, list(keep), axis, partial, sd)
        partial *= keep[axis]
        keep[axis] = 1
    denom = ("const", float(max(count - correction, 0)), ir_dtype(sd))
    od = ir_dtype(out.dtype)

    def var_fn(ctx, idx):  # idx: of the (merged) keepdim shape
        value = ("div", _value_at(ctx, m2, idx), denom)
        return value if od == ir_dtype(sd) else ("cast", value, od)

    var = Pointwise(out.dtype, keep, var_fn, ops_of(x) | {"var"})
    var.space = m2.space if isinstance(m2, Pointwise) else (m2.kept, m2.extent, m2.axis)
    # The mean comes with the variance: batch norm's decomposition asks for var and then mean of
    # the same input over the same axes, and gets this one (one kernel stores both).
    mean_keep = Pointwise(out.dtype, keep, lambda ctx, idx: _cast(_value_at(ctx, mean, idx), ir_dtype(sd), od),
                          ops_of(x) | {"mean"})
    mean_keep.space = var.space
    var.group = mean_keep.group = [var, mean_keep]
    if V.graph is not None:
        V.graph.statistics[(id(x), tuple(dims))] = (mean_keep, to_merged, merged is not None)
    return _from_keepdim(out, var, dims, keepdim, n, to_merged, merged is not None)


def _cast(expr, src, dst):
    return expr if src == dst else ("cast", expr, dst)


def _from_keepdim(out, value, dims, keepdim, n, to_merged, merged):
    """A statistic computed in the (merged) keepdim shape, seen as the op's result."""
    if keepdim and not merged:
        return value
    reduced = set(dims)

    def fn(ctx, idx):
        if not keepdim:
            it = iter(idx)
            idx = [Affine(0) if d in reduced else next(it) for d in range(n)]
        return value.fn(ctx, to_merged(list(idx)))

    result = Pointwise(out.dtype, out.shape, fn, value.ops)
    result.squeeze_of = value
    return result


def _value_at(ctx, value, idx):
    return ctx.reduction_value(value, idx) if isinstance(value, Reduction) else value.fn(ctx, idx)


def _row_mean_m2(x, axis, sd):
    """Lazy (mean, m2) along one axis of x: Reductions of the same loop, so one kernel."""
    dt = ir_dtype(sd)
    shape = list(x.shape)
    kept = shape[:axis] + shape[axis + 1:]
    keep_shape = shape[:axis] + [1] + shape[axis + 1:]
    ld = loader(x, dt)
    extent = shape[axis]

    def at(kept_idx, r):
        return kept_idx[:axis] + [r] + kept_idx[axis:]

    mean = Reduction(sd, kept, extent, "sum", lambda ctx, k, r: ld(ctx, at(k, r)), ops_of(x) | {"var_mean"},
                     keep_shape, finish=lambda acc: ("div", acc, ("const", float(extent), dt)))
    mean.axis = axis

    def deviation(ctx, k, r):
        d = ("sub", ld(ctx, at(k, r)), ctx.reduction_value(mean, at(k, Affine(0))))
        return ("mul", d, d)

    m2 = Reduction(sd, kept, extent, "sum", deviation, {"var_mean"}, keep_shape)
    m2.axis = axis
    return mean, m2


def _chan_combine(mean, m2, shape, axis, partial, sd):
    """Partial statistics (mean and m2 over `partial` elements each, keepdim shape `shape`)
    realized by one kernel, then combined along `axis` as lazy (mean, m2)."""
    mean_buf, m2_buf = V.graph.realize_reductions([mean, m2], mean.kept, mean.extent, mean.axis)
    dt = ir_dtype(sd)
    k = shape[axis]
    kept = shape[:axis] + shape[axis + 1:]
    keep_shape = shape[:axis] + [1] + shape[axis + 1:]

    def at(kept_idx, r):
        return kept_idx[:axis] + [r] + kept_idx[axis:]

    new_mean = Reduction(sd, kept, k, "sum", lambda ctx, ki, r: ctx.load(mean_buf, at(ki, r)), {"var_mean"},
                         keep_shape, finish=lambda acc: ("div", acc, ("const", float(k), dt)))
    new_mean.axis = axis

    def spread(ctx, ki, r):
        d = ("sub", ctx.load(mean_buf, at(ki, r)), ctx.reduction_value(new_mean, at(ki, Affine(0))))
        return ("mul", d, d)

    dev = Reduction(sd, kept, k, "sum", spread, {"var_mean"}, keep_shape)
    dev.axis = axis
    m2_sum = Reduction(sd, kept, k, "sum", lambda ctx, ki, r: ctx.load(m2_buf, at(ki, r)), {"var_mean"}, keep_shape)
    m2_sum.axis = axis
    combined = Pointwise(sd, keep_shape, lambda ctx, idx: ("add", ctx.reduction_value(m2_sum, idx), (
        "mul", ("const", float(partial), dt), ctx.reduction_value(dev, idx))), {"var_mean"})
    combined.space = (kept, k, axis)
    return new_mean, combined


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


# --- templates (max-autotune's generated alternatives) -------------------------------------------
def mm_template(out, a, b, bias=None, beta=1, alpha=1):
    """A matmul (addmm with a bias) as a generated kernel: out[i, j] = sum_k a[i, k] * b[k, j],
    computed over [M, N] x K (the inner loop walks k: vectorised when a's rows and b's columns are
    contiguous, as x @ w.t() has them); the bias, and any pointwise op after it, are its
    epilogue in the same kernel."""
    d = ir_dtype(out.dtype)
    if d not in ("f32", "f64"):
        raise Fallback(f"matmul template for {out.dtype}")
    (M, K), N = a.shape, b.shape[1]
    la, lb = loader(a, d), loader(b, d)
    red = Reduction(out.dtype, [M, N], K, "sum", lambda ctx, k, r: ("mul", la(ctx, [k[0], r]), lb(ctx, [r, k[1]])),
                    ops_of(a, b) | {"mm"}, [M, N, 1])
    red.axis = 2
    lbias = loader(bias, d) if bias is not None else None
    bias_shape = shape_of(bias) if bias is not None else []

    def fn(ctx, idx):
        value = ctx.reduction_value(red, list(idx) + [Affine(0)])
        if alpha != 1:
            value = ("mul", value, ("const", float(alpha), d))
        if lbias is not None:
            term = lbias(ctx, broadcast_indices(idx, bias_shape, [M, N]))
            value = ("add", value, term if beta == 1 else ("mul", term, ("const", float(beta), d)))
        return value

    result = Pointwise(out.dtype, [M, N], fn, red.ops | ({"addmm"} if bias is not None else set()))
    result.space = ([M, N], K, 2)
    return result


# --- pooling ---------------------------------------------------------------------------------------
def _pool_params(x, kernel_size, stride, padding, dilation):
    pair = lambda v: list(v) * 2 if isinstance(v, (list, tuple)) and len(v) == 1 else (  # noqa: E731
        list(v) if isinstance(v, (list, tuple)) else [v, v])
    k = pair(kernel_size)
    s = pair(stride) if stride not in (None, [], ()) else list(k)
    return k, s, pair(padding), pair(dilation)


def index_expr(affine):
    """The value of an affine index as an i64 expression of the loop indices."""
    expr = ("const", affine.offset, "i64")
    for var, coeff in sorted(affine.coeffs.items()):
        if coeff:
            expr = ("add", expr, ("mul", ("index", var), ("const", coeff, "i64")))
    return expr


@register("max_pool2d_with_indices.default")
def _max_pool2d_with_indices(outs, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """Each output element is the maximum of its window, unrolled (the window is small), and the
    flat index (h * W + w) of the first maximum; NaN wins, as in PyTorch's kernel (a later NaN
    replaces an earlier one). Padded windows (which would read outside the input) fall back."""
    k, s, p, d = _pool_params(x, kernel_size, stride, padding, dilation)
    if any(p) or d != [1, 1]:
        raise Fallback("max_pool2d with padding or dilation")
    values_out, indices_out = outs
    if isinstance(x, Pointwise) and x.ops and not V.graph.cheap_to_recompute(x):
        x = V.graph.realize(x)  # read k*k times per output: computed once, not in every window
    H, W = x.shape[-2], x.shape[-1]
    vd = ir_dtype(values_out.dtype)
    ld = loader(x, vd)
    lead = len(x.shape) - 2

    def window(ctx, idx):
        oh, ow = idx[lead], idx[lead + 1]
        best = flat = None
        for i in range(k[0]):
            for j in range(k[1]):
                h, w = oh.scale(s[0]) + i, ow.scale(s[1]) + j
                v = ld(ctx, idx[:lead] + [h, w])
                at = index_expr(h.scale(W) + w)
                if best is None:
                    best, flat = v, at
                else:
                    take = ("logical_or", ("gt", v, best), ("ne", v, v))
                    best, flat = ("where", take, v, best), ("where", take, at, flat)
        return best, flat

    values = Pointwise(values_out.dtype, values_out.shape, lambda ctx, idx: window(ctx, idx)[0],
                       ops_of(x) | {"max_pool2d_with_indices"})
    indices = Pointwise(indices_out.dtype, indices_out.shape, lambda ctx, idx: window(ctx, idx)[1],
                        ops_of(x) | {"max_pool2d_with_indices"})
    values.group = indices.group = [values, indices]
    return values, indices


@register("max_pool2d_with_indices_backward.default")
def _max_pool2d_with_indices_backward(out, grad, x, kernel_size, stride, padding, dilation, ceil_mode, indices):
    """For windows that tile the input exactly (stride = kernel, no padding): every input element
    lies in one window, so the gradient is computed over [N, C, OH, kh, OW, kw] (element
    (oh, i, ow, j) is input row oh * kh + i, column ow * kw + j): the window's gradient where
    its index names this element, else 0. That buffer, contiguous, is the [N, C, H, W] result."""
    k, s, p, d = _pool_params(x, kernel_size, stride, padding, dilation)
    H, W = x.shape[-2], x.shape[-1]
    OH, OW = grad.shape[-2], grad.shape[-1]
    if s != k or any(p) or d != [1, 1] or OH * k[0] != H or OW * k[1] != W:
        raise Fallback("max_pool2d backward with overlapping, padded or partial windows")
    lead = len(x.shape) - 2
    gd = ir_dtype(out.dtype)
    lg, li = loader(grad, gd), loader(indices, "i64")
    tiled = list(x.shape[:lead]) + [OH, k[0], OW, k[1]]

    def fn(ctx, idx):
        oh, i, ow, j = idx[lead:]
        window = idx[:lead] + [oh, ow]
        here = index_expr((oh.scale(k[0]) + i).scale(W) + ow.scale(k[1]) + j)
        return ("where", ("eq", li(ctx, window), here), lg(ctx, window), ("const", 0.0, gd))

    buf = V.graph.realize(Pointwise(out.dtype, tiled, fn, ops_of(grad) | {"max_pool2d_with_indices_backward"}))
    return Buffer(None, out.dtype, list(out.shape), contiguous_strides(list(out.shape)), buf.offset, origin=buf)


def lower(target, out, args, kwargs):
    fn = LOWERINGS.get(target)
    if fn is None:
        raise Fallback(f"no lowering for {target}")
    return fn(out, *args, **kwargs)

