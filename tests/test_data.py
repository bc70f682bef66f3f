"""kiln.utils.data: datasets, samplers, DataLoader batching/shuffling/drop_last/collate, random_split;
checked against torch.utils.data where the result does not depend on the random generator."""

import collections
import warnings

import numpy as np
import pytest

import kiln
from kiln.utils.data import (BatchSampler, ConcatDataset, DataLoader, Dataset, IterableDataset, RandomSampler,
                             SequentialSampler, Subset, TensorDataset, default_collate, random_split)
from conftest import requires_torch, torch


def _xy(n=10):
    return kiln.arange(n * 3, dtype=kiln.float32).reshape(n, 3), kiln.arange(n) * 10


def _rows(batches, i=1):
    """The label values of every batch, flattened."""
    return [v for b in batches for v in b[i].tolist()]


class ListDataset(Dataset):
    def __init__(self, items):
        self.items = items

    def __getitem__(self, i):
        return self.items[i]

    def __len__(self):
        return len(self.items)


def test_tensor_dataset():
    x, y = _xy()
    ds = TensorDataset(x, y)
    assert len(ds) == 10
    a, b = ds[3]
    assert a.tolist() == [9.0, 10.0, 11.0] and b.item() == 30
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        TensorDataset(x, kiln.zeros(4))


@pytest.mark.parametrize("batch_size,drop_last", [(1, False), (3, False), (3, True), (5, True), (10, False),
                                                  (16, False), (16, True)])
def test_sequential_batches(batch_size, drop_last):
    x, y = _xy()
    dl = DataLoader(TensorDataset(x, y), batch_size=batch_size, drop_last=drop_last)
    batches = list(dl)
    expect = [list(range(i, min(i + batch_size, 10))) for i in range(0, 10, batch_size)]
    if drop_last:
        expect = [e for e in expect if len(e) == batch_size]
    assert len(dl) == len(expect) == len(batches)
    for (bx, by), idx in zip(batches, expect):
        assert isinstance(bx, kiln.Tensor) and tuple(bx.shape) == (len(idx), 3)
        assert by.tolist() == [10 * i for i in idx]
        assert bx.tolist() == x[kiln.tensor(idx)].tolist()


def test_fast_path_equals_generic_path():
    """Batches gathered straight from a TensorDataset's tensors equal per-sample indexing + collate."""
    x, y = _xy(23)
    fast = DataLoader(TensorDataset(x, y), batch_size=4, shuffle=True, generator=kiln.Generator().manual_seed(5))
    slow = DataLoader(TensorDataset(x, y), batch_size=4, shuffle=True, generator=kiln.Generator().manual_seed(5),
                      collate_fn=lambda b: default_collate(b))
    for _ in range(2):  # two epochs: the generator advances the same way
        fb, sb = list(fast), list(slow)
        assert len(fb) == len(sb) == 6
        for f, s in zip(fb, sb):
            assert isinstance(f, list) and isinstance(s, list)
            assert f[0].tolist() == s[0].tolist() and f[1].tolist() == s[1].tolist()
            assert f[1].dtype == s[1].dtype == kiln.int64


def test_batches_do_not_alias_the_dataset():
    x, y = _xy()
    for bx, _ in DataLoader(TensorDataset(x, y), batch_size=4):
        bx.zero_()
    assert x.sum().item() == sum(range(30))


def test_shuffle_is_a_seeded_permutation():
    x, y = _xy(50)
    ds = TensorDataset(x, y)

    def epoch(seed):
        return _rows(DataLoader(ds, batch_size=7, shuffle=True, generator=kiln.Generator().manual_seed(seed)))

    a, b, c = epoch(0), epoch(0), epoch(1)
    assert sorted(a) == [10 * i for i in range(50)]
    assert a == b and a != c
    assert a != sorted(a)
    g = kiln.Generator().manual_seed(3)
    dl = DataLoader(ds, batch_size=7, shuffle=True, generator=g)
    e1, e2 = _rows(dl), _rows(dl)
    assert e1 != e2 and sorted(e1) == sorted(e2)  # each epoch draws a new order
    kiln.manual_seed(11)
    d1 = _rows(DataLoader(ds, batch_size=7, shuffle=True))
    kiln.manual_seed(11)
    assert _rows(DataLoader(ds, batch_size=7, shuffle=True)) == d1  # the default generator seeds it


