"""linalg.ldl_factor(_ex) and linalg.ldl_solve: LAPACK's Bunch-Kaufman LDL^T factorization (sytrf,
lower triangle) and its solver (sytrs), written out with kiln ops.

The contract is PyTorch's, which is LAPACK's compact form, so a factor made here solves with
PyTorch's ldl_solve and the reverse: LD holds D's 1x1 and 2x2 diagonal blocks and, below them, the
multipliers of L = P(1) L(1) P(2) L(2) ...; pivots (int32, 1-based) say per column k either
"1x1 block, rows k and pivots[k] were swapped" (positive) or, equal and negative on both columns of
a 2x2 block, "rows k+1 and -pivots[k] were swapped". The upper triangle of LD is zero. info is the
first column (1-based) found zero, 0 when none.

Note [LDL as the unblocked sytf2]
The factorization follows dsytf2 (what dsytrf runs for matrices narrower than its block size) step
for step: the pivot choice with alpha = (1 + sqrt(17)) / 8 reads column k and row imax, the swap
permutes the trailing block only (earlier columns of L stay as they were: that is why L is a product
of permuted factors), and the rank-1 or rank-2 update applies to the whole trailing block, kept
symmetric so its lower triangle is LAPACK's. The pivot decisions are data: they are read with
.tolist() and drive Python control flow, one matrix of a batch at a time. Neither op has a
derivative in PyTorch; here both run under no_grad, so their results do not require grad.
The blocked dsytrf (columns beyond its block size, typically 64) makes the same choices in exact
arithmetic, so larger matrices agree to rounding.
"""

import math

import kiln
from kiln import return_types
from kiln.linalg import _out, _type_name

__all__ = ["ldl_factor", "ldl_factor_ex", "ldl_solve"]

_ALPHA = (1.0 + math.sqrt(17.0)) / 8.0



def _check_square_floating(op, A, name="A"):
    if A.dim() < 2:
        raise RuntimeError(f"{op}: The input tensor {name} must have at least 2 dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{op}: A must be batches of square matrices, but they are {A.shape[-2]} by {A.shape[-1]} "
                           "matrices")
    if not A.dtype.is_floating_point:
        raise RuntimeError(f"{op}: Expected a floating point or complex tensor as input. Got {_type_name(A.dtype)}")


def _swap(a, i, j):
    """Symmetric interchange of rows and columns i and j of the square tensor a."""
    if i != j:
        order = list(range(a.shape[0]))
        order[i], order[j] = j, i
        index = kiln.tensor(order, device=a.device)
        a.copy_(a.index_select(0, index).index_select(1, index))


def _factor_one(A):
    """(LD, pivots list, info) of one symmetric matrix read from its lower triangle (Note [LDL as
    the unblocked sytf2])."""
    n = A.shape[-1]
    a = A.tril() + A.tril(-1).mT  # the full symmetric matrix the lower triangle stands for
    pivots, info = [0] * n, 0
    k = 0
    while k < n:
        kstep = 1
        absakk = abs(a[k, k].item())
        if k < n - 1:
            column = a[k + 1:, k].abs()
            imax = k + 1 + int(column.argmax().item())
            colmax = column.max().item()
        else:
            imax, colmax = k, 0.0
        if max(absakk, colmax) == 0.0 or math.isnan(absakk):
            info = info or k + 1  # a zero column: nothing to eliminate, LAPACK carries on
            kp = k
        else:
            if absakk >= _ALPHA * colmax:
                kp = k
            else:
                row = a[imax, k:imax].abs()  # row imax left of the diagonal, then column imax below it
                rowmax = row.max().item()
                if imax < n - 1:
                    rowmax = max(rowmax, a[imax + 1:, imax].abs().max().item())
                if absakk >= _ALPHA * colmax * (colmax / rowmax):
                    kp = k
                elif abs(a[imax, imax].item()) >= _ALPHA * rowmax:
                    kp = imax
                else:
                    kp, kstep = imax, 2
            kk = k + kstep - 1
            trailing = a[k:, k:]
            _swap(trailing, kk - k, kp - k)  # rows and columns of the trailing block only
            if kstep == 1:
                if k < n - 1:
                    d11 = 1.0 / a[k, k].item()
                    x = a[k + 1:, k].clone()
                    a[k + 1:, k + 1:] += kiln.outer(x, -d11 * x)
                    a[k + 1:, k] = x * d11
                    a[k, k + 1:] = x * d11
            elif k < n - 2:
                d21 = a[k + 1, k].item()
                d11 = a[k + 1, k + 1].item() / d21
                d22 = a[k, k].item() / d21
                t = 1.0 / (d11 * d22 - 1.0)
                d21 = t / d21
                ck, ck1 = a[k + 2:, k].clone(), a[k + 2:, k + 1].clone()
                wk = d21 * (d11 * ck - ck1)
                wkp1 = d21 * (d22 * ck1 - ck)
                a[k + 2:, k + 2:] -= kiln.outer(ck, wk) + kiln.outer(ck1, wkp1)
                a[k + 2:, k], a[k + 2:, k + 1] = wk, wkp1
                a[k, k + 2:], a[k + 1, k + 2:] = wk, wkp1
        if kstep == 1:
            pivots[k] = kp + 1
        else:
            pivots[k] = pivots[k + 1] = -(kp + 1)
        k += kstep
    return a.tril(), pivots, info


