"""F.celu, F.selu, F.prelu and F.rrelu (with their in-place forms), composed from kiln ops
(kiln.nn.functional re-exports them; split out because functional.py is long).

Each is one aten op in PyTorch; here each is the aten op's formula over ops kiln has, with its
checks and messages, so autograd, fake tensors and kiln.compile see the component ops:
- celu and selu are aten's calls of elu with a scale and an input scale
  (celu: elu(x, alpha, 1, 1/alpha); selu: elu(x, ALPHA, SCALE, 1)), so values and gradients are
  elu's (at x = 0 the gradient is the negative branch's, as aten's elu_backward).
- prelu is aten's _prelu_kernel, where(x > 0, x, w * x), with the weight viewed along dim 1.
- rrelu in training multiplies each x <= 0 by a slope drawn uniformly from [lower, upper] with
  kiln's generator and each x > 0 by 1; that noise is the gradient, as rrelu_with_noise_backward's.
  In evaluation it is leaky_relu with the mean slope (lower + upper) / 2. The random stream is
  kiln's, so the slopes differ from PyTorch's for the same seed.
"""

import kiln
from kiln._composites import _type_name

__all__ = ["celu", "celu_", "selu", "selu_", "prelu", "rrelu", "rrelu_"]

# SELU's constants (Klambauer et al., 2017), as aten's selu
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def celu(input, alpha=1.0, inplace=False):
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    elu = kiln.elu_ if inplace else kiln.elu
    return elu(input, alpha, 1.0, 1.0 / alpha)


def celu_(input, alpha=1.0):
    return celu(input, alpha, inplace=True)


def selu(input, inplace=False):
    elu = kiln.elu_ if inplace else kiln.elu
    return elu(input, _SELU_ALPHA, _SELU_SCALE, 1.0)


def selu_(input):
    return selu(input, inplace=True)


def prelu(input, weight):
    if input.dtype != weight.dtype:
        raise RuntimeError(f"prelu: Type promoting not supported. Got {_type_name(input.dtype)} and "
                           f"{_type_name(weight.dtype)}")
    if weight.numel() != 1:
        if input.dim() == 0:
            raise RuntimeError("Not allow zero-dim input tensor.")
        channel_size = input.size(1) if input.dim() > 1 else 1
        if channel_size != weight.numel():
            raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = "
                               f"{weight.numel()} and channel size = {channel_size}.")
    if weight.dim() > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {weight.dim()}")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"prelu_cpu\" not implemented for '{_type_name(input.dtype)}'")
    if input.dim() != weight.dim():  # one slope per channel (dim 1), broadcast over the rest
        shape = [1] * input.dim()
        if input.dim() > 1:
            shape[1] = weight.numel()
        weight = weight.reshape(shape)
    return kiln.where(input > 0, input, weight * input)


def _rrelu_noise(input, lower, upper, generator=None):
    """The per-element multiplier of training-mode rrelu: U(lower, upper) where x <= 0, else 1."""
    if input.dtype not in (kiln.float32, kiln.float64, kiln.bfloat16):
        raise NotImplementedError(f"\"rrelu_with_noise_out_cpu\" not implemented for '{_type_name(input.dtype)}'")
    with kiln.no_grad():
        slopes = kiln.empty_like(input).uniform_(lower, upper, generator=generator)
        return kiln.where(input <= 0, slopes, kiln.ones_like(input))


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    return _rrelu(input, lower, upper, training, inplace)


def _rrelu(input, lower, upper, training, inplace, generator=None):
    """rrelu with the generator of torch.rrelu's signature (F.rrelu has none)."""
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    if not training:
        slope = (lower + upper) / 2
        return kiln.leaky_relu_(input, slope) if inplace else kiln.leaky_relu(input, slope)
    noise = _rrelu_noise(input, lower, upper, generator)
    return input.mul_(noise) if inplace else input * noise


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, inplace=True)
