"""The composite-op table (issue 17): PyTorch's functions that kiln builds from its own ops
(kiln/_composites.py, kiln/_einsum.py), each checked against PyTorch 2.13, the oracle.

Each Case says how to call the op on either library (`fn(lib, *tensors)`), the dtypes to try and
the input shapes (`sample`: one tuple of shapes per call). For every case and dtype, on contiguous
and non-contiguous (transposed, strided) inputs:
  * the result's dtype, shape and values equal PyTorch's (and strides, for ops that return views);
  * after the inputs are overwritten in place, the result equals PyTorch's again: a result is a
    view of its input exactly when PyTorch's is;
  * for float64 (grad=True), the gradients of a weighted sum of the outputs equal PyTorch's;
  * compiled (kiln.compile, backends "inductor" and "aot_eager"), values and gradients equal eager
    kiln's, one compile per case on its first sample (float32).
Bad inputs raise the exception class PyTorch raises (ERRORS).
"""

import math
import warnings

import numpy as np
import pytest

import kiln
import kiln._dynamo
from conftest import INT_NAMES, assert_raises_like_torch, assert_same, random_array, requires_torch, to_kiln, \
    to_torch, torch
from op_table_util import flat as _flat, grads as _grads, layout as _layout, weighted_sum as _weighted_sum

pytestmark = requires_torch

F = ["float32", "float64"]
FLOATS = ["float32", "float64", "float16", "bfloat16"]
NUM = FLOATS + ["int64"]
ALL = NUM + ["bool"]


class Case:
    def __init__(self, name, fn, sample, dtypes=ALL, grad=True, compile=True, low=-3.0, high=3.0, rtol=None,
                 atol=None, view=False, transposed=True):
        self.name, self.fn, self.sample, self.dtypes, self.grad = name, fn, sample, dtypes, grad
        self.compile, self.low, self.high, self.rtol, self.atol, self.view = compile, low, high, rtol, atol, view
        self.transposed = transposed  # False: PyTorch raises on transposed inputs (kron's internal view)

    def __repr__(self):
        return self.name


