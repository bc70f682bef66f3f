"""The embedding, margin and likelihood losses of torch.nn.functional, composed from kiln ops
(kiln.nn.functional re-exports them; split out because functional.py is long):
cosine_embedding_loss, hinge_embedding_loss, soft_margin_loss, poisson_nll_loss, gaussian_nll_loss,
multilabel_soft_margin_loss, multi_margin_loss, multilabel_margin_loss and triplet_margin_loss
(triplet_margin_with_distance_loss, which calls user code, is in _triplet_distance.py).

Where PyTorch composes in Python (gaussian_nll_loss, multilabel_soft_margin_loss) this is its code. The others are one aten op each; here each is
that op's formula (aten/native/Loss*.cpp) over kiln ops, with its checks and messages, and autograd
differentiates the composition (equal to aten's hand-written backward: the hinge terms get no
gradient where they are exactly 0). Those aten ops run in float32 under autocast, as PyTorch's CPU
policy lists them.

The two class-indexed margin losses gather the target class's score (multi_margin) or every
listed target's score (multilabel_margin) and compare it with all classes at once:
  multi_margin:     loss[n] = sum_{d != y} max(0, margin - x[y] + x[d])^p * w[y] / C
  multilabel_margin: loss[n] = sum_{j < first -1} sum_{d not a target} max(0, 1 - x[y_j] + x[d]) / C
the second as a (targets x classes) table per sample, the same O(C^2) work as aten's loop. Target
ranges are checked on real tensors only (the check reads data; traced code skips it).
"""

import math

import kiln
from kiln._composites import _broadcast_shape, _is_fake, _type_name
from kiln.amp.autocast_mode import float32_under_autocast as _float32_under_autocast
from kiln.nn.functional import (
    _apply_loss_reduction, _legacy_reduction, _reduction_enum, _reduction_of, logsigmoid, pairwise_distance,
)

__all__ = [
    "cosine_embedding_loss", "hinge_embedding_loss", "soft_margin_loss", "poisson_nll_loss", "gaussian_nll_loss",
    "multilabel_soft_margin_loss", "multi_margin_loss", "multilabel_margin_loss", "triplet_margin_loss",
]

_COSINE_EPSILON = 1e-12  # aten's EPSILON in cosine_embedding_loss: keeps a zero vector's norm finite


def _enum_of(size_average, reduce, reduction):
    return _reduction_enum(_reduction_of(size_average, reduce, reduction))


def _check_cpu_float_kernel(kernel, input):
    """aten's CPU kernels of the margin losses and pdist exist for float32 and float64 only."""
    if input.dtype not in (kiln.float32, kiln.float64):
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{_type_name(input.dtype)}'")


def _check_not_differentiable(op, name, t):
    """aten's message for an argument its derivative formula leaves out (the composition here
    could differentiate it; PyTorch refuses, and so does kiln)."""
    if t.requires_grad and kiln.is_grad_enabled():
        raise RuntimeError(f"The function '{op}' is not differentiable with respect to argument '{name}'. This input "
                           "cannot have requires_grad True.")


def _check_long_target(target):
    if target.dtype != kiln.int64:
        raise RuntimeError(f"expected scalar type Long but found {_type_name(target.dtype)}")


@_float32_under_autocast
def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    reduction_enum = _enum_of(size_average, reduce, reduction)
    targ_dim = target.dim()
    if targ_dim not in (0, 1):
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if targ_dim == 1 and not (input1.dim() == 2 and input2.dim() == 2):
        raise RuntimeError(f"1D target tensor expects 2D input tensors, but found inputs with sizes "
                           f"{list(input1.shape)} and {list(input2.shape)}.")
    if targ_dim == 0 and not (input1.dim() == 1 and input2.dim() == 1):
        raise RuntimeError(f"0D target tensor expects 1D input tensors, but found inputs with sizes "
                           f"{list(input1.shape)} and {list(input2.shape)}.")
    prod_sum = (input1 * input2).sum(targ_dim)
    mag_square1 = (input1 * input1).sum(targ_dim) + _COSINE_EPSILON
    mag_square2 = (input2 * input2).sum(targ_dim) + _COSINE_EPSILON
    cos = prod_sum / (mag_square1 * mag_square2).sqrt()
    zeros = kiln.zeros_like(cos)
    pos = 1 - cos
    neg = (cos - margin).clamp_min(0)
    output = kiln.where(target == 1, pos, zeros) + kiln.where(target == -1, neg, zeros)
    return _apply_loss_reduction(output, reduction_enum)


