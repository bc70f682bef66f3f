"""kiln.optim.Adagrad (lr_decay, weight_decay, initial_accumulator_value, eps, maximize, fused). The same
formulas in the same order as PyTorch's single-tensor (foreach=False) path. As in PyTorch, the state
("step", "sum") of every parameter is created in the constructor, not at its first gradient.

fused=True is accepted as PyTorch accepts it on CPU (with its checks: not with differentiable or
foreach=True, floating-point parameters only); kiln runs the same single-tensor formulas for it."""

import kiln
from kiln.optim.optimizer import (Optimizer, _lr_scalar, _refuse_cpu_only_paths, _scalar_dtype,
                                  _use_grad_for_differentiable)

_FUSED_DEVICES = ["mps", "cuda", "xpu", "hpu", "cpu", "mtia", "privateuseone"]


def _check_fused_param(p):
    if not p.is_floating_point():
        raise RuntimeError("`fused=True` requires all the params to be floating point Tensors of supported "
                           f"devices: {_FUSED_DEVICES} but {p.dtype} and cpu")


class Adagrad(Optimizer):
    _group_option_defaults = dict(foreach=None, maximize=False, differentiable=False, fused=None)
    _tensor_step = True

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        if isinstance(lr, kiln.Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        if fused:
            if differentiable:
                raise RuntimeError("`fused` does not support `differentiable`")
            if foreach:
                raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
            self._need_device_dtype_check_for_fused = True
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, group, initial_accumulator_value)

    def _init_state(self, p, group, initial_accumulator_value):
        p_state = self.state[p]
        p_state["step"] = kiln.zeros((), dtype=kiln.float32 if group["fused"] else _scalar_dtype())
        p_state["sum"] = kiln.full_like(p, initial_accumulator_value)

    @_use_grad_for_differentiable
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr = _lr_scalar(group["lr"])
            weight_decay, lr_decay, eps = group["weight_decay"], group["lr_decay"], group["eps"]
            maximize, differentiable, fused = group["maximize"], group["differentiable"], group["fused"]
            params = []
            for p in group["params"]:
                if p.grad is None:
                    continue
                if fused and getattr(self, "_need_device_dtype_check_for_fused", True):
                    _check_fused_param(p)
                    self._need_device_dtype_check_for_fused = False
                params.append(p)
                if len(self.state[p]) == 0:  # a parameter added by add_param_group
                    if fused:
                        _check_fused_param(p)
                    self._init_state(p, group, self.defaults["initial_accumulator_value"])
            _refuse_cpu_only_paths(group, params)
            for p in params:
                p_state = self.state[p]
                state_sum, step_t = p_state["sum"], p_state["step"]
                step_t.add_(1)
                step = step_t.item()
                grad = -p.grad if maximize else p.grad
                if weight_decay != 0:
                    grad = grad.add(p, alpha=weight_decay)
                clr = lr / (1 + (step - 1) * lr_decay)
                state_sum.addcmul_(grad, grad, value=1)
                std = state_sum.sqrt() + eps if differentiable else state_sum.sqrt().add_(eps)
                p.addcdiv_(grad, std, value=-clr)
        return loss
