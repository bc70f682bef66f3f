"""kiln.linalg: PyTorch's torch.linalg functions. The factorizations (inv, det, slogdet, solve,
cholesky, qr, svd, eigh, lu_factor) are kiln ops over LAPACK (tensor/ops/lapack.cc, their
gradients in autograd/formulas/lapack.cc); everything else composes from kiln's ops: norms
(the 'nuc' and 2-norms of matrices from singular values), products, pinv, matrix_rank, cond, lu,
solve_triangular, cross, diagonal, vander here; householder_product (_householder.py); lstsq,
lu_solve, tensorinv, tensorsolve (_solve_more.py); matrix_exp (_matrix_exp.py: scaling and
squaring with Padé approximants); ldl_factor(_ex), ldl_solve (_ldl.py: LAPACK's Bunch-Kaufman
sytf2/sytrs written out). Real dtypes only: kiln has no complex dtypes yet."""

import math

import kiln
from kiln import return_types
from kiln.amp.autocast_mode import float32_under_autocast as _float32_under_autocast

__all__ = ["LinAlgError", "vector_norm", "matrix_norm", "norm", "cross", "diagonal", "matmul", "vecdot",
           "multi_dot", "matrix_power", "vander", "inv", "inv_ex", "det", "slogdet", "solve", "solve_ex",
           "solve_triangular", "cholesky", "cholesky_ex", "qr", "svd", "svdvals", "eigh", "eigvalsh", "lu_factor",
           "lu_factor_ex", "lu", "pinv", "matrix_rank", "cond"]


class LinAlgError(RuntimeError):
    """Raised by linear-algebra functions on singular or invalid input (torch.linalg.LinAlgError)."""


def _type_name(dtype):
    return {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "int64": "Long",
            "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool",
            "complex64": "ComplexFloat", "complex128": "ComplexDouble"}[str(dtype)[5:]]


def _check_floating(op, x):
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise RuntimeError(f"{op}: Expected a floating point or complex tensor as input. Got {_type_name(x.dtype)}")


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    """The ord-norm of x's elements over `dim` (all of them by default), as one vector."""
    _check_floating("linalg.vector_norm", x)
    if dtype is not None:
        x = x.to(dtype)
    if x.dtype.is_complex:  # every vector norm is a norm of the moduli (abs's gradient is PyTorch's)
        x = x.abs()
    dims = [dim] if isinstance(dim, int) else None if dim is None else list(dim)
    result = kiln.linalg_vector_norm(x, ord, dims, keepdim)
    return result if out is None else out.copy_(result)


@_float32_under_autocast
def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None, out=None):
    """The ord-norm of the matrices in A's two `dim` dimensions: 'fro', inf, -inf, 1 or -1."""
    _check_floating("linalg.matrix_norm", A)
    if A.dim() < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    if dtype is not None:
        A = A.to(dtype)
    if A.dtype.is_complex and ord in ("fro", math.inf, -math.inf, 1, -1):  # norms of the moduli
        A = A.abs()
    d0, d1 = (d % A.dim() for d in dim)
    if ord == "fro":
        result = kiln.norm(A, p=2, dim=(d0, d1), keepdim=keepdim)
    elif ord in (math.inf, -math.inf, 1, -1):
        # inf: the largest absolute row sum (over the columns dim, then the rows); 1: over columns
        summed, reduced = (d1, d0) if ord in (math.inf, -math.inf) else (d0, d1)
        sums = A.abs().sum(dim=summed, keepdim=True)
        result = sums.amax(dim=reduced, keepdim=True) if ord > 0 else sums.amin(dim=reduced, keepdim=True)
        if not keepdim:
            result = result.squeeze((d0, d1))
    elif ord in ("nuc", 2, -2):  # from the singular values of the matrices moved to the last two dims
        sv = svdvals(kiln.movedim(A, (d0, d1), (-2, -1)))
        result = sv.sum(-1) if ord == "nuc" else sv.amax(-1) if ord == 2 else sv.amin(-1)
        if keepdim:
            result = result.unsqueeze(min(d0, d1)).unsqueeze(max(d0, d1))
    else:
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    return result if out is None else out.copy_(result)


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None, out=None):
    """vector_norm or matrix_norm, as PyTorch picks: a matrix norm for a string ord or two dims
    (or a 2-D input with ord given and no dim), else a vector norm."""
    if isinstance(dim, int):
        dim = (dim,)
    if ord is None:
        return vector_norm(A, 2, dim, keepdim, dtype=dtype, out=out)
    if isinstance(ord, str) or (dim is not None and len(dim) == 2) or (dim is None and A.dim() == 2):
        return matrix_norm(A, ord, dim if dim is not None else (-2, -1), keepdim, dtype=dtype, out=out)
    if dim is None and A.dim() != 1:
        raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. "
                           f"Got {A.dim()}D.")
    return vector_norm(A, ord, dim, keepdim, dtype=dtype, out=out)


