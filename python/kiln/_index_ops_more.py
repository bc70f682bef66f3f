"""PyTorch's indexing, splitting and counting composites (issue 17): take_along_dim, index_copy,
index_fill, masked_scatter, put, scatter_reduce, tensor_split / hsplit / vsplit / dsplit, histc,
bincount, kthvalue and aminmax, composed from index_put, gather, scatter_add, masked_fill, narrow,
sort and the reductions.

Results are computed functionally and the in-place variants copy them into self with copy_ (or
write with index_put_), so they return self, bump its version and keep autograd history. Where a
result's shape depends on the data (histc without a range, bincount), the value is read, which is
a clean graph break under kiln.compile, as in PyTorch.

Note [scatter_reduce's dense mask]: kiln has no reducing scatter kernel for prod/amax/amin, so each
output slot reduces over a mask `index == slot` of shape index.shape + (size along dim,): memory
index.numel() * self.size(dim). sum and mean use scatter_add (no mask). amax/amin's gradient is
split evenly among the elements equal to the result (self included when include_self), as torch's.
"""

import builtins
import math

from kiln import _C, return_types
from kiln._composites import _broadcast_shape, _is_fake, _kiln, _type_name, _wrap_dim

__all__ = ["take_along_dim", "index_copy", "index_fill", "masked_scatter", "put", "scatter_reduce", "tensor_split",
           "hsplit", "vsplit", "dsplit", "histc", "bincount", "kthvalue", "aminmax"]


def _result(value, out):
    return value if out is None else out.copy_(value)


def _check_long_index(op, index):
    if index.dtype != _C.int64:
        raise RuntimeError(f"{op}(): Expected a long tensor for index, but got {_type_name(index.dtype)}")


# --- gathers ----------------------------------------------------------------------------------------
def take_along_dim(input, indices, dim=None, *, out=None):
    """input's values at `indices` along dim (input and indices broadcast in the other dims), or in
    the flattened input when dim is None."""
    if indices.dtype != _C.int64:
        raise RuntimeError(f"torch.take_along_dim(): dtype of indices should be Long but got "
                           f"{_type_name(indices.dtype)}")
    if dim is None:
        return _result(input.view(-1).gather(0, indices.view(-1)), out)  # view: torch raises where it cannot
    if input.ndim != indices.ndim:
        raise RuntimeError(f"torch.take_along_dim(): input and indices should have the same number of dimensions, "
                           f"but got {input.ndim} dimensions for input, and {indices.ndim} dimensions for indices")
    dim = _wrap_dim(dim, input.ndim)
    in_shape, idx_shape = list(input.shape), list(indices.shape)
    in_shape[dim] = idx_shape[dim] = 1
    shape = list(_broadcast_shape(in_shape, idx_shape))
    in_target, idx_target = list(shape), list(shape)
    in_target[dim], idx_target[dim] = input.shape[dim], indices.shape[dim]
    return _result(input.expand(in_target).gather(dim, indices.expand(idx_target)), out)


# --- index_copy / index_fill ------------------------------------------------------------------------
def _index_at(input, dim, index):
    """index_put's index list that addresses `index` along dim (the other dims whole)."""
    return [None] * dim + [index.reshape(-1)]


def _source_for(input, dim, index, source):
    return source.unsqueeze(dim) if index.ndim == 0 and source.ndim == input.ndim - 1 else source


def index_copy(input, dim, index, source):
    _check_long_index("index_copy_", index)
    if input.dtype != source.dtype:
        raise RuntimeError(f"index_copy_(): self and source expected to have the same dtype, but got (self) "
                           f"{_type_name(input.dtype)} and (source) {_type_name(source.dtype)}")
    if index.ndim > 1:
        raise IndexError("index_copy_(): Index should have dimension 1 or 0 (got {})".format(index.ndim))
    dim = _wrap_dim(dim, input.ndim)
    source = _source_for(input, dim, index, source)
    _check_index_count(index, source, dim)
    # row-major whatever input's layout, as PyTorch's structured index_copy allocates it
    return input.clone(memory_format=_kiln().contiguous_format).index_put_(_index_at(input, dim, index), source)


