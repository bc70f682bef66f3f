"""Loop-level IR of kiln's Inductor: tensors as buffers or as lazy index -> value functions.

Every value a graph computes is one of:
- Buffer: memory the wrapper owns or receives (graph inputs, kernel outputs, fallback results),
  with a strided layout; read at per-dimension indices, at the Affine element offset `index` gives;
- Pointwise: a dtype, a shape and `fn(indices) -> expr`, not yet computed; it becomes a kernel
  (is realized) only when something needs it in memory;
- Reduction: a reduction (sum, max, ..., welford) over one trailing axis of a lazy input, with
  kept dimensions; realized alone, or fused with the pointwise code that reads it (the epilogue).

Indices are Affine: offset + sum(coeff * loop variable). A kernel's loop variables are its outer
dimensions 0..m-1 and its inner loop ("r", variable -1); views (permute, expand, slice, select,
unsqueeze) are affine maps of indices, so they never copy. Expressions are kernel IR
(kiln._C._inductor.kernel_ir.Expr, codegen/kernel_ir.h), built by the lowerings' functions.
"""

import kiln
from kiln._C._inductor import kernel_ir as kir

DTYPES = {kiln.float32: "f32", kiln.float64: "f64", kiln.int64: "i64", kiln.int32: "i32", kiln.bool: "bool",
          kiln.bfloat16: "bf16"}


def ir_dtype(dtype):
    name = DTYPES.get(dtype)
    if name is None:
        raise NotImplementedError(f"inductor: dtype {dtype} has no kernel type")
    return name


class V:
    """The graph being lowered (set by GraphLowering.run): lowerings that realize intermediate
    values themselves (a variance's partial statistics) reach it here, and it sees each
    Reduction made (horizontal fusion of sibling reductions, graph.py)."""

    graph = None


class Affine:
    """offset + sum(coeffs[v] * v) over loop variables v (ints; -1 is the inner loop)."""

    __slots__ = ("offset", "coeffs")

    def __init__(self, offset=0, coeffs=None):
        self.offset, self.coeffs = offset, dict(coeffs or {})

    @staticmethod
    def var(v):
        return Affine(0, {v: 1})

    def scale(self, k):
        return Affine(self.offset * k, {v: c * k for v, c in self.coeffs.items()})

    def __add__(self, other):
        if isinstance(other, int):
            return Affine(self.offset + other, self.coeffs)
        coeffs = dict(self.coeffs)
        for v, c in other.coeffs.items():
            coeffs[v] = coeffs.get(v, 0) + c
        return Affine(self.offset + other.offset, coeffs)

    def is_const(self):
        return not any(self.coeffs.values())

    def ir_index(self, n_outer):
        return (self.offset, [self.coeffs.get(k, 0) for k in range(n_outer)], self.coeffs.get(-1, 0))


class Buffer:
    """A tensor in memory: a name in the wrapper, its layout, and where it comes from."""

    def __init__(self, name, dtype, shape, stride, offset=0, origin="input"):
        # offset: the storage offset (elements) the wrapper gives a view; loads ignore it (below)
        self.name, self.dtype = name, dtype
        self.shape, self.stride, self.offset = list(shape), list(stride), offset
        self.origin = origin

    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    def index(self, indices):
        """The element offset of per-dimension indices. Offsets are relative to the tensor the
        kernel receives (its data pointer already includes its storage offset), so a buffer's own
        offset never enters the index."""
        index = Affine(0)
        for i, s in zip(indices, self.stride):
            index = index + i.scale(s)
        return index

    def is_contiguous(self):
        return self.stride == contiguous_strides(self.shape)

    def __repr__(self):
        return f"{self.name}: {self.dtype} {self.shape}"


class LoopSpace:
    """A reduction's iteration space: outer loops over the `kept` dimensions, the inner loop over
    `extent` elements of the reduced axis (`axis`). Equal spaces are one loop nest."""

    __slots__ = ("kept", "extent", "axis")

    def __init__(self, kept, extent, axis):
        self.kept, self.extent, self.axis = list(kept), extent, axis

    def _key(self):
        return tuple(map(repr, self.kept)), repr(self.extent), self.axis

    def __eq__(self, other):
        return isinstance(other, LoopSpace) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        return f"LoopSpace(kept={self.kept}, extent={self.extent}, axis={self.axis})"


class Pointwise:
    def __init__(self, dtype, shape, fn, ops):
        self.dtype, self.shape, self.fn = dtype, list(shape), fn
        self.ops = set(ops)  # aten op names folded into it (kernel names)
        # How it is realized when not simply over its own shape:
        self.space = None       # a LoopSpace: a value of reductions over that loop nest,
        #                         computed by their kernel (a variance from its partial sums)
        self.squeeze_of = None  # a value of the same elements with size-1 dimensions added or
        #                         removed (a reduction without keepdim): realized as a view of it


class Reduction:
    """`kind` over the last axis of `source` (a Pointwise or Buffer of shape kept + [extent])."""

    def __init__(self, dtype, kept, extent, kind, source_fn, ops, keepdim_shape, finish=None):
        self.dtype, self.kept, self.extent, self.kind = dtype, list(kept), extent, kind
        self.source_fn = source_fn  # fn(kept indices, inner index) -> expr
        self.ops = set(ops)
        self.shape = list(keepdim_shape)  # the shape the graph sees (reduced axis kept, size 1)
        self.finish = finish  # fn(acc expr) -> expr (mean divides)
        self.axis = None  # the reduced dimension of its keepdim shape (set by its lowering)
        if V.graph is not None:
            V.graph.reductions.append(self)


    @property
    def space(self):
        return LoopSpace(self.kept, self.extent, self.axis)


def contiguous_strides(shape):
    strides, running = [], 1
    for s in reversed(shape):
        strides.append(running)
        running *= max(s, 1)
    return list(reversed(strides))


_PROBED_LOAD = kir.load(0, 0, [], 0)  # what a probe's loads read: the probe keeps their indices


class Probe:
    """A stand-in KernelBuilder: evaluates a lazy value's expression without building a kernel,
    recording what it reads: each load's index coefficients per loop variable, the buffers it
    loads (views by their base, as ids), and whether it reads a reduction's value."""

    def __init__(self):
        self.coeffs, self.buffers, self.reads_reduction = [], set(), False

    def load(self, buf, idx):
        affine = buf.index(idx)
        self.coeffs.append(affine.coeffs)
        while isinstance(buf.origin, Buffer):
            buf = buf.origin
        self.buffers.add(id(buf))
        return _PROBED_LOAD

    def reduction_value(self, red, idx):
        self.reads_reduction = True
        return kir.acc(0)