CASES = [
    # views
    Case("unbind", lambda lib, x: lib.unbind(x, 1) if x.ndim > 1 else lib.unbind(x),
         [((3, 4),), ((2, 3, 4),), ((2, 0, 3),), ((5,),), ((0,),)], view=True),
    Case("Tensor.unbind", lambda lib, x: x.unbind(-1), [((3, 4),), ((2, 3, 4),)], view=True),
    Case("broadcast_to", lambda lib, x: lib.broadcast_to(x, (2, 3, 4) if x.ndim else (2, 2)),
         [((3, 1),), ((4,),), ((),), ((1, 4),)], view=True),
    Case("Tensor.broadcast_to", lambda lib, x: x.broadcast_to((2, -1, 4)), [((3, 1),)], view=True),
    Case("swapaxes", lambda lib, x: lib.swapaxes(x, 0, -1), [((3, 4),), ((2, 3, 4),), ((5,),), ((),)], view=True),
    Case("swapdims", lambda lib, x: x.swapdims(1, 0), [((3, 4),), ((2, 0, 4),)], view=True),
    Case("Tensor.swapaxes", lambda lib, x: x.swapaxes(-1, -2), [((3, 4),), ((2, 3, 4),)], view=True),
    Case("moveaxis", lambda lib, x: lib.moveaxis(x, 0, -1), [((3, 4),), ((2, 3, 4),), ((5,),)], view=True),
    Case("movedim_seq", lambda lib, x: lib.movedim(x, (0, 1), (-1, 0)), [((2, 3, 4),), ((3, 4),)], view=True),
    Case("Tensor.moveaxis_seq", lambda lib, x: x.moveaxis([2, 0], [0, 1]), [((2, 3, 4),)], view=True),
    Case("Tensor.movedim", lambda lib, x: x.movedim(-1, 0), [((2, 3, 4),)], view=True),
    Case("atleast_1d", lambda lib, x: lib.atleast_1d(x), [((),), ((3,),), ((2, 3),)], view=True),
    Case("atleast_2d", lambda lib, x: lib.atleast_2d(x), [((),), ((3,),), ((2, 3),), ((2, 3, 4),)], view=True),
    Case("atleast_3d", lambda lib, x: lib.atleast_3d(x), [((),), ((3,),), ((2, 3),), ((2, 3, 4),)], view=True),
    Case("atleast_2d_many", lambda lib, x, y: lib.atleast_2d(x, y), [((), (3,))], view=True),
    Case("atleast_3d_list", lambda lib, x, y: lib.atleast_3d([x, y]), [((4,), (2, 3))], view=True),
    Case("meshgrid_ij", lambda lib, x, y: lib.meshgrid(x, y, indexing="ij"), [((3,), (4,)), ((0,), (2,))],
         view=True),
    Case("meshgrid_xy", lambda lib, x, y, z: lib.meshgrid([x, y, z], indexing="xy"),
         [((3,), (4,), (2,)), ((), (2,), (3,))], view=True),
    # aliases
    Case("clip", lambda lib, x: lib.clip(x, -1, 1), [((3, 4),), ((),), ((0, 3),)], dtypes=NUM),
    Case("Tensor.clip_min", lambda lib, x: x.clip(min=-0.5), [((3, 4),)], dtypes=F),
    Case("clip_", lambda lib, x: lib.clip_(x.clone(), max=0.5), [((3, 4),)], dtypes=F),
    Case("Tensor.clip_", lambda lib, x: x.clone().clip_(-1, 0.5), [((2, 3),)], dtypes=F),
    Case("concat", lambda lib, x, y: lib.concat([x, y], dim=-1), [((2, 3), (2, 4)), ((0,), (3,))]),
    Case("concatenate", lambda lib, x, y: lib.concatenate((x, y), axis=0), [((2, 3), (1, 3))]),
    # stacking
    Case("hstack", lambda lib, x, y: lib.hstack([x, y]), [((3,), (4,)), ((2, 3), (2, 1)), ((), ()), ((2, 0), (2, 3))]),
    Case("vstack", lambda lib, x, y: lib.vstack((x, y)), [((3,), (3,)), ((2, 3), (1, 3)), ((), ())]),
    Case("dstack", lambda lib, x, y: lib.dstack([x, y]), [((3,), (3,)), ((2, 3), (2, 3)), ((2, 3, 1), (2, 3, 2))]),
    Case("column_stack", lambda lib, x, y: lib.column_stack([x, y]), [((3,), (3, 2)), ((), ()), ((2, 3), (2,))]),
    Case("tile", lambda lib, x: lib.tile(x, (2,)), [((3,),), ((2, 3),), ((),), ((0, 2),)]),
    Case("Tensor.tile", lambda lib, x: x.tile((2, 1, 3)), [((3,),), ((2, 3),)]),
    Case("rot90", lambda lib, x: lib.rot90(x), [((2, 3),), ((2, 3, 4),), ((0, 3),)]),
    *[Case(f"rot90_k{k}", (lambda k: lambda lib, x: x.rot90(k, [-1, 0]))(k), [((2, 3),), ((2, 3, 4),)])
      for k in (2, 3, -1, 4)],
    # diagonals
    Case("trace", lambda lib, x: lib.trace(x), [((3, 4),), ((4, 3),), ((0, 0),), ((1, 1),)], dtypes=NUM),
    Case("Tensor.trace", lambda lib, x: x.trace(), [((3, 3),)], dtypes=["float64", "int64"]),
    *[Case(f"diag{k}", (lambda k: lambda lib, x: lib.diag(x, k))(k), [((4,),), ((3, 4),), ((0,),), ((4, 2),)])
      for k in (0, 1, -2)],
    Case("Tensor.diag", lambda lib, x: x.diag(), [((3,),), ((3, 3),)]),
    Case("diag_embed", lambda lib, x: lib.diag_embed(x), [((2, 3),), ((3,),), ((2, 0),)]),
    Case("diag_embed_dims", lambda lib, x: x.diag_embed(offset=-1, dim1=0, dim2=2), [((2, 3),), ((2, 3, 4),)]),
    Case("fill_diagonal_", lambda lib, x: x.clone().fill_diagonal_(2), [((3, 3),), ((5, 2),), ((2, 4),),
                                                                        ((3, 3, 3),)], dtypes=NUM),
    Case("fill_diagonal_wrap", lambda lib, x: x.clone().fill_diagonal_(-1, wrap=True), [((7, 2),), ((8, 3),)],
         dtypes=NUM),
    # differences, products
    Case("diff", lambda lib, x: lib.diff(x), [((5,),), ((3, 4),), ((1,),), ((0,),), ((2, 0),)]),
    Case("diff_n2_dim0", lambda lib, x: x.diff(n=2, dim=0), [((5,),), ((3, 4),), ((1, 3),)]),
    Case("diff_n0", lambda lib, x: x.diff(n=0), [((3, 4),)]),
    Case("diff_prepend_append", lambda lib, x, p, a: lib.diff(x, 1, 0, p, a), [((3, 2), (1, 2), (2, 2))]),
    Case("diff_prepend", lambda lib, x, p: lib.diff(x, 2, prepend=p), [((3, 2), (3, 1))]),
    Case("outer", lambda lib, x, y: lib.outer(x, y), [((4,), (3,)), ((0,), (3,)), ((1,), (1,))]),
    Case("ger", lambda lib, x, y: lib.ger(x, y), [((4,), (3,))], dtypes=F),
    Case("Tensor.outer", lambda lib, x, y: x.outer(y), [((2,), (3,))], dtypes=F + ["int64"]),
    Case("kron", lambda lib, x, y: lib.kron(x, y), [((2, 3), (3, 2)), ((2,), (3, 2)), ((2, 1, 2), (2,)),
                                                     ((), (3,)), ((0, 2), (2, 2))], dtypes=NUM, transposed=False),
    Case("Tensor.kron", lambda lib, x, y: x.kron(y), [((2, 2), (2, 2))], dtypes=F, transposed=False),
    Case("cross", lambda lib, x, y: lib.cross(x, y, dim=-1), [((3,), (3,)), ((4, 3), (4, 3)), ((4, 3), (1, 3)),
                                                               ((0, 3), (0, 3))], dtypes=NUM),
    Case("Tensor.cross_dim0", lambda lib, x, y: x.cross(y, 0), [((3, 5), (3, 5))], dtypes=F),
    Case("tensordot2", lambda lib, x, y: lib.tensordot(x, y), [((3, 4, 5), (4, 5, 2)), ((2, 3), (2, 3))],
         dtypes=F + ["int64"], rtol=1e-4, atol=1e-4),
    Case("tensordot_lists", lambda lib, x, y: lib.tensordot(x, y, dims=([1, 0], [0, 2])),
         [((3, 4, 2), (4, 5, 3))], dtypes=F, rtol=1e-4, atol=1e-4),
    Case("tensordot0", lambda lib, x, y: lib.tensordot(x, y, 0), [((2, 3), (4,))], dtypes=F),
    Case("take", lambda lib, x: lib.take(x, lib.tensor([[0, 5], [-1, 3]])), [((3, 4),), ((2, 3, 2),)]),
    Case("Tensor.take", lambda lib, x: x.take(lib.tensor([1, 0])), [((2,),)]),
    # pointwise and reductions
    Case("logaddexp", lambda lib, x, y: lib.logaddexp(x, y), [((3, 4), (3, 4)), ((3, 4), (4,)), ((), (2,)),
                                                               ((0, 2), (2,))], dtypes=FLOATS),
    Case("logaddexp_inf", lambda lib, x: x.logaddexp(lib.tensor([-math.inf, math.inf, 0.0], dtype=x.dtype)),
         [((3,),)], dtypes=F, grad=False),
    Case("logaddexp2", lambda lib, x, y: lib.logaddexp2(x, y), [((3, 4), (3, 4)), ((2, 1), (3,))], dtypes=FLOATS),
    Case("nanmean", lambda lib, x: lib.nanmean(lib.where(x > 1.5, math.nan, x)),
         [((3, 4),), ((),), ((0,),), ((5,),)], dtypes=FLOATS),
    Case("Tensor.nanmean_dim", lambda lib, x: lib.where(x > 1, math.nan, x).nanmean(1, keepdim=True),
         [((3, 4),), ((2, 3, 4),)], dtypes=F),
    Case("nanmean_dtype", lambda lib, x: lib.nanmean(x, (0,), dtype=lib.float64), [((3, 4),)], dtypes=["float32"]),
    Case("isclose", lambda lib, x, y: lib.isclose(x, x + y * 1e-6), [((3, 4), (3, 4)), ((), ())], dtypes=F,
         grad=False),
    Case("isclose_int", lambda lib, x, y: lib.isclose(x, y, rtol=0.5, atol=1), [((3, 4), (3, 4))],
         dtypes=["int64", "bool"], grad=False),
    Case("isclose_nan", lambda lib, x: lib.isclose(lib.where(x > 1, math.nan, x), lib.where(x > 1, math.nan, x),
                                                   equal_nan=True), [((3, 4),)], dtypes=F, grad=False),
    Case("allclose", lambda lib, x, y: lib.allclose(x, x + y * 1e-9), [((3, 4), (3, 4))], dtypes=F, grad=False),
    Case("Tensor.allclose_not", lambda lib, x, y: x.allclose(y), [((3, 4), (3, 4))], dtypes=F, grad=False),
    Case("equal", lambda lib, x: lib.equal(x, x.clone()), [((3, 4),), ((0,),), ((),)], grad=False),
    Case("Tensor.equal_not", lambda lib, x, y: x.equal(y), [((3, 4), (3, 4)), ((3,), (4,))], grad=False),
    # indexing
    Case("repeat_interleave", lambda lib, x: lib.repeat_interleave(x, 2), [((3,),), ((2, 3),), ((),), ((0,),)]),
    Case("Tensor.repeat_interleave_dim", lambda lib, x: x.repeat_interleave(3, dim=-1), [((2, 3),), ((2, 0),)]),
    Case("repeat_interleave_tensor", lambda lib, x: x.repeat_interleave(lib.tensor([1, 0, 2]), dim=0),
         [((3, 2),), ((3,),)], compile=False),
    Case("repeat_interleave_output_size",
         lambda lib, x: lib.repeat_interleave(x, lib.tensor([2, 0, 1, 0]), dim=1, output_size=3), [((2, 4),)]),
    Case("repeat_interleave_1elem", lambda lib, x: lib.repeat_interleave(x, lib.tensor([2])), [((3,),)],
         compile=False),
    # distances
    *[Case(f"cdist_p{p}", (lambda p: lambda lib, x, y: lib.cdist(x, y, p=p))(p),
           [((4, 3), (5, 3)), ((2, 4, 3), (1, 5, 3)), ((0, 3), (2, 3))], dtypes=F, rtol=1e-5, atol=1e-5)
      for p in (2.0, 1.0, 0.0, 3.0, math.inf)],
    # einsum: equation, operand shapes (several samples where the shapes may vary)
    *[Case(f"einsum[{eq}]", (lambda eq: lambda lib, *xs: lib.einsum(eq, *xs))(eq), sample, dtypes=dtypes,
           rtol=1e-4, atol=1e-4, view=view)
      for eq, sample, dtypes, view in [
          ("ij,jk->ik", [((3, 4), (4, 5)), ((0, 3), (3, 2)), ((2, 0), (0, 3))], F + ["int64", "bool"], False),
          ("bij,bjk->bik", [((2, 3, 4), (2, 4, 5)), ((1, 3, 4), (2, 4, 5))], F + ["int64"], False),
          ("ii->i", [((3, 3),), ((0, 0),)], ALL, True),
          ("ii", [((3, 3),)], NUM, False),
          ("i,i->", [((4,), (4,)), ((0,), (0,))], F + ["int64"], False),
          ("bhqd,bhkd->bhqk", [((2, 3, 4, 5), (2, 3, 6, 5))], FLOATS, False),
          ("...ij,...jk", [((2, 3, 4), (4, 5)), ((3, 4), (2, 1, 4, 2)), ((2, 3), (3, 1))], F, False),
          ("ij->ji", [((2, 3),), ((0, 2),)], ALL, True),
          ("i,j->ij", [((2,), (3,)), ((0,), (3,))], F + ["int64"], False),
          ("ijk->", [((2, 3, 4),), ((2, 0, 3),)], NUM, False),
          ("ij,jk,kl->il", [((2, 3), (3, 4), (4, 5))], F, False),
          ("ab,bc,ca->", [((2, 3), (3, 4), (4, 2))], F, False),
          ("bn,anm,bm->ba", [((2, 3), (4, 3, 5), (2, 5))], F, False),
          ("...i,...i", [((2, 3), (4, 1, 3))], F, False),
          ("iij->j", [((3, 3, 2),)], F, False),
          ("i,i->i", [((3,), (1,)), ((3,), (3,))], F, False),
          ("ji,kj", [((3, 2), (4, 3))], F, False),
          ("AbC,Cb->A", [((2, 3, 4), (4, 3))], F, False),
          ("i...->...", [((2, 3, 4),)], F, False),
          (" i j , j k -> i k ", [((2, 3), (3, 2))], F, False),
          ("", [((),)], F, True),
      ]],
    Case("einsum_list", lambda lib, x, y: lib.einsum("ij,jk", [x, y]), [((2, 3), (3, 4))], dtypes=F),
    Case("cdist_mm", lambda lib, x, y: lib.cdist(x, y, compute_mode="use_mm_for_euclid_dist"),
         [((30, 3), (27, 3))], dtypes=F, rtol=1e-4, atol=1e-4),
]


