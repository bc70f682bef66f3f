"""kiln.nn.functional (F): the functional forms of layers and losses, as torch.nn.functional.

Each function checks its arguments the way PyTorch's Python layer does and then calls one aten op
from the registry (kiln.linear, kiln.convolution, kiln.cross_entropy_loss, ...), so autograd and the
tracers see aten ops. Python compositions are used where PyTorch itself composes
(rms_norm, scaled_dot_product_attention, multi_head_attention_forward, weighted l1/mse/huber, normalize,
softmin, softsign, tanhshrink, gumbel_softmax, instance_norm), and, in the last section, for ops kiln has
no registry entry for (glu, logsigmoid, pixel_shuffle, cosine_similarity, pdist, bilinear, kl_div, ...).
Larger families live in their own files and are re-exported here: convolutions (_conv_functional.py,
3-D ones composed from 2-D), pooling (_pool_functional.py; 3-D pooling from two 2-D ones in
_pool3d_functional.py; lp_pool and max_unpool in _unpool_lp_functional.py), channel-wise and alpha dropout
(_dropout_functional.py), embedding_bag (_embedding_bag.py, with the max_norm renormalisation
F.embedding shares), interpolate (_interpolate.py), unfold, fold, affine_grid and grid_sample
(_spatial.py), celu/selu/prelu/rrelu (_activation_functional.py), the embedding, margin and
likelihood losses (_loss_functional.py) and triplet_margin_with_distance_loss (_triplet_distance.py).
"""

import math
import warnings

import kiln
from kiln._composites import _type_name
from kiln.amp.autocast_mode import float32_under_autocast as _float32_under_autocast
# Families kept in their own files, re-exported here as torch.nn.functional holds them.
from kiln.nn._activation_functional import celu, celu_, prelu, rrelu, rrelu_, selu, selu_  # noqa: F401
from kiln.nn._conv_functional import (  # noqa: F401
    conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d, conv_transpose3d,
)
from kiln.nn._dropout_functional import (  # noqa: F401
    alpha_dropout, dropout1d, dropout2d, dropout3d, feature_alpha_dropout,
)
from kiln.nn._embedding_bag import _embedding_renorm_, embedding_bag  # noqa: F401
from kiln.nn._interpolate import interpolate, upsample, upsample_bilinear, upsample_nearest  # noqa: F401
from kiln.nn._pool_functional import (  # noqa: F401
    adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_max_pool1d, adaptive_max_pool1d_with_indices,
    adaptive_max_pool2d, adaptive_max_pool2d_with_indices, avg_pool1d, avg_pool2d, max_pool1d,
    max_pool1d_with_indices, max_pool2d, max_pool2d_with_indices,
)
from kiln.nn._pool3d_functional import (  # noqa: F401
    adaptive_avg_pool3d, adaptive_max_pool3d, adaptive_max_pool3d_with_indices, avg_pool3d, max_pool3d,
    max_pool3d_with_indices,
)
from kiln.nn._unpool_lp_functional import (  # noqa: F401
    lp_pool1d, lp_pool2d, lp_pool3d, max_unpool1d, max_unpool2d, max_unpool3d,
)

__all__ = [
    "linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "relu",
    "relu_", "gelu", "silu", "sigmoid", "tanh", "softmax", "log_softmax", "leaky_relu",
    "relu6", "elu", "elu_", "hardtanh", "hardtanh_", "leaky_relu_", "threshold", "threshold_", "hardsigmoid",
    "hardswish", "mish", "softplus",
    "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout", "batch_norm",
    "instance_norm", "layer_norm", "rms_norm", "group_norm", "embedding", "embedding_bag", "max_pool1d",
    "max_pool2d", "max_pool1d_with_indices", "max_pool2d_with_indices", "avg_pool1d", "avg_pool2d",
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d", "adaptive_max_pool1d_with_indices",
    "adaptive_max_pool2d",
    "adaptive_max_pool2d_with_indices", "max_pool3d", "max_pool3d_with_indices", "avg_pool3d", "adaptive_avg_pool3d",
    "adaptive_max_pool3d", "adaptive_max_pool3d_with_indices", "lp_pool1d", "lp_pool2d", "lp_pool3d", "max_unpool1d",
    "max_unpool2d", "max_unpool3d", "interpolate", "upsample", "upsample_nearest",
    "upsample_bilinear", "pad", "one_hot", "scaled_dot_product_attention", "cross_entropy", "nll_loss",
    "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits",
    "multi_head_attention_forward",
    "glu", "logsigmoid", "softsign", "tanhshrink", "hardshrink", "softshrink", "softmin", "gumbel_softmax",
    "normalize", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "cosine_similarity", "pairwise_distance",
    "bilinear", "kl_div", "margin_ranking_loss",
    "unfold", "fold", "affine_grid", "grid_sample",
    "celu", "celu_", "selu", "selu_", "prelu", "rrelu", "rrelu_", "local_response_norm", "pdist",
    "cosine_embedding_loss", "gaussian_nll_loss", "hinge_embedding_loss", "multi_margin_loss",
    "multilabel_margin_loss", "multilabel_soft_margin_loss", "poisson_nll_loss", "soft_margin_loss",
    "triplet_margin_loss", "triplet_margin_with_distance_loss",
]

