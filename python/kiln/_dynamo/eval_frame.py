"""kiln.compile's entry points: the context that turns capture on around a call, disable, and
OptimizedModule.

Calling a compiled function sets this thread's frame callback (dynamo/eval_frame.h) for the
duration of the call, so the function's frame — and, after a graph break, the frames it calls —
go through convert_frame.compile_frame or the per-code cache. `disable` turns the callback off
around a call (backends' compiled functions run under it, so the compiler never captures itself).
"""

import functools
import weakref

import kiln
from kiln import _C
from kiln._dynamo.convert_frame import CompileContext

_set_eval_frame = _C._dynamo.set_eval_frame
# (id(backend), fullgraph, dynamic) -> CompileContext: cache entries are per context. Weak values:
# a context lives while a compiled wrapper or a cache entry holds it, and with it the backend (a
# CompileCounter keeps every graph it saw), so nothing here outlives the compiled functions.
_contexts = weakref.WeakValueDictionary()


def _wrap(fn, callback):
    """fn called with `callback` as this thread's frame callback (a C callable: no extra frame)."""
    wrapper = _C._dynamo._scoped_call(fn, callback)
    try:
        functools.update_wrapper(wrapper, fn)
    except (AttributeError, TypeError):
        pass
    return wrapper


def disable(fn=None, recursive=True):
    """Runs `fn` (or, as a decorator, the decorated function) with capture off."""
    if fn is None:
        return functools.partial(disable, recursive=recursive)
    if isinstance(fn, _C._dynamo.ScopedCall) and fn._kiln_callback is None:
        return fn
    return _wrap(fn, None)


def optimize(compiler_fn, *, fullgraph=False, dynamic=None, on_break=None, on_graph=None, on_compiled=None):
    """A decorator compiling functions with `compiler_fn` (a backend callable)."""
    if on_break is None and on_graph is None and on_compiled is None:  # same options: same cache entries
        key = (id(compiler_fn), fullgraph, dynamic)  # the context holds compiler_fn: the id stays its
        ctx = _contexts.get(key)
        if ctx is None:
            ctx = _contexts[key] = CompileContext(compiler_fn, fullgraph=fullgraph, dynamic=dynamic)
    else:
        ctx = CompileContext(compiler_fn, fullgraph=fullgraph, dynamic=dynamic, on_break=on_break, on_graph=on_graph,
                             on_compiled=on_compiled)

    def decorate(fn):
        if isinstance(fn, kiln.nn.Module):
            return OptimizedModule(fn, _wrap(fn.__call__, ctx))
        if not callable(fn):
            raise TypeError(f"kiln.compile(): expected a callable or an nn.Module, got {type(fn).__name__}")
        return _wrap(fn, ctx)

    return decorate


class OptimizedModule(kiln.nn.Module):
    """The compiled wrapper kiln.compile(module) returns: calls go through the compiled code;
    attributes, parameters and state_dict are the original module's (under `_orig_mod.`)."""

    def __init__(self, mod, compiled_call):
        super().__init__()
        self._orig_mod = mod
        self.__dict__["_kiln_compiled_call"] = compiled_call

    def __call__(self, *args, **kwargs):
        return self.__dict__["_kiln_compiled_call"](*args, **kwargs)

    def forward(self, *args, **kwargs):
        return self.__dict__["_kiln_compiled_call"](*args, **kwargs)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.__dict__["_modules"]["_orig_mod"], name)

    def __repr__(self):
        return f"OptimizedModule({self._orig_mod!r})"
