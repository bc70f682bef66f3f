"""PyTorch's composite tensor functions (issue 17: "PyTorch programs run unchanged").

Each function here is a composition of ops kiln already has (views, pointwise ops, reductions,
cat, matmul, index_select, ...), as PyTorch implements most of them (CompositeImplicitAutograd):
autograd, fake tensors and kiln.compile work through them with no kernel of their own. Names,
argument defaults, result dtypes (type promotion), views-versus-copies and exception classes follow
torch 2.13; error messages name the op and the problem.

kiln._dynamo records a call to one of these public functions as one graph node (this module is
listed in its _KILN_OP_MODULES); AOT tracing then sees the aten ops they are made of. Only the
functions whose result depends on tensor data (equal, allclose, repeat_interleave with a tensor of
repeats and no output_size) read values, which under compile is a clean graph break.
"""

import builtins
import math
import numbers
import warnings

from kiln import _C
from kiln.amp.autocast_mode import float32_under_autocast as _float32_under_autocast

__all__ = [
    "unbind", "outer", "ger", "broadcast_to", "broadcast_shapes", "broadcast_tensors", "swapaxes", "swapdims",
    "moveaxis", "movedim", "clip", "clip_",
    "concat", "concatenate", "hstack", "vstack", "dstack", "column_stack", "atleast_1d", "atleast_2d",
    "atleast_3d", "tile", "trace", "diag", "diag_embed", "tril_indices", "triu_indices", "meshgrid", "rot90",
    "diff", "logaddexp", "logaddexp2", "nanmean", "allclose", "isclose", "equal", "cross", "kron", "tensordot",
    "take", "fill_diagonal_", "repeat_interleave", "cdist", "nonzero", "normal", "norm_except_dim",
]


def _kiln():
    import kiln

    return kiln


def _wrap_dim(dim, ndim):
    """`dim` in [0, ndim) as PyTorch's maybe_wrap_dim (a 0-d tensor accepts -1 and 0)."""
    n = builtins.max(ndim, 1)
    dim = dim.__index__()
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim % n


def _check_tensor(op, name, value):
    if not isinstance(value, _kiln().Tensor):
        raise TypeError(f"{op}(): argument '{name}' must be Tensor, not {type(value).__name__}")


def _is_fake(t):
    return _C._is_fake(t) or t.device.type == "meta"


# --- indices ---------------------------------------------------------------------------------
_nonzero_op = _C._packet_function("aten::nonzero")  # the op's overloads, called as kiln.add is


def nonzero(input, *, out=None, as_tuple=False):
    """The indices of the nonzero elements: one row per element (the registry's op), or with
    as_tuple one 1-D tensor per dimension, a 0-d input counting as 1-d (as PyTorch)."""
    if not as_tuple:
        return _nonzero_op(input) if out is None else _nonzero_op(input, out=out)
    aten = _kiln().ops.aten
    if out is not None:
        raise RuntimeError("nonzero does not support the out kwarg when as_tuple is True")
    return tuple(aten.nonzero.default(input if input.dim() else input.reshape(1)).unbind(1))


# --- sampling ---------------------------------------------------------------------------------
def normal(mean, std=1.0, size=None, *, generator=None, out=None, dtype=None, layout=None, device=None,
           pin_memory=False, requires_grad=False):
    """torch.normal: floats with a `size` (a factory), or tensor mean and/or std broadcast together.
    As in PyTorch, the sample is not differentiable in mean or std: their gradients are zeros."""
    k = _kiln()
    tensors = [t for t in (mean, std) if isinstance(t, k.Tensor)]
    if isinstance(std, k.Tensor):
        if not bool((std.detach() >= 0).all()):
            raise RuntimeError("normal expects all elements of std >= 0.0")
    elif std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
    if not tensors:
        if size is None:
            raise TypeError("normal() missing required argument 'size'")
        result = k.empty(size, dtype=dtype, device=device).normal_(mean, std, generator=generator)
        return result.requires_grad_(requires_grad) if out is None else out.copy_(result)
    shape = tuple(tensors[0].shape) if len(tensors) == 1 else _broadcast_shape(mean.shape, std.shape)
    kind = tensors[0].dtype
    if not kind.is_floating_point:
        raise NotImplementedError(f"\"normal_kernel_cpu\" not implemented for '{_type_name(kind)}'")
    with k.no_grad():
        noise = k.empty(shape, dtype=kind, device=tensors[0].device).normal_(0.0, 1.0, generator=generator)
        sample = noise * (std.detach() if isinstance(std, k.Tensor) else std) + \
            (mean.detach() if isinstance(mean, k.Tensor) else mean)
    if k.is_grad_enabled() and any(t.requires_grad for t in tensors):
        sample = _NotDifferentiable.apply(sample, *tensors)
    return sample if out is None else out.copy_(sample)


