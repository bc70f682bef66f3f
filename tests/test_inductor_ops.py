"""Inductor against eager kiln, row by row of the op tables (issue 7).

Every OpInfo of tests/test_ops.py (OPS) and tests/test_reduce_ops.py (REDUCTIONS, ACTIVATIONS) is
compiled with `kiln.compile(backend="inductor", dynamic=False)` in each of its dtypes among
float32, float64, bfloat16, int64 and bool, over several shapes (the row's samples, else the table
shapes with a 0-dim and two 0-size ones, or test_ops.BINARY_SHAPES' broadcast pairs) and
contiguous, transposed and strided inputs. The compiled result must equal eager kiln's: dtype,
shape and values (exact for integers and bool, within a tolerance for floats); where eager
raises, the compiled function raises the same builtin exception class.

Lowering coverage is asserted as well as values: every op that falls back to its eager kernel
(graph.py's `fallbacks`) must be listed in EXTERN (no lowering, on purpose) or PARTIAL (a lowering
that declines some inputs), with the reason, and every lazy value a lowering produced must end up in
a kernel; so a lowering that breaks, or starts declining its inputs, fails here even when eager's
kernel would have rescued the values.

One compiled function per (row, dtype) applies the op to every shape and layout variant eager
accepts and returns them all, which keeps the number of compiles (and the run time) small; each
refused shape compiles on its own. The oracle is eager kiln, not PyTorch, so this runs on 3.12
too.
"""

import ast

import numpy as np
import pytest

import kiln
import kiln._dynamo as dynamo
from conftest import _builtin_exception, random_array, requires_torch, to_kiln
from kiln._inductor import compile_fx
from kiln._inductor.lowering import lowered_ops
from test_ops import BINARY_SHAPES, OPS
from test_reduce_ops import ACTIVATIONS, REDUCTIONS

DTYPES = ["float32", "float64", "bfloat16", "int64", "bool"]
SHAPES = [(), (0,), (5,), (3, 4), (2, 3, 4), (2, 0, 3)]  # test_ops.SHAPES: 0-dim, 0-size, 1-D to 3-D
LAYOUTS = ["contiguous", "transposed", "strided"]

# Float tolerances of compiled against eager, by result dtype. Kernels compute float32 and
# bfloat16 with vectorised approximations (Cephes exp, Eigen tanh, a polynomial erf, composed
# asinh/log2/...) and sum in another order; bfloat16 rounds once at the end where eager rounds
# after every op.
TOLERANCE = {"float32": (1e-5, 1e-5), "float64": (1e-7, 1e-7), "bfloat16": (2e-2, 2e-2), "float16": (1e-3, 1e-3)}
# Rows whose bfloat16 results differ by more, because a fused kernel keeps an intermediate in
# float32 that eager rounds to bfloat16: x * 100 up to 300 (spacing 2 in bfloat16 above 256)
# shifts log_softmax's outputs by up to 1, beyond the relative tolerance for outputs near -20.
BF16_ATOL = {"log_softmax_large": 1.0}

# Table ops that have no lowering and run as extern kernels (the wrapper calls eager's) on purpose.
# An entry whose op gains a lowering fails test_extern_ops_have_no_lowering: move it out then.
EXTERN = {
    # matrix products and pooling: library kernels (mv is recorded as unsqueeze, mm, squeeze)
    "aten.mm.default": "matmul family", "aten.bmm.default": "matmul family", "aten.dot.default": "matmul family",
    "aten._adaptive_avg_pool2d.default": "pooling",
    # special functions with no IR operator (libm has none) and no short exact composition (they
    # need series or rational approximations of their own)
    "aten.digamma.default": "special function", "aten.erfinv.default": "special function",
}
# Lowerings that decline some inputs: (op, part of the reason it gives) -> why that is right.
PARTIAL = {
    ("aten._to_copy.default", "has no kernel type"): "float16 and the small integers have no kernel dtype",
    ("aten.argmax.default", "reads it flat"): "over every axis of a transposed or strided input the flat "
                                              "index is not an affine function of the loop indices",
    ("aten.argmin.default", "reads it flat"): "as argmax",
    ("aten._softmax.default", "values runs its eager kernel"): "eager refuses softmax of integers and bools (an "
                                                               "empty one succeeds in its own dtype)",
    ("aten._log_softmax.default", "values runs its eager kernel"): "as _softmax",
}

def _tensor(array, name):
    t = to_kiln(array, name)
    return t.reshape(array.shape) if array.size == 0 else t


