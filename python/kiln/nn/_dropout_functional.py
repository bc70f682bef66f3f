"""Channel-wise and alpha dropout for kiln.nn.functional: dropout1d/2d/3d, alpha_dropout and
feature_alpha_dropout, composed as PyTorch's aten composes them (Dropout.cpp's _dropout_impl).

Plain dropout draws one Bernoulli(1-p) keep-mask element per input element and scales kept values by
1/(1-p). Feature ("channel-wise") dropout draws one element per (batch, channel) and broadcasts it
over the spatial dimensions, so a channel is either all zero or all scaled. Alpha dropout keeps
SELU's mean and variance: dropped values become -alpha' (SELU's negative saturation) and the result
is a*x + b with a = 1/sqrt((alpha^2 p + 1)(1-p)), b = alpha*a*p on kept elements, alpha*a*(p-1)
on dropped ones. The masks come from kiln's Bernoulli sampler, so the random stream differs from
PyTorch's for the same seed; everything else (which elements share a draw, the arithmetic, the
p = 0/1 and eval shortcuts, returning the input itself) is PyTorch's.
"""

import warnings

import kiln

__all__ = ["dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"]

_SELU_ALPHA = 1.7580993408473766  # -SELU's lower limit: scale * alpha of SELU


def _check_p(p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _keep_mask(shape, keep_prob, like):
    """1 (keep) with probability keep_prob, else 0, in `like`'s dtype (aten's noise.bernoulli_(1-p));
    one function so that tests can fix the mask."""
    return kiln.empty(shape, dtype=like.dtype, device=like.device).bernoulli_(keep_prob)


def _dropout_impl(input, p, train, inplace, feature, alpha):
    """aten's _dropout_impl<feature_dropout, alpha_dropout, inplace>."""
    if p == 0 or not train or input.numel() == 0:
        return input
    if p == 1:
        zero = kiln.zeros((), dtype=input.dtype, device=input.device)
        return input.mul_(zero) if inplace else input * zero
    if feature:
        if input.dim() < 2:
            raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
        noise_shape = tuple(input.shape[:2]) + (1,) * (input.dim() - 2)
    else:
        noise_shape = tuple(input.shape)
    noise = _keep_mask(noise_shape, 1 - p, input)
    if alpha:
        a = 1.0 / ((_SELU_ALPHA * _SELU_ALPHA * p + 1) * (1 - p)) ** 0.5
        b = (noise - 1) * (_SELU_ALPHA * a) + _SELU_ALPHA * a * p
        noise = noise * a
        return input.mul_(noise).add_(b) if inplace else input * noise + b
    noise = noise / (1 - p)
    return input.mul_(noise) if inplace else input * noise


def _channel_dropout(input, p, training, inplace, batched):
    """feature dropout of `input`, lifted to a batch of one when it has none."""
    if not batched:
        input = input.unsqueeze_(0) if inplace else input.unsqueeze(0)
    result = _dropout_impl(input, p, training, inplace, feature=True, alpha=False)
    if not batched:
        result = result.squeeze_(0) if inplace else result.squeeze(0)
    return result


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of (N, C, L) or (C, L) with probability p, scaling the rest by 1/(1-p)."""
    _check_p(p)
    inp_dim = input.dim()
    if inp_dim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {inp_dim}D input. Note that dropout1d "
                           "exists to provide channel-wise dropout on inputs with 1 spatial dimension, a channel "
                           "dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    return _channel_dropout(input, p, training, inplace, batched=inp_dim == 3)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of (N, C, H, W) with probability p. A 3-D input is read as (N, C, L), as
    PyTorch still does (with its warning), not as an unbatched (C, H, W)."""
    _check_p(p)
    inp_dim = input.dim()
    if inp_dim not in (3, 4):
        warnings.warn(f"dropout2d: Received a {inp_dim}-D input to dropout2d, which is deprecated and will result in "
                      "an error in a future release. To retain the behavior and silence this warning, please use "
                      "dropout instead. Note that dropout2d exists to provide channel-wise dropout on inputs with 2 "
                      "spatial dimensions, a channel dimension, and an optional batch dimension (i.e. 3D or 4D "
                      "inputs).", stacklevel=2)
    if inp_dim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout behavior "
                      "is desired - input is interpreted as shape (N, C, L), where C is the channel dim. This behavior "
                      "will change in a future release to interpret the input as one without a batch dimension, "
                      "i.e. shape (C, H, W). To maintain the 1D channel-wise dropout behavior, please switch to using "
                      "dropout1d instead.", stacklevel=2)
    return _dropout_impl(input, p, training, inplace, feature=True, alpha=False)


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of (N, C, D, H, W) or (C, D, H, W) with probability p."""
    _check_p(p)
    inp_dim = input.dim()
    if inp_dim not in (4, 5):
        warnings.warn(f"dropout3d: Received a {inp_dim}-D input to dropout3d, which is deprecated and will result in "
                      "an error in a future release. To retain the behavior and silence this warning, please use "
                      "dropout instead. Note that dropout3d exists to provide channel-wise dropout on inputs with 3 "
                      "spatial dimensions, a channel dimension, and an optional batch dimension (i.e. 4D or 5D "
                      "inputs).", stacklevel=2)
    return _channel_dropout(input, p, training, inplace, batched=inp_dim == 5)


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout for SELU networks: keeps zero mean and unit variance (note training defaults to False)."""
    _check_p(p)
    return _dropout_impl(input, p, training, inplace, feature=False, alpha=True)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Alpha dropout with one draw per (batch, channel)."""
    _check_p(p)
    return _dropout_impl(input, p, training, inplace, feature=True, alpha=True)
