"""kiln.optim.Adadelta (rho, eps, weight_decay, maximize). The same formulas in the same order as
PyTorch's single-tensor (foreach=False) path; state: "step" (scalar tensor), "square_avg", "acc_delta"."""

import kiln
from kiln.optim.optimizer import (Optimizer, _lr_scalar, _refuse_cpu_only_paths, _use_grad_for_differentiable)


class Adadelta(Optimizer):
    _group_option_defaults = dict(foreach=None, maximize=False, differentiable=False, capturable=False)
    _tensor_step = True
    # PyTorch's capturable check (what it names, whether "xla" is listed) on its single-tensor and foreach paths
    _capturable_check = (("params and state_steps", False),
                         ("params and state_steps", False))

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, capturable=False,
                 maximize=False, differentiable=False):
        if isinstance(lr, kiln.Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        capturable=capturable, foreach=foreach, differentiable=differentiable)
        super().__init__(params, defaults)

    def _init_group(self, group):
        return self._params_with_grad(group, "Adadelta", lambda p, group: {
            "square_avg": kiln.zeros_like(p), "acc_delta": kiln.zeros_like(p)})

    @_use_grad_for_differentiable
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr = _lr_scalar(group["lr"])
            rho, eps, weight_decay = group["rho"], group["eps"], group["weight_decay"]
            maximize, differentiable = group["maximize"], group["differentiable"]
            params = self._init_group(group)
            _refuse_cpu_only_paths(group, params, *self._capturable_check)
            for p in params:
                p_state = self.state[p]
                square_avg, acc_delta = p_state["square_avg"], p_state["acc_delta"]
                p_state["step"].add_(1)
                grad = -p.grad if maximize else p.grad
                if weight_decay != 0:
                    grad = grad.add(p, alpha=weight_decay)
                square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
                std = square_avg.add(eps).sqrt_()
                delta = acc_delta.add(eps).sqrt_()
                if differentiable:
                    delta = delta.clone()
                delta.div_(std).mul_(grad)
                acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
                p.add_(delta, alpha=-lr)
        return loss
