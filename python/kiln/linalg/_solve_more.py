"""linalg.lstsq, lu_solve, tensorinv and tensorsolve composed from kiln's factorizations (svd, solve,
lu_factor's pivots), so autograd differentiates them through their composition.

lstsq: PyTorch's CPU drivers are LAPACK's gels (QR, full rank assumed), gelsy (QR with column
pivoting; the default), gelsd and gelss (SVD). Every driver here solves through one thin SVD: the
minimum-norm solution V diag(1/s) U^T B over the singular values above rcond * s_max (rcond defaults
to eps * max(m, n)), which is each driver's solution whenever A has full rank (for gels, whose rank is
assumed full, its solution is only defined then) and gelsy's, gelsd's and gelss's minimum-norm one
otherwise (gelsy's rank comes from its pivoted QR; an SVD draws the same line except for singular
values within rounding of the cutoff). What each driver returns besides is PyTorch's contract:
rank for all but gels; singular_values for gelsd and gelss; residuals (the squared norms of the
columns of AX - B) when m > n and the driver is not gelsy, and for gelsd/gelss only when every
matrix has full rank; each other field an empty tensor. The solution's and the residuals' gradients
are those of the composition, as PyTorch's (through pinv(A) @ B) at full rank; singular_values carry
none, as in PyTorch.

lu_solve: X from LU = P L U (linalg.lu_factor's compact form and pivots): B's rows permuted by P^T,
then the two triangular solves (the adjoint and left=False forms as PyTorch reduces them).
tensorinv / tensorsolve: PyTorch's own reductions to inv / solve of a square reshaping.
"""

import kiln
from kiln import return_types
# (kiln/linalg/__init__.py defines these before it imports this file; module-level imports keep
# dynamo from breaking the graph at a function-level import)
from kiln.linalg import _out, _pivots_to_permutation, _type_name, solve_triangular

__all__ = ["lstsq", "lu_solve", "tensorinv", "tensorsolve"]

_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")
_EPS = {kiln.float32: 1.1920928955078125e-07, kiln.float64: 2.220446049250313e-16}  # finfo(dtype).eps