class _NotDifferentiable:  # a kiln.autograd.Function, made on first use (kiln imports this module early)
    _cls = None

    @classmethod
    def apply(cls, value, *inputs):
        if cls._cls is None:
            k = _kiln()

            class NormalBackward(k.autograd.Function):
                @staticmethod
                def forward(ctx, value, *inputs):
                    ctx.inputs = [(tuple(t.shape), t.dtype) for t in inputs]
                    return value

                @staticmethod
                def backward(ctx, grad):
                    return (None, *[k.zeros(shape, dtype=dtype) for shape, dtype in ctx.inputs])

            cls._cls = NormalBackward
        return cls._cls.apply(value, *inputs)


# --- views and shape helpers --------------------------------------------------------------------
def unbind(input, dim=0):
    """The slices of `input` along `dim`, as a tuple of views: one op's outputs (aten.unbind.int),
    which autograd marks as it marks split's, so an in-place change of one refuses as in PyTorch."""
    _check_tensor("unbind", "input", input)
    if input.ndim == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    return tuple(_kiln().ops.aten.unbind.int(input, _wrap_dim(dim, input.ndim)))


def broadcast_shapes(*shapes):
    """The shape that tensors of `shapes` (ints or sequences) broadcast to, as a kiln.Size."""
    dims = [(s,) if isinstance(s, int) else tuple(s) for s in shapes]
    result = [1] * builtins.max([len(d) for d in dims], default=0)
    for index, shape in enumerate(dims):
        for i, n in enumerate(reversed(shape)):
            if n < 0:
                raise ValueError("Attempting to broadcast a dimension with negative length!")
            at = len(result) - 1 - i
            if result[at] == 1 or n == result[at]:
                result[at] = n if result[at] == 1 else result[at]
            elif n != 1:
                raise RuntimeError(f"Attempting to broadcast a dimension of length {n} at {-1 - i}! Mismatching "
                                   f"argument at index {index} had {shape}; but expected shape should be "
                                   f"broadcastable to {result}")
    return _kiln().Size(result)


