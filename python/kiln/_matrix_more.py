"""PyTorch's matrix and statistics composites (issue 17): the fused products addmv, addr, addbmm
(and in place addmm_, baddbmm_, ...), inner, vdot, diagflat, cov, corrcoef, dist, renorm, the
Cholesky-based cholesky_solve and cholesky_inverse over kiln.linalg.solve_triangular, and the
deprecated frobenius_norm and nuclear_norm over kiln.linalg's norms.

As in torch, `beta * input + alpha * product` ignores input entirely when beta is 0 (a NaN there
does not propagate), and `input` must broadcast to the product's shape, not the other way round.
The in-place variants copy the result into self through copy_, which returns self, bumps its
version and records autograd history.
"""

import warnings

from kiln import _C
from kiln._composites import _is_fake, _kiln, _type_name, _wrap_dim

__all__ = ["addmv", "addmv_", "addr", "addbmm", "inner", "vdot", "diagflat", "cov", "corrcoef", "dist", "renorm",
           "cholesky_solve", "cholesky_inverse", "frobenius_norm", "nuclear_norm"]


def _result(value, out):
    return value if out is None else out.copy_(value)


def _scaled_sum(input, product, beta, alpha):
    """beta * input + alpha * product, input broadcast to the product's shape (never the reverse)."""
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        return product
    return product + (input.expand(tuple(product.shape)) if beta == 1 else beta * input.expand(tuple(product.shape)))


def addmv(input, mat, vec, *, beta=1, alpha=1, out=None):
    if mat.ndim != 2 or vec.ndim != 1 or input.ndim > 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {input.ndim}, {mat.ndim}, {vec.ndim}")
    return _result(_scaled_sum(input, _kiln().mv(mat, vec), beta, alpha), out)


def addmv_(input, mat, vec, *, beta=1, alpha=1):
    return input.copy_(addmv(input, mat, vec, beta=beta, alpha=alpha))


def addr(input, vec1, vec2, *, beta=1, alpha=1, out=None):
    if vec1.ndim != 1 or vec2.ndim != 1:
        raise RuntimeError(f"addr: Expected 1-D argument vec1, but got {vec1.ndim}-D" if vec1.ndim != 1 else
                           f"addr: Expected 1-D argument vec2, but got {vec2.ndim}-D")
    return _result(_scaled_sum(input, _kiln().outer(vec1, vec2), beta, alpha), out)


def addr_(input, vec1, vec2, *, beta=1, alpha=1):
    return input.copy_(addr(input, vec1, vec2, beta=beta, alpha=alpha))


def addbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    """beta * input + alpha * (the sum over the batch of batch1[i] @ batch2[i])."""
    for batch in (batch1, batch2):
        _wrap_dim(2, batch.ndim)  # torch reads size(2) first: an IndexError below 3 dimensions
    if batch1.ndim != 3 or batch2.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor" if batch1.ndim != 3 else "batch2 must be a 3D tensor")
    return _result(_scaled_sum(input, _kiln().bmm(batch1, batch2).sum(0), beta, alpha), out)


def addbmm_(input, batch1, batch2, *, beta=1, alpha=1):
    return input.copy_(addbmm(input, batch1, batch2, beta=beta, alpha=alpha))


def addmm_(input, mat1, mat2, *, beta=1, alpha=1):
    return input.copy_(_kiln().addmm(input, mat1, mat2, beta=beta, alpha=alpha))


def baddbmm_(input, batch1, batch2, *, beta=1, alpha=1):
    return input.copy_(_kiln().baddbmm(input, batch1, batch2, beta=beta, alpha=alpha))


# --- inner products ---------------------------------------------------------------------------------
def inner(input, other, *, out=None):
    """The sum of products over the last dimension of both (a product when either is 0-d)."""
    k = _kiln()
    if input.ndim == 0 or other.ndim == 0:
        return _result(input * other, out)
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but got shapes "
                           f"{list(input.shape)} and {list(other.shape)}")
    return _result(k.tensordot(input, other, dims=([-1], [-1])), out)