def lstsq(A, B, rcond=None, *, driver=None):
    """(solution, residuals, rank, singular_values) of min ||AX - B|| (see the banner for each driver's fields)."""
    if A.dim() < 2:
        raise RuntimeError("torch.linalg.lstsq: input must have at least 2 dimensions.")
    if B.dim() < 1:
        raise RuntimeError("torch.linalg.lstsq: other must have at least 1 dimension.")
    if A.dtype != B.dtype:
        raise RuntimeError(f"torch.linalg.lstsq: Expected input and other to have the same dtype, but got input's "
                           f"dtype {_type_name(A.dtype)} and other's dtype {_type_name(B.dtype)}")
    dim_diff = A.dim() - B.dim()
    if not 0 <= dim_diff <= 1:
        raise RuntimeError("torch.linalg.lstsq: input.dim() must be greater or equal to other.dim() and "
                           "(input.dim() - other.dim()) <= 1")
    B2 = B.unsqueeze(-1) if dim_diff else B  # a vector (or batch of vectors) right-hand side
    if A.shape[-2] != B2.shape[-2]:
        raise RuntimeError("torch.linalg.lstsq: input.size(-2) should match other.size(-1)" if dim_diff else
                           "torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
    driver = "gelsy" if driver is None else driver
    if driver not in _DRIVERS:
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    if A.dtype not in (kiln.float32, kiln.float64):
        raise RuntimeError("This function doesn't handle types other than float and double")
    m, n = A.shape[-2], A.shape[-1]
    batch = kiln.broadcast_shapes(tuple(A.shape[:-2]), tuple(B2.shape[:-2]))
    A = A.expand(*batch, m, n)
    B2 = B2.expand(*batch, m, B2.shape[-1])
    if rcond is None:
        rcond = _EPS[A.dtype] * max(m, n)
    U, S, Vh = kiln.linalg.svd(A, full_matrices=False)
    s_max = S[..., :1] if S.shape[-1] else S.sum(-1, keepdim=True)
    kept = S > rcond * s_max
    S_inv = kiln.where(kept, S.reciprocal(), kiln.zeros_like(S))
    solution = Vh.mT @ (S_inv.unsqueeze(-1) * (U.mT @ B2))
    rank = kept.sum(-1)
    empty = A.new_empty(0)
    residuals = empty
    if m > n and driver != "gelsy":
        full_rank = driver == "gels" or bool((rank == n).all())
        if full_rank:
            residuals = (A @ solution - B2).square().sum(-2)
    if dim_diff:
        solution = solution.squeeze(-1)
    return return_types.linalg_lstsq((solution, residuals,
                                      rank if driver != "gels" else kiln.empty(0, dtype=kiln.int64, device=A.device),
                                      S.detach() if driver in ("gelsd", "gelss") else empty))


def _check_lu_solve(LU, pivots, B, left):
    if LU.dim() < 2:
        raise RuntimeError("torch.linalg.lu_solve: The input tensor A must have at least 2 dimensions.")
    if LU.shape[-1] != LU.shape[-2]:
        raise RuntimeError(f"torch.linalg.lu_solve: A must be batches of square matrices, but they are "
                           f"{LU.shape[-2]} by {LU.shape[-1]} matrices")
    if B.dim() < 2:
        raise RuntimeError("linalg.lu_solve: The input tensor B must have at least 2 dimensions.")
    if left and LU.shape[-2] != B.shape[-2]:
        raise RuntimeError(f"linalg.lu_solve: Incompatible shapes of A and B for the equation AX = B "
                           f"({LU.shape[-2]}x{LU.shape[-1]} and {B.shape[-2]}x{B.shape[-1]})")
    if not left and LU.shape[-1] != B.shape[-1]:
        raise RuntimeError(f"linalg.lu_solve: Incompatible shapes of A and B for the equation XA = B "
                           f"({LU.shape[-2]}x{LU.shape[-1]} and {B.shape[-2]}x{B.shape[-1]})")
    if LU.dtype != B.dtype:
        raise RuntimeError(f"linalg.lu_solve: Expected LU and B to have the same dtype, but found LU of type "
                           f"{_type_name(LU.dtype)} and B of type {_type_name(B.dtype)} instead")
    if pivots.dtype != kiln.int32:
        raise RuntimeError("linalg.lu_solve: pivots should be a Tensor of scalar type torch.int32")
    if pivots.shape[-1] != LU.shape[-1]:
        raise RuntimeError("linalg.lu_solve: Number of pivots per batch should be same as the dimension of the matrix")


def lu_solve(LU, pivots, B, *, left=True, adjoint=False, out=None):
    """X with A X = B (A^H X = B when adjoint; X A = B when left=False) for A = P L U given as
    linalg.lu_factor's (LU, pivots)."""
    _check_lu_solve(LU, pivots, B, left)
    if not left:  # X A = B  <=>  A^H X^H = B^H
        return _out(lu_solve(LU, pivots, B.mT, adjoint=not adjoint).mT, out)
    n = LU.shape[-1]
    batch = kiln.broadcast_shapes(tuple(LU.shape[:-2]), tuple(B.shape[:-2]))
    LU = LU.expand(*batch, n, n)
    B = B.expand(*batch, n, B.shape[-1])
    perm = _pivots_to_permutation(pivots.expand(*batch, n), n)  # (P^T B)[i] = B[perm[i]]
    if not adjoint:  # P L U X = B: X = U^-1 L^-1 P^T B
        rows = B.gather(-2, perm.unsqueeze(-1).expand(B.shape))
        Y = solve_triangular(LU, rows, upper=False, unitriangular=True)
        return _out(solve_triangular(LU, Y, upper=True), out)
    # U^T L^T P^T X = B: X = P L^-T U^-T B
    Y = solve_triangular(LU.mT, B, upper=False)
    Z = solve_triangular(LU.mT, Y, upper=True, unitriangular=True)
    inverse = kiln.argsort(perm, dim=-1)  # P Z: row perm[i] of the result is row i of Z
    return _out(Z.gather(-2, inverse.unsqueeze(-1).expand(Z.shape)), out)


def tensorinv(A, ind=2, *, out=None):
    """The tensor B with tensordot(A, B, ind) the identity: inv of A reshaped to a square matrix."""
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    end, start = list(A.shape[ind:]), list(A.shape[:ind])
    prod_end, prod_start = 1, 1
    for size in end:
        prod_end *= size
    for size in start:
        prod_start *= size
    if prod_end != prod_start:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {prod_end} != {prod_start}")
    return _out(kiln.linalg.inv(A.reshape(prod_end, prod_end)).reshape(end + start), out)


def tensorsolve(A, B, dims=None, *, out=None):
    """X with tensordot(A, X, X.ndim) == B: dims (moved to the end of A first) and A reshaped to a
    square matrix, then one solve."""
    ndim = A.dim()
    if dims is not None:
        A = kiln.movedim(A, list(dims), list(range(ndim - len(dims), ndim)))
    result_shape = list(A.shape[B.dim():])
    result_product, other_product = 1, 1
    for size in result_shape:
        result_product *= size
    for size in B.shape:
        other_product *= size
    if result_product != other_product:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == "
                           f"prod(self.shape[:other.ndim]), but got {result_product} != {other_product}")
    solution = kiln.linalg.solve(A.reshape(result_product, result_product), B.flatten())
    return _out(solution.reshape(result_shape), out)
