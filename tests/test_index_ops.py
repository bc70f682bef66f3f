"""Index, shape, ternary and random ops checked against PyTorch 2.13 (the oracle).

Each CASE is `fn(lib, T, I, rng, L)`, run once with torch and once with kiln from the same numpy
seed, so both libraries see identical inputs:
  T(shape, layout=None, dtype=None)  a random tensor of the case's dtype; layout "T" (transposed
                                     view) or "S" (strided view) makes it non-contiguous,
  I(data, dtype="int64")             an index tensor from Python data,
  rng                                numpy Generator for random indices / masks,
  L                                  the layout under test for the main input.
Every case runs for every dtype and for the contiguous, transposed and strided layouts. When
PyTorch returns, kiln must return the same dtype, shape and values, and every input (including
the ones mutated by in-place ops) must equal PyTorch's afterwards. When PyTorch raises, kiln must
raise the same (builtin) exception class with a message, leave its inputs unchanged, and live on.

Covered: cat/stack/split/chunk, gather/scatter/scatter_add/index_select, aten.index.Tensor and
x[...] advanced indexing, __setitem__/index_put_, masked_fill/masked_select, where, nonzero,
tril/triu, sort/argsort/topk, one_hot, pad, repeat/flip/roll, cumsum/cumprod, eye/linspace,
clamp*, lerp, addcmul/addcdiv; random ops by statistics and reproducibility; bad input.
"""

import zlib

import numpy as np
import pytest

import kiln
from conftest import DTYPE_NAMES, FLOAT_NAMES, assert_same, random_array, requires_torch, torch

pytestmark = requires_torch

LAYOUTS = ["C", "T", "S"]
NAN = float("nan")


def F(lib):
    """torch.nn.functional or kiln (which has pad/one_hot at top level)."""
    return lib.nn.functional if lib is torch else lib


def _builtin(cls):
    return next(c for c in cls.__mro__ if c.__module__ == "builtins")


def _make(lib, data, name, layout):
    from conftest import to_kiln, to_torch

    conv = to_kiln if lib is kiln else to_torch
    if layout == "T" and data.ndim >= 2:
        return conv(np.ascontiguousarray(np.swapaxes(data, -1, -2)), name).transpose(-1, -2)
    if layout == "S" and data.ndim >= 1 and data.shape[-1] > 0:
        return conv(np.repeat(data, 2, axis=-1), name)[..., ::2]
    return conv(data, name)


def _run(lib, fn, d, L, seed):
    rng = np.random.default_rng(seed)
    made = []

    def T(shape, layout=None, dtype=None, low=-3.0, high=3.0):
        name = dtype or d
        t = _make(lib, random_array(shape, name, rng, low, high), name, layout)
        made.append((t, t.tolist()))
        return t

    def I(data, dtype="int64"):  # noqa: E743
        return lib.tensor(data, dtype=getattr(lib, dtype))

    try:
        return fn(lib, T, I, rng, L), None, made
    except Exception as e:  # noqa: BLE001
        return None, e, made


def check(fn, d, L="C", seed=0, rtol=None, atol=None, compare=None):
    t_res, t_exc, t_made = _run(torch, fn, d, L, seed)
    k_res, k_exc, k_made = _run(kiln, fn, d, L, seed)
    if t_exc is not None:
        assert k_exc is not None, f"torch raised {type(t_exc).__name__}: {t_exc}; kiln returned {k_res}"
        assert _builtin(type(k_exc)) is _builtin(type(t_exc)), \
            f"kiln raised {type(k_exc).__name__}: {k_exc}; torch raised {type(t_exc).__name__}: {t_exc}"
        assert str(k_exc), "the message must say what went wrong"
        for k, before in k_made:
            assert k.tolist() == before, "inputs must be unchanged after an error"
        assert (kiln.ones(2) + 1).tolist() == [2.0, 2.0]
        return
    if k_exc is not None:
        raise AssertionError(f"kiln raised {type(k_exc).__name__}: {k_exc}; torch returned") from k_exc
    if compare is None:
        assert_same(k_res, t_res, rtol, atol)
    else:
        compare(k_res, t_res)
    for (k, _), (t, _) in zip(k_made, t_made):  # in-place effects (and no others) match
        assert_same(k, t)


# --- the case table ----------------------------------------------------------------------------
def _index_add_own_rows(x, I):
    # Rows 2-3 of self added to rows 0-1: a contiguous self overlaps its source partially (both
    # raise); a transposed or strided one is a layout the overlap test cannot judge, added as read.
    return x.index_add_(0, I([0, 1]), x[2:])


def _uniq_index(rng, rows, cols, size):
    """An index of shape (rows, cols) whose columns hold distinct values in [0, size)."""
    return np.stack([rng.permutation(size)[:rows] for _ in range(cols)], axis=1).tolist()


