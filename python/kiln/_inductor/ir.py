"""Loop-level IR of kiln's Inductor: tensors as buffers or as lazy values with traced bodies.

Every value a graph computes is one of:
- Buffer: memory the wrapper owns or receives (graph inputs, kernel outputs, fallback results),
  with a strided layout;
- Pointwise: a dtype, a shape and a body (Note [Bodies], inductor/ir/body.h): the expression of
  one element at symbolic indices, traced once from the lowering's `fn(ctx, indices) -> expr`. Not
  yet computed; it becomes a kernel (is realized) only when something needs it in memory;
- Reduction: a reduction (sum, max, ..., welford) over one trailing axis of a traced source, with
  kept dimensions; realized alone, or fused with the pointwise code that reads it (the epilogue).

Indices are Affine (kiln._C._inductor.ir.Affine): offset + sum(coeff * loop variable). A body's
variables are its value's dimensions 0..n-1 (a reduction's source: its kept dimensions and "r",
variable -1); views (permute, expand, slice, select, unsqueeze) are affine maps of indices, so
they never copy. Expressions are kernel IR (kiln._C._inductor.kernel_ir.Expr); a body's reads of
other values are decided only where it is placed in a kernel (graph.py's KernelBuilder): a load
of the value's buffer, or the value's own body inlined.
"""

import itertools
import weakref

import kiln
from kiln._C._inductor import kernel_ir as kir
from kiln._C._inductor.ir import Affine, Indices, Tracer, instantiate  # noqa: F401  (re-exported)

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


# --- values as handles -----------------------------------------------------------------------------
# A body names the values it reads by int handles (the C++ IR holds no Python objects); the value
# whose body it is keeps them alive (`inputs`). The table holds weak references, each dropped
# with its value.
_VALUES = {}
_HANDLES = itertools.count()


def handle(value):
    h = value.__dict__.get("_handle")
    if h is None:
        h = value._handle = next(_HANDLES)
        _VALUES[h] = weakref.ref(value, lambda _, h=h: _VALUES.pop(h, None))
    return h


def value_of(h):
    return _VALUES[h]()


_VARS = [Affine.var(v) for v in range(-1, 64)]


def var(v):
    """The loop variable v as an Affine (-1: a reduction's inner variable r)."""
    return _VARS[v + 1] if v < 63 else Affine.var(v)


class TraceCtx:
    """What a lowering's function is called with, once, to trace its value's body: every read
    (`load` of a buffer, `read` of a lazy value, `reduction_value`) becomes one of the body's
    reads, decided where the body is placed; `inline` puts another value's body here (its code,
    never its buffer). `as_of`: the snapshot of realized values its lazy reads are decided by
    (RealizedAsOf), -1 for the kernel's current state."""

    def __init__(self, tracer, as_of=-1, values=None, inlined=None):
        self.tracer, self.as_of = tracer, as_of
        self.values = {} if values is None else values      # handle -> value read (kept alive)
        self.inlined = [] if inlined is None else inlined   # values whose bodies were put here

    def read(self, value, idx):
        h = handle(value)
        self.values[h] = value
        lazy = isinstance(value, Pointwise)
        return self.tracer.read(h, idx, self.as_of if lazy else -1)

    load = reduction_value = read

    def inline(self, value, idx):
        self.inlined.append(value)
        return self.tracer.inline(value.body, idx, as_of=self.as_of)

    def as_of_snapshot(self, as_of):
        return TraceCtx(self.tracer, as_of, self.values, self.inlined)


def _trace(fn, n_dims, reduced=False):
    """fn(ctx, indices[, r]) traced at its value's symbolic indices: (body, values read, inlined)."""
    ctx = TraceCtx(Tracer())
    idx = [var(k) for k in range(n_dims)]
    expr = fn(ctx, idx, var(-1)) if reduced else fn(ctx, idx)
    return ctx.tracer.finish(expr), tuple(ctx.values.values()), tuple(ctx.inlined)


class Buffer:
    """A tensor in memory: a name in the wrapper, its layout, and where it comes from."""

    def __init__(self, name, dtype, shape, stride, offset=0, origin="input"):
        # offset: the storage offset (elements) the wrapper gives a view. Loads ignore it: a
        # kernel's indices are relative to the tensor it receives, whose data pointer includes it.
        self.name, self.dtype = name, dtype
        self.shape, self.stride, self.offset = list(shape), list(stride), offset
        self.origin = origin

    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

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
    def __init__(self, dtype, shape, fn, ops, like=None):
        """fn(ctx, indices) -> expr is traced here, once; `like`: a Pointwise whose body this one
        shares (the same elements over other sizes: a value's first rows along expanded dims)."""
        self.dtype, self.shape = dtype, list(shape)
        if like is not None:
            self.body, self.inputs, self.inlined = like.body, like.inputs, like.inlined
        else:
            self.body, self.inputs, self.inlined = _trace(fn, len(self.shape))
        self.ops = set(ops)  # aten op names folded into it (kernel names)
        self.origins = set()  # (node position, stack trace) of the graph nodes that produced it
        # How it is realized when not simply over its own shape:
        self.space = None       # a LoopSpace: a value of reductions over that loop nest,
        #                         computed by their kernel (a variance from its partial sums)
        self.squeeze_of = None  # a value of the same elements with size-1 dimensions added or
        #                         removed (a reduction without keepdim): realized as a view of it

    def fn(self, ctx, idx):
        """This value's code at idx inside another's being traced (never read from a buffer)."""
        return ctx.inline(self, idx)


