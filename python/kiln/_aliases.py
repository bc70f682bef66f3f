"""PyTorch's aliases and metadata predicates (issue 17): the second names torch gives its ops
(arccos for acos, greater for gt, divide for div, fix for trunc, ...: declared in the registry
next to their ops, Note [Op aliases] in tensor/dispatcher.h, and bound here), the in-place ops whose
metadata change kiln expresses through as_strided_ (squeeze_, unsqueeze_), and the questions real
code asks of a tensor (is_signed, nbytes, get_device, layout, is_conj, ...).

An alias is the very op it names (kiln.arccos is kiln.acos), so autograd, fake tensors, dynamo
and the in-place version counter behave exactly as the original's. kiln has no
lazy conjugate or negative bits, so is_conj and is_neg are always False (conj computes).
"""

import builtins
import warnings

from kiln import _C
from kiln._composites import _kiln, _wrap_dim

__all__ = [
    "true_divide", "sgn", "ravel", "msort", "argwhere", "adjoint", "fliplr", "flipud", "nansum", "is_signed",
    "is_complex", "is_conj", "is_neg", "is_nonzero", "is_same_size", "matrix_power", "get_device",
]


# torch.true_divide is div without rounding_mode (a TypeError if one is given, as torch's schema)
def true_divide(input, other, *, out=None):
    k = _kiln()
    return k.div(input, other) if out is None else k.div(input, other, out=out)


def true_divide_(input, other):
    return input.div_(other)


# --- views and reorderings ----------------------------------------------------------------------
def ravel(input):
    """The elements in row-major order: a view of a contiguous input, else a contiguous copy."""
    return input.contiguous().view(-1)


def msort(input, *, out=None):
    """Sorted along the first dimension (values only)."""
    values = input.sort(dim=0).values
    return values if out is None else out.copy_(values)


def argwhere(input):
    return _kiln().nonzero(input)


def adjoint(input):
    """The conjugate transpose of the last two dimensions (for real tensors, a transposed view)."""
    if input.ndim < 2:
        raise RuntimeError("tensor.adjoint() is only supported on matrices or batches of matrices. "
                           f"Got {input.ndim}-D tensor.")
    return input.transpose(-2, -1).conj()


def sgn(input, *, out=None):
    """sign for real tensors; x / |x| (0 at 0) for complex ones."""
    k = _kiln()
    if not input.dtype.is_complex:
        return k.sign(input) if out is None else k.sign(input, out=out)
    magnitude = input.abs()
    result = k.where(magnitude == 0, k.zeros((), dtype=input.dtype), input / magnitude)
    return result if out is None else out.copy_(result)


def fliplr(input):
    if input.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return input.flip(1)


def flipud(input):
    if input.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return input.flip(0)


def nansum(input, dim=None, keepdim=False, *, dtype=None, out=None):
    """sum with NaNs counted as 0 (their gradient is 0 too, as PyTorch's)."""
    k = _kiln()
    if input.dtype.is_floating_point:
        input = k.where(input.isnan(), k.zeros((), dtype=input.dtype), input)
    if dim is None:
        dim = ()
    result = k.sum(input, dim, keepdim, dtype=dtype) if dim != () or keepdim else k.sum(input, dtype=dtype)
    return result if out is None else out.copy_(result)


def matrix_power(input, n, *, out=None):
    result = _kiln().linalg.matrix_power(input, n)
    return result if out is None else out.copy_(result)


# --- in-place metadata changes (squeeze_, unsqueeze_): the new sizes and strides set by as_strided_,
# which bumps the version and records autograd history as PyTorch's in-place views do
def squeeze_(input, dim=None):
    shape, strides = list(input.shape), list(input.stride())
    if dim is None:
        dims = range(len(shape))
    else:
        dims = [_wrap_dim(d, input.ndim) for d in (dim if isinstance(dim, (tuple, list)) else (dim,))]
    keep = [i for i in range(len(shape)) if not (i in dims and shape[i] == 1)]
    return input.as_strided_([shape[i] for i in keep], [strides[i] for i in keep], input.storage_offset())


