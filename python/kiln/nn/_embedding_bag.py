"""F.embedding_bag for kiln.nn.functional, and the max_norm renormalisation it shares with F.embedding.

PyTorch computes a bag reduction in one aten kernel (_embedding_bag); kiln composes it from ops it
has, so autograd, fake tensors and the compilers see ordinary ops and every shape is static
(offsets' values only move data, never sizes).

Note [Bags without a segment reduction]
  Input positions 0..N-1 are cut into B contiguous bags by `offsets` (bag b starts at offsets[b]).
  * bag of each position: a histogram of the bag starts (index_add of ones, so empty bags count),
    then a cumulative sum: position p belongs to bag (number of starts <= p) - 1.
  * rows: kiln.embedding(weight, indices, padding_idx, scale_grad_by_freq) gathers the rows with the
    gradient rules of embedding (no gradient into padding_idx; scaling by the inverse frequency).
  * sum / mean: index_add of the rows into B zero rows; mean divides by the bag's count of
    non-padding entries (1 for an empty bag, whose sum is 0, as PyTorch returns).
  * max: for every column, a stable descending sort of the values, then a stable sort by bag,
    leaves each bag's entries together, its largest (the first one among ties, as PyTorch's `>`
    scan keeps) at the bag's start offsets[b]. Gathering the rows at those positions gives the
    maxima, and the gradient reaches exactly the rows PyTorch's max_indices name.
  With include_last_offset the last offset closes the list: as documented, the last bag ends there
  and positions past it belong to no bag. (PyTorch 2.13's CPU kernels disagree on such input: the
  general one runs the last bag to N, the float32/16 fast path sums up to offsets[-1] but divides a
  mean by the count up to N; pytorch/pytorch#190062 ends the bag at offsets[-1] on MPS.)
  scale_grad_by_freq divides a row's gradient by its index's frequency, as documented and as
  F.embedding does; PyTorch 2.13's CPU backward divides some rows by another index's count
  (pytorch/pytorch#190063, fixed upstream by #190264).
"""

import kiln
from kiln._composites import _is_fake
from kiln.nn._conv_functional import _type_name

__all__ = ["embedding_bag"]

_MODES = {"sum": 0, "mean": 1, "max": 2}
_FLOATS = (kiln.float16, kiln.bfloat16, kiln.float32, kiln.float64)


def _embedding_renorm_(weight, input, max_norm, norm_type):
    """Rescales, in place and outside autograd, the rows of `weight` that `input` looks up whose
    norm exceeds max_norm to norm max_norm (PyTorch's embedding_renorm_, composed from kiln ops)."""
    with kiln.no_grad():
        idx = input.reshape(-1)
        rows = weight.index_select(0, idx)
        norms = kiln.linalg_vector_norm(rows, norm_type, [1], True)
        scale = kiln.where(norms > max_norm, max_norm / (norms + 1e-7), kiln.ones_like(norms))
        weight.index_put_([idx], rows * scale)


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False, mode="mean",
                  sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """Sums, means or maxima of bags of embedding rows: torch.nn.functional.embedding_bag's checks,
    then the composition of Note [Bags without a segment reduction]."""
    if weight.dtype == kiln.int64 and input.is_floating_point():
        import warnings

        warnings.warn("Argument order of nn.functional.embedding_bag was changed. Usage `embedding_bag(weight, "
                      "input, ...)` is deprecated, and should now be `embedding_bag(input, weight, ...)`.",
                      stacklevel=2)
        weight, input = input, weight
    if per_sample_weights is not None and input.size() != per_sample_weights.size():
        raise ValueError(f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}) is not None, then it "
                         f"must have the same shape as the input ({input.shape})")
    if not weight.dim() == 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.dim()}")
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                             "fixed length sequences. However, found offsets of type "
                             f"{_torch_type_str(offsets)}")
        offsets = kiln.arange(0, input.numel(), input.size(1), dtype=input.dtype, device=input.device)
        include_last_offset = False
        input = input.reshape(-1)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
    elif input.dim() == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.dim() != 1:
            raise ValueError("offsets has to be a 1D Tensor")
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.dim()}")
    if mode not in _MODES:
        raise ValueError("mode has to be one of sum, mean or max")
    if mode == "max":
        if scale_grad_by_freq:
            raise ValueError("max mode does not support scaling the gradient by the frequency")
        if sparse:
            raise ValueError("max mode does not support sparse weights")
    if max_norm is not None:
        _embedding_renorm_(weight, input, max_norm, norm_type)
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError("embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                  f"supported for mode='sum' (got mode='{mode}'). Please open a feature request on "
                                  "GitHub.")
    if sparse:
        raise NotImplementedError("kiln: sparse embedding_bag gradients are not supported")
    return _embedding_bag(weight, input, offsets, scale_grad_by_freq, mode, per_sample_weights, include_last_offset,
                          padding_idx)


