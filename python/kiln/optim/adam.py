"""kiln.optim.Adam and AdamW (decoupled weight decay), with amsgrad and maximize. The same formulas
in the same order as PyTorch's single-tensor (foreach=False, capturable=False) path, so the two agree
step for step: state["step"] is a float32 scalar tensor, bias corrections are Python floats.

On CUDA (unless foreach=False) the parameters of a group are updated by the multi-tensor kernel
(tensor/cuda/multi_tensor.h): a few launches for all of them, as PyTorch's foreach and fused paths;
fused=True selects it too (and the single-tensor path on the CPU, as PyTorch's CPU fused kernel
computes the same step)."""

import kiln
from kiln.optim.optimizer import (Optimizer, _check_adam_arguments, _check_unsupported, _no_grad_step, _to_scalar)


class Adam(Optimizer):
    _group_option_defaults = dict(amsgrad=False, maximize=False, foreach=None, capturable=False, differentiable=False,
                                  decoupled_weight_decay=False, fused=None)
    _tensor_step = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None,
                 decoupled_weight_decay=False):
        _check_adam_arguments(lr, eps, betas, weight_decay)
        if not ((isinstance(betas[0], float) and isinstance(betas[1], float))
                or (isinstance(betas[0], kiln.Tensor) and isinstance(betas[1], kiln.Tensor))):
            raise ValueError("betas must be either both floats or both Tensors")
        for i, b in enumerate(betas):
            if isinstance(b, kiln.Tensor) and b.numel() != 1:
                raise ValueError(f"Tensor betas[{i}] must be 1-element")
        _check_unsupported(capturable=capturable, differentiable=differentiable)
        if fused and foreach:
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
        betas = tuple(_to_scalar(b) for b in betas)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    @_no_grad_step
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        state = self.state
        for group in self.param_groups:
            lr = _to_scalar(group["lr"])
            beta1, beta2 = group["betas"]
            beta1, beta2 = _to_scalar(beta1), _to_scalar(beta2)
            eps = group["eps"]
            weight_decay = group["weight_decay"]
            amsgrad = group["amsgrad"]
            maximize = group["maximize"]
            decoupled = group["decoupled_weight_decay"]
            batches = {}  # (device, dtype) -> the multi-tensor kernel's lists
            for p in group["params"]:
                grad = p.grad
                if grad is None:
                    continue
                p_state = state[p]
                if len(p_state) == 0:  # lazy state initialization
                    p_state["step"] = kiln.tensor(0.0, dtype=kiln.float32)
                    p_state["exp_avg"] = kiln.zeros_like(p)
                    p_state["exp_avg_sq"] = kiln.zeros_like(p)
                    if amsgrad:
                        p_state["max_exp_avg_sq"] = kiln.zeros_like(p)
                exp_avg = p_state["exp_avg"]
                exp_avg_sq = p_state["exp_avg_sq"]
                step_t = p_state["step"]
                if group["foreach"] is not False and _multi_tensor_ok(p, grad):
                    step_t.add_(1)
                    step = step_t.item()
                    lists = batches.setdefault((p.device, p.dtype), ([], [], [], [], [], [], []))
                    for lst, t in zip(lists, (p, grad, exp_avg, exp_avg_sq, p_state.get("max_exp_avg_sq"),
                                              lr / (1 - beta1 ** step), (1 - beta2 ** step) ** 0.5)):
                        lst.append(t)
                    continue
                if maximize:
                    grad = -grad
                step_t.add_(1)
                if weight_decay != 0:
                    if decoupled:
                        p.mul_(1 - lr * weight_decay)
                    else:
                        grad = grad.add(p, alpha=weight_decay)
                exp_avg.lerp_(grad, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)

                step = step_t.item()
                bias_correction1 = 1 - beta1 ** step
                bias_correction2 = 1 - beta2 ** step
                step_size = lr / bias_correction1
                bias_correction2_sqrt = bias_correction2 ** 0.5
                if amsgrad:
                    max_exp_avg_sq = p_state["max_exp_avg_sq"]
                    max_exp_avg_sq.copy_(kiln.maximum(max_exp_avg_sq, exp_avg_sq))
                    denom = (max_exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
                else:
                    denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
                p.addcdiv_(exp_avg, denom, value=-step_size)
            for params, grads, avgs, avg_sqs, max_sqs, step_sizes, bc2_sqrts in batches.values():
                kiln._C._cuda_multi_tensor_adam(params, grads, avgs, avg_sqs, max_sqs if amsgrad else [], step_sizes,
                                                bc2_sqrts, lr, beta1, beta2, eps, weight_decay, decoupled, maximize)
        return loss


def _multi_tensor_ok(p, grad):
    """Whether the multi-tensor kernel takes p: a contiguous real floating-point CUDA tensor with a
    dense contiguous gradient of its dtype."""
    return (p.is_cuda and p.dtype in _MULTI_TENSOR_DTYPES and grad.dtype == p.dtype and grad.device == p.device
            and p.is_contiguous() and grad.is_contiguous())


_MULTI_TENSOR_DTYPES = (kiln.float32, kiln.float16, kiln.bfloat16, kiln.float64)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): p *= 1 - lr * weight_decay each step."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True