def _layouts(arrays, case):
    yield [None] * len(arrays)
    yield ["T" if a.ndim >= 2 and case.transposed else "S" if a.ndim and a.shape[-1] else None for a in arrays]


def _overwrite(inputs, lib):
    with lib.no_grad():
        for t in inputs:
            t.fill_(True if t.dtype == lib.bool else 1)


def _check_case(case, name, arrays, layouts):
    k_in = [_layout(kiln, a, name, l) for a, l in zip(arrays, layouts)]
    t_in = [_layout(torch, a, name, l) for a, l in zip(arrays, layouts)]
    try:
        expected = case.fn(torch, *t_in)
    except Exception as e:  # PyTorch rejects this dtype: kiln must too, with the same class
        with pytest.raises(type(e) if not isinstance(e, NotImplementedError) else (NotImplementedError, RuntimeError)):
            case.fn(kiln, *k_in)
        return
    got = case.fn(kiln, *k_in)
    assert_same(got, expected, case.rtol, case.atol)
    if case.view:
        for g, e in zip(_flat(got), _flat(expected)):
            assert g.stride() == e.stride(), f"strides {g.stride()} != {e.stride()}"
    # a view sees the overwrite, a copy does not: exactly as in PyTorch
    _overwrite(k_in, kiln)
    _overwrite(t_in, torch)
    assert_same(got, expected, case.rtol, case.atol)


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_values_match_torch(case):
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in case.dtypes:
            for shapes in case.sample:
                arrays = [random_array(s, name, rng, case.low, case.high) for s in shapes]
                for layouts in _layouts(arrays, case):
                    _check_case(case, name, arrays, layouts)