def _layout(array, name, layout):
    """The array as a kiln tensor: contiguous, a transposed view (of the last two dims) or every
    other element of a doubled last dim; None where the array has no such layout."""
    if layout == "transposed":
        if array.ndim < 2:
            return None
        return _tensor(np.ascontiguousarray(np.swapaxes(array, -1, -2)), name).transpose(-1, -2)
    if layout == "strided":
        if array.ndim < 1 or array.shape[-1] == 0:
            return None
        return _tensor(np.repeat(array, 2, axis=-1), name)[..., ::2]
    return _tensor(array, name)


def _variants(arrays, name):
    """(layout, argument tuple) pairs: each input in each layout it has, contiguous where not."""
    out = []
    for layout in LAYOUTS:
        args = [_layout(a, name, layout) for a in arrays]
        if layout != "contiguous" and all(a is None for a in args):
            continue
        out.append((layout, tuple(a if a is not None else _tensor(arr, name) for a, arr in zip(args, arrays))))
    return out


def _shapes(info):
    if info.sample is not None:
        return info.sample
    return [(s,) for s in SHAPES] if info.nargs == 1 else BINARY_SHAPES


def _tolerance(info, dtype):
    """The result dtype's tolerance, or the row's own where looser."""
    name = str(dtype).split(".")[-1]
    rtol, atol = TOLERANCE[name]
    if name == "bfloat16":
        atol = max(atol, BF16_ATOL.get(info.name, 0))
    return max(rtol, info.rtol or 0), max(atol, info.atol or 0)


def _same(got, expected, info, where):
    got = tuple(got) if isinstance(got, (tuple, list)) else (got,)
    expected = tuple(expected) if isinstance(expected, (tuple, list)) else (expected,)
    assert len(got) == len(expected), where
    for g, e in zip(got, expected):
        if not isinstance(e, kiln.Tensor):
            assert g == e, where
            continue
        assert g.dtype == e.dtype, f"{where}: dtype {g.dtype} != {e.dtype}"
        assert tuple(g.shape) == tuple(e.shape), f"{where}: shape {tuple(g.shape)} != {tuple(e.shape)}"
        if e.dtype.is_floating_point:
            rtol, atol = _tolerance(info, e.dtype)
            np.testing.assert_allclose(np.array(g.tolist(), dtype=np.float64), np.array(e.tolist(), dtype=np.float64),
                                       rtol=rtol, atol=atol, equal_nan=True, err_msg=where)
        else:  # integers and bool: exact
            assert g.tolist() == e.tolist(), where


def _compiled(fn, nargs, count):
    """One compiled function applying fn to `count` groups of nargs arguments each."""
    def apply_all(*args):
        results = []
        for i in range(count):
            results.append(fn(*args[i * nargs:(i + 1) * nargs]))
        return tuple(results)

    return kiln.compile(apply_all, backend="inductor", dynamic=False)


def _declined(op, why):
    return op in EXTERN or any(op == p and part in why for p, part in PARTIAL)


# Ops that read only their input's shape and dtype: an input consumed by nothing else is dead
# (x.clone().fill_(1): the clone computes nothing).
SHAPE_ONLY = {"aten.fill.Scalar", "aten.zeros_like.default", "aten.ones_like.default", "aten.full_like.default"}


def _lazy_ops(graph):
    """The op names (kernel-name parts) of every live node that lowered to a lazy value, from the
    GraphLowering's pre-fusion listing ("node = target: Pointwise ... ops=[...]")."""
    nodes = {n.name: n for n in graph.gm.graph.nodes}
    for line in graph.pre_fusion:
        name, desc = line.split(" = ", 1)[0], line.split(": ", 1)[1]
        if all(str(u.target) in SHAPE_ONLY for u in nodes[name].users):
            continue
        if desc.startswith(("Pointwise", "Reduction")):
            yield name, ast.literal_eval(desc[desc.index("ops=") + 4:])


def check_lowered(graphs, where):
    """No fallback but the listed ones; every lazy value computed inside some kernel (kernel names
    are cpp_fused_<sorted op names>_<n>)."""
    for graph in graphs:  # none where Dynamo found no tensor op (x.to(x.dtype), x.contiguous())
        for op, why in graph.fallbacks:
            assert _declined(op, why), f"{where}: {op} fell back ({why}); not in EXTERN or PARTIAL"
        names = [k.name for k in graph.kernels]
        for node, ops in _lazy_ops(graph):
            for op in ops:
                assert any(f"_{op}_" in n for n in names), f"{where}: {node} ({op}) is in no kernel: {names}"


