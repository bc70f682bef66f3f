"""The matrix factorizations on CUDA through cuSOLVER (tensor/ops/lapack_cuda.cc) and the linalg
functions composed from them, against kiln's CPU LAPACK kernels (tested against PyTorch in tests/):
float32 and float64, single matrices and batches, square, tall and wide. Factorizations whose
factors are unique up to signs (QR, SVD, eigh) are checked by what defines them: reconstruction,
orthonormality, the triangle, and values equal to the CPU's."""

import numpy as np
import pytest

import kiln

from cuda_util import close, host, needs_kernels

pytestmark = needs_kernels
TOL = {"float32": 2e-4, "float64": 1e-10}


def well_conditioned(name, shape, seed):
    """Random matrices plus a multiple of the identity: solvable, far from singular."""
    a = host(name, shape, seed, -1.0, 1.0)
    return a + 4 * kiln.eye(shape[-1], dtype=a.dtype) if shape[-1] == shape[-2] else a


def spd(name, shape, seed):
    a = host(name, shape, seed, -1.0, 1.0)
    return a @ a.transpose(-2, -1) + shape[-1] * kiln.eye(shape[-1], dtype=a.dtype)


@pytest.mark.parametrize("name", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(5, 5), (3, 6, 6), (2, 2, 1, 1), (0, 3, 3)])
def test_lu_inverse_determinants_solve(name, shape):
    tol = TOL[name]
    a = well_conditioned(name, shape, 1)
    lu_g, piv_g = kiln.linalg.lu_factor(a.cuda())
    lu_c, piv_c = kiln.linalg.lu_factor(a)
    close(lu_g, lu_c, tol, "LU")
    np.testing.assert_array_equal(piv_g.cpu().numpy(), piv_c.numpy())
    assert lu_g.stride() == lu_c.stride()  # column-major, as PyTorch's
    close(kiln.linalg.inv(a.cuda()), kiln.linalg.inv(a), tol, "inv")
    close(kiln.linalg.det(a.cuda()), kiln.linalg.det(a), tol * 10, "det")
    sg, lg = kiln.linalg.slogdet(a.cuda())
    sc, lc = kiln.linalg.slogdet(a)
    close(sg, sc, 0, "sign")
    close(lg, lc, tol, "logabsdet")
    n = shape[-1]
    b = host(name, shape[:-1] + (3,), 2)
    close(kiln.linalg.solve(a.cuda(), b.cuda()), kiln.linalg.solve(a, b), tol, "solve")
    bt = host(name, shape[:-2] + (3, n), 3)
    close(kiln.linalg.solve(a.cuda(), bt.cuda(), left=False), kiln.linalg.solve(a, bt, left=False), tol, "XA = B")
    v = host(name, shape[:-1], 4)
    close(kiln.linalg.solve(a.cuda(), v.cuda()), kiln.linalg.solve(a, v), tol, "vector")
    if len(shape) == 2:  # one A against a batch of B
        bb = host(name, (4, n, 2), 5)
        close(kiln.linalg.solve(a.cuda(), bb.cuda()), kiln.linalg.solve(a, bb), tol, "broadcast")
        # the gradients through the factorizations
        ag, ac = a.cuda().requires_grad_(), a.clone().requires_grad_()
        kiln.linalg.det(ag).backward()
        kiln.linalg.det(ac).backward()
        close(ag.grad, ac.grad, tol * 10, "det grad")


def test_singular_matrices():
    a = kiln.tensor([[1.0, 2.0], [2.0, 4.0]])
    with pytest.raises(kiln.linalg.LinAlgError, match="singular"):
        kiln.linalg.inv(a.cuda())
    with pytest.raises(kiln.linalg.LinAlgError, match=r"\(Batch element 1\)"):
        kiln.linalg.solve(kiln.stack([kiln.eye(2), a]).cuda(), kiln.ones(2, 2, 1).cuda())
    _, info = kiln.linalg.inv_ex(a.cuda())
    assert info.device.type == "cuda" and int(info.item()) > 0
    sign, logabs = kiln.linalg.slogdet(a.cuda())
    assert float(sign) == 0 and float(logabs) == -float("inf")
    assert float(kiln.linalg.det(a.cuda())) == 0