def _torch_type_str(value):
    """str(type(value)) as PyTorch prints it for a tensor (the class path is torch's)."""
    return "<class 'torch.Tensor'>" if isinstance(value, kiln.Tensor) else str(type(value))


def _check_arguments(weight, indices, offsets, per_sample_weights, include_last_offset, padding_idx, mode):
    """aten's embedding_bag checks, in its order and with its messages."""
    num_weights = weight.size(0)
    if padding_idx is not None:
        if not -num_weights <= padding_idx < num_weights:
            raise RuntimeError(f"padding_idx must be within the number of embeddings, -{num_weights} through "
                               f"{num_weights - 1}, but got {padding_idx}")
        padding_idx %= num_weights
    # aten promotes indices and offsets to one type first, so a float offsets blames 'indices'.
    index_dtype = kiln.promote_types(indices.dtype, offsets.dtype)
    if index_dtype not in (kiln.int64, kiln.int32):
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                           f"Long, Int; but got torch.{_type_name(index_dtype)}Tensor instead (while checking "
                           "arguments for embedding_bag)")
    if weight.dtype not in _FLOATS:
        raise RuntimeError("Expected tensor for argument #1 'weight' to have one of the following scalar types: "
                           f"Half, BFloat16, Float, Double; but got torch.{_type_name(weight.dtype)}Tensor instead "
                           "(while checking arguments for embedding_bag)")
    if include_last_offset and offsets.size(0) < 1:
        raise RuntimeError("include_last_offset: number of offset should be at least 1")
    if per_sample_weights is not None and per_sample_weights.dtype != weight.dtype:
        raise RuntimeError("Expected tensor for argument #1 'weight' to have the same type as tensor for argument #1 "
                           f"'per_sample_weights'; but type torch.{_type_name(weight.dtype)}Tensor does not equal "
                           f"torch.{_type_name(per_sample_weights.dtype)}Tensor (while checking arguments for "
                           "embedding_bag)")
    # The value checks need data: skipped on fake tensors, as while kiln.compile traces.
    if _is_fake(indices) or _is_fake(offsets):
        return padding_idx
    n = indices.size(0)
    if offsets.size(0) > 0:
        first, last = offsets[0].item(), offsets[-1].item()
        if first != 0:
            # aten appends the 0-d tensor it printed the value from; kept for an identical message.
            raise RuntimeError("offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start "
                               f"from position 0. However, got {first}\n[ torch.{_type_name(index_dtype)}Tensor{{}} ]")
        if last > n:
            raise RuntimeError(f"offsets[-1] can not be greater than input's length {n} but got offsets[-1] of {last}")
    bad = ((indices < 0) | (indices >= num_weights)).nonzero()
    if bad.numel():
        position, value = bad[0, 0].item(), indices[bad[0, 0]].item()
        # PyTorch's message depends on its kernel: the fast one (sum or mean of 32- and 16-bit
        # floats, no padding_idx) names the position, the general one only the value.
        if mode != "max" and padding_idx is None and weight.dtype != kiln.float64:
            raise RuntimeError(f"Index {position} of input takes value {value} which is not in the valid range "
                               f"[0, {num_weights})")
        raise RuntimeError(f"embedding_bag: Expected idx >= 0 && idx < num_embeddings but found idx to be {value}")
    return padding_idx


def _embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, per_sample_weights, include_last_offset,
                   padding_idx):
    """The reduction itself (torch.embedding_bag's first output): see Note [Bags without a segment reduction]."""
    padding_idx = _check_arguments(weight, indices, offsets, per_sample_weights, include_last_offset, padding_idx,
                                   mode)
    indices, offsets = indices.to(kiln.int64), offsets.to(kiln.int64)
    starts = offsets[:-1] if include_last_offset else offsets
    num_bags, n, dim = starts.size(0), indices.size(0), weight.size(1)
    rows = kiln.embedding(weight, indices, -1 if padding_idx is None else padding_idx, scale_grad_by_freq, False)
    if num_bags == 0:
        return rows.narrow(0, 0, 0) * 0  # no bags: an empty result still connected to weight
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.unsqueeze(1)
    # The closing offset counts as a start too: the positions after it fall in bag num_bags, none.
    starts_per_position = kiln.zeros(n + 1, dtype=kiln.int64, device=indices.device).index_add(
        0, offsets, kiln.ones_like(offsets))
    bag_of = starts_per_position.cumsum(0)[:n] - 1
    keep = kiln.ones_like(indices, dtype=kiln.bool) if padding_idx is None else indices != padding_idx
    if include_last_offset:
        keep = keep & (bag_of < num_bags)
        bag_of = bag_of.clamp(max=num_bags - 1)  # after the last bag's entries, and never kept
    counts = kiln.zeros(num_bags, dtype=kiln.int64, device=indices.device).index_add(0, bag_of, keep.to(kiln.int64))
    if mode == "max" and n > 0:
        return _bag_max(rows, keep, bag_of, starts, counts)
    sums = kiln.zeros((num_bags, dim), dtype=rows.dtype, device=rows.device).index_add(
        0, bag_of, kiln.where(keep.unsqueeze(1), rows, 0.0))
    if mode == "mean":
        return sums / counts.clamp(min=1).unsqueeze(1).to(rows.dtype)
    return sums