@pytest.mark.parametrize("case", [c for c in CASES if c.grad and "float64" in c.dtypes], ids=repr)
def test_grads_match_torch(case):
    rng = np.random.default_rng(1)
    for shapes in case.sample:
        arrays = [random_array(s, "float64", rng, case.low, case.high) for s in shapes]
        for layouts in _layouts(arrays, case):
            k_in = [_layout(kiln, a, "float64", l).requires_grad_() for a, l in zip(arrays, layouts)]
            t_in = [_layout(torch, a, "float64", l).requires_grad_() for a, l in zip(arrays, layouts)]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    _, t_grads = _grads(torch, case.fn, t_in)
                except RuntimeError:  # e.g. fill_diagonal_'s strided walk out of a transposed input
                    with pytest.raises(RuntimeError):
                        _grads(kiln, case.fn, k_in)
                    continue
                _, k_grads = _grads(kiln, case.fn, k_in)
            for kg, tg in zip(k_grads, t_grads):
                if tg is None:
                    assert kg is None or not kg.abs().sum().item()
                else:
                    assert_same(kg, tg, 1e-6, 1e-6)


# equal and allclose return Python bools (a graph break, as in PyTorch); their compiled run is
# test_data_dependent_ops_compile_with_a_graph_break's
COMPILED = [c for c in CASES if c.compile and "float32" in c.dtypes and
            not c.name.startswith(("allclose", "equal", "Tensor.allclose", "Tensor.equal"))]


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_compiled_matches_eager(backend):
    """Every case on its first sample (float32), all in one compiled function (one compile, so the
    file stays fast): no graph break, and values and gradients equal eager kiln's."""
    rng = np.random.default_rng(2)
    arrays = [[random_array(s, "float32", rng, c.low, c.high) for s in c.sample[0]] for c in COMPILED]

    def run_all(*flat):
        outs, i = [], 0
        for case, arr in zip(COMPILED, arrays):
            outs.append(case.fn(kiln, *flat[i:i + len(arr)]))
            i += len(arr)
        return outs

    def inputs():
        return [to_kiln(a, "float32").requires_grad_(c.grad) for c, arr in zip(COMPILED, arrays) for a in arr]

    kiln._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        explained = kiln._dynamo.explain(run_all)(*inputs())
        assert explained.graph_break_count == 0, [str(b.reason) for b in explained.break_reasons]
        kiln._dynamo.reset()
        compiled = kiln.compile(run_all, backend=backend)
        eager_in, comp_in = inputs(), inputs()
        want, want_g = _grads(kiln, lambda lib, *xs: run_all(*xs), eager_in)
        got, got_g = _grads(kiln, lambda lib, *xs: compiled(*xs), comp_in)
    kiln._dynamo.reset()
    failures = []
    for case, g, w in zip(COMPILED, got, want):
        try:
            assert_same(_detach(g), _detach(w), 1e-5, 1e-5)
        except AssertionError as e:
            failures.append(f"{case.name}: {e}")
    names = [c.name for c, arr in zip(COMPILED, arrays) for _ in arr]
    for name, a, b in zip(names, got_g, want_g):
        try:
            assert (a is None) == (b is None)
            if a is not None:
                assert_same(a, b, 1e-5, 1e-5)
        except AssertionError as e:
            failures.append(f"{name} (gradient): {e}")
    assert not failures, "\n".join(failures)


