"""Layouts of indexing and index-writing results against PyTorch 2.13: advanced indexing follows
the memory order of the input and the index tensors; out-of-place scatter-like writes are
row-major or keep self's layout as PyTorch's kernels do; flip and rot90 keep their input's layout
(also compiled). Strides are compared, with values, because a later .view() or in-place op on a
copy depends on them (each case names the fuzz program that found it)."""

import zlib

import numpy as np
import pytest

import kiln
from conftest import requires_torch, torch

pytestmark = requires_torch


@pytest.mark.parametrize("seed", range(3))
def test_advanced_index_result_is_laid_out_as_torchs(seed):
    # the result of x[i, j] follows the memory order of x and the index tensors, as PyTorch's
    # TensorIterator lays it out: with transposed indices `v[i, i].int().flatten()` copies (kiln's
    # row-major result was viewed: fuzz seed 281, program 1325)
    rng = np.random.default_rng(seed)
    checked = 0
    while checked < 60:
        nd = int(rng.integers(1, 4))
        shape = tuple(int(s) for s in rng.integers(1, 5, nd))
        perm = [int(p) for p in rng.permutation(nd)]
        dims = set(int(d) for d in rng.choice(nd, int(rng.integers(1, nd + 1)), replace=False))
        ishape = tuple(int(s) for s in rng.integers(1, 4, rng.integers(1, 3)))
        iperm = [int(p) for p in rng.permutation(len(ishape))]
        data = rng.standard_normal(shape)
        indices = {d: rng.integers(0, shape[perm[d]], ishape) for d in dims}

        def run(lib):
            x = lib.tensor(data).permute(*perm)
            key = []
            for d in range(nd):
                if d not in indices:
                    key.append(slice(None))
                    continue
                i = lib.tensor(indices[d])
                if len(ishape) > 1:  # an index tensor laid out in another order
                    i = i.permute(*iperm).contiguous().permute(*[int(a) for a in np.argsort(iperm)])
                key.append(i)
            r = x[tuple(key)]
            as_int = r.to(lib.int32)
            return tuple(r.shape), r.stride(), r.tolist(), as_int.flatten().data_ptr() == as_int.data_ptr()

        assert run(kiln) == run(torch)
        checked += 1


_WRITES_OUT_OF_PLACE = {
    "scatter": lambda L, x, i, s: x.scatter(0, i, s),
    "scatter_value": lambda L, x, i, s: x.scatter(1, i, 2.5),
    "scatter_add": lambda L, x, i, s: x.scatter_add(0, i, s),
    "scatter_reduce_sum": lambda L, x, i, s: x.scatter_reduce(0, i, s, "sum"),
    "scatter_reduce_amax": lambda L, x, i, s: x.scatter_reduce(1, i, s, "amax", include_self=False),
    "index_copy": lambda L, x, i, s: x.index_copy(0, L.tensor([2, 0]), s[:2]),
    "index_fill": lambda L, x, i, s: x.index_fill(1, L.tensor([1]), -1.0),
    "index_add": lambda L, x, i, s: x.index_add(0, L.tensor([1, 1]), s[:2]),
    "index_put": lambda L, x, i, s: x.index_put((L.tensor([0, 2]),), L.tensor(7.0, dtype=x.dtype)),
    "masked_fill": lambda L, x, i, s: x.masked_fill(x > 0, 3.0),
    "masked_fill_tensor": lambda L, x, i, s: x.masked_fill(x > 0, L.tensor(3.0)),
    "masked_scatter": lambda L, x, i, s: x.masked_scatter(x > 0, s),
    "put": lambda L, x, i, s: x.put(L.tensor([0, 5]), L.tensor([1.0, 2.0], dtype=x.dtype)),
}


@pytest.mark.parametrize("op", sorted(_WRITES_OUT_OF_PLACE))
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "gaps"])
def test_out_of_place_writes_are_laid_out_as_torchs(op, layout):
    # PyTorch's structured scatter, scatter_add, scatter_reduce and index_copy kernels, and
    # masked_fill and masked_scatter, make a row-major result whatever self's layout; index_fill,
    # index_put and put clone self's layout. A transposed self's scatter_add was column-major, and
    # its .view(-1) refused where PyTorch's works (fuzz seed 1141, program 4181)
    rng = np.random.default_rng(zlib.crc32(op.encode()))
    data, src = rng.standard_normal((3, 6)), rng.standard_normal((3, 6))
    index = rng.integers(0, 3, (3, 3))

    def run(L):
        x = L.tensor(data)
        x = {"contiguous": x, "transposed": L.tensor(data.T.copy()).t(), "gaps": L.tensor(np.repeat(data, 2, 1))[:, ::2]}[layout]
        out = _WRITES_OUT_OF_PLACE[op](L, x, L.tensor(index), L.tensor(src))
        return tuple(out.shape), out.stride(), out.tolist()

    assert run(kiln) == run(torch)


@pytest.mark.parametrize("backend", [None, "aot_eager", "inductor"])
def test_flip_and_rot90_keep_the_input_layout_as_torch(backend):
    # flip's result is laid out as its input: flip of a transposed x is transposed, so
    # .contiguous() copies it and an in-place op on the copy leaves the flip alone (kiln's
    # contiguous flip was returned by contiguous(), and sigmoid_ changed it: fuzz seed 281,
    # program 19137)
    data = np.arange(12.0).reshape(3, 4) / 7 - 0.5

    def f(x):
        v2 = x.flip(1)
        v3 = v2.contiguous()
        v3.sigmoid_()
        return v2, v3, x.flip(0, 1), x.rot90(), x[:, ::2].flip(0), x.expand(2, 4, 3).flip(0)

    kiln._dynamo.reset()
    got = (kiln.compile(f, backend=backend) if backend else f)(kiln.tensor(data).t())
    want = f(torch.tensor(data).t())
    for g, w in zip(got, want):
        assert g.stride() == w.stride()
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6)
