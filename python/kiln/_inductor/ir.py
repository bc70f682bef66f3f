"""Loop-level IR of kiln's Inductor: tensors as buffers or as lazy values with traced bodies.

Every value a graph computes is one of (C++: inductor/ir/values.h, Note [Values]):
- Buffer: memory the wrapper owns or receives (graph inputs, kernel outputs, fallback results),
  with a strided layout;
- Pointwise: a dtype, a shape and a body (Note [Bodies], inductor/ir/body.h): the expression of
  one element at symbolic indices, traced once from the lowering's `fn(ctx, indices) -> expr` by
  its constructor. Not yet computed; it becomes a kernel (is realized) only when something needs
  it in memory;
- Reduction: a reduction (sum, max, ..., welford) over one trailing axis of a traced source, with
  kept dimensions; realized alone, or fused with the pointwise code that reads it (the epilogue).

Indices are Affine (kiln._C._inductor.ir.Affine): offset + sum(coeff * loop variable). A body's
variables are its value's dimensions 0..n-1 (a reduction's source: its kept dimensions and "r",
variable -1); views (permute, expand, slice, select, unsqueeze) are affine maps of indices, so
they never copy. Expressions are kernel IR (kiln._C._inductor.kernel_ir.Expr); a body's reads of
other values are decided only where it is placed in a kernel (graph.py's KernelBuilder): a load
of the value's buffer, or the value's own body inlined. A body names the values it reads by
their `handle`; value_of(handle) finds one. Which values are realized is the graph's
`kiln._C._inductor.scheduler.Realization` (inductor/scheduler), which probes consult.
"""

import kiln
from kiln._C._inductor.ir import (Affine, Buffer, Indices, LoopSpace, Pointwise, Reduction, TraceCtx,  # noqa: F401
                                  Tracer, instantiate, make_group, value_of)

DTYPES = {kiln.float32: "f32", kiln.float64: "f64", kiln.int64: "i64", kiln.int32: "i32", kiln.bool: "bool",
          kiln.bfloat16: "bf16"}


def ir_dtype(dtype):
    name = DTYPES.get(dtype)
    if name is None:
        raise NotImplementedError(f"inductor: dtype {dtype} has no kernel type")
    return name


class V:
    """The graph being lowered (set by GraphLowering.run): lowerings that realize intermediate
    values themselves (a variance's partial statistics) reach it here. (The Reductions they make
    join its C++ state while GraphLowering.run has it current: Note [Sibling reductions].)"""

    graph = None


_VARS = [Affine.var(v) for v in range(-1, 64)]


def var(v):
    """The loop variable v as an Affine (-1: a reduction's inner variable r)."""
    return _VARS[v + 1] if v < 63 else Affine.var(v)


def contiguous_strides(shape):
    strides, running = [], 1
    for s in reversed(shape):
        strides.append(running)
        running *= max(s, 1)
    return list(reversed(strides))