def cross(input, other, *, dim=-1, out=None):
    """The cross product along `dim` (size 3), the two broadcast together."""
    result = kiln.cross(input, other, dim=dim)
    return result if out is None else out.copy_(result)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """The diagonals of A's matrices (a view), as A.diagonal with the last two dims by default."""
    return A.diagonal(offset=offset, dim1=dim1, dim2=dim2)


def matmul(input, other, *, out=None):
    result = kiln.matmul(input, other)
    return result if out is None else out.copy_(result)


def vecdot(x, y, *, dim=-1, out=None):
    """The dot products of x's and y's vectors along `dim` (real inputs: (x * y).sum(dim))."""
    if x.dtype != y.dtype:
        raise RuntimeError(f"linalg.vecdot: Expected x and y to have the same dtype, but found x of type "
                           f"{_type_name(x.dtype)} and y of type {_type_name(y.dtype)} instead")
    result = (x * y).sum(dim)
    return result if out is None else out.copy_(result)


def multi_dot(tensors, *, out=None):
    """The product of a chain of matrices (a first 1-D is a row, a last 1-D a column), left to right."""
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    first, last = tensors[0], tensors[-1]
    chain = [first.unsqueeze(0) if first.dim() == 1 else first, *tensors[1:-1],
             last.unsqueeze(1) if last.dim() == 1 else last]
    for i, t in enumerate(chain):
        if t.dim() != 2:
            where = "first" if i == 0 else "last" if i == len(chain) - 1 else None
            raise RuntimeError(f"multi_dot(): the {where} tensor must be 1D or 2D but got {t.dim()}D" if where else
                               f"multi_dot(): tensor {i} must be 2D but got {t.dim()}D")
    result = chain[0]
    for t in chain[1:]:
        result = kiln.mm(result, t)
    if last.dim() == 1:
        result = result.squeeze(1)
    if first.dim() == 1:
        result = result.squeeze(0)
    return result if out is None else out.copy_(result)


@_float32_under_autocast
def matrix_power(A, n, *, out=None):
    """A (a batch of square matrices) to the integer power n, by repeated squaring (of inv(A) for n < 0)."""
    if A.dim() < 2 or A.shape[-1] != A.shape[-2]:
        raise RuntimeError("linalg.matrix_power: A must be batches of square matrices, but they are "
                           f"{A.shape[-2] if A.dim() >= 2 else 1} by {A.shape[-1] if A.dim() else 1} matrices")
    if n < 0:
        A, n = inv(A), -n
    result, base = None, A
    while True:
        if n & 1:
            result = base if result is None else kiln.matmul(result, base)
        n >>= 1
        if not n:
            break
        base = kiln.matmul(base, base)
    if result is None:  # n == 0: identity matrices, written over a copy of A as PyTorch does, so the
        # result stays in A's graph (requires grad, a zero gradient) and ignores A's values (NaN too)
        eye = kiln.eye(A.shape[-1], dtype=A.dtype, device=A.device)
        result = A.clone(memory_format=kiln.contiguous_format).copy_(eye.expand(A.shape))
    return result if out is None else out.copy_(result)


def vander(x, *, N=None):
    """The Vandermonde matrix of x's last dim: columns x**0, x**1, ..., x**(N-1)."""
    if x.dim() < 1:
        raise RuntimeError("linalg.vander: x must have at least one dimension.")
    n = x.shape[-1] if N is None else N
    if n <= 1:
        if n < 1:
            raise RuntimeError("N must be greater than 1.")
        return kiln.ones_like(x).unsqueeze(-1)
    powers = kiln.arange(n, dtype=x.dtype if x.dtype.is_floating_point else kiln.int64, device=x.device)
    return x.unsqueeze(-1) ** powers



# --- factorizations (kiln ops over LAPACK) and what composes from them -------------------------


def _out(result, out):
    """The result, or copied into `out` (a tensor, or a tuple of tensors for named results), each
    resized to its result as out= arguments are (clone's out= overload does both)."""
    if out is None:
        return result
    if isinstance(out, (tuple, list)):
        for o, r in zip(out, result):
            kiln.clone(r, out=o)
        return type(result)(tuple(out))  # a named result keeps its type (kiln.return_types.*)
    return kiln.clone(result, out=out)


