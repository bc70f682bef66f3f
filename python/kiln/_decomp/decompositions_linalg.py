"""Decompositions of the public linear-algebra functions (tensor/ops/lapack_functions.cc) onto the
LAPACK factorization ops, which are core (linalg_inv -> linalg_inv_ex, det -> _linalg_det, svd ->
_linalg_svd, ...): the same calls the C++ composites make, with check_errors=True where the public
function raises."""

import math

from kiln._decomp import register_decomposition
from kiln._ops import ops

aten = ops.aten


@register_decomposition([aten.linalg_inv.default, aten.inverse.default])
def linalg_inv(A):
    return aten.linalg_inv_ex.default(A, check_errors=True)[0]


@register_decomposition([aten.linalg_det.default, aten.det.default])
def linalg_det(A):
    return aten._linalg_det.default(A)[0]


@register_decomposition([aten.linalg_slogdet.default, aten.slogdet.default])
def linalg_slogdet(A):
    sign, logabsdet, _, _ = aten._linalg_slogdet.default(A)
    return sign, logabsdet


@register_decomposition(aten.logdet.default)
def logdet(A):
    sign, logabsdet, _, _ = aten._linalg_slogdet.default(A)
    nan = aten.full.default([], math.nan, dtype=A.dtype, device=A.device)
    return aten.where.self(aten.eq.Scalar(sign, -1), nan, logabsdet)


@register_decomposition(aten.linalg_solve_ex.default)
def linalg_solve_ex(A, B, *, left=True, check_errors=False):
    result, _, _, info = aten._linalg_solve_ex.default(A, B, left=left, check_errors=check_errors)
    return result, info


@register_decomposition(aten.linalg_solve.default)
def linalg_solve(A, B, *, left=True):
    return aten._linalg_solve_ex.default(A, B, left=left, check_errors=True)[0]


@register_decomposition(aten.linalg_cholesky.default)
def linalg_cholesky(A, *, upper=False):
    return aten.linalg_cholesky_ex.default(A, upper=upper, check_errors=True)[0]


@register_decomposition(aten.cholesky.default)
def cholesky(A, upper=False):
    return aten.linalg_cholesky_ex.default(A, upper=upper, check_errors=True)[0]


@register_decomposition(aten.linalg_lu_factor.default)
def linalg_lu_factor(A, *, pivot=True):
    LU, pivots, _ = aten.linalg_lu_factor_ex.default(A, pivot=pivot, check_errors=True)
    return LU, pivots


@register_decomposition(aten.qr.default)
def qr(A, some=True):
    return aten.linalg_qr.default(A, "reduced" if some else "complete")


@register_decomposition(aten.linalg_svd.default)
def linalg_svd(A, full_matrices=True, *, driver=None):
    return aten._linalg_svd.default(A, full_matrices, True, driver=driver)


@register_decomposition(aten.linalg_svdvals.default)
def linalg_svdvals(A, *, driver=None):
    return aten._linalg_svd.default(A, False, A.requires_grad, driver=driver)[1]


@register_decomposition(aten.svd.default)
def svd(A, some=True, compute_uv=True):
    if not compute_uv:
        S = aten._linalg_svd.default(A, False, A.requires_grad)[1]
        batch, m, n = list(A.shape[:-2]), A.shape[-2], A.shape[-1]
        U = aten.full.default(batch + [m, m], 0, dtype=A.dtype, device=A.device)
        V = aten.full.default(batch + [n, n], 0, dtype=A.dtype, device=A.device)
        return U, S, aten.transpose.int(V, -2, -1)
    U, S, Vh = aten._linalg_svd.default(A, not some, True)
    return U, S, aten.transpose.int(Vh, -2, -1)


@register_decomposition(aten.linalg_eigh.default)
def linalg_eigh(A, UPLO="L"):
    return aten._linalg_eigh.default(A, UPLO, True)


@register_decomposition(aten.linalg_eigvalsh.default)
def linalg_eigvalsh(A, UPLO="L"):
    return aten._linalg_eigh.default(A, UPLO, A.requires_grad)[0]
