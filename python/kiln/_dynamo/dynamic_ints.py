"""Automatic dynamic ints: an int argument whose value changed between compiles becomes a symbol.

An int argument (`def step(x, n)`) is a constant of the graph, guarded by equality, so each new
value compiled the frame again until config.recompile_limit stopped it. As PyTorch's automatic
dynamic shapes do for ints, the second distinct value compiles the int as a SymInt instead: a
graph input (placeholder `l_n_`) backed by a ShapeEnv symbol with the value as its hint, so later
values reuse the entry. Uses that need the value (`range(n)`, `if n > 3`) add shape guards as
symbolic sizes do; 0 and 1 stay constants (as PyTorch specialises them); dynamic=True makes ints
symbolic from the first compile, dynamic=False never.

The guard tree binds symbols from tensor sizes only (dynamo/guards.cc), so a frame with a symbolic
int checks its shape guards in Python instead (check_shape_guards): each symbol bound from the
int it stands for, or from the tensor size or stride it names, then the ShapeEnv's guards.
"""

from kiln._dynamo import config
from kiln._dynamo.source import AttrSource, GetItemSource, GlobalSource, LocalSource

# frame_state key of an int argument's values: (_INT, source name) -> (value, None), value None
# once compiles saw it differ (a 2-tuple, as the tensors' (sizes, strides) entries are)
_INT = "int"


def wants_symbol(output, source, value):
    """Whether the int `value` read from `source` compiles as a symbol in this translation."""
    if type(value) is not int or not isinstance(source, LocalSource) or value in (0, 1):
        return False
    output.int_values[source.name()] = value
    if output.dynamic is False:
        return False
    if output.dynamic is True:
        return True
    seen = output.frame_state.get((_INT, source.name()))
    return config.automatic_dynamic_shapes and seen is not None and seen[0] != value


def remember_ints(state, output):
    """After a translation: each int argument's value, None where compiles saw it differ."""
    for name, value in output.int_values.items():
        seen = state.get((_INT, name))
        state[(_INT, name)] = (value if seen is None or seen[0] == value else None, None)
    for name in output.int_inputs:
        state[(_INT, name)] = (None, None)


def check_shape_guards(output, f_globals):
    """A root lambda guard: callable(f_locals) -> whether the ShapeEnv's guards hold for this call
    (symbols bound from int arguments and from tensor sizes and strides)."""
    shape_env = output.shape_env
    bindings = []  # (source, kind, symbol names per position); inputs the graph no longer reads too
    for source, symbol in output.int_symbols.values():  # (a guard may name them: `range(n)` specialised)
        bindings.append((source, "int", symbol))
    for source, kind, arg, _ in output.guards.entries.values():
        if kind == "TENSOR_MATCH":  # sizes and strides as named when the input was made
            _, sizes, strides = arg
            names = ([s if isinstance(s, str) else None for s in sizes],
                     [s if isinstance(s, str) else None for s in strides])
            if any(names[0]) or any(names[1]):
                bindings.append((source, "tensor", names))
    defaults = dict(shape_env.var_to_val)
    replaced = set(shape_env.replacements)

    def check(f_locals):
        values = {}

        def bind(name, value):
            if name is None:  # an exact size or stride: TENSOR_MATCH checks it
                return True
            return values.setdefault(name, value) == value

        try:
            for source, kind, names in bindings:
                value = _read(source, f_locals, f_globals)
                if kind == "int":
                    if type(value) is not int or not bind(names, value):
                        return False
                else:
                    sizes, strides = names
                    if not all(bind(n, v) for n, v in zip(sizes, value.shape)) or \
                            not all(bind(n, v) for n, v in zip(strides, value.stride())):
                        return False
            for name, value in defaults.items():  # a symbol nothing names here (unbacked): its hint
                if name not in values and name not in replaced:
                    values[name] = value
            return bool(shape_env._evaluate_guards(values))
        except Exception:  # noqa: BLE001 - a guard that cannot be evaluated fails: recompile
            return False

    return check


def _read(source, f_locals, f_globals):
    """The value `source` names in this call's frame."""
    if isinstance(source, LocalSource):
        return f_locals[source.local_name]
    if isinstance(source, GlobalSource):
        return f_globals[source.global_name]
    if isinstance(source, AttrSource):
        return getattr(_read(source.base, f_locals, f_globals), source.member)
    if isinstance(source, GetItemSource):
        return _read(source.base, f_locals, f_globals)[source.index]
    return source.module_globals[source.global_name]  # ForeignGlobalSource
