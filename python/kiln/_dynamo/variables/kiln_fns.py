"""kiln's own functions and grad-mode context managers.

KilnFunctionVariable is an op of kiln (kiln.relu, kiln.nn.functional.linear, kiln.cat, a factory):
calling it puts a call_function node in the graph, its example output computed on fake tensors.
A few functions answer at compile time instead (is_grad_enabled, get_default_dtype, is_tensor,
Size, kiln.compiler.is_compiling: True). GradModeVariable models no_grad / enable_grad /
set_grad_enabled: entering sets the mode for the rest of the trace and records
kiln._C._set_grad_enabled in the graph, so the compiled graph switches the mode exactly where
eager did.
"""

import kiln
from kiln import _C
from kiln._dynamo.exc import unimplemented
from kiln._dynamo.variables.base import ConstantVariable, ObjectConstantVariable, VariableTracker

_UNSUPPORTED = {"manual_seed": "seeding the generator", "set_default_dtype": "changing the default dtype",
                "set_num_threads": "changing the thread count", "set_printoptions": "changing print options",
                "save": "saving to disk", "load": "loading from disk"}


class KilnFunctionVariable(ObjectConstantVariable):
    def describe(self):
        return f"kiln function {getattr(self.value, '__name__', self.value)}"

    def reconstruct(self, codegen):
        return codegen.object_expr(self.value)

    def call_function(self, tx, args, kwargs):
        fn = self.value
        name = getattr(fn, "__name__", "")
        if name in _UNSUPPORTED and getattr(kiln, name, None) is fn:
            unimplemented(f"kiln.{name}(): {_UNSUPPORTED[name]} is global state", f"call kiln.{name} outside the compiled function")
        if fn is _C.is_grad_enabled or fn is kiln.is_grad_enabled:
            return ConstantVariable(_C.is_grad_enabled())
        if fn is kiln.compiler.is_compiling or fn is kiln.compiler.is_dynamo_compiling:
            return ConstantVariable(True)
        if fn is kiln.get_default_dtype:
            return ConstantVariable(kiln.get_default_dtype())
        if fn is kiln.is_tensor:
            from kiln._dynamo.variables.tensor import TensorVariable

            return ConstantVariable(isinstance(args[0], TensorVariable))
        if fn is kiln.is_floating_point:
            return ConstantVariable(args[0].example.dtype.is_floating_point)
        if fn is kiln.Size:
            from kiln._dynamo.variables.lists import SizeVariable

            return SizeVariable(args[0].unpack_var_sequence(tx) if args else [])
        if fn in (kiln.no_grad, kiln.enable_grad):
            return GradModeVariable(fn is kiln.enable_grad)
        if fn is kiln.set_grad_enabled:
            mode = args[0].as_python_constant()
            var = GradModeVariable(mode)
            var.enter(tx)  # the call itself switches the mode; `with` restores it on exit
            return var
        if fn is _C._set_grad_enabled:
            GradModeVariable(args[0].as_python_constant()).enter(tx)
            return ConstantVariable(None)
        return tx.output.call(tx, "call_function", fn, tuple(args), kwargs)


class _ModeContextVariable(VariableTracker):
    """A context manager the trace models by switching a global mode (enter / exit) and recording
    the switch in the graph: grad modes and autocast."""

    kind = "mode"

    def call_method(self, tx, name, args, kwargs):
        if name == "__enter__":
            return self.enter(tx)
        if name == "__exit__":
            return self.exit(tx)
        if name == "clone":
            return self.clone()
        unimplemented(f"{self.kind} .{name}()")

    def call_function(self, tx, args, kwargs):
        # @kiln.no_grad() / @kiln.autocast(...) applied to a function inside the compiled region
        unimplemented(f"using a {self.kind} object as a decorator inside the compiled function",
                      "decorate the function where it is defined")


class GradModeVariable(_ModeContextVariable):
    kind = "grad-mode"

    def __init__(self, mode):
        self.mode = mode
        self.previous = None

    def clone(self):
        return GradModeVariable(self.mode)

    def python_type(self):
        return kiln.no_grad if not self.mode else kiln.enable_grad

    def describe(self):
        return f"grad mode {self.mode}"

    def enter(self, tx):
        self.previous = _C.is_grad_enabled()
        tx.output.set_grad_enabled(tx, self.mode)
        return ConstantVariable(None)

    def exit(self, tx):
        tx.output.set_grad_enabled(tx, self.previous)
        return ConstantVariable(None)