@pytest.mark.parametrize("name", ["float32", "float64"])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky(name, upper):
    a = spd(name, (3, 5, 5), 6)
    close(kiln.linalg.cholesky(a.cuda(), upper=upper), kiln.linalg.cholesky(a, upper=upper), TOL[name], "cholesky")
    bad = kiln.stack([a[0], -a[1]])
    with pytest.raises(kiln.linalg.LinAlgError, match=r"\(Batch element 1\).*not positive-definite"):
        kiln.linalg.cholesky(bad.cuda())
    _, info = kiln.linalg.cholesky_ex(bad.cuda())
    assert info.cpu().tolist()[0] == 0 and info.cpu().tolist()[1] > 0


def orthonormal_columns(q, tol, what):
    qc = q.cpu().double()
    eye = kiln.eye(qc.shape[-1], dtype=kiln.float64).expand(qc.transpose(-2, -1).shape[:-1] + (qc.shape[-1],))
    np.testing.assert_allclose((qc.transpose(-2, -1) @ qc).numpy(), eye.numpy(), atol=tol, err_msg=what)


@pytest.mark.parametrize("name", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (2, 5, 5), (3, 0, 2), (2, 3, 0)])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr(name, shape, mode):
    tol = TOL[name] * 10
    a = host(name, shape, 7)
    q, r = kiln.linalg.qr(a.cuda(), mode=mode)
    qc, rc = kiln.linalg.qr(a, mode=mode)
    assert tuple(q.shape) == tuple(qc.shape) and tuple(r.shape) == tuple(rc.shape)
    assert r.stride() == rc.stride()
    np.testing.assert_array_equal(kiln.triu(r.cpu()).numpy(), r.cpu().numpy())
    # R's rows are unique up to sign: |R| equals the CPU's
    close(r.abs(), rc.abs(), tol, "|R|")
    if mode != "r" and q.numel():
        orthonormal_columns(q, tol, "Q")
        rec = q.cpu() @ r.cpu()
        np.testing.assert_allclose(rec.double().numpy(), a.double().numpy(), atol=tol, err_msg="QR = A")


@pytest.mark.parametrize("name", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (3, 5, 5), (2, 0, 3), (1, 7)])
@pytest.mark.parametrize("full", [False, True])
def test_svd(name, shape, full):
    tol = TOL[name] * 10
    a = host(name, shape, 8)
    u, s, vh = kiln.linalg.svd(a.cuda(), full_matrices=full)
    uc, sc, vhc = kiln.linalg.svd(a, full_matrices=full)
    assert (tuple(u.shape), tuple(s.shape), tuple(vh.shape)) == (tuple(uc.shape), tuple(sc.shape), tuple(vhc.shape))
    close(s, sc, tol, "singular values")
    close(kiln.linalg.svdvals(a.cuda()), sc, tol, "svdvals")
    if s.numel():
        k = s.shape[-1]
        rec = (u.cpu()[..., :k] * s.cpu().unsqueeze(-2)) @ vh.cpu()[..., :k, :]
        np.testing.assert_allclose(rec.double().numpy(), a.double().numpy(), atol=tol, err_msg="U S Vh = A")
        orthonormal_columns(u, tol, "U")
        orthonormal_columns(vh.transpose(-2, -1), tol, "V")
    with pytest.raises(kiln.linalg.LinAlgError, match="non-finite"):
        kiln.linalg.svd(kiln.full((3, 3), float("nan")).cuda())
    if a.dim() == 2 and a.numel():  # pinv and lstsq go through the SVD
        close(kiln.linalg.pinv(a.cuda()), kiln.linalg.pinv(a), tol, "pinv")


@pytest.mark.parametrize("name", ["float32", "float64"])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh(name, uplo):
    tol = TOL[name] * 10
    a = spd(name, (3, 6, 6), 9)
    a = a + kiln.triu(host(name, (3, 6, 6), 10), 1)  # the unread triangle differs between the choices
    w, v = kiln.linalg.eigh(a.cuda(), UPLO=uplo)
    wc, vc = kiln.linalg.eigh(a, UPLO=uplo)
    close(w, wc, tol, "eigenvalues")
    close(kiln.linalg.eigvalsh(a.cuda(), UPLO=uplo), wc, tol, "eigvalsh")
    sym = kiln.tril(a) + kiln.tril(a, -1).transpose(-2, -1) if uplo == "L" else kiln.triu(a) + kiln.triu(a, 1).transpose(-2, -1)
    rec = (v.cpu() * w.cpu().unsqueeze(-2)) @ v.cpu().transpose(-2, -1)
    np.testing.assert_allclose(rec.double().numpy(), sym.double().numpy(), atol=tol * 10, err_msg="V W V^T")
    orthonormal_columns(v, tol, "V")
