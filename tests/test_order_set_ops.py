"""Order statistics, set operations and searches (issue 17: kiln/_order_stats.py, kiln/_set_ops.py)
against PyTorch 2.13, the oracle, as a table in the style of test_composite_ops.py.

Each Case calls the op on either library (`fn(lib, *tensors)`) over its shapes and dtypes, on
contiguous, transposed and strided inputs: values, dtypes, shapes and indices equal PyTorch's (the
integer and 16-bit float data hold many ties, so the tie rules are checked too); float64 gradients
of a weighted sum of the outputs equal PyTorch's; the cases compile (inductor, aot_eager) with no
graph break and equal eager kiln. unique/unique_consecutive compile with a graph break (their size
is data-dependent) and equal eager. Bad input raises PyTorch's exception class and message.
"""

import math
import warnings

import numpy as np
import pytest

import kiln
import kiln._dynamo
from conftest import assert_same, random_array, requires_torch, to_kiln, to_torch, torch
from op_table_util import flat as _flat, grads as _grads, layout as _layout, weighted_sum as _weighted_sum

pytestmark = requires_torch

F = ["float32", "float64"]
SORTABLE = F + ["bfloat16", "int64", "int32"]


class Case:
    def __init__(self, name, fn, sample, dtypes=SORTABLE, grad=True, compile=True, nan=False):
        self.name, self.fn, self.sample, self.dtypes, self.grad = name, fn, sample, dtypes, grad
        self.compile = compile
        self.nan = nan  # put NaNs in float inputs (one per row of the last dim, never a whole row)

    def __repr__(self):
        return self.name


def _q(lib, values):
    return lib.tensor(values, dtype=lib.float64)


