"""kiln.optim.Adamax (Adam with the infinity norm). The same formulas in the same order as PyTorch's
single-tensor (foreach=False) path; state: "step" (scalar tensor), "exp_avg", "exp_inf"."""

import kiln
from kiln.optim.optimizer import (Optimizer, _check_adam_arguments, _lr_scalar, _refuse_cpu_only_paths,
                                   _use_grad_for_differentiable)


class Adamax(Optimizer):
    _group_option_defaults = dict(foreach=None, maximize=False, differentiable=False, capturable=False)
    _tensor_step = True
    # PyTorch's capturable check (what it names, whether "xla" is listed) on its single-tensor and foreach paths
    _capturable_check = (("params and state_steps", True),
                         ("params and state_steps", False))

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *,
                 maximize=False, differentiable=False, capturable=False):
        _check_adam_arguments(lr, eps, betas, weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def _init_group(self, group):
        return self._params_with_grad(group, "Adamax", lambda p, group: {
            "exp_avg": kiln.zeros_like(p), "exp_inf": kiln.zeros_like(p)})

    @_use_grad_for_differentiable
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr = _lr_scalar(group["lr"])
            beta1, beta2 = group["betas"]
            eps, weight_decay = group["eps"], group["weight_decay"]
            maximize, differentiable = group["maximize"], group["differentiable"]
            params = self._init_group(group)
            _refuse_cpu_only_paths(group, params, *self._capturable_check)
            for p in params:
                p_state = self.state[p]
                exp_avg, exp_inf, step_t = p_state["exp_avg"], p_state["exp_inf"], p_state["step"]
                grad = -p.grad if maximize else p.grad
                step_t.add_(1)
                if weight_decay != 0:
                    grad = grad.add(p, alpha=weight_decay)
                exp_avg.lerp_(grad, 1 - beta1)
                if not differentiable:
                    exp_inf.copy_(kiln.maximum(exp_inf.mul_(beta2), grad.abs().add_(eps)))
                else:
                    norm_buf = kiln.cat([exp_inf.mul_(beta2).unsqueeze(0), grad.abs().add_(eps).unsqueeze(0)], 0)
                    exp_inf.copy_(kiln.amax(norm_buf, 0, keepdim=False))
                clr = lr / (1 - beta1 ** step_t.item())
                p.addcdiv_(exp_avg, exp_inf, value=-clr)
        return loss
