"""Lowerings: the nodes of AOTAutograd's aten graphs as values of the loop IR (ir.py), by the C++
lowering table (inductor/lowering/registry.h, Note [The lowering table]) that the C++ graph walk
reads (inductor/graph, Note [Lowering a graph]): a node's op, its meta value and its arguments
(graph values for its tensors) in, its value out. Pointwise ops compose their inputs' index
functions, views remap indices, reductions reduce one axis at a time. An op without a lowering, or
a case its lowering does not cover, runs its eager kernel from the wrapper, named in the debug log.

Tests and the seeded bugs kiln._dynamo.bisect is tested with may put a Python lowering in an op's
place: OVERRIDES[op] = fn(out, *args, **kwargs) -> value (`pointwise` builds one).
"""

from kiln._C._inductor import lowering as _c
from kiln._C._inductor.lowering import make_pointwise
from kiln._inductor.ir import Buffer, Pointwise, Reduction
from kiln._ops import overload_named

OVERRIDES = {}


class Fallback(Exception):
    """This node runs its eager kernel (a C++ lowering's inductor::lowering::Fallback, raised in
    Python by the pointwise builders and the matmul template)."""


_has_lowering = {}  # op -> whether the table has it (asked for every node of every graph)


def has_lowering(target):
    """Whether the node's target (an OpOverload) has a lowering."""
    if target in OVERRIDES:
        return True
    known = _has_lowering.get(target)
    if known is None:
        name = getattr(target, "_full_name", None)
        known = _has_lowering[target] = name is not None and _c.has_lowering(name)
    return known


def lowered_ops():
    """The ops with a lowering (OpOverloads)."""
    return [overload_named(name) for name in _c.lowered_ops()] + [op for op in OVERRIDES if not has_lowering(op)]


def mm_template(out, a, b, bias=None, beta=1, alpha=1):
    """A matmul (addmm with a bias) as a generated kernel, the bias and any pointwise op after it
    its epilogue in the same kernel (max-autotune's generated alternative: inductor/lowering/nn.h)."""
    for v in (a, b, bias):
        if v is not None and not isinstance(v, (Buffer, Pointwise, Reduction)):
            raise Fallback(f"argument of type {type(v).__name__}")
    return _c.matmul_template(out.dtype, a, b, bias, float(beta), float(alpha))


def pointwise(name, out, inputs, combine, compute=None, load_as=None):
    """A Pointwise of out's shape whose value is combine(*input exprs) (inputs broadcast), each
    input read in `compute` (out's dtype by default) or in its entry of `load_as` where not None;
    a bfloat16 result rounded at every op (C++: inductor/lowering, Note [Pointwise values])."""
    return make_pointwise(name, out.dtype, list(out.shape), inputs, combine, compute, load_as)