def vdot(input, other, *, out=None):
    """dot(conj(input), other): for real tensors, dot."""
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    if input.dtype != other.dtype:
        raise RuntimeError(f"vdot expected both vectors to have same dtype, but found {_type_name(input.dtype)} and "
                           f"{_type_name(other.dtype)}")
    if input.shape[0] != other.shape[0]:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{input.shape[0]}] and src [{other.shape[0]}] "
                           f"to have the same number of elements, but got {input.shape[0]} and {other.shape[0]} "
                           "elements respectively")
    return _result(_kiln().dot(input, other), out)


def diagflat(input, offset=0):
    return _kiln().diag(input.reshape(-1), offset)


# --- statistics -------------------------------------------------------------------------------------
def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance of the rows of input (variables) over its columns (observations), with
    torch's frequency and analytic weights and its normalization (torch.cov's own algorithm)."""
    k = _kiln()
    if input.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an input with "
                           f"{input.ndim} dimensions")
    if input.ndim < 2:
        input = input.view(1, -1)
    observations = input.shape[1]
    weights = None
    for name, w in (("fweights", fweights), ("aweights", aweights)):
        if w is None:
            continue
        if w.ndim > 1:
            raise RuntimeError(f"cov(): expected {name} to have one or fewer dimensions but got {name} with "
                               f"{w.ndim} dimensions")
        if w.numel() != observations:
            raise RuntimeError(f"cov(): expected {name} to have the same numel as there are observations in the "
                               f"input but got {w.numel()} != {observations}")
        if name == "fweights" and w.dtype.is_floating_point:
            raise RuntimeError(f"cov(): expected fweights to have integral dtype but got fweights with "
                               f"{_type_name(w.dtype)} dtype")
        if name == "aweights" and not w.dtype.is_floating_point:
            raise RuntimeError(f"cov(): expected aweights to have floating point dtype but got aweights with "
                               f"{_type_name(w.dtype)} dtype")
        if not _is_fake(w) and observations and bool((w < 0).any()):
            raise RuntimeError(f"cov(): {name} cannot be negative" if name == "fweights" else
                               "cov(): aweights cannot be negative")
        weights = w if weights is None else weights * w
    if weights is None:
        total = k.tensor(observations, dtype=_C.int64)
        average = input.sum(1) / total
        norm = observations - correction
        if norm <= 0:
            warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less than the number "
                          "of observations.", UserWarning, stacklevel=2)
            norm = 0
    else:
        total = weights.sum()
        average = (input * weights).sum(1) / total
        if correction == 0:
            norm = total
        elif aweights is None:
            norm = total - correction
        else:
            norm = total - correction * (weights * aweights).sum() / total
        if not _is_fake(norm) and bool(norm <= 0):
            warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less than the number "
                          "of observations.", UserWarning, stacklevel=2)
        norm = k.where(norm <= 0, k.zeros((), dtype=norm.dtype), norm)
    centered = input - average.unsqueeze(1)
    product = k.mm(centered, (centered if weights is None else centered * weights).t())
    return (product / norm).squeeze()


def corrcoef(input):
    """Pearson's correlation coefficients: cov divided by the outer product of the standard
    deviations, clipped to [-1, 1] (as torch's)."""
    k = _kiln()
    c = cov(input)
    if c.ndim == 0:
        return c / c
    stddev = c.diagonal().sqrt()
    c = c / stddev.view(-1, 1)
    c = c / stddev.view(1, -1)
    return k.clip(c, -1, 1)


def dist(input, other, p=2):
    """The p-norm of input - other (broadcast together)."""
    return _kiln().linalg.vector_norm(input - other, p)


def renorm(input, p, dim, maxnorm, *, out=None):
    """Each slice along dim whose p-norm exceeds maxnorm, scaled down to norm maxnorm (torch's
    factor maxnorm / (norm + 1e-7)); the gradient goes through the norm, as torch's renorm_backward."""
    k = _kiln()
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as input. Got "
                           f"{_type_name(input.dtype)}")
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    if input.ndim <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.ndim} dimensions")
    dim = _wrap_dim(dim, input.ndim)
    reduce = [d for d in range(input.ndim) if d != dim]
    norm = k.linalg.vector_norm(input, p, reduce, keepdim=True)
    factor = k.where(norm > maxnorm, maxnorm / (norm + 1e-7), k.ones((), dtype=norm.dtype))
    return _result(input * factor, out)


