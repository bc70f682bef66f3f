"""kiln's LAPACK functions against torch.linalg (PyTorch 2.13): inv, det, slogdet, logdet, solve,
solve_triangular, cholesky, qr, svd, svdvals, eigh, eigvalsh, lu_factor, lu, pinv, matrix_rank, cond
and the torch-level names (inverse, det, slogdet, svd, qr, cholesky, ...): values and result strides
over batches, empty batches and strided inputs in float32 and float64; float64 gradients of losses
that do not depend on the sign choice of singular/eigen vectors; gradcheck; PyTorch's errors
(LinAlgError for singular and indefinite input, with torch's messages); and compiled code (inductor,
aot_eager) against eager, errors included."""

import numpy as np
import pytest

import kiln
from conftest import requires_torch, torch

pytestmark = requires_torch


def rand(*shape, seed=0, kind="general"):
    """A float64 array: general, well-conditioned square ('square'), symmetric positive-definite ('spd')
    or symmetric ('sym')."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if kind == "square":
        a = a + 3 * np.eye(shape[-1])
    elif kind == "spd":
        a = a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])
    elif kind == "sym":
        a = a + np.swapaxes(a, -1, -2)
    return a


def to(lib, a, dtype="float64", grad=False, strided=False):
    if strided and a.ndim >= 2:  # the transpose of a contiguous copy: the same values through other strides
        t = lib.from_numpy(np.ascontiguousarray(np.swapaxes(a, -1, -2))).to(getattr(lib, dtype)).transpose(-1, -2)
    else:
        t = lib.from_numpy(np.ascontiguousarray(a)).to(getattr(lib, dtype))
    return t.requires_grad_(grad) if grad else t


def as_np(t):
    if isinstance(t, torch.Tensor):
        return t.detach().numpy()
    return np.array(t.tolist(), dtype=np.float64).reshape(tuple(t.shape))


def flat(r):
    return list(r) if isinstance(r, (tuple, list)) else [r]


def compare(fn, arrays, dtype="float64", strided=False, strides=True, rtol=None):
    """fn(lib, *tensors) in kiln and torch: equal values, dtypes, shapes and (for matrices) strides."""
    rtol = rtol or (1e-10 if dtype == "float64" else 2e-4)
    got = flat(fn(kiln, *[to(kiln, a, dtype, strided=strided) for a in arrays]))
    want = flat(fn(torch, *[to(torch, a, dtype, strided=strided) for a in arrays]))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert tuple(g.shape) == tuple(w.shape) and str(g.dtype)[5:] == str(w.dtype)[6:]
        np.testing.assert_allclose(as_np(g), as_np(w), rtol=rtol, atol=rtol)
        if strides and g.numel() > 1:
            assert g.stride() == w.stride(), (g.stride(), w.stride())


def same_layout(fn, arrays, dtype="float64", strided=False):
    """fn's results in kiln and torch have equal shapes, dtypes and strides (values not compared)."""
    got = flat(fn(kiln, *[to(kiln, a, dtype, strided=strided) for a in arrays]))
    want = flat(fn(torch, *[to(torch, a, dtype, strided=strided) for a in arrays]))
    for g, w in zip(got, want):
        assert (tuple(g.shape), str(g.dtype)[5:]) == (tuple(w.shape), str(w.dtype)[6:])
        if g.numel() > 1:
            assert g.stride() == w.stride(), (g.stride(), w.stride())


def compare_grads(fn, arrays, rtol=1e-8):
    """Float64 gradients of fn(lib, *tensors) (a scalar loss) in kiln and torch."""
    grads = {}
    for lib in (kiln, torch):
        ts = [to(lib, a, grad=True) for a in arrays]
        fn(lib, *ts).backward()
        grads[lib] = [as_np(t.grad) for t in ts]
    for g, w in zip(grads[kiln], grads[torch]):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol)


def weights(lib, t, seed=7):
    w = np.random.default_rng(seed).standard_normal(tuple(t.shape))
    return lib.from_numpy(w).to(t.dtype)


