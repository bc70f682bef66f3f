"""kiln.autograd: reverse-mode automatic differentiation, as torch.autograd.

The graph, the engine and every derivative formula live in C++ (autograd/); this package holds
the Python entry points: backward, grad, grad modes, custom Functions and gradcheck."""

import kiln
from kiln import _C
from kiln.autograd.function import Function, FunctionCtx, once_differentiable  # noqa: F401
from kiln.autograd.grad_mode import (  # noqa: F401
    enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad, set_grad_enabled,
)
from kiln.autograd.gradcheck import gradcheck, gradgradcheck  # noqa: F401
from kiln.autograd.anomaly_mode import detect_anomaly, set_detect_anomaly  # noqa: F401,E402


def _as_tuple(x):
    if x is None:
        return ()
    if isinstance(x, kiln.Tensor):
        return (x,)
    return tuple(x)


def _check_grads(tensors, grad_tensors):
    grads = _as_tuple(grad_tensors) if grad_tensors is not None else (None,) * len(tensors)
    if len(grads) != len(tensors):
        raise RuntimeError(f"got {len(grads)} tensors and {len(tensors)} gradients")
    return list(grads)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulates gradients of `tensors` (weighted by grad_tensors) into the leaves' `.grad`."""
    tensors = _as_tuple(tensors)
    if not tensors:
        raise RuntimeError("backward() called with no tensors")
    if retain_graph is None:
        retain_graph = create_graph
    inputs = list(_as_tuple(inputs))
    for t in tensors:
        if not t.requires_grad:
            raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
    _C._run_backward(list(tensors), _check_grads(tensors, grad_tensors), retain_graph, create_graph, inputs,
                     True, True)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """The gradients of `outputs` with respect to `inputs`, returned (not accumulated)."""
    outputs = _as_tuple(outputs)
    single = not isinstance(inputs, (tuple, list))
    inputs = list(_as_tuple(inputs))
    if retain_graph is None:
        retain_graph = create_graph
    if allow_unused is None:
        allow_unused = materialize_grads
    for t in outputs:
        if not t.requires_grad:
            raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
    result = _C._run_backward(list(outputs), _check_grads(outputs, grad_outputs), retain_graph, create_graph,
                              inputs, allow_unused, False)
    if materialize_grads:
        import kiln

        result = tuple(kiln.zeros_like(i) if r is None else r for r, i in zip(result, inputs))
    return result


class RemovableHandle:
    """Returned by register_hook; `.remove()` takes the hook away."""

    def __init__(self, remove):
        self._remove = remove

    def remove(self):
        if self._remove is not None:
            self._remove()
            self._remove = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _register_hook(tensor, hook):
    if not tensor.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    hook_id = _C._register_tensor_hook(tensor, hook)
    return RemovableHandle(lambda: _C._remove_tensor_hook(tensor, hook_id))


def _node_register_hook(node, fn):
    hook_id = node._register_hook(fn)
    return RemovableHandle(lambda: node._remove_hook(hook_id))


def _node_register_prehook(node, fn):
    # fn takes and returns a tuple of grad_outputs (PyTorch); the C++ hook sees one tensor.
    def hook(g):
        r = fn((g,))
        return r[0] if isinstance(r, (tuple, list)) else r

    hook_id = node._register_prehook(hook)
    return RemovableHandle(lambda: node._remove_prehook(hook_id))


_C._Node.register_hook = _node_register_hook
_C._Node.register_prehook = _node_register_prehook
