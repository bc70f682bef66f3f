"""Set operations and searches (issue 17): unique, unique_consecutive, bucketize, searchsorted,
composed from sort, comparisons, cumsum, scatter and masked_select.

unique and unique_consecutive return as many elements as the data holds distinct values: they go
through masked_select, whose size is data-dependent, so under kiln.compile they are a clean graph
break and run eagerly, as nonzero and masked_select are (kiln._dynamo sees an unbacked output
size). bucketize and searchsorted have the shape of their values: they are a binary search of
fixed depth (ceil(log2(len + 1)) rounds of gather and where), so they compile with no break.
"""

import math
import numbers

from kiln import _C
from kiln._composites import _kiln, _type_name, _wrap_dim

__all__ = ["unique", "unique_consecutive", "bucketize", "searchsorted"]


# --- unique, unique_consecutive -----------------------------------------------------------------
def _group_rows(rows):
    """For a (n, m) tensor of rows in order: True where a row differs from the one before (the
    first row always); NaN differs from everything, as in PyTorch."""
    k = _kiln()
    n = rows.shape[0]
    differs = (rows.narrow(0, 1, n - 1) != rows.narrow(0, 0, n - 1))
    differs = differs.any(1) if rows.ndim > 1 else differs
    return k.cat([k.ones(1, dtype=_C.bool, device=rows.device), differs])


def _counts_and_inverse(starts, order, num_groups):
    """Each sorted row's group (a running count of starts), placed back at the row's original
    position (`order`: sorted position -> original), and the size of every group."""
    k = _kiln()
    group = starts.to(_C.int64).cumsum(0) - 1
    inverse = group if order is None else k.empty_like(group).scatter(0, order, group)
    counts = k.zeros(num_groups, dtype=_C.int64, device=group.device).scatter_add(0, group, k.ones_like(group))
    return inverse, counts


def _results(output, inverse, counts, return_inverse, return_counts):
    if return_inverse and return_counts:
        return output, inverse, counts
    if return_inverse:
        return output, inverse
    if return_counts:
        return output, counts
    return output


def _lexicographic_order(rows):
    """The permutation sorting the rows of a (n, m) tensor lexicographically, stably: m stable
    sorts from the last column to the first (an LSD radix sort over columns)."""
    k = _kiln()
    order = k.arange(rows.shape[0], dtype=_C.int64, device=rows.device)
    for column in range(rows.shape[1] - 1, -1, -1):
        key = rows.select(1, column).index_select(0, order)
        order = order.index_select(0, key.sort(stable=True).indices)
    return order