def _bag_max(rows, keep, bag_of, starts, counts):
    """Each bag's column-wise maxima over its non-padding rows (0 for a bag with none)."""
    argmax = _bag_argmax(rows, keep, bag_of, starts)
    maxima = rows.gather(0, argmax)
    # A bag of -inf values may have a padding entry sorted first: its maximum is still -inf.
    maxima = kiln.where(keep[argmax], maxima, float("-inf"))
    return kiln.where(counts.unsqueeze(1) > 0, maxima, 0.0)


def _bag_argmax(rows, keep, bag_of, starts):
    """(B, D): the position of each bag's largest non-padding entry in every column (an empty bag's
    is meaningless): two stable sorts group every column's entries by bag, largest first (Note [Bags
    without a segment reduction])."""
    n, dim = rows.shape
    values = kiln.where(keep.unsqueeze(1), rows.detach(), float("-inf"))
    by_value = values.sort(dim=0, descending=True, stable=True)[1]
    bag_by_value = bag_of.unsqueeze(1).expand(n, dim).gather(0, by_value)
    by_bag = bag_by_value.sort(dim=0, stable=True)[1]
    order = by_value.gather(0, by_bag)
    # An empty bag's start may be n (past the end): its row is discarded below anyway.
    first = starts.clamp(max=n - 1).unsqueeze(1).expand(starts.size(0), dim)
    return order.gather(0, first)


# --- torch.embedding_bag: aten's four outputs --------------------------------------------------------
_MODE_NAMES = {0: "sum", 1: "mean", 2: "max"}
_FAST_SUM_DTYPES = (kiln.float32, kiln.float16, kiln.bfloat16)


def torch_embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                        per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """torch.embedding_bag (aten::embedding_bag; weight first, mode as 0/1/2): (output, offset2bag,
    bag_size, max_indices), the last three as aten's CPU kernel fills them for its backward.
    offset2bag (each index's bag) is empty where aten takes its fast sum path (a sum of float32/16
    rows with unit column stride, no padding_idx); bag_size counts each bag's non-padding entries in
    mean and max modes (for sum, zeros: one per offset); max_indices is, in max mode, each bag's arg-max row of weight
    per column (0 for an empty bag) and a copy of bag_size otherwise."""
    if mode not in _MODE_NAMES:
        raise RuntimeError(f"Unknown mode for embedding_bag: {mode}")
    if sparse:
        raise NotImplementedError("kiln: sparse embedding_bag gradients are not supported")
    output = _embedding_bag(weight, indices, offsets, scale_grad_by_freq, _MODE_NAMES[mode], per_sample_weights,
                            include_last_offset, padding_idx)
    with kiln.no_grad():
        if padding_idx is not None:
            padding_idx %= weight.size(0)
        indices, offsets = indices.to(kiln.int64), offsets.to(kiln.int64)
        starts = offsets[:-1] if include_last_offset else offsets
        num_bags, n = starts.size(0), indices.size(0)
        # aten's make_offset2bag: position p lies in bag (number of starts <= p) - 1; aten's kernels
        # read the last bag up to n, whatever include_last_offset's closing offset says.
        histogram = kiln.zeros(n + 1, dtype=kiln.int64).index_add(0, starts, kiln.ones_like(starts))
        offset2bag = (histogram.cumsum(0)[:n] - 1).clamp(min=0)
        keep = kiln.ones_like(indices, dtype=kiln.bool) if padding_idx is None else indices != padding_idx
        counts = kiln.zeros(num_bags, dtype=kiln.int64).index_add(0, offset2bag, keep.to(kiln.int64))
        fast_sum = (mode == 0 and weight.dtype in _FAST_SUM_DTYPES and weight.stride(1) == 1 and padding_idx is None)
        if fast_sum:
            offset2bag = offset2bag.new_empty(0)
        # sum mode leaves bag_size unused: zeros, one per offset (the closing one included)
        bag_size = counts if mode != 0 else kiln.zeros(offsets.size(0), dtype=kiln.int64)
        if mode == 2 and n > 0 and num_bags > 0:
            argmax = _bag_argmax(weight.index_select(0, indices), keep, offset2bag, starts)
            max_indices = kiln.where(counts.unsqueeze(1) > 0, indices[argmax], 0)
        elif mode == 2:
            max_indices = kiln.zeros((num_bags, weight.size(1)), dtype=kiln.int64)
        else:
            max_indices = bag_size.clone()
    return output, offset2bag, bag_size, max_indices
