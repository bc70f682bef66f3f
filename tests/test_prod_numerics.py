"""prod multiplies as PyTorch's CPU kernel does, bit for bit (ProdContiguousRow in
tensor/ops/reduce_more.cc): in the result dtype with no wider accumulator, rows of 4 AVX2 vectors
or more in 4 vectors of partial products, shorter rows and outer reductions one element after
another, and a permuted input in memory order, broadcast (stride-0) dims left where they are as
TensorIterator leaves them. (Fuzz seed 191, program 14962: a float32 prod taken in double differed
in the last bit, which fmod and remainder magnified; fuzz seed 1671, program 4524: an expanded
float16 input walked with its stride-1 dim outermost overflowed where PyTorch's product is 163.25.)"""

import numpy as np
import pytest

import kiln

torch = pytest.importorskip("torch")

SHAPES = [((), None), ((0,), None), ((3,), None), ((31,), None), ((32,), None), ((63,), None), ((64,), None), ((1000,), None),
          ((4, 130), 1), ((130, 4), 0), ((5, 70), None), ((7, 200), 1), ((2, 3, 40), (0, 2)), ((0, 5), 1)]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int32", "int64"])
@pytest.mark.parametrize("shape,dim", SHAPES, ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided"])
def test_prod_matches_torch_bitwise(dtype, shape, dim, layout):
    torch.set_num_threads(1)  # PyTorch splits long reductions across threads
    rng = np.random.default_rng(len(shape) * 1000 + sum(shape))
    a = rng.uniform(0.5, 1.6, shape) if "float" in dtype else rng.integers(-3, 4, shape)
    t = torch.tensor(a).to(getattr(torch, dtype))
    k = kiln.tensor(a).to(getattr(kiln, dtype))
    if layout == "transposed":
        t, k = t.mT if t.dim() > 1 else t, k.mT if k.dim() > 1 else k
    elif layout == "strided" and t.dim() > 0:
        t, k = t[..., ::2], k[..., ::2]
    if dim is not None and layout == "transposed" and t.dim() > 1:
        dim = tuple(t.dim() - 1 - d for d in (dim if isinstance(dim, tuple) else (dim,)))
    if isinstance(dim, tuple):
        expected = t
        got = k
        for d in sorted(dim, reverse=True):  # torch.prod takes one dim: reduce them one at a time
            expected, got = expected.prod(d), got.prod(d)
    else:
        expected = t.prod() if dim is None else t.prod(dim)
        got = k.prod() if dim is None else k.prod(dim)
    assert str(got.dtype) == str(expected.dtype).replace("torch", "kiln")
    assert torch.equal(torch.from_numpy(got.double().numpy()), expected.double())


# (base shape, expanded shape, dim): stride-0 dims around, between and inside the real ones
EXPANDED = [((1, 4, 1), (4, 4, 4), None), ((1, 4, 1), (4, 4, 4), 1), ((3, 1), (3, 50), None), ((1, 5), (40, 5), None),
            ((2, 1, 3), (2, 30, 3), None), ((2, 1, 3), (2, 30, 3), 0)]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("base,shape,dim", EXPANDED, ids=str)
def test_prod_of_an_expanded_input_matches_torch_bitwise(dtype, base, shape, dim):
    torch.set_num_threads(1)
    rng = np.random.default_rng(sum(shape))
    a = np.round(rng.uniform(-3, 3, base) * 8) / 8  # few distinct values, repeated: overflow depends on order
    t = torch.tensor(a).to(getattr(torch, dtype)).expand(*shape)
    k = kiln.tensor(a).to(getattr(kiln, dtype)).expand(*shape)
    expected, got = (t.prod(), k.prod()) if dim is None else (t.prod(dim), k.prod(dim))
    np.testing.assert_array_equal(got.double().numpy(), expected.double().numpy())  # NaN where both have one