def broadcast_tensors(*tensors):
    """The tensors expanded (views) to their common broadcast shape."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    shape = []
    for t in tensors:
        a, b = list(shape), list(t.shape)
        n = builtins.max(len(a), len(b))
        a, b = [1] * (n - len(a)) + a, [1] * (n - len(b)) + b
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y and x != 1 and y != 1:
                raise RuntimeError(f"The size of tensor a ({x}) must match the size of tensor b ({y}) at "
                                   f"non-singleton dimension {i}")
        shape = [y if x == 1 else x for x, y in zip(a, b)]
    return tuple(t.expand(shape) for t in tensors)


def broadcast_to(input, size):
    """`input` expanded to `size` (a view; -1 keeps a size)."""
    return input.expand(tuple(size))


def swapaxes(input, axis0, axis1):
    return input.transpose(axis0, axis1)


def swapdims(input, dim0, dim1):
    return input.transpose(dim0, dim1)


def _as_dims(value, name):
    if isinstance(value, (list, tuple)):
        return [v.__index__() for v in value]
    if isinstance(value, numbers.Integral) or hasattr(value, "__index__"):
        return [value.__index__()]
    raise TypeError(f"movedim(): argument '{name}' must be int or tuple of ints, not {type(value).__name__}")


def movedim(input, source, destination):
    """`input` with dims `source` moved to positions `destination` (int or sequence; a view)."""
    src, dst = _as_dims(source, "source"), _as_dims(destination, "destination")
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({src} dims) should contain "
                           f"the same number of dims as destination ({dst} dims)")
    ndim = input.ndim
    src = [_wrap_dim(d, ndim) for d in src]
    dst = [_wrap_dim(d, ndim) for d in dst]
    if len(set(src)) != len(src):
        raise RuntimeError(f"movedim: repeated dim in `source` ({list(source)})")
    if len(set(dst)) != len(dst):
        raise RuntimeError(f"movedim: repeated dim in `destination` ({list(destination)})")
    if ndim == 0:
        return _kiln().alias(input)
    order = [-1] * ndim
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(d for d in range(ndim) if d not in src)
    order = [o if o != -1 else next(rest) for o in order]
    return input.permute(*order)


moveaxis = movedim


def clip(input, min=None, max=None):
    return input.clamp(min, max)


def clip_(input, min=None, max=None):
    return input.clamp_(min, max)


def concat(tensors, dim=0):
    return _kiln().cat(tensors, dim)


def concatenate(tensors, axis=0):
    return _kiln().cat(tensors, axis)


def _atleast(nd, tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return tuple(_atleast(nd, (t,)) for t in tensors[0])
    if len(tensors) != 1:
        return tuple(_atleast(nd, (t,)) for t in tensors)
    t = tensors[0]
    _check_tensor(f"atleast_{nd}d", "tensors", t)
    if t.ndim >= nd:
        return t
    if nd == 1:
        return t.reshape(1)
    if nd == 2:
        return t.reshape(1, 1) if t.ndim == 0 else t.unsqueeze(0)
    if t.ndim == 0:
        return t.reshape(1, 1, 1)
    return t.unsqueeze(0).unsqueeze(-1) if t.ndim == 1 else t.unsqueeze(-1)


def atleast_1d(*tensors):
    """Each tensor with at least one dimension (one tensor in, one out; several: a tuple)."""
    return _atleast(1, tensors)


def atleast_2d(*tensors):
    return _atleast(2, tensors)


def atleast_3d(*tensors):
    return _atleast(3, tensors)


def _nonempty(op, tensors):
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{op}(): argument 'tensors' must be tuple of Tensors, not {type(tensors).__name__}")
    if len(tensors) == 0:
        raise RuntimeError(f"{op} expects a non-empty TensorList")


def hstack(tensors):
    _nonempty("hstack", tensors)
    tensors = atleast_1d(list(tensors))
    return _kiln().cat(tensors, 0 if tensors[0].ndim == 1 else 1)


def vstack(tensors):
    _nonempty("vstack", tensors)
    return _kiln().cat(atleast_2d(list(tensors)), 0)


def dstack(tensors):
    _nonempty("dstack", tensors)
    return _kiln().cat(atleast_3d(list(tensors)), 2)


def column_stack(tensors):
    _nonempty("column_stack", tensors)
    return _kiln().cat([t.reshape(t.numel(), 1) if t.ndim <= 1 else t for t in tensors], 1)


def tile(input, dims):
    """`input` repeated `dims` times per dimension; missing leading dims count as 1 (on either side)."""
    dims = tuple(dims) if isinstance(dims, (list, tuple)) else (dims,)
    if len(dims) < input.ndim:
        dims = (1,) * (input.ndim - len(dims)) + dims
    return input.repeat(*dims)


def rot90(input, k=1, dims=(0, 1)):
    """`input` rotated by 90 degrees `k` times in the plane `dims` (from the first towards the second)."""
    dims = list(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    d0, d1 = _wrap_dim(dims[0], input.ndim), _wrap_dim(dims[1], input.ndim)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}")
    k = k % 4
    if k == 1:
        return input.flip(d1).transpose(d0, d1)
    if k == 2:
        return input.flip([d0, d1])
    if k == 3:
        return input.flip(d0).transpose(d0, d1)
    return input.clone()


# --- diagonals and triangles --------------------------------------------------------------------
@_float32_under_autocast
def trace(input):
    """The sum of the main diagonal of a matrix (integers sum to int64, as sum does)."""
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    if input.dtype == _C.bool:
        raise NotImplementedError("\"trace\" not implemented for 'Bool'")
    return input.diagonal().sum()


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """A tensor whose (dim1, dim2) planes hold the last dimension of `input` on diagonal `offset`."""
    ndim = input.ndim + 1
    d1, d2 = _wrap_dim(dim1, ndim), _wrap_dim(dim2, ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    n = input.shape[-1] + builtins.abs(offset) if input.ndim else 1 + builtins.abs(offset)
    src = input if input.ndim else input.reshape(1)
    lead = list(src.shape[:-1])
    shape = []
    it = iter(lead)
    for d in range(src.ndim + 1):
        shape.append(n if d in (d1, d2) else next(it))
    out = _kiln().zeros(shape, dtype=input.dtype, device=input.device)
    return _kiln().diagonal_scatter(out, src, offset, d1, d2)


def diag(input, diagonal=0):
    """1-D: the square matrix with `input` on diagonal `diagonal`; 2-D: that diagonal (a copy)."""
    if input.ndim == 1:
        return diag_embed(input, diagonal, 0, 1)
    if input.ndim == 2:
        return input.diagonal(diagonal).clone()
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.ndim}D")


def _tri_indices(row, col, offset, dtype, device, lower):
    if row < 0:
        raise RuntimeError(f"row must be non-negative, got{row}")
    if col < 0:
        raise RuntimeError(f"col must be non-negative, got{col}")
    rows, cols = [], []
    for i in range(row):
        js = range(0, builtins.max(0, builtins.min(col, i + offset + 1))) if lower else \
            range(builtins.max(0, i + offset), col)
        rows.extend([i] * len(js))
        cols.extend(js)
    kiln = _kiln()
    if dtype is None:
        dtype = kiln.int64
    if not rows:
        return kiln.zeros((2, 0), dtype=dtype, device=device)
    return kiln.tensor([rows, cols], dtype=dtype, device=device)


def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None, pin_memory=False):
    """The (row, col) coordinates of the lower triangle of a row x col matrix, as a 2 x N tensor."""
    return _tri_indices(row, col, offset, dtype, device, True)


def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None, pin_memory=False):
    return _tri_indices(row, col, offset, dtype, device, False)


def fill_diagonal_(input, fill_value, wrap=False):
    """Fills the main diagonal of `input` in place (all dims equal when more than 2); with
    wrap=True a tall matrix's diagonal restarts every cols + 1 rows, as numpy's does."""
    if input.ndim < 2:
        raise RuntimeError("dimensions must larger than 1")
    if input.ndim > 2 and len(set(input.shape)) != 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    if input.ndim > 2:
        n = input.shape[0]
        strides = builtins.sum(input.stride())
        input.as_strided((n,), (strides,), input.storage_offset()).fill_(fill_value)
        return input
    rows, cols = input.shape
    step = builtins.sum(input.stride())  # PyTorch's strided walk, also for non-contiguous input
    size = builtins.min(rows, cols)
    input.as_strided((size,), (step,), input.storage_offset()).fill_(fill_value)
    if wrap and rows > cols + 1:  # the walk continues from row cols + 1 (as numpy's flat one does)
        wrap_size = (input.numel() + cols) // (cols + 1) - size
        offset = input.storage_offset() + input.stride(0) * (cols + 1)
        input.as_strided((wrap_size,), (step,), offset).fill_(fill_value)
    return input


# --- differences and products -------------------------------------------------------------------
def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The n-th forward difference along `dim` (for bool: logical_xor), after concatenating
    `prepend` and `append` along it."""
    if input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    dim = _wrap_dim(dim, input.ndim)
    parts = []
    for extra in (prepend, append):
        if extra is not None and (not isinstance(extra, _kiln().Tensor) or extra.ndim != input.ndim):
            raise RuntimeError("diff expects prepend or append to be the same dimension as input")
    if prepend is not None or append is not None:
        parts = [t for t in (prepend, input, append) if t is not None]
        input = _kiln().cat(parts, dim)
    out = input
    for _ in range(n):
        length = out.shape[dim]
        if length == 0:
            break
        hi, lo = out.narrow(dim, 1, length - 1), out.narrow(dim, 0, length - 1)
        out = hi.logical_xor(lo) if out.dtype == _C.bool else hi - lo
    if n == 0:
        return input.clone() if input is out else out
    return out


