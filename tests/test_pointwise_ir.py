"""What the registry tells the compiler (issue 20): each op's tags and cost class (Note [Op cost
classes] in tensor/dispatcher.h), and the pointwise families' element functions as kernel IR,
from which Inductor lowers them (Note [Pointwise ops as kernel IR] in tensor/ops/pointwise_ir.h):
compiled gives eager's bits, op by op, dtype by dtype."""

import numpy as np
import pytest

import kiln
from conftest import torch
from kiln import _C
from kiln._inductor import autotune, compile_fx
from kiln._inductor.lowering import has_lowering

aten = kiln.ops.aten
POINTWISE_OPS = [full.split("::")[1] for full in _C._inductor.pointwise_ops()]


def _overload(name):
    return kiln._ops.overload_named("aten::" + name)


def test_tags_and_cost_classes_come_from_the_registry():
    assert kiln.Tag.compute_intensive in aten.mm.default.tags
    assert aten.mm.default.cost_class == "compute_intensive"
    assert aten.convolution.default.cost_class == "compute_intensive"
    assert aten.add.Tensor.cost_class == "memory_bound"
    assert aten.cat.default.cost_class == "memory_bound"
    assert aten.view.default.cost_class == "free"
    assert aten.sort.default.cost_class == "opaque"
    assert aten.where.default.cost_class == "opaque"  # where(cond) is nonzero
    # Note [Outer reduction kernels]: which eager reductions come down whole rows, per result dtype
    assert aten.sum.dim_IntList.has_outer_reduction_kernel(kiln.int64)
    assert aten.mean.dim.has_outer_reduction_kernel(kiln.bfloat16)
    assert aten.amax.default.has_outer_reduction_kernel(kiln.float32)
    assert not aten.amax.default.has_outer_reduction_kernel(kiln.int64)
    assert not aten.prod.dim_int.has_outer_reduction_kernel(kiln.float32)
    assert not aten.add.Tensor.has_outer_reduction_kernel(kiln.float32)
    # max-autotune times the compute-intensive ops some template expresses, no other
    assert autotune.tunable(aten.mm.default) and autotune.tunable(aten.convolution.default)
    assert not autotune.tunable(aten.bmm.default) and not autotune.tunable(aten.add.Tensor)


def test_every_op_with_an_element_function_has_a_lowering():
    assert {"exp", "asin", "lgamma", "relu", "isinf", "bitwise_not", "elu", "hardtanh", "logit"} <= set(POINTWISE_OPS)
    assert set(_PARAMS) == {name for name in POINTWISE_OPS if _C._inductor.pointwise_num_params("aten::" + name)}
    for name in POINTWISE_OPS:
        assert has_lowering(_overload(name)), name
    assert "digamma" not in POINTWISE_OPS  # no IR operator: eager's kernel


def _values(dtype):
    rng = np.random.default_rng(0)
    v = np.concatenate([rng.standard_normal(300) * 3, [0.0, -0.0, np.inf, -np.inf, np.nan, 0.5, -1.0, 1.0, 1e-30,
                                                        1e30, -0.99, 0.99]])
    if dtype.is_floating_point:
        return kiln.tensor(v).to(dtype)
    return kiln.tensor(np.nan_to_num(v, posinf=5, neginf=-5).round()).to(dtype)


# Kahan's formulas: Inductor's log1p and expm1 are inline arithmetic over libm's log and exp
# (codegen/llvm_expr.cc), where eager's loops call libm's log1p and expm1 (up to 4 ulp apart), and
# mish, elu and softplus follow their log1p or expm1. Everything else is eager's own bits: libm's
# log, sin, cos, pow and float64 exp in every iteration (no vector library: Note [One value, one
# set of bits] in codegen/llvm_emit.cc), Note [One float math] for float32 exp, sigmoid, silu, erf
# and tanh.
VECTOR_MATH_ULPS = 4
_VECTOR_MATH = {"log1p", "expm1", "mish", "elu", "softplus"}
_VECTOR_MATH_FLOAT64 = set()


def _ulps(got, expected):
    """The largest distance in units in the last place between got and expected (NaNs of either
    sign equal; bools and integers exact)."""
    if got.dtype == kiln.bfloat16:
        got, expected = got.float(), expected.float()
    a, b = got.numpy(), expected.numpy()
    if not np.issubdtype(a.dtype, np.floating):
        return 0 if np.array_equal(a, b) else float("inf")
    both_nan = np.isnan(a) & np.isnan(b)
    ints = np.int64 if a.dtype == np.float64 else np.int32
    # ordered integers: a float's bits, negatives mirrored, so adjacent floats differ by one
    ia, ib = (np.where(v.view(ints) < 0, np.iinfo(ints).min - v.view(ints), v.view(ints)).astype(np.int64)
              for v in (a, b))
    distance = np.where(both_nan, 0, np.abs(ia - ib))
    return int(distance.max()) if distance.size else 0