_ACC = kir.load(0, 0, [], 0)  # the accumulated value in a traced `finish`


class Reduction:
    """`kind` over the last axis of a source traced from `source_fn(ctx, kept indices, r)` (a
    Pointwise or Buffer of shape kept + [extent] read along r)."""

    def __init__(self, dtype, kept, extent, kind, source_fn, ops, keepdim_shape, finish=None):
        self.dtype, self.kept, self.extent, self.kind = dtype, list(kept), extent, kind
        self.source, self.inputs, self.inlined = _trace(source_fn, len(self.kept), reduced=True)
        self.ops = set(ops)
        self.origins = set()
        self.shape = list(keepdim_shape)  # the shape the graph sees (reduced axis kept, size 1)
        # finish(acc expr) -> expr (mean divides), traced over a stand-in load of the accumulator
        self.finish = None if finish is None else finish(_ACC)
        self.axis = None  # the reduced dimension of its keepdim shape (set by its lowering)
        if V.graph is not None:
            V.graph.reductions.append(self)

    def finished(self, acc):
        """The value read from the accumulator `acc` (an expr)."""
        return acc if self.finish is None else kir.substitute(self.finish, acc)

    @property
    def space(self):
        return LoopSpace(self.kept, self.extent, self.axis)


class Group:
    """Values one kernel computes together (a variance with its mean, max's values with their
    indices), given to each as `.group`. It holds them by weak references: a list of them on each
    was a reference cycle, which kept the graph's values alive until the cyclic collector ran."""

    __slots__ = ("_refs",)

    def __init__(self, values):
        self._refs = [weakref.ref(v) for v in values]

    def __iter__(self):
        return (v for v in (r() for r in self._refs) if v is not None)


def make_group(*values):
    group = Group(values)
    for v in values:
        v.group = group


def origins_of(value):
    """The origins of a value and of every value inlined into its body, recursively."""
    out, todo, seen = set(), [value], set()
    while todo:
        v = todo.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        out |= getattr(v, "origins", set())
        todo.extend(getattr(v, "inlined", ()))
    return out


def contiguous_strides(shape):
    strides, running = [], 1
    for s in reversed(shape):
        strides.append(running)
        running *= max(s, 1)
    return list(reversed(strides))


_PROBED_LOAD = kir.load(0, 0, [], 0)  # what a probe's loads read: the probe keeps their indices


class Probe:
    """Places a lazy value's body as a kernel would, without building one, recording what it
    reads: each load's element-offset coefficients per loop variable, the buffers it loads (views
    by their base, as ids), and whether it reads a reduction's value. Lazy values it reads are
    inlined unless realized (in the graph being lowered, or in the snapshot a read names)."""

    def __init__(self):
        self.coeffs, self.buffers, self.reads_reduction = [], set(), False

    def place(self, value, idx=None):
        """value's body (a Reduction: its source, over its kept dims and r) at its own indices."""
        if isinstance(value, Reduction):
            return instantiate(value.source, [var(k) for k in range(len(value.kept))], self._read, reduced=var(-1))
        return instantiate(value.body, idx if idx is not None else [var(k) for k in range(len(value.shape))], self._read)

    def _read(self, h, idx, as_of):
        value = value_of(h)
        if isinstance(value, Reduction):
            self.reads_reduction = True
            return kir.acc(0)
        if isinstance(value, Pointwise):
            buf = realized_in(V.graph, as_of).get(value)
            if buf is None:
                return instantiate(value.body, idx, self._read, as_of=as_of)
            value = buf
        self.coeffs.append(idx.element(value.stride).coeffs)
        while isinstance(value.origin, Buffer):
            value = value.origin
        self.buffers.add(id(value))
        return _PROBED_LOAD


def realized_in(graph, as_of):
    """Which values count as realized for a read: the graph's now, or the snapshot `as_of` names
    (RealizedAsOf); nothing without a graph."""
    if graph is None:
        return {}
    return graph.snapshots[as_of] if as_of >= 0 else graph.realized