def wsum(lib, *ts):
    """A weighted sum of ts (a loss whose gradient reaches every element)."""
    return sum((t * weights(lib, t, seed=i)).sum() for i, t in enumerate(ts))


SQUARE_SHAPES = [(3, 3), (2, 4, 4), (2, 1, 3, 3), (0, 3, 3), (0, 0), (1, 1)]
RECT_SHAPES = [(4, 3), (3, 5), (2, 5, 2), (2, 2, 6), (3, 3), (0, 2, 3), (3, 0)]


# --- values and layouts ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("strided", [False, True])
@pytest.mark.parametrize("shape", SQUARE_SHAPES)
@pytest.mark.parametrize("name", ["inv", "det", "slogdet", "inv_ex", "lu_factor", "lu_factor_ex", "lu",
                                  "matrix_rank", "pinv"])
def test_square_functions(name, shape, strided, dtype):
    compare(lambda lib, a: getattr(lib.linalg, name)(a), [rand(*shape, kind="square")], dtype, strided)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape", [s for s in SQUARE_SHAPES if s[-1]])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky(shape, upper, dtype):
    compare(lambda lib, a: lib.linalg.cholesky(a, upper=upper), [rand(*shape, kind="spd")], dtype)
    compare(lambda lib, a: lib.linalg.cholesky_ex(a, upper=upper), [rand(*shape, kind="spd")], dtype)
    compare(lambda lib, a: lib.cholesky(a, upper), [rand(*shape, kind="spd")], dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape", SQUARE_SHAPES)
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh(shape, uplo, dtype):
    # eigenvectors are unique up to sign: compare |V| (the test matrices have distinct eigenvalues)
    def f(lib, a):
        w, v = lib.linalg.eigh(a, UPLO=uplo)
        return w, v.abs(), lib.linalg.eigvalsh(a, uplo)
    a = rand(*shape, kind="general")  # eigh reads one triangle: an unsymmetric input checks which
    compare(f, [a], dtype, strides=True)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("strided", [False, True])
@pytest.mark.parametrize("shape", RECT_SHAPES)
def test_qr_svd_and_pinv(shape, strided, dtype):
    a = [rand(*shape)]
    for mode in ("reduced", "complete", "r"):
        compare(lambda lib, x: lib.linalg.qr(x, mode=mode), a, dtype, strided)
    compare(lambda lib, x: lib.qr(x, some=False), a, dtype, strided)
    k = min(shape[-2:])
    for full in (False, True):
        # singular vectors are unique up to sign (|U|, |Vh|), and a full U's or Vh's columns beyond k are
        # any orthonormal completion: values of the first k, layouts of all
        def svd_abs(lib, x):
            u, s, vh = lib.linalg.svd(x, full_matrices=full)
            return u.abs()[..., :k], s, vh.abs()[..., :k, :]
        compare(svd_abs, a, dtype, strided, strides=False)
        same_layout(lambda lib, x: lib.linalg.svd(x, full_matrices=full), a, dtype, strided)
    compare(lambda lib, x: lib.linalg.svdvals(x), a, dtype, strided)
    compare(lambda lib, x: lib.linalg.pinv(x), a, dtype, strided, strides=False)
    compare(lambda lib, x: lib.linalg.matrix_rank(x), a, dtype, strided)
    compare(lambda lib, x: lib.svd(x, compute_uv=False), a, dtype, strided)
    compare(lambda lib, x: [t.abs() for t in lib.svd(x)], a, dtype, strided, strides=False)


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("a_shape,b_shape", [
    ((3, 3), (3, 2)), ((3, 3), (3,)), ((2, 3, 3), (2, 3)), ((2, 3, 3), (3, 4)), ((3, 3), (2, 3, 1)),
    ((2, 1, 3, 3), (4, 3, 2)), ((0, 3, 3), (0, 3)), ((3, 3), (3, 0)),
])
def test_solve(a_shape, b_shape, left):
    vector = len(b_shape) == 1 or (len(b_shape) == len(a_shape) - 1 and b_shape == a_shape[:-1])
    if not left:
        if vector:
            return
        b_shape = b_shape[:-2] + (b_shape[-1], b_shape[-2])
    arrays = [rand(*a_shape, kind="square"), rand(*b_shape, seed=1)]
    compare(lambda lib, a, b: lib.linalg.solve(a, b, left=left), arrays)
    compare(lambda lib, a, b: lib.linalg.solve_ex(a, b, left=left), arrays)
    compare(lambda lib, a, b: lib.linalg.solve(a, b, left=left), arrays, "float32", strided=True)
    compare_grads(lambda lib, a, b: wsum(lib, lib.linalg.solve(a, b, left=left)), arrays)


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unitriangular", [False, True])
def test_solve_triangular(upper, left, unitriangular):
    arrays = [rand(2, 3, 3, kind="square"), rand(2, 3, 3, seed=1)]
    fn = lambda lib, a, b: lib.linalg.solve_triangular(a, b, upper=upper, left=left,  # noqa: E731
                                                          unitriangular=unitriangular)
    compare(fn, arrays, strides=False)
    compare_grads(lambda lib, a, b: wsum(lib, fn(lib, a, b)), arrays)


def test_torch_level_names_and_methods():
    a = [rand(2, 3, 3, kind="square")]
    for name in ("inverse", "det", "logdet", "slogdet", "pinverse"):
        compare(lambda lib, x: getattr(lib, name)(x), a, strides=False)
        compare(lambda lib, x: getattr(x, name)(), a, strides=False)
    compare(lambda lib, x: lib.logdet(-x), a)  # negative determinants: NaN where torch's is
    compare(lambda lib, x: x.cholesky(), [rand(3, 3, kind="spd")])
    compare(lambda lib, x: x.qr(), [rand(4, 3)])
    compare(lambda lib, x: lib.linalg.cond(x), a)
    for p in ("fro", "nuc", 1, -1, float("inf"), -2):
        compare(lambda lib, x: lib.linalg.cond(x, p), a)


def test_singular_inputs():
    a = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])  # rank 2: det 0, adj(A) != 0
    compare(lambda lib, x: lib.linalg.det(x), [a])
    # slogdet of an exactly singular matrix is (0, -inf) or, where the LU's last pivot rounds to
    # +-1e-16 (MKL's AVX-512 kernels do), (+-1, -35): compare the determinant it stands for
    compare(lambda lib, x: lib.linalg.slogdet(x)[0] * lib.linalg.slogdet(x)[1].exp(), [a])
    compare(lambda lib, x: lib.linalg.matrix_rank(x), [a])
    compare(lambda lib, x: lib.linalg.pinv(x), [a], strides=False)
    compare(lambda lib, x: lib.linalg.inv_ex(x)[1], [a])


