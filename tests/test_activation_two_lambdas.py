"""Activation backward ops whose PyTorch kernel has two lambdas that disagree at NaN or on a bound
(Note [PyTorch's two lambdas] in tensor/ops/scalar_t_math.h): hardtanh_backward keeps the gradient
of a NaN input on its scalar path (rows' tails, non-contiguous rows) and zeroes it on its
vectorised one; elu's, hardswish's and logit's backward likewise (in blocks of AVX-512 vectors on
AVX-512 machines). kiln takes the same path for each element, so gradients through
hardtanh(log(x)) of negative x match PyTorch's bit for bit. (Fuzz seed 211, program 5436: a silent
wrong gradient.)"""

import math

import numpy as np
import pytest

import kiln

torch = pytest.importorskip("torch")


def _case(lib, dtype, n, strided, lo, hi):
    rng = np.random.default_rng(n)
    x = rng.uniform(-2, 2, 2 * n)
    x[::3] = math.nan
    x[1::7] = lo  # exactly on the bounds
    x[2::7] = hi
    g = rng.uniform(-1, 1, 2 * n)
    xt = lib.tensor(x.tolist(), dtype=lib.float64).to(getattr(lib, dtype))
    gt = lib.tensor(g.tolist(), dtype=lib.float64).to(getattr(lib, dtype))
    if strided:
        xt, gt = xt[::2], gt[::2]
    else:
        xt, gt = xt[:n], gt[:n]
    return lib.ops.aten.hardtanh_backward(gt, xt, lo, hi)


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
@pytest.mark.parametrize("n", [5, 13, 16, 40, 72])
@pytest.mark.parametrize("strided", [False, True])
@pytest.mark.parametrize("bounds", [(-1.0, 1.0), (-0.3, 0.7)], ids=str)
def test_hardtanh_backward_matches_torch_bitwise(dtype, n, strided, bounds):
    got = _case(kiln, dtype, n, strided, *bounds)
    expected = _case(torch, dtype, n, strided, *bounds)
    assert torch.equal(torch.from_numpy(got.double().numpy()), expected.double())


BACKWARDS = {
    "elu": lambda lib, g, x: lib.ops.aten.elu_backward(g, 1.3, 1.1, 0.9, False, x),
    "elu_result": lambda lib, g, x: lib.ops.aten.elu_backward(g, 1.3, 1.1, 0.9, True, x),
    "hardswish": lambda lib, g, x: lib.ops.aten.hardswish_backward(g, x),
    "logit_eps": lambda lib, g, x: lib.ops.aten.logit_backward(g, x, 0.1),
    "logit": lambda lib, g, x: lib.ops.aten.logit_backward(g, x),
}


@pytest.mark.parametrize("name", sorted(BACKWARDS))
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("n", [5, 13, 24, 40, 48, 72, 100])
def test_other_backwards_match_torch_bitwise(name, dtype, n):
    rng = np.random.default_rng(n)
    x = rng.uniform(-4, 4, n)
    x[::3] = math.nan
    x[1::5], x[2::5], x[3::7], x[4::7] = math.inf, -3.0, 3.0, 0.1  # hardswish's and logit's bounds
    g = rng.uniform(-1, 1, n)
    out = []
    for lib in (kiln, torch):
        xt = lib.tensor(x.tolist(), dtype=lib.float64).to(getattr(lib, dtype))
        gt = lib.tensor(g.tolist(), dtype=lib.float64).to(getattr(lib, dtype))
        out.append(BACKWARDS[name](lib, gt, xt))
    got, expected = np.array(out[0].double().tolist()), out[1].double().numpy()
    # the branch each element takes is PyTorch's: NaNs and zeros where its are; the values within a
    # few ulps (its vectorised exp is Sleef's, kiln's libm's)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_array_equal(got == 0, expected == 0)
    tol = {"float32": 1e-6, "float64": 1e-14, "bfloat16": 1e-2}[dtype]
    np.testing.assert_allclose(got, expected, rtol=tol, atol=0)


def test_gradient_through_hardtanh_of_log():
    def grads(lib):
        x = lib.tensor(np.linspace(-2, 3, 20).reshape(4, 5).tolist(), requires_grad=True)
        lib.nn.functional.hardtanh(x.log()).backward(lib.ones(4, 5))
        return np.array(x.grad.tolist())

    np.testing.assert_array_equal(grads(kiln), grads(torch))


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
@pytest.mark.parametrize("shape", [(), (1,), (1, 1), (2,), (33,)], ids=str)
def test_gelu_of_one_element_takes_the_scalar_loop(dtype, shape):
    # PyTorch's gelu of one element runs its scalar lambda (libm's erf) and of more its vectorized
    # one; near -2.9, 1 + erf cancels and the two differ by hundreds of ulps (Note [gelu's two
    # loops] in tensor/ops/activation.cc; fuzz seed 381, program 3444: floor(1.36 / gelu(-2.91)))
    rng = np.random.default_rng(len(shape))
    for x in np.concatenate([rng.uniform(-4, 1, 40), [-2.9108736515045166, -5.9, 0.0, -0.0]]):
        data = np.full(shape, x)
        got = kiln.nn.functional.gelu(kiln.tensor(data.tolist(), dtype=getattr(kiln, dtype)))
        want = torch.nn.functional.gelu(torch.tensor(data, dtype=getattr(torch, dtype)))
        if math.prod(shape) == 1:  # bit for bit; vectorized, kiln's exp is not Sleef's: an ulp or two
            np.testing.assert_array_equal(got.double().numpy(), want.double().numpy())
        else:
            np.testing.assert_allclose(got.double().numpy(), want.double().numpy(), rtol=2e-2 if "16" in dtype else 2e-4)
