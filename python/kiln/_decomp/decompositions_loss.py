"""Decompositions of the losses (mse, l1, smooth_l1, huber, binary cross entropy, nll, cross
entropy) and their backward ops."""

import functools

from kiln._decomp import register_decomposition
from kiln._decomp.decompositions import numel, pw_opmath, reduce_loss, rsub_scalar, scalar, to_dtype
from kiln._ops import ops

aten = ops.aten



# --- losses ----------------------------------------------------------------------------------

def _mean_scale(x, reduction):
    return 1.0 / numel(x.shape) if reduction == 1 else 1.0


@register_decomposition(aten.mse_loss.default)
@pw_opmath
def mse_loss(self, target, reduction=1):
    d = aten.sub.Tensor(self, target)
    return reduce_loss(aten.mul.Tensor(d, d), reduction)


def _in_self_dtype(fn):
    """The backward of mse and smooth_l1 computes in its operands' common dtype and returns self's
    (PyTorch's zeros_like(self) written by a promoting TensorIterator)."""
    @functools.wraps(fn)
    def wrapper(grad_output, self, target, *args):
        return to_dtype(fn(grad_output, self, target, *args), self.dtype)
    return wrapper


@register_decomposition(aten.mse_loss_backward.default)
@_in_self_dtype
@pw_opmath
def mse_loss_backward(grad_output, self, target, reduction):
    scale = 2.0 * _mean_scale(self, reduction)
    return aten.mul.Tensor(aten.mul.Scalar(aten.sub.Tensor(self, target), scale), grad_output)


@register_decomposition(aten.l1_loss.default)
@pw_opmath
def l1_loss(self, target, reduction=1):
    return reduce_loss(aten.abs.default(aten.sub.Tensor(self, target)), reduction)


@register_decomposition(aten.smooth_l1_loss.default)
@pw_opmath
def smooth_l1_loss(self, target, reduction=1, beta=1.0):
    d = aten.abs.default(aten.sub.Tensor(self, target))
    if beta == 0:
        return reduce_loss(d, reduction)
    quad = aten.div.Scalar(aten.mul.Scalar(aten.mul.Tensor(d, d), 0.5), beta)
    return reduce_loss(aten.where.self(aten.lt.Scalar(d, beta), quad, aten.sub.Scalar(d, 0.5 * beta)), reduction)


@register_decomposition(aten.smooth_l1_loss_backward.default)
@_in_self_dtype
@pw_opmath
def smooth_l1_loss_backward(grad_output, self, target, reduction, beta):
    d = aten.sub.Tensor(self, target)
    slope = aten.sign.default(d)
    if beta != 0:
        slope = aten.where.self(aten.lt.Scalar(aten.abs.default(d), beta), aten.div.Scalar(d, beta), slope)
    return aten.mul.Tensor(aten.mul.Scalar(slope, _mean_scale(self, reduction)), grad_output)


@register_decomposition(aten.huber_loss.default)
@pw_opmath
def huber_loss(self, target, reduction=1, delta=1.0):
    d = aten.abs.default(aten.sub.Tensor(self, target))
    quad = aten.mul.Scalar(aten.mul.Tensor(d, d), 0.5)
    lin = aten.mul.Scalar(aten.sub.Scalar(d, 0.5 * delta), delta)
    return reduce_loss(aten.where.self(aten.lt.Scalar(d, delta), quad, lin), reduction)


@register_decomposition(aten.huber_loss_backward.default)
@pw_opmath
def huber_loss_backward(grad_output, self, target, reduction, delta):
    d = aten.sub.Tensor(self, target)
    slope = aten.clamp.default(d, -delta, delta)
    return aten.mul.Tensor(aten.mul.Scalar(slope, _mean_scale(self, reduction)), grad_output)


@register_decomposition(aten.binary_cross_entropy.default)
@pw_opmath
def binary_cross_entropy(self, target, weight=None, reduction=1):
    log_x = aten.clamp.default(aten.log.default(self), -100, None)
    log_1mx = aten.clamp.default(aten.log1p.default(aten.neg.default(self)), -100, None)
    y = to_dtype(target, self.dtype)
    loss = aten.neg.default(aten.add.Tensor(aten.mul.Tensor(y, log_x), aten.mul.Tensor(rsub_scalar(y, 1), log_1mx)))
    if weight is not None:
        loss = aten.mul.Tensor(loss, to_dtype(weight, self.dtype))
    return reduce_loss(loss, reduction)