CASES = [
    # median, nanmedian: the whole tensor, or along a dim (values and indices)
    Case("median", lambda lib, x: lib.median(x), [((5,),), ((3, 4),), ((0,),), ((),)]),
    Case("median_dim", lambda lib, x: lib.median(x, 0), [((5,),), ((4, 3),), ((3, 4, 2),), ((),)]),
    Case("Tensor.median_keepdim", lambda lib, x: x.median(-1, keepdim=True), [((3, 4),), ((2, 3, 5),)]),
    Case("median_nan", lambda lib, x: (lib.median(x), lib.median(x, dim=1)), [((3, 6),)], dtypes=F, nan=True),
    Case("nanmedian", lambda lib, x: lib.nanmedian(x), [((7,),), ((3, 4),)], dtypes=F, nan=True),
    Case("nanmedian_dim", lambda lib, x: lib.nanmedian(x, 1), [((4, 6),), ((2, 3, 5),)], dtypes=F, nan=True),
    Case("Tensor.nanmedian_dim", lambda lib, x: x.nanmedian(0, True), [((5, 3),)], dtypes=SORTABLE),
    # quantile, nanquantile: q a float or a 1-D tensor, every interpolation
    *[Case(f"quantile_{how}", (lambda how: lambda lib, x: lib.quantile(x, 0.3, interpolation=how))(how),
           [((7,),), ((3, 4),), ((),)], dtypes=F) for how in ("linear", "lower", "higher", "midpoint", "nearest")],
    *[Case(f"quantile_dim_{how}", (lambda how: lambda lib, x: lib.quantile(
        x, _q(lib, [0.0, 0.25, 0.5, 1.0]).to(x.dtype), dim=1, interpolation=how))(how),
        [((3, 5),), ((2, 4, 3),)], dtypes=F) for how in ("linear", "lower", "higher", "midpoint", "nearest")],
    Case("Tensor.quantile_keepdim", lambda lib, x: x.quantile(_q(lib, [0.1, 0.9]).to(x.dtype), dim=0, keepdim=True),
         [((4, 3),), ((5,),)], dtypes=F),
    Case("quantile_all_keepdim", lambda lib, x: lib.quantile(x, 0.75, keepdim=True), [((3, 4),)], dtypes=F),
    Case("quantile_0d_q_tensor", lambda lib, x: lib.quantile(x, _q(lib, 0.4).to(x.dtype), dim=-1), [((3, 4),)],
         dtypes=F),
    Case("quantile_nan", lambda lib, x: lib.quantile(x, 0.5, dim=1), [((3, 6),)], dtypes=F, nan=True),
    Case("nanquantile", lambda lib, x: lib.nanquantile(x, _q(lib, [0.2, 0.5]).to(x.dtype), dim=1),
         [((3, 6),), ((2, 5),)], dtypes=F, nan=True),
    Case("Tensor.nanquantile_nearest", lambda lib, x: x.nanquantile(0.6, interpolation="nearest"), [((4, 5),)],
         dtypes=F, nan=True),
    # mode: the smallest most frequent value, the index of its last occurrence (rows <= 16)
    Case("mode", lambda lib, x: lib.mode(x), [((9,),), ((3, 7),), ((0, 3),), ((),)]),
    Case("mode_dim0", lambda lib, x: lib.mode(x, 0, keepdim=True), [((12, 3),), ((5, 2, 3),)]),
    Case("Tensor.mode", lambda lib, x: x.mode(1), [((4, 16),)]),
    # cummax, cummin: the latest index on ties, NaN propagating
    Case("cummax", lambda lib, x: lib.cummax(x, 0), [((9,),), ((5, 3),), ((0,),), ((),), ((33,),)]),
    Case("cummin", lambda lib, x: lib.cummin(x, -1), [((9,),), ((3, 6),), ((2, 0),)]),
    Case("Tensor.cummax_nan", lambda lib, x: x.cummax(1), [((3, 8),)], dtypes=F, nan=True),
    Case("Tensor.cummin_nan", lambda lib, x: x.cummin(dim=1), [((3, 8),)], dtypes=F, nan=True),
    # searches: outputs the shape of the values, so they compile with no break
    Case("searchsorted", lambda lib, s, v: lib.searchsorted(s.sort().values, v), [((9,), (3, 4)), ((0,), (3,)),
                                                                                  ((5,), ())], grad=False),
    Case("searchsorted_right_int32", lambda lib, s, v: lib.searchsorted(s.sort().values, v, right=True,
                                                                        out_int32=True), [((9,), (5,))], grad=False),
    Case("searchsorted_nd_side", lambda lib, s, v: lib.searchsorted(s.sort(-1).values, v, side="right"),
         [((3, 8), (3, 5)), ((2, 2, 6), (2, 2, 3))], grad=False),
    Case("searchsorted_sorter", lambda lib, s, v: lib.searchsorted(s, v, sorter=s.argsort(-1)),
         [((3, 7), (3, 4)), ((8,), (6,))], grad=False),
    Case("searchsorted_nan", lambda lib, s, v: lib.searchsorted(s.sort().values, v), [((6,), (4, 3))], dtypes=F,
         grad=False, nan=True),
    Case("bucketize", lambda lib, x, b: lib.bucketize(x, b.sort().values), [((3, 4), (7,)), ((), (4,))], grad=False),
    Case("bucketize_right", lambda lib, x, b: lib.bucketize(x, b.sort().values, right=True, out_int32=True),
         [((2, 5), (6,))], grad=False),
    # set operations: data-dependent sizes (a graph break under compile, test_unique_compiles_...)
    Case("unique", lambda lib, x: lib.unique(x), [((10,),), ((3, 4),), ((0,),), ((),)], grad=False, compile=False),
    Case("unique_inverse_counts", lambda lib, x: lib.unique(x, return_inverse=True, return_counts=True),
         [((12,),), ((3, 5),), ((0, 2),)], grad=False, compile=False),
    Case("Tensor.unique_unsorted", lambda lib, x: x.unique(sorted=False, return_counts=True), [((4, 4),)],
         grad=False, compile=False),
    Case("unique_dim", lambda lib, x: lib.unique((x > 0).to(x.dtype), dim=0, return_inverse=True,
                                                 return_counts=True), [((8, 2),), ((6, 2, 2),)], grad=False,
         compile=False),
    Case("unique_dim1", lambda lib, x: lib.unique((x > 0).to(x.dtype), dim=1, return_inverse=True),
         [((2, 8),), ((3, 0),)], grad=False, compile=False),
    Case("unique_consecutive", lambda lib, x: lib.unique_consecutive(x.sign(), return_inverse=True,
                                                                     return_counts=True),
         [((10,),), ((3, 4),), ((0,),)], grad=False, compile=False),
    Case("Tensor.unique_consecutive_dim", lambda lib, x: x.sign().unique_consecutive(dim=1, return_counts=True),
         [((2, 9),)], grad=False, compile=False),
]


