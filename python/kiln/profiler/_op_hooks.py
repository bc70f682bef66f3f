"""Where kiln.profiler measures: the Python entry points of kiln's public ops, and the recorder.

kiln's C++ dispatcher has no per-op callback (no RecordFunction), so the profiler times ops where
Python calls them. Every public op enters through one of three doors, all attributes looked up at
call time: a `kiln.<op>` module attribute (the registry's _OpFunctions, the factories, and the
Python composites of _composites/_order_stats/_set_ops/_einsum), a `kiln.Tensor.<op>` method, or a
Tensor operator (`x + y` is TensorBase's nb_add; Note [Tensor operators]). While a profile records,
install() replaces each door with a wrapper that opens a timed range named "aten::<op>" around the
call, and uninstall() puts the originals back: outside a recording window ops run exactly as
before, at no cost.

What this sees: every op a Python program calls, nested (a composite's ranges hold the ranges of the
ops it calls, so self time excludes them), with input shapes if asked; and each node autograd's
engine runs in backward, reported by the engine itself (_C._set_autograd_node_observer) and named as
PyTorch's profiler names it: "autograd::engine::evaluate_function: MulBackward0" holding
"MulBackward0". What it cannot see: ops C++ calls on its own, i.e. the kernels inside a backward
node, ops inside another op's C++ kernel, and the kernels of a kiln.compile'd graph; their time lands
in the self time of the enclosing range (the backward node, record_function, the step). Ops run
under fake tensors (tracing) are not recorded.
"""

import itertools
import threading
import time

from kiln import _C

# Tensor operators and the op each one runs (Note [Tensor operators] in python/csrc/python_tensor.cc;
# `number / x` is timed as its first op, the reciprocal).
_OPERATORS = _C._tensor_operators
_COMPOSITE_MODULES = ("kiln._composites", "kiln._order_stats", "kiln._set_ops", "kiln._einsum")


class Range:
    """One timed call: an op ("cpu_op") or a record_function ("user_annotation")."""

    __slots__ = ("id", "name", "kind", "thread", "start_ns", "end_ns", "input_shapes", "parent", "args")

    def __init__(self, id, name, kind, thread, start_ns, input_shapes, parent, args=None):
        self.id, self.name, self.kind, self.thread, self.start_ns = id, name, kind, thread, start_ns
        self.input_shapes, self.parent, self.args, self.end_ns = input_shapes, parent, args, None


class Recorder:
    """The ranges of one recording window. Ranges nest per thread (a stack each); finished ranges
    are kept in the order they opened."""

    def __init__(self, record_shapes):
        self.record_shapes = record_shapes
        self.ranges = []
        self._ids = itertools.count()
        self._stacks = threading.local()
        self.epoch_ns = time.time_ns() - time.perf_counter_ns()  # perf_counter -> wall clock (traces)

    def _stack(self):
        stack = getattr(self._stacks, "stack", None)
        if stack is None:
            stack = self._stacks.stack = []
        return stack

    def open(self, name, kind, inputs=None, args=None):
        stack = self._stack()
        shapes = _shapes(inputs) if self.record_shapes and inputs is not None else []
        r = Range(next(self._ids), name, kind, threading.get_native_id(), 0, shapes, stack[-1] if stack else None,
                  args)
        self.ranges.append(r)
        stack.append(r)
        r.start_ns = time.perf_counter_ns()  # last, so the bookkeeping above is not timed
        return r

    def close(self, r):
        r.end_ns = time.perf_counter_ns()
        stack = self._stack()
        if stack and stack[-1] is r:
            stack.pop()
        elif r in stack:  # closed out of order (an exception unwound past an inner range)
            del stack[stack.index(r):]

    def finished(self):
        return [r for r in self.ranges if r.end_ns is not None]


def _shapes(inputs):
    from kiln import Tensor

    return [list(a.shape) if isinstance(a, Tensor) else [] for a in inputs]


# The recorder of the window now recording (None: not recording), read by every wrapper.
active = None
_installed = []  # (owner, attribute, original or _ABSENT) for uninstall()
_ABSENT = object()


