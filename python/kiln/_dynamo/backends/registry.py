"""The backend registry: names for compilers of captured graphs.

A backend is a callable (gm: GraphModule, example_inputs: list) -> callable. `register_backend`
names one; `lookup_backend` turns a name or a callable into the callable. "eager" runs the graph
as Python; "aot_eager" (common.py) runs it through AOTAutograd; "inductor" registers itself
when its package exists.
"""

import warnings

_BACKENDS = {}


def register_backend(compiler_fn=None, name=None, tags=()):
    """Registers `compiler_fn` under `name` (default: its __name__); usable as a decorator."""
    if compiler_fn is None:
        return lambda fn: register_backend(fn, name=name, tags=tags)
    if not callable(compiler_fn):
        raise TypeError(f"register_backend(): compiler_fn must be callable, got {type(compiler_fn).__name__}")
    name = name or compiler_fn.__name__
    if name in _BACKENDS and _BACKENDS[name] is not compiler_fn:
        raise ValueError(f"register_backend(): a backend named {name!r} is already registered")
    _BACKENDS[name] = compiler_fn
    compiler_fn._kiln_backend_name = name
    return compiler_fn


def lookup_backend(compiler_fn):
    if isinstance(compiler_fn, str):
        if compiler_fn not in _BACKENDS:
            _load_optional(compiler_fn)
        if compiler_fn not in _BACKENDS:
            raise ValueError(f"kiln.compile(): unknown backend {compiler_fn!r}; registered: {list_backends()}")
        return _BACKENDS[compiler_fn]
    if not callable(compiler_fn):
        raise TypeError(f"kiln.compile(): backend must be a name or a callable, got {type(compiler_fn).__name__}")
    return compiler_fn


def lookup_backend_or_default(compiler_fn):
    """lookup_backend, with "inductor" falling back to eager execution until it exists."""
    if compiler_fn == "inductor":
        _load_optional("inductor")
        if "inductor" not in _BACKENDS:
            return inductor_placeholder
    return lookup_backend(compiler_fn)


def list_backends(exclude_tags=()):
    import kiln._dynamo.backends.common  # noqa: F401  (registers the AOTAutograd backends)

    return sorted(_BACKENDS)


def _load_optional(name):
    if name in ("aot_eager", "aot_eager_min_cut", "aot_eager_decomp_partition"):
        import kiln._dynamo.backends.common  # noqa: F401  (registers them)
    if name == "inductor":
        try:
            import kiln._inductor  # noqa: F401  (registers "inductor" when it exists)
        except ImportError:
            pass


@register_backend
def eager(gm, example_inputs):
    """Runs the captured graph as Python (GraphModule.forward)."""
    return gm.forward


_warned_inductor = False


def inductor_placeholder(gm, example_inputs):
    """The default backend until Inductor lands: the graph runs eagerly (said once)."""
    global _warned_inductor
    if not _warned_inductor:
        _warned_inductor = True
        warnings.warn("kiln.compile: the 'inductor' backend is not built yet; captured graphs run eagerly "
                      "(backend='eager')", stacklevel=2)
    return gm.forward
