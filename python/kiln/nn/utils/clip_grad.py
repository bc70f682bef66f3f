"""clip_grad_norm_ / clip_grad_value_ over parameters' .grad, as torch.nn.utils."""

import math

import kiln
from kiln._tensor import Tensor


def _grads(parameters):
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scales all gradients together so that their joint norm is at most max_norm; returns the
    total norm (before clipping) as a tensor."""
    grads = _grads(parameters)
    max_norm = float(max_norm)
    norm_type = float(norm_type)
    if len(grads) == 0:
        return kiln.tensor(0.0)
    with kiln.no_grad():
        if norm_type == 2.0 and foreach is not False and _multi_tensor_ok(grads):
            # CUDA: one pass over every gradient for the norm, one for the scale (multi_tensor.h)
            total = kiln._C._cuda_grad_norm(grads)
            if error_if_nonfinite and not math.isfinite(total.item()):
                raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is "
                                   "non-finite, so it cannot be clipped. To disable this error and scale the gradients "
                                   "by the non-finite norm anyway, set `error_if_nonfinite=False`")
            kiln._C._cuda_clip_grads_by_norm(grads, total, max_norm)
            return total.to(grads[0].dtype)
        norms = [kiln.linalg_vector_norm(g, norm_type) for g in grads]
        total_norm = kiln.linalg_vector_norm(kiln.stack(norms), norm_type)
        if error_if_nonfinite and (total_norm.isnan() | total_norm.isinf()).item():
            raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, "
                               "so it cannot be clipped. To disable this error and scale the gradients by the "
                               "non-finite norm anyway, set `error_if_nonfinite=False`")
        clip_coef = max_norm / (total_norm + 1e-6)
        clip_coef_clamped = kiln.clamp(clip_coef, max=1.0)
        for g in grads:
            g.mul_(clip_coef_clamped.to(g.dtype))
    return total_norm


def _multi_tensor_ok(grads):
    first = grads[0]
    return (first.is_cuda and first.dtype in (kiln.float32, kiln.float16, kiln.bfloat16, kiln.float64)
            and all(g.device == first.device and g.dtype == first.dtype and g.is_contiguous() for g in grads))


def clip_grad_value_(parameters, clip_value, foreach=None):
    clip_value = float(clip_value)
    with kiln.no_grad():
        for g in _grads(parameters):
            g.clamp_(min=-clip_value, max=clip_value)
