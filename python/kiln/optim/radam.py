"""kiln.optim.RAdam (rectified Adam; decoupled_weight_decay). The same formulas in the same order as
PyTorch's single-tensor (foreach=False) path; state: "step" (scalar tensor), "exp_avg", "exp_avg_sq".
While the variance estimate is untrustworthy (rho_t <= 5) the step is plain momentum SGD."""

import kiln
from kiln.optim.optimizer import (Optimizer, _check_adam_arguments, _lr_scalar, _refuse_cpu_only_paths,
                                   _use_grad_for_differentiable)


class RAdam(Optimizer):
    _group_option_defaults = dict(foreach=None, maximize=False, differentiable=False, capturable=False,
                                  decoupled_weight_decay=False)
    _tensor_step = True
    # PyTorch's capturable check (what it names, whether "xla" is listed) on its single-tensor and foreach paths
    _capturable_check = (("params and state_steps", True),
                         ("params and state_steps", False))

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, decoupled_weight_decay=False,
                 *, foreach=None, maximize=False, capturable=False, differentiable=False):
        _check_adam_arguments(lr, eps, betas, weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, maximize=maximize, foreach=foreach,
                        capturable=capturable, decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def _init_group(self, group):
        return self._params_with_grad(group, "RAdam", lambda p, group: {
            "exp_avg": kiln.zeros_like(p), "exp_avg_sq": kiln.zeros_like(p)})

    @_use_grad_for_differentiable
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr = _lr_scalar(group["lr"])
            beta1, beta2 = group["betas"]
            eps, weight_decay = group["eps"], group["weight_decay"]
            decoupled, maximize, differentiable = (group["decoupled_weight_decay"], group["maximize"],
                                                   group["differentiable"])
            params = self._init_group(group)
            _refuse_cpu_only_paths(group, params, *self._capturable_check)
            for p in params:
                p_state = self.state[p]
                exp_avg, exp_avg_sq, step_t = p_state["exp_avg"], p_state["exp_avg_sq"], p_state["step"]
                grad = -p.grad if maximize else p.grad
                step_t.add_(1)
                step = step_t.item()
                if weight_decay != 0:
                    if decoupled:
                        p.mul_(1 - lr * weight_decay)
                    else:
                        grad = grad.add(p, alpha=weight_decay)
                exp_avg.lerp_(grad, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                bias_correction1 = 1 - beta1 ** step
                bias_correction2 = 1 - beta2 ** step
                bias_corrected_exp_avg = exp_avg / bias_correction1
                rho_inf = 2 / (1 - beta2) - 1
                rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
                if rho_t > 5.0:
                    rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
                    exp_avg_sq_sqrt = exp_avg_sq.sqrt()
                    exp_avg_sq_sqrt = exp_avg_sq_sqrt.add(eps) if differentiable else exp_avg_sq_sqrt.add_(eps)
                    adaptive_lr = (bias_correction2 ** 0.5) / exp_avg_sq_sqrt
                    p.add_(bias_corrected_exp_avg * lr * adaptive_lr * rect, alpha=-1.0)
                else:
                    p.add_(bias_corrected_exp_avg * lr, alpha=-1.0)
        return loss