def outer(input, vec2):
    """The outer product of two vectors (input[i] * vec2[j]; dtypes promote as mul's)."""
    if input.ndim != 1:
        raise RuntimeError(f"outer: Expected 1-D argument self, but got {input.ndim}-D")
    if vec2.ndim != 1:
        raise RuntimeError(f"outer: Expected 1-D argument vec2, but got {vec2.ndim}-D")
    return input.reshape(input.shape[0], 1) * vec2  # PyTorch's: a traced graph records its view


ger = outer


def kron(input, other):
    """The Kronecker product: blocks input[i...] * other, laid out over the broadcast rank."""
    nd = builtins.max(input.ndim, other.ndim)
    a = input.reshape((1,) * (nd - input.ndim) + tuple(input.shape))
    b = other.reshape((1,) * (nd - other.ndim) + tuple(other.shape))
    a_shape, b_shape = [], []
    for sa, sb in zip(a.shape, b.shape):
        a_shape += [sa, 1]
        b_shape += [1, sb]
    out = a.reshape(a_shape) * b.reshape(b_shape)
    return out.reshape([sa * sb for sa, sb in zip(a.shape, b.shape)])


def cross(input, other, dim=None):
    """The cross product of 3-vectors along `dim` (None: the first dim of size 3, deprecated in
    PyTorch; linalg.cross's default is -1). Inputs broadcast; dtypes must match."""
    if input.ndim != other.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    if input.dtype != other.dtype:
        raise RuntimeError(f"expected scalar type {_type_name(input.dtype)} but found {_type_name(other.dtype)}")
    if input.dtype == _C.bool:
        raise NotImplementedError("\"cross\" not implemented for 'Bool'")
    if dim is None:
        warnings.warn("Using torch.cross without specifying the dim arg is deprecated.\nPlease either pass the dim "
                      "explicitly or simply use torch.linalg.cross.\nThe default value of dim will change to agree "
                      "with that of linalg.cross in a future release.", UserWarning, stacklevel=2)
        dim = next((d for d, s in enumerate(input.shape) if s == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    dim = _wrap_dim(dim, input.ndim)
    if input.shape[dim] != 3 or other.shape[dim] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got {input.shape[dim]} "
                           f"and {other.shape[dim]}")
    a, b = _broadcast_pair(input, other)
    return a.roll(-1, dim) * b.roll(-2, dim) - a.roll(-2, dim) * b.roll(-1, dim)


def _broadcast_shape(sa, sb):
    """The shape two shapes broadcast to (aligned on the right), with PyTorch's error."""
    n = max(len(sa), len(sb))
    sa, sb = (1,) * (n - len(sa)) + tuple(sa), (1,) * (n - len(sb)) + tuple(sb)
    for i, (x, y) in enumerate(zip(sa, sb)):
        if x != y and x != 1 and y != 1:
            raise RuntimeError(f"The size of tensor a ({x}) must match the size of tensor b ({y}) at "
                               f"non-singleton dimension {i}")
    return tuple(y if x == 1 else x for x, y in zip(sa, sb))


def _broadcast_pair(a, b):
    shape = []
    for sa, sb in zip(a.shape, b.shape):
        if sa != sb and sa != 1 and sb != 1:
            raise RuntimeError(f"The size of tensor a ({sa}) must match the size of tensor b ({sb}) at "
                               f"non-singleton dimension {len(shape)}")
        shape.append(sb if sa == 1 else sa)
    return a.expand(shape), b.expand(shape)


def _type_name(dtype):
    return {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "int64": "Long",
            "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}[str(dtype)[5:]]


def tensordot(a, b, dims=2, out=None):
    """Sums a * b over the dims paired by `dims`: an int n (a's last n with b's first n), or two
    lists of dims. Computed as one matmul of the permuted, flattened operands."""
    if isinstance(dims, _kiln().Tensor):
        dims = dims.tolist()
    if isinstance(dims, (list, tuple)):
        if len(dims) != 2:
            raise RuntimeError("tensordot expects dims to be a pair of lists of dims")
        da, db = dims
        da = [da] if isinstance(da, numbers.Integral) else list(da)
        db = [db] if isinstance(db, numbers.Integral) else list(db)
    else:
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > builtins.min(a.ndim, b.ndim):
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    if len(da) != len(db):
        raise RuntimeError("both dimension lists should have same length")
    if a.dtype != b.dtype:
        raise RuntimeError("both inputs should have same dtype")
    da = [_wrap_dim(d, a.ndim) for d in da]
    db = [_wrap_dim(d, b.ndim) for d in db]
    for x, y in zip(da, db):
        if a.shape[x] != b.shape[y]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size {a.shape[x]} in dim {x} "
                               f"and second has size {b.shape[y]} in dim {y}")
    free_a = [d for d in range(a.ndim) if d not in da]
    free_b = [d for d in range(b.ndim) if d not in db]
    k = math.prod(a.shape[d] for d in da)
    m = math.prod(a.shape[d] for d in free_a)
    n = math.prod(b.shape[d] for d in free_b)
    lhs = a.permute(*free_a, *da).reshape(m, k)
    rhs = b.permute(*db, *free_b).reshape(k, n)
    result = lhs.mm(rhs).reshape([a.shape[d] for d in free_a] + [b.shape[d] for d in free_b])
    if out is not None:
        return out.copy_(result)
    return result


def take(input, index):
    """input.flatten()[index]: elements at flat positions `index` (int64), shaped as `index`."""
    if index.dtype != _C.int64:
        raise RuntimeError(f"take(): Expected a long tensor for index, but got {_type_name(index.dtype)}")
    flat = input.reshape(-1)
    n = flat.shape[0]
    idx = index.reshape(-1)
    if not _is_fake(index) and idx.numel():
        bad = ((idx >= n) | (idx < -n)).nonzero()
        if bad.numel():
            raise IndexError(f"out of range: tried to access index {idx[bad[0, 0]].item()} on a tensor of {n} "
                             f"elements.")
    idx = _kiln().where(idx < 0, idx + n, idx)
    return flat.index_select(0, idx).reshape(index.shape)


# --- pointwise and reductions -------------------------------------------------------------------
def _float_only(op, *tensors):
    for t in tensors:
        if not t.dtype.is_floating_point:
            raise NotImplementedError(f"\"{op}_cpu\" not implemented for '{_type_name(t.dtype)}'")


def logaddexp(input, other):
    """log(exp(input) + exp(other)), computed stably: max + log1p(exp(-|input - other|))."""
    _float_only("logaddexp", input, other)
    m = _kiln().maximum(input, other)
    d = (input - other).abs()
    out = m + (-d).exp().log1p()
    return _kiln().where(m.isinf() & (input == other), m, out)


def logaddexp2(input, other):
    """log2(2**input + 2**other), computed stably."""
    _float_only("logaddexp2", input, other)
    m = _kiln().maximum(input, other)
    d = (input - other).abs()
    out = m + (-d).exp2().log1p() * (1.0 / math.log(2.0))
    return _kiln().where(m.isinf() & (input == other), m, out)


def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """The mean of the non-NaN elements (NaN where there are none)."""
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"nanmean(): expected input to have floating point or complex dtype but got "
                           f"{_type_name(input.dtype)}")
    keep = input.isnan().logical_not()
    values = _kiln().where(keep, input, _kiln().zeros((), dtype=input.dtype))
    if dim is None:
        dim = list(range(input.ndim))
    total = values.sum(dim, keepdim=keepdim, dtype=dtype)
    return total / keep.sum(dim, keepdim=keepdim)


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|input - other| <= atol + rtol * |other| elementwise (a bool tensor; infinities equal only
    to themselves)."""
    if input.dtype != other.dtype:
        raise RuntimeError(f"{_type_name(input.dtype)} did not match {_type_name(other.dtype)}")
    if rtol < 0:
        raise RuntimeError(f"rtol must be greater than or equal to zero, but got {rtol}")
    if atol < 0:
        raise RuntimeError(f"atol must be greater than or equal to zero, but got {atol}")
    close = input == other
    if equal_nan and input.dtype.is_floating_point:
        close = close | (input.isnan() & other.isnan())
    if rtol == 0 and atol == 0:
        return close
    a, b = input, other
    if a.dtype == _C.bool:
        a, b = a.to(_C.get_default_dtype()), b.to(_C.get_default_dtype())
    allowed = (b * rtol).abs() + atol
    actual = (a - b).abs()
    return close | (actual.isfinite() & (actual <= allowed))


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return builtins.bool(isclose(input, other, rtol, atol, equal_nan).all().item())


def equal(input, other):
    """True when both have the same shape and elements (dtypes may differ; NaN is never equal)."""
    _check_tensor("equal", "input", input)
    _check_tensor("equal", "other", other)
    if tuple(input.shape) != tuple(other.shape):
        return False
    return builtins.bool((input == other).all().item())


# --- repeat_interleave --------------------------------------------------------------------------
def _repeat_index(repeats, output_size):
    """[0] * repeats[0] + [1] * repeats[1] + ...: a cumsum of marks at each run's start."""
    kiln = _kiln()
    if output_size is None:
        if (repeats < 0).any().item():
            raise RuntimeError("repeats can not be negative")
        output_size = builtins.int(repeats.sum().item())
    ends = repeats.cumsum(0)
    marks = kiln.zeros(output_size + 1, dtype=repeats.dtype, device=repeats.device)
    if repeats.shape[0] > 1:
        starts = ends.narrow(0, 0, repeats.shape[0] - 1)
        marks = marks.index_add(0, starts.to(_C.int64), kiln.ones_like(starts))
    return marks.narrow(0, 0, output_size).cumsum(0).to(repeats.dtype)


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Each element (or slice along `dim`) of `input` repeated `repeats` times (an int, or a tensor
    with one count per slice); repeat_interleave(counts) gives the indices that repeat them."""
    kiln = _kiln()
    if repeats is None:  # repeat_interleave(repeats): the index vector
        counts = input
        if counts.ndim != 1:
            raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
        if counts.dtype not in (_C.int64, _C.int32):
            raise RuntimeError("repeats has to be Long or Int tensor")
        return _repeat_index(counts, output_size)
    if dim is None:
        input = input.reshape(-1)
        dim = 0
    dim = _wrap_dim(dim, input.ndim)
    if isinstance(repeats, kiln.Tensor) and repeats.ndim <= 1 and repeats.numel() == 1:
        repeats = repeats.reshape(1).expand(input.shape[dim])  # one count for every slice
    if not isinstance(repeats, kiln.Tensor):
        repeats = repeats.__index__()
        if repeats < 0:
            raise RuntimeError("Repeats must be non-negative")
        if input.ndim == 0:
            input = input.reshape(1)
        shape = list(input.shape)
        expanded = input.unsqueeze(dim + 1).expand(shape[:dim + 1] + [repeats] + shape[dim + 1:])
        # a copy, never a view (repeats == 1, or a size-1 input, would reshape to a view)
        return expanded.clone(memory_format=kiln.contiguous_format).view(
            shape[:dim] + [shape[dim] * repeats] + shape[dim + 1:])
    if repeats.ndim != 1:
        raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
    if repeats.dtype.is_floating_point or repeats.dtype == _C.bool:
        raise NotImplementedError(f"\"repeat_interleave_cpu\" not implemented for '{_type_name(repeats.dtype)}'")
    if repeats.shape[0] != input.shape[dim]:
        raise RuntimeError(f"repeats must have the same size as input along dim, but got repeats.size(0) = "
                           f"{repeats.shape[0]} and input.size({dim}) = {input.shape[dim]}")
    index = _repeat_index(repeats, output_size)
    return input.index_select(dim, index.to(_C.int64))


# --- grids and distances ------------------------------------------------------------------------
def meshgrid(*tensors, indexing=None):
    """Coordinate grids (expanded views) from 0-d or 1-D tensors: indexing='ij' (matrix) or 'xy'
    (Cartesian: the first two inputs swapped, then the first two grids). Omitting indexing warns and
    means 'ij', as in PyTorch."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:
        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass the indexing argument.",
                      UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but received: {indexing}")
    if len(tensors) == 0:
        raise RuntimeError("torch.meshgrid: Expected at least one tensor")
    for t in tensors:
        if t.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got a tensor of "
                               f"shape {list(t.shape)}")
    for t in tensors[1:]:
        if t.dtype != tensors[0].dtype:
            raise RuntimeError("torch.meshgrid: Expected all tensors in the tensor list to have the same dtype")
    tensors = list(tensors)
    swap = indexing == "xy" and len(tensors) >= 2
    if swap:
        tensors[0], tensors[1] = tensors[1], tensors[0]
    shape = [t.numel() for t in tensors]
    grids = []
    for i, t in enumerate(tensors):
        view = [1] * len(tensors)
        view[i] = -1
        grids.append(t.reshape(view).expand(shape))
    if swap:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