def _with_nans(data, rng):
    data = data.copy()
    if data.ndim == 0 or data.size == 0:
        return data
    rows = data.reshape(-1, data.shape[-1])
    for row in rows:  # one NaN per row, never the whole row (nanmedian's all-NaN index, see below)
        if row.size > 1:
            row[rng.integers(row.size)] = math.nan
    return rows.reshape(data.shape)


def _layouts(arrays):
    yield [None] * len(arrays)
    yield ["T" if a.ndim >= 2 else "S" if a.ndim and a.shape[-1] else None for a in arrays]
    yield ["S" if a.ndim and a.shape[-1] else None for a in arrays]


def _arrays(case, shapes, name, rng):
    arrays = [random_array(s, name, rng) for s in shapes]
    return [_with_nans(a, rng) for a in arrays] if case.nan else arrays


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_values_match_torch(case):
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyTorch's note on non-contiguous boundaries
        for name in case.dtypes:
            for shapes in case.sample:
                arrays = _arrays(case, shapes, name, rng)
                for layouts in _layouts(arrays):
                    expected = case.fn(torch, *[_layout(torch, a, name, l) for a, l in zip(arrays, layouts)])
                    got = case.fn(kiln, *[_layout(kiln, a, name, l) for a, l in zip(arrays, layouts)])
                    assert_same(got, expected, 0, 0)  # selections and counts: exact
                    _assert_same_result_types(got, expected)


def _assert_same_result_types(got, expected):
    if isinstance(expected, tuple):
        assert type(got).__name__ == type(expected).__name__
        assert getattr(type(got), "_fields", None) == getattr(type(expected), "_fields", None)
        for g, e in zip(got, expected):
            _assert_same_result_types(g, e)


@pytest.mark.parametrize("case", [c for c in CASES if c.grad and "float64" in c.dtypes], ids=repr)
def test_grads_match_torch(case):
    rng = np.random.default_rng(1)
    for shapes in case.sample:
        arrays = _arrays(case, shapes, "float64", rng)
        for layouts in _layouts(arrays):
            k_in = [_layout(kiln, a, "float64", l).requires_grad_() for a, l in zip(arrays, layouts)]
            t_in = [_layout(torch, a, "float64", l).requires_grad_() for a, l in zip(arrays, layouts)]
            _, t_grads = _grads(torch, case.fn, t_in)
            _, k_grads = _grads(kiln, case.fn, k_in)
            for kg, tg in zip(k_grads, t_grads):
                if tg is None:
                    assert kg is None or not kg.abs().sum().item()
                else:
                    assert_same(kg, tg, 1e-12, 1e-12)


def test_median_gradient_spreads_over_ties_as_torch():
    # median() of all elements: PyTorch's evenly_distribute_backward (the gradient shared by every
    # element equal to the result); median(dim): all of it to the returned index
    data = [[2.0, 1.0, 2.0], [3.0, 2.0, 0.5]]
    grads = []
    for lib in (kiln, torch):
        x = lib.tensor(data, dtype=lib.float64, requires_grad=True)
        (x.median() * 3 + x.nanmedian() + x.median(1).values.sum() + x.mode(1).values.sum()).backward()
        grads.append(x.grad.tolist())
    assert grads[0] == grads[1]


