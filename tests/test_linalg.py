"""kiln.linalg against torch.linalg (PyTorch 2.13): the norms (values, dtypes and float64 gradients,
zeros included), the products, cross, diagonal, matrix_power, vander and the errors; and one compiled
check against eager. The LAPACK functions (inv, det, solve, qr, svd, eigh, ...) are tested in
test_linalg_lapack.py."""

import math

import numpy as np
import pytest

import kiln
from conftest import requires_torch, torch

pytestmark = requires_torch


def data(*shape, seed=0):
    rng = np.random.default_rng(seed + len(shape))
    a = rng.standard_normal(shape)
    if a.size:
        a.reshape(-1)[0] = 0.0  # a zero element: norms' gradients there
    return a


def both(fn, arrays, grad=True):
    """fn(lib.linalg, *tensors) in both libraries: values and float64 gradients of a weighted sum."""
    out = {}
    for lib in (kiln, torch):
        ts = [lib.tensor(a.tolist(), dtype=lib.float64, requires_grad=grad) for a in arrays]
        r = fn(lib, *ts)
        res = [r.detach().numpy() if lib is torch else np.array(r.tolist()), str(r.dtype).split(".")[1]]
        if grad and r.requires_grad:
            w = np.linspace(-1, 1, r.numel()).reshape(tuple(r.shape)) if r.dim() else np.array(0.7)
            (r * lib.tensor(w.tolist(), dtype=lib.float64)).sum().backward()
            res.append([np.array(t.grad.tolist()) for t in ts])
        out[lib] = res
    k, t = out[kiln], out[torch]
    np.testing.assert_allclose(k[0], t[0], rtol=1e-10, atol=1e-12)
    assert k[1] == t[1]
    for g, w in zip(k[2:], t[2:]):
        for a, b in zip(g, w):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("ord", [2, 1, 3, 0.5, 0, math.inf, -math.inf, -1])
@pytest.mark.parametrize("dim,keepdim", [(None, False), (1, False), ((0, 2), True), (-1, True)])
def test_vector_norm(ord, dim, keepdim):
    both(lambda lib, x: lib.linalg.vector_norm(x, ord, dim, keepdim), [data(3, 4, 5)], grad=ord != 0)


@pytest.mark.parametrize("ord", ["fro", math.inf, -math.inf, 1, -1])
@pytest.mark.parametrize("dim,keepdim", [((-2, -1), False), ((0, 2), True), ((2, 0), False)])
def test_matrix_norm(ord, dim, keepdim):
    both(lambda lib, x: lib.linalg.matrix_norm(x, ord, dim, keepdim), [data(3, 4, 5)])


@pytest.mark.parametrize("call", [
    lambda lib, x: lib.linalg.norm(x), lambda lib, x: lib.linalg.norm(x[0], ord=1),
    lambda lib, x: lib.linalg.norm(x, ord=3, dim=1), lambda lib, x: lib.linalg.norm(x, ord="fro", dim=(0, 1)),
    lambda lib, x: lib.linalg.norm(x[0], ord=math.inf), lambda lib, x: lib.linalg.norm(x[0, 0], ord=math.inf),
    lambda lib, x: lib.linalg.norm(x, dim=(1, 2), keepdim=True),
])
def test_norm_picks_vector_or_matrix_as_torch(call):
    both(call, [data(3, 4, 5)])


@pytest.mark.parametrize("call,shapes", [
    (lambda lib, a, b: lib.linalg.cross(a, b), [(4, 3), (1, 3)]),
    (lambda lib, a, b: lib.linalg.cross(a, b, dim=0), [(3, 4), (3, 4)]),
    (lambda lib, a, b: lib.linalg.vecdot(a, b), [(4, 5), (5,)]),
    (lambda lib, a, b: lib.linalg.vecdot(a, b, dim=0), [(4, 5), (4, 1)]),
    (lambda lib, a, b: lib.linalg.matmul(a, b), [(2, 4, 5), (5, 3)]),
    (lambda lib, a, b: lib.linalg.multi_dot([a, b, a.t()]), [(4, 5), (5, 5)]),
    (lambda lib, a, b: lib.linalg.multi_dot([a[0], b, b]), [(4, 5), (5, 5)]),
    (lambda lib, a, b: lib.linalg.multi_dot([b, b, a[0]]), [(4, 5), (5, 5)]),
    (lambda lib, a, b: lib.linalg.diagonal(a, offset=1) * 2 + b, [(2, 4, 5), (1,)]),
])
def test_products_cross_and_diagonal(call, shapes):
    both(call, [data(*s, seed=i) for i, s in enumerate(shapes)])