def renorm_(input, p, dim, maxnorm):
    # renorm saves its input for the backward: computed from a clone, the copy into self leaves it intact
    return input.copy_(renorm(input.clone(), p, dim, maxnorm))


# --- Cholesky ---------------------------------------------------------------------------------------
def _check_square(op, name, A):
    if A.ndim < 2:
        raise RuntimeError(f"{op}: The input tensor {name} must have at least 2 dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{op}: {name} must be batches of square matrices, but they are {A.shape[-2]} by "
                           f"{A.shape[-1]} matrices")


def cholesky_solve(input, input2, upper=False, *, out=None):
    """X with (L L^H) X = input, from the Cholesky factor input2 = L (U with upper: U^H U), by two
    triangular solves; batch dimensions broadcast."""
    k = _kiln()
    if input.ndim < 2:
        raise RuntimeError(f"b should have at least 2 dimensions, but has {input.ndim} dimensions instead")
    if input2.ndim < 2:
        raise RuntimeError(f"u should have at least 2 dimensions, but has {input2.ndim} dimensions instead")
    if input.dtype != input2.dtype:
        raise RuntimeError(f"Expected b and A to have the same dtype, but found b of type {_type_name(input.dtype)} "
                           f"and A of type {_type_name(input2.dtype)} instead.")
    _check_square("cholesky_solve", "A", input2)
    lower = input2.mT if upper else input2
    y = k.linalg.solve_triangular(lower, input, upper=False)
    return _result(k.linalg.solve_triangular(lower.mT, y, upper=True), out)


def cholesky_inverse(input, upper=False, *, out=None):
    """The inverse of L L^H (U^H U with upper) from its Cholesky factor."""
    k = _kiln()
    if input.ndim < 2:
        raise RuntimeError("cholesky_inverse: The input tensor A must have at least 2 dimensions.")
    _check_square("cholesky_inverse", "A", input)
    eye = k.eye(input.shape[-1], dtype=input.dtype).expand(tuple(input.shape))
    return _result(cholesky_solve(eye, input, upper), out)


_DEPRECATED_WARNED = set()


def _warn_deprecated_once(name, instead):
    if name not in _DEPRECATED_WARNED:
        _DEPRECATED_WARNED.add(name)
        warnings.warn(f"at::{name} is deprecated and it is just left for JIT compatibility. It will be removed in a "
                      f"future PyTorch release. Please use `{instead}` instead", UserWarning, stacklevel=3)


def frobenius_norm(input, dim, keepdim=False, *, out=None):
    """The 2-norm over the elements of `dim` (at most two dims): linalg.vector_norm(input, 2, dim,
    keepdim), as PyTorch's deprecated frobenius_norm (it warns once, as PyTorch does)."""
    _warn_deprecated_once("frobenius_norm", "linalg.vector_norm(A, 2., dim, keepdim)")
    dims = [dim] if isinstance(dim, int) else list(dim)
    if len(dims) > 2:
        raise RuntimeError(f"Expected at most 2 dimensions, but got {len(dims)} dimensions instead.")
    return _result(_kiln().linalg.vector_norm(input, 2.0, dims, keepdim), out)


def nuclear_norm(input, dim=None, keepdim=False, *, out=None):
    """The sum of the singular values of the matrices over `dim` (the last two by default):
    linalg.matrix_norm(input, "nuc", dim, keepdim), as PyTorch's deprecated
    nuclear_norm (`nuclear_norm(x, True)` is keepdim, as there)."""
    _warn_deprecated_once("nuclear_norm", "linalg.matrix_norm(A, 'nuc', dim, keepdim)")
    if isinstance(dim, bool):
        dim, keepdim = None, dim
    if dim is None:
        dim = (-2, -1)
    return _result(_kiln().linalg.matrix_norm(input, "nuc", tuple(dim), keepdim), out)