@_float32_under_autocast
def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    reduction_enum = _enum_of(size_average, reduce, reduction)
    zeros = kiln.zeros_like(input)
    margin_clamp = (margin - input).clamp_min(0)
    output = kiln.where(target != 1, margin_clamp, zeros) + kiln.where(target != -1, input, zeros)
    return _apply_loss_reduction(output, reduction_enum)


@_float32_under_autocast
def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    reduction_enum = _enum_of(size_average, reduce, reduction)
    _check_not_differentiable("soft_margin_loss", "target", target)
    # aten computes log1p(exp(-input * target)) in place in a tensor shaped and typed as input
    shape = _broadcast_shape(tuple(input.shape), tuple(target.shape))
    if tuple(shape) != tuple(input.shape):
        raise RuntimeError(f"output with shape {list(input.shape)} doesn't match the broadcast shape {list(shape)}")
    z = input.neg() * target
    if z.dtype != input.dtype:
        z = z.to(input.dtype)
    return _apply_loss_reduction(kiln.log1p(kiln.exp(z)), reduction_enum)


@_float32_under_autocast
def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not a valid value for reduction")
    if log_input:
        loss = kiln.exp(input) - target * input
    else:
        loss = input - target * kiln.log(input + eps)
    if full:  # Stirling's approximation of log(target!), counted only where target > 1
        stirling_term = target * kiln.log(target) - target + 0.5 * kiln.log(2 * math.pi * target)
        loss = loss + stirling_term.masked_fill(target <= 1, 0)
    return _apply_loss_reduction(loss, _reduction_enum(reduction))


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    # var's entries must be non-negative (a data check, skipped on fake tensors)
    if isinstance(var, float):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = var * kiln.ones_like(input)
    elif not _is_fake(var) and bool(kiln.any(var < 0)):
        raise ValueError("var has negative entry/entries")
    if var.size() != input.size():
        if input.size()[:-1] == var.size():  # one variance per sample: broadcast over the last dim
            var = kiln.unsqueeze(var, -1)
        elif input.ndim == var.ndim and sum(y for x, y in zip(input.size(), var.size()) if x != y) == 1:
            pass  # a single size-1 dimension of var broadcasts
        else:
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    # clamped for stability outside autograd: the gradient is that of the unclamped var
    var = var.clone()
    with kiln.no_grad():
        var.clamp_(min=eps)
    loss = 0.5 * (kiln.log(var) + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    class_dim = input.dim() - 1
    loss = loss.sum(dim=class_dim) / input.size(class_dim)  # one value per sample
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(reduction + " is not valid")


def _check_margin_input(input):
    ndims = input.dim()
    if not ((ndims == 2 and input.size(1) != 0) or (ndims == 1 and input.size(0) != 0) or ndims == 0):
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                           f"{list(input.shape)}")
    nframe = input.size(0) if ndims == 2 else 1
    dim = input.size(ndims - 1) if ndims else 1
    return nframe, dim