def test_det_gradient_of_a_singular_matrix_is_the_adjugate():
    # d det(A)/dA = adj(A)^T, nonzero for a rank n-1 matrix. PyTorch 2.13 returns zeros for this one
    # (its LU-based det is exactly -0.0); kiln follows the derivative, checked by central differences.
    a = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    x = to(kiln, a, grad=True)
    kiln.linalg.det(x).backward()
    eps, numeric = 1e-6, np.zeros_like(a)
    for i in range(3):
        for j in range(3):
            step = np.zeros_like(a)
            step[i, j] = eps
            numeric[i, j] = (np.linalg.det(a + step) - np.linalg.det(a - step)) / (2 * eps)
    np.testing.assert_allclose(as_np(x.grad), numeric, atol=1e-8)
    assert np.abs(numeric).max() > 1
    # a batch mixing singular and invertible matrices: both forms, each where it applies
    b = np.stack([a, rand(3, 3, kind="square")])
    y = to(kiln, b, grad=True)
    kiln.linalg.det(y).sum().backward()
    t = to(torch, b[1:], grad=True)
    torch.linalg.det(t).sum().backward()
    np.testing.assert_allclose(as_np(y.grad)[0], numeric, atol=1e-8)
    np.testing.assert_allclose(as_np(y.grad)[1:], as_np(t.grad), rtol=1e-10)


