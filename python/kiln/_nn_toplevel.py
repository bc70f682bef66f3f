"""The torch-level forms of nn.functional ops (issue 17): torch.celu, torch.conv1d, torch.max_pool1d,
torch.kl_div, torch.alpha_dropout, torch.grid_sampler, ... with aten's signatures, which differ from
torch.nn.functional's:

- activations take no `inplace` (the in-place forms are celu_, selu_, rrelu_); rrelu takes a generator;
- pooling takes stride=() for "the kernel size" and has no return_indices (max_pool1d_with_indices and
  adaptive_max_pool1d return the (values, indices) tuple);
- losses take `reduction` as aten's enum int (0 none, 1 mean, 2 sum; other values reduce nothing, as
  aten's apply_loss_reduction), no size_average/reduce, and kl_div's mean is the plain mean without
  F.kl_div's warning; poisson_nll_loss's arguments are all required. The schemas say reduction=Mean,
  but PyTorch 2.13's Python binding reads that default as 0: torch.kl_div(x, y) reduces nothing, and
  kiln's defaults are what PyTorch does (0);
- dropouts are (input, p, train), feature_dropout is the channel-wise one behind F.dropout2d;
- instance_norm puts weight and bias before the running statistics and takes cudnn_enabled;
- grid_sampler takes aten's int modes (0 bilinear/zeros, 1 nearest/border, 2 bicubic/reflection);
- embedding_bag takes weight first and mode as an int, and returns aten's four outputs.
Where the signatures agree (conv*, pixel_shuffle, cosine_similarity, bilinear, ...) torch's
top-level name is the functional itself, as in PyTorch. Every one runs nn.functional's composition,
so values, gradients and errors are those of the functional tests.
"""

from kiln.nn import functional as F
from kiln.nn._activation_functional import _rrelu
from kiln.nn._dropout_functional import _dropout_impl
from kiln.nn._embedding_bag import torch_embedding_bag as embedding_bag

__all__ = [
    "celu", "celu_", "selu", "selu_", "prelu", "rrelu", "rrelu_", "hardshrink", "conv1d", "conv3d",
    "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "avg_pool1d", "max_pool1d", "max_pool1d_with_indices",
    "max_pool3d", "adaptive_avg_pool1d", "adaptive_max_pool1d", "pdist", "pixel_shuffle", "pixel_unshuffle",
    "channel_shuffle", "native_channel_shuffle", "cosine_similarity", "pairwise_distance", "bilinear", "embedding_bag",
    "instance_norm", "rms_norm", "kl_div", "margin_ranking_loss", "hinge_embedding_loss", "cosine_embedding_loss",
    "poisson_nll_loss", "triplet_margin_loss", "alpha_dropout", "alpha_dropout_", "feature_alpha_dropout",
    "feature_alpha_dropout_", "feature_dropout", "feature_dropout_", "grid_sampler", "grid_sampler_2d",
    "grid_sampler_3d", "affine_grid_generator",
]

# The functionals whose signature is aten's already: torch's top-level name is the same function.
conv1d, conv3d = F.conv1d, F.conv3d
conv_transpose1d, conv_transpose2d, conv_transpose3d = F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d
adaptive_avg_pool1d, pdist, pixel_shuffle, pixel_unshuffle = F.adaptive_avg_pool1d, F.pdist, F.pixel_shuffle, F.pixel_unshuffle
cosine_similarity, pairwise_distance, bilinear, rms_norm = F.cosine_similarity, F.pairwise_distance, F.bilinear, F.rms_norm


# --- activations --------------------------------------------------------------------------------
def celu(input, alpha=1.0):
    return F.celu(input, alpha)


def celu_(input, alpha=1.0):
    return F.celu(input, alpha, inplace=True)


def selu(input):
    return F.selu(input)


def selu_(input):
    return F.selu(input, inplace=True)


def prelu(input, weight):
    return F.prelu(input, weight)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    return _rrelu(input, lower, upper, training, False, generator)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    return _rrelu(input, lower, upper, training, True, generator)


def hardshrink(input, lambd=0.5):
    return F.hardshrink(input, lambd)


def channel_shuffle(input, groups):
    return F.channel_shuffle(input, groups)


# native_channel_shuffle is aten's kernel behind channel_shuffle (same values on CPU)
native_channel_shuffle = channel_shuffle


# --- pooling: stride=() means the kernel size -------------------------------------------------------
def _stride_or_none(stride):
    return None if isinstance(stride, (tuple, list)) and len(stride) == 0 else stride


