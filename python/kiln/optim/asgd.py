"""kiln.optim.ASGD (averaged SGD: lambd, alpha, t0). The same formulas in the same order as PyTorch's
single-tensor (foreach=False) path; state: "step", "eta" (the decayed learning rate), "mu" (the
averaging coefficient), all scalar tensors in the scalar dtype, and "ax" (the running average of the
parameter, which starts averaging once step > t0)."""

import kiln
from kiln.optim.optimizer import (Optimizer, _lr_scalar, _refuse_cpu_only_paths, _scalar_dtype, _to_scalar,
                                   _use_grad_for_differentiable)


class ASGD(Optimizer):
    _group_option_defaults = dict(foreach=None, maximize=False, differentiable=False, capturable=False)
    _tensor_step = True
    # PyTorch's capturable check (what it names, whether "xla" is listed) on its single-tensor and foreach paths
    _capturable_check = (("params, mus, etas, and state_steps", True),
                         ("params, mus, etas, and state_steps", False))

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach=None,
                 maximize=False, differentiable=False, capturable=False):
        if isinstance(lr, kiln.Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for p in group["params"]:
                p_state = self.state.get(p, [])
                for key in ("eta", "mu") if len(p_state) != 0 else ():
                    if not isinstance(p_state[key], kiln.Tensor):
                        p_state[key] = kiln.tensor(p_state[key], dtype=_scalar_dtype())

    def _init_group(self, group):
        return self._params_with_grad(group, "ASGD", lambda p, group: {
            "eta": kiln.as_tensor(_to_scalar(group["lr"]), dtype=_scalar_dtype()).clone(),
            "mu": kiln.ones((), dtype=_scalar_dtype()), "ax": kiln.zeros_like(p)})

    @_use_grad_for_differentiable
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr = _lr_scalar(group["lr"])
            lambd, alpha, t0, weight_decay = group["lambd"], group["alpha"], group["t0"], group["weight_decay"]
            maximize = group["maximize"]
            params = self._init_group(group)
            _refuse_cpu_only_paths(group, params, *self._capturable_check)
            for p in params:
                p_state = self.state[p]
                mu, ax, eta, step_t = p_state["mu"], p_state["ax"], p_state["eta"], p_state["step"]
                grad = -p.grad if maximize else p.grad
                step_t.add_(1)
                if weight_decay != 0:
                    grad = grad.add(p, alpha=weight_decay)
                eta_value = eta.item()
                p.mul_(1 - lambd * eta_value)  # decay term
                p.add_(grad, alpha=-eta_value)
                if mu.item() != 1:
                    ax.add_(p.sub(ax).mul_(mu))
                else:
                    ax.copy_(p)
                step = step_t.item()
                # PyTorch goes through torch.as_tensor(python float): a default-dtype tensor copied in
                eta.copy_(kiln.as_tensor(lr / ((1 + lambd * lr * step) ** alpha)))
                mu.copy_(kiln.as_tensor(1 / max(1, step - t0)))
        return loss