# --- gradients ---------------------------------------------------------------------------------

GRAD_CASES = {
    "inv": (lambda lib, a: wsum(lib, lib.linalg.inv(a)), "square", (2, 3, 3)),
    "det": (lambda lib, a: wsum(lib, lib.linalg.det(a)), "square", (2, 3, 3)),
    "slogdet": (lambda lib, a: wsum(lib, lib.linalg.slogdet(a)[1]), "square", (2, 3, 3)),
    "logdet": (lambda lib, a: wsum(lib, lib.logdet(a)), "spd", (3, 3)),
    "cholesky": (lambda lib, a: wsum(lib, lib.linalg.cholesky(a)), "spd", (2, 4, 4)),
    "cholesky_upper": (lambda lib, a: wsum(lib, lib.linalg.cholesky(a, upper=True)), "spd", (4, 4)),
    "qr_tall": (lambda lib, a: wsum(lib, *lib.linalg.qr(a)), "general", (2, 5, 3)),
    "qr_square": (lambda lib, a: wsum(lib, *lib.linalg.qr(a)), "general", (4, 4)),
    "qr_wide": (lambda lib, a: wsum(lib, *lib.linalg.qr(a)), "general", (3, 5)),
    "qr_wide_complete": (lambda lib, a: wsum(lib, *lib.linalg.qr(a, mode="complete")), "general", (3, 5)),
    "qr_r_only_grad": (lambda lib, a: wsum(lib, lib.linalg.qr(a)[1]), "general", (5, 3)),
    "svd_tall": (lambda lib, a: wsum(lib, *[t.abs() for t in lib.linalg.svd(a, full_matrices=False)]), "general",
                 (2, 5, 3)),
    "svd_wide": (lambda lib, a: wsum(lib, *[t.abs() for t in lib.linalg.svd(a, full_matrices=False)]), "general",
                 (3, 5)),
    "svd_square": (lambda lib, a: wsum(lib, *[t.abs() for t in lib.linalg.svd(a)]), "general", (4, 4)),
    "svd_uv_product": (lambda lib, a: wsum(lib, lib.linalg.svd(a, full_matrices=False)[0][..., :2]
                                           @ lib.linalg.svd(a, full_matrices=False)[2][..., :2, :]), "general", (4, 6)),
    "svdvals": (lambda lib, a: wsum(lib, lib.linalg.svdvals(a)), "general", (2, 4, 3)),
    "eigh": (lambda lib, a: wsum(lib, lib.linalg.eigh(a)[0], lib.linalg.eigh(a)[1].abs()), "sym", (2, 4, 4)),
    "eigh_upper": (lambda lib, a: wsum(lib, lib.linalg.eigh(a, "U")[1].abs()), "sym", (4, 4)),
    "eigvalsh": (lambda lib, a: wsum(lib, lib.linalg.eigvalsh(a)), "sym", (3, 3)),
    "pinv": (lambda lib, a: wsum(lib, lib.linalg.pinv(a)), "general", (4, 3)),
    "matrix_power_neg": (lambda lib, a: wsum(lib, lib.linalg.matrix_power(a, -2)), "square", (3, 3)),
    "nuclear_norm": (lambda lib, a: lib.linalg.matrix_norm(a, "nuc"), "general", (3, 4)),
    "torch_svd": (lambda lib, a: wsum(lib, *[t.abs() for t in lib.svd(a)]), "general", (4, 3)),
}


@pytest.mark.parametrize("name", list(GRAD_CASES))
def test_gradients_as_torch(name):
    fn, kind, shape = GRAD_CASES[name]
    compare_grads(fn, [rand(*shape, kind=kind, seed=3)])


