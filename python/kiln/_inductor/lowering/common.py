"""What every lowering module shares: the registry (LOWERINGS, register, lower), Fallback and
ViewOfUnrealized, and what calling the C++ lowerings takes (value_arg, graph_context, formed, the
`pointwise` builder)."""

import kiln
from kiln._C._inductor.lowering import make_pointwise
from kiln._inductor.ir import V, Buffer, Pointwise, Reduction

aten = kiln.ops.aten
LOWERINGS = {}


class Fallback(Exception):
    """This node runs its eager kernel."""


class ViewOfUnrealized(Fallback):
    """A view lowering met a value it cannot index as that view (not realized, or not contiguous):
    GraphLowering realizes the value in its meta layout and lowers the view again."""


def register(*ops):
    """Registers fn for the given overloads, as objects or "name.overload" strings (names kiln's
    registry lacks are skipped)."""
    def wrap(fn):
        for op in ops:
            if isinstance(op, str):
                packet, overload = op.split(".")
                op = getattr(getattr(aten, packet, None), overload, None) if hasattr(aten, packet) else None
                if op is None:
                    continue
            LOWERINGS[op] = fn
        return fn

    return wrap


# --- calling the C++ lowerings (inductor/lowering) ------------------------------------------------
def graph_context():
    """The GraphContext of the graph being lowered (None outside one)."""
    return V.graph.lowering_context if V.graph is not None else None


def formed(value):
    """value, after the kernels its lowering formed (partial statistics it realized) joined the
    graph's records, in program order."""
    return V.graph._formed(value) if V.graph is not None else value


# --- values the C++ lowerings take -----------------------------------------------------------------
def value_arg(x):
    """x when it is a value of the graph (the argument a C++ lowering takes); this node runs its
    eager kernel otherwise."""
    if not isinstance(x, (Buffer, Pointwise, Reduction)):
        raise Fallback(f"argument of type {type(x).__name__}")
    return x


def pointwise(name, out, inputs, combine, compute=None, load_as=None):
    """A Pointwise of out's shape whose value is combine(*input exprs) (inputs broadcast), each
    input read in `compute` (out's dtype by default) or in its entry of `load_as` where not None;
    a bfloat16 result rounded at every op (C++: inductor/lowering, Note [Pointwise values])."""
    return make_pointwise(name, out.dtype, list(out.shape), inputs, combine, compute, load_as)


def lower(target, out, args, kwargs):
    fn = LOWERINGS.get(target)
    if fn is None:
        raise Fallback(f"no lowering for {target}")
    if _touches_complex(out) or any(_touches_complex(a) for a in (*args, *kwargs.values())):
        # the kernels know real numbers only: a complex value is computed by its eager kernel
        raise Fallback("complex dtype")
    return fn(out, *args, **kwargs)


def _touches_complex(v):
    kind = type(v)
    if kind in _PLAIN:  # the usual arguments, answered without an attribute look-up
        return False
    if kind is list or kind is tuple:
        return any(_touches_complex(x) for x in v)
    dtype = getattr(v, "dtype", None)
    return dtype is not None and getattr(dtype, "is_complex", False)


_PLAIN = frozenset({int, float, bool, str, type(None)})