_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


def _reduction_enum(reduction):
    if reduction in ("elementwise_mean",):
        warnings.warn("reduction='elementwise_mean' is deprecated. Please use reduction='mean' instead.")
        return 1
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return _REDUCTIONS[reduction]


def _legacy_reduction(size_average, reduce, emit_warning=True):
    """PyTorch's deprecated size_average/reduce pair -> a reduction string."""
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    ret = "mean" if size_average and reduce else "sum" if reduce else "none"
    if emit_warning:
        warnings.warn(f"size_average and reduce args will be deprecated, please use reduction='{ret}' instead.")
    return ret


def _broadcast_shape(a, b):
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and x != 1 and y != 1:
            raise RuntimeError(f"The size of tensor a ({x}) must match the size of tensor b ({y}) at non-singleton "
                               f"dimension {max(len(a), len(b)) - i}")
        out.append(y if x == 1 else x)
    return tuple(reversed(out))


def _broadcast_pair(a, b):
    """input and target of a pointwise loss in their common shape (torch.broadcast_tensors), each
    in its own dtype: the loss op promotes them itself, so that its backward saves (and checks the
    version of) the tensors the user passed, and a float32 target of a float16 input gets a float32
    gradient, as in PyTorch."""
    shape = _broadcast_shape(tuple(a.shape), tuple(b.shape))
    return (a if tuple(a.shape) == shape else a.expand(shape)), (b if tuple(b.shape) == shape else b.expand(shape))


def _warn_size(input, target):
    if target.size() != input.size():
        warnings.warn(f"Using a target size ({target.size()}) that is different to the input size ({input.size()}). "
                      "This will likely lead to incorrect results due to broadcasting. "
                      "Please ensure they have the same size.", stacklevel=3)


# --- linear and convolution ---------------------------------------------------------------------
def linear(input, weight, bias=None):
    return kiln.linear(input, weight, bias)



# --- activations --------------------------------------------------------------------------------
def relu(input, inplace=False):
    return kiln.relu_(input) if inplace else kiln.relu(input)


def relu_(input):
    return kiln.relu_(input)


def gelu(input, approximate="none"):
    return kiln.gelu(input, approximate=approximate)


def silu(input, inplace=False):
    return kiln.silu_(input) if inplace else kiln.silu(input)


def sigmoid(input):
    return kiln.sigmoid(input)


def tanh(input):
    return kiln.tanh(input)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return kiln.leaky_relu_(input, negative_slope) if inplace else kiln.leaky_relu(input, negative_slope)


def leaky_relu_(input, negative_slope=0.01):
    return kiln.leaky_relu_(input, negative_slope)


def threshold(input, threshold, value, inplace=False):
    return kiln.threshold_(input, threshold, value) if inplace else kiln.threshold(input, threshold, value)


def threshold_(input, threshold, value):
    return kiln.threshold_(input, threshold, value)


def relu6(input, inplace=False):
    return kiln.relu6_(input) if inplace else kiln.relu6(input)


def elu(input, alpha=1.0, inplace=False):
    return kiln.elu_(input, alpha) if inplace else kiln.elu(input, alpha)


def elu_(input, alpha=1.0):
    return kiln.elu_(input, alpha)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    return kiln.hardtanh_(input, min_val, max_val) if inplace else kiln.hardtanh(input, min_val, max_val)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    return kiln.hardtanh_(input, min_val, max_val)


def hardsigmoid(input, inplace=False):
    return kiln.hardsigmoid_(input) if inplace else kiln.hardsigmoid(input)


def hardswish(input, inplace=False):
    return kiln.hardswish_(input) if inplace else kiln.hardswish(input)


def mish(input, inplace=False):
    return kiln.mish_(input) if inplace else kiln.mish(input)


def softplus(input, beta=1.0, threshold=20.0):
    return kiln.softplus(input, beta, threshold)


def _get_softmax_dim(name, ndim, stacklevel):
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X "
                  "as an argument.", stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _get_softmax_dim("softmax", input.dim(), _stacklevel)
    return kiln.softmax(input, dim, dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _get_softmax_dim("log_softmax", input.dim(), _stacklevel)
    return kiln.log_softmax(input, dim, dtype)


def dropout(input, p=0.5, training=True, inplace=False):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    return kiln.dropout_(input, p, training) if inplace else kiln.dropout(input, p, training)


# --- normalization ------------------------------------------------------------------------------
def _verify_batch_size(size):
    size_prods = size[0]
    for i in range(len(size) - 2):
        size_prods *= size[i + 2]
    if size_prods == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size {size}")


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    if training:
        _verify_batch_size(input.size())
    return kiln.batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, False)


