"""GuardBuilder: the guards a translation recorded, built into the C++ guard tree.

Each recorded guard names a source; the builder turns the source's path into nodes of a
RootGuardManager (kiln._C._dynamo.guards, dynamo/guards.h) — one node per path prefix, shared —
and adds the leaf check there. The tree is checked in C++ on every call of the frame before the
cached code runs. Sources that the frame cannot reach (a global of another module, seen while
inlining) are checked by a lambda guard at the root instead.
"""

import logging

from kiln._C._dynamo import guards as _guards
from kiln._dynamo.dynamic_ints import check_shape_guards
from kiln._logging import getArtifactLogger, trace_structured
from kiln._logging._metrics import dynamo_timed

guards_log = getArtifactLogger(__name__, "guards")
_MISSING = object()


class GuardBuilder:
    def __init__(self, f_globals):
        self.root = _guards.RootGuardManager(f_globals)
        self._managers = {}
        self._globals = None

    def globals_manager(self):
        if self._globals is None:
            self._globals = self.root.globals_dict_manager()
        return self._globals

    def manager(self, source):
        key = source.name()
        m = self._managers.get(key)
        if m is None:
            m = source.guard_manager(self)
            self._managers[key] = m
        return m

    def add(self, source, kind, arg, origin):
        text = f"{source.name()} (from {origin})" if origin else source.name()
        if not source.reachable():
            self.root.add_lambda_guard(_value_check(source, kind, arg), f"{kind}: {text}")
            return
        m = self.manager(source)
        if kind == "TENSOR_MATCH":
            example, sizes, strides = arg
            m.add_tensor_match_guard(example, sizes, strides, text)
        elif kind == "TYPE_MATCH":
            m.add_type_match_guard(arg, text)
        elif kind == "ID_MATCH":
            m.add_id_match_guard(arg, text)
        elif kind == "EQUALS_MATCH":
            m.add_equals_match_guard(arg, text)
        elif kind == "LENGTH_CHECK":
            m.add_length_check_guard(arg, text)
        elif kind == "DICT_KEYS":
            m.add_dict_keys_guard(list(arg), text)
        else:
            raise ValueError(f"unknown guard kind {kind}")


def _value_check(source, kind, arg):
    chain = []
    s = source
    while hasattr(s, "base"):
        chain.append(s)
        s = s.base
    root = s

    def get():
        value = root.module_globals.get(root.global_name, _MISSING)
        for step in reversed(chain):
            if value is _MISSING:
                return value
            if hasattr(step, "member"):
                value = getattr(value, step.member, _MISSING)
            else:
                try:
                    value = value[step.index]
                except (KeyError, IndexError, TypeError):
                    return _MISSING
        return value

    if kind == "ID_MATCH":
        return lambda _: get() is arg
    if kind == "TYPE_MATCH":
        return lambda _: type(get()) is arg
    if kind == "EQUALS_MATCH":
        return lambda _: (lambda v: type(v) is type(arg) and v == arg)(get())
    if kind == "LENGTH_CHECK":
        return lambda _: (lambda v: v is not _MISSING and len(v) == arg)(get())
    if kind == "DICT_KEYS":
        keys = list(arg)
        return lambda _: (lambda v: v is not _MISSING and list(v) == keys)(get())
    if kind == "TENSOR_MATCH":
        example, sizes, strides = arg
        meta = (type(example), example.dtype, str(example.device), example.requires_grad, tuple(example.shape),
                tuple(example.stride()))
        return lambda _: (lambda v: v is not _MISSING and (type(v), v.dtype, str(v.device), v.requires_grad,
                                                             tuple(v.shape), tuple(v.stride())) == meta)(get())
    raise ValueError(kind)


def build_guards(output, f_globals):
    """The RootGuardManager for a finished translation."""
    with dynamo_timed("build_guards"):
        return _build_guards(output, f_globals)


def _build_guards(output, f_globals):
    builder = GuardBuilder(f_globals)
    builder.root.add_global_state_guard("global state at compile time")
    for source, kind, arg, origin in output.guards.entries.values():
        builder.add(source, kind, arg, origin)
    if output.int_inputs:  # the guard tree binds symbols from tensors only: checked in Python
        builder.root.add_lambda_guard(check_shape_guards(output, f_globals), "SHAPE_ENV (symbolic ints): "
                                      + "; ".join(g.strip(" -") for g in output.shape_env.format_guards().splitlines()))
    elif output.shape_env.guards or output.dynamic_sources:
        builder.root.set_shape_env(output.shape_env, "shape guards")
    if guards_log.isEnabledFor(logging.DEBUG):
        guards_log.debug("GUARDS:\n%s", builder.root)
    trace_structured("guards", None, lambda: str(builder.root))
    return builder.root