@pytest.mark.parametrize("fn", [
    lambda a: kiln.linalg.inv(a), lambda a: kiln.linalg.det(a), lambda a: kiln.linalg.slogdet(a)[1],
    lambda a: kiln.linalg.solve(a, a[..., :1] * 2 + 1), lambda a: kiln.linalg.cholesky(a @ a.mT + 3 * kiln.eye(3)),
    lambda a: kiln.linalg.qr(a)[0], lambda a: kiln.linalg.svdvals(a),
    lambda a: kiln.linalg.eigvalsh(a + a.mT),
])
def test_gradcheck(fn):
    a = kiln.tensor(rand(3, 3, kind="square", seed=5).tolist(), dtype=kiln.float64, requires_grad=True)
    assert kiln.autograd.gradcheck(fn, (a,))


# --- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize("call", [
    lambda lib: lib.linalg.inv(lib.zeros(3, 3)),
    lambda lib: lib.linalg.inv(lib.zeros(2, 3, 3)),
    lambda lib: lib.inverse(lib.zeros(3, 3)),
    lambda lib: lib.linalg.inv(lib.randn(3)),
    lambda lib: lib.linalg.inv(lib.randn(3, 2)),
    lambda lib: lib.linalg.inv(lib.ones(3, 3, dtype=lib.long)),
    lambda lib: lib.linalg.inv(lib.ones(3, 3, dtype=lib.half)),
    lambda lib: lib.linalg.det(lib.ones(3, 2)),
    lambda lib: lib.linalg.cholesky(-lib.eye(3)),
    lambda lib: lib.linalg.cholesky(-lib.eye(3).expand(2, 3, 3)),
    lambda lib: lib.linalg.solve(lib.zeros(3, 3), lib.ones(3)),
    lambda lib: lib.linalg.solve(lib.zeros(2, 3, 3), lib.ones(2, 3)),
    lambda lib: lib.linalg.solve(lib.eye(3), lib.ones(2, 3)),
    lambda lib: lib.linalg.solve(lib.eye(3), lib.ones(4)),
    lambda lib: lib.linalg.solve(lib.eye(3), lib.ones(3, dtype=lib.float64)),
    lambda lib: lib.linalg.qr(lib.ones(3), mode="reduced"),
    lambda lib: lib.linalg.qr(lib.ones(3, 3), mode="x"),
    lambda lib: lib.linalg.svd(lib.ones(3)),
    lambda lib: lib.linalg.svd(lib.full((2, 3, 3), float("nan"))),
    lambda lib: lib.linalg.eigh(lib.ones(3, 2)),
    lambda lib: lib.linalg.eigh(lib.ones(3, 3), UPLO="X"),
    lambda lib: lib.linalg.lu_factor(lib.zeros(3, 3)),
    # 16-bit floats: the kernel's NotImplementedError, or the dtype check of inv and slogdet
    lambda lib: lib.linalg.qr(lib.eye(3).half()),
    lambda lib: lib.linalg.qr(lib.eye(3).bfloat16()),
    lambda lib: lib.linalg.svd(lib.eye(3).half()),
    lambda lib: lib.linalg.eigh(lib.eye(3).half()),
    lambda lib: lib.linalg.eigh(lib.eye(3).long()),
    lambda lib: lib.linalg.cholesky(lib.eye(3).half()),
    lambda lib: lib.linalg.det(lib.eye(3).half()),
    lambda lib: lib.linalg.solve(lib.eye(3).half(), lib.eye(3).half()),
    lambda lib: lib.linalg.lu_factor(lib.eye(3).half()),
    lambda lib: lib.linalg.slogdet(lib.eye(3).half()),
    lambda lib: lib.linalg.svd(lib.eye(3).long()),
])
def test_errors_as_torch(call):
    with pytest.raises(Exception) as want:
        call(torch)
    with pytest.raises(Exception) as got:
        call(kiln)
    if isinstance(want.value, torch.linalg.LinAlgError):
        assert isinstance(got.value, kiln.linalg.LinAlgError)
    else:
        assert type(got.value) is type(want.value)
    assert str(got.value) == str(want.value)


