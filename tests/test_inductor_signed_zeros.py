"""Inductor against eager kiln and PyTorch where a result's sign of zero is the whole difference:
which of equal extremes a reduction keeps, and sqrt/rsqrt of -0.0 (fuzz seeds 181 and 341).
Split from test_inductor_regressions.py."""

import numpy as np
import pytest

import kiln
import kiln._dynamo as dynamo

torch = pytest.importorskip("torch")


def close(a, b, tol=1e-5):
    """a (kiln) against b (kiln or torch): dtype names, shapes and values."""
    assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1], (a.dtype, b.dtype)
    assert tuple(a.shape) == tuple(b.shape)
    np.testing.assert_allclose(a.detach().double().numpy(), b.detach().double().numpy(), rtol=tol, atol=tol)


def compiled(fn, backend="inductor"):
    dynamo.reset()
    return kiln.compile(fn, backend=backend)


# --- Equal extremes: which one a reduction keeps shows in the sign of a zero ---------------------
# PyTorch's max()/min() over all elements keep the LAST of equal values, its amax and max(dim) the
# first (fuzz program seed181-20099: atan2(x.max(), -0.) gave pi for -pi). Inductor's max.default
# lowers to the "max_last" reduction, amax to "max".
@pytest.mark.parametrize("values", [[0.0, -0.0], [-0.0, 0.0], [[0.0, -0.0], [-0.0, 0.0]], [[-0.0, 0.0], [0.0, -1.0]],
                                    [[0.0, float("nan")], [-0.0, 0.0]]])
@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_extremum_ties_keep_pytorch_eager_order(values, backend):
    def f(lib, x):
        return (x.max(), x.min(), lib.atan2(x.max(), lib.tensor(-0.0)), x.amax(), x.amin(), x.max(0).values,
                x.amin(-1), x.t().max())

    x = kiln.tensor(values)
    got = compiled(lambda x: f(kiln, x), backend)(x)
    want = f(torch, torch.tensor(values))
    for g, w, e in zip(got, want, f(kiln, x)):
        for ref in (w, e):
            np.testing.assert_array_equal(g.numpy(), ref.numpy())
            sign = lambda t: np.where(np.isnan(t.numpy()), False, np.signbit(t.numpy())).tolist()  # noqa: E731
            assert sign(g) == sign(ref), (values, g, ref)


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
def test_gelu_zero_signs_as_eager(dtype):
    # float32 gelu is 0.5 * (x + x * erf(x / sqrt 2)) in eager (PyTorch's fma form) and Inductor:
    # +0. at -0. and below -5.8, so -1.5 / gelu(x) is -inf there (fuzz seed 191, program 14418)
    data = [-0.0, 0.0, -6.0, -10.0, -1.0, 0.5, 3.0]
    x = kiln.tensor(data, dtype=getattr(kiln, dtype))
    f = lambda lib, v: -1.5 / lib.nn.functional.gelu(v)  # noqa: E731
    got = compiled(lambda v: f(kiln, v))(x).double().numpy()
    eager = f(kiln, x).double().numpy()
    want = f(torch, torch.tensor(data, dtype=getattr(torch, dtype))).double().numpy()
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    np.testing.assert_array_equal(np.sign(got), np.sign(want))
    np.testing.assert_array_equal(np.sign(eager), np.sign(want))
    np.testing.assert_allclose(got, want, rtol=1e-2 if dtype == "bfloat16" else 1e-5)


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
def test_gelu_and_its_gradient_round_as_eager(dtype):
    # eager's float erf in gelu is Abramowitz and Stegun's (PyTorch's vectorized kernels' too),
    # off the true erf by up to 1.5e-7; Inductor took its accurate erf, so a negative x's gelu
    # differed by hundreds of ulp and fmod(x, gelu(x)) by 1.4e-4 (fuzz seed 291, program 10318).
    # Now both agree to a few ulp (the exps inside are different polynomials) over a dense sweep.
    xs = np.concatenate([np.linspace(-12, 12, 24001), np.geomspace(1e-30, 1, 301), -np.geomspace(1e-30, 1, 301)])
    x = kiln.tensor(xs, dtype=getattr(kiln, dtype)).requires_grad_(True)
    xe = x.detach().clone().requires_grad_(True)
    g = kiln.linspace(-2, 3, len(xs), dtype=x.dtype)
    got = compiled(kiln.nn.functional.gelu)(x)
    got.backward(g)
    want = kiln.nn.functional.gelu(xe)
    want.backward(g)
    ulps = {"float32": 4, "float64": 4, "bfloat16": 1}[dtype]
    for a, b in ((got, want), (x.grad, xe.grad)):
        a, b = a.detach().double().numpy(), b.detach().double().numpy()
        spacing = np.spacing(np.abs(b).astype("float32" if dtype != "float64" else "float64"))
        if dtype == "bfloat16":
            spacing = np.maximum(np.abs(b) * 2.0 ** -7, np.finfo(np.float32).tiny)
        assert (np.abs(a - b) <= ulps * spacing).all(), xs[np.argmax(np.abs(a - b) / spacing)]
    if dtype != "bfloat16":  # there compiled code keeps gelu's result in float32, as PyTorch's does
        bad = kiln.tensor([-2.55, -2.0, -1.3], dtype=getattr(kiln, dtype))
        f = lambda v: kiln.fmod(v, kiln.nn.functional.gelu(v))  # noqa: E731
        close(compiled(f)(bad), f(bad), tol=1e-6)


