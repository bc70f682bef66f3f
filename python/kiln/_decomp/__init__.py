"""kiln._decomp: decompositions of every non-core aten op into the core aten op set.

Mirrors torch._decomp:

    >>> from kiln._decomp import core_aten_decompositions, get_decompositions
    >>> table = core_aten_decompositions()                  # OpOverload -> Python function
    >>> get_decompositions([kiln.ops.aten.silu, kiln.ops.aten.addcmul.default])

A decomposition is a Python function over kiln.ops.aten OpOverloads (core ops, or ops that
themselves decompose); tracers (make_fx(decomposition_table=...)) call it instead of the op, so
a graph traced with core_aten_decompositions() holds core ops only. The core set and the rule
for it are in README.md; the list itself is tensor/ops/core_ops.cc (Tag.core on the op).
"""

from kiln._ops import OpOverload, OpOverloadPacket, Tag, ops

__all__ = ["decomposition_table", "register_decomposition", "get_decompositions", "core_aten_decompositions"]

# Every registered decomposition, OpOverload -> function.
decomposition_table = {}


def _overloads(op):
    if isinstance(op, OpOverload):
        return [op]
    if isinstance(op, OpOverloadPacket):
        return [getattr(op, name) for name in op.overloads()]
    raise TypeError(f"register_decomposition: expected an OpOverload or OpOverloadPacket, got {type(op).__name__}")


def register_decomposition(aten_op, registry=None):
    """Decorator: registers the function as the decomposition of `aten_op` (an OpOverload, an
    OpOverloadPacket meaning all its overloads, or a list of them) in `registry`
    (decomposition_table by default). Registering one overload twice raises RuntimeError."""
    table = decomposition_table if registry is None else registry
    targets = aten_op if isinstance(aten_op, (list, tuple)) else [aten_op]

    def decorator(fn):
        for t in targets:
            for op in _overloads(t):
                if op in table:
                    raise RuntimeError(f"duplicate registrations for {op}")
                table[op] = fn
        return fn

    return decorator


def get_decompositions(aten_ops, type=None):
    """The decompositions of the given ops (OpOverloads, or OpOverloadPackets meaning each of
    their overloads that has one), as a dict OpOverload -> function."""
    if type is not None and type != "post_autograd":
        raise ValueError(f"get_decompositions: unknown decomposition type {type!r}")
    result = {}
    for op in aten_ops:
        for o in _overloads(op):
            if o in decomposition_table:
                result[o] = decomposition_table[o]
    return result


def core_aten_decompositions():
    """Every decomposition down to the core aten op set: one per non-core functional op."""
    return {op: fn for op, fn in decomposition_table.items() if Tag.core not in op.tags}


# The decompositions register themselves on import.
from kiln._decomp import decompositions  # noqa: E402,F401
from kiln._decomp import decompositions_nn  # noqa: E402,F401
from kiln._decomp import decompositions_loss  # noqa: E402,F401
from kiln._decomp import decompositions_shape  # noqa: E402,F401
from kiln._decomp import decompositions_linalg  # noqa: E402,F401
from kiln._decomp import decompositions_complex  # noqa: E402,F401
from kiln._decomp import element_functions  # noqa: E402,F401  (last: the ops no module above spells out)
