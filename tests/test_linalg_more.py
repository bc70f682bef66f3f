"""kiln.linalg's issue-17 additions against PyTorch 2.13: lstsq (every driver's fields), matrix_exp,
lu_solve, tensorinv, tensorsolve, ldl_factor(_ex) and ldl_solve, and torch.matrix_exp/torch.lu_solve.

Each function runs on the same data in both libraries (float32 and float64, contiguous and
transposed inputs): values, dtypes and shapes equal; float64 gradients equal where PyTorch has a
derivative. LDL results equal torch's LAPACK output exactly in form (pivots, info, the compact LD)
and each library's factor solves with the other's ldl_solve. Bad input raises torch's class with
torch's message. One program of the differentiable ones is compiled with inductor and aot_eager and
must match eager in values and gradients (matrix_exp reads its norm: one graph break).
"""

import warnings

import numpy as np
import pytest

import kiln
from conftest import assert_same, requires_torch, torch

pytestmark = requires_torch
if torch is None:  # the case tables below are built with torch
    pytest.skip("PyTorch is the oracle and is only installed for 3.11", allow_module_level=True)

RNG = np.random.default_rng(29)


def arr(*shape, scale=1.0):
    return RNG.standard_normal(shape) * scale


def lib_linalg(lib):
    return lib.linalg


def make(lib, a, dtype, transposed, requires_grad=False):
    """numpy array -> tensor of lib; transposed: the same values in column-major strides."""
    dt = getattr(lib, dtype)
    if transposed and a.ndim >= 2:
        t = lib.tensor(np.ascontiguousarray(np.swapaxes(a, -1, -2)), dtype=dt).transpose(-1, -2)
    else:
        t = lib.tensor(a, dtype=dt)
    return t.requires_grad_(requires_grad) if requires_grad else t


def _lu_of(a):
    """torch's LU factorisation of a, as arrays (the same compact factor for both libraries)."""
    LU, pivots = torch.linalg.lu_factor(torch.tensor(a))
    return LU.numpy(), pivots.numpy()


def _with_pivots(fn, pivots):
    def call(lib, *ins):
        return fn(lib, *ins, lib.tensor(pivots))
    return call


_LU4, _PIV4 = _lu_of(arr(4, 4))
_LUB, _PIVB = _lu_of(arr(2, 3, 3))

