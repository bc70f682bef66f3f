"""kiln.autograd.Function: user-defined ops with a hand-written backward.

    class Exp(Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return grad * y

`Exp.apply(x)` runs forward with grad mode off, then records one backward node (C++
PyFunctionNode) whose edges go to the tensor arguments; backward returns one gradient per
forward argument (None for non-tensors or where none is needed).
"""

import kiln
from kiln import _C
from kiln.autograd.grad_mode import no_grad


class FunctionCtx:
    def save_for_backward(self, *tensors):
        self._saved = tuple(tensors)
        self._saved_versions = tuple(None if t is None else t._version for t in tensors)

    @property
    def saved_tensors(self):
        if getattr(self, "_freed", False):
            raise RuntimeError(
                "Trying to backward through the graph a second time (or directly access saved tensors after they "
                "have already been freed). Saved intermediate values of the graph are freed when you call "
                ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
                "graph a second time or if you need to access saved tensors after calling backward.")
        saved = getattr(self, "_saved", ())
        for t, v in zip(saved, self._saved_versions if saved else ()):
            if t is not None and t._version != v:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by an inplace "
                    f"operation: [{t.dtype} {list(t.shape)}], which is output 0 of {self._name}, is at version "
                    f"{t._version}; expected version {v} instead.")
        outputs = getattr(self, "_saved_output_nrs", None)
        if outputs:
            # Saved outputs are kept without history (see Function.apply); in a backward with
            # create_graph they get their node back, so double backward flows through them.
            node = getattr(self, "_node", None)
            if node is not None and _C.is_grad_enabled():
                saved = tuple(_C._alias_with_history(t, node, outputs[i]) if i in outputs else t
                              for i, t in enumerate(saved))
        return saved

    def mark_non_differentiable(self, *tensors):
        self._non_differentiable = {id(t) for t in tensors}

    def mark_dirty(self, *tensors):
        self._dirty = tensors

    def set_materialize_grads(self, value):
        self._materialize_grads = value

    def _free_saved(self):
        self._saved = ()
        self._freed = True


class BackwardCFunction(FunctionCtx):
    """The ctx object handed to forward/backward; it is also what the C++ node calls back."""

    def _do_backward(self, *grads):
        return self._cls.backward(self, *grads)


class FunctionMeta(type):
    def __init__(cls, name, bases, attrs):
        super().__init__(name, bases, attrs)
        if "_backward_name" not in attrs:  # kiln's own Functions name theirs as PyTorch's C++ nodes
            cls._backward_name = name + "Backward"


class Function(metaclass=FunctionMeta):
    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError

    @classmethod
    def apply(cls, *args, **kwargs):
        Tensor = kiln.Tensor
        ctx = BackwardCFunction()
        ctx._cls = cls
        ctx._name = cls._backward_name
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        uses_setup = cls.setup_context is not Function.setup_context
        with no_grad():
            if uses_setup:
                output = cls.forward(*args, **kwargs)
            else:
                output = cls.forward(ctx, *args, **kwargs)
        if uses_setup:
            cls.setup_context(ctx, args, output)
        is_tuple = isinstance(output, tuple)
        outputs = output if is_tuple else (output,)
        if _C.is_grad_enabled() and any(ctx.needs_input_grad):
            inputs = [a if isinstance(a, Tensor) else None for a in args]
            non_diff = getattr(ctx, "_non_differentiable", set())
            dirty = {id(t) for t in getattr(ctx, "_dirty", ())}
            tensor_outputs = []
            wrapped = []
            for o in outputs:
                if isinstance(o, Tensor):
                    # An output that is an input (and not marked dirty) gets a fresh alias, so the
                    # input keeps its own history.
                    if any(o is a for a in args) and id(o) not in dirty:
                        o = o.view_as(o) if not o.requires_grad else o.detach()
                    tensor_outputs.append(o)
                wrapped.append(o)
            differentiable = [id(o) not in non_diff for o in tensor_outputs]
            _C._record_function(ctx, cls._backward_name, inputs, tensor_outputs, differentiable)
            # A saved output would hold its grad_fn, the node holds ctx: node -> ctx -> output ->
            # node is a cycle through C++ that Python's GC cannot see, so nothing was ever freed.
            # Keep a detached alias (same storage and version) and the output's index instead.
            saved = getattr(ctx, "_saved", None)
            if saved:
                nrs = {}
                kept = list(saved)
                for i, s in enumerate(saved):
                    for nr, o in enumerate(tensor_outputs):
                        if s is o and o.requires_grad:
                            kept[i] = o.detach()
                            nrs[i] = nr
                if nrs:
                    ctx._saved = tuple(kept)
                    ctx._saved_output_nrs = nrs
            outputs = tuple(wrapped)
        return outputs if is_tuple else outputs[0]


class once_differentiable:  # noqa: N801  (PyTorch's spelling)
    def __new__(cls, fn):
        return fn
