"""LayerNorm, RMSNorm and GroupNorm (affine parameters initialised to ones/zeros), and the local
response normalizations LocalResponseNorm and CrossMapLRN2d (no parameters)."""

import numbers

import kiln
from kiln.nn import functional as F, init
from kiln.nn.modules.module import Module
from kiln.nn.parameter import Parameter



def _register_affine(module, shape, affine, bias, factory_kwargs):
    """weight (and bias, unless bias=False) of `shape` when affine; else both registered as None."""
    module.register_parameter("weight", Parameter(kiln.empty(shape, **factory_kwargs)) if affine else None)
    module.register_parameter("bias", Parameter(kiln.empty(shape, **factory_kwargs)) if affine and bias else None)


def _reset_affine(module):
    """PyTorch's initialisation of a normalization's affine parameters: weight 1, bias 0."""
    if module.weight is not None:
        init.ones_(module.weight)
    if module.bias is not None:
        init.zeros_(module.bias)

class LayerNorm(Module):
    __constants__ = ["normalized_shape", "eps", "elementwise_affine"]

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _register_affine(self, self.normalized_shape, elementwise_affine, bias, factory_kwargs)
        self.reset_parameters()

    def reset_parameters(self):
        _reset_affine(self)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return "{normalized_shape}, eps={eps}, elementwise_affine={elementwise_affine}, bias={use_bias}".format(
            **self.__dict__, use_bias=self.bias is not None)


class RMSNorm(Module):
    __constants__ = ["normalized_shape", "eps", "elementwise_affine"]

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if self.elementwise_affine:
            self.weight = Parameter(kiln.empty(self.normalized_shape, **factory_kwargs))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return "{normalized_shape}, eps={eps}, elementwise_affine={elementwise_affine}".format(**self.__dict__)


class GroupNorm(Module):
    __constants__ = ["num_groups", "num_channels", "eps", "affine"]

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None, *, bias=True):
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _register_affine(self, num_channels, affine, bias, factory_kwargs)
        self.reset_parameters()

    def reset_parameters(self):
        _reset_affine(self)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return "{num_groups}, {num_channels}, eps={eps}, affine={affine}, bias={use_bias}".format(
            **self.__dict__, use_bias=self.bias is not None)


class LocalResponseNorm(Module):
    __constants__ = ["size", "alpha", "beta", "k"]

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return "{size}, alpha={alpha}, beta={beta}, k={k}".format(**self.__dict__)


def _cross_map_lrn2d(input, size, alpha, beta, k):
    """PyTorch's legacy CrossMapLRN2d forward (torch/nn/modules/_functions.py), whose values differ
    from local_response_norm's: it keeps a running sum of squares over channels, adding channel
    c + pre_pad - 1 and dropping channel c - pre_pad only once c > pre_pad, so channel 0 is never
    dropped. Channel c therefore sums the squares of channels
    {0} U [c - pre_pad + 1, c + pre_pad - 1] (clipped), pre_pad = (size - 1) // 2 + 1: here the
    window as shifted slices of the zero-padded squares, plus channel 0's square for the channels
    whose window starts after it. The gradient is autograd's of this forward (PyTorch's
    hand-written backward is not that: it fails gradcheck)."""
    if input.dim() != 4:
        raise ValueError(f"CrossMapLRN2d: Expected input to be 4D, got {input.dim()}D instead.")
    channels = input.size(1)
    pre_pad = int((size - 1) / 2 + 1)
    reach = max(pre_pad - 1, 0)
    squares = input.pow(2)
    padded = kiln.constant_pad_nd(squares, [0, 0, 0, 0, reach, reach])
    summed = padded.narrow(1, 0, channels)
    for offset in range(1, 2 * reach + 1):
        summed = summed + padded.narrow(1, offset, channels)
    if channels > pre_pad:  # channel 0 stays in the windows that no longer reach it
        misses_first = (kiln.arange(channels) >= pre_pad).to(input.dtype).view(1, channels, 1, 1)
        summed = summed + squares.narrow(1, 0, 1) * misses_first
    scale = summed * (alpha / size) + k
    return scale.pow(-beta) * input


class CrossMapLRN2d(Module):
    def __init__(self, size, alpha=1e-4, beta=0.75, k=1):
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input):
        return _cross_map_lrn2d(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return "{size}, alpha={alpha}, beta={beta}, k={k}".format(**self.__dict__)