@register_decomposition(aten.binary_cross_entropy_backward.default)
@pw_opmath
def binary_cross_entropy_backward(grad_output, self, target, weight=None, reduction=1):
    denom = aten.clamp.default(aten.mul.Tensor(rsub_scalar(self, 1), self), 1e-12, None)
    grad = aten.div.Tensor(aten.sub.Tensor(self, to_dtype(target, self.dtype)), denom)
    if weight is not None:
        grad = aten.mul.Tensor(grad, to_dtype(weight, self.dtype))
    return aten.mul.Tensor(aten.mul.Scalar(grad, _mean_scale(self, reduction)), grad_output)


@register_decomposition(aten.binary_cross_entropy_with_logits.default)
@pw_opmath
def binary_cross_entropy_with_logits(self, target, weight=None, pos_weight=None, reduction=1):
    x, y = self, to_dtype(target, self.dtype)
    # log_sigmoid(x) = min(x, 0) - log1p(exp(-|x|))
    log_sig = aten.sub.Tensor(aten.clamp.default(x, None, 0),
                              aten.log1p.default(aten.exp.default(aten.neg.default(aten.abs.default(x)))))
    loss = aten.mul.Tensor(rsub_scalar(y, 1), x)
    if pos_weight is not None:
        log_weight = aten.add.Scalar(aten.mul.Tensor(aten.sub.Scalar(to_dtype(pos_weight, x.dtype), 1), y), 1)
        loss = aten.sub.Tensor(loss, aten.mul.Tensor(log_weight, log_sig))
    else:
        loss = aten.sub.Tensor(loss, log_sig)
    if weight is not None:
        loss = aten.mul.Tensor(loss, to_dtype(weight, x.dtype))
    return reduce_loss(loss, reduction)


def _nll_weights(self, target, weight, ignore_index):
    """(safe target, per-element weight): ignored targets read class 0 with weight 0."""
    ignored = aten.eq.Scalar(target, ignore_index)
    safe = aten.where.self(ignored, scalar(0, target), target)
    if weight is None:
        w = aten.full.default(list(target.shape), 1, dtype=self.dtype, device=self.device)
    else:
        w = aten.view.default(aten.index_select.default(weight, 0, aten.reshape.default(safe, [-1])),
                              list(target.shape))
    return safe, aten.where.self(ignored, scalar(0, w), w)


def _nll_forward(self, target, weight, reduction, ignore_index):
    x, t = self, target
    if x.dim() == 1:
        x, t = aten.unsqueeze.default(x, 0), aten.unsqueeze.default(t, 0)
    safe, w = _nll_weights(x, t, weight, ignore_index)
    picked = aten.squeeze.dim(aten.gather.default(x, 1, aten.unsqueeze.default(safe, 1)), 1)
    # Ignored targets are masked out (not just weighted by 0): no gradient reaches them, even when
    # every target is ignored and the mean is 0 / 0.
    ignored = aten.eq.Scalar(t, ignore_index)
    loss = aten.where.self(ignored, scalar(0, picked), aten.neg.default(aten.mul.Tensor(picked, w)))
    if reduction == 0:  # total_weight: the target's weight for a single sample, else 0 (unused)
        if self.dim() == 1:
            return aten.squeeze.dim(loss, 0), aten.sum.dim_IntList(w, None)
        return loss, aten.full.default([], 0, dtype=self.dtype, device=self.device)
    total = aten.sum.dim_IntList(w, None)
    summed = aten.sum.dim_IntList(loss, None)
    return (aten.div.Tensor(summed, total) if reduction == 1 else summed), total