def inv(A, *, out=None):
    """The inverse of each square matrix in A; LinAlgError for a singular one."""
    return _out(kiln.linalg_inv(A), out)


def inv_ex(A, *, check_errors=False, out=None):
    """(inverse, info): info[b] > 0 flags a singular matrix (its inverse is then unspecified)."""
    return _out(kiln.linalg_inv_ex(A, check_errors=check_errors), out)


def det(A, *, out=None):
    return _out(kiln.linalg_det(A), out)


def slogdet(A, *, out=None):
    """(sign, logabsdet) of each determinant: sign 0 and logabsdet -inf for a singular matrix."""
    return _out(kiln.linalg_slogdet(A), out)


def solve(A, B, *, left=True, out=None):
    """X with AX = B (XA = B when left=False); B may be a vector or a batch of vectors."""
    return _out(kiln.linalg_solve(A, B, left=left), out)


def solve_ex(A, B, *, left=True, check_errors=False, out=None):
    return _out(kiln.linalg_solve_ex(A, B, left=left, check_errors=check_errors), out)


@_float32_under_autocast
def solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None):
    """X with AX = B (or XA = B) reading only A's upper or lower triangle (and a unit diagonal when
    unitriangular), through the general solver on that triangle."""
    T = A.triu() if upper else A.tril()
    if unitriangular:
        n = A.shape[-1]
        eye = kiln.eye(n, dtype=A.dtype, device=A.device)
        T = T * (1 - eye) + eye
    if T.dim() < 2 or B.dim() < 2:
        raise RuntimeError("linalg.solve_triangular: The input tensor " + ("A" if T.dim() < 2 else "B") +
                           " must have at least 2 dimensions.")
    return _out(kiln.linalg_solve(T, B, left=left), out)


def cholesky(A, *, upper=False, out=None):
    """L with A = L L^T (U = L^T with A = U^T U when upper); LinAlgError unless positive-definite."""
    return _out(kiln.linalg_cholesky(A, upper=upper), out)


def cholesky_ex(A, *, upper=False, check_errors=False, out=None):
    return _out(kiln.linalg_cholesky_ex(A, upper=upper, check_errors=check_errors), out)


def qr(A, mode="reduced", *, out=None):
    """(Q, R) with A = QR: mode 'reduced' (k = min(m, n) columns of Q), 'complete' or 'r' (R only)."""
    return _out(kiln.linalg_qr(A, mode), out)


def svd(A, full_matrices=True, *, driver=None, out=None):
    """(U, S, Vh) with A = U diag(S) Vh, S descending."""
    return _out(kiln.linalg_svd(A, full_matrices, driver=driver), out)


def svdvals(A, *, driver=None, out=None):
    return _out(kiln.linalg_svdvals(A, driver=driver), out)


def eigh(A, UPLO="L", *, out=None):
    """(eigenvalues ascending, eigenvectors as columns) of symmetric A, read from its UPLO triangle."""
    return _out(kiln.linalg_eigh(A, UPLO), out)


def eigvalsh(A, UPLO="L", *, out=None):
    return _out(kiln.linalg_eigvalsh(A, UPLO), out)


def lu_factor(A, *, pivot=True, out=None):
    """(LU, pivots): L below the diagonal (unit diagonal implied), U on and above, 1-based int32 pivots."""
    return _out(kiln.linalg_lu_factor(A, pivot=pivot), out)


def lu_factor_ex(A, *, pivot=True, check_errors=False, out=None):
    return _out(kiln.linalg_lu_factor_ex(A, pivot=pivot, check_errors=check_errors), out)


def _pivots_to_permutation(pivots, m):
    """perm with (P^T A)[i] = A[perm[i]]: LAPACK's row swaps i <-> pivots[i] - 1 applied in order, as
    tensor ops (no data-dependent Python), so compiled code stays one graph."""
    batch = pivots.shape[:-1]
    perm = kiln.arange(m, device=pivots.device).expand(*batch, m).clone()
    for i in range(pivots.shape[-1]):
        j = (pivots[..., i:i + 1] - 1).long()
        at_i = perm[..., i:i + 1].clone()
        perm[..., i:i + 1] = perm.gather(-1, j)
        perm.scatter_(-1, j, at_i)
    return perm


