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
other values are decided only where it is placed in a kernel (the C++ Scheduler's): a load
of the value's buffer, or the value's own body inlined. A body names the values it reads by
their `handle`; value_of(handle) finds one. Which values are realized is the graph's
`kiln._C._inductor.scheduler.Realization` (inductor/scheduler), which probes consult.
"""

from kiln._C._inductor.ir import Affine, Buffer, LoopSpace, Pointwise, Reduction, kernel_dtype, make_group  # noqa: F401


def ir_dtype(dtype):
    """The kernel IR type of a dtype's elements ("f32", ...; inductor/ir/values.h's KernelDType):
    NotImplementedError for one kernels cannot hold (its op runs its eager kernel)."""
    return kernel_dtype(dtype)