@_float32_under_autocast
def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    reduction_enum = _enum_of(size_average, reduce, reduction)
    if p != 1 and p != 2:
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.dim() != 1:
        raise ValueError("weight must be one-dimensional")
    nframe, dim = _check_margin_input(input)
    if not (target.dim() <= 1 and target.numel() == nframe):
        raise RuntimeError(f"multi_margin_loss: target tensor should be 1-D with size equal to the number of input "
                           f"samples (batch size). Expected target size [{nframe}], but got {list(target.shape)}. "
                           f"Input has shape {list(input.shape)}.")
    if weight is not None and weight.numel() != dim:
        raise RuntimeError(f"inconsistent weight size, expected {dim} but got {list(weight.shape)}")
    _check_long_target(target)
    if weight is not None and weight.dtype != input.dtype:
        raise RuntimeError(f"expected scalar type {_type_name(input.dtype)} but found {_type_name(weight.dtype)}")
    if weight is not None:
        _check_not_differentiable("multi_margin_loss", "weight", weight)
    _check_cpu_float_kernel("multi_margin_loss_cpu_kernel", input)
    labels = target.reshape(nframe)
    if not _is_fake(labels) and nframe and bool(((labels < 0) | (labels >= dim)).any()):
        raise RuntimeError("target out of range")
    scores = input.reshape(nframe, dim)
    z = margin - scores.gather(1, labels.unsqueeze(1)) + scores  # (nframe, dim): the hinge of each class
    hinge = z if p == 1 else z * z
    if weight is not None:
        hinge = hinge * weight.gather(0, labels).unsqueeze(1)  # the target class's weight
    counted = (kiln.arange(dim) != labels.unsqueeze(1)) & (z > 0)
    loss = kiln.where(counted, hinge, 0.0).sum(1) / dim
    if reduction_enum == 0:  # one value per sample, 0-d for a 0-d target
        return loss if target.dim() > 0 else loss.reshape(())
    return _apply_loss_reduction(loss, reduction_enum)


@_float32_under_autocast
def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    reduction_enum = _enum_of(size_average, reduce, reduction)
    nframe, dim = _check_margin_input(input)
    if input.dim() <= 1:
        target_ok = target.dim() <= 1 and target.numel() == dim
    else:
        target_ok = target.dim() == 2 and tuple(target.shape) == (nframe, dim)
    if not target_ok:
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: {list(input.shape)}")
    _check_long_target(target)
    _check_cpu_float_kernel("multilabel_margin_loss_forward_out_frame", input)
    labels = target.reshape(nframe, dim)
    if not _is_fake(labels) and nframe and bool(((labels < -1) | (labels >= dim)).any()):
        raise RuntimeError("argument #2 'target' is out of range")
    scores = input.reshape(nframe, dim)
    listed = (labels < 0).cumsum(1) == 0  # (nframe, dim): the targets before the first -1
    safe_labels = labels.clamp_min(0)
    is_target = ((safe_labels.unsqueeze(2) == kiln.arange(dim)) & listed.unsqueeze(2)).any(1)  # (nframe, dim)
    # z[n, j, d] = 1 - x[n, y_j] + x[n, d]: target j's hinge against class d
    z = 1 - scores.gather(1, safe_labels).unsqueeze(2) + scores.unsqueeze(1)
    counted = listed.unsqueeze(2) & ~is_target.unsqueeze(1) & (z > 0)
    loss = kiln.where(counted, z, 0.0).sum((1, 2)) / dim
    if reduction_enum == 0:  # one value per sample, 0-d for a vector input
        return loss if target.dim() == 2 else loss.reshape(())
    return _apply_loss_reduction(loss, reduction_enum)


def _check_triplet_dims(anchor, positive, negative):
    a_dim, p_dim, n_dim = anchor.ndim, positive.ndim, negative.ndim
    if not (a_dim == p_dim and p_dim == n_dim):
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {a_dim}D, positive {p_dim}D, and negative {n_dim}D inputs")


@_float32_under_autocast
def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    reduction_enum = _enum_of(size_average, reduce, reduction)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    _check_triplet_dims(anchor, positive, negative)
    dist_pos = pairwise_distance(anchor, positive, p, eps)
    dist_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:  # the positive as anchor when it is closer to the negative (Balntas et al.)
        dist_neg = kiln.minimum(dist_neg, pairwise_distance(positive, negative, p, eps))
    output = kiln.clamp_min(margin + dist_pos - dist_neg, 0)
    return _apply_loss_reduction(output, reduction_enum)
