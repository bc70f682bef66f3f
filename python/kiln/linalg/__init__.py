"""kiln.linalg: PyTorch's torch.linalg functions that compose from kiln's ops (norms, products,
cross, diagonal, vander). Those that need LAPACK (inv, det, solve, cholesky, qr, svd, eigh, and
the norms and powers built on them: 'nuc' and 2-norms of matrices, negative matrix powers) are
not here yet: kiln links a BLAS but no LAPACK so far (issue 17)."""

import math

import kiln

__all__ = ["LinAlgError", "vector_norm", "matrix_norm", "norm", "cross", "diagonal", "matmul", "vecdot",
           "multi_dot", "matrix_power", "vander"]


class LinAlgError(RuntimeError):
    """Raised by linear-algebra functions on singular or invalid input (torch.linalg.LinAlgError)."""


def _type_name(dtype):
    return {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "int64": "Long",
            "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}[str(dtype)[5:]]


def _check_floating(op, x):
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"{op}: Expected a floating point or complex tensor as input. Got {_type_name(x.dtype)}")


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    """The ord-norm of x's elements over `dim` (all of them by default), as one vector."""
    _check_floating("linalg.vector_norm", x)
    if dtype is not None:
        x = x.to(dtype)
    dims = (dim,) if isinstance(dim, int) else tuple(range(x.dim())) if dim is None else tuple(dim)
    if ord == 0:  # the count of nonzero elements (no gradient)
        result = (x != 0).to(x.dtype).sum(dim=dims, keepdim=keepdim)
    elif ord == -math.inf:
        result = x.abs().amin(dim=dims, keepdim=keepdim)
    else:
        result = kiln.norm(x, ord, dims, keepdim)
    return result if out is None else out.copy_(result)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None, out=None):
    """The ord-norm of the matrices in A's two `dim` dimensions: 'fro', inf, -inf, 1 or -1."""
    _check_floating("linalg.matrix_norm", A)
    if A.dim() < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    if dtype is not None:
        A = A.to(dtype)
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
    elif ord in ("nuc", 2, -2):
        raise NotImplementedError(f"linalg.matrix_norm: ord={ord!r} needs singular values (linalg.svd), which "
                                  "kiln does not have yet; 'fro', inf, -inf, 1 and -1 work")
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


def matrix_power(A, n, *, out=None):
    """A (a batch of square matrices) to the integer power n >= 0, by repeated squaring."""
    if A.dim() < 2 or A.shape[-1] != A.shape[-2]:
        raise RuntimeError("linalg.matrix_power: A must be batches of square matrices, but they are "
                           f"{A.shape[-2] if A.dim() >= 2 else 1} by {A.shape[-1] if A.dim() else 1} matrices")
    if n < 0:
        raise NotImplementedError("linalg.matrix_power: a negative power needs linalg.inv, which kiln does not "
                                  "have yet")
    result, base = None, A
    while True:
        if n & 1:
            result = base if result is None else kiln.matmul(result, base)
        n >>= 1
        if not n:
            break
        base = kiln.matmul(base, base)
    if result is None:  # n == 0: identity matrices
        eye = kiln.eye(A.shape[-1], dtype=A.dtype, device=A.device)
        result = eye.expand(A.shape).clone()
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



# Householder reflectors (LAPACK's orgqr) composed from kiln ops: kiln/linalg/_householder.py
from kiln.linalg._householder import householder_product  # noqa: E402

__all__ += ["householder_product"]