# (id, fn(lib, *inputs), input arrays, which inputs are differentiable)
FUNCS = [
    ("lstsq-tall", lambda L, A, B: tuple(L.linalg.lstsq(A, B)), [arr(6, 3), arr(6, 2)], [0, 1]),
    ("lstsq-wide", lambda L, A, B: tuple(L.linalg.lstsq(A, B)), [arr(3, 5), arr(3, 2)], [0, 1]),
    ("lstsq-gelsd", lambda L, A, B: tuple(L.linalg.lstsq(A, B, driver="gelsd")), [arr(5, 3), arr(5, 4)], [0, 1]),
    ("lstsq-gelss-batch", lambda L, A, B: tuple(L.linalg.lstsq(A, B, driver="gelss")), [arr(2, 5, 3), arr(1, 5, 2)],
     [0, 1]),
    ("lstsq-gels-vector", lambda L, A, B: tuple(L.linalg.lstsq(A, B, driver="gels")), [arr(5, 3), arr(5)], [0, 1]),
    ("lstsq-batch-of-vectors", lambda L, A, B: tuple(L.linalg.lstsq(A, B, driver="gelsd")), [arr(2, 5, 3), arr(2, 5)],
     [0, 1]),
    ("lstsq-rcond", lambda L, A, B: tuple(L.linalg.lstsq(A, B, rcond=1e-3)), [arr(4, 4), arr(4, 2)], [0, 1]),
    ("matrix_exp-small", lambda L, A: L.linalg.matrix_exp(A), [arr(3, 3, scale=0.01)], [0]),
    ("matrix_exp", lambda L, A: L.linalg.matrix_exp(A), [arr(4, 4)], [0]),
    ("matrix_exp-scaled-batch", lambda L, A: L.linalg.matrix_exp(A), [arr(3, 5, 5) * np.array([0.01, 1, 6])[:, None,
                                                                                                              None]],
     [0]),
    ("matrix_exp-1x1", lambda L, A: L.linalg.matrix_exp(A), [arr(2, 1, 1)], [0]),
    ("lu_solve", _with_pivots(lambda L, LU, B, p: L.linalg.lu_solve(LU, p, B), _PIV4), [_LU4, arr(4, 3)], [0, 1]),
    ("lu_solve-adjoint", _with_pivots(lambda L, LU, B, p: L.linalg.lu_solve(LU, p, B, adjoint=True), _PIV4),
     [_LU4, arr(4, 2)], [0, 1]),
    ("lu_solve-right", _with_pivots(lambda L, LU, B, p: L.linalg.lu_solve(LU, p, B, left=False), _PIV4),
     [_LU4, arr(3, 4)], [0, 1]),
    ("lu_solve-right-adjoint-batch",
     _with_pivots(lambda L, LU, B, p: L.linalg.lu_solve(LU, p, B, left=False, adjoint=True), _PIVB),
     [_LUB, arr(2, 5, 3)], [0, 1]),
    ("lu_solve-broadcast", _with_pivots(lambda L, LU, B, p: L.linalg.lu_solve(LU, p, B), _PIVB),
     [_LUB, arr(3, 2)], [0, 1]),
    ("tensorinv", lambda L, A: L.linalg.tensorinv(A, ind=2), [arr(4, 3, 6, 2)], [0]),
    ("tensorinv-ind1", lambda L, A: L.linalg.tensorinv(A, ind=1), [arr(6, 2, 3)], [0]),
    ("tensorsolve", lambda L, A, B: L.linalg.tensorsolve(A, B), [arr(2, 3, 6), arr(2, 3)], [0, 1]),
    ("tensorsolve-dims", lambda L, A, B: L.linalg.tensorsolve(A, B, dims=(0, 2)), [arr(3, 6, 4, 2), arr(6, 2)],
     [0, 1]),
    ("torch.matrix_exp", lambda L, A: L.matrix_exp(A), [arr(3, 3)], [0]),
    ("Tensor.matrix_exp", lambda L, A: A.matrix_exp(), [arr(2, 3, 3)], [0]),
]


def _floating(out):
    return [o for o in (out if isinstance(out, tuple) else (out,)) if o.dtype.is_floating_point and o.numel()]


