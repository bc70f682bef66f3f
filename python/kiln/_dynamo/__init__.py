"""kiln._dynamo: bytecode capture for kiln.compile (PyTorch's torch._dynamo).

    compiled = kiln.compile(fn, backend="eager")    # or kiln._dynamo.optimize(backend)(fn)
    kiln._dynamo.explain(fn)(x)                     # graphs, graph breaks and why
    kiln._dynamo.reset()                            # forget every compiled entry
    kiln._dynamo.bisect(fn, *args)                  # which backend, graph, pass breaks fn; a repro

How it works: dynamo/README.md (the frame hook, guards and resume code in C++) and the modules
here (symbolic_convert: the interpreter; variables/: trackers; output_graph: the graph;
convert_frame: breaks and the replacement code; guards: the guard tree; compiler_bisector,
debug_utils and repro/: the backend bisect, repros and the minifier).
"""

from kiln import _C
from kiln._dynamo import break_warnings, cache_size, config, convert_frame, exc, testing, utils  # noqa: F401
from kiln._dynamo.backends.registry import list_backends, lookup_backend, register_backend  # noqa: F401
from kiln._dynamo.eval_frame import OptimizedModule, disable, optimize  # noqa: F401
from kiln._dynamo.explain import ExplainOutput, explain  # noqa: F401

# Functions put in graphs as single calls instead of being inlined (allow_in_graph).
_allowed_functions = set()


def allow_in_graph(fn):
    """Makes calls to `fn` one call_function node instead of inlining its body (it must run on
    fake tensors)."""
    if not callable(fn):
        raise TypeError(f"allow_in_graph(): expected a callable, got {type(fn).__name__}")
    _allowed_functions.add(fn)
    return fn


def bisect(fn, *args, **kwargs):
    """The first backend, graph and compiler subsystem under which fn(*args, **kwargs) crashes or
    diverges from eager, and a minimal standalone repro (compiler_bisector.py)."""
    from kiln._dynamo.compiler_bisector import bisect as run

    return run(fn, *args, **kwargs)


def reset():
    """Drops every compiled entry, skip mark and remembered input size; compile IDs and compile
    times restart (counters do not, as in PyTorch)."""
    from kiln._guards import reset_compile_ids

    for code in list(convert_frame.seen_codes):
        _C._dynamo.reset_code(code)
    convert_frame.seen_codes.clear()
    convert_frame.frame_states.clear()
    convert_frame.static_frames.clear()
    convert_frame._resume_cache.clear()
    cache_size._warned.clear()
    break_warnings.reset()
    reset_compile_ids()
    utils.reset_frame_count()


def mark_dynamic(t, index, *, min=None, max=None):
    """Compiles with a symbolic size for dimension(s) `index` of `t` from the first compile."""
    import kiln

    if not isinstance(t, kiln.Tensor):
        raise TypeError(f"mark_dynamic(): expected a Tensor, got {type(t).__name__}")
    indices = [index] if isinstance(index, int) else list(index)
    for i in indices:
        if not -t.dim() <= i < t.dim():
            raise IndexError(f"mark_dynamic(): dimension {i} out of range for a {t.dim()}-d tensor")
    dims = set(getattr(t, "_dynamo_dynamic_indices", set()))
    dims |= {i % t.dim() for i in indices}
    t._dynamo_dynamic_indices = dims


def mark_static(t, index=None):
    """Undoes mark_dynamic for `index` (all dimensions when None)."""
    dims = set(getattr(t, "_dynamo_dynamic_indices", set()))
    if index is None:
        dims = set()
    else:
        dims.discard(index % t.dim())
    t._dynamo_dynamic_indices = dims