CASES = {
    # cat / stack / split / chunk
    "cat_dim0": lambda lib, T, I, rng, L: lib.cat([T((2, 3), L), T((4, 3))]),
    "cat_dim1": lambda lib, T, I, rng, L: lib.cat([T((2, 3), L), T((2, 1)), T((2, 0))], 1),
    "cat_neg_dim_3d": lambda lib, T, I, rng, L: lib.cat((T((2, 3, 2), L), T((2, 3, 1))), -1),
    "cat_mixed_dtypes": lambda lib, T, I, rng, L: lib.cat([T((2, 3), L), T((1, 3), dtype="float64"),
                                                          T((1, 3), dtype="int32")]),
    "cat_mixed_bool": lambda lib, T, I, rng, L: lib.cat([T((2,)), T((3,), dtype="bool")]),
    "cat_empty_1d_skipped": lambda lib, T, I, rng, L: lib.cat([T((0,)), T((2, 3), L), T((0,))]),
    "cat_zero_size": lambda lib, T, I, rng, L: lib.cat([T((0, 3)), T((0, 3))], 0),
    "cat_single": lambda lib, T, I, rng, L: lib.cat([T((3, 2), L)], 1),
    "stack_dim0": lambda lib, T, I, rng, L: lib.stack([T((2, 3), L), T((2, 3))]),
    "stack_dim2": lambda lib, T, I, rng, L: lib.stack([T((2, 3), L), T((2, 3)), T((2, 3))], 2),
    "stack_neg": lambda lib, T, I, rng, L: lib.stack([T((2, 3), L), T((2, 3))], -2),
    "stack_0dim": lambda lib, T, I, rng, L: lib.stack([T(()), T(()), T(())]),
    "stack_zero_size": lambda lib, T, I, rng, L: lib.stack([T((0, 2)), T((0, 2))], 1),
    "split_int": lambda lib, T, I, rng, L: T((5, 4), L).split(2),
    "split_int_dim1": lambda lib, T, I, rng, L: lib.split(T((3, 5), L), 3, 1),
    "split_sizes": lambda lib, T, I, rng, L: T((5, 4), L).split([1, 0, 4], 0),
    "split_sizes_fn": lambda lib, T, I, rng, L: lib.split(T((3, 5), L), [2, 3], dim=-1),
    "split_zero_size": lambda lib, T, I, rng, L: T((0, 4), L).split(2, 0),
    "chunk": lambda lib, T, I, rng, L: T((5, 4), L).chunk(3),
    "chunk_dim1": lambda lib, T, I, rng, L: lib.chunk(T((3, 6), L), 4, 1),
    "chunk_more_than_size": lambda lib, T, I, rng, L: T((2, 3), L).chunk(5, 1),
    # gather / scatter / index_select
    "gather_dim1": lambda lib, T, I, rng, L: T((3, 4), L).gather(1, I(rng.integers(0, 4, (2, 6)).tolist())),
    "gather_dim0": lambda lib, T, I, rng, L: lib.gather(T((3, 4), L), 0, I(rng.integers(0, 3, (5, 4)).tolist())),
    "gather_neg_index": lambda lib, T, I, rng, L: T((3, 4), L).gather(1, I([[-1, 0], [1, 2], [3, 3]])),
    "gather_0dim": lambda lib, T, I, rng, L: T(()).gather(0, I(0)),
    "gather_empty_index": lambda lib, T, I, rng, L: T((3, 4), L).gather(1, I(np.zeros((3, 0), np.int64))),
    "gather_3d": lambda lib, T, I, rng, L: T((2, 3, 4), L).gather(2, I(rng.integers(0, 4, (2, 3, 3)).tolist())),
    "scatter_src": lambda lib, T, I, rng, L: T((3, 4), L).scatter(0, I(_uniq_index(rng, 2, 4, 3)), T((2, 4))),
    "scatter_src_dim1": lambda lib, T, I, rng, L: lib.scatter(T((4, 3), L), 1, I(_uniq_index(rng, 2, 4, 3)).t(),
                                                              T((2, 5))),
    "scatter_value": lambda lib, T, I, rng, L: T((3, 4), L).scatter(1, I(rng.integers(0, 4, (3, 2)).tolist()), 2),
    "scatter_value_float": lambda lib, T, I, rng, L: lib.scatter(T((3, 4), L), 0, I([[0, 1, 2, 0]]), 1.5),
    "scatter_inplace": lambda lib, T, I, rng, L: T((3, 4), L).scatter_(0, I(_uniq_index(rng, 3, 4, 3)), T((3, 4))),
    "scatter_add": lambda lib, T, I, rng, L: T((3, 4), L).scatter_add(0, I(rng.integers(0, 3, (5, 4)).tolist()),
                                                                      T((5, 4))),
    "scatter_add_dim1": lambda lib, T, I, rng, L: lib.scatter_add(T((3, 4), L), 1,
                                                                  I(rng.integers(0, 4, (2, 3)).tolist()), T((3, 3))),
    "scatter_add_": lambda lib, T, I, rng, L: T((4,), L).scatter_add_(0, I([0, 0, 3, 3, 3]), T((5,))),
    # index_add: repeated indices accumulate in order; every kernel path (the 1-D loop, scatter_add
    # for the first/last dim with alpha 1, the slice loop otherwise)
    "index_add_dim0": lambda lib, T, I, rng, L: T((4, 3), L).index_add(0, I([3, 0, 3, 3, 1]), T((5, 3))),
    "index_add_dim1_alpha": lambda lib, T, I, rng, L: lib.index_add(T((3, 4), L), 1, I([2, 2, 0]), T((3, 3)),
                                                                    alpha=2),
    "index_add_middle_dim": lambda lib, T, I, rng, L: T((2, 3, 4), L).index_add(-2, I([1, 1], "int32"), T((2, 2, 4))),
    "index_add_1d": lambda lib, T, I, rng, L: T((5,), L).index_add(0, I([4, 0, 4]), T((3,)), alpha=-1),
    "index_add_0dim": lambda lib, T, I, rng, L: T(()).index_add(0, I(0), T(())),
    "index_add_0dim_index": lambda lib, T, I, rng, L: T((3,), L).index_add(0, I(1), T((1,))),
    "index_add_empty": lambda lib, T, I, rng, L: T((3, 4), L).index_add(0, I([], "int64"), T((0, 4))),
    "index_add_": lambda lib, T, I, rng, L: T((3, 4), L).index_add_(1, I([0, 3, 0]), T((3, 3), "T")),
    "index_add_rows_of_itself": lambda lib, T, I, rng, L: _index_add_own_rows(T((4, 3), L), I),
    "index_select_dim0": lambda lib, T, I, rng, L: T((4, 3), L).index_select(0, I([3, 0, 0, 2])),
    "index_select_dim1": lambda lib, T, I, rng, L: lib.index_select(T((2, 3, 4), L), 2, I([-1, 1])),
    "index_select_int32": lambda lib, T, I, rng, L: T((4, 3), L).index_select(1, I([2, 1], "int32")),
    "index_select_empty": lambda lib, T, I, rng, L: T((4, 3), L).index_select(0, I([], "int64")),
    "index_select_0dim": lambda lib, T, I, rng, L: T(()).index_select(0, I([0, 0])),
    # aten.index.Tensor and x[...]
    "index_Tensor": lambda lib, T, I, rng, L: lib.ops.aten.index.Tensor(T((4, 5, 3), L),
                                                                         [I([0, 3]), None, I([[1], [2]])]),
    "index_Tensor_single": lambda lib, T, I, rng, L: lib.ops.aten.index.Tensor(T((4, 5), L), [None, I([4, 4, 0])]),
    "index_Tensor_bool": lambda lib, T, I, rng, L: lib.ops.aten.index.Tensor(T((4, 5), L), [T((4,), dtype="bool")]),
    "getitem_tensor": lambda lib, T, I, rng, L: T((4, 5, 6), L)[I([0, 2, -1])],
    "getitem_list": lambda lib, T, I, rng, L: T((4, 5, 6), L)[[1, 0, 1]],
    "getitem_list_2nd_dim": lambda lib, T, I, rng, L: T((4, 5, 6), L)[:, [4, 0]],
    "getitem_0dim_index": lambda lib, T, I, rng, L: T((4, 5), L)[I(2)],
    "getitem_int32_index": lambda lib, T, I, rng, L: T((4, 5), L)[I([1, 3], "int32")],
    "getitem_empty_index": lambda lib, T, I, rng, L: T((4, 5), L)[I([], "int64")],
    "getitem_index_into_empty_rows": lambda lib, T, I, rng, L: T((0, 3), L)[:, I([[5]])],  # nothing read: no check
    # nothing written, so no index value is read (fuzz seed 81, program 3594)
    "index_put_empty_result": lambda lib, T, I, rng, L: T((1, 0)).index_put((I([[-5], [3]]),), T((1, 0))),
    "index_put_acc_empty_result": lambda lib, T, I, rng, L: T((1, 0)).index_put((I([7]),), T(()), accumulate=True),
    "getitem_2d_index": lambda lib, T, I, rng, L: T((4, 5), L)[I([[0, 1], [3, 2]])],
    "getitem_mask_full": lambda lib, T, I, rng, L: T((4, 5, 6), L)[T((4, 5, 6), dtype="bool")],
    "getitem_mask_dim0": lambda lib, T, I, rng, L: T((4, 5, 6), L)[T((4,), dtype="bool")],
    "getitem_mask_2d": lambda lib, T, I, rng, L: T((4, 5, 6), L)[T((4, 5), dtype="bool")],
    "getitem_mask_after_slice": lambda lib, T, I, rng, L: T((4, 5, 6), L)[:, T((5, 6), dtype="bool")],
    "getitem_mask_uint8": lambda lib, T, I, rng, L: T((4, 5), L)[I([1, 0, 1, 1], "uint8")],
    "getitem_bool_list": lambda lib, T, I, rng, L: T((4, 5), L)[[True, False, True, True]],
    "getitem_mask_0dim": lambda lib, T, I, rng, L: T((3,), L)[I(True, "bool")],
    "getitem_broadcast": lambda lib, T, I, rng, L: T((4, 5, 6), L)[I([[0], [2]]), I([1, 3, 4])],
    "getitem_nonadjacent": lambda lib, T, I, rng, L: T((4, 5, 6), L)[I([0, 1]), :, I([2, 3])],
    "getitem_nonadjacent_bcast": lambda lib, T, I, rng, L: T((4, 5, 6), L)[I([[0], [3]]), 1:4, I([5, 0, 1])],
    "getitem_adjacent_middle": lambda lib, T, I, rng, L: T((4, 5, 6), L)[1:3, I([0, 4]), I([5, 2])],
    "getitem_int_and_tensor": lambda lib, T, I, rng, L: T((4, 5, 6), L)[1, I([0, 2]), :],
    "getitem_tensor_int_tensor": lambda lib, T, I, rng, L: T((4, 5, 6), L)[I([0, 1]), 1, I([2, 3])],
    "getitem_none_ellipsis": lambda lib, T, I, rng, L: T((4, 5, 6), L)[None, I([1, 2]), ..., ::2],
    "getitem_ellipsis_tensor": lambda lib, T, I, rng, L: T((4, 5, 6), L)[..., I([0, 5])],
    "getitem_slice_mask_none": lambda lib, T, I, rng, L: T((4, 5, 6), L)[1:, None, T((5,), dtype="bool")],
    "getitem_mask_and_tensor": lambda lib, T, I, rng, L: T((4, 5, 6), L)[T((4,), dtype="bool").fill_(True),
                                                                          I([0, 1, 2, 3])],
    "getitem_true_false": lambda lib, T, I, rng, L: (T((3, 2), L)[True], T((3, 2), L)[False], T((3, 2), L)[None]),
    "getitem_0dim_tensor": lambda lib, T, I, rng, L: (T(())[None], T(())[...], T(())[True], T(())[False]),
    "getitem_zero_size": lambda lib, T, I, rng, L: (T((0, 3), L)[I([], "int64")], T((2, 0), L)[I([1, 0])],
                                                    T((0, 3), L)[:, I([2])]),
    # __setitem__ / index_put_
    "setitem_mask_scalar": lambda lib, T, I, rng, L: _set(T((4, 5), L), T((4, 5), dtype="bool"), 7),
    "setitem_mask_row": lambda lib, T, I, rng, L: _set(T((4, 5), L), T((4,), dtype="bool"), T((5,))),
    "setitem_index_scalar": lambda lib, T, I, rng, L: _set(T((4, 5), L), I([3, 0]), 1),
    "setitem_index_broadcast": lambda lib, T, I, rng, L: _set(T((4, 5), L), I([3, 0]), T((1, 5))),
    "setitem_two_indices": lambda lib, T, I, rng, L: _set(T((4, 5), L), (I([0, 1, 3]), I([4, 4, 2])), T((3,))),
    "setitem_slice_and_index": lambda lib, T, I, rng, L: _set(T((4, 5, 3), L), (slice(1, 3), I([0, 4])), T((3,))),
    "setitem_nonadjacent": lambda lib, T, I, rng, L: _set(T((4, 5, 3), L), (I([0, 2]), slice(None), I([1, 1])),
                                                          T((2, 5))),
    "setitem_other_dtype": lambda lib, T, I, rng, L: _set(T((4, 5), L), I([2]), T((5,), dtype="float64")),
    "setitem_ellipsis": lambda lib, T, I, rng, L: _set(T((4, 5), L), (Ellipsis, I([1])), T((4, 1))),
    "setitem_list": lambda lib, T, I, rng, L: _set(T((4, 5), L), [0, 2], 0),
    "index_put_": lambda lib, T, I, rng, L: T((4, 5), L).index_put_((I([0, 2]), I([1, 1])), T((2,))),
    "index_put_accumulate": lambda lib, T, I, rng, L: T((4, 5), L).index_put_((I([0, 0, 2, 0]), I([1, 1, 3, 1])),
                                                                              T((4,)), accumulate=True),
    "index_put_accumulate_bcast": lambda lib, T, I, rng, L: T((4, 5), L).index_put_([I([3, 3, 1])], T((5,)),
                                                                                    accumulate=True),
    "index_put_mask": lambda lib, T, I, rng, L: T((4, 5), L).index_put_((T((4, 5), dtype="bool"),), T(())),
    "index_put_functional": lambda lib, T, I, rng, L: lib.ops.aten.index_put.default(
        T((4, 5), L), [None, I([0, 0])], T((4, 2)), True),
    # masked_fill / masked_select / where / nonzero
    "masked_fill_scalar": lambda lib, T, I, rng, L: T((3, 4), L).masked_fill(T((3, 4), dtype="bool"), 2),
    "masked_fill_float": lambda lib, T, I, rng, L: lib.masked_fill(T((3, 4), L), T((4,), dtype="bool"), -1.5),
    "masked_fill_tensor": lambda lib, T, I, rng, L: T((3, 4), L).masked_fill(T((3, 1), dtype="bool"), T(())),
    "masked_fill_": lambda lib, T, I, rng, L: T((2, 3, 4), L).masked_fill_(T((3, 4), dtype="bool"), 0),
    "masked_fill_0dim": lambda lib, T, I, rng, L: T(()).masked_fill(T((), dtype="bool"), 1),
    "masked_select": lambda lib, T, I, rng, L: T((3, 4), L).masked_select(T((3, 4), dtype="bool")),
    "masked_select_bcast": lambda lib, T, I, rng, L: lib.masked_select(T((3, 4), L), T((4,), dtype="bool")),
    "masked_select_bcast_self": lambda lib, T, I, rng, L: lib.masked_select(T((4,)), T((3, 4), L, dtype="bool")),
    "masked_select_empty": lambda lib, T, I, rng, L: T((0, 4), L).masked_select(T((0, 4), dtype="bool")),
    "where": lambda lib, T, I, rng, L: lib.where(T((3, 4), dtype="bool"), T((3, 4), L), T((3, 4))),
    "where_bcast": lambda lib, T, I, rng, L: lib.where(T((4,), dtype="bool"), T((3, 1), L), T((3, 4), L)),
    "where_mixed": lambda lib, T, I, rng, L: lib.where(T((3, 4), dtype="bool"), T((3, 4), L), T((3, 4), dtype="int32")),
    "where_mixed_f64": lambda lib, T, I, rng, L: lib.where(T((3, 4), dtype="bool"), T((3, 4), L),
                                                           T((4,), dtype="float64")),
    "where_scalar_other": lambda lib, T, I, rng, L: lib.where(T((3, 4), dtype="bool"), T((3, 4), L), 2),
    "where_scalar_other_f": lambda lib, T, I, rng, L: lib.where(T((3, 4), dtype="bool"), T((3, 4), L), 2.5),
    "where_scalar_self": lambda lib, T, I, rng, L: lib.where(T((3, 4), dtype="bool"), 0, T((3, 4), L)),
    "where_scalars": lambda lib, T, I, rng, L: (lib.where(T((3, 4), L, dtype="bool"), 1.0, 0.0),
                                                lib.where(T((3,), dtype="bool"), 1, 0)),
    "where_method": lambda lib, T, I, rng, L: T((3, 4), L).where(T((3, 4), dtype="bool"), T(())),
    "where_condition": lambda lib, T, I, rng, L: lib.where(T((3, 4), L)),
    "where_condition_0dim": lambda lib, T, I, rng, L: lib.where(T(())),
    "nonzero": lambda lib, T, I, rng, L: T((3, 4), L).nonzero(),
    "nonzero_3d": lambda lib, T, I, rng, L: lib.nonzero(T((2, 3, 4), L)),
    "nonzero_0dim": lambda lib, T, I, rng, L: T(()).nonzero(),
    "nonzero_empty": lambda lib, T, I, rng, L: T((2, 0), L).nonzero(),
    # tril / triu
    "tril": lambda lib, T, I, rng, L: [T((4, 5), L).tril(k) for k in (-5, -1, 0, 2, 6)],
    "triu": lambda lib, T, I, rng, L: [lib.triu(T((5, 4), L), k) for k in (-5, -1, 0, 2, 6)],
    "tril_batched": lambda lib, T, I, rng, L: (lib.tril(T((2, 3, 4), L)), T((2, 3, 4), L).triu(1)),
    "tril_inplace": lambda lib, T, I, rng, L: (T((3, 3), L).tril_(-1), T((3, 4), L).triu_()),
    "tril_empty": lambda lib, T, I, rng, L: (T((0, 3), L).tril(), T((3, 0), L).triu()),
    # sort / argsort / topk (stable sorts compare indices; unstable ones values only)
    "sort_stable": lambda lib, T, I, rng, L: T((3, 7), L).sort(stable=True),
    "sort_stable_desc": lambda lib, T, I, rng, L: lib.sort(T((3, 7), L), dim=0, descending=True, stable=True),
    "sort_stable_3d": lambda lib, T, I, rng, L: T((2, 5, 3), L).sort(1, stable=True),
    "sort_values": lambda lib, T, I, rng, L: T((3, 7), L).sort(descending=True)[0],
    "sort_0dim": lambda lib, T, I, rng, L: T(()).sort(stable=True),
    "sort_empty": lambda lib, T, I, rng, L: T((0, 3), L).sort(0, stable=True),
    "sort_nan": lambda lib, T, I, rng, L: (I([[1.0, NAN, -1.0, NAN, 0.0, 1.0]], "float32").sort(stable=True),
                                           I([1.0, NAN, -1.0, NAN, 1.0], "float64").sort(descending=True, stable=True),
                                           I([1.0, NAN, -1.0, 2.0], "float32").topk(2),
                                           I([1.0, NAN, -1.0, 2.0], "float32").topk(2, largest=False)),
    "topk_unsorted": lambda lib, T, I, rng, L: T((3, 7), L).topk(3, sorted=False)[0].sort(stable=True)[0],
    "argsort_stable": lambda lib, T, I, rng, L: T((4, 6), L).argsort(stable=True),
    "argsort_stable_desc": lambda lib, T, I, rng, L: lib.argsort(T((4, 6), L), 0, descending=True, stable=True),
    # one_hot / pad / repeat / flip / roll / cumsum / cumprod
    "one_hot": lambda lib, T, I, rng, L: F(lib).one_hot(I(rng.integers(0, 5, (3, 4)).tolist()), 6),
    "one_hot_infer": lambda lib, T, I, rng, L: (F(lib).one_hot(I([0, 3, 1])), F(lib).one_hot(I(2), 4)),
    "one_hot_empty": lambda lib, T, I, rng, L: F(lib).one_hot(I([], "int64"), 3),
    "pad_constant": lambda lib, T, I, rng, L: F(lib).pad(T((2, 3), L), (1, 2)),
    "pad_constant_value": lambda lib, T, I, rng, L: F(lib).pad(T((2, 3, 4), L), (0, 1, 2, 0), value=1),
    "pad_constant_negative": lambda lib, T, I, rng, L: F(lib).pad(T((3, 4), L), (-1, 1, 0, -2)),
    "pad_reflect_1d": lambda lib, T, I, rng, L: F(lib).pad(T((2, 5), L), (2, 3), mode="reflect"),
    "pad_reflect_2d": lambda lib, T, I, rng, L: F(lib).pad(T((1, 4, 5), L), (1, 2, 3, 0), mode="reflect"),
    "pad_replicate_1d": lambda lib, T, I, rng, L: F(lib).pad(T((2, 2, 3), L), (3, 1), mode="replicate"),
    "pad_replicate_2d": lambda lib, T, I, rng, L: F(lib).pad(T((2, 3, 4), L), (1, 1, 2, 2), mode="replicate"),
    "pad_circular_1d": lambda lib, T, I, rng, L: F(lib).pad(T((1, 2, 4), L), (2, 1), mode="circular"),
    "pad_circular_2d": lambda lib, T, I, rng, L: F(lib).pad(T((1, 2, 3, 4), L), (1, 2, 2, 1), mode="circular"),
    "repeat": lambda lib, T, I, rng, L: T((2, 3), L).repeat(2, 1),
    "repeat_more_dims": lambda lib, T, I, rng, L: T((2, 3), L).repeat((2, 1, 3)),
    "repeat_0dim_zero": lambda lib, T, I, rng, L: (T(()).repeat(3), T((2,), L).repeat(0, 2)),
    "flip": lambda lib, T, I, rng, L: (T((3, 4), L).flip(0), lib.flip(T((2, 3, 4), L), (0, -1)), T(()).flip(0)),
    "flip_empty": lambda lib, T, I, rng, L: T((0, 4), L).flip(1),
    "roll": lambda lib, T, I, rng, L: (T((3, 4), L).roll(2), lib.roll(T((3, 4), L), (1, -2), (0, 1)),
                                       T((3, 4), L).roll(-5, 1)),
    "roll_empty": lambda lib, T, I, rng, L: (T((0, 3), L).roll(1, 0), T((0,)).roll(2)),
    "cumsum": lambda lib, T, I, rng, L: (T((3, 4), L).cumsum(0), lib.cumsum(T((2, 3, 4), L), -1), T(()).cumsum(0)),
    "cumsum_dtype": lambda lib, T, I, rng, L: (T((3, 4), L).cumsum(1, dtype=lib.float64),
                                               T((5,)).cumsum(0, dtype=lib.int32)),
    "cumsum_": lambda lib, T, I, rng, L: T((3, 4), L).cumsum_(1),
    "cumprod": lambda lib, T, I, rng, L: (T((3, 4), L, low=0.5, high=1.5).cumprod(0), lib.cumprod(T((4,), L), 0)),
    "cumprod_dtype": lambda lib, T, I, rng, L: T((3, 4), L).cumprod(-1, dtype=lib.float64),
    "cum_empty": lambda lib, T, I, rng, L: (T((0, 3), L).cumsum(0), T((0, 3), L).cumprod(1)),
    # clamp / lerp / addcmul / addcdiv
    "clamp_scalars": lambda lib, T, I, rng, L: (T((3, 4), L).clamp(-1, 1), lib.clamp(T((3, 4), L), min=0),
                                                T((3, 4), L).clamp(max=1)),
    "clamp_float_bounds": lambda lib, T, I, rng, L: T((3, 4), L).clamp(-1.5, 0.5),
    "clamp_min_gt_max": lambda lib, T, I, rng, L: T((3, 4), L).clamp(2, -2),
    "clamp_tensor": lambda lib, T, I, rng, L: lib.clamp(T((3, 4), L), T((4,)), T((3, 1))),
    "clamp_tensor_min_only": lambda lib, T, I, rng, L: T((3, 4), L).clamp(min=T((3, 4))),
    "clamp_none": lambda lib, T, I, rng, L: T((3, 4), L).clamp(),
    "clamp_": lambda lib, T, I, rng, L: T((3, 4), L).clamp_(-1, 1),
    "clamp_min_max": lambda lib, T, I, rng, L: (T((3, 4), L).clamp_min(0), lib.clamp_max(T((3, 4), L), 1),
                                                T((3, 4), L).clamp_min_(1), T((2,), L).clamp_max_(0)),
    "clamp_min_max_tensor": lambda lib, T, I, rng, L: (lib.clamp_min(T((3, 4), L), T((4,))),
                                                       T((3, 4), L).clamp_max(T((3, 1))),
                                                       T((3, 4), L).clamp_min_(T((4,))), T((2, 3), L).clamp_max_(T(()))),
    "clamp_min_max_tensor_promote": lambda lib, T, I, rng, L: (lib.clamp_min(T((3, 4), dtype="int64"), T((4,))),
                                                               lib.clamp_max(T((3,), dtype="bool"), T((3,), dtype="bool"))),
    "clamp_0dim_empty": lambda lib, T, I, rng, L: (T(()).clamp(0, 1), T((0, 3), L).clamp(0, 1)),
    "lerp_scalar": lambda lib, T, I, rng, L: lib.lerp(T((3, 4), L), T((3, 4)), 0.3),
    "lerp_tensor": lambda lib, T, I, rng, L: T((3, 4), L).lerp(T((4,)), T((3, 1), low=0, high=1)),
    "lerp_": lambda lib, T, I, rng, L: T((3, 4), L).lerp_(T((3, 4)), 0.75),
    "addcmul": lambda lib, T, I, rng, L: (lib.addcmul(T((3, 4), L), T((3, 4)), T((4,))),
                                          T((3, 4), L).addcmul(T((3, 1)), T((3, 4)), value=2)),
    "addcmul_": lambda lib, T, I, rng, L: T((3, 4), L).addcmul_(T((3, 4)), T((3, 4)), value=0.5),
    "addcdiv": lambda lib, T, I, rng, L: lib.addcdiv(T((3, 4), L), T((3, 4)), T((4,), low=0.5, high=2), value=0.5),
    "addcdiv_": lambda lib, T, I, rng, L: T((3, 4), L).addcdiv_(T((3, 4)), T((3, 4), low=0.5, high=2)),
}


