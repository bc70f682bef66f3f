"""Helpers shared by the distributions, as torch.distributions.utils."""

from functools import update_wrapper
from numbers import Number

import kiln

_Number = (Number, kiln.Tensor)


def broadcast_all(*values):
    """Numbers become tensors (of the first tensor's dtype, else the default dtype); all are expanded
    to their common broadcast shape."""
    if not all(isinstance(v, (kiln.Tensor, Number)) for v in values):
        raise ValueError("Input arguments must all be instances of Number, kiln.Tensor or objects implementing "
                         "__torch_function__.")
    if not all(isinstance(v, kiln.Tensor) for v in values):
        dtype = next((v.dtype for v in values if isinstance(v, kiln.Tensor)), kiln.get_default_dtype())
        values = [v if isinstance(v, kiln.Tensor) else kiln.tensor(float(v), dtype=dtype) for v in values]
    return broadcast_tensors(*values)


def broadcast_tensors(*tensors):
    from kiln.nn.functional import _broadcast_shape

    shape = ()
    for t in tensors:
        shape = _broadcast_shape(shape, tuple(t.shape))
    return tuple(t.expand(shape) for t in tensors)


def clamp_probs(probs):
    eps = kiln.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def logits_to_probs(logits, is_binary=False):
    if is_binary:
        return kiln.sigmoid(logits)
    return kiln.softmax(logits, -1, None)


def probs_to_logits(probs, is_binary=False):
    ps_clamped = clamp_probs(probs)
    if is_binary:
        return kiln.log(ps_clamped) - kiln.log1p(-ps_clamped)
    return kiln.log(ps_clamped)


class lazy_property:
    """Computed on first access (with grad enabled), then stored on the instance."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        update_wrapper(self, wrapped)

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        with kiln.enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value