@_float32_under_autocast
def lu(A, *, pivot=True, out=None):
    """(P, L, U) with A = P L U: P a permutation matrix, L unit lower (m x k), U upper (k x n)."""
    LU, pivots = lu_factor(A, pivot=pivot)
    m, n = A.shape[-2], A.shape[-1]
    k = min(m, n)
    L = LU[..., :, :k].tril(-1) + kiln.eye(m, k, dtype=A.dtype, device=A.device)
    U = LU[..., :k, :].triu()
    perm = _pivots_to_permutation(pivots, m)
    P = (kiln.arange(m, device=A.device).unsqueeze(-1) == perm.unsqueeze(-2)).to(A.dtype)
    return _out(return_types.linalg_lu((P, L, U)), out)


def _tolerances(A, S_max, atol, rtol):
    """PyTorch's pinv/matrix_rank threshold max(atol, rtol * largest singular value); rtol defaults
    to eps * max(m, n) when neither is given, 0 when only atol is."""
    if rtol is None:
        rtol = 0.0 if atol is not None else kiln.finfo(A.dtype).eps * max(A.shape[-2], A.shape[-1])
    tol = S_max * rtol
    if atol is not None:
        atol = atol if isinstance(atol, kiln.Tensor) else kiln.tensor(atol, dtype=S_max.dtype)
        tol = kiln.maximum(tol, atol)
    return tol


@_float32_under_autocast
def pinv(A, *, atol=None, rtol=None, hermitian=False, out=None):
    """The Moore-Penrose pseudo-inverse from the SVD (eigh when hermitian), singular values at or
    below the tolerance treated as 0."""
    _check_floating("linalg.pinv", A)
    if hermitian:
        L, V = eigh(A)
        absL = L.abs()
        tol = _tolerances(A, absL.amax(-1, keepdim=True) if absL.shape[-1] else absL.sum(-1, keepdim=True),
                          atol if atol is None else _unsqueeze_tol(atol), rtol if rtol is None else _unsqueeze_tol(rtol))
        L_inv = kiln.where(absL > tol, L.reciprocal(), kiln.zeros_like(L))
        return _out(kiln.matmul(V * L_inv.unsqueeze(-2), V.mT), out)
    U, S, Vh = svd(A, full_matrices=False)
    S_max = S[..., :1] if S.shape[-1] else S.sum(-1, keepdim=True)
    tol = _tolerances(A, S_max, atol if atol is None else _unsqueeze_tol(atol),
                      rtol if rtol is None else _unsqueeze_tol(rtol))
    S_inv = kiln.where(S > tol, S.reciprocal(), kiln.zeros_like(S))
    return _out(kiln.matmul(Vh.mT * S_inv.unsqueeze(-2), U.mT), out)


def _unsqueeze_tol(t):
    """A per-matrix tolerance tensor lined up with the singular values' last dim."""
    return t.unsqueeze(-1) if isinstance(t, kiln.Tensor) and t.dim() > 0 else t


@_float32_under_autocast
def matrix_rank(A, *, atol=None, rtol=None, hermitian=False, out=None):
    """The number of singular values (|eigenvalues| when hermitian) above the tolerance, int64."""
    _check_floating("linalg.matrix_rank", A)
    S = eigvalsh(A).abs() if hermitian else svdvals(A)
    S_max = S.amax(-1, keepdim=True) if S.shape[-1] else S.sum(-1, keepdim=True)
    tol = _tolerances(A, S_max, atol if atol is None else _unsqueeze_tol(atol),
                      rtol if rtol is None else _unsqueeze_tol(rtol))
    return _out((S > tol).sum(-1), out)


@_float32_under_autocast
def cond(A, p=None, *, out=None):
    """The condition number: the ratio of extreme singular values for p None, 2 or -2; otherwise
    norm(A, p) * norm(inv(A), p)."""
    _check_floating("linalg.cond", A)
    if p is None or p in (2, -2):
        S = svdvals(A)
        result = S[..., 0] / S[..., -1] if p != -2 else S[..., -1] / S[..., 0]
    else:
        result = matrix_norm(A, p) * matrix_norm(inv(A), p)
    return _out(result, out)



# Householder reflectors (LAPACK's orgqr) composed from kiln ops: kiln/linalg/_householder.py
from kiln.linalg._householder import householder_product  # noqa: E402
# least squares, LU solves and the tensor forms of inv/solve: kiln/linalg/_solve_more.py
from kiln.linalg._solve_more import lstsq, lu_solve, tensorinv, tensorsolve  # noqa: E402
from kiln.linalg._matrix_exp import matrix_exp  # noqa: E402
from kiln.linalg._ldl import ldl_factor, ldl_factor_ex, ldl_solve  # noqa: E402

__all__ += ["householder_product", "lstsq", "lu_solve", "tensorinv", "tensorsolve", "matrix_exp", "ldl_factor",
            "ldl_factor_ex", "ldl_solve"]
