"""torch.nn.utils.rnn for kiln: PackedSequence and the pack/pad helpers, as Python composites.

A PackedSequence holds the valid time steps of a batch of sequences sorted by decreasing length,
time-major: `data` is (sum(lengths), *) with step t's `batch_sizes[t]` rows (the sequences still
running at t) after step t-1's; `sorted_indices[i]` is the original batch index of sorted row i and
`unsorted_indices` its inverse. PyTorch packs and pads in C++ (`_pack_padded_sequence`,
`_pad_packed_sequence`); here the same layouts are built from slices, `cat` and `stack`, so autograd
and the tracers see ordinary ops. `batch_sizes` and lengths are read eagerly (Python ints): they fix
the shapes, as in PyTorch.
"""

from collections.abc import Iterable
from typing import NamedTuple, Optional

import kiln
from kiln._tensor import Tensor

__all__ = [
    "PackedSequence", "invert_permutation", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence",
    "unpad_sequence", "pack_sequence", "unpack_sequence",
]


class PackedSequence_(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Optional[Tensor]
    unsorted_indices: Optional[Tensor]


def bind(optional, fn):
    return None if optional is None else fn(optional)


class PackedSequence(PackedSequence_):
    """(data, batch_sizes, sorted_indices, unsorted_indices); made by pack_padded_sequence / pack_sequence."""

    __module__ = "kiln.nn.utils.rnn"

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        return super().__new__(cls, *_packed_sequence_init_args(data, batch_sizes, sorted_indices,
                                                                unsorted_indices))

    def to(self, *args, **kwargs):
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        sorted_indices = bind(self.sorted_indices, lambda t: t.to(data.device))
        unsorted_indices = bind(self.unsorted_indices, lambda t: t.to(data.device))
        return type(self)(data, self.batch_sizes, sorted_indices, unsorted_indices)

    def cpu(self, *args, **kwargs):
        return self.to("cpu")

    def double(self):
        return self.to(dtype=kiln.float64)

    def float(self):
        return self.to(dtype=kiln.float32)

    def half(self):
        return self.to(dtype=kiln.float16)

    def long(self):
        return self.to(dtype=kiln.int64)

    def int(self):
        return self.to(dtype=kiln.int32)

    @property
    def is_cuda(self):
        return False


def _packed_sequence_init_args(data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
    if unsorted_indices is None:
        unsorted_indices = invert_permutation(sorted_indices)
    if batch_sizes is not None:
        if batch_sizes.device.type != "cpu":
            raise ValueError("batch_sizes should always be on CPU. Instances of PackedSequence should never be "
                             "created manually. They should be instantiated by functions like pack_sequence and "
                             "pack_padded_sequences in nn.utils.rnn.")
        return data, batch_sizes, sorted_indices, unsorted_indices
    if not (isinstance(data, (list, tuple)) and len(data) == 2):
        raise AssertionError("Expected data to be a list or tuple of length 2")
    return data[0], data[1], sorted_indices, unsorted_indices


def invert_permutation(permutation):
    if permutation is None:
        return None
    output = kiln.empty_like(permutation)
    output.scatter_(0, permutation, kiln.arange(0, permutation.numel(), device=permutation.device))
    return output


def _pack_padded(input, lengths, batch_first):
    """aten::_pack_padded_sequence: (T, B, *) (or (B, T, *)) and sorted lengths -> (data, batch_sizes)."""
    if batch_first:
        input = input.transpose(0, 1)
    if input.numel() <= 0:
        raise RuntimeError("Cannot pack empty tensors.")
    batch_size = input.size(1)
    if len(lengths) != batch_size:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got {len(lengths)} "
                           f"(batch_size={batch_size})")
    if lengths[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' "
                           "that is <= 0")
    if any(a < b for a, b in zip(lengths, lengths[1:])):
        raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. "
                           "You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to "
                           "sidestep this requirement if you do not need ONNX exportability.")
    if lengths[0] > input.size(0):  # PyTorch reads past the end of input here
        raise RuntimeError(f"Expected all lengths to be at most the sequence length {input.size(0)}, "
                           f"but got {lengths[0]}")
    batch_sizes = [sum(1 for n in lengths if n > t) for t in range(lengths[0])]
    data = kiln.cat([input[t].narrow(0, 0, bs) for t, bs in enumerate(batch_sizes)], 0)
    return data, kiln.tensor(batch_sizes, dtype=kiln.int64)


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Packs a padded batch (T, B, *) (or (B, T, *) with batch_first) of sequences of the given lengths."""
    if not isinstance(lengths, Tensor):
        lengths = kiln.as_tensor(lengths, dtype=kiln.int64, device="cpu")
    else:
        lengths = lengths.to(dtype=kiln.int64)
    if enforce_sorted:
        sorted_indices = None
    else:
        lengths, sorted_indices = kiln.sort(lengths, descending=True)
        sorted_indices = sorted_indices.to(input.device)
        batch_dim = 0 if batch_first else 1
        input = input.index_select(batch_dim, sorted_indices)
    data, batch_sizes = _pack_padded(input, [int(n) for n in lengths.tolist()], batch_first)
    return PackedSequence(data, batch_sizes, sorted_indices, None)


def _pad_packed(data, batch_sizes, batch_first, padding_value, total_length):
    """aten::_pad_packed_sequence: -> (padded (T, B, *), lengths int64 in sorted order)."""
    max_batch = batch_sizes[0]
    feature = tuple(data.shape[1:])
    steps, offset = [], 0
    for bs in batch_sizes:
        step = data.narrow(0, offset, bs)
        offset += bs
        if bs < max_batch:
            pad = kiln.full((max_batch - bs,) + feature, padding_value, dtype=data.dtype, device=data.device)
            step = kiln.cat([step, pad], 0)
        steps.append(step)
    output = kiln.stack(steps, 0)
    if total_length > len(batch_sizes):
        pad = kiln.full((total_length - len(batch_sizes), max_batch) + feature, padding_value, dtype=data.dtype,
                        device=data.device)
        output = kiln.cat([output, pad], 0)
    lengths = [sum(1 for bs in batch_sizes if bs > b) for b in range(max_batch)]
    if batch_first:
        output = output.transpose(0, 1)
    return output, kiln.tensor(lengths, dtype=kiln.int64)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """Inverse of pack_padded_sequence: (padded batch, lengths), in the original batch order."""
    max_seq_length = sequence.batch_sizes.size(0)
    if total_length is not None:
        if total_length < max_seq_length:
            raise ValueError("Expected total_length to be at least the length of the longest sequence in input, "
                             f"but got total_length={total_length} and max sequence length being {max_seq_length}")
        max_seq_length = total_length
    padded_output, lengths = _pad_packed(sequence.data, [int(b) for b in sequence.batch_sizes.tolist()],
                                         batch_first, padding_value, max_seq_length)
    unsorted_indices = sequence.unsorted_indices
    if unsorted_indices is not None:
        batch_dim = 0 if batch_first else 1
        return padded_output.index_select(batch_dim, unsorted_indices), lengths[unsorted_indices.cpu()]
    return padded_output, lengths


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stacks sequences (L_i, *) into (max L, B, *) (or (B, max L, *)), padding on `padding_side`."""
    if not isinstance(sequences, Iterable):
        raise RuntimeError("pad_sequence: Expected iterable for input sequences, but got arg of type: "
                           f"{type(sequences)}")
    sequences = tuple(sequences)
    if len(sequences) == 0:
        raise RuntimeError("received an empty list of sequences")
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    max_len = max(s.size(0) for s in sequences)
    padded = []
    for s in sequences:
        if s.size(0) < max_len:
            pad = kiln.full((max_len - s.size(0),) + tuple(s.shape[1:]), padding_value, dtype=s.dtype,
                            device=s.device)
            s = kiln.cat([s, pad] if padding_side == "right" else [pad, s], 0)
        padded.append(s)
    return kiln.stack(padded, 0 if batch_first else 1)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """Inverse of pad_sequence: the list of unpadded sequences."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [padded_sequences[i].narrow(0, 0, int(n)) for i, n in enumerate(lengths.tolist())]


def pack_sequence(sequences, enforce_sorted=True):
    lengths = kiln.as_tensor([v.size(0) for v in sequences])
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    padded_sequences, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded_sequences, lengths, batch_first=True)