def _verify_spatial_size(size):
    size_prods = 1
    for i in range(2, len(size)):
        size_prods *= size[i]
    if size_prods == 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size {size}")


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    """Normalizes each (sample, channel) plane by its own statistics. Composed as aten's
    instance_norm: one batch_norm over the input viewed as (1, N*C, *spatial) with weight, bias and
    running statistics repeated N times; the running statistics then take the mean over the batch."""
    if use_input_stats:
        _verify_spatial_size(input.size())
    if not use_input_stats and (running_mean is None or running_var is None):
        raise RuntimeError("Expected running_mean and running_var to be defined when use_input_stats is false")
    b, c = input.shape[0], input.shape[1]
    repeated = [t.repeat(b) if t is not None else None for t in (weight, bias, running_mean, running_var)]
    weight_, bias_, running_mean_, running_var_ = repeated
    out = kiln.batch_norm(input.contiguous().view(1, b * c, *input.shape[2:]), weight_, bias_, running_mean_,
                          running_var_, use_input_stats, momentum, eps, False)
    with kiln.no_grad():  # aten writes through an alias of the (const) running buffers
        if running_mean is not None:
            running_mean.copy_(running_mean_.view(b, c).mean(0))
        if running_var is not None:
            running_var.copy_(running_var_.view(b, c).mean(0))
    return out.view(input.shape)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    return kiln.layer_norm(input, list(normalized_shape), weight, bias, eps)