def ldl_factor_ex(A, *, hermitian=False, check_errors=False, out=None):
    """(LD, pivots, info) of A = L D L^T (A's lower triangle read; real A makes hermitian moot)."""
    _check_square_floating("torch.linalg.ldl_factor_ex", A)
    n = A.shape[-1]
    batch = tuple(A.shape[:-2])
    with kiln.no_grad():
        results = [_factor_one(m) for m in A.detach().reshape(-1, n, n)]
        LD = kiln.stack([r[0] for r in results]).reshape(*batch, n, n) if results else A.detach().clone()
        pivots = kiln.tensor([r[1] for r in results], dtype=kiln.int32, device=A.device).reshape(*batch, n)
        info = kiln.tensor([r[2] for r in results], dtype=kiln.int32, device=A.device).reshape(batch)
    if check_errors:
        _check_info(info, "torch.linalg.ldl_factor_ex")
    return _out(return_types.linalg_ldl_factor_ex((LD, pivots, info)), out)


def _check_info(info, op):
    """PyTorch's _linalg_check_errors for LDL: it has no message for info > 0 and raises its
    internal-assert RuntimeError naming the first nonzero code."""
    for code in info.reshape(-1).tolist():
        if code != 0:
            raise RuntimeError(f"{op}: Unknown error code: {code}.")


def ldl_factor(A, *, hermitian=False, out=None):
    """(LD, pivots) of A = L D L^T; a RuntimeError when D is singular (see ldl_factor_ex's info)."""
    LD, pivots, info = ldl_factor_ex(A, hermitian=hermitian)
    _check_info(info, "torch.linalg.ldl_factor")
    return _out(return_types.linalg_ldl_factor((LD, pivots)), out)


def _solve_one(a, pivots, b):
    """dsytrs (lower): L D L^T X = B solved in place in b from the compact factor a."""
    n = a.shape[-1]

    def swap_rows(i, j):
        if i != j:
            rows = b[[i, j]].clone()
            b[i], b[j] = rows[1], rows[0]

    k = 0  # L D Y = B, walking the blocks forward
    while k < n:
        if pivots[k] > 0:
            swap_rows(k, pivots[k] - 1)
            if k < n - 1:
                b[k + 1:] -= kiln.outer(a[k + 1:, k], b[k])
            b[k] /= a[k, k]
            k += 1
        else:
            swap_rows(k + 1, -pivots[k] - 1)
            if k < n - 2:
                b[k + 2:] -= kiln.outer(a[k + 2:, k], b[k])
                b[k + 2:] -= kiln.outer(a[k + 2:, k + 1], b[k + 1])
            akm1k = a[k + 1, k]
            akm1, ak = a[k, k] / akm1k, a[k + 1, k + 1] / akm1k
            denom = akm1 * ak - 1.0
            bkm1, bk = b[k] / akm1k, b[k + 1] / akm1k
            b[k], b[k + 1] = (ak * bkm1 - bk) / denom, (akm1 * bk - bkm1) / denom
            k += 2
    k = n - 1  # L^T X = Y, walking back
    while k >= 0:
        if pivots[k] > 0:
            if k < n - 1:
                b[k] -= a[k + 1:, k] @ b[k + 1:]
            swap_rows(k, pivots[k] - 1)
            k -= 1
        else:
            if k < n - 1:
                b[k] -= a[k + 1:, k] @ b[k + 1:]
                b[k - 1] -= a[k + 1:, k - 1] @ b[k + 1:]
            swap_rows(k, -pivots[k] - 1)
            k -= 2
    return b


def ldl_solve(LD, pivots, B, *, hermitian=False, out=None):
    """X with A X = B for A = L D L^T given as ldl_factor's (LD, pivots); batches broadcast."""
    op = "torch.linalg.ldl_solve"
    _check_square_floating(op, LD)
    if B.dtype != LD.dtype:
        raise RuntimeError(f"Expected b and A to have the same dtype, but found b of type {_type_name(B.dtype)} and A "
                           f"of type {_type_name(LD.dtype)} instead.")
    n = LD.shape[-1]
    if B.dim() < 2:  # PyTorch reads B.size(-2) first
        raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but got -2)")
    if B.shape[-2] != n:
        raise RuntimeError(f"Incompatible matrix sizes for {op}: each A matrix is {n} by {n} but each b matrix is "
                           f"{B.shape[-2]} by {B.shape[-1]}")
    if list(pivots.shape) != list(LD.shape[:-1]):
        raise RuntimeError(f"{op}: Expected LD.shape[:-1] and pivots.shape to be the same, but got pivots with shape "
                           f"{list(pivots.shape)} instead")
    if pivots.dtype.is_floating_point or pivots.dtype == kiln.bool:
        raise RuntimeError(f"{op}: Expected pivots to be integers. Got {_type_name(pivots.dtype)}")
    batch = kiln.broadcast_shapes(tuple(LD.shape[:-2]), tuple(B.shape[:-2]))
    k = B.shape[-1]
    with kiln.no_grad():
        factors = LD.detach().expand(*batch, n, n).reshape(-1, n, n)
        pivot_rows = pivots.expand(*batch, n).reshape(-1, n).tolist()
        rhs = B.detach().expand(*batch, n, k).reshape(-1, n, k)
        solved = [_solve_one(a, p, b.clone()) for a, p, b in zip(factors, pivot_rows, rhs)]
        X = kiln.stack(solved).reshape(*batch, n, k) if solved else B.detach().expand(*batch, n, k).clone()
    return _out(X, out)