def _timed(name, fn):
    def op(*args, **kwargs):
        recorder = active
        if recorder is None or _C._active_fake_mode() is not None:
            return fn(*args, **kwargs)
        r = recorder.open(name, "cpu_op", args)
        try:
            return fn(*args, **kwargs)
        finally:
            recorder.close(r)

    op.__name__ = op.__qualname__ = getattr(fn, "__name__", name)
    # a module kiln._dynamo lists as holding ops, so a compiled call still records one graph node
    op.__module__ = getattr(fn, "__module__", None) if hasattr(fn, "__code__") else "kiln"
    op.__doc__ = getattr(fn, "__doc__", None)
    op.__wrapped__ = fn
    return op


def _is_op(value):
    if isinstance(value, _C._OpFunction):
        return True
    return callable(value) and getattr(value, "__module__", None) in _COMPOSITE_MODULES + ("kiln",) and \
        not isinstance(value, type) and hasattr(value, "__code__")


def _entry_points():
    """(owner, attribute, aten name) for every door a public op comes through."""
    import kiln
    from kiln import _composites, _order_stats, _set_ops

    names = {name for _, name, variants in _C._packets() if variants & 1}
    names.update(_composites.__all__, _order_stats.__all__, _set_ops.__all__, ["einsum"])
    for name in sorted(names):
        value = kiln.__dict__.get(name)
        if value is not None and _is_op(value) and not name.startswith("_"):
            yield kiln, name, name
    for name, value in sorted(kiln.Tensor.__dict__.items()):
        if not name.startswith("_") and (isinstance(value, _C._OpFunction) or
                                         getattr(value, "__module__", None) in _COMPOSITE_MODULES):
            yield kiln.Tensor, name, name
    for dunder, aten in _OPERATORS.items():
        if hasattr(kiln.Tensor, dunder):
            yield kiln.Tensor, dunder, aten


def _timed_overload(call):
    """OpOverload.__call__ / OpOverloadPacket.__call__, timed as "aten::<packet name>"."""

    def timed_call(self, *args, **kwargs):
        recorder = active
        if recorder is None or _C._active_fake_mode() is not None:
            return call(self, *args, **kwargs)
        packet = getattr(self, "_overloadpacket", self)
        r = recorder.open("aten::" + packet.__name__, "cpu_op", args)
        try:
            return call(self, *args, **kwargs)
        finally:
            recorder.close(r)

    timed_call.__wrapped__ = call
    return timed_call


_node_ranges = threading.local()  # per thread: (recorder, outer, inner) of the backward nodes running


def _observe_node(name, begin):
    """The autograd engine's report as it starts (begin) and ends each backward node."""
    stack = getattr(_node_ranges, "stack", None)
    if stack is None:
        stack = _node_ranges.stack = []
    if begin:
        recorder = active
        if recorder is None:
            stack.append(None)
            return
        outer = recorder.open("autograd::engine::evaluate_function: " + name, "cpu_op")
        stack.append((recorder, outer, recorder.open(name, "cpu_op")))
    elif stack:
        entry = stack.pop()
        if entry is not None:
            recorder, outer, inner = entry
            recorder.close(inner)
            recorder.close(outer)


def install():
    """Wraps every op entry point and watches the autograd engine (idempotent)."""
    if _installed:
        return
    _C._set_autograd_node_observer(_observe_node)
    import kiln
    from kiln import _ops

    for cls in (_ops.OpOverload, _ops.OpOverloadPacket):
        original = cls.__dict__["__call__"]
        _installed.append((cls, "__call__", original))
        cls.__call__ = _timed_overload(original)

    for owner, attr, aten in _entry_points():
        own = owner.__dict__.get(attr, _ABSENT) if owner is kiln.Tensor else owner.__dict__[attr]
        original = own if own is not _ABSENT else getattr(owner, attr)
        _installed.append((owner, attr, own))
        setattr(owner, attr, _timed("aten::" + aten, original))


def uninstall():
    """Puts every original entry point back."""
    if _installed:
        _C._set_autograd_node_observer(None)
    while _installed:
        owner, attr, original = _installed.pop()
        if original is _ABSENT:
            delattr(owner, attr)  # an operator inherited from TensorBase: its C slot again
        else:
            setattr(owner, attr, original)