def _set(x, key, value):
    x[key] = value
    return x


# Factories take no random input: checked once per dtype.
FACTORIES = {
    "eye": lambda lib, d: (lib.eye(3, dtype=d), lib.eye(2, 4, dtype=d), lib.eye(0, dtype=d), lib.eye(3, 0, dtype=d)),
    "linspace": lambda lib, d: (lib.linspace(0, 1, 5, dtype=d), lib.linspace(-2, 3, 7, dtype=d),
                                lib.linspace(3, -3, 4, dtype=d), lib.linspace(30, 3, 4, dtype=d),
                                lib.linspace(0.5, 3.7, 4, dtype=d), lib.linspace(1, 2, 1, dtype=d),
                                lib.linspace(1, 2, 0, dtype=d)),
    "linspace_default": lambda lib, d: (lib.linspace(0, 10, 11), lib.linspace(0.5, 1, 3)),
}


@pytest.mark.filterwarnings("ignore:indexing with dtype torch.uint8 is now deprecated")
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("case", list(CASES), ids=str)
def test_matches_torch(case, dtype, layout):
    check(CASES[case], dtype, layout, seed=zlib.crc32(case.encode()) % 1000)


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("case", list(FACTORIES), ids=str)
def test_factories_match_torch(case, dtype):
    check(lambda lib, T, I, rng, L: FACTORIES[case](lib, getattr(lib, dtype)), dtype)