# An activation's number arguments, positional and by name (Tensor.* keywords), beside its defaults:
# each set is a kernel of its own, the numbers its constants (folded as eager folds them).
_PARAMS = {
    "leaky_relu": [(0.2,), (-1.5,), {"negative_slope": 3}],
    "hardtanh": [(-0.5, 2.5), (3, 1), {"max_val": 0.25}],  # min above max: every value is max, as eager
    "elu": [(1.3, 0.7, 2.1), {"scale": 2.0}, {"alpha": 0.1, "input_scale": 3}],
    "softplus": [(2.0, 1.5), (0.5, 20), {"threshold": 0.0}],
    "threshold": [(0.5, -2.0), (-1, 7), {"threshold": 1.5, "value": 0.25}],
    "logit": [(0.1,), (None,), {"eps": 0.4}],
}


def _calls(name, x):
    """(where, fn, args) for the op's schema: unary; an activation with its number arguments; binary
    with a tensor, a broadcast row, a number; add and sub with alpha."""
    op = _overload(name)
    schema = str(op._schema)
    if _C._inductor.pointwise_num_params("aten::" + name):
        calls = [("defaults", op, (x,))] if name != "threshold" else []  # threshold's have none
        for params in _PARAMS[name.partition(".")[0]]:
            if isinstance(params, dict):
                calls.append((f"params {params}", lambda a, p=params: op(a, **p), (x,)))
            else:
                calls.append((f"params {params}", lambda a, p=params: op(a, *p), (x,)))
        return calls
    if "(Tensor self) ->" in schema:
        return [("", op, (x,))]
    y = x.flip(0)
    if "Scalar other" in schema or "Scalar exponent" in schema:
        number = 2 if not x.dtype.is_floating_point else 1.5
        return [("number", op, (x, number))]
    calls = [("tensor", op, (x, y)), ("row", op, (x.view(-1, 2), y[:2]))]
    if "alpha" in schema:
        calls.append(("alpha", lambda a, b: op(a, b, alpha=2), (x, y)))
    return calls


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "int64", "int32", "bool"])
@pytest.mark.parametrize("name", POINTWISE_OPS)
def test_compiled_gives_eagers_bits(name, dtype):
    dtype = getattr(kiln, dtype)
    x = _values(dtype)
    for what, op, args in _calls(name, x):
        def fn(*a):  # a Python frame for Dynamo (a builtin called directly is not traced)
            return op(*a)

        for where, operands in (("contiguous", args),
                                ("strided", tuple(kiln.stack([a, a], -1)[..., 0] if isinstance(a, kiln.Tensor) else a
                                                  for a in args))):
            try:
                expected = fn(*operands)
            except (RuntimeError, NotImplementedError):
                with pytest.raises((RuntimeError, NotImplementedError)):
                    kiln.compile(fn, backend="inductor")(*operands)
                continue
            graphs = []
            compile_fx.graph_sinks.append(graphs)
            try:
                kiln._dynamo.reset()
                got = kiln.compile(fn, backend="inductor")(*operands)
            finally:
                compile_fx.graph_sinks.remove(graphs)
            assert got.dtype == expected.dtype
            base = name.partition(".")[0]
            vector_math = base in _VECTOR_MATH or (base in _VECTOR_MATH_FLOAT64 and dtype == kiln.float64)
            allowed = VECTOR_MATH_ULPS if vector_math and got.dtype in (kiln.float32, kiln.float64) else 0
            assert _ulps(got, expected) <= allowed, f"{name} {dtype} {what} {where}"
            # integers divided by a tensor that may hold 0 run eager's kernel, which raises; integer
            # pow by a tensor, eager's repeated squaring (Note [Integer pow])
            declined = [f for g in graphs for f in g.fallbacks
                        if "ZeroDivisionError" not in f[1] and "Note [Integer pow]" not in f[1]]
            assert graphs and not declined, f"{name} {dtype} {what}: {declined}"


def test_schemas_are_typed_as_torchs():
    """The compiler asks a schema whether a result aliases an argument (Tensor(a), Tensor(a!)), not
    its text; the arguments and returns carry torch._C.Argument's names and alias_info."""
    split = aten.split_with_sizes.default._schema.returns[0]
    assert split.alias_info.before_set == {"a"} and not split.alias_info.is_write
    assert aten.add_.Tensor._schema.returns[0].alias_info.is_write
    assert aten.mul.Tensor._schema.returns[0].alias_info is None
    assert [a.name for a in aten.add.Tensor._schema.arguments] == ["self", "other", "alpha"]
    assert [a.kwarg_only for a in aten.add.Tensor._schema.arguments] == [False, False, True]


@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("name", ["add.Tensor", "transpose.int", "split.Tensor", "index_put_.default",
                                  "native_layer_norm.default", "addmm.default"])
def test_schema_arguments_match_torchs(name):
    ours, theirs = _overload(name)._schema, getattr(getattr(torch.ops.aten, name.partition(".")[0]),
                                                     name.partition(".")[2])._schema
    assert [a.name for a in ours.arguments] == [a.name for a in theirs.arguments]
    for mine, torchs in zip(ours.returns, theirs.returns):
        assert (mine.alias_info is None) == (torchs.alias_info is None)
        if mine.alias_info is not None:
            assert mine.alias_info.is_write == torchs.alias_info.is_write