@pytest.mark.parametrize("layout", ["contig", "transposed"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name, fn, arrays, diff", FUNCS, ids=[f[0] for f in FUNCS])
def test_function_matches_torch(name, fn, arrays, diff, dtype, layout):
    grad = dtype == "float64"
    k_in = [make(kiln, a, dtype, layout == "transposed", grad and i in diff) for i, a in enumerate(arrays)]
    t_in = [make(torch, a, dtype, layout == "transposed", grad and i in diff) for i, a in enumerate(arrays)]
    got, want = fn(kiln, *k_in), fn(torch, *t_in)
    tol = (1e-9, 1e-10) if grad else (2e-4, 2e-5)
    assert_same(got, tuple(w.detach() for w in want) if isinstance(want, tuple) else want.detach(), *tol)
    if grad:
        k_outs, t_outs = _floating(got), _floating(want)
        weights = [np.random.default_rng(1).uniform(-1, 1, size=tuple(t.shape)) for t in t_outs]
        k_loss = sum((o * kiln.tensor(w)).sum() for o, w in zip(k_outs, weights))
        t_loss = sum((o * torch.tensor(w)).sum() for o, w in zip(t_outs, weights))
        k_grads = kiln.autograd.grad(k_loss, [k_in[i] for i in diff])
        t_grads = torch.autograd.grad(t_loss, [t_in[i] for i in diff])
        for kg, tg in zip(k_grads, t_grads):
            assert_same(kg, tg, 1e-8, 1e-9)


def test_lstsq_rank_deficient_gives_the_minimum_norm_solution():
    a = arr(6, 4)
    a[:, 3] = a[:, 0] - 2 * a[:, 1]
    b = arr(6, 2)
    # rcond far above rounding: column 3 depends on 0 and 1 only up to an ulp, and at the default
    # rcond (eps * 6) the rank decision flipped with the BLAS's summation order (a CI run gave
    # another solution for the default driver)
    # The oracle is the definition, pinv(a) @ b: under load, a full-suite run twice saw the two
    # libraries disagree (one of them off the minimum-norm solution by 0.08); kiln must match it.
    minimum_norm = np.linalg.pinv(a) @ b
    for driver in (None, "gelsy", "gelsd", "gelss"):
        got = kiln.linalg.lstsq(kiln.tensor(a), kiln.tensor(b), rcond=1e-10, driver=driver)
        want = torch.linalg.lstsq(torch.tensor(a), torch.tensor(b), rcond=1e-10, driver=driver)
        np.testing.assert_allclose(got.solution.numpy(), minimum_norm, rtol=1e-9, atol=1e-10, err_msg=str(driver))
        assert got.rank.item() == want.rank.item() == 3 and got.residuals.numel() == want.residuals.numel() == 0


def _symmetric(*shape):
    a = arr(*shape)
    return a + np.swapaxes(a, -1, -2)


LDL_CASES = [
    ("random", _symmetric(5, 5)),
    ("two-by-two-pivots", np.array([[0.0, 1, 2], [1, 0, 3], [2, 3, 0]])),
    ("zero-diagonal", _symmetric(6, 6) * (1 - np.eye(6))),
    ("indefinite-batch", _symmetric(2, 3, 4, 4)),
    ("larger", _symmetric(12, 12)),
    ("singular", np.zeros((3, 3))),
    ("one-by-one", np.array([[2.5]])),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name, a", LDL_CASES, ids=[c[0] for c in LDL_CASES])
def test_ldl_factor_ex_matches_lapack(name, a, dtype):
    tol = (1e-10, 1e-12) if dtype == "float64" else (1e-4, 1e-5)
    lower = np.tril(a) + np.triu(RNG.standard_normal(a.shape), 1)  # only the lower triangle is read
    got = kiln.linalg.ldl_factor_ex(kiln.tensor(lower, dtype=getattr(kiln, dtype)))
    want = torch.linalg.ldl_factor_ex(torch.tensor(lower, dtype=getattr(torch, dtype)))
    assert type(got).__name__ == "linalg_ldl_factor_ex" and got.LD is got[0]
    assert_same(tuple(got), tuple(want), *tol)
    if want.info.sum().item() == 0:  # each library solves with the other's factor
        b = arr(*a.shape[:-1], 2)
        B_k, B_t = kiln.tensor(b, dtype=getattr(kiln, dtype)), torch.tensor(b, dtype=getattr(torch, dtype))
        x_t = torch.linalg.ldl_solve(want.LD, want.pivots, B_t)
        assert_same(kiln.linalg.ldl_solve(got.LD, got.pivots, B_k), x_t, *tol)
        assert_same(kiln.linalg.ldl_solve(kiln.tensor(want.LD.numpy()), kiln.tensor(want.pivots.numpy()), B_k), x_t,
                    *tol)
        factor = kiln.linalg.ldl_factor(kiln.tensor(lower, dtype=getattr(kiln, dtype)), hermitian=True)
        assert type(factor).__name__ == "linalg_ldl_factor" and len(factor) == 2
        assert_same(tuple(factor), tuple(want[:2]), *tol)


def test_ldl_solve_broadcasts_and_accepts_int64_pivots():
    """Batch dimensions broadcast (PyTorch 2.13's CPU ldl_solve segfaults on a broadcast, so its
    result is taken on the factor expanded beforehand); any integer pivots are accepted."""
    a, b = _symmetric(2, 4, 4), arr(3, 1, 4, 2)
    LD, pivots = torch.linalg.ldl_factor(torch.tensor(a))
    want = torch.linalg.ldl_solve(LD.expand(3, 2, 4, 4).contiguous(), pivots.expand(3, 2, 4).contiguous(),
                                  torch.tensor(b).expand(3, 2, 4, 2))
    got = kiln.linalg.ldl_solve(kiln.tensor(LD.numpy()), kiln.tensor(pivots.numpy()), kiln.tensor(b))
    assert_same(got, want, 1e-10, 1e-12)
    want = torch.linalg.ldl_solve(LD[0], pivots[0].long(), torch.tensor(b[0, 0]))
    got = kiln.linalg.ldl_solve(kiln.tensor(LD[0].numpy()), kiln.tensor(pivots[0].numpy()).long(),
                                kiln.tensor(b[0, 0]))
    assert_same(got, want, 1e-10, 1e-12)


def test_torch_lu_solve_is_the_deprecated_alias():
    LU, pivots, b = kiln.tensor(_LU4), kiln.tensor(_PIV4), kiln.tensor(arr(4, 2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        x = kiln.lu_solve(b, LU, pivots)
        y = b.lu_solve(LU, pivots)
    assert len(caught) <= 1 and all("torch.lu_solve is deprecated" in str(w.message) for w in caught)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = torch.lu_solve(torch.tensor(b.numpy()), torch.tensor(_LU4), torch.tensor(_PIV4))
    assert_same(x, want, 1e-12, 1e-12)
    assert_same(y, want, 1e-12, 1e-12)


ERRORS = [
    ("lstsq-driver", lambda L: L.linalg.lstsq(L.ones(3, 2), L.ones(3, 1), driver="foo")),
    ("lstsq-rows", lambda L: L.linalg.lstsq(L.ones(3, 2), L.ones(4, 1))),
    ("lstsq-vector-rows", lambda L: L.linalg.lstsq(L.ones(3, 2), L.ones(4))),
    ("lstsq-dtypes", lambda L: L.linalg.lstsq(L.ones(3, 2), L.ones(3, 1, dtype=L.float64))),
    ("lstsq-1d", lambda L: L.linalg.lstsq(L.ones(3), L.ones(3))),
    ("lstsq-ints", lambda L: L.linalg.lstsq(L.ones(3, 2, dtype=L.int64), L.ones(3, 1, dtype=L.int64))),
    ("lstsq-dims", lambda L: L.linalg.lstsq(L.ones(3, 2), L.ones(1, 1, 3, 1))),
    ("matrix_exp-1d", lambda L: L.linalg.matrix_exp(L.ones(3))),
    ("matrix_exp-square", lambda L: L.linalg.matrix_exp(L.ones(2, 3))),
    ("matrix_exp-int", lambda L: L.linalg.matrix_exp(L.ones(2, 2, dtype=L.int64))),
    ("lu_solve-pivots-len", lambda L: L.linalg.lu_solve(L.eye(3), L.ones(2, dtype=L.int32), L.ones(3, 2))),
    ("lu_solve-pivots-dtype", lambda L: L.linalg.lu_solve(L.eye(3), L.ones(3, dtype=L.int64), L.ones(3, 2))),
    ("lu_solve-shapes", lambda L: L.linalg.lu_solve(L.eye(3), L.ones(3, dtype=L.int32), L.ones(4, 2))),
    ("lu_solve-right-shapes", lambda L: L.linalg.lu_solve(L.eye(3), L.ones(3, dtype=L.int32), L.ones(3, 2),
                                                          left=False)),
    ("lu_solve-square", lambda L: L.linalg.lu_solve(L.ones(3, 4), L.ones(3, dtype=L.int32), L.ones(3, 2))),
    ("lu_solve-vector", lambda L: L.linalg.lu_solve(L.eye(3), L.ones(3, dtype=L.int32), L.ones(3))),
    ("lu_solve-dtypes", lambda L: L.linalg.lu_solve(L.eye(3), L.ones(3, dtype=L.int32), L.ones(3, 2,
                                                                                            dtype=L.float64))),
    ("tensorinv-ind", lambda L: L.linalg.tensorinv(L.ones(4, 4), ind=0)),
    ("tensorinv-shape", lambda L: L.linalg.tensorinv(L.ones(4, 6), ind=1)),
    ("tensorinv-singular", lambda L: L.linalg.tensorinv(L.zeros(2, 2, 4), ind=2)),
    ("tensorsolve-shape", lambda L: L.linalg.tensorsolve(L.ones(2, 3, 6), L.ones(2, 4))),
    ("ldl-square", lambda L: L.linalg.ldl_factor(L.ones(3, 4))),
    ("ldl-1d", lambda L: L.linalg.ldl_factor(L.ones(3))),
    ("ldl-int", lambda L: L.linalg.ldl_factor(L.ones(3, 3, dtype=L.int64))),
    ("ldl-singular", lambda L: L.linalg.ldl_factor(L.zeros(3, 3))),
    ("ldl-singular-checked", lambda L: L.linalg.ldl_factor_ex(L.zeros(2, 3, 3), check_errors=True)),
    ("ldl_solve-dtypes", lambda L: L.linalg.ldl_solve(L.eye(3, dtype=L.float64), L.ones(3, dtype=L.int32),
                                                      L.ones(3, 2))),
    ("ldl_solve-shapes", lambda L: L.linalg.ldl_solve(L.eye(3), L.ones(3, dtype=L.int32), L.ones(4, 2))),
    ("ldl_solve-pivots-shape", lambda L: L.linalg.ldl_solve(L.eye(3), L.ones(2, dtype=L.int32), L.ones(3, 2))),
    ("ldl_solve-vector", lambda L: L.linalg.ldl_solve(L.eye(3), L.ones(3, dtype=L.int32), L.ones(3))),
]


def _message(text):
    """torch's message without its internal-assert preamble (kiln raises the same RuntimeError plainly)."""
    return text.split("please report a bug to PyTorch. ")[-1]


@pytest.mark.parametrize("desc, call", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(desc, call):
    with pytest.raises(Exception) as want:
        call(torch)
    with pytest.raises(Exception) as got:
        call(kiln)
    want_cls = next(c for c in type(want.value).__mro__ if c.__module__ == "builtins")
    assert isinstance(got.value, want_cls), f"{desc}: kiln {type(got.value)} {got.value}; torch {want.value!r}"
    if desc != "tensorinv-singular":  # (kiln's inv names its own op in the message)
        assert str(got.value) == _message(str(want.value))


def test_ldl_has_no_derivative_as_torch():
    """PyTorch has no derivative for ldl_factor/ldl_solve; kiln's results do not require grad."""
    a = kiln.tensor(_symmetric(3, 3), requires_grad=True)
    LD, pivots = kiln.linalg.ldl_factor(a)
    x = kiln.linalg.ldl_solve(LD, pivots, kiln.ones(3, 1, dtype=kiln.float64, requires_grad=True))
    assert not LD.requires_grad and not x.requires_grad


# --- one compiled program --------------------------------------------------------------------------
def _program(lib, A, B, M, LU, E):
    """A (6, 4), B (6, 3), M (4, 4), LU (4, 4) a factor with _PIV4, E (3, 3)."""
    pivots = lib.tensor(_PIV4)
    result = lib.linalg.lstsq(A, B)
    parts = [
        result.solution.square().sum(), lib.linalg.lstsq(A, B, driver="gelsd").residuals.sum(),
        lib.linalg.lu_solve(LU, pivots, B[:4]).sum(), lib.linalg.lu_solve(LU, pivots, B[:4].mT, left=False).sum(),
        lib.linalg.tensorinv(M.reshape(2, 2, 2, 2)).sin().sum(), lib.linalg.tensorsolve(M.reshape(2, 2, 4),
                                                                                       B[:2, :2]).sum(),
        lib.linalg.matrix_exp(E).sum(),
    ]
    return lib.stack(parts)


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_compiled_program_matches_eager(backend):
    kiln._dynamo.reset()
    arrays = [arr(6, 4), arr(6, 3), arr(4, 4) + 4 * np.eye(4), _LU4, arr(3, 3)]
    ins = [kiln.tensor(a, dtype=kiln.float64, requires_grad=True) for a in arrays]
    eager = _program(kiln, *ins)
    compiled = kiln.compile(lambda *a: _program(kiln, *a), backend=backend)(*ins)
    assert_same(compiled, eager.detach(), 1e-9, 1e-10)
    t_ins = [torch.tensor(a, requires_grad=True) for a in arrays]
    want = _program(torch, *t_ins)
    assert_same(eager, want.detach(), 1e-9, 1e-10)
    g = arr(eager.shape[0])
    k_eager = kiln.autograd.grad(eager, ins, kiln.tensor(g))
    for ge, gc, gt in zip(k_eager, kiln.autograd.grad(compiled, ins, kiln.tensor(g)),
                          torch.autograd.grad(want, t_ins, torch.tensor(g))):
        assert_same(gc, ge, 1e-8, 1e-9)
        assert_same(ge, gt, 1e-8, 1e-9)
    kiln._dynamo.reset()