def test_shuffle_drop_last():
    x, y = _xy(10)
    dl = DataLoader(TensorDataset(x, y), batch_size=4, shuffle=True, drop_last=True,
                    generator=kiln.Generator().manual_seed(0))
    batches = list(dl)
    assert len(dl) == len(batches) == 2 and all(len(b[1]) == 4 for b in batches)
    assert len(set(_rows(batches))) == 8


def test_samplers():
    ds = list(range(7))
    assert list(SequentialSampler(ds)) == list(range(7))
    r = list(RandomSampler(ds, generator=kiln.Generator().manual_seed(0)))
    assert sorted(r) == list(range(7))
    r = list(RandomSampler(ds, num_samples=17, generator=kiln.Generator().manual_seed(0)))
    assert len(r) == 17 and sorted(r[:7]) == list(range(7))
    r = list(RandomSampler(ds, replacement=True, num_samples=30, generator=kiln.Generator().manual_seed(0)))
    assert len(r) == 30 and all(0 <= i < 7 for i in r)
    assert list(BatchSampler(SequentialSampler(ds), 3, False)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(BatchSampler(SequentialSampler(ds), 3, True)) == [[0, 1, 2], [3, 4, 5]]
    assert len(BatchSampler(range(7), 3, False)) == 3 and len(BatchSampler(range(7), 3, True)) == 2
    with pytest.raises(ValueError, match="batch_size should be a positive integer"):
        BatchSampler(range(3), 0, False)
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        RandomSampler([], generator=None)


def test_sampler_and_batch_sampler_arguments():
    x, y = _xy()
    ds = TensorDataset(x, y)
    dl = DataLoader(ds, batch_size=4, sampler=[9, 8, 7, 6, 5])
    assert _rows(list(dl)) == [90, 80, 70, 60, 50] and len(dl) == 2
    dl = DataLoader(ds, batch_sampler=[[0, 1], [5], [2, 3, 4]])
    assert [b[1].tolist() for b in dl] == [[0, 10], [50], [20, 30, 40]] and len(dl) == 3
    dl = DataLoader(ds, batch_size=None)
    items = list(dl)
    assert len(items) == 10 and items[2][1].item() == 20 and items[2][0].shape == (3,)


@requires_torch
@pytest.mark.parametrize("kwargs", [dict(sampler=[0], shuffle=True), dict(batch_sampler=[[0]], batch_size=2),
                                    dict(batch_sampler=[[0]], drop_last=True), dict(batch_sampler=[[0]], shuffle=True),
                                    dict(batch_size=None, drop_last=True), dict(num_workers=-1),
                                    dict(prefetch_factor=2), dict(timeout=-1)])
def test_bad_arguments_like_torch(kwargs):
    with pytest.raises(Exception) as expected:
        torch.utils.data.DataLoader(list(range(4)), **kwargs)
    with pytest.raises(Exception) as got:
        DataLoader(list(range(4)), **kwargs)
    assert type(got.value) is type(expected.value) and str(got.value) == str(expected.value)


Point = collections.namedtuple("Point", "x y")


def _collate_cases(lib):
    t = lib.arange(6.0).reshape(2, 3)
    return [
        [t[0], t[1]],
        [1, 2, 3],
        [1.5, 2.0],
        [True, False],
        ["a", "b"],
        [(t[0], 1, "x"), (t[1], 2, "y")],
        [[t[0], 1.0], [t[1], 2.0]],
        [{"a": t[0], "b": 1}, {"a": t[1], "b": 2}],
        [collections.OrderedDict(z=1.0, a=2), collections.OrderedDict(z=3.0, a=4)],
        [Point(t[0], 1), Point(t[1], 2)],
        [{"nested": [(1, 2.0)]}, {"nested": [(3, 4.0)]}],
        [np.ones(2, dtype=np.float32), np.zeros(2, dtype=np.float32)],
    ]


def _structure(x):
    if hasattr(x, "dtype") and hasattr(x, "shape") and not isinstance(x, np.ndarray):
        return ("tensor", str(x.dtype).split(".")[1], tuple(x.shape), x.tolist())
    if isinstance(x, dict):
        return (type(x).__name__, [(k, _structure(v)) for k, v in x.items()])
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_structure(v) for v in x])
    return x