def test_repr_and_fields_match_torch():
    x = [[3, 1, 2, 1], [0, 0, 5, 5]]
    for name, call in [("median", lambda lib, t: lib.median(t, 1)), ("nanmedian", lambda lib, t: t.nanmedian(0)),
                       ("mode", lambda lib, t: lib.mode(t)), ("cummax", lambda lib, t: t.cummax(1)),
                       ("cummin", lambda lib, t: lib.cummin(t.double(), 0))]:
        got, want = call(kiln, kiln.tensor(x)), call(torch, torch.tensor(x))
        assert repr(got) == repr(want).replace("torch", "kiln"), name
        assert type(got).__module__ == "kiln.return_types" and type(got).__name__ == name
        assert got.values is got[0] and got.indices is got[1]
        assert isinstance(got, tuple) and len(got) == 2
        values, indices = got
        assert type(got)((values, indices)) == got
        assert getattr(kiln.return_types, name) is type(got)


def test_methods_exist_as_in_torch():
    for name in ("median", "nanmedian", "quantile", "nanquantile", "mode", "cummax", "cummin", "unique",
                 "unique_consecutive", "bucketize", "searchsorted"):
        assert hasattr(kiln, name), name
        assert hasattr(kiln.Tensor, name) == hasattr(torch.Tensor, name), name


# --- compiled -------------------------------------------------------------------------------------
COMPILED = [c for c in CASES if c.compile and "float32" in c.dtypes and not c.nan]


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_compiled_matches_eager(backend):
    """Every shape-static case on its first sample (float32) in one compiled function: no graph break,
    and values and gradients equal eager kiln's."""
    rng = np.random.default_rng(2)
    arrays = [[random_array(s, "float32", rng) for s in c.sample[0]] for c in COMPILED]

    def run_all(*flat):
        outs, i = [], 0
        for case, arr in zip(COMPILED, arrays):
            outs.append(case.fn(kiln, *flat[i:i + len(arr)]))
            i += len(arr)
        return outs

    def inputs():
        return [to_kiln(a, "float32").requires_grad_(c.grad) for c, arr in zip(COMPILED, arrays) for a in arr]

    kiln._dynamo.reset()
    explained = kiln._dynamo.explain(run_all)(*inputs())
    assert explained.graph_break_count == 0, [str(b.reason) for b in explained.break_reasons]
    kiln._dynamo.reset()
    compiled = kiln.compile(run_all, backend=backend)
    want, want_grads = _grads(kiln, lambda lib, *xs: run_all(*xs), inputs())
    got, got_grads = _grads(kiln, lambda lib, *xs: compiled(*xs), inputs())
    kiln._dynamo.reset()
    for case, g, w in zip(COMPILED, got, want):
        assert_same([t.detach() for t in _flat(g)], [t.detach() for t in _flat(w)], 1e-6, 1e-6)
    for g, w in zip(got_grads, want_grads):
        assert (g is None) == (w is None)
        if g is not None:
            assert_same(g, w, 1e-6, 1e-6)


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_named_results_cross_compiled_functions(backend):
    # returned from a compiled graph and passed into one, a kiln.return_types result keeps its type
    x = kiln.tensor([[3.0, 1.0, 2.0], [0.0, 5.0, 5.0]])

    def take(r, y):
        values, indices = r
        return r.values + y, r.indices * 2, values.sum() + indices.sum()

    kiln._dynamo.reset()
    got = kiln.compile(lambda t: t.median(1), backend=backend, fullgraph=True)(x)
    assert type(got) is kiln.return_types.median and got.indices.tolist() == [2, 1]
    got = kiln.compile(take, backend=backend, fullgraph=True)(x.cummax(1), x)
    assert_same(list(got), list(take(x.cummax(1), x)), 0, 0)
    kiln._dynamo.reset()


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_unique_compiles_with_a_graph_break(backend):
    def step(x):
        values, inverse, counts = kiln.unique(x * 2, return_inverse=True, return_counts=True)
        runs = x.unique_consecutive(dim=0)
        return values + 1, inverse, counts * 3, runs.sum(0), kiln.bucketize(x, values)

    x = kiln.tensor([[3.0, 1.0], [3.0, 1.0], [2.0, 2.0], [1.0, 3.0]])
    kiln._dynamo.reset()
    explained = kiln._dynamo.explain(step)(x)
    assert explained.graph_break_count >= 1
    assert any("output shape depends on the input's data" in str(b.reason) for b in explained.break_reasons)
    kiln._dynamo.reset()
    compiled = kiln.compile(step, backend=backend)
    for data in (x, x.flip(0), kiln.tensor([[5.0, 5.0]])):
        assert_same(list(compiled(data)), list(step(data)), 0, 0)
    kiln._dynamo.reset()