def _detach(out):
    if isinstance(out, (tuple, list)):
        return [_detach(o) for o in out]
    return out.detach() if isinstance(out, kiln.Tensor) else out


def test_repeat_interleave_data_dependent_compiles_with_a_graph_break():
    x = kiln.arange(6.0).reshape(3, 2)
    r = kiln.tensor([1, 0, 2])
    kiln._dynamo.reset()
    fn = kiln.compile(lambda x, r: (x.repeat_interleave(r, dim=0) * 2, kiln.repeat_interleave(r)), backend="inductor")
    got = fn(x, r)
    assert got[0].tolist() == (x.repeat_interleave(r, dim=0) * 2).tolist()
    assert got[1].tolist() == [0, 2, 2]
    explained = kiln._dynamo.explain(lambda x, r: x.repeat_interleave(r, dim=0) * 2)(x, r)
    assert explained.graph_break_count >= 1
    kiln._dynamo.reset()


@pytest.mark.parametrize("row,col,offset", [(3, 3, 0), (4, 3, 1), (3, 5, -1), (0, 3, 0), (3, 0, 2), (5, 4, -7),
                                            (2, 6, 9)])
def test_tril_triu_indices(row, col, offset):
    for name in ("tril_indices", "triu_indices"):
        assert_same(getattr(kiln, name)(row, col, offset), getattr(torch, name)(row, col, offset))
    assert_same(kiln.tril_indices(row, col, offset, dtype=kiln.int32),
                torch.tril_indices(row, col, offset, dtype=torch.int32))