# --- ops whose result is only partly determined (ties): values, plus consistency ---------------
def _values_and_consistent(k, t):
    kv, ki = k
    tv, _ = t
    assert_same(kv, tv)
    assert str(ki.dtype) == "kiln.int64" and tuple(ki.shape) == tuple(kv.shape)


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("args", [dict(k=2), dict(k=3, largest=False), dict(k=2, dim=0), dict(k=0),
                                  dict(k=7, largest=False), dict(k=1, dim=0, largest=False)], ids=str)
def test_topk_and_sort_values(dtype, layout, args):
    def topk(lib, T, I, rng, L):
        x = T((3, 7), L)
        v, i = x.topk(**args)
        assert_same(x.gather(args.get("dim", -1), i), v)  # the indices point at the values
        return v, i

    check(topk, dtype, layout, compare=_values_and_consistent)

    def sort(lib, T, I, rng, L):
        x = T((3, 7), L)
        v, i = x.sort(dim=args.get("dim", -1), descending=args.get("largest", True))
        assert_same(x.gather(args.get("dim", -1), i), v)
        return v, i

    check(sort, dtype, layout, compare=_values_and_consistent)


def test_stable_sort_keeps_ties_in_order():
    x = kiln.tensor([2, 1, 2, 1, 2, 1, 0])
    assert x.sort(stable=True)[1].tolist() == [6, 1, 3, 5, 0, 2, 4]
    assert x.sort(descending=True, stable=True)[1].tolist() == [0, 2, 4, 1, 3, 5, 6]


