"""default_collate / default_convert: turn a list of samples into a batch, as torch.utils.data does
(tensors are stacked, Python floats become float64 tensors, ints int64 tensors, strings stay lists,
dicts/tuples/lists/namedtuples are collated field by field; a tuple sample gives a list batch)."""

import collections.abc
import numbers

import kiln
from kiln import Tensor

__all__ = ["default_collate", "default_convert"]

_ERR = "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"


def _is_ndarray(x):
    return type(x).__name__ in ("ndarray", "memmap") and type(x).__module__ == "numpy"


def default_collate(batch):
    elem = batch[0]
    if isinstance(elem, Tensor):
        return kiln.stack(batch, 0)
    if _is_ndarray(elem) or type(elem).__module__ == "numpy" and hasattr(elem, "dtype"):
        if _is_ndarray(elem) and elem.dtype.kind in "SaUO":
            raise TypeError(_ERR.format(elem.dtype))
        return default_collate([kiln.as_tensor(__import__("numpy").asarray(b)) for b in batch])
    if isinstance(elem, float):
        return kiln.tensor(batch, dtype=kiln.float64)
    if isinstance(elem, bool):
        return kiln.tensor(batch)
    if isinstance(elem, int):
        return kiln.tensor(batch, dtype=kiln.int64)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        try:
            if isinstance(elem, collections.abc.MutableMapping):
                clone = elem.copy()
                clone.update({key: default_collate([d[key] for d in batch]) for key in elem})
                return clone
            return type(elem)({key: default_collate([d[key] for d in batch]) for key in elem})
        except TypeError:
            return {key: default_collate([d[key] for d in batch]) for key in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return type(elem)(*(default_collate(samples) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        it = iter(batch)
        elem_size = len(next(it))
        if not all(len(e) == elem_size for e in it):
            raise RuntimeError("each element in list of batch should be of equal size")
        transposed = list(zip(*batch))
        if isinstance(elem, tuple):
            return [default_collate(samples) for samples in transposed]
        try:
            return type(elem)([default_collate(samples) for samples in transposed])
        except TypeError:
            return [default_collate(samples) for samples in transposed]
    if isinstance(elem, numbers.Number):
        return kiln.tensor(batch)
    raise TypeError(_ERR.format(type(elem)))


def default_convert(data):
    """Without auto-batching: numpy arrays become tensors, containers are converted element-wise."""
    if isinstance(data, Tensor):
        return data
    if _is_ndarray(data):
        return kiln.as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        try:
            return type(data)({key: default_convert(data[key]) for key in data})
        except TypeError:
            return {key: default_convert(data[key]) for key in data}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            return type(data)([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data