def test_meshgrid_warns_without_indexing_as_torch():
    with pytest.warns(UserWarning, match="indexing argument"):
        got = kiln.meshgrid(kiln.arange(3), kiln.arange(2))
    assert [g.shape for g in got] == [(3, 2), (3, 2)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kiln.meshgrid(kiln.arange(3), indexing="ij")


def test_cross_without_dim_uses_first_dim_of_size_3():
    a, b = np.random.default_rng(3).uniform(size=(2, 4, 3, 3))
    with pytest.warns(UserWarning, match="without specifying the dim"):
        got = kiln.cross(to_kiln(a, "float64"), to_kiln(b, "float64"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_same(got, torch.cross(to_torch(a, "float64"), to_torch(b, "float64")))


def test_aliases_and_methods_exist_as_in_torch():
    for name in ("unbind", "outer", "ger", "broadcast_to", "swapaxes", "swapdims", "moveaxis", "movedim", "clip",
                 "clip_", "tile", "trace", "diag", "diag_embed", "rot90", "diff", "logaddexp", "logaddexp2",
                 "nanmean", "allclose", "isclose", "equal", "cross", "kron", "take", "fill_diagonal_",
                 "repeat_interleave"):
        assert hasattr(kiln.Tensor, name) == hasattr(torch.Tensor, name), name
    for name in ("concat", "concatenate", "hstack", "vstack", "dstack", "column_stack", "atleast_1d", "atleast_2d",
                 "atleast_3d", "tril_indices", "triu_indices", "meshgrid", "tensordot", "cdist"):
        assert hasattr(kiln, name) and not hasattr(torch.Tensor, name), name


def test_fill_diagonal_and_clip_are_in_place_with_autograd():
    for lib in (kiln, torch):
        x = lib.ones(3, 3, dtype=lib.float64, requires_grad=True)
        y = x * 2
        y.fill_diagonal_(0)
        y.clip_(max=1.5)
        (g,) = lib.autograd.grad((y * lib.arange(9.0, dtype=lib.float64).reshape(3, 3)).sum(), [x])
        if lib is kiln:
            got = (y.tolist(), g.tolist())
        else:
            assert got == (y.tolist(), g.tolist())


def _t(lib, *shape, dtype=None):
    return lib.ones(shape, dtype=dtype or lib.float32)


ERRORS = [
    ("unbind 0-d", lambda lib, x: lib.unbind(x), lambda lib: {"x": _t(lib)}),
    ("unbind dim", lambda lib, x: x.unbind(2), lambda lib: {"x": _t(lib, 2, 3)}),
    ("swapaxes dim", lambda lib, x: lib.swapaxes(x, 0, 3), lambda lib: {"x": _t(lib, 2)}),
    ("moveaxis repeated", lambda lib, x: lib.moveaxis(x, (0, 0), (1, 0)), lambda lib: {"x": _t(lib, 2, 3)}),
    ("moveaxis lengths", lambda lib, x: lib.moveaxis(x, (0, 1), (1,)), lambda lib: {"x": _t(lib, 2, 3)}),
    ("broadcast_to", lambda lib, x: lib.broadcast_to(x, (3,)), lambda lib: {"x": _t(lib, 2)}),
    ("outer 2-d", lambda lib, x: lib.outer(x, x), lambda lib: {"x": _t(lib, 2, 2)}),
    ("hstack empty", lambda lib, x: lib.hstack([]), lambda lib: {"x": _t(lib, 2)}),
    ("vstack empty", lambda lib, x: lib.vstack([]), lambda lib: {"x": _t(lib, 2)}),
    ("tile negative", lambda lib, x: lib.tile(x, (2, -3)), lambda lib: {"x": _t(lib, 3)}),
    ("trace 3-d", lambda lib, x: lib.trace(x), lambda lib: {"x": _t(lib, 2, 2, 2)}),
    ("trace bool", lambda lib, x: lib.trace(x), lambda lib: {"x": _t(lib, 2, 2, dtype=lib.bool)}),
    ("diag 3-d", lambda lib, x: lib.diag(x), lambda lib: {"x": _t(lib, 2, 2, 2)}),
    ("diag_embed same dims", lambda lib, x: lib.diag_embed(x, 0, 1, 1), lambda lib: {"x": _t(lib, 2)}),
    ("tril_indices negative", lambda lib, x: lib.tril_indices(-1, 2), lambda lib: {"x": _t(lib, 2)}),
    ("meshgrid 2-d", lambda lib, x: lib.meshgrid(x, indexing="ij"), lambda lib: {"x": _t(lib, 2, 2)}),
    ("rot90 1-d", lambda lib, x: lib.rot90(x), lambda lib: {"x": _t(lib, 2)}),
    ("rot90 same dims", lambda lib, x: lib.rot90(x, 1, [0, 0]), lambda lib: {"x": _t(lib, 2, 2)}),
    ("rot90 three dims", lambda lib, x: lib.rot90(x, 1, [0, 1, 2]), lambda lib: {"x": _t(lib, 2, 2, 2)}),
    ("diff 0-d", lambda lib, x: lib.diff(x), lambda lib: {"x": _t(lib)}),
    ("diff negative n", lambda lib, x: lib.diff(x, -1), lambda lib: {"x": _t(lib, 3)}),
    ("diff prepend dims", lambda lib, x: lib.diff(x, prepend=x[0]), lambda lib: {"x": _t(lib, 3)}),
    ("logaddexp int", lambda lib, x: lib.logaddexp(x, x), lambda lib: {"x": _t(lib, 3, dtype=lib.int64)}),
    ("nanmean int", lambda lib, x: lib.nanmean(x), lambda lib: {"x": _t(lib, 3, dtype=lib.int64)}),
    ("isclose dtypes", lambda lib, x: lib.isclose(x, x.double()), lambda lib: {"x": _t(lib, 3)}),
    ("isclose rtol", lambda lib, x: lib.isclose(x, x, rtol=-1), lambda lib: {"x": _t(lib, 3)}),
    ("allclose atol", lambda lib, x: lib.allclose(x, x, atol=-1), lambda lib: {"x": _t(lib, 3)}),
    ("cross ndim", lambda lib, x: lib.cross(x, x[0], dim=-1), lambda lib: {"x": _t(lib, 3, 3)}),
    ("cross length", lambda lib, x: lib.cross(x, x, dim=1), lambda lib: {"x": _t(lib, 3, 2)}),
    ("cross no size 3", lambda lib, x: lib.cross(x, x), lambda lib: {"x": _t(lib, 2, 4)}),
    ("cross bool", lambda lib, x: lib.cross(x, x, dim=0), lambda lib: {"x": _t(lib, 3, dtype=lib.bool)}),
    ("cross dtypes", lambda lib, x: lib.cross(x, x.double(), dim=0), lambda lib: {"x": _t(lib, 3)}),
    ("tensordot sizes", lambda lib, x, y: lib.tensordot(x, y, 1), lambda lib: {"x": _t(lib, 3), "y": _t(lib, 4)}),
    ("tensordot negative", lambda lib, x: lib.tensordot(x, x, -1), lambda lib: {"x": _t(lib, 3)}),
    ("tensordot dtypes", lambda lib, x: lib.tensordot(x, x.double(), 1), lambda lib: {"x": _t(lib, 3)}),
    ("take out of range", lambda lib, x: lib.take(x, lib.tensor([5])), lambda lib: {"x": _t(lib, 3)}),
    ("take float index", lambda lib, x: lib.take(x, lib.tensor([1.0])), lambda lib: {"x": _t(lib, 3)}),
    ("fill_diagonal_ 1-d", lambda lib, x: x.fill_diagonal_(1), lambda lib: {"x": _t(lib, 3)}),
    ("fill_diagonal_ unequal", lambda lib, x: x.fill_diagonal_(1), lambda lib: {"x": _t(lib, 3, 3, 2)}),
    ("repeat_interleave sizes", lambda lib, x: lib.repeat_interleave(x, lib.tensor([1, 2])),
     lambda lib: {"x": _t(lib, 3)}),
    ("repeat_interleave negative", lambda lib, x: lib.repeat_interleave(x, lib.tensor([1, -2, 1])),
     lambda lib: {"x": _t(lib, 3)}),
    ("repeat_interleave negative int", lambda lib, x: lib.repeat_interleave(x, -1), lambda lib: {"x": _t(lib, 3)}),
    ("repeat_interleave float repeats", lambda lib, x: lib.repeat_interleave(x, x), lambda lib: {"x": _t(lib, 3)}),
    ("repeat_interleave 2-d repeats", lambda lib, x: lib.repeat_interleave(x),
     lambda lib: {"x": _t(lib, 2, 2, dtype=lib.int64)}),
    ("einsum too few operands", lambda lib, x: lib.einsum("i,i->", x), lambda lib: {"x": _t(lib, 3)}),
    ("einsum too many operands", lambda lib, x: lib.einsum("i->", x, x), lambda lib: {"x": _t(lib, 3)}),
    ("einsum ndim", lambda lib, x: lib.einsum("ij->", x), lambda lib: {"x": _t(lib, 3)}),
    ("einsum subscript", lambda lib, x: lib.einsum("i1->", x), lambda lib: {"x": _t(lib, 3)}),
    ("einsum repeated output", lambda lib, x: lib.einsum("i->ii", x), lambda lib: {"x": _t(lib, 3)}),
    ("einsum unknown output", lambda lib, x: lib.einsum("i->j", x), lambda lib: {"x": _t(lib, 3)}),
    ("einsum sizes", lambda lib, x, y: lib.einsum("i,i->i", x, y), lambda lib: {"x": _t(lib, 3), "y": _t(lib, 4)}),
    ("einsum diagonal sizes", lambda lib, x: lib.einsum("ii", x), lambda lib: {"x": _t(lib, 3, 4)}),
    ("einsum dot", lambda lib, x: lib.einsum(".i", x), lambda lib: {"x": _t(lib, 2, 3)}),
    ("einsum dtypes", lambda lib, x: lib.einsum("i,i", x, x.double()), lambda lib: {"x": _t(lib, 3)}),
    ("einsum bool matmul", lambda lib, x: lib.einsum("ij,jk", x, x), lambda lib: {"x": _t(lib, 2, 2, dtype=lib.bool)}),
    ("einsum no operands", lambda lib, x: lib.einsum("i"), lambda lib: {"x": _t(lib, 3)}),
    ("cdist 1-d", lambda lib, x: lib.cdist(x, x), lambda lib: {"x": _t(lib, 3)}),
    ("cdist columns", lambda lib, x, y: lib.cdist(x, y), lambda lib: {"x": _t(lib, 3, 2), "y": _t(lib, 3, 3)}),
    ("cdist negative p", lambda lib, x: lib.cdist(x, x, p=-1), lambda lib: {"x": _t(lib, 3, 2)}),
    ("cdist int", lambda lib, x: lib.cdist(x, x), lambda lib: {"x": _t(lib, 3, 2, dtype=lib.int64)}),
    ("cdist compute_mode", lambda lib, x: lib.cdist(x, x, compute_mode="x"), lambda lib: {"x": _t(lib, 3, 2)}),
]


@pytest.mark.parametrize("desc,call,inputs", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(desc, call, inputs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_raises_like_torch(desc, lambda lib, kw: call(lib, **kw), inputs)


# --- kiln.testing.assert_close: the same verdict, exception class and message as PyTorch's ---------
def _pair(lib, kind):
    t = lambda *a, **k: lib.tensor(*a, **k)  # noqa: E731
    return {
        "float32": (t([1.0, 2, 3]), t([1.0, 2.5, 3])),
        "float32 2-d": (t([[1.0, 2], [3, 4]]), t([[1.0, 2], [3, 5]])),
        "float32 close": (t([1.0, 2]), t([1.0, 2 + 1e-6])),
        "float64 close": (t([1.0], dtype=lib.float64), t([1.0 + 5e-8], dtype=lib.float64)),
        "float64 not close": (t([1.0], dtype=lib.float64), t([1.0 + 5e-7], dtype=lib.float64)),
        "float16": (t([1.0, 2], dtype=lib.float16), t([1.0, 2.001], dtype=lib.float16)),
        "bfloat16": (t([1.0, 2], dtype=lib.bfloat16), t([1.0, 2.5], dtype=lib.bfloat16)),
        "int64": (t([1, 2, 3]), t([1, 3, 3])),
        "bool": (t([True, False]), t([True, True])),
        "0-d": (t(1.0), t(2.0)),
        "shape": (t([1.0, 2]), t([1.0, 2, 3])),
        "dtype": (t([1.0, 2]), t([1.0, 2], dtype=lib.float64)),
        "floats": (1.0, 1.5),
        "ints": (1, 2),
        "int float": (1, 1.0),
        "list": ([t(1.0), t(2.0)], [t(1.0), t(3.0)]),
        "dict": ({"a": t(1.0)}, {"a": t(2.0)}),
        "nested": ({"a": [t([1.0]), (1, 2.0)]}, {"a": [t([1.0]), (1, 2.5)]}),
        "list tuple": ([1.0, 2.0], (1.0, 2.0)),
        "tensor list": (t([1.0, 2]), [1.0, 2]),
        "tensor number": (t([1.0, 2]), 1.0),
        "lengths": ([1, 2], [1, 2, 3]),
        "keys": ({"a": 1}, {"b": 1}),
        "nan": (t([math.nan]), t([math.nan])),
        "inf": (t([1.0]), t([math.inf])),
        "zero expected": (t([0.0, 1.0]), t([0.0, 0.0])),
        "empty": (t([]), t([])),
        "strings": ("a", "a"),
        "none": (None, None),
        "none mismatch": (None, 1),
        "bools": (True, False),
        "stride": (lib.ones(3, 2).t(), lib.ones(2, 3)),
    }[kind]


ASSERT_CLOSE = [
    ("float32", {}), ("float32 2-d", {}), ("float32 close", {}), ("float64 close", {}), ("float64 not close", {}),
    ("float16", {}), ("bfloat16", {}), ("int64", {}), ("bool", {}), ("0-d", {}), ("shape", {}), ("dtype", {}),
    ("dtype", {"check_dtype": False}), ("floats", {}), ("ints", {}), ("int float", {}),
    ("int float", {"check_dtype": False}), ("list", {}), ("dict", {}), ("nested", {}), ("list tuple", {}),
    ("tensor list", {}), ("tensor number", {}), ("lengths", {}), ("keys", {}), ("nan", {}),
    ("nan", {"equal_nan": True}), ("inf", {}), ("zero expected", {}), ("empty", {}), ("strings", {}), ("none", {}),
    ("none mismatch", {}), ("bools", {}), ("stride", {}), ("stride", {"check_stride": True}),
    ("float32", {"rtol": 0.3, "atol": 0}), ("float32", {"rtol": 0, "atol": 0}), ("float32", {"rtol": 0.2}),
    ("float32", {"msg": "custom"}), ("list", {"msg": "custom"}),
    ("float32", {"msg": lambda m: "wrapped: " + m}),
]


@pytest.mark.parametrize("kind,kwargs", ASSERT_CLOSE, ids=[f"{k}-{sorted(a)}" for k, a in ASSERT_CLOSE])
def test_assert_close_matches_torch(kind, kwargs):
    outcomes = []
    for lib in (torch, kiln):
        try:
            lib.testing.assert_close(*_pair(lib, kind), **kwargs)
            outcomes.append(None)
        except Exception as e:  # noqa: BLE001 (the class and message are what is compared)
            outcomes.append((type(e), str(e).replace("torch.", "kiln.")))
    assert outcomes[1] == outcomes[0]


@pytest.mark.parametrize("as_tuple", [False, True])
def test_nonzero_as_tuple_matches_torch(as_tuple):
    # nonzero(as_tuple=True): one index tensor per dim, a 0-d input counted as 1-d (detection code's
    # `(mask).nonzero(as_tuple=True)`)
    for data in (3.0, 0.0, [[1, 0], [0, 2]], [[True, False, True]]):
        want = torch.nonzero(torch.tensor(data), as_tuple=as_tuple)
        for got in (kiln.nonzero(kiln.tensor(data), as_tuple=as_tuple), kiln.tensor(data).nonzero(as_tuple=as_tuple)):
            if as_tuple:
                assert isinstance(got, tuple) and [g.tolist() for g in got] == [w.tolist() for w in want]
            else:
                assert got.tolist() == want.tolist() and tuple(got.shape) == tuple(want.shape)
    empty = kiln.zeros(0, 3)
    assert [tuple(t.shape) for t in kiln.nonzero(empty, as_tuple=True)] == [(0,), (0,)]
    with pytest.raises(RuntimeError, match="out kwarg"):
        kiln.nonzero(kiln.ones(2), out=kiln.empty(0, dtype=kiln.long), as_tuple=True)
    out = kiln.empty(0, dtype=kiln.long)
    assert kiln.nonzero(kiln.tensor([0, 5]), out=out) is out and out.tolist() == [[1]]
    # under kiln.compile: a data-dependent shape, so a graph break that returns eager's result
    kiln._dynamo.reset()
    step = kiln.compile(lambda x: [t * 2 for t in (x > 0).nonzero(as_tuple=True)])
    got = step(kiln.tensor([[1.0, -1.0], [2.0, 0.0]]))
    assert [g.tolist() for g in got] == [[0, 2], [0, 0]]


@pytest.mark.parametrize("call", [
    lambda lib: lib.broadcast_shapes((2, 1), (3,)), lambda lib: lib.broadcast_shapes(2, (3, 1)),
    lambda lib: lib.broadcast_shapes(), lambda lib: lib.broadcast_shapes((2,), (3,)),
    lambda lib: lib.broadcast_shapes((-1,), (2,)),
    lambda lib: [(tuple(t.shape), t.stride())
                 for t in lib.broadcast_tensors(lib.ones(2, 1), lib.ones(3), lib.ones(()))],
    lambda lib: lib.broadcast_tensors(lib.ones(2), lib.ones(3)),
])
def test_broadcast_shapes_and_tensors_as_torch(call):
    try:
        want = call(torch)
    except Exception as e:  # noqa: BLE001 - the same class and message expected
        with pytest.raises(type(e)) as got:
            call(kiln)
        assert str(got.value) == str(e)
        return
    got = call(kiln)
    assert (list(got) if not isinstance(got, list) else got) == (list(want) if not isinstance(want, list) else want)


def test_broadcast_tensors_are_views_with_gradients_compiled():
    def f(a, b):
        x, y = kiln.broadcast_tensors(a, b)
        return (x * y).sum()

    a, b = kiln.ones(2, 1, requires_grad=True), kiln.arange(3.0, requires_grad=True)
    f(a, b).backward()
    want = (a.grad.tolist(), b.grad.tolist())
    a.grad = b.grad = None
    kiln._dynamo.reset()
    kiln.compile(f, backend="aot_eager", fullgraph=True)(a, b).backward()
    assert (a.grad.tolist(), b.grad.tolist()) == want == ([[3.0], [3.0]], [2.0, 2.0, 2.0])