# --- bad input -------------------------------------------------------------------------------
BAD = {
    "gather index out of range": lambda lib, T, I, rng, L: T((3, 4)).gather(1, I([[4]])),
    "gather negative out of range": lambda lib, T, I, rng, L: T((3, 4)).gather(1, I([[-5]])),
    "gather float index": lambda lib, T, I, rng, L: T((3, 4)).gather(1, I([[0.0]], "float32")),
    "gather dim out of range": lambda lib, T, I, rng, L: T((3, 4)).gather(2, I([[0]])),
    "gather index ndim mismatch": lambda lib, T, I, rng, L: T((3, 4)).gather(1, I([0])),
    "gather index too large": lambda lib, T, I, rng, L: T((3, 4)).gather(1, I(np.zeros((4, 1), np.int64))),
    "scatter index out of range": lambda lib, T, I, rng, L: T((3, 4)).scatter_(0, I([[3, 0, 0, 0]]), T((1, 4))),
    "scatter late bad index": lambda lib, T, I, rng, L: T((3, 4)).scatter_(1, I([[0, 1, 4]]), T((1, 3))),
    "scatter value late bad index": lambda lib, T, I, rng, L: T((3, 4)).scatter_(0, I([[0, 1], [2, -1]]), 1.0),
    "scatter_add late bad index": lambda lib, T, I, rng, L: T((3,)).scatter_add_(0, I([0, 1, 2, 3]), T((4,))),
    "index_put_ late bad index": lambda lib, T, I, rng, L: T((3, 2)).index_put_((I([0, 2, 3]), I([1, 1, 0])), T(()),
                                                                                accumulate=True),
    "setitem late bad index": lambda lib, T, I, rng, L: _set(T((3, 2)), (slice(None), I([0, 1, -3])), 5),
    "scatter src dtype": lambda lib, T, I, rng, L: T((3, 4)).scatter_(0, I([[0]]), T((1, 1), dtype="float64")),
    "scatter_add index out of range": lambda lib, T, I, rng, L: T((3,)).scatter_add_(0, I([5]), T((1,))),
    "scatter_add float index": lambda lib, T, I, rng, L: T((3,)).scatter_add_(0, I([0.0], "float32"), T((1,))),
    "index_add index out of range": lambda lib, T, I, rng, L: T((3, 4)).index_add_(0, I([0, 3]), T((2, 4))),
    "index_add negative index": lambda lib, T, I, rng, L: T((3, 4)).index_add_(1, I([-1]), T((3, 1))),
    "index_add 1-D out of range": lambda lib, T, I, rng, L: T((3,)).index_add_(0, I([1, 5]), T((2,))),
    "index_add slice loop out of range": lambda lib, T, I, rng, L: T((3, 4)).index_add_(0, I([0, 3]), T((2, 4)),
                                                                                         alpha=2),
    "index_add 2-D index": lambda lib, T, I, rng, L: T((3, 4)).index_add(0, I([[0]]), T((1, 4))),
    "index_add float index": lambda lib, T, I, rng, L: T((3, 4)).index_add(0, I([0.0], "float32"), T((1, 4))),
    "index_add dtype mismatch": lambda lib, T, I, rng, L: T((3, 4)).index_add(0, I([0]), T((1, 4), dtype="float64")),
    "index_add count mismatch": lambda lib, T, I, rng, L: T((3, 4)).index_add(0, I([0, 1, 2]), T((2, 4))),
    "index_add shape mismatch": lambda lib, T, I, rng, L: T((3, 4)).index_add(0, I([0, 1]), T((2, 5))),
    "index_add dim beyond source": lambda lib, T, I, rng, L: T((3, 4)).index_add(1, I([0, 1]), T((2,))),
    "index_add 0-d source, 2 indices": lambda lib, T, I, rng, L: T((3,)).index_add(0, I([0, 1]), T(())),
    "index_add expanded self": lambda lib, T, I, rng, L: T((1, 4)).expand(3, 4).index_add_(0, I([0]), T((1, 4))),
    "index_add self as source": lambda lib, T, I, rng, L: (lambda x: x.index_add_(0, I([1, 0]), x))(T((2, 3))),
    "index_select out of range": lambda lib, T, I, rng, L: T((3, 4)).index_select(0, I([3])),
    "index_select 2-D index": lambda lib, T, I, rng, L: T((3, 4)).index_select(0, I([[0]])),
    "index_select float index": lambda lib, T, I, rng, L: T((3, 4)).index_select(0, I([0.0], "float32")),
    "getitem tensor out of range": lambda lib, T, I, rng, L: T((3, 4))[I([0, 3])],
    # an index into an empty dim raises though the result is empty (fuzz seed 71, program 2274)
    "getitem index into an empty dim": lambda lib, T, I, rng, L: T((0, 0))[:, I([[1], [2]])],
    "getitem index into an empty middle dim": lambda lib, T, I, rng, L: T((2, 0, 3))[:, I([1])],
    "setitem index into an empty dim": lambda lib, T, I, rng, L: _set(T((2, 0)), (slice(None), I([0])), 1),
    "getitem negative out of range": lambda lib, T, I, rng, L: T((3, 4))[:, I([-5])],
    "getitem list out of range": lambda lib, T, I, rng, L: T((3, 4))[[0, 7]],
    "getitem float index tensor": lambda lib, T, I, rng, L: T((3, 4))[I([0.0], "float32")],
    "getitem mask shape mismatch": lambda lib, T, I, rng, L: T((3, 4))[I([True, False], "bool")],
    "getitem indices don't broadcast": lambda lib, T, I, rng, L: T((3, 4))[I([0, 1]), I([0, 1, 2])],
    "getitem too many indices": lambda lib, T, I, rng, L: T((3, 4))[I([0]), I([0]), I([0])],
    "index.Tensor out of range": lambda lib, T, I, rng, L: lib.ops.aten.index.Tensor(T((3, 4)), [None, I([4])]),
    "setitem index out of range": lambda lib, T, I, rng, L: _set(T((3, 4)), I([5]), 1),
    "setitem value shape mismatch": lambda lib, T, I, rng, L: _set(T((3, 4)), I([0, 1]), T((3,))),
    "setitem value dtype": lambda lib, T, I, rng, L: _set(T((3, 4)), I([0]), T((4,), dtype="float64")),
    "setitem mask shape mismatch": lambda lib, T, I, rng, L: _set(T((3, 4)), I([True], "bool"), 0),
    "index_put_ out of range": lambda lib, T, I, rng, L: T((3,)).index_put_((I([3]),), T((1,)), accumulate=True),
    "index_put_ value dtype": lambda lib, T, I, rng, L: T((3,)).index_put_((I([0]),), T((1,), dtype="float64")),
    # the index count is checked before the dtypes (fuzz seed 91, program 63)
    "index_put_ into 0-d, value dtype": lambda lib, T, I, rng, L: T(()).index_put((I(0),), T((), dtype="float64")),
    "index_put_ into 0-d, bool index": lambda lib, T, I, rng, L: T(()).index_put((I(True, "bool"),), T(())),
    "masked_fill non-bool mask": lambda lib, T, I, rng, L: T((3,)).masked_fill(I([1, 0, 1]), 0),
    "masked_fill mask shape": lambda lib, T, I, rng, L: T((3,)).masked_fill(T((2,), dtype="bool"), 0),
    "masked_fill_ mask grows self": lambda lib, T, I, rng, L: T((3,)).masked_fill_(T((2, 3), dtype="bool"), 0),
    "masked_fill value not 0-dim": lambda lib, T, I, rng, L: T((3,)).masked_fill(T((3,), dtype="bool"), T((3,))),
    "masked_select non-bool mask": lambda lib, T, I, rng, L: T((3,)).masked_select(I([1, 0, 1])),
    "where non-bool condition": lambda lib, T, I, rng, L: lib.where(T((3,)), T((3,)), T((3,))),
    "where shape mismatch": lambda lib, T, I, rng, L: lib.where(T((3,), dtype="bool"), T((2,)), T((3,))),
    "cat shape mismatch": lambda lib, T, I, rng, L: lib.cat([T((2, 3)), T((2, 4))]),
    "cat empty list": lambda lib, T, I, rng, L: lib.cat([]),
    "cat dim out of range": lambda lib, T, I, rng, L: lib.cat([T((2, 3)), T((2, 3))], 2),
    "cat 0-dim": lambda lib, T, I, rng, L: lib.cat([T(()), T(())]),
    "stack shape mismatch": lambda lib, T, I, rng, L: lib.stack([T((2, 3)), T((3, 2))]),
    "stack empty list": lambda lib, T, I, rng, L: lib.stack([]),
    "split sizes don't sum": lambda lib, T, I, rng, L: T((5,)).split([2, 2]),
    "split size zero": lambda lib, T, I, rng, L: T((5,)).split(0),
    "chunk zero": lambda lib, T, I, rng, L: T((5,)).chunk(0),
    "tril of 1-D": lambda lib, T, I, rng, L: T((3,)).tril(),
    "sort dim out of range": lambda lib, T, I, rng, L: T((3,)).sort(1),
    "topk k too large": lambda lib, T, I, rng, L: T((3,)).topk(4),
    "topk negative k": lambda lib, T, I, rng, L: T((3,)).topk(-1),
    "one_hot negative": lambda lib, T, I, rng, L: F(lib).one_hot(I([-1, 0]), 3),
    "one_hot too small": lambda lib, T, I, rng, L: F(lib).one_hot(I([0, 3]), 3),
    "one_hot float input": lambda lib, T, I, rng, L: F(lib).one_hot(I([0.0], "float32"), 3),
    "pad odd length": lambda lib, T, I, rng, L: F(lib).pad(T((2, 3)), (1,)),
    "pad reflect too large": lambda lib, T, I, rng, L: F(lib).pad(T((1, 2, 3)), (3, 0), mode="reflect"),
    "pad bad mode": lambda lib, T, I, rng, L: F(lib).pad(T((1, 2, 3)), (1, 1), mode="wrap"),
    "pad too many dims": lambda lib, T, I, rng, L: F(lib).pad(T((3,)), (1, 1, 1, 1)),
    "repeat fewer dims": lambda lib, T, I, rng, L: T((2, 3)).repeat(2),
    "repeat negative": lambda lib, T, I, rng, L: T((2, 3)).repeat(2, -1),
    "flip repeated dim": lambda lib, T, I, rng, L: T((2, 3)).flip((0, 0)),
    "roll shifts/dims length": lambda lib, T, I, rng, L: T((2, 3)).roll((1, 2), (0,)),
    "cumsum dim out of range": lambda lib, T, I, rng, L: T((2, 3)).cumsum(2),
    "eye negative": lambda lib, T, I, rng, L: lib.eye(-1),
    "linspace negative steps": lambda lib, T, I, rng, L: lib.linspace(0, 1, -1),
    "clamp no bounds tensor": lambda lib, T, I, rng, L: lib.clamp(T((3,)), None, None),
    "clamp_min_ float into int": lambda lib, T, I, rng, L: T((3,), dtype="int64").clamp_min_(T((3,))),
    "clamp_max broadcast mismatch": lambda lib, T, I, rng, L: lib.clamp_max(T((3,)), T((2,))),
    "clamp_ float into int": lambda lib, T, I, rng, L: T((3,), dtype="int64").clamp_(T((3,)), None),
    "lerp int": lambda lib, T, I, rng, L: lib.lerp(T((3,), dtype="int64"), T((3,), dtype="int64"), 0.5),
    "lerp dtype mismatch": lambda lib, T, I, rng, L: lib.lerp(T((3,)), T((3,), dtype="float64"), 0.5),
    "addcdiv ints": lambda lib, T, I, rng, L: lib.addcdiv(T((3,), dtype="int64"), T((3,), dtype="int64"),
                                                          T((3,), dtype="int64")),
    "addcmul broadcast": lambda lib, T, I, rng, L: lib.addcmul(T((3,)), T((2,)), T((3,))),
}