class AutocastVariable(_ModeContextVariable):
    """kiln.autocast(...) (kiln/amp/autocast_mode.py): entering sets the autocast state for the rest of
    the trace and records kiln._C._set_autocast_state in the graph, as GradModeVariable does for grad
    modes; AOT tracing then runs those nodes, so the casts are traced where eager code casts."""

    kind = "autocast"

    def __init__(self, ctx):
        self.ctx = ctx  # the real autocast object (argument checks and warnings happened there)
        self.previous = None

    def clone(self):
        return AutocastVariable(self.ctx)

    @property
    def state(self):
        return (self.ctx._enabled, self.ctx.fast_dtype) if self.ctx.device == "cpu" else None

    def python_type(self):
        return type(self.ctx)

    def describe(self):
        return f"autocast {self.ctx.device} {self.ctx.fast_dtype} enabled={self.ctx._enabled}"

    def enter(self, tx):
        self.previous = _C._get_autocast_state()
        if self.state is not None:
            tx.output.set_autocast_state(tx, self.state)
        return ConstantVariable(None)

    def exit(self, tx):
        tx.output.set_autocast_state(tx, self.previous)
        return ConstantVariable(None)


class WithExitVariable(VariableTracker):
    """The __exit__ that BEFORE_WITH leaves on the stack. At a graph break inside the block it
    becomes a real grad-mode object's __exit__ that restores the mode from before the block (the
    graph itself already switched the mode), so the resume function leaves the block as eager
    code would."""

    def __init__(self, ctx):
        self.ctx = ctx

    def python_type(self):
        return type(None)

    def call_function(self, tx, args, kwargs):
        return self.ctx.call_method(tx, "__exit__", list(args), {})

    def reconstruct(self, codegen):
        if isinstance(self.ctx, AutocastVariable):
            previous = self.ctx.previous
            return codegen.materialize(self, lambda cg: f"{cg.object_expr(autocast_exit)}({previous[0]!r}, "
                                                        f"{cg.object_expr(previous[1])})")
        mode, previous = self.ctx.mode, self.ctx.previous
        return codegen.materialize(self, lambda cg: f"{cg.object_expr(grad_mode_exit)}({mode!r}, {previous!r})")

    def describe(self):
        return "with-block exit"


def grad_mode_exit(mode, previous):
    """The bound __exit__ of a grad-mode block entered from `previous` (used by generated code)."""
    ctx = kiln.enable_grad() if mode else kiln.no_grad()
    ctx.prev = previous
    return ctx.__exit__


def autocast_exit(enabled, dtype):
    """The __exit__ of an autocast block entered from the state (enabled, dtype) (used by generated code)."""
    def exit_(*exc_info):
        _C._set_autocast_state(enabled, dtype)
        return False
    return exit_


class CheckpointVariable(ObjectConstantVariable):
    """kiln.utils.checkpoint.checkpoint(fn, *args): fn is inlined, and the nodes it adds are
    annotated for AOTAutograd's partitioner: meta["recompute"] (PREFER_RECOMPUTE), or
    meta["ac_policy"] for a selective policy, which AOTAutograd applies to each aten op the node
    becomes (kiln.utils.checkpoint)."""

    _OPTIONS = ("use_reentrant", "context_fn", "determinism_check", "debug", "preserve_rng_state")

    def call_function(self, tx, args, kwargs):
        if not args:
            unimplemented("checkpoint() without a function")
        policy = None
        context_fn = kwargs.get("context_fn")
        if context_fn is not None:
            fn_value = getattr(context_fn, "value", None) or getattr(context_fn, "fn", None)
            if fn_value is None:
                unimplemented(f"checkpoint(context_fn=) from {context_fn.describe()}")
            policy = getattr(fn_value(), "policy", None)  # building the contexts has no side effect
        rest = {k: v for k, v in kwargs.items() if k not in self._OPTIONS}
        graph = tx.output.graph
        before = set(graph.nodes)
        result = args[0].call_function(tx, list(args[1:]), rest)
        from kiln.utils.checkpoint import CheckpointPolicy

        for node in graph.nodes:
            if node.op in ("call_function", "call_method") and node not in before:
                if policy is None:
                    node.meta["recompute"] = CheckpointPolicy.PREFER_RECOMPUTE
                else:
                    node.meta["ac_policy"] = policy
        return result
