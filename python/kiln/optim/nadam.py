"""kiln.optim.NAdam (Adam with Nesterov momentum; momentum_decay, decoupled_weight_decay). The same
formulas in the same order as PyTorch's single-tensor (foreach=False) path; state: "step" and
"mu_product" (scalar tensors: the running product of the momentum coefficients is kept in the scalar
dtype, float32, and rounded there as in PyTorch), "exp_avg", "exp_avg_sq"."""

import kiln
from kiln.optim.optimizer import (Optimizer, _check_adam_arguments, _lr_scalar, _refuse_cpu_only_paths, _scalar_dtype,
                                   _use_grad_for_differentiable)


class NAdam(Optimizer):
    _group_option_defaults = dict(maximize=False, foreach=None, capturable=False, differentiable=False,
                                  decoupled_weight_decay=False)
    _tensor_step = True
    # PyTorch's capturable check (what it names, whether "xla" is listed) on its single-tensor and foreach paths
    _capturable_check = (("params, mu_products and state_steps", True),
                         ("params, mu_products, and state_steps", False))

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        _check_adam_arguments(lr, eps, betas, weight_decay)
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for p in group["params"]:
                p_state = self.state.get(p, [])
                if len(p_state) != 0 and not isinstance(p_state["mu_product"], kiln.Tensor):
                    p_state["mu_product"] = kiln.tensor(p_state["mu_product"], dtype=_scalar_dtype())

    def _init_group(self, group):
        return self._params_with_grad(group, "NAdam", lambda p, group: {
            "mu_product": kiln.ones((), dtype=_scalar_dtype()), "exp_avg": kiln.zeros_like(p),
            "exp_avg_sq": kiln.zeros_like(p)})

    @_use_grad_for_differentiable
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            lr = _lr_scalar(group["lr"])
            beta1, beta2 = group["betas"]
            eps, weight_decay, momentum_decay = group["eps"], group["weight_decay"], group["momentum_decay"]
            decoupled, maximize, differentiable = (group["decoupled_weight_decay"], group["maximize"],
                                                   group["differentiable"])
            params = self._init_group(group)
            _refuse_cpu_only_paths(group, params, *self._capturable_check)
            for p in params:
                p_state = self.state[p]
                exp_avg, exp_avg_sq = p_state["exp_avg"], p_state["exp_avg_sq"]
                mu_product, step_t = p_state["mu_product"], p_state["step"]
                grad = -p.grad if maximize else p.grad
                step_t.add_(1)
                step = step_t.item()
                bias_correction2 = 1 - beta2 ** step
                if weight_decay != 0:
                    if decoupled:
                        p.mul_(1 - lr * weight_decay)
                    else:
                        grad = grad.add(p, alpha=weight_decay)
                mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
                mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
                mu_product.mul_(mu)
                exp_avg.lerp_(grad, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                denom = exp_avg_sq.div(bias_correction2).sqrt()
                if differentiable:
                    denom = denom.add(eps)
                    mu_product_next = mu_product * mu_next
                    grad = grad * (-lr * (1.0 - mu) / (1.0 - mu_product))
                    exp_avg = exp_avg * (-lr * mu_next / (1.0 - mu_product_next))
                    p.addcdiv_(grad, denom)
                    p.addcdiv_(exp_avg, denom)
                else:
                    mu_product_value = mu_product.item()
                    mu_product_next = mu_product_value * mu_next
                    denom.add_(eps)
                    p.addcdiv_(grad, denom, value=(-lr * (1.0 - mu) / (1.0 - mu_product_value)))
                    p.addcdiv_(exp_avg, denom, value=(-lr * mu_next) / (1.0 - mu_product_next))
        return loss
