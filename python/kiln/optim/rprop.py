"""kiln.optim.Rprop (resilient backpropagation: etas, step_sizes). The same formulas in the same order
as PyTorch's single-tensor (foreach=False) path; state: "step" (scalar tensor), "prev" (the last
gradient used, zeroed where its sign flipped), "step_size" (per element, starting at lr)."""

import kiln
from kiln.optim.optimizer import (Optimizer, _refuse_cpu_only_paths, _to_scalar, _use_grad_for_differentiable)


class Rprop(Optimizer):
    _group_option_defaults = dict(foreach=None, maximize=False, differentiable=False, capturable=False)
    _tensor_step = True
    # PyTorch's capturable check (what it names, whether "xla" is listed) on its single-tensor and foreach paths
    _capturable_check = (("params and state_steps", True),
                         ("params and state_steps", True))

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable=False, foreach=None,
                 maximize=False, differentiable=False):
        if isinstance(lr, kiln.Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def _init_group(self, group):
        return self._params_with_grad(group, "Rprop", lambda p, group: {
            "prev": kiln.zeros_like(p), "step_size": kiln.full_like(p.grad, _to_scalar(group["lr"]))})

    @_use_grad_for_differentiable
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            etaminus, etaplus = group["etas"]
            step_size_min, step_size_max = group["step_sizes"]
            maximize, differentiable = group["maximize"], group["differentiable"]
            params = self._init_group(group)
            _refuse_cpu_only_paths(group, params, *self._capturable_check)
            for p in params:
                p_state = self.state[p]
                prev, step_size = p_state["prev"], p_state["step_size"]
                grad = -p.grad if maximize else p.grad
                p_state["step"].add_(1)
                sign = grad.mul(prev.clone() if differentiable else prev).sign()
                # PyTorch's masked assignments sign[sign > 0] = etaplus, ... as selects (the same values)
                sign = kiln.where(sign.gt(0), etaplus, sign)
                sign = kiln.where(sign.lt(0), etaminus, sign)
                sign = kiln.where(sign.eq(0), 1, sign)
                step_size.mul_(sign).clamp_(step_size_min, step_size_max)
                grad = kiln.where(sign.eq(etaminus), 0, grad)  # no step where the gradient's sign flipped
                p.addcmul_(grad.sign(), step_size, value=-1)
                prev.copy_(grad)
        return loss