def test_ex_variants_report_info_without_raising():
    a = kiln.zeros(2, 3, 3)
    a[1] = kiln.eye(3)
    assert kiln.linalg.inv_ex(a).info.tolist() == torch.linalg.inv_ex(torch.tensor(a.tolist())).info.tolist()
    assert kiln.linalg.cholesky_ex(a).info.tolist() == [1, 0]
    assert kiln.linalg.solve_ex(a, kiln.ones(2, 3)).info.tolist() == [1, 0]
    assert kiln.linalg.lu_factor_ex(a).info.tolist() == [1, 0]


def test_qr_backward_errors_as_torch():
    for mode, shape in (("r", (3, 3)), ("complete", (4, 3))):
        for lib in (torch, kiln):
            a = lib.ones(*shape, dtype=lib.float64).requires_grad_()
            r = lib.linalg.qr(a + lib.eye(*shape, dtype=lib.float64), mode=mode)
            with pytest.raises(RuntimeError, match="linalg.qr|QR decomposition"):
                (r[1].sum() + (r[0].sum() if mode != "r" else 0)).backward()


# --- compiled ----------------------------------------------------------------------------------


def program(lib, a, b):
    sign, logabs = lib.linalg.slogdet(a)
    x = lib.linalg.solve(a, b)
    u, s, vh = lib.linalg.svd(a, full_matrices=False)
    w, v = lib.linalg.eigh(a @ a.mT)
    q, r = lib.linalg.qr(a)
    l = lib.linalg.cholesky(a @ a.mT + lib.eye(a.shape[-1], dtype=a.dtype))
    return (lib.linalg.inv(a).sum() + lib.linalg.det(a).sum() + logabs.sum() + x.sum() + s.sum() + w.sum()
            + (u @ vh).sum() + (v.abs()).sum() + (q @ r).sum() + l.sum())


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_equals_eager(backend):
    arrays = [rand(2, 3, 3, kind="square"), rand(2, 3, 2, seed=1)]
    want_ts = [to(kiln, x, grad=True) for x in arrays]
    want = program(kiln, *want_ts)
    want.backward()
    got_ts = [to(kiln, x, grad=True) for x in arrays]
    kiln._dynamo.reset()
    got = kiln.compile(lambda a, b: program(kiln, a, b), backend=backend, fullgraph=True)(*got_ts)
    got.backward()
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-10)
    for g, w in zip(got_ts, want_ts):
        np.testing.assert_allclose(as_np(g.grad), as_np(w.grad), rtol=1e-8, atol=1e-10)
    torch_ts = [to(torch, x, grad=True) for x in arrays]
    program(torch, *torch_ts).backward()
    for g, w in zip(got_ts, torch_ts):
        np.testing.assert_allclose(as_np(g.grad), as_np(w.grad), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_raises_linalg_errors(backend):
    kiln._dynamo.reset()
    f = kiln.compile(lambda a: kiln.linalg.inv(a) + 1, backend=backend, fullgraph=True)
    assert kiln.allclose(f(2 * kiln.eye(3)), kiln.eye(3) / 2 + 1)
    with pytest.raises(kiln.linalg.LinAlgError, match="linalg.inv: The diagonal element 1 is zero"):
        f(kiln.zeros(3, 3))


def test_out_arguments_are_resized_as_torch():
    a = rand(2, 3, 3, kind="square")
    for lib in (kiln, torch):
        x = to(lib, a)
        out = lib.empty(0, dtype=lib.float64)
        assert lib.linalg.inv(x, out=out) is out and tuple(out.shape) == (2, 3, 3)
        sign, logabs = lib.empty(0, dtype=lib.float64), lib.empty(0, dtype=lib.float64)
        r = lib.linalg.slogdet(x, out=(sign, logabs))
        assert r[0] is sign and r.logabsdet is logabs and tuple(logabs.shape) == (2,)
    np.testing.assert_allclose(as_np(kiln.linalg.inv(to(kiln, a))), np.linalg.inv(a), rtol=1e-10)