@pytest.mark.parametrize("case", list(BAD), ids=str)
def test_bad_input_raises_like_torch(case):
    t_res, t_exc, _ = _run(torch, BAD[case], "float32", "C", 0)
    assert t_exc is not None, f"torch accepts {case}: the case is wrong"
    check(BAD[case], "float32")


# --- random ops ------------------------------------------------------------------------------
def _np(t):
    return np.array(t.tolist(), dtype=np.float64)


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_rand_randn_statistics(dtype):
    kiln.manual_seed(0)
    d = getattr(kiln, dtype)
    u = kiln.rand(200, 100, dtype=d)
    assert u.dtype == d and tuple(u.shape) == (200, 100)
    a = _np(u)
    assert a.min() >= 0 and a.max() <= 1 and (dtype in ("float16", "bfloat16") or a.max() < 1)
    assert abs(a.mean() - 0.5) < 0.02 and abs(a.std() - (1 / 12) ** 0.5) < 0.02
    n = _np(kiln.randn(200, 100, dtype=d))
    assert abs(n.mean()) < 0.03 and abs(n.std() - 1) < 0.03
    assert abs(np.mean(np.abs(n) < 1) - 0.6827) < 0.02  # it is normal, not just unit variance
    assert kiln.rand(3).dtype == kiln.float32 and tuple(kiln.randn((2, 3)).shape) == (2, 3)
    assert tuple(kiln.rand(0, 3).shape) == (0, 3) and tuple(kiln.randn(()).shape) == ()


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_inplace_distributions(dtype):
    kiln.manual_seed(1)
    d = getattr(kiln, dtype)
    x = kiln.empty(20000, dtype=d)
    assert x.uniform_(-2, 4) is x
    a = _np(x)
    assert a.min() >= -2 and a.max() <= 4 and abs(a.mean() - 1) < 0.08 and abs(a.std() - 6 / 12 ** 0.5) < 0.05
    a = _np(x.normal_(3, 0.5))
    assert abs(a.mean() - 3) < 0.02 and abs(a.std() - 0.5) < 0.02
    # non-contiguous in-place fill touches only the view
    y = kiln.zeros(100, 4, dtype=d)
    y[:, ::2].uniform_(1, 2)
    b = _np(y)
    assert (b[:, 1::2] == 0).all() and (b[:, ::2] >= 1).all() and (b[:, ::2] <= 2).all()


def test_bernoulli():
    kiln.manual_seed(2)
    p = kiln.full((20000,), 0.3)
    b = kiln.bernoulli(p)
    assert b.dtype == kiln.float32 and set(np.unique(_np(b))) <= {0.0, 1.0}
    assert abs(_np(b).mean() - 0.3) < 0.02
    assert abs(_np(kiln.zeros(20000).bernoulli(0.8)).mean() - 0.8) < 0.02
    probs = kiln.tensor([0.0, 1.0] * 500)
    assert _np(probs.bernoulli()).tolist() == _np(probs).tolist()  # p of 0/1 is certain
    x = kiln.zeros(20000, dtype=kiln.float64)
    assert x.bernoulli_(0.25) is x and abs(_np(x).mean() - 0.25) < 0.02
    x.bernoulli_(kiln.full((20000,), 0.75, dtype=kiln.float64))
    assert abs(_np(x).mean() - 0.75) < 0.02


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "int8", "uint8", "float32", "float64"])
def test_randint_and_random_(dtype):
    kiln.manual_seed(3)
    d = getattr(kiln, dtype)
    r = kiln.randint(10, (5000,), dtype=d)
    assert r.dtype == d and set(np.unique(_np(r))) == set(range(10))
    r = _np(kiln.randint(-5, 5, (5000,)))
    assert r.min() == -5 and r.max() == 4 and abs(r.mean() + 0.5) < 0.2
    assert kiln.randint(3, (2, 2)).dtype == kiln.int64
    x = kiln.empty(5000, dtype=d).random_()
    a = _np(x)
    assert (a >= 0).all() and (a == np.round(a)).all() and len(np.unique(a)) > 50
    if dtype in ("int8", "uint8"):
        assert a.max() <= torch.iinfo(getattr(torch, dtype)).max


def test_randperm():
    kiln.manual_seed(4)
    for n in (0, 1, 10, 1000):
        p = kiln.randperm(n)
        assert p.dtype == kiln.int64 and sorted(p.tolist()) == list(range(n))
    assert kiln.randperm(1000).tolist() != list(range(1000))
    assert kiln.randperm(5, dtype=kiln.int32).dtype == kiln.int32


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_like_variants(dtype):
    kiln.manual_seed(5)
    x = kiln.zeros(300, 40, dtype=getattr(kiln, dtype))
    for fn in (kiln.rand_like, kiln.randn_like):
        y = fn(x)
        assert y.dtype == x.dtype and y.shape == x.shape
    y = kiln.randint_like(x, 7)
    assert y.dtype == x.dtype and set(np.unique(_np(y))) == set(range(7))
    y = kiln.randint_like(x, 2, 4)
    assert set(np.unique(_np(y))) == {2.0, 3.0}
    assert kiln.rand_like(x, dtype=kiln.float64).dtype == kiln.float64
    assert abs(_np(kiln.randn_like(x)).std() - 1) < 0.05


def test_manual_seed_reproducibility_and_distinct_seeds():
    streams = {}
    for seed in (0, 1, 0):
        kiln.manual_seed(seed)
        streams.setdefault(seed, []).append([kiln.rand(8).tolist(), kiln.randn(3, 2).tolist(),
                                             kiln.randint(100, (6,)).tolist(), kiln.randperm(10).tolist(),
                                             kiln.empty(4).normal_().tolist(), kiln.rand(4).bernoulli().tolist()])
    assert streams[0][0] == streams[0][1]
    assert streams[0][0][0] != streams[1][0][0] and streams[0][0][1] != streams[1][0][1]
    kiln.manual_seed(0)
    a, b = kiln.rand(8), kiln.rand(8)
    assert a.tolist() != b.tolist(), "successive draws must differ"
    assert kiln.initial_seed() == 0