def unsqueeze_(input, dim):
    dim = _wrap_dim(dim, input.ndim + 1)
    shape, strides = list(input.shape), list(input.stride())
    # the stride PyTorch gives a new size-1 dimension: that of the dimension after it, times its size
    new_stride = shape[dim] * strides[dim] if dim < len(shape) else 1
    return input.as_strided_(shape[:dim] + [1] + shape[dim:], strides[:dim] + [new_stride] + strides[dim:],
                             input.storage_offset())


# --- metadata: what PyTorch answers for a real CPU tensor -----------------------------------------
def is_signed(input):
    return input.dtype not in (_C.uint8, _C.bool)


def is_complex(input):
    return input.dtype.is_complex


def is_conj(input):
    return False


def is_neg(input):
    return False


def is_nonzero(input):
    n = input.numel()
    if n == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return builtins.bool(input.item())


def is_same_size(input, other):
    return tuple(input.shape) == tuple(other.shape)


def get_device(input):
    return -1 if input.device.type == "cpu" else input.device.index


def _nbytes(self):
    return self.numel() * self.element_size()


def _H(self):
    if self.ndim not in (0, 2):
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got {self.ndim}-D tensor."
                           f"{' For batches of matrices, consider using tensor.mH' if self.ndim > 2 else ''}")
    if self.ndim == 0:
        warnings.warn("Tensor.H is deprecated on 0-D tensors. Consider using x.conj().", UserWarning, stacklevel=2)
        return self.conj()
    return self.transpose(0, 1).conj()


def _mH(self):
    if self.ndim < 2:
        raise RuntimeError(f"tensor.mH is only supported on matrices or batches of matrices. Got {self.ndim}-D tensor.")
    return self.transpose(-2, -1).conj()


def new_empty_strided(self, size, stride, *, dtype=None, device=None, requires_grad=False, layout=None,
                      pin_memory=False):
    out = _kiln().empty_strided(size, stride, dtype=dtype or self.dtype, device=device or self.device)
    return out.requires_grad_() if requires_grad else out


def sum_to_size(self, *size):
    """The sum of self over the dimensions in which `size` (broadcastable to self) has a 1 or none."""
    if len(size) == 1 and not isinstance(size[0], int):
        size = tuple(size[0])
    shape = tuple(self.shape)
    lead = len(shape) - len(size)
    if lead < 0 or any(s != 1 and s != shape[lead + i] for i, s in enumerate(size)):
        raise RuntimeError(f"size {{{', '.join(map(str, size))}}} is not expandable to size "
                           f"{{{', '.join(map(str, shape))}}}.")
    reduced = self.sum(tuple(range(lead))) if lead else self
    ones = tuple(i for i, s in enumerate(size) if s == 1 and reduced.shape[i] != 1)
    return reduced.sum(ones, keepdim=True) if ones else reduced


def bind_functions(namespace):
    """The registry's aliases that are torch functions, each the very function it names (Note [Op
    aliases] in tensor/dispatcher.h: they are declared where their ops are)."""
    for alias, name, variants in _C._op_aliases():
        if variants & 1:
            namespace[alias] = namespace[name]


def install_methods(Tensor):
    """The Tensor methods: the aliases (the registry's methods), the functions above with self as
    `input`, and the properties nbytes, H, mH, is_cpu and layout."""
    module = globals()
    for alias, name, variants in _C._op_aliases():
        if variants & 2:
            setattr(Tensor, alias, getattr(Tensor, name))
    for name in ("true_divide", "true_divide_", "ravel", "msort", "argwhere", "adjoint", "fliplr", "flipud", "nansum",
                 "matrix_power", "squeeze_", "unsqueeze_", "is_signed", "is_complex", "is_conj", "is_neg",
                 "is_nonzero", "is_same_size", "get_device", "sgn",
                 "new_empty_strided", "sum_to_size"):
        setattr(Tensor, name, module[name])
    Tensor.nbytes = property(_nbytes)
    Tensor.H = property(_H)
    Tensor.mH = property(_mH)
    Tensor.is_cpu = property(lambda self: self.device.type == "cpu")
    Tensor.layout = property(lambda self: _kiln().strided)
