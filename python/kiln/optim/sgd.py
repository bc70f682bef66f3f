"""kiln.optim.SGD: stochastic gradient descent with momentum, dampening, Nesterov, weight decay,
maximize. The same formulas in the same order as PyTorch's single-tensor (foreach=False) path.

On CUDA (unless foreach=False) a group's parameters are updated by the multi-tensor kernel
(tensor/cuda/multi_tensor.h): a few launches for all of them, as PyTorch's foreach path."""

import kiln
from kiln.optim.adam import _multi_tensor_ok
from kiln.optim.optimizer import Optimizer, _no_grad_step, _to_scalar, _check_unsupported


class SGD(Optimizer):
    _group_option_defaults = dict(nesterov=False, maximize=False, foreach=None, differentiable=False, fused=False)

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False, foreach=None, differentiable=False, fused=None):
        if hasattr(lr, "numel") and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        _check_unsupported(differentiable=differentiable, fused=fused)
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov,
                        maximize=maximize, foreach=foreach, differentiable=differentiable, fused=fused)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)

    @_no_grad_step
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        state = self.state
        for group in self.param_groups:
            lr = _to_scalar(group["lr"])
            momentum = group["momentum"]
            dampening = group["dampening"]
            weight_decay = group["weight_decay"]
            nesterov = group["nesterov"]
            maximize = group["maximize"]
            batches = {}  # (device, dtype) -> params, grads, momentum buffers, whether each buffer is new
            for p in group["params"]:
                grad = p.grad
                if grad is None:
                    continue
                if group["foreach"] is not False and _multi_tensor_ok(p, grad):
                    lists = batches.setdefault((p.device, p.dtype), ([], [], [], []))
                    lists[0].append(p)
                    lists[1].append(grad)
                    if momentum != 0:
                        p_state = state[p]
                        buf = p_state.get("momentum_buffer")
                        lists[3].append(buf is None)
                        if buf is None:
                            buf = p_state["momentum_buffer"] = kiln.empty_like(p)
                        lists[2].append(buf)
                    continue
                if maximize:
                    grad = -grad
                if weight_decay != 0:
                    grad = grad.add(p, alpha=weight_decay)
                if momentum != 0:
                    p_state = state[p]
                    buf = p_state.get("momentum_buffer")
                    if buf is None:
                        buf = p_state["momentum_buffer"] = grad.detach().clone()
                    else:
                        buf.mul_(momentum).add_(grad, alpha=1 - dampening)
                    grad = grad.add(buf, alpha=momentum) if nesterov else buf
                p.add_(grad, alpha=-lr)
            for params, grads, bufs, first in batches.values():
                kiln._C._cuda_multi_tensor_sgd(params, grads, bufs, first, lr, momentum, dampening, weight_decay,
                                               nesterov, maximize)
        return loss