# --- sqrt of -0.0 is -0.0, and 1 / sqrt(-0.0) is -inf ------------------------------------------------
# LLVM 14's value tracking took a quotient by sqrt(x) for never negative and folded the comparisons
# after it away: `rsqrt(x).tanh()` of -0.0 gave NaN for -1 (fuzz seed 341, program 8800), and a
# clamp or a comparison of rsqrt(-0.0) = -inf passed it through (Note [sqrt of -0] in llvm_emit.cc).
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("fn", [
    lambda x: x.rsqrt().tanh(), lambda x: (1 / x.sqrt()).tanh(), lambda x: x.rsqrt().exp(),
    lambda x: x.rsqrt().clamp(-5, 5), lambda x: x.rsqrt() < -3, lambda x: x.sqrt().reciprocal().sigmoid(),
    lambda x: kiln.where(x.rsqrt() < 0, 1.0, 2.0) if isinstance(x, kiln.Tensor) else torch.where(x.rsqrt() < 0, 1.0, 2.0),
    lambda x: x.sqrt() * 2, lambda x: (x.sqrt() / 1.5)[:3].signbit(),
], ids=["rsqrt-tanh", "1/sqrt-tanh", "rsqrt-exp", "rsqrt-clamp", "rsqrt-lt", "recip-sigmoid", "where", "sqrt",
        "sqrt-signbit"])
def test_sqrt_of_negative_zero_compiles_as_eager(fn, dtype):
    data = [-0.0, 0.0, 4.0, -1.0, float("inf"), float("nan"), 1e-30, -0.0]
    x = kiln.tensor(data, dtype=getattr(kiln, dtype))
    got, want = compiled(fn)(x), fn(x)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    w, tw = want.numpy(), fn(torch.tensor(data, dtype=getattr(torch, dtype))).numpy()
    if w.dtype.kind != "f":
        np.testing.assert_array_equal(w, tw)
        return
    # the signs of zeros and infinities exactly; other values within PyTorch's ulp: on an AVX-512
    # machine its vectorised double tanh (Sleef's, within 1 ulp) gave tanh(0.5) one ulp above the
    # correctly rounded value kiln gives
    finite = ~np.isnan(w)
    np.testing.assert_array_equal(np.signbit(w[finite]), np.signbit(tw[finite]))
    np.testing.assert_allclose(w, tw, rtol=2 * np.finfo(w.dtype).eps, atol=0)


# --- maximum/clamp of -0.0 and +0.0 at every size ------------------------------------------------
# kiln's maximum, minimum and clamp return their first operand on ties at every size, on every CPU,
# eager and compiled. PyTorch's do only in its scalar loop: its vectorised loop (two vectors at a
# time) returns the second, so on an AVX2 machine torch.maximum(-0., +0.) of 16 or more float32
# elements (8 float64) is +0. in its vectorised part and -0. in the tail (fuzz seed 1731, program
# 2725: `clamp(round(x), min=v)` then rsqrt gave -inf in kiln, +inf in PyTorch, on an AVX2-only
# machine). So PyTorch is the reference only below 64 bytes, two AVX2 vectors, where every
# capability runs the scalar loop.
# Each row: (the op of `lib`, kiln or torch, on a and b; whether a is -0. so that b is +0.)
_FIRST_OPERAND_ON_TIES = {
    "maximum": (lambda lib, a, b: lib.maximum(a, b), True),
    "minimum": (lambda lib, a, b: lib.minimum(a, b), False),
    "clamp(min=t)": (lambda lib, a, b: lib.clamp(a, min=b), True),
    "clamp(max=t)": (lambda lib, a, b: a.clamp(max=b), False),
    "clamp_min(0)": (lambda lib, a, b: a.clamp_min(0), True),
    "clamp_min(t)": (lambda lib, a, b: lib.clamp_min(a, b), True),
    "clamp_max(t)": (lambda lib, a, b: a.clamp_max(b), False),
}


@pytest.mark.parametrize("n", [5, 15, 16, 27, 40, 1000])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_max_and_min_keep_the_first_operand_on_ties_at_every_size(n, dtype):
    neg = kiln.full((n,), -0.0, dtype=getattr(kiln, dtype))
    pos = kiln.zeros(n, dtype=getattr(kiln, dtype))
    for name, (fn, first_is_neg) in _FIRST_OPERAND_ON_TIES.items():
        a, b = (neg, pos) if first_is_neg else (pos, neg)
        want_sign = bool(first_is_neg)
        eager = lambda a, b, fn=fn: fn(kiln, a, b)
        for mode, run in (("eager", eager), ("inductor", compiled(eager))):
            got = np.signbit(run(a, b).float().numpy())
            assert got.tolist() == [want_sign] * n, (name, mode)
        if n * a.element_size() < 64:
            ta, tb = (torch.tensor(v.float().numpy(), dtype=getattr(torch, dtype)) for v in (a, b))
            assert np.signbit(fn(torch, ta, tb).float().numpy()).tolist() == [want_sign] * n, (name, "torch")
