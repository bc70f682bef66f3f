"""kiln.optim.Adafactor (Shazeer and Stern, 2018, as PyTorch 2.13 implements it): Adam-like steps whose
second moment is kept factored, a row and a column statistic per matrix instead of one entry per
parameter. The same formulas in the same order as PyTorch's single-tensor (foreach=False) path.

State per parameter: "step" (scalar tensor), then for a gradient of 2 or more dimensions "row_var"
(the running mean of g**2 over the last dimension, kept with that dimension 1) and "col_var" (over
the second to last, kept 1 there), for a vector or scalar "variance" (the running g**2). Each step:
beta2_t = 1 - step**beta2_decay, the relative step size rho = min(lr, 1/sqrt(step)) scaled by the
parameter's RMS (at least eps2), the update g / sqrt(row_var @ col_var / mean(row_var)) (the
variance for vectors) clipped to RMS d, and decoupled weight decay lr * weight_decay.
"""

import kiln
from kiln.optim.optimizer import Optimizer, _lr_scalar, _no_grad_step


class Adafactor(Optimizer):
    _group_option_defaults = dict(foreach=None, maximize=False)
    _tensor_step = True

    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0, weight_decay=0.0, *,
                 foreach=None, maximize=False):
        if isinstance(lr, kiln.Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        defaults = dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize)
        super().__init__(params, defaults)

    @staticmethod
    def _new_state(p, group):
        if p.grad.dim() > 1:  # the factored second moment: one row and one column statistic
            row_shape, col_shape = list(p.grad.shape), list(p.grad.shape)
            row_shape[-1] = 1
            col_shape[-2] = 1
            return {"row_var": p.grad.new_zeros(row_shape), "col_var": p.grad.new_zeros(col_shape)}
        return {"variance": kiln.zeros_like(p.grad)}

    @_no_grad_step
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            params = self._params_with_grad(group, "Adafactor", self._new_state)
            lr = _lr_scalar(group["lr"])
            eps1, eps2 = group["eps"]
            d, beta2_decay, weight_decay = group["d"], group["beta2_decay"], group["weight_decay"]
            for param in params:
                state = self.state[param]
                grad = -param.grad if group["maximize"] else param.grad
                if eps1 is None:  # (set from the first parameter, then kept for the group: PyTorch's loop)
                    eps1 = kiln.finfo(param.dtype).eps
                step_t = state["step"]
                step_t += 1
                step_float = step_t.item()
                one_minus_beta2_t = step_float ** beta2_decay
                rho_t = min(lr, 1 / (step_float ** 0.5))
                alpha = max(eps2, param.norm(2).item() / (param.numel() ** 0.5)) * rho_t
                if weight_decay != 0:
                    param.mul_(1 - lr * weight_decay)
                if grad.dim() > 1:
                    row_var, col_var = state["row_var"], state["col_var"]
                    # (g * g).mean over one dimension, without a g-sized intermediate
                    row_mean = kiln.norm(grad, dim=-1, keepdim=True).square_().div_(grad.size(-1))
                    row_var.lerp_(row_mean, one_minus_beta2_t)
                    col_mean = kiln.norm(grad, dim=-2, keepdim=True).square_().div_(grad.size(-2))
                    col_var.lerp_(col_mean, one_minus_beta2_t)
                    var_estimate = row_var @ col_var
                    var_estimate.div_(row_var.mean(dim=-2, keepdim=True).clamp_(min=eps1))
                else:
                    variance = state["variance"]
                    variance.lerp_(grad * grad, one_minus_beta2_t)
                    var_estimate = variance.clone()  # the update must not write into the state
                # eps1 squared: the square root below brings it back to eps1's magnitude
                update = var_estimate.clamp_(min=eps1 * eps1).rsqrt_()
                update.mul_(grad)
                denom = max(1.0, update.norm(2).item() / ((update.numel() ** 0.5) * d))
                param.add_(update, alpha=-alpha / denom)
        return loss