# --- errors: PyTorch's class and message ------------------------------------------------------------
def _t(lib, *shape, dtype=None):
    return lib.ones(shape, dtype=dtype or lib.float32)


ERRORS = [
    ("median dim", lambda lib: lib.median(_t(lib, 2, 3), 2)),
    ("median bool", lambda lib: lib.median(_t(lib, 2, dtype=lib.bool))),
    ("median dim bool", lambda lib: lib.median(_t(lib, 2, dtype=lib.bool), 0)),
    ("median empty dim", lambda lib: lib.median(_t(lib, 0, 3), 0)),
    ("nanmedian empty dim", lambda lib: lib.nanmedian(_t(lib, 2, 0), 1)),
    ("quantile q range", lambda lib: lib.quantile(_t(lib, 3), 1.5)),
    ("quantile q tensor range", lambda lib: lib.quantile(_t(lib, 3), lib.tensor([0.5, 2.0]))),
    ("quantile int input", lambda lib: lib.quantile(_t(lib, 3, dtype=lib.int64), 0.5)),
    ("quantile q dtype", lambda lib: lib.quantile(_t(lib, 3), lib.tensor([0.5], dtype=lib.float64))),
    ("quantile q 2-d", lambda lib: lib.quantile(_t(lib, 3), _t(lib, 2, 2))),
    ("quantile empty", lambda lib: lib.quantile(_t(lib, 0), 0.5)),
    ("quantile interpolation", lambda lib: lib.quantile(_t(lib, 3), 0.5, interpolation="cubic")),
    ("nanquantile dim", lambda lib: lib.nanquantile(_t(lib, 3), 0.5, dim=1)),
    ("mode empty dim", lambda lib: lib.mode(_t(lib, 2, 0), 1)),
    ("mode dim", lambda lib: lib.mode(_t(lib, 2), 1)),
    ("cummax dim", lambda lib: lib.cummax(_t(lib, 2), 1)),
    ("cummin dim", lambda lib: lib.cummin(_t(lib, 2, 3), -3)),
    ("unique dim", lambda lib: lib.unique(_t(lib, 2, 3), dim=2)),
    ("unique dim of 0-d", lambda lib: lib.unique(_t(lib), dim=0)),
    ("unique zero-size dim", lambda lib: lib.unique(_t(lib, 0, 2), dim=1)),
    ("searchsorted shapes", lambda lib: lib.searchsorted(_t(lib, 1, 3), _t(lib, 2))),
    ("searchsorted scalar", lambda lib: lib.searchsorted(_t(lib, 1, 3), 2.0)),
    ("searchsorted 0-d", lambda lib: lib.searchsorted(_t(lib), _t(lib, 2))),
    ("searchsorted sorter size", lambda lib: lib.searchsorted(_t(lib, 3), _t(lib, 2), sorter=lib.tensor([0, 1]))),
    ("searchsorted sorter dtype", lambda lib: lib.searchsorted(_t(lib, 3), _t(lib, 2), sorter=_t(lib, 3))),
    ("searchsorted side", lambda lib: lib.searchsorted(_t(lib, 3), _t(lib, 2), side="middle")),
    ("searchsorted side right", lambda lib: lib.searchsorted(_t(lib, 3), _t(lib, 2), side="left", right=True)),
    ("searchsorted bool", lambda lib: lib.searchsorted(_t(lib, 3, dtype=lib.bool), _t(lib, 2, dtype=lib.bool))),
    ("bucketize 2-d", lambda lib: lib.bucketize(_t(lib, 2), _t(lib, 1, 3))),
]


@pytest.mark.parametrize("desc,call", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(desc, call):
    with pytest.raises(Exception) as expected:
        call(torch)
    with pytest.raises(type(expected.value)) as got:
        call(kiln)
    assert str(got.value) == str(expected.value)
