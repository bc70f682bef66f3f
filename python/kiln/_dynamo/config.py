"""kiln._dynamo.config: knobs of bytecode capture, under torch._dynamo.config's names.

Set them as attributes (`kiln._dynamo.config.recompile_limit = 16`); each is read at compile time.
`cache_size_limit` is recompile_limit's older name, kept as PyTorch keeps it: an alias of the same
setting, so reading or setting either reads or sets both.
"""

import sys as _sys
import types as _types

# Compiled entries kept per code object; past it the frame runs eagerly (with one warning that says
# why it recompiled and what keeps it compiled: cache_size.py).
recompile_limit = 8
# Tensor.item() and friends become graph values (unbacked symbols) instead of graph breaks.
capture_scalar_outputs = False
# Ops whose output shape depends on data (nonzero, masked_select, x[mask]) stay in the graph with
# an unbacked size instead of being graph breaks (PyTorch's default: a break).
capture_dynamic_output_shape_ops = False
# A tensor dimension that changes between calls recompiles once with a symbolic size.
automatic_dynamic_shapes = True
# First compiles treat every size as static (sizes become dynamic only when they change).
assume_static_by_default = True
# Errors inside the compiler (not the user's own) fall back to eager with one warning (unless
# fullgraph=True). On by default, unlike PyTorch's flag: an internal error must never cost a user
# a program that runs eagerly (Note [Internal errors] in convert_frame.py).
suppress_errors = True
# Graphs with fewer call nodes than this are not handed to the backend (they run as written).
min_graph_ops = 1
# Errors a compile raises (fullgraph=True's graph breaks, internal errors not suppressed) keep
# kiln's own frames and chained exceptions; otherwise they show the user's call chain only
# (user_errors.py). KILN_LOGS=+dynamo does the same.
verbose = False


class _Config(_types.ModuleType):
    """The module's class: aliases are properties over their setting (data descriptors, so
    monkeypatch and mock.patch restore them by setting, never by deleting), and the limit refuses
    a value that would fail only later, inside a compile, with kiln's own TypeError."""

    _ALIASES = {"cache_size_limit": "recompile_limit"}

    cache_size_limit = property(lambda self: self.recompile_limit,
                                lambda self, value: setattr(self, "recompile_limit", value),
                                doc="recompile_limit's older name (PyTorch keeps both)")

    def __setattr__(self, name, value):
        if name == "recompile_limit":
            if type(value) is not int:
                raise TypeError(f"kiln._dynamo.config.recompile_limit must be an int, got {type(value).__name__} "
                                f"({value!r})")
            if value < 0:
                raise ValueError(f"kiln._dynamo.config.recompile_limit must be >= 0, got {value}")
        super().__setattr__(name, value)

    def __delattr__(self, name):
        if name in _Config._ALIASES:
            raise AttributeError(f"kiln._dynamo.config.{name} is an alias of {_Config._ALIASES[name]}; "
                                 "it cannot be deleted")
        super().__delattr__(name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(_Config._ALIASES))


_sys.modules[__name__].__class__ = _Config