def index_copy_(input, dim, index, source):
    _check_long_index("index_copy_", index)
    if input.dtype != source.dtype:
        raise RuntimeError(f"index_copy_(): self and source expected to have the same dtype, but got (self) "
                           f"{_type_name(input.dtype)} and (source) {_type_name(source.dtype)}")
    dim = _wrap_dim(dim, input.ndim)
    source = _source_for(input, dim, index, source)
    _check_index_count(index, source, dim)
    return input.index_put_(_index_at(input, dim, index), source)


def _check_index_count(index, source, dim):
    count = source.shape[dim] if source.ndim else 1
    if index.numel() != count:
        raise IndexError(f"index_copy_(): Number of indices ({index.numel()}) should be equal to source.size(dim) "
                         f"({count})")


def _check_fill_index(index):
    if index.dtype != _C.int64:
        raise IndexError("index_fill_(): Expected dtype int64 for index.")


def _dim_mask(input, dim, index):
    """A bool mask broadcastable to input: True at the positions `index` picks along dim."""
    k = _kiln()
    size = input.shape[dim] if input.ndim else 1
    flat = index.reshape(-1)
    if not _is_fake(flat) and flat.numel() and bool(((flat < -size) | (flat >= size)).any()):
        bad = int(flat[(flat < -size) | (flat >= size)][0].item())
        raise IndexError(f"index {bad} is out of bounds for dimension {dim} with size {size}")
    picked = (k.arange(size, device=flat.device).unsqueeze(1) == k.remainder(flat, builtins.max(size, 1)).unsqueeze(0)).any(1)
    return picked.view([size if d == dim else 1 for d in range(input.ndim)]) if input.ndim else picked.view(())


def index_fill(input, dim, index, value):
    _check_fill_index(index)
    if isinstance(value, _kiln().Tensor) and value.ndim:
        raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                           f"{value.ndim} dimension(s).")
    dim = _wrap_dim(dim, input.ndim)
    # laid out as input (PyTorch's is a clone of input written in place; masked_fill's is row-major)
    return input.clone().masked_fill_(_dim_mask(input, dim, index), value)


def index_fill_(input, dim, index, value):
    _check_fill_index(index)
    if isinstance(value, _kiln().Tensor) and value.ndim:
        raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                           f"{value.ndim} dimension(s).")
    dim = _wrap_dim(dim, input.ndim)
    return input.masked_fill_(_dim_mask(input, dim, index), value)


# --- masked_scatter, put ------------------------------------------------------------------------
def masked_scatter(input, mask, source):
    """input with the positions where mask is True filled by source's leading elements in order:
    the i-th True takes source.flatten()[i] (its index is a cumulative sum of the mask)."""
    k = _kiln()
    if mask.dtype != _C.bool:
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with dtype "
                           f"{_type_name(mask.dtype)}")
    if input.dtype != source.dtype:
        raise RuntimeError(f"masked_scatter_: expected self and source to have same dtypes but got "
                           f"{_type_name(input.dtype)} and {_type_name(source.dtype)}")
    shape = _broadcast_shape(input.shape, mask.shape)
    mask = mask.expand(shape)
    flat_mask = mask.reshape(-1)
    if not _is_fake(mask) and int(flat_mask.sum().item()) > source.numel():
        raise RuntimeError("masked_scatter: expected source to have at least as many elements as the ones in "
                           "the mask")
    # row-major whatever input's layout: PyTorch's is a contiguous clone written in place
    if source.numel() == 0:
        return input.expand(shape).clone(memory_format=k.contiguous_format)
    position = (flat_mask.to(_C.int64).cumsum(0) - 1).clamp(min=0)
    taken = source.reshape(-1).take(position).view(shape)
    return k.where(mask, taken, input).contiguous()


def masked_scatter_(input, mask, source):
    return input.copy_(masked_scatter(input, mask, source))


def _check_put(input, index, source):
    _check_long_index("put_", index)
    if input.dtype != source.dtype:
        raise RuntimeError(f"put_(): self and source expected to have the same dtype, but got self.dtype = "
                           f"{_type_name(input.dtype)} and source.dtype = {_type_name(source.dtype)}")
    if index.numel() != source.numel():
        raise IndexError(f"put_(): Expected source and index to have the same number of elements, but got "
                           f"source.numel() = {source.numel()}, index.numel() = {index.numel()}")


