"""Lowerings: aten ops of AOTAutograd's graphs as Pointwise/Reduction values (ir.py).

Each lowering receives the values of the node's arguments (Buffers, lazy values, Python scalars)
and the node's fake output (its dtype and shape), and returns a lazy value. Pointwise ops compose
their inputs' index functions; views remap indices; reductions reduce one axis at a time. An op
without a lowering, or a case a lowering does not cover (it raises Fallback), runs its eager
kernel from the wrapper (graph.py), named in the debug log.

    common.py      the registry (LOWERINGS, register, lower), Fallback, loaders, `pointwise`
    pointwise.py   math, comparisons, activations and their backwards, copies, fills
    views.py       permute, transpose, expand, squeeze, slice, select (C++), view
    reductions.py  sum, mean, prod, amax/amin, any/all, arg*, norms, softmax, variance (C++)
    nn.py          the matmul template (max-autotune) and max pooling (C++)
"""

from kiln._inductor.ir import V  # noqa: F401  (lowerings that realize values reach the graph here)
from kiln._inductor.lowering import nn, pointwise, reductions, views  # noqa: F401  (they register)
from kiln._inductor.lowering.common import LOWERINGS, Fallback, ViewOfUnrealized, lower  # noqa: F401
from kiln._inductor.lowering.nn import mm_template  # noqa: F401
