"""logsumexp as PyTorch's composite (tensor/ops/reduce_stats.cc): max, exp(x - max) summed in the
result dtype, log, + max; integer inputs in the default dtype; infinite maxima shifted by 0; empty
rows -inf. Against PyTorch 2.13: NaN/inf positions exact, values within an ulp or two (exp is
libm's in kiln, Sleef's in PyTorch). (Fuzz seed 211, program 2015: a float32 row [0, -24] gave
4e-11, summed in double; PyTorch's float32 sum is 1 and the log 0, which remainder then divides by.)"""

import math

import numpy as np
import pytest

import kiln

torch = pytest.importorskip("torch")

CASES = [((4, 5), [1]), ((3, 2, 3), [1]), ((3, 2, 3), [0, 2]), ((40,), [0]), ((2, 0, 3), [1]), ((2, 3), [0, 1])]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64"])
@pytest.mark.parametrize("shape,dims", CASES, ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
def test_logsumexp_matches_torch(dtype, shape, dims, keepdim):
    rng = np.random.default_rng(len(shape) + sum(shape))
    x = rng.integers(-30, 30, shape).astype(np.float64)
    if "float" in dtype and x.size:
        flat = x.reshape(-1)
        flat[::7], flat[1::11], flat[2::13] = math.inf, -math.inf, math.nan
    t = torch.tensor(x).to(getattr(torch, dtype))
    k = kiln.tensor(x.reshape(-1).tolist(), dtype=kiln.float64).reshape(shape).to(getattr(kiln, dtype))
    expected = torch.logsumexp(t, dims, keepdim).double().numpy()
    got = np.array(kiln.logsumexp(k, dims, keepdim).double().tolist()).reshape(expected.shape)
    tol = {"float32": 2e-7, "float64": 1e-15, "float16": 1e-3, "bfloat16": 8e-3, "int64": 2e-7}[dtype]
    np.testing.assert_allclose(got, expected, rtol=tol, atol=0, equal_nan=True)


def test_a_sum_of_one_and_a_tiny_term_is_one():
    t = torch.tensor([[0, -24], [5, -19]])
    k = kiln.tensor([[0, -24], [5, -19]])
    assert kiln.logsumexp(k, 1).tolist() == torch.logsumexp(t, 1).tolist() == [0.0, 5.0]