def avg_pool1d(input, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True):
    return F.avg_pool1d(input, kernel_size, _stride_or_none(stride), padding, ceil_mode, count_include_pad)


def max_pool1d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return F.max_pool1d(input, kernel_size, _stride_or_none(stride), padding, dilation, ceil_mode)


def max_pool1d_with_indices(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return tuple(F.max_pool1d_with_indices(input, kernel_size, _stride_or_none(stride), padding, dilation, ceil_mode))


def max_pool3d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return F.max_pool3d(input, kernel_size, _stride_or_none(stride), padding, dilation, ceil_mode)


def adaptive_max_pool1d(input, output_size):
    return tuple(F.adaptive_max_pool1d_with_indices(input, output_size))


# --- normalization -------------------------------------------------------------------------------
def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps, cudnn_enabled):
    return F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


# --- losses: aten's int reduction over the functional's unreduced loss ------------------------------------
def _reduce(loss, reduction):
    """aten's apply_loss_reduction: 1 mean, 2 sum, anything else the loss as it is."""
    return F._apply_loss_reduction(loss, reduction)


def kl_div(input, target, reduction=0, *, log_target=False):
    return _reduce(F.kl_div(input, target, reduction="none", log_target=log_target), reduction)


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=0):
    return _reduce(F.margin_ranking_loss(input1, input2, target, margin, reduction="none"), reduction)


def hinge_embedding_loss(input, target, margin=1.0, reduction=0):
    return _reduce(F.hinge_embedding_loss(input, target, margin, reduction="none"), reduction)


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=0):
    return _reduce(F.cosine_embedding_loss(input1, input2, target, margin, reduction="none"), reduction)


def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    return _reduce(F.poisson_nll_loss(input, target, log_input, full, eps=eps, reduction="none"), reduction)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6, swap=False, reduction=0):
    loss = F.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap, reduction="none")
    return _reduce(loss, reduction)


# --- dropout (input, p, train) -----------------------------------------------------------------------
def _dropout(input, p, train, inplace, feature, alpha):
    if p < 0.0 or p > 1.0:  # aten's check: a RuntimeError (F.dropout's is a ValueError)
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {p}")
    return _dropout_impl(input, p, train, inplace, feature=feature, alpha=alpha)


def alpha_dropout(input, p, train):
    return _dropout(input, p, train, False, feature=False, alpha=True)


def alpha_dropout_(input, p, train):
    return _dropout(input, p, train, True, feature=False, alpha=True)


def feature_alpha_dropout(input, p, train):
    return _dropout(input, p, train, False, feature=True, alpha=True)


def feature_alpha_dropout_(input, p, train):
    return _dropout(input, p, train, True, feature=True, alpha=True)


def feature_dropout(input, p, train):
    return _dropout(input, p, train, False, feature=True, alpha=False)


def feature_dropout_(input, p, train):
    return _dropout(input, p, train, True, feature=True, alpha=False)


# --- sampling grids ------------------------------------------------------------------------------
_INTERPOLATION_MODES = ("bilinear", "nearest", "bicubic")  # aten's GridSamplerInterpolation
_PADDING_MODES = ("zeros", "border", "reflection")  # aten's GridSamplerPadding


def _mode_name(names, value, what):
    if not isinstance(value, int) or not 0 <= value < len(names):
        raise RuntimeError(f"grid_sampler(): unknown {what} {value}")
    return names[value]


def grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):
    return F.grid_sample(input, grid, _mode_name(_INTERPOLATION_MODES, interpolation_mode, "interpolation mode"),
                         _mode_name(_PADDING_MODES, padding_mode, "padding mode"), align_corners)


def _grid_sampler_nd(rank, input, grid, interpolation_mode, padding_mode, align_corners):
    if input.dim() != rank or grid.dim() != rank:
        raise RuntimeError(f"grid_sampler(): expected {rank}D input and grid with same number of dimensions, but "
                           f"got input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
    return grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)


def grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners):
    return _grid_sampler_nd(4, input, grid, interpolation_mode, padding_mode, align_corners)


def grid_sampler_3d(input, grid, interpolation_mode, padding_mode, align_corners):
    return _grid_sampler_nd(5, input, grid, interpolation_mode, padding_mode, align_corners)


def affine_grid_generator(theta, size, align_corners):
    return F.affine_grid(theta, size, align_corners)


def install_methods(tensor_class):
    """The Tensor methods among these: Tensor.prelu and Tensor.hardshrink."""
    tensor_class.prelu = prelu
    tensor_class.hardshrink = hardshrink