_CDIST_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")


@_float32_under_autocast
def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """The p-norm distance between each row of x1 (..., P, M) and each row of x2 (..., R, M):
    (..., P, R), batch dims broadcast. Computed directly (compute_mode is accepted; the matmul form
    PyTorch may pick for p=2 agrees to rounding). A zero distance has gradient zero, as in PyTorch."""
    kiln = _kiln()
    if compute_mode not in _CDIST_MODES:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    if x1.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {x1.ndim}D")
    if x2.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X2 got: {x2.ndim}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    for name, t in (("X1", x1), ("X2", x2)):
        if not t.dtype.is_floating_point:
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: {_type_name(t.dtype)}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    d = (x1.unsqueeze(-2) - x2.unsqueeze(-3)).abs()  # (..., P, R, M)
    zero = kiln.zeros((), dtype=d.dtype)
    if p == 0:
        return d.sign().sum(-1)  # differentiable, with gradient zero, as PyTorch's
    if p == 1:
        return d.sum(-1)
    if p == math.inf:
        return d.amax(-1) if d.shape[-1] else d.sum(-1)
    s = d.pow(p).sum(-1)
    nonzero = s != 0
    safe = kiln.where(nonzero, s, kiln.ones((), dtype=d.dtype))
    return kiln.where(nonzero, safe.pow(1.0 / p) if p != 2 else safe.sqrt(), zero)


def norm_except_dim(v, pow=2, dim=0):
    """The pow-norm of v over every dimension but `dim`, keeping v's rank with size 1 elsewhere
    ((v.size(0), 1, ..., 1) for dim 0); dim=-1 is the norm of the whole tensor (0-d), as PyTorch's."""
    if dim == -1:
        return v.norm(pow)
    dim = dim % v.dim() if v.dim() else 0
    others = [d for d in range(v.dim()) if d != dim]
    return v.norm(pow, others, keepdim=True) if others else v.abs().pow(pow).pow(1.0 / pow)


def _weight_norm(v, g, dim=0):
    """v * (g / norm_except_dim(v, 2, dim)): the weight of weight normalisation (Salimans & Kingma)."""
    return v * (g / norm_except_dim(v, 2, dim))