def test_generator_objects():
    g1, g2 = kiln.Generator().manual_seed(42), kiln.Generator().manual_seed(42)
    ops = [lambda g: kiln.rand(5, generator=g), lambda g: kiln.randn(5, generator=g),
           lambda g: kiln.randint(0, 50, (5,), generator=g), lambda g: kiln.randperm(8, generator=g),
           lambda g: kiln.empty(5).uniform_(generator=g), lambda g: kiln.empty(5).normal_(generator=g),
           lambda g: kiln.empty(5).random_(generator=g), lambda g: kiln.full((5,), 0.5).bernoulli(generator=g)]
    for op in ops:
        assert op(g1).tolist() == op(g2).tolist()
    # a private generator is independent of the default one
    kiln.manual_seed(7)
    ref = kiln.rand(5).tolist()
    kiln.manual_seed(7)
    kiln.rand(3, generator=kiln.Generator().manual_seed(1))
    assert kiln.rand(5).tolist() == ref
    assert kiln.Generator().manual_seed(1).initial_seed() == 1
    assert kiln.rand(5, generator=kiln.Generator().manual_seed(1)).tolist() != \
        kiln.rand(5, generator=kiln.Generator().manual_seed(2)).tolist()


def test_rng_state_restores_stream():
    kiln.manual_seed(9)
    kiln.rand(3)
    state = kiln.get_rng_state()
    first = [kiln.rand(4).tolist(), kiln.randn(4).tolist(), kiln.randint(10, (4,)).tolist()]
    kiln.rand(100)
    kiln.set_rng_state(state)
    assert [kiln.rand(4).tolist(), kiln.randn(4).tolist(), kiln.randint(10, (4,)).tolist()] == first
    g = kiln.Generator().manual_seed(3)
    s = g.get_state()
    x = kiln.rand(6, generator=g).tolist()
    g.set_state(s)
    assert kiln.rand(6, generator=g).tolist() == x


BAD_RANDOM = [
    ("randint high <= low", lambda lib: lib.randint(5, 5, (3,))),
    ("randint bool dtype", lambda lib: lib.randint(5, (3,), dtype=lib.bool)),
    ("rand int dtype", lambda lib: lib.rand(3, dtype=lib.int64)),
    ("randn int dtype", lambda lib: lib.randn(3, dtype=lib.int64)),
    ("rand negative size", lambda lib: lib.rand(-1)),
    ("randperm negative", lambda lib: lib.randperm(-1)),
    ("uniform_ from > to", lambda lib: lib.empty(3).uniform_(2, 1)),
    ("normal_ negative std", lambda lib: lib.empty(3).normal_(0, -1)),
    ("normal_ of ints", lambda lib: lib.zeros(3, dtype=lib.int64).normal_()),
    ("bernoulli p > 1", lambda lib: lib.zeros(3).bernoulli_(1.5)),
    ("bernoulli tensor p out of range", lambda lib: lib.full((3,), 2.0).bernoulli()),
]


@pytest.mark.parametrize("desc,call", BAD_RANDOM, ids=[b[0] for b in BAD_RANDOM])
def test_bad_random_input(desc, call):
    with pytest.raises(Exception) as expected:
        call(torch)
    with pytest.raises(Exception) as got:
        call(kiln)
    assert _builtin(type(got.value)) is _builtin(type(expected.value)), \
        f"kiln raised {type(got.value).__name__}: {got.value}; torch raised {type(expected.value).__name__}"
    assert str(got.value)


def test_meta_tensors_match_real_metadata():
    """Ops with meta functions give the shape and dtype of the real result without data."""
    calls = [
        lambda x, i: kiln.cat([x, x], 1), lambda x, i: kiln.stack([x, x], 2), lambda x, i: x.gather(1, i),
        lambda x, i: x.scatter(1, i, x), lambda x, i: x.scatter_add(1, i, x), lambda x, i: x.index_select(0, i[0]),
        lambda x, i: x.tril(1), lambda x, i: x.sort(0)[1], lambda x, i: x.topk(2)[0], lambda x, i: x.flip(0),
        lambda x, i: x.cumsum(1, dtype=kiln.float64), lambda x, i: x.clamp(0, 1), lambda x, i: x.lerp(x, 0.5),
        lambda x, i: kiln.ops.aten.index.Tensor(x, [None, i[0]]), lambda x, i: kiln.where(x > 0, x, 1.0),
        lambda x, i: kiln.constant_pad_nd(x, [1, 2]),
    ]
    for call in calls:
        real = kiln.ones(3, 4)
        real_i = kiln.tensor([[0, 1], [2, 3], [1, 1]])
        meta = kiln.empty(3, 4, device="meta")
        meta_i = kiln.empty(3, 2, dtype=kiln.int64, device="meta")
        r, m = call(real, real_i), call(meta, meta_i)
        assert m.device == kiln.device("meta")
        assert (tuple(m.shape), m.dtype) == (tuple(r.shape), r.dtype)


# --- empty advanced indices (issue 16) ------------------------------------------------------------
# index_put_ with an empty int64 index, x[empty_index] and the backward of empty advanced indexing
# divided by a zero size in the strided walk (SIGFPE). Run in a subprocess so that a crash is a
# failure; compared with torch: values, shapes, mutated inputs and gradients.
_EMPTY_INDEX_RUNNER = """
import json
import kiln as lib
def run(lib):
    out = {}
    e = lib.tensor([], dtype=lib.long)
    x = lib.arange(12.).reshape(3, 4)
    out["put_scalar"] = x.index_put((e,), lib.tensor(1.)).tolist()
    out["put_rows"] = x.index_put((e,), lib.ones(0, 4)).tolist()
    out["put_acc"] = x.index_put((e,), lib.tensor(5.), accumulate=True).tolist()
    y = x.clone(); y.index_put_((e,), lib.tensor(7.)); y[e] = 3.0; y[:, e] = 4.0
    out["inplace"] = y.tolist()
    out["get"] = [list(x[e].shape), list(x[:, e].shape), list(x[e, e].shape), list(x[e][:, 1:].shape)]
    w = lib.arange(12.).reshape(3, 4).requires_grad_()
    (w[e].sum() + w[:, e].sum() * 2 + (w * 1)[e, e].sum()).backward()
    out["grad_empty"] = w.grad.tolist()
    w.grad = None
    (w[lib.tensor([0, 2])][:, e].sum() + w[lib.tensor([1])].sum()).backward()
    out["grad_mixed"] = w.grad.tolist()
    z = lib.zeros(0, 3).requires_grad_()
    (z[e] * 2).sum().backward()
    out["grad_of_empty"] = list(z.grad.shape)
    return out
print(json.dumps(run(lib)))
"""


def test_empty_advanced_index_forward_and_backward_match_torch():
    import json
    import os
    import subprocess
    import sys
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(os.path.dirname(__file__)), "python"))
    r = subprocess.run([sys.executable, "-c", _EMPTY_INDEX_RUNNER], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, f"kiln died (exit {r.returncode}): {r.stderr[-2000:]}"
    got = json.loads(r.stdout.strip().splitlines()[-1])
    namespace = {}
    exec(_EMPTY_INDEX_RUNNER.split("print(")[0].replace("import kiln as lib", "import torch as lib"), namespace)
    assert got == namespace["run"](torch)


@requires_torch
@pytest.mark.parametrize("shape,mask_ndim", [((2, 3), 2), ((2, 3), 1), ((), 0), ((4,), 1), ((2, 0), 2)])
@pytest.mark.parametrize("value", [1.5, 0])
def test_masked_assignment_of_a_scalar_matches_torch(shape, mask_ndim, value):
    # x[mask] = scalar is masked_fill_ as in PyTorch (issue 16: a 0-d mask raised IndexError)
    data = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) - 2.5
    k, t = kiln.tensor(data.tolist() if data.ndim else float(data)).reshape(shape), torch.tensor(data)
    km = (k > 0) if mask_ndim == len(shape) else (k.reshape(shape[0], -1)[:, 0] > 0)
    tm = (t > 0) if mask_ndim == len(shape) else (t.reshape(shape[0], -1)[:, 0] > 0)
    k[km] = value
    t[tm] = value
    assert k.tolist() == t.tolist()


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_masked_assignment_compiles_in_one_graph(backend):
    import kiln._dynamo

    def f(a):
        a = a.clone()
        a[a > 0] = 0.5
        return a * a

    x = kiln.tensor([1.0, -2.0, 3.0, -0.5], requires_grad=True)
    f(x).sum().backward()
    want, x.grad = x.grad.clone(), None
    kiln._dynamo.reset()
    out = kiln.compile(f, backend=backend, fullgraph=True)(x)  # no nonzero: no dynamic shape
    out.sum().backward()
    assert out.tolist() == f(x).tolist()
    assert x.grad.tolist() == want.tolist()