def _put_values(input, index, source, accumulate):
    """input's values with source written at the flat (row-major) positions index; with
    accumulate, added (a row-major tensor)."""
    _check_put(input, index, source)
    flat = input.reshape(-1).index_put([index.reshape(-1)], source.reshape(-1), accumulate)
    return flat.view(tuple(input.shape))


def put(input, index, source, accumulate=False):
    """_put_values laid out as input (PyTorch's is a clone of input written in place)."""
    values = _put_values(input, index, source, accumulate)
    return values if input.is_contiguous() else _kiln().empty_like(input).copy_(values)


def put_(input, index, source, accumulate=False):
    return input.copy_(_put_values(input, index, source, accumulate))


# --- scatter_reduce (Note [scatter_reduce's dense mask]) ---------------------------------------------
_REDUCES = ("sum", "prod", "mean", "amax", "amin")


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    # row-major whatever input's layout, as PyTorch's structured scatter_reduce allocates it
    return _scatter_reduce(input, dim, index, src, reduce, include_self).contiguous()


def _scatter_reduce(input, dim, index, src, reduce, include_self):
    k = _kiln()
    if reduce not in _REDUCES:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    if input.dtype != src.dtype:
        raise RuntimeError("scatter_reduce(): Expected self.dtype to be equal to src.dtype")
    dim = _wrap_dim(dim, input.ndim)
    if index.numel() == 0:
        return input.clone()
    if reduce in ("sum", "mean"):
        base = input if include_self else input.masked_fill(_scattered(input, dim, index), 0)
        total = base.scatter_add(dim, index, _narrow_to(src, index))
        if reduce == "sum":
            return total
        ones = k.ones(tuple(index.shape), dtype=input.dtype, device=input.device)
        count = k.full(tuple(input.shape), 1 if include_self else 0, dtype=input.dtype, device=input.device).scatter_add(dim, index, ones)
        count = k.where(count == 0, k.ones((), dtype=input.dtype), count)
        if input.dtype.is_floating_point:
            return total / count
        return k.div(total, count, rounding_mode="floor")
    return _masked_reduce(input, dim, index, _narrow_to(src, index), reduce, include_self)


def scatter_reduce_(input, dim, index, src, reduce, *, include_self=True):
    # prod/amax/amin save (views of) their input for the backward: a clone keeps it out of the copy
    return input.copy_(scatter_reduce(input.clone(), dim, index, src, reduce, include_self=include_self))


def _narrow_to(src, index):
    """src cut to index's shape (scatter reads only that corner of src; a 0-d src is one of shape [1])."""
    if src.ndim == 0 and index.ndim == 1:
        src = src.reshape(1)
    for d, n in enumerate(index.shape):
        if src.shape[d] != n:
            src = src.narrow(d, 0, n)
    return src


def _scattered(input, dim, index):
    """A bool mask of input's shape: True where some index element points."""
    k = _kiln()
    hits = k.zeros(tuple(input.shape), dtype=input.dtype, device=input.device).scatter(dim, index, 1)
    return hits != 0


def _identity(reduce, dtype):
    """The value that leaves the reduction unchanged: 1 for prod, the lowest / highest value of the
    dtype for amax / amin (infinities for floats)."""
    if reduce == "prod":
        return 1
    if dtype.is_floating_point:
        return -math.inf if reduce == "amax" else math.inf
    info = _kiln().iinfo(dtype)
    return info.min if reduce == "amax" else info.max