def _unique_rows(input, dim, sort, return_inverse, return_counts):
    """unique/unique_consecutive over the slices of `input` along `dim` (None: its elements)."""
    k = _kiln()
    x = input.detach()
    if dim is None:
        rows = x.reshape(-1)
        inverse_shape = tuple(x.shape)
    else:
        if x.ndim == 0:
            raise IndexError("Dimension specified as 0 but tensor has no dimensions")
        dim = _wrap_dim(dim, x.ndim)
        if x.numel() == 0 and any(size == 0 for i, size in enumerate(x.shape) if i != dim):
            raise RuntimeError("There are 0 sized dimensions, and they aren't selected, so unique cannot be applied")
        moved = x.movedim(dim, 0)
        rows = moved.reshape(moved.shape[0], math.prod(moved.shape[1:]))
        inverse_shape = (x.shape[dim],)
    n = rows.shape[0]
    if n == 0:
        output = rows if dim is None else x
        empty = k.zeros(0, dtype=_C.int64, device=x.device)
        return _results(output.clone(), empty.reshape(inverse_shape), empty, return_inverse, return_counts)
    if sort and dim is None:
        rows, order = rows.sort(stable=True)
    elif sort:
        order = _lexicographic_order(rows)
        rows = rows.index_select(0, order)
    else:
        order = None
    starts = _group_rows(rows)
    if dim is None:
        output = rows.masked_select(starts)
    else:
        kept = starts.nonzero().reshape(-1)
        output = rows.index_select(0, kept).reshape([-1, *moved.shape[1:]]).movedim(0, dim)
    inverse, counts = _counts_and_inverse(starts, order, output.shape[0] if dim is None else output.shape[dim])
    return _results(output, inverse.reshape(inverse_shape), counts, return_inverse, return_counts)


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct elements of `input` (or distinct slices along `dim`), in ascending
    (lexicographic) order; optionally the index of each input element's value in the output
    (return_inverse) and how often each occurs (return_counts). As PyTorch's CPU kernel, the output
    is sorted even when sorted=False, and every NaN is distinct (NaNs keep their input order; the
    order PyTorch's unstable sort gives them may differ, and with it their inverse indices)."""
    return _unique_rows(input, dim, True, return_inverse, return_counts)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """unique over runs of equal consecutive elements (or slices along `dim`), in input order."""
    return _unique_rows(input, dim, False, return_inverse, return_counts)


# --- searchsorted, bucketize --------------------------------------------------------------------
def _binary_search(sequence, values, right):
    """For each value, the first position in its row of `sequence` (sorted along the last dim)
    whose element is >= value (> value when right): lo/hi bounds halved in ceil(log2(m + 1))
    rounds. `sequence` is 1-D, or (..., m) with values (..., k) sharing the leading dims. The
    comparisons are PyTorch's (`!(x >= v)` moves right), so NaN values land past the end."""
    k = _kiln()
    m = sequence.shape[-1]
    low = k.zeros(values.shape, dtype=_C.int64, device=values.device)
    if m == 0:
        return low
    high = k.full(values.shape, m, dtype=_C.int64, device=values.device)
    for _ in range(m.bit_length()):
        open_ = low < high
        middle = (low + high) // 2
        probe = middle.clamp(max=m - 1)
        element = sequence.take(probe) if sequence.ndim == 1 else sequence.gather(-1, probe)
        go_right = ~(element > values) if right else ~(element >= values)
        low = k.where(open_ & go_right, middle + 1, low)
        high = k.where(open_ & ~go_right, middle, high)
    return low


def _scalar_like(value, sequence):
    """A Python number as a 0-d tensor compared exactly with `sequence`'s elements: in the
    sequence's dtype when that holds it, else float64 (a float against integers)."""
    k = _kiln()
    if isinstance(value, bool) or not isinstance(value, numbers.Number):
        raise TypeError(f"searchsorted(): argument 'input' must be Tensor or Number, not {type(value).__name__}")
    holds = sequence.dtype.is_floating_point or isinstance(value, numbers.Integral)
    return k.scalar_tensor(value, dtype=sequence.dtype if holds else _C.float64, device=sequence.device)


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    """Indices where `input`'s values would be inserted in `sorted_sequence` (1-D, or sorted along
    its last dim with leading dims matching input's) to keep it sorted: the first position whose
    element is >= the value, or > with right=True / side='right'. `sorter` sorts an unsorted sequence."""
    k = _kiln()
    op = "torch.searchsorted()"
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"{op}: side can only be 'left' or 'right' but got {side}")
        if side == "left" and right:
            raise RuntimeError(f"{op}: side and right can't be set to opposites, got side of left while right was True")
        right = side == "right"
    scalar = not isinstance(input, k.Tensor)
    if scalar:
        if sorted_sequence.ndim != 1:
            raise RuntimeError(f"{op}: input value can be a scalar only when boundaries tensor dimension is 1, "
                               f"but we got boundaries tensor dim({sorted_sequence.ndim}) and input value's dim(0) "
                               "numel(1)")
        input = _scalar_like(input, sorted_sequence)
    if sorter is not None:
        if sorter.dtype != _C.int64:
            raise RuntimeError(f"{op}: sorter must be a tensor of long dtype but got dtype {_type_name(sorter.dtype)}")
        if tuple(sorter.shape) != tuple(sorted_sequence.shape):
            raise RuntimeError(f"{op}: boundary and sorter must have the same size, but got boundary tensor "
                               f"{list(sorted_sequence.shape)}and got sorter tensor {list(sorter.shape)}")
    if sorted_sequence.ndim == 0:
        raise RuntimeError(f"{op}: boundaries tensor should have positive dimension, but got 0 dimension")
    if sorted_sequence.ndim > 1 and (input.ndim != sorted_sequence.ndim or
                                     tuple(input.shape[:-1]) != tuple(sorted_sequence.shape[:-1])):
        raise RuntimeError(f"{op}: boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries "
                           f"tensor and input value tensor must match, but we got boundaries tensor "
                           f"{list(sorted_sequence.shape)} and input value tensor {list(input.shape)}")
    if _C.bool in (sorted_sequence.dtype, input.dtype):
        raise NotImplementedError("\"searchsorted_out_cpu\" not implemented for 'Bool'")
    if sorted_sequence.dtype != input.dtype:
        promoted = k.promote_types(sorted_sequence.dtype, input.dtype)
        sorted_sequence, input = sorted_sequence.to(promoted), input.to(promoted)
    sequence = sorted_sequence.detach()
    if sorter is not None:
        sequence = sequence.take(sorter) if sequence.ndim == 1 else sequence.gather(-1, sorter)
    result = _binary_search(sequence, input.detach(), right)
    return result.to(_C.int32) if out_int32 else result


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """The bucket of each element of `input` between the sorted 1-D `boundaries`: the index of the
    first boundary >= the element (> with right=True); searchsorted with the arguments swapped."""
    k = _kiln()
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    if not isinstance(input, k.Tensor):
        input = _scalar_like(input, boundaries)
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)
