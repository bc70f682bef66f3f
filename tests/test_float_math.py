"""Note [One float math] (codegen/float_math.h): float32 exp, sigmoid, silu, erf, GELU and GELU's
backward are one set of algorithms for eager kernels (the scalar element functions and the
AVX-512 runs) and Inductor's generated kernels, so a compiled function returns eager's bits, on
bit patterns spread over the whole float range (every sign, exponent, subnormal, infinity and NaN)
and a dense band where the functions bend. tanh (computed in float64, Note [tanhf in double])
is compared too. Eager's contiguous tensors take the AVX-512 runs where the CPU has AVX-512 and
strided ones the scalar functions; both are compared."""

import numpy as np
import pytest

import kiln

F = kiln.nn.functional


def _inputs():
    bits = np.arange(0, 2**32, 1021, dtype=np.uint64).astype(np.uint32).view(np.float32)
    dense = np.linspace(-12, 12, 200_003, dtype=np.float32)
    edges = np.float32([88.72283935546875, 88.7228, 88.73, -103.97208, -103.98, -87.3, -88.72, 17.3287,
                        0.921875, -0.921875, 3.92, 4.0, -0.75, 1e-30, -1e-40, 0.0, -0.0])
    return np.concatenate([bits, dense, edges])


OPS = {
    "exp": lambda x: x.exp(),
    "sigmoid": lambda x: x.sigmoid(),
    "silu": F.silu,
    "erf": lambda x: x.erf(),
    "gelu": F.gelu,
    "tanh": lambda x: x.tanh(),
    "gelu_backward": lambda x: kiln.ops.aten.gelu_backward(x * 0.25 - 1.0, x),
}


def _assert_same_bits(got, want, name):
    got, want = got.numpy(), want.numpy()
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan, err_msg=name)  # a NaN's sign may differ
    differ = got[~nan].view(np.uint32) != want[~nan].view(np.uint32)
    where = np.flatnonzero(differ)[:5]
    assert not differ.any(), f"{name}: {differ.sum()} of {differ.size} differ, at x = {where}"


@pytest.mark.parametrize("layout", ["contiguous", "strided"])
@pytest.mark.parametrize("name", list(OPS))
def test_compiled_returns_eagers_bits(name, layout):
    x = kiln.tensor(_inputs())
    if layout == "strided":
        x = kiln.tensor(np.repeat(_inputs(), 2))[::2]
    f = OPS[name]
    _assert_same_bits(kiln.compile(f)(x), f(x), name)


def test_fused_kernels_keep_the_bits():
    """Inside fused kernels too: GELU after a bias add, forward and backward through autograd, as in
    an MLP (the bias gradient, a sum, may add in another order)."""
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((64, 96)) * 3).astype(np.float32)
    b = rng.standard_normal(96).astype(np.float32)
    w = rng.standard_normal((64, 96)).astype(np.float32)

    def f(x, bias, w):
        h = F.gelu(x + bias)
        return (h * w).sum(), F.silu(x * 0.5).sigmoid().exp()

    results = []
    for fn in (f, kiln.compile(f)):
        x, bias = kiln.tensor(a, requires_grad=True), kiln.tensor(b, requires_grad=True)
        loss, y = fn(x, bias, kiln.tensor(w))
        loss.backward()
        results.append((x.grad, y.detach()))
    _assert_same_bits(results[1][0], results[0][0], "dx")
    _assert_same_bits(results[1][1], results[0][1], "exp(sigmoid(silu(x / 2)))")
