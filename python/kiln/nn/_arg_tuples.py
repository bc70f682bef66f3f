"""Argument helpers shared by the layers and their functionals (torch.nn.modules.utils's): an int or
a sequence -> a tuple of n ints (`_single`, `_pair`, `_triple`), padding reordering, adaptive
pooling's output_size defaults. It imports nothing from kiln.nn, so kiln.nn.functional and
kiln.nn.modules can both use it (kiln.nn.modules.utils re-exports it at PyTorch's path)."""

import collections.abc


def _ntuple(n, name="parse"):
    def parse(x):
        if isinstance(x, collections.abc.Iterable):
            return tuple(x)
        return (x,) * n  # (not itertools.repeat: dynamo traces a tuple product, not a repeat object)

    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")
_quadruple = _ntuple(4, "_quadruple")


def _reverse_repeat_tuple(t, n):
    """(a, b) -> (b, b, a, a) for n=2: per-dimension padding in F.pad's last-dimension-first order."""
    return tuple(x for x in reversed(t) for _ in range(n))


def _list_with_default(out_size, defaults):
    """An adaptive pooling output_size with None entries filled from the input's trailing sizes."""
    if isinstance(out_size, int):
        return out_size
    if len(defaults) <= len(out_size):
        raise ValueError(f"Input dimension should be at least {len(out_size) + 1}")
    return [v if v is not None else d for v, d in zip(out_size, defaults[-len(out_size):])]