def _nll_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight):
    x, t, g = self, target, grad_output
    if x.dim() == 1:
        x, t = aten.unsqueeze.default(x, 0), aten.unsqueeze.default(t, 0)
        if reduction == 0:
            g = aten.unsqueeze.default(g, 0)
    safe, w = _nll_weights(x, t, weight, ignore_index)
    if reduction == 1:
        g = aten.div.Tensor(g, total_weight)
    src = aten.mul.Tensor(aten.neg.default(w), g)
    src = aten.where.self(aten.eq.Scalar(t, ignore_index), scalar(0, src), src)  # even if g is NaN
    zeros = aten.full.default(list(x.shape), 0, dtype=x.dtype, device=x.device)
    grad = aten.scatter.src(zeros, 1, aten.unsqueeze.default(safe, 1), aten.unsqueeze.default(src, 1))
    return aten.squeeze.dim(grad, 0) if self.dim() == 1 else grad


@register_decomposition(aten.nll_loss_forward.default)
def nll_loss_forward(self, target, weight, reduction, ignore_index):
    return _nll_forward(self, target, weight, reduction, ignore_index)


@register_decomposition(aten.nll_loss2d_forward.default)
def nll_loss2d_forward(self, target, weight, reduction, ignore_index):
    return _nll_forward(self, target, weight, reduction, ignore_index)


@register_decomposition(aten.nll_loss_backward.default)
def nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight):
    return _nll_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight)


@register_decomposition(aten.nll_loss2d_backward.default)
def nll_loss2d_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight):
    return _nll_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight)


@register_decomposition(aten.nll_loss.default)
def nll_loss(self, target, weight=None, reduction=1, ignore_index=-100):
    return aten.nll_loss_forward.default(self, target, weight, reduction, ignore_index)[0]


# The N-d losses gather directly (nll_loss2d_forward has no derivative in kiln; gather has).
@register_decomposition(aten.nll_loss2d.default)
def nll_loss2d(self, target, weight=None, reduction=1, ignore_index=-100):
    return _nll_forward(self, target, weight, reduction, ignore_index)[0]


@register_decomposition(aten.nll_loss_nd.default)
def nll_loss_nd(self, target, weight=None, reduction=1, ignore_index=-100):
    if self.dim() <= 2:
        return aten.nll_loss_forward.default(self, target, weight, reduction, ignore_index)[0]
    return _nll_forward(self, target, weight, reduction, ignore_index)[0]


@register_decomposition(aten.cross_entropy_loss.default)
def cross_entropy_loss(self, target, weight=None, reduction=1, ignore_index=-100, label_smoothing=0.0):
    class_dim = 0 if self.dim() == 1 else 1
    n_classes = self.shape[class_dim]
    lsm = aten._log_softmax.default(self, class_dim, False)
    w_shape = [n_classes] + [1] * (self.dim() - class_dim - 1)
    w_b = None if weight is None else aten.view.default(weight, w_shape)
    if target.dtype.is_floating_point:  # class probabilities
        t = target
        if label_smoothing > 0:
            t = aten.add.Scalar(aten.mul.Scalar(t, 1 - label_smoothing), label_smoothing / n_classes)
        prod = aten.mul.Tensor(lsm, t)
        if w_b is not None:
            prod = aten.mul.Tensor(prod, w_b)
        loss = aten.neg.default(aten.sum.dim_IntList(prod, [class_dim]))
        if reduction == 1:
            batch = numel(self.shape) // n_classes
            return aten.div.Scalar(aten.sum.dim_IntList(loss, None), batch)
        return reduce_loss(loss, reduction)
    nll = aten.nll_loss_nd.default(lsm, target, weight, reduction, ignore_index)
    if label_smoothing <= 0:
        return nll
    ignored = aten.eq.Scalar(target, ignore_index)
    weighted = lsm if w_b is None else aten.mul.Tensor(lsm, w_b)
    smooth = aten.neg.default(aten.sum.dim_IntList(weighted, [class_dim]))
    smooth = aten.where.self(ignored, scalar(0, smooth), smooth)
    if reduction == 1:
        if weight is None:
            count = aten.sum.dim_IntList(aten.logical_not.default(ignored), None, dtype=smooth.dtype)
        else:
            count = aten.sum.dim_IntList(_nll_weights(self, target, weight, ignore_index)[1], None)
        smooth = aten.div.Tensor(aten.sum.dim_IntList(smooth, None), count)
    else:
        smooth = reduce_loss(smooth, reduction)
    return aten.add.Tensor(aten.mul.Scalar(nll, 1 - label_smoothing),
                           aten.mul.Scalar(smooth, label_smoothing / n_classes))