def _masked_reduce(input, dim, index, src, reduce, include_self):
    k = _kiln()
    size = input.shape[dim]
    slots = k.arange(size, device=index.device).view([1] * index.ndim + [size])
    mask = index.unsqueeze(-1) == slots  # index.shape + (size,): which slot each element goes to
    identity = k.full((), _identity(reduce, input.dtype), dtype=input.dtype)
    values = k.where(mask, src.unsqueeze(-1), identity)
    # the slots of input's corner that index covers (index may be smaller than input off dim)
    corner = input
    for d, n in enumerate(index.shape):
        if d != dim and corner.shape[d] != n:
            corner = corner.narrow(d, 0, n)
    corner_last = corner.movedim(dim, -1).unsqueeze(dim)  # index's layout, slots last, 1 at dim
    hit = mask.any(dim, keepdim=True)
    if include_self:
        values = k.cat([values, corner_last], dim)
    if reduce == "prod":
        reduced = values.prod(dim, keepdim=True)
    elif reduce == "amax":
        reduced = values.amax(dim, keepdim=True)
    else:
        reduced = values.amin(dim, keepdim=True)
    reduced = k.where(hit, reduced, corner_last).squeeze(dim).movedim(-1, dim)
    if tuple(reduced.shape) == tuple(input.shape):
        return reduced
    out = input.clone()  # the slots index does not reach keep input's values
    out[tuple(slice(0, n) for n in reduced.shape)] = reduced
    return out


# --- splits -------------------------------------------------------------------------------------------
def tensor_split(input, indices_or_sections, dim=0):
    """Views of input along dim: `n` sections (the first size % n one longer), or the pieces
    between the given indices (clamped to the size, as slicing clamps)."""
    k = _kiln()
    if input.ndim == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims")
    if isinstance(indices_or_sections, k.Tensor):
        if indices_or_sections.dtype != _C.int64:
            raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to have dtype of long, but got "
                               f"{_type_name(indices_or_sections.dtype)}")
        if indices_or_sections.ndim > 1:
            raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to be a zero-dimensional or "
                               f"one-dimensional tensor, but got a tensor with {indices_or_sections.ndim} dims")
        value = indices_or_sections.tolist()
        indices_or_sections = value if isinstance(value, list) else int(value)
    dim = _wrap_dim(dim, input.ndim)
    size = input.shape[dim]
    if isinstance(indices_or_sections, int):
        sections = indices_or_sections
        if sections <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {sections}")
        base, extra = divmod(size, sections)
        bounds = [i * base + builtins.min(i, extra) for i in range(sections + 1)]
    else:
        bounds = [0] + [int(i) for i in indices_or_sections] + [size]
    pieces = []
    for start, stop in zip(bounds[:-1], bounds[1:]):
        start = builtins.min(builtins.max(start + size if start < 0 else start, 0), size)
        stop = builtins.min(builtins.max(stop + size if stop < 0 else stop, 0), size)
        pieces.append(input.narrow(dim, start, builtins.max(stop - start, 0)))
    return tuple(pieces)


def _split_along(op, input, indices_or_sections, dim, min_dims):
    if input.ndim < min_dims:
        raise RuntimeError(f"torch.{op} requires a tensor with at least {min_dims} dimension"
                           f"{'s' if min_dims > 1 else ''}, but got a tensor with {input.ndim} dimensions!")
    if isinstance(indices_or_sections, int):
        size = input.shape[dim]
        if indices_or_sections == 0 or size % indices_or_sections:
            raise RuntimeError(f"torch.{op} attempted to split along dimension {dim}, but the size of the dimension "
                               f"{size} is not divisible by the split_size {indices_or_sections}!")
    return tensor_split(input, indices_or_sections, dim)


def hsplit(input, indices_or_sections):
    return _split_along("hsplit", input, indices_or_sections, 1 if input.ndim > 1 else 0, 1)


def vsplit(input, indices_or_sections):
    return _split_along("vsplit", input, indices_or_sections, 0, 2)


def dsplit(input, indices_or_sections):
    return _split_along("dsplit", input, indices_or_sections, 2, 3)


