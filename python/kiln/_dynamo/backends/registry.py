"""The backend registry: names for compilers of captured graphs.

A backend is a callable (gm: GraphModule, example_inputs: list) -> callable. `register_backend`
names one; `lookup_backend` turns a name or a callable into the callable. "eager" runs the graph
as Python; "aot_eager" and its variants (common.py) run it through AOTAutograd; "inductor"
(inductor.py) through kiln._inductor. Those modules are imported when a name needs them.
"""

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


def list_backends(exclude_tags=()):
    _load_optional(None)
    return sorted(_BACKENDS)


def _load_optional(name):
    """Imports the modules that register backends (all of them when name is None)."""
    if name is None or name in ("aot_eager", "aot_eager_min_cut", "aot_eager_decomp_partition"):
        import kiln._dynamo.backends.common  # noqa: F401  (registers them)
    if name is None or name == "inductor":
        import kiln._dynamo.backends.inductor  # noqa: F401  (registers it)


@register_backend
def eager(gm, example_inputs):
    """Runs the captured graph as Python (GraphModule.forward)."""
    return gm.forward