@pytest.mark.parametrize("n", [0, 1, 2, 3, 6])
def test_matrix_power(n):
    both(lambda lib, a: lib.linalg.matrix_power(a, n) * 1, [data(2, 3, 3) / 2])


def test_vander():
    both(lambda lib, x: lib.linalg.vander(x), [data(4)])
    both(lambda lib, x: lib.linalg.vander(x, N=6), [data(2, 3)])
    assert kiln.linalg.vander(kiln.tensor([2, 3]), N=3).tolist() == torch.linalg.vander(torch.tensor([2, 3]),
                                                                                         N=3).tolist()


@pytest.mark.parametrize("call", [
    lambda lib: lib.linalg.vector_norm(lib.tensor([1, 2])),
    lambda lib: lib.linalg.matrix_norm(lib.ones(3)),
    lambda lib: lib.linalg.matrix_norm(lib.ones(2, 2), ord=3),
    lambda lib: lib.linalg.norm(lib.ones(2, 2, 2), ord=1),
    lambda lib: lib.linalg.vecdot(lib.ones(2), lib.ones(2, dtype=lib.float64)),
    lambda lib: lib.linalg.multi_dot([lib.ones(2, 2)]),
    lambda lib: lib.linalg.matrix_power(lib.ones(2, 3), 2),
])
def test_errors_as_torch(call):
    with pytest.raises(Exception) as want:
        call(torch)
    with pytest.raises(type(want.value)) as got:
        call(kiln)
    assert str(got.value).split(":")[0] == str(want.value).split(":")[0]


@pytest.mark.parametrize("ord", ["nuc", 2, -2])
@pytest.mark.parametrize("dim,keepdim", [((-2, -1), False), ((0, 2), True), ((2, 0), False)])
def test_matrix_norms_from_singular_values(ord, dim, keepdim):
    both(lambda lib, x: lib.linalg.matrix_norm(x, ord, dim, keepdim), [data(3, 4, 5)])


@pytest.mark.parametrize("n", [-1, -2, -3])
def test_negative_matrix_power(n):
    both(lambda lib, a: lib.linalg.matrix_power(a, n), [data(2, 3, 3) + 3 * np.eye(3)])


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_norms_match_eager(backend):
    def f(x):
        return (kiln.linalg.vector_norm(x, dim=-1) + kiln.linalg.matrix_norm(x, ord=1).unsqueeze(-1)
                + kiln.linalg.norm(x, ord=math.inf, dim=(0, 1)).sum())

    x = kiln.tensor(data(3, 4).tolist(), requires_grad=True)
    want = f(x)
    want.sum().backward()
    g, x.grad = x.grad, None
    kiln._dynamo.reset()
    got = kiln.compile(f, backend=backend)(x)
    got.sum().backward()
    np.testing.assert_allclose(np.array(got.tolist()), np.array(want.tolist()), rtol=1e-5)
    np.testing.assert_allclose(np.array(x.grad.tolist()), np.array(g.tolist()), rtol=1e-5, atol=1e-6)


def _norm_edge_grads(lib, compile_backend, ord, x, grad):
    """x's gradient of vector_norm(x, ord) with upstream gradient `grad`, eager or compiled."""
    def f(t):
        return lib.linalg.vector_norm(t, ord)

    if compile_backend:
        kiln._dynamo.reset()
        f = kiln.compile(f, backend=compile_backend)
    t = lib.tensor(x, requires_grad=True)
    n = f(t)
    assert n.requires_grad  # the 0-norm too: PyTorch gives it a grad_fn, with no gradient
    n.backward(lib.tensor(grad))
    return None if t.grad is None else t.grad.tolist()