# --- counting ---------------------------------------------------------------------------------------
def histc(input, bins=100, min=0, max=0, *, out=None):
    """Counts of input's elements in `bins` equal bins over [min, max] (input's own range when both
    are 0), in input's dtype; elements outside are ignored, max falls in the last bin. The bin is
    (x - min) * bins / (max - min) in input's dtype, as torch's linear histogram kernel computes it."""
    k = _kiln()
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"histogram_cpu\" not implemented for '{_type_name(input.dtype)}'")
    if bins <= 0:
        raise RuntimeError(f"torch.histc(): bins must be > 0, but got {bins} for dim 0")
    if min > max:
        raise RuntimeError("max must be larger than min")
    x = input.detach().reshape(-1)
    low, high = min, max
    if low == high and x.numel():
        low, high = x.min().item(), x.max().item()
    if low == high:
        low, high = low - 1, high + 1
    if not (math.isfinite(low) and math.isfinite(high)):
        raise RuntimeError(f"torch.histc(): range of [{low}, {high}] is not finite")
    # the edges as input's dtype holds them (torch converts min and max so)
    low_t, high_t = k.tensor(low, dtype=input.dtype), k.tensor(high, dtype=input.dtype)
    inside = (x >= low_t) & (x <= high_t)
    position = ((x - low_t) * bins / (high_t - low_t)).floor().to(_C.int64).clamp(0, bins - 1)
    counts = k.zeros(bins, dtype=input.dtype, device=input.device).index_put([position], inside.to(input.dtype), True)
    return _result(counts, out)


def bincount(input, weights=None, minlength=0):
    """How often each value 0, 1, ..., max(input) occurs (summing `weights` instead of counting)."""
    k = _kiln()
    if input.dtype.is_floating_point or input.dtype == _C.bool:
        raise NotImplementedError(f"\"bincount_cpu\" not implemented for '{_type_name(input.dtype)}'")
    if input.ndim != 1:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if weights is not None and (weights.ndim != 1 or weights.shape[0] != input.shape[0]):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    if input.numel() and int(input.min().item()) < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    length = builtins.max(int(input.max().item()) + 1 if input.numel() else 0, minlength)
    if weights is None:
        dtype, values = _C.int64, k.ones(input.shape[0], dtype=_C.int64, device=input.device)
    else:  # torch counts float weights in their dtype and everything else in float64
        dtype = weights.dtype if weights.dtype in (_C.float32, _C.float64) else _C.float64
        values = weights.to(dtype)
    return k.zeros(length, dtype=dtype, device=input.device).index_put([input.to(_C.int64)], values, True)


# --- selections -----------------------------------------------------------------------------------
def kthvalue(input, k, dim=-1, keepdim=False, *, out=None):
    """The k-th smallest element along dim and its index. The index comes from a stable sort of the
    detached input (NaN largest), so among equal values it is the k-th in order of position; torch's
    quickselect may name another of the ties (the values agree). The value is gathered from input,
    so its gradient goes to that element, as torch's."""
    lib = _kiln()
    dim = _wrap_dim(dim, input.ndim)
    size = input.shape[dim] if input.ndim else 1
    if not 1 <= k <= size:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {dim}")
    x = input if input.ndim else input.reshape(1)
    order = lib.sort(x.detach(), stable=True, dim=dim).indices
    indices = order.narrow(dim, k - 1, 1)
    values = x.gather(dim, indices)
    if not keepdim or input.ndim == 0:
        values, indices = values.squeeze(dim), indices.squeeze(dim)
    if input.ndim == 0:
        values, indices = values.reshape(()), indices.reshape(())
    if out is not None:
        out[0].copy_(values)
        out[1].copy_(indices)
        values, indices = out
    return return_types.kthvalue((values, indices))


def aminmax(input, *, dim=None, keepdim=False, out=None):
    """(amin, amax) over dim (everything when None), each gradient split among the ties as amin's
    and amax's."""
    if input.numel() == 0:
        if dim is None:
            raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the operation has no "
                               "identity.")
        if input.ndim and input.shape[_wrap_dim(dim, input.ndim)] == 0:
            raise IndexError(f"aminmax: Expected reduction dim {dim} to have non-zero size.")
    if dim is None:
        low, high = input.amin(), input.amax()
        if keepdim:
            shape = (1,) * input.ndim
            low, high = low.reshape(shape), high.reshape(shape)
    else:
        low, high = input.amin(dim, keepdim), input.amax(dim, keepdim)
    if out is not None:
        out[0].copy_(low)
        out[1].copy_(high)
        low, high = out
    return return_types.aminmax((low, high))