_FINFO_EPS = {"float32": 1.1920928955078125e-07, "float64": 2.220446049250313e-16}


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x^2 over the normalized dims) + eps) * weight, computed in float32 for half
    types (PyTorch's composite). eps=None is the machine epsilon of that computation type."""
    normalized_shape = tuple(normalized_shape) if isinstance(normalized_shape, (list, tuple)) else (normalized_shape,)
    n = len(normalized_shape)
    if tuple(input.shape[input.dim() - n:]) != normalized_shape or input.dim() < n:
        raise RuntimeError(f"Given normalized_shape={list(normalized_shape)}, expected input with shape "
                           f"[*, {', '.join(str(s) for s in normalized_shape)}], but got input of size"
                           f"{list(input.shape)}")
    if weight is not None and tuple(weight.shape) != normalized_shape:
        raise RuntimeError(f"Expected weight to be of same shape as normalized_shape, but got weight of shape "
                           f"{list(weight.shape)} and normalized_shape = {list(normalized_shape)}")
    compute = kiln.float32 if input.dtype in (kiln.float16, kiln.bfloat16) else input.dtype
    if eps is None:
        eps = _FINFO_EPS.get(str(compute).split(".")[1], _FINFO_EPS["float32"])
    x = input.to(compute)
    dims = list(range(input.dim() - n, input.dim()))
    out = x * kiln.rsqrt(x.pow(2).mean(dims, keepdim=True) + eps)
    out = out.type_as(input)
    if weight is not None:
        out = out * weight
    return out


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """input / (k + alpha * mean of the squares over `size` neighbouring channels)^beta, as PyTorch's
    composite: the squares, zero-padded along channels, averaged by an avg_pool over (size, 1) on
    the input viewed as (N, 1, C, rest) (PyTorch's avg_pool3d over (size, 1, 1) reads the same
    windows when the dims after the channels are flattened into one)."""
    dim = input.dim()
    if dim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality                          input (got {dim} dimensions)")
    if input.numel() == 0:
        return input
    sizes = input.size()
    div = input.mul(input).reshape(sizes[0], 1, sizes[1], -1)
    div = pad(div, (0, 0, size // 2, (size - 1) // 2))
    div = kiln.avg_pool2d(div, [size, 1], [1], 0, False, True, None).squeeze(1).view(sizes)
    div = div.mul(alpha).add(k).pow(beta)
    return input / div


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    if input.dim() < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.dim()}")
    _verify_batch_size([input.size(0) * input.size(1) // num_groups, num_groups] + list(input.size()[2:]))
    return kiln.group_norm(input, num_groups, weight, bias, eps)


# --- embedding, pooling, padding ----------------------------------------------------------------
def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False):
    if padding_idx is not None:
        if padding_idx > 0:
            assert padding_idx < weight.size(0), "Padding_idx must be within num_embeddings"
        elif padding_idx < 0:
            assert padding_idx >= -weight.size(0), "Padding_idx must be within num_embeddings"
            padding_idx = weight.size(0) + padding_idx
    else:
        padding_idx = -1
    if max_norm is not None:
        _embedding_renorm_(weight, input, max_norm, norm_type)
    if sparse:
        raise NotImplementedError("kiln: sparse embedding gradients are not supported")
    return kiln.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)


def pad(input, pad, mode="constant", value=None):
    return kiln.pad(input, list(pad), mode, value)


def one_hot(tensor, num_classes=-1):
    return kiln.one_hot(tensor, num_classes)


# --- attention ----------------------------------------------------------------------------------
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """softmax(q @ k^T * scale + mask) @ v (PyTorch's math reference). A bool attn_mask keeps the
    positions that are True; a float one is added to the scores."""
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise RuntimeError("scaled_dot_product_attention: query, key and value must have at least 2 dimensions")
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
    if _fused_attention_applies(query, key, value, attn_mask, dropout_p, enable_gqa):
        if attn_mask is not None and attn_mask.dtype == kiln.bool:  # -inf where False (PyTorch's conversion)
            attn_mask = kiln.zeros_like(attn_mask, dtype=query.dtype).masked_fill(attn_mask.logical_not(),
                                                                                 float("-inf"))
        return kiln.ops.aten._scaled_dot_product_flash_attention_for_cpu(query, key, value, dropout_p, is_causal,
                                                                         attn_mask=attn_mask, scale=scale)[0]
    from kiln.backends import cuda as cuda_backend

    if not cuda_backend.math_sdp_enabled():
        raise RuntimeError("No available kernel.  Aborting execution.")
    L, S = query.size(-2), key.size(-2)
    scale_factor = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    if enable_gqa and query.dim() >= 3 and key.size(-3) != query.size(-3):
        rep = query.size(-3) // key.size(-3)

        def repeat_heads(t):
            shape = list(t.shape)
            t = t.unsqueeze(-3).expand(shape[:-2] + [rep] + shape[-2:])
            return t.reshape(shape[:-3] + [shape[-3] * rep] + shape[-2:])

        key, value = repeat_heads(key), repeat_heads(value)
    scores = kiln.matmul(query, key.transpose(-2, -1)) * scale_factor
    if is_causal:
        causal = kiln.ones(L, S, dtype=kiln.bool, device=query.device).tril(0)
        scores = scores.masked_fill(causal.logical_not(), float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == kiln.bool:
            scores = scores.masked_fill(attn_mask.logical_not(), float("-inf"))
        else:
            scores = scores + attn_mask
    attn = kiln.softmax(scores, -1)
    if is_causal or attn_mask is not None:  # PyTorch's _safe_softmax: a fully masked row gives zeros, not NaN
        fully_masked = (scores == float("-inf")).all(-1, keepdim=True)
        attn = kiln.where(fully_masked, kiln.zeros_like(attn), attn)
    if dropout_p > 0.0:
        attn = kiln.dropout(attn, dropout_p, True)
    return kiln.matmul(attn, value)


_FUSED_ATTENTION_DTYPES = (kiln.float32, kiln.float64, kiln.bfloat16, kiln.float16)


def _fused_attention_applies(query, key, value, attn_mask, dropout_p, enable_gqa):
    """Whether scaled_dot_product_attention runs the fused CPU kernel (Note [Flash attention on
    the CPU], tensor/ops/attention.cc) rather than the math composition: PyTorch's CPU choice
    (use_flash_attention_cpp), which the flash switch of kiln.backends.cuda / sdpa_kernel turns off
    as it does PyTorch's. Anything else (dropout, other ranks, empty sequences, a mask that needs
    its gradient) takes the math path."""
    from kiln.backends import cuda as cuda_backend

    if not cuda_backend.flash_sdp_enabled() or dropout_p > 0.0:
        return False
    tensors = (query, key, value)
    if any(t.dim() != 4 or t.device.type != "cpu" or t.dtype != query.dtype or t.stride(-1) != 1 for t in tensors):
        return False
    if query.dtype not in _FUSED_ATTENTION_DTYPES:
        return False
    (B, H, L, E), (Bk, Hk, S, Ek), (Bv, Hv, Sv, Ev) = query.shape, key.shape, value.shape
    if not (E == Ek == Ev and B == Bk == Bv and Hk == Hv and S == Sv) or L == 0 or S == 0:
        return False
    if H != Hk and not (enable_gqa and Hk > 0 and H % Hk == 0):
        return False
    if attn_mask is not None:
        if attn_mask.requires_grad or attn_mask.dim() not in (2, 4) or attn_mask.dtype not in (kiln.bool, query.dtype):
            return False
        want = (L, S) if attn_mask.dim() == 2 else (B, H, L, S)
        if any(m != 1 and m != w for m, w in zip(attn_mask.shape, want)):
            return False  # the math path's broadcasting error
    return True


def _canonical_mask(mask, mask_name, other_type, other_name, target_type, check_other=True):
    """A bool mask -> a float mask (-inf where True); a float mask stays (PyTorch's helper)."""
    if mask is None:
        return None
    if mask.dtype != kiln.bool and not mask.dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    if check_other and other_type is not None and mask.dtype != other_type:
        warnings.warn(f"Support for mismatched {mask_name} and {other_name} is deprecated. Use same type for both "
                      "instead.")
    if mask.dtype == kiln.bool:
        mask = kiln.zeros_like(mask, dtype=target_type).masked_fill(mask, float("-inf"))
    return mask


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
                                 is_causal=False):
    """PyTorch's multi-head attention over (L, N, E) inputs (or unbatched (L, E))."""
    is_batched = query.dim() == 3
    if not is_batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError(f"key's sequence and batch dims {tuple(key.shape[:2])} do not match value's "
                                 f"{tuple(value.shape[:2])}")
    elif key.shape != value.shape:
        raise AssertionError(f"key shape {key.shape} does not match value shape {value.shape}")
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask",
                                       None if attn_mask is None else attn_mask.dtype, "attn_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
                           "method `generate_square_subsequent_mask` to create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype, check_other=False)
        if key_padding_mask is not None:
            is_causal = False

    # input projections
    if not use_separate_proj_weight:
        if query is key and key is value:
            q, k, v = linear(query, in_proj_weight, in_proj_bias).chunk(3, -1)
        else:
            w_q, w_k, w_v = in_proj_weight.chunk(3)
            b_q, b_k, b_v = (None, None, None) if in_proj_bias is None else in_proj_bias.chunk(3)
            q, k, v = linear(query, w_q, b_q), linear(key, w_k, b_k), linear(value, w_v, b_v)
    else:
        b_q, b_k, b_v = (None, None, None) if in_proj_bias is None else in_proj_bias.chunk(3)
        q, k, v = linear(query, q_proj_weight, b_q), linear(key, k_proj_weight, b_k), linear(value, v_proj_weight, b_v)

    if attn_mask is not None:
        if attn_mask.dim() == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise RuntimeError(f"The shape of the 2D attn_mask is {attn_mask.shape}, but should be "
                                   f"{(tgt_len, src_len)}.")
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.dim() == 3:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
                raise RuntimeError(f"The shape of the 3D attn_mask is {attn_mask.shape}, but should be "
                                   f"{(bsz * num_heads, tgt_len, src_len)}.")
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")

    if bias_k is not None and bias_v is not None:
        k = kiln.cat([k, bias_k.repeat(1, bsz, 1)])
        v = kiln.cat([v, bias_v.repeat(1, bsz, 1)])
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))

    # (L, N, E) -> (N * H, L, head_dim)
    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = k.reshape(k.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    v = v.reshape(v.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    if add_zero_attn:
        k = kiln.cat([k, kiln.zeros((bsz * num_heads, 1, head_dim), dtype=k.dtype, device=k.device)], 1)
        v = kiln.cat([v, kiln.zeros((bsz * num_heads, 1, head_dim), dtype=v.dtype, device=v.device)], 1)
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    src_len = k.size(1)

    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise AssertionError(f"expecting key_padding_mask shape of {(bsz, src_len)}, but got "
                                 f"{key_padding_mask.shape}")
        key_padding_mask = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(bsz, num_heads, 1, src_len) \
            .reshape(bsz * num_heads, 1, src_len)
        attn_mask = key_padding_mask if attn_mask is None else attn_mask + key_padding_mask

    if not training:
        dropout_p = 0.0

    if need_weights:
        q_scaled = q * math.sqrt(1.0 / float(head_dim))
        if attn_mask is not None:
            attn_output_weights = kiln.baddbmm(attn_mask, q_scaled, k.transpose(-2, -1))
        else:
            attn_output_weights = kiln.bmm(q_scaled, k.transpose(-2, -1))
        attn_output_weights = softmax(attn_output_weights, dim=-1)
        if dropout_p > 0.0:
            attn_output_weights = dropout(attn_output_weights, p=dropout_p)
        attn_output = kiln.bmm(attn_output_weights, v)
        attn_output = attn_output.transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
        attn_output = linear(attn_output, out_proj_weight, out_proj_bias)
        attn_output = attn_output.view(tgt_len, bsz, attn_output.size(1))
        attn_output_weights = attn_output_weights.view(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            attn_output_weights = attn_output_weights.mean(dim=1)
        if not is_batched:
            attn_output = attn_output.squeeze(1)
            attn_output_weights = attn_output_weights.squeeze(0)
        return attn_output, attn_output_weights
    if attn_mask is not None:
        if attn_mask.size(0) == 1 and attn_mask.dim() == 3:
            attn_mask = attn_mask.unsqueeze(0)
        else:
            attn_mask = attn_mask.view(bsz, num_heads, -1, src_len)
    q = q.view(bsz, num_heads, tgt_len, head_dim)
    k = k.view(bsz, num_heads, src_len, head_dim)
    v = v.view(bsz, num_heads, src_len, head_dim)
    attn_output = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    attn_output = attn_output.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
    attn_output = linear(attn_output, out_proj_weight, out_proj_bias)
    attn_output = attn_output.view(tgt_len, bsz, attn_output.size(1))
    if not is_batched:
        attn_output = attn_output.squeeze(1)
    return attn_output, None


# --- losses -------------------------------------------------------------------------------------
def _reduction_of(size_average, reduce, reduction):
    if size_average is not None or reduce is not None:
        return _legacy_reduction(size_average, reduce)
    return reduction


@_float32_under_autocast
def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    reduction = _reduction_enum(_reduction_of(size_average, reduce, reduction))
    return kiln.cross_entropy_loss(input, target, weight, reduction, ignore_index, label_smoothing)


@_float32_under_autocast
def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    reduction = _reduction_enum(_reduction_of(size_average, reduce, reduction))
    return kiln.nll_loss_nd(input, target, weight, reduction, ignore_index)


def _weighted_reduce(loss, weight, input, reduction, mean_over_weight):
    """PyTorch's weighted mse/l1/huber: 'mean' divides by the weights' sum (mse, l1) or counts
    elements (huber)."""
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError("Weights and input must have the same size.")
    loss = loss * weight
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.sum() / weight.sum() if mean_over_weight else loss.mean()
    raise ValueError(f"Invalid reduction mode: {reduction}. Expected one of 'none', 'mean', 'sum'.")


@_float32_under_autocast
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    _warn_size(input, target)
    reduction = _reduction_of(size_average, reduce, reduction)
    input, target = _broadcast_pair(input, target)
    if weight is not None:
        return _weighted_reduce((input - target).pow(2), weight, input, reduction, True)
    return kiln.mse_loss(input, target, _reduction_enum(reduction))


@_float32_under_autocast
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    _warn_size(input, target)
    reduction = _reduction_of(size_average, reduce, reduction)
    input, target = _broadcast_pair(input, target)
    if weight is not None:
        return _weighted_reduce((input - target).abs(), weight, input, reduction, True)
    return kiln.l1_loss(input, target, _reduction_enum(reduction))


@_float32_under_autocast
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    _warn_size(input, target)
    reduction = _reduction_of(size_average, reduce, reduction)
    input, target = _broadcast_pair(input, target)
    if beta == 0.0:
        return kiln.l1_loss(input, target, _reduction_enum(reduction))
    return kiln.smooth_l1_loss(input, target, _reduction_enum(reduction), beta)


@_float32_under_autocast
def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    _warn_size(input, target)
    input, target = _broadcast_pair(input, target)
    if weight is None:
        return kiln.huber_loss(input, target, _reduction_enum(reduction), delta)
    return _weighted_reduce(kiln.huber_loss(input, target, 0, delta), weight, input, reduction, False)


@_float32_under_autocast
def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    reduction = _reduction_enum(_reduction_of(size_average, reduce, reduction))
    if target.size() != input.size():
        raise ValueError(f"Using a target size ({target.size()}) that is different to the input size "
                         f"({input.size()}) is deprecated. Please ensure they have the same size.")
    if weight is not None:
        weight = weight.expand(_broadcast_shape(tuple(target.shape), tuple(weight.shape)))
    return kiln.binary_cross_entropy(input, target, weight, reduction)


@_float32_under_autocast
def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    reduction = _reduction_enum(_reduction_of(size_average, reduce, reduction))
    if target.size() != input.size():
        raise ValueError(f"Target size ({target.size()}) must be the same as input size ({input.size()})")
    return kiln.binary_cross_entropy_with_logits(input, target, weight, pos_weight, reduction)



# --- compositions of existing ops (issue 17) ----------------------------------------------------
# These have their own aten op in PyTorch (glu, log_sigmoid, pixel_shuffle, cosine_similarity,
# bilinear, kl_div, ...); kiln has no such registry entry, so each is written here from kiln ops
# with the aten op's checks, messages and formula, and autograd differentiates the composition.
def _apply_loss_reduction(loss, reduction_enum):
    if reduction_enum == 1:
        return loss.mean()
    if reduction_enum == 2:
        return loss.sum()
    return loss


def glu(input, dim=-1):
    if input.dim() == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    n = input.size(dim)
    if n % 2 != 0:
        raise RuntimeError(f"Halving dimension must be even, but dimension {dim % input.dim()} is size {n}")
    return input.narrow(dim, 0, n // 2) * kiln.sigmoid(input.narrow(dim, n // 2, n // 2))


def logsigmoid(input):
    """log(sigmoid(x)) = -softplus(-x): exact for large |x| in both directions."""
    return -kiln.softplus(-input, 1.0, 20.0)


def softsign(input):
    return input / (input.abs() + 1)


def tanhshrink(input):
    return input - input.tanh()


def hardshrink(input, lambd=0.5):
    return kiln.where((input >= -lambd) & (input <= lambd), 0.0, input)  # NaN passes through, as aten


def softshrink(input, lambd=0.5):
    if lambd < 0:
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be {lambd}.")
    return kiln.where(input > lambd, input - lambd, kiln.where(input < -lambd, input + lambd, input * 0))


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _get_softmax_dim("softmin", input.dim(), _stacklevel)
    return kiln.softmax(-input, dim, dtype)


def _gumbel_noise(logits):
    """Standard Gumbel samples shaped as logits: -log(E), E ~ Exponential(1) drawn as -log1p(-U)
    (torch draws E with Tensor.exponential_). Tests replace this function to fix the noise."""
    u = kiln.rand_like(logits)
    e = (-kiln.log1p(-u)).clamp_min(kiln.finfo(logits.dtype).tiny)
    return -e.log()


def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    gumbels = (logits + _gumbel_noise(logits)) / tau  # ~Gumbel(logits, tau)
    y_soft = gumbels.softmax(dim)
    if hard:  # straight-through: the value of the one-hot, the gradient of the soft sample
        index = y_soft.max(dim, keepdim=True)[1]
        y_hard = kiln.zeros_like(logits).scatter_(dim, index, 1.0)
        return y_hard - y_soft.detach() + y_soft
    return y_soft


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    denom = input.norm(p, dim, keepdim=True).clamp_min(eps).expand_as(input)
    if out is None:
        return input / denom
    return kiln.div(input, denom, out=out)


def pixel_shuffle(input, upscale_factor):
    if input.dim() < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.dim()} dimension(s)")
    if upscale_factor <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {upscale_factor}")
    r = upscale_factor
    *batch, c, h, w = input.shape
    if c % (r * r) != 0:
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square "
                           f"of upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    n = len(batch)
    x = input.reshape(*batch, c // (r * r), r, r, h, w)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)  # (*, C, H, r, W, r)
    return x.reshape(*batch, c // (r * r), h * r, w * r)


def pixel_unshuffle(input, downscale_factor):
    if input.dim() < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.dim()} dimension(s)")
    if downscale_factor <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {downscale_factor}")
    r = downscale_factor
    *batch, c, h, w = input.shape
    if h % r != 0:
        raise RuntimeError(f"pixel_unshuffle expects height to be divisible by downscale_factor, but "
                           f"input.size(-2)={h} is not divisible by {r}")
    if w % r != 0:
        raise RuntimeError(f"pixel_unshuffle expects width to be divisible by downscale_factor, but "
                           f"input.size(-1)={w} is not divisible by {r}")
    n = len(batch)
    x = input.reshape(*batch, c, h // r, r, w // r, r)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)  # (*, C, r, r, H, W)
    return x.reshape(*batch, c * r * r, h // r, w // r)


def channel_shuffle(input, groups):
    if input.dim() <= 2:
        raise RuntimeError(f"channel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.dim()} dimension(s)")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    b, c, *rest = input.shape
    if c % groups != 0:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups.")
    x = input.reshape(b, groups, c // groups, *rest).transpose(1, 2)
    return x.reshape(b, c, *rest)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """aten's formula: each input divided by its norm clamped to eps (the clamp outside autograd, so the
    gradient is that of the unclamped norm), then the product summed over dim."""
    common = kiln.result_type(x1, x2)
    if not common.is_floating_point:
        name = str(common).split(".")[-1]
        scalar_type = {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte"}
        raise RuntimeError(f"expected common dtype to be floating point, yet common dtype is "
                           f"{scalar_type.get(name, name.capitalize())}")
    x1 = x1 if x1.dtype.is_floating_point else x1.to(common)
    x2 = x2 if x2.dtype.is_floating_point else x2.to(common)
    shape = _broadcast_shape(tuple(x1.shape), tuple(x2.shape))
    x1, x2 = x1.expand(shape), x2.expand(shape)

    def clamped_norm(x):
        n = kiln.linalg_vector_norm(x, 2, [dim], True)
        return n + (n.clamp_min(eps) - n).detach()

    return ((x1 / clamped_norm(x1)) * (x2 / clamped_norm(x2))).sum(dim)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    innermost = max(x1.dim(), x2.dim()) - 1
    return kiln.norm(x1 - x2 + eps, p, [innermost], keepdim)


def pdist(input, p=2):
    """The p-norm distances between the rows of an (N, M) input, for every pair i < j in row-major
    order (N * (N - 1) / 2 values): the rows gathered by triu_indices, then one vector norm."""
    if input.dim() != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.dim()}D")
    if not input.dtype.is_floating_point:
        raise RuntimeError("pdist only supports floating-point dtypes")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    if input.dtype not in (kiln.float32, kiln.float64):
        raise NotImplementedError(f"\"pdist\" not implemented for '{_type_name(input.dtype)}'")
    rows, cols = kiln.triu_indices(input.size(0), input.size(0), 1)
    diff = input.index_select(0, rows) - input.index_select(0, cols)
    if input.size(1) == 0:  # rows of no components are at distance 0 under every p
        return diff.abs().sum(1)
    if p == 0:  # the count of nonzero components; aten's pdist backward gives it zero gradients (the norm
        # none): a where that never picks the sum passes zeros back to it, whatever its values
        count = kiln.linalg_vector_norm(diff, 0, [1])
        return count + kiln.where(kiln.zeros_like(count, dtype=kiln.bool), diff.sum(1), 0.0)
    if p != math.inf:
        return kiln.linalg_vector_norm(diff, p, [1])
    # aten's pdist backward gives each component tied for the maximum the whole gradient (the
    # norm's would share it among them): the max, plus the ties' zero deviations from it
    magnitude = diff.abs()
    largest = magnitude.amax(1, keepdim=True).detach()
    return (largest + ((magnitude - largest) * (magnitude == largest)).sum(1, keepdim=True)).squeeze(1)


def bilinear(input1, input2, weight, bias=None):
    """y = x1^T A x2 + b over the last dimension: x1 @ A (as in1 x out*in2), then a product with x2
    summed over in2."""
    if input1.dim() != input2.dim():
        raise RuntimeError(f"bilinear(): input dimensions do not match: got {input1.dim()} and {input2.dim()}")
    for i in range(input1.dim() - 1):
        if input1.shape[i] != input2.shape[i]:
            raise RuntimeError(f"bilinear(): input batch dimensions do not match: got {input1.shape[i]} and "
                               f"{input2.shape[i]}")
    out_features, in1, in2 = weight.shape
    if input1.shape[-1] != in1:
        raise RuntimeError(f"bilinear(): input1 size does not match weight size: got {input1.shape[-1]} but "
                           f"expected {in1}")
    if input2.shape[-1] != in2:
        raise RuntimeError(f"bilinear(): input2 size does not match weight size: got {input2.shape[-1]} but "
                           f"expected {in2}")
    if bias is not None and bias.shape[0] != out_features:
        raise RuntimeError(f"bilinear(): bias size does not match weight size: got {bias.shape[0]} but expected "
                           f"{out_features}")
    lead = tuple(input1.shape[:-1])
    x1 = input1.reshape(-1, in1)
    x2 = input2.reshape(-1, in2)
    t = x1.matmul(weight.permute(1, 0, 2).reshape(in1, out_features * in2)).reshape(-1, out_features, in2)
    y = (t * x2.unsqueeze(1)).sum(-1)
    if bias is not None:
        y = y + bias
    return y.reshape(*lead, out_features)


@_float32_under_autocast
def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    if size_average is not None or reduce is not None:
        reduction_enum = _reduction_enum(_legacy_reduction(size_average, reduce))
    else:
        if reduction == "mean":
            warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                          "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                          "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                          stacklevel=2)
        reduction_enum = _reduction_enum("sum" if reduction == "batchmean" else reduction)
    if log_target:
        loss = kiln.exp(target) * (target - input)
    else:
        loss = kiln.xlogy(target, target) - target * input
    reduced = _apply_loss_reduction(loss, reduction_enum)
    if reduction == "batchmean" and input.dim() != 0:
        reduced = reduced / input.size()[0]
    return reduced


@_float32_under_autocast
def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    reduction_enum = _reduction_enum(_reduction_of(size_average, reduce, reduction))
    if input1.dim() != input2.dim() or input1.dim() != target.dim():
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
                           f"input1: {input1.size()}, input2: {input2.size()}, target: {target.size()} ")
    return _apply_loss_reduction((-target * (input1 - input2) + margin).clamp_min(0), reduction_enum)


# --- im2col / col2im and grid sampling (issue 17), composed in kiln/nn/_spatial.py ---------------
from kiln.nn._spatial import affine_grid, fold, grid_sample, unfold  # noqa: E402,F401
# --- the embedding, margin and likelihood losses (issue 17), composed in kiln/nn/_loss_functional.py
# (imported last: they use this file's reductions, logsigmoid and pairwise_distance)
from kiln.nn._loss_functional import (  # noqa: E402,F401
    cosine_embedding_loss, gaussian_nll_loss, hinge_embedding_loss, multi_margin_loss, multilabel_margin_loss,
    multilabel_soft_margin_loss, poisson_nll_loss, soft_margin_loss, triplet_margin_loss,
)
from kiln.nn._triplet_distance import triplet_margin_with_distance_loss  # noqa: E402,F401