@requires_torch
@pytest.mark.parametrize("case", ["0d_true", "0d_false", "0d_grad", "1d_by_0d", "with_slice", "uint8"])
def test_zero_dim_mask_indexing_matches_torch(case):
    # A 0-d mask adds a dimension, as None does, and consumes none: x[x > 0] on a 0-d x raised
    # "too many indices for tensor of dimension 0" (fuzz seed 7: 7 of 1,000 programs).
    def run(lib):
        x = lib.tensor(1.5, requires_grad=case == "0d_grad")
        z = lib.arange(6.0).view(2, 3)
        if case == "0d_true":
            r = x[x > 0]
        elif case == "0d_false":
            r = x[x < 0]
        elif case == "0d_grad":
            r = x[x > 0] * 2
            r.sum().backward()
            return r.tolist(), tuple(r.shape), x.grad.tolist()
        elif case == "1d_by_0d":
            r = z[lib.tensor(True)]
        elif case == "with_slice":
            r = z[lib.tensor(False), :, 1:]
        else:
            r = z[0][lib.tensor(1, dtype=lib.uint8)]
        return r.tolist(), tuple(r.shape)

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch: indexing with uint8 is deprecated
        assert run(kiln) == run(torch)


@requires_torch
def test_setitem_drops_the_values_leading_ones():
    # x[0] = v with v of shape (1, 3): PyTorch drops the value's leading 1s before broadcasting;
    # kiln's copy_ refused (fuzz seed 11)
    def run(lib):
        x = lib.zeros(2, 3)
        x[0] = lib.ones(1, 3)
        x[:, 1] = lib.full((1, 1, 2), 5.0)
        x[lib.tensor([1])] = lib.full((1, 1, 3), 7.0)
        y = lib.zeros(3)
        y[lib.tensor([True, False, True])] = lib.ones(1, 2) * 2
        return x.tolist(), y.tolist()

    assert run(kiln) == run(torch)


@requires_torch
@pytest.mark.parametrize("write", [
    lambda lib, x: x.fill_(1), lambda lib, x: x.fill_(lib.tensor(2.0)), lambda lib, x: x.fill_(lib.ones(1)),
    lambda lib, x: x.__setitem__((Ellipsis, 0), -1), lambda lib, x: x.__setitem__((Ellipsis, 0), lib.tensor(2.0)),
    lambda lib, x: x.__setitem__(Ellipsis, 3), lambda lib, x: x.__setitem__(0, lib.tensor(1.0)),
    lambda lib, x: x.__setitem__(0, lib.ones(5)), lambda lib, x: x.__setitem__((slice(None), 1), lib.ones(3)),
], ids=["fill scalar", "fill 0-d", "fill 1-d", "setitem column number", "setitem column 0-d", "setitem all",
        "setitem row 0-d", "setitem row", "setitem column tensor"])
def test_writes_into_an_expanded_tensor_as_torch(write):
    # x[i] = 0-d value fills (PyTorch's copy_to), and fill_ with a tensor value refuses a
    # destination whose elements repeat, where fill_ with a number does not (fuzz seed 331,
    # program 10861: kiln's setitem filled an expanded column)
    def run(lib):
        x = lib.zeros(1, 5).expand(3, 5)
        try:
            write(lib, x)
        except RuntimeError as e:
            return "raises", str(e)
        return x.tolist()

    assert run(kiln) == run(torch)


@pytest.mark.parametrize("call", [
    lambda lib: lib.index_select(lib.zeros(1, 0), 0, lib.tensor([1])),  # an empty result still checks
    lambda lib: lib.index_select(lib.zeros(0, 3), 0, lib.tensor([0])),
])
def test_index_select_checks_indices_of_empty_results_as_torch(call):
    with pytest.raises(Exception) as want:
        call(torch)
    with pytest.raises(type(want.value)) as got:
        call(kiln)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("seed", range(4))
def test_index_put_with_repeated_indices_keeps_torchs_last_write(seed):
    # With repeated indices the last write wins, and PyTorch's TensorIterator walks [self
    # restrided, values, indices] in the order their strides give: a transposed values tensor
    # made kiln keep another column's value (fuzz seed 221, program 3436). accumulate=True sums
    # float32 values in that order too.
    rng = np.random.default_rng(seed)
    checked = 0
    for _ in range(100):
        nd = int(rng.integers(1, 4))
        shape = tuple(int(s) for s in rng.integers(1, 5, nd))
        ishape = tuple(int(s) for s in rng.integers(1, 4, rng.integers(1, 3)))
        dims = sorted(rng.choice(nd, int(rng.integers(1, nd + 1)), replace=False))
        index = [rng.integers(0, shape[d], ishape) if d in dims else None for d in range(nd)]
        while index[-1] is None:
            index.pop()
        x = rng.integers(0, 100, shape)
        tindex = tuple(torch.tensor(i) if i is not None else None for i in index)
        rshape = tuple(torch.tensor(x)[tuple(slice(None) if i is None else i for i in tindex)].shape)
        values = rng.uniform(-1, 1, rshape[::-1]) * 10.0 ** rng.integers(-3, 4, rshape[::-1])
        for accumulate in (False, True):
            got, want = (lib.ops.aten.index_put.default(
                lib.tensor(x, dtype=lib.float32), [lib.tensor(i) if i is not None else None for i in index],
                lib.tensor(values, dtype=lib.float32).permute(*range(len(rshape))[::-1]), accumulate)
                for lib in (kiln, torch))
            np.testing.assert_array_equal(got.numpy(), want.numpy())
        checked += 1
    assert checked == 100


def _same_values_or_error(run):
    """run(torch) and run(kiln) give the same values, or raise the same exception class and message."""
    try:
        want = run(torch)
    except Exception as e:  # noqa: BLE001
        with pytest.raises(type(e)) as got:
            run(kiln)
        assert str(got.value) == str(e)
    else:
        assert run(kiln).tolist() == want.tolist()


SCATTER_SHAPES = {  # index shape, src shape (self is 3x4, dim 0)
    "index larger than src": ((2, 5), (2, 5)),
    "src with fewer dims": ((2, 2), (2,)),
    "src with more dims": ((2, 2), (2, 2, 2)),
    "empty index, src with fewer dims": ((0, 2), (2,)),
    "empty 1-d index": ((0,), (2,)),
    "src too small": ((2, 2), (1, 1)),
}


@requires_torch
@pytest.mark.parametrize("op", ["scatter", "scatter_add", "scatter_"])
@pytest.mark.parametrize("case", list(SCATTER_SHAPES))
def test_scatter_shape_checks_as_torch(op, case):
    # PyTorch's order (scatter_shape_check): index against self, then src.size(d) over self's dims,
    # which raises IndexError for a src with fewer dims (fuzz seed 311, program 8534), then src's
    # number of dims; an empty index is never checked. Same exception class and message.
    index_shape, src_shape = SCATTER_SHAPES[case]

    def run(lib):
        self = lib.zeros(3, 4)
        return getattr(self, op)(0, lib.zeros(index_shape, dtype=lib.long), lib.ones(src_shape))

    _same_values_or_error(run)


INDEX_PUT_VALUES = {  # self shape, index, value shape
    "0-d index, [1] value": ((3,), 1, (1,)),
    "[2] index, [1, 2] value": ((3,), [1, 2], (1, 2)),
    "[1] index, [1, 1] value": ((3,), [1], (1, 1)),
    "0-d index of a matrix, [1, 3] value": ((2, 3), 1, (1, 3)),
    "[1] index, [1] value": ((3,), [1], (1,)),
}


@requires_torch
@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("case", list(INDEX_PUT_VALUES))
def test_index_put_broadcasts_the_value_as_it_is(case, accumulate):
    # the op drops no leading 1s of the value (only `x[i] = v` does): a [1] value for a 0-d index
    # is a shape mismatch, raised before any index is read (fuzz seed 321, program 1234)
    shape, index, value_shape = INDEX_PUT_VALUES[case]

    def run(lib):
        return lib.zeros(shape).index_put_((lib.tensor(index),), lib.ones(value_shape), accumulate=accumulate)

    _same_values_or_error(run)
    x, t = kiln.zeros(shape), torch.zeros(shape)
    x[kiln.tensor(index)] = kiln.ones(value_shape)  # setitem drops the leading 1s, as PyTorch's
    t[torch.tensor(index)] = torch.ones(value_shape)
    assert x.tolist() == t.tolist()