@pytest.mark.parametrize("backend", [None, "aot_eager", "inductor"])
def test_vector_norm_gradient_edge_cases_as_torch(backend):
    # Seed 321 #19161: -1 / x.norm() of an all-zero x is inf upstream of the norm; PyTorch's
    # 2-norm backward multiplies it by the masked self / norm (0), so the gradient is NaN, not 0.
    # NaN entries are among the extremes of the inf norms; the 0-norm has no gradient at all.
    inf, nan = math.inf, math.nan
    for ord in [0, 0.5, 1, 1.5, 2, 3, inf, -inf]:
        for x in [[0., 0., 0.], [0., 1., -2.], [nan, 1., 0.], [2., -2., 1.]]:
            for grad in [1.0, inf, nan]:
                want = _norm_edge_grads(torch, None, ord, x, grad)
                got = _norm_edge_grads(kiln, backend, ord, x, grad)
                assert (got is None) == (want is None), (ord, x, grad, got, want)
                if want is not None:
                    np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=f"{ord} {x} {grad}")


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_vector_norm_of_a_large_16_bit_tensor_is_accurate(dtype):
    """A float accumulator added to element by element drifted 2% over 21M elements (450 for 460,
    found through clip_grad_norm_ in tests/cuda/test_cuda_norm.py); the norms accumulate in double."""
    g = np.random.default_rng(16).standard_normal((4500, 4700)).astype(np.float32) * 0.1
    x = kiln.tensor(g).to(getattr(kiln, dtype))
    exact = float(np.sqrt((x.double().numpy() ** 2).sum()))
    assert abs(kiln.linalg.vector_norm(x).item() - exact) <= 0.005 * exact
    if dtype == "bfloat16":  # (float16 overflows at 1.7e6)
        l1 = float(np.abs(x.double().numpy()).sum())
        assert abs(kiln.linalg.vector_norm(x, 1).item() - l1) <= 0.005 * l1


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "row slices"])
def test_large_float_products_against_float64(layout, threads):
    """Float products of 2^20 multiply-adds and up run oneDNN's sgemm where it is loaded and the CPU
    has AVX-512, the rest OpenBLAS's (Note [oneDNN's sgemm] in tensor/ops/linalg.cc): against numpy in float64,
    in every operand layout BLAS takes (a transpose flag, a leading dimension wider than a row), and
    in blocks over kiln's threads."""
    rng = np.random.default_rng(11)
    old = kiln.get_num_threads()
    kiln.set_num_threads(threads)
    try:
        for m, k, n in ((200, 130, 96), (16, 24, 8), (1, 1024, 1024), (257, 129, 65)):
            a64, b64, c64 = rng.standard_normal((m, k)), rng.standard_normal((k, n)), rng.standard_normal((m, n))
            if layout == "contiguous":
                a, b = kiln.tensor(a64, dtype=kiln.float32), kiln.tensor(b64, dtype=kiln.float32)
            elif layout == "transposed":
                a = kiln.tensor(a64.T.copy(), dtype=kiln.float32).t()
                b = kiln.tensor(b64.T.copy(), dtype=kiln.float32).t()
            else:
                a = kiln.tensor(np.pad(a64, ((0, 0), (0, 7))), dtype=kiln.float32)[:, :k]
                b = kiln.tensor(np.pad(b64, ((0, 0), (0, 5))), dtype=kiln.float32)[:, :n]
            c = kiln.tensor(c64, dtype=kiln.float32)
            want = a.double().numpy() @ b.double().numpy()
            np.testing.assert_allclose(kiln.mm(a, b).numpy(), want, rtol=1e-4, atol=1e-4 * np.sqrt(k))
            np.testing.assert_allclose(kiln.addmm(c, a, b, beta=0.5, alpha=2).numpy(), 0.5 * c.double().numpy() + 2 * want,
                                       rtol=1e-4, atol=2e-4 * np.sqrt(k))
    finally:
        kiln.set_num_threads(old)
