"""Helpers the op-table tests share (test_composite_ops.py, test_order_set_ops.py): inputs in several
memory layouts, and float64 gradients of one weighted sum of an op's outputs in kiln and torch."""

import numpy as np

import kiln
from conftest import to_kiln, to_torch


def layout(lib, data, name, kind):
    """`data` as a lib tensor of dtype `name`: contiguous (None), transposed strides ("T", same values)
    or every other element of a wider buffer ("S")."""
    conv = to_kiln if lib is kiln else to_torch
    if kind == "T":
        return conv(np.ascontiguousarray(np.swapaxes(data, -1, -2)), name).transpose(-1, -2)
    if kind == "S":
        return conv(np.repeat(data, 2, axis=-1), name)[..., ::2]
    return conv(data, name)


def flat(out):
    return [t for o in out for t in flat(o)] if isinstance(out, (tuple, list)) else [out]


def weighted_sum(lib, out):
    """Sum of every floating output times fixed weights (the same in both libraries)."""
    total = 0
    for o in flat(out):
        if o.dtype.is_floating_point and o.numel():
            w = lib.arange(o.numel(), dtype=o.dtype).reshape(o.shape).sin()
            total = total + (o * w).sum()
    return total


def grads(lib, fn, inputs):
    """(fn's outputs, the gradient of their weighted sum for each input: None where none flows)."""
    out = fn(lib, *inputs)
    loss = weighted_sum(lib, out)
    if not isinstance(loss, lib.Tensor) or not loss.requires_grad:
        return out, [None] * len(inputs)
    wanted = [t for t in inputs if t.requires_grad]
    found = iter(lib.autograd.grad(loss, wanted, allow_unused=True))
    return out, [next(found) if t.requires_grad else None for t in inputs]