def _eager_cases(info, name, fn):
    """Eager results over every shape and layout: ([(where, args, result)], [(where, args, error)]),
    one refusal per shape (the other layouts are refused alike)."""
    rng = np.random.default_rng(0)
    cases, refused = [], []
    for shapes in _shapes(info):
        arrays = [random_array(s, name, rng, info.low, info.high) for s in shapes]
        for layout, args in _variants(arrays, name):
            where = f"{info.name} {name} {shapes} {layout}"
            try:
                cases.append((where, args, fn(*args)))
            except Exception as e:  # eager refuses (a dtype, an empty reduction): compiled must too
                refused.append((where, args, e))
                break
    return cases, refused


def _run_compiled(fn, nargs, arg_groups):
    """fn over every argument group from one compiled function, and the graphs Inductor lowered."""
    dynamo.reset()  # the cache limit (8) counts recompiles of apply_all across rows
    graphs = []
    compile_fx.graph_sinks.append(graphs)
    try:
        return _compiled(fn, nargs, len(arg_groups))(*[t for args in arg_groups for t in args]), graphs
    finally:
        compile_fx.graph_sinks.remove(graphs)


def check(info, name):
    """Row `info` in dtype `name`: compiled equals eager over every shape and layout (one compiled
    function for all of them), or raises the same builtin exception class where eager does."""
    def fn(*args):
        return info.fn(kiln, *args)

    cases, refused = _eager_cases(info, name, fn)
    for where, args, error in refused:
        with pytest.raises(Exception) as got:
            _run_compiled(fn, info.nargs, [args])
        assert _builtin_exception(type(got.value)) is _builtin_exception(type(error)), \
            f"{where}: compiled raised {type(got.value).__name__}: {got.value}; eager raised " \
            f"{type(error).__name__}: {error}"
    if cases:
        results, graphs = _run_compiled(fn, info.nargs, [args for _, args, _ in cases])
        for (where, _, expected), got in zip(cases, results):
            _same(got, expected, info, where)
        check_lowered(graphs, f"{info.name} {name}")


def _params():
    for info in OPS + REDUCTIONS + ACTIVATIONS:
        for name in info.dtypes:
            if name not in DTYPES:
                continue
            yield pytest.param(info, name, id=f"{info.name}-{name}")


@pytest.mark.parametrize("info,name", list(_params()))
def test_compiled_matches_eager(info, name):
    check(info, name)


def test_extern_ops_have_no_lowering():
    """EXTERN names ops without a lowering (a stale entry would excuse a broken new lowering);
    PARTIAL names ops with one."""
    lowered = {str(op) for op in lowered_ops()}
    assert not set(EXTERN) & lowered, "these ops have lowerings now: move them out of EXTERN"
    assert {op for op, _ in PARTIAL} <= lowered


@requires_torch
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
def test_relu_keeps_negative_zero_and_nan(dtype):
    """relu is PyTorch's clamp_min(x, 0): -0.0 and NaN come through (eager gave +0.0, so 1 / relu(x)
    flipped an inf: fuzz seed 451, program 2371), eagerly, in place and compiled."""
    import torch

    data = [-0.0, 0.0, -1.5, 2.0, float("nan"), float("-inf")] * 3
    want = torch.tensor(data, dtype=getattr(torch, dtype)).relu()

    def fn(x):
        return x.relu(), kiln.nn.functional.relu(x.clone(), inplace=True)

    x = kiln.tensor(data, dtype=getattr(kiln, dtype))
    dynamo.reset()
    for got in (*fn(x), *kiln.compile(fn, backend="inductor", dynamic=False)(x)):
        assert got.float().tolist() == pytest.approx(want.float().tolist(), nan_ok=True)
        assert kiln.signbit(got).tolist() == torch.signbit(want).tolist()


def test_floor_division_rounds_like_eager():
    """Floor division of floats goes through fmod as eager's does: 1 // 0.1 is 9, not floor(10.0)
    (random table inputs rarely hit a quotient that rounds up to an integer)."""
    a = kiln.tensor([1.0, -1.0, 1.0, 7.5, -0.0, 3.0, 1.0], dtype=kiln.float64)
    b = kiln.tensor([0.1, 0.1, -0.1, 2.5, 2.0, 0.0, -0.0], dtype=kiln.float64)

    def fn(x, y):
        return x // y, kiln.div(x, y, rounding_mode="floor"), kiln.fmod(x, y), kiln.remainder(x, y)

    dynamo.reset()
    for dtype in (kiln.float64, kiln.float32):
        x, y = a.to(dtype), b.to(dtype)
        for g, e in zip(kiln.compile(fn, backend="inductor", dynamic=False)(x, y), fn(x, y)):
            assert g.tolist() == pytest.approx(e.tolist(), nan_ok=True)
            numbers = ~kiln.isnan(e)  # signed zeros too (a NaN's sign is the hardware's choice)
            assert kiln.signbit(g)[numbers].tolist() == kiln.signbit(e)[numbers].tolist()
