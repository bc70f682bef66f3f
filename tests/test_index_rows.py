"""x[index] with the innermost result dim unindexed gathers whole runs (tensor/ops/index.cc,
WalkIndexedRead): one index lookup per row. Against PyTorch 2.13: rows of contiguous, transposed
and strided tensors, negative and repeated indices, several index tensors, index shapes of any
rank, 0-d indices, every element size, and the out-of-range error."""

import numpy as np
import pytest

import kiln

torch = pytest.importorskip("torch")


def both(a, fn):
    return fn(kiln.tensor(a), kiln), fn(torch.tensor(a), torch)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int16", "int8", "bool", "complex64"])
def test_row_gathers_match_torch(dtype):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((9, 7, 5)) * 4
    if dtype == "complex64":
        a = a + 1j * rng.standard_normal(a.shape)
    elif dtype != "bool" and "float" not in dtype:
        a = np.round(a)
    i = rng.integers(-9, 9, (4, 3))
    j = rng.integers(-7, 7, (3,))
    cases = [
        lambda x, lib: x[lib.tensor(i)],                       # rows of a contiguous tensor
        lambda x, lib: x[lib.tensor([2, 2, -1, 0])],           # repeated and negative
        lambda x, lib: x.transpose(0, 2)[lib.tensor([4, 0])],  # strided rows
        lambda x, lib: x[:, lib.tensor(j)],                    # a middle dim: runs of the last
        lambda x, lib: x[lib.tensor(i[:, :1]), lib.tensor(j)],  # two indices broadcast
        lambda x, lib: x[..., lib.tensor([4, -5, 1])],          # the innermost dim indexed: n = 1
        lambda x, lib: x[lib.tensor(3)],                       # a 0-d index
        lambda x, lib: x[:, ::2][lib.tensor([1, 8])],          # rows with a gap
        lambda x, lib: x[lib.tensor(i), :, lib.tensor(3)],     # non-adjacent indices go first
    ]
    for case in cases:
        k, t = both(a, lambda x, lib: case(x.to(getattr(lib, dtype)), lib))
        assert tuple(k.shape) == tuple(t.shape)
        assert k.stride() == t.stride()
        np.testing.assert_array_equal(k.numpy(), t.numpy())


def test_out_of_range_row_index_raises_as_torch():
    x = kiln.zeros(4, 3)
    with pytest.raises(IndexError, match="index 4 is out of bounds for dimension 0 with size 4"):
        x[kiln.tensor([0, 4])]
    with pytest.raises(IndexError, match="index -5 is out of bounds for dimension 0 with size 4"):
        x[kiln.tensor([-5])]


def test_large_gather_in_parallel_equals_numpy():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((1024, 300)).astype(np.float32)
    i = rng.integers(0, 1024, 5000)
    np.testing.assert_array_equal(kiln.tensor(a)[kiln.tensor(i)].numpy(), a[i])