@requires_torch
def test_default_collate_matches_torch():
    from torch.utils.data import default_collate as torch_collate

    for kb, tb in zip(_collate_cases(kiln), _collate_cases(torch)):
        assert _structure(default_collate(kb)) == _structure(torch_collate(tb))


@requires_torch
def test_collate_errors_like_torch():
    from torch.utils.data import default_collate as torch_collate

    for batch in [[object(), object()], [[1, 2], [3]], [None]]:
        with pytest.raises(Exception) as expected:
            torch_collate(batch)
        with pytest.raises(Exception) as got:
            default_collate(batch)
        assert type(got.value) is type(expected.value), batch


def test_map_dataset_and_custom_collate():
    ds = ListDataset([{"x": kiln.ones(2) * i, "label": i} for i in range(5)])
    batches = list(DataLoader(ds, batch_size=2))
    assert [b["label"].tolist() for b in batches] == [[0, 1], [2, 3], [4]]
    assert batches[1]["x"].tolist() == [[2.0, 2.0], [3.0, 3.0]]
    dl = DataLoader(ds, batch_size=3, collate_fn=lambda items: [it["label"] for it in items])
    assert list(dl) == [[0, 1, 2], [3, 4]]


def test_iterable_dataset():
    class Count(IterableDataset):
        def __iter__(self):
            return iter(range(7))

    assert [b.tolist() for b in DataLoader(Count(), batch_size=3)] == [[0, 1, 2], [3, 4, 5], [6]]
    assert [b.tolist() for b in DataLoader(Count(), batch_size=3, drop_last=True)] == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(ValueError, match="expected unspecified shuffle option"):
        DataLoader(Count(), shuffle=True)


def test_random_split():
    x, y = _xy(10)
    ds = TensorDataset(x, y)
    a, b = random_split(ds, [7, 3], generator=kiln.Generator().manual_seed(0))
    assert isinstance(a, Subset) and len(a) == 7 and len(b) == 3
    assert sorted(a.indices + b.indices) == list(range(10))
    a2, _ = random_split(ds, [7, 3], generator=kiln.Generator().manual_seed(0))
    assert a.indices == a2.indices
    assert a[0][1].item() == 10 * a.indices[0]
    parts = random_split(range(11), [0.5, 0.3, 0.2], generator=kiln.Generator().manual_seed(1))
    assert [len(p) for p in parts] == [6, 3, 2]  # floor(5.5, 3.3, 2.2) = 5, 3, 2; the 1 left goes first
    with pytest.raises(ValueError, match="Sum of input lengths does not equal"):
        random_split(ds, [5, 4])
    # a DataLoader over a Subset of a TensorDataset (the fast path) gives the Subset's samples
    rows = _rows(DataLoader(a, batch_size=3))
    assert rows == [10 * i for i in a.indices]
    rows = _rows(DataLoader(a, batch_size=3, shuffle=True, generator=kiln.Generator().manual_seed(2)))
    assert sorted(rows) == sorted(10 * i for i in a.indices)


@requires_torch
def test_random_split_lengths_like_torch():
    for lengths in ([0.5, 0.3, 0.2], [0.1, 0.9], [1 / 3] * 3, [0.25] * 4):
        for n in (7, 10, 11, 100):
            k = [len(p) for p in random_split(range(n), lengths, generator=kiln.Generator().manual_seed(0))]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # torch warns about 0-length splits, as kiln does
                t = [len(p) for p in torch.utils.data.random_split(range(n), lengths,
                                                                   generator=torch.Generator().manual_seed(0))]
            assert k == t, (lengths, n)


def test_concat_dataset():
    c = ListDataset([1, 2]) + ListDataset([3, 4, 5])
    assert isinstance(c, ConcatDataset) and len(c) == 5 and [c[i] for i in range(5)] == [1, 2, 3, 4, 5]
    assert c[-1] == 5
