"""Reduction lowerings: sum, mean, prod, amax/amin, any/all, argmax/argmin, norms, logsumexp,
softmax, and variance from Welford's partial statistics. One axis is reduced at a time; adjacent
reduced axes merge into one loop where every load walks them as one."""

import kiln
from kiln._C._inductor import kernel_ir as kir
from kiln._C._inductor.kernel_ir import ops
from kiln._C._inductor.scheduler import merge_dims
from kiln._inductor.ir import V, Affine, Buffer, LoopSpace, Pointwise, Reduction, ir_dtype, make_group
from kiln._inductor.lowering.common import (INF, Fallback, ViewOfUnrealized, aten, loader, opmath,
                                            ops_of, pointwise, register)
from kiln._inductor.lowering.views import strided_view


def _reduced_axes(x, dims):
    """dims (an int, a list, or None/[] for every dimension) as sorted non-negative axes."""
    n = len(x.shape)
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(n))
    return sorted({d % n for d in (dims if isinstance(dims, (list, tuple)) else [dims])}) if n else []


# Note [Outer reductions]: a loop kernel reduces each output separately, so a sum over a dim outer
# to the kept ones (a Linear bias's gradient, g.sum(0); layer norm's weight gradient) walks a
# strided column per output, one element per cache line: 8.7 ms for a 1024x1024 bias gradient in
# the GPT step's backward, where eager's kernel adds whole rows into column accumulators in 0.1 ms
# (Note [Outer sums] in tensor/ops/reduce.cc). Such a reduction runs eager's kernel instead, its
# input realized, where the registry says that op's kernel reduces outer dimensions by whole rows
# for the result's dtype (Op::has_outer_reduction_kernel, Note [Outer reduction kernels] in
# tensor/dispatcher.h: sum and mean for every dtype, a float amax or amin, whose extreme comes
# down whole rows: x.amax(0) of a 1024x512 float32 x took 1.0 ms as a loop kernel); the results
# are then eager's too. A lowering names that op as `eager`.


def _is_outer_reduction(shape, axis):
    inner = 1
    for s in shape[axis + 1:]:
        if not isinstance(s, int):
            return False
        inner *= s
    return isinstance(shape[axis], int) and shape[axis] >= 8 and inner >= 8


def _reduce(out, x, dims, keepdim, kind, name, finish=None, eager=None):
    shape = list(x.shape)
    dims = _reduced_axes(x, dims)
    if not dims:  # a 0-d tensor: its one element, finished (a mean divides by 1, a variance by 1 - correction)
        return pointwise(name, out, [x], finish or (lambda a: a))
    if len(dims) > 1:
        merged = merge_reduced_dims(x, dims)
        if merged is not None:  # adjacent reduced axes of a buffer read as one (longer inner loops)
            xm, mdims, to_merged = merged
            keep = [1 if d in mdims else s for d, s in enumerate(xm.shape)]
            red = _reduce(_Like(out.dtype, keep), xm, mdims, True, kind, name, finish, eager)
            return _read_merged(out, red, dims, keepdim, len(shape), to_merged)
        return _reduce_axes(out, x, dims, keepdim, kind, name, finish, eager)
    axis = dims[0]
    if eager is not None and eager.has_outer_reduction_kernel(out.dtype) and _is_outer_reduction(shape, axis):
        raise Fallback("a reduction over an outer dim: eager's column accumulators (Note [Outer reductions])")
    kept = shape[:axis] + shape[axis + 1:]
    keep_shape = shape[:axis] + [1] + shape[axis + 1:]
    # sum and prod accumulate in out's compute dtype (float32 for bfloat16: a bfloat16 partial
    # result read back would be rounded)
    ld = loader(x, opmath(ir_dtype(out.dtype)) if kind in ("sum", "prod") else None)

    def source(ctx, kept_idx, r):
        return ld(ctx, kept_idx[:axis] + [r] + kept_idx[axis:])

    red = Reduction(out.dtype, kept, shape[axis], kind, source, ops_of(x) | {name}, keep_shape, finish)
    red.axis = axis
    if keepdim:
        return red
    value = Pointwise(out.dtype, out.shape,
                      lambda ctx, idx: ctx.reduction_value(red, idx[:axis] + [Affine(0)] + idx[axis:]), red.ops)
    value.squeeze_of = red
    return value


def merge_reduced_dims(x, dims):
    """x (a Buffer or Pointwise) seen with each run of adjacent reduced axes merged into one axis,
    when its strides (a lazy value: every load's) allow (NCHW's H and W for batch norm): (view,
    its reduced axes, a map from indices of the keepdim result to indices of the merged keepdim
    result); None when nothing merges. C++: merge_dims (inductor/scheduler/scheduler.h; a lazy
    value is computed as the probe saw it, values realized later recomputed, Note [Realized as of])."""
    if not isinstance(x, (Buffer, Pointwise)):
        return None
    found = merge_dims(x, set(dims), V.graph.state if V.graph is not None else None)
    if found is None:
        return None
    view, groups = found
    m_dims = [k for k, (_, reduced) in enumerate(groups) if reduced]

    def to_merged(idx):  # idx: per original axis (reduced ones are 0 in a keepdim result)
        return [Affine(0) if reduced else idx[axes[0]] for axes, reduced in groups]

    return view, m_dims, to_merged


def _read_merged(out, red, dims, keepdim, ndim, to_merged):
    """The result of a reduction over merged axes, seen in the original (keepdim or not) shape."""
    reduced = set(dims)

    def fn(ctx, idx):
        if keepdim:
            full = list(idx)
        else:
            it = iter(idx)
            full = [Affine(0) if d in reduced else next(it) for d in range(ndim)]
        return ctx.reduction_value(red, to_merged(full)) if isinstance(red, Reduction) else \
            red.fn(ctx, to_merged(full))

    value = Pointwise(out.dtype, out.shape, fn, red.ops)
    value.squeeze_of = red
    return value


class _Like:
    """The dtype and shape of an intermediate result (what lowerings read from `out`)."""

    def __init__(self, dtype, shape):
        self.dtype, self.shape = dtype, list(shape)


def acc_dtype(dtype):
    """The dtype of intermediate results towards a `dtype` result: float32 for bfloat16 (partial
    sums, means, maxima realized as buffers keep their precision), else dtype itself."""
    return kiln.float32 if dtype == kiln.bfloat16 else dtype


def _reduce_axes(out, x, dims, keepdim, kind, name, finish, eager):
    """A reduction over several axes as one reduction per axis, the last axis first, each keeping
    its axis (size 1) so the others keep their positions; valid for sum, prod, max and min (and
    mean, whose finish divides by the whole count at the end)."""
    shape = list(x.shape)
    value = x
    for i, axis in enumerate(reversed(dims)):
        shape[axis] = 1
        last = i == len(dims) - 1
        value = _reduce(_Like(out.dtype if last else acc_dtype(out.dtype), shape), value, [axis], True, kind, name,
                        finish if last else None, eager)
    if keepdim:
        return value
    reduced = set(dims)

    def fn(ctx, idx):
        it = iter(idx)
        full = [Affine(0) if d in reduced else next(it) for d in range(len(shape))]
        return ctx.reduction_value(value, full)

    result = Pointwise(out.dtype, out.shape, fn, value.ops)
    result.squeeze_of = value
    return result


@register("sum.dim_IntList")
def _sum(out, x, dims=None, keepdim=False, dtype=None):
    return _reduce(out, x, dims, keepdim, "sum", "sum", eager=aten.sum.dim_IntList)


@register("sum.default")
def _sum_all(out, x, dtype=None):
    return _reduce(out, x, None, False, "sum", "sum", eager=aten.sum.dim_IntList)


@register("mean.dim")
def _mean(out, x, dims=None, keepdim=False, dtype=None):
    n = len(x.shape)
    axes = _reduced_axes(x, dims)
    count = 1
    for a in axes:
        count *= x.shape[a]
    d = opmath(ir_dtype(out.dtype))  # a bfloat16 count above 256 would be rounded
    known = V.graph.statistics.get((x.handle, tuple(sorted(set(axes))))) if V.graph is not None else None
    if known is not None and known[0].dtype == out.dtype:  # computed with a variance already
        mean_keep, to_merged, merged = known
        return _from_keepdim(out, mean_keep, sorted(set(axes)), keepdim, n, to_merged, merged)
    return _reduce(out, x, dims, keepdim, "sum", "mean", finish=lambda acc: ops.div(acc, kir.const(float(count), d)),
                   eager=aten.mean.dim)


@register("amax.default")
def _amax(out, x, dims=(), keepdim=False):
    return _reduce(out, x, dims, keepdim, "max", "amax", eager=aten.amax.default)


@register("amin.default")
def _amin(out, x, dims=(), keepdim=False):
    return _reduce(out, x, dims, keepdim, "min", "amin", eager=aten.amin.default)


@register("prod.dim_int")
def _prod(out, x, dim, keepdim=False, dtype=None):
    return _reduce(out, x, [dim], keepdim, "prod", "prod")


@register("prod.default")
def _prod_all(out, x, dtype=None):
    return _reduce(out, x, None, False, "prod", "prod")


# max()/min() over all elements keep the later of equal values, as PyTorch's kernels do (a
# per-axis reduction, last axis first, keeps the last in row-major order): [0., -0.].max() is -0.
@register("max.default")
def _max_all(out, x):
    return _reduce(out, x, None, False, "max_last", "max")


@register("min.default")
def _min_all(out, x):
    return _reduce(out, x, None, False, "min_last", "min")


def _keep_shape(x, axes):
    return [1 if d in axes else s for d, s in enumerate(x.shape)]


def _at_reduced(idx, axes):
    """Indices into a keepdim result (size 1 along `axes`) from indices of the full shape."""
    return [Affine(0) if d in axes else i for d, i in enumerate(idx)]


def _drop_axes(out, value, axes, keepdim, name, post=None, compute=None):
    """out from `value`, a keepdim-shaped lazy result: post(expr) of it, with the reduced axes
    dropped unless keepdim."""
    ld = loader(value, compute)
    n = len(value.shape)

    def fn(ctx, idx):
        if not keepdim:
            it = iter(idx)
            idx = [Affine(0) if d in axes else next(it) for d in range(n)]
        e = ld(ctx, idx)
        return post(e) if post else e

    d = ir_dtype(out.dtype)
    cast = (lambda ctx, idx: kir.cast(fn(ctx, idx), d)) if compute and compute != d else fn
    return Pointwise(out.dtype, out.shape, cast, ops_of(value) | {name})


def _count(x, dims, test, name):
    """The number of elements where test(a) (a bool expr) holds along dims: int64, keepdim."""
    axes = _reduced_axes(x, dims)
    hits = pointwise(name, _Like(kiln.bool, x.shape), [x], test, ir_dtype(x.dtype))
    return axes, _reduce(_Like(kiln.int64, _keep_shape(x, axes)), hits, axes, True, "sum", name)


def _nonzero(a):
    return kir.cast(a, "bool")  # NaN counts as nonzero, as in C++


def _any_all(name):
    """any: a nonzero element; all: no zero element. Counted, so empty gives False and True."""
    test = _nonzero if name == "any" else (lambda a: ops.logical_not(_nonzero(a)))

    def lower(out, x, dims=None, keepdim=False):
        axes, counts = _count(x, dims, test, name)
        return _drop_axes(out, counts, axes, keepdim, name,
                          lambda n: kir.op("gt" if name == "any" else "eq", n, kir.const(0, "i64")))

    return lower


register("any.default", "any.dim", "any.dims")(_any_all("any"))
register("all.default", "all.dim", "all.dims")(_any_all("all"))


@register("count_nonzero.dim_IntList", "count_nonzero.default")
def _count_nonzero(out, x, dims=None):
    axes, counts = _count(x, dims, _nonzero, "count_nonzero")
    return _drop_axes(out, counts, axes, False, "count_nonzero")


def _arg_reduce(kind):
    """argmax/argmin along one axis (the first index of the extreme, or of the first NaN); over
    every axis through a flat view of a contiguous input."""
    def lower(out, x, dim=None, keepdim=False):
        shape = list(x.shape)
        if not shape:
            return Pointwise(out.dtype, out.shape, lambda ctx, idx: kir.const(0, "i64"), {kind})
        if dim is None and len(shape) > 1:
            if not (isinstance(x, Buffer) and x.is_contiguous()):  # graph.py realizes a lazy x and retries
                raise ViewOfUnrealized(
                    f"view of a non-contiguous or unrealized value ({kind} over every axis reads it flat)")
            numel = x.numel()
            x = strided_view(x, [numel], [1], x.offset)
            shape = [numel]
        axis = 0 if dim is None else dim % len(shape)
        ld = loader(x)
        red = Reduction(out.dtype, shape[:axis] + shape[axis + 1:], shape[axis], kind,
                        lambda ctx, kept, r: ld(ctx, kept[:axis] + [r] + kept[axis:]), ops_of(x) | {kind},
                        shape[:axis] + [1] + shape[axis + 1:])
        red.axis = axis
        if dim is None:  # out is 0-d, or all ones with keepdim
            return Pointwise(out.dtype, out.shape, lambda ctx, idx: ctx.reduction_value(red, [Affine(0)]), red.ops)
        return red if keepdim else _drop_axes(out, red, [axis], False, kind)

    return lower


def _extreme_with_index(kind):
    """max.dim / min.dim: (amax or amin, argmax or argmin) along one axis, two reductions of the
    same loop (one kernel when both are realized together)."""
    reduce_value, reduce_index = (_amax, _arg_reduce("argmax")) if kind == "max" else (_amin, _arg_reduce("argmin"))

    def lower(outs, x, dim, keepdim=False):
        values_out, indices_out = outs
        return reduce_value(values_out, x, [dim], keepdim), reduce_index(indices_out, x, dim, keepdim)

    return lower


register("max.dim")(_extreme_with_index("max"))
register("min.dim")(_extreme_with_index("min"))
register("argmax.default")(_arg_reduce("argmax"))
register("argmin.default")(_arg_reduce("argmin"))


@register("logsumexp.default")
def _logsumexp(out, x, dims, keepdim=False):
    """max + log(sum(exp(x - max))), the max taken as 0 where it is infinite (as eager does)."""
    axes = _reduced_axes(x, dims)
    d, acc = ir_dtype(out.dtype), acc_dtype(out.dtype)
    c = opmath(d)
    keep = _keep_shape(x, axes)
    mx = _reduce(_Like(acc, keep), x, axes, True, "max", "amax", eager=aten.amax.default)
    read_mx, ld = loader(mx, c), loader(x, c)

    def shift(ctx, idx):
        m = read_mx(ctx, idx)
        return ops.where(ops.eq(ops.abs(m), kir.const(INF, c)), kir.const(0.0, c), m)

    exps = Pointwise(acc, x.shape, lambda ctx, idx: ops.exp(ops.sub(ld(ctx, idx), shift(ctx, _at_reduced(idx, axes)))),
                     ops_of(x) | {"exp"})
    total = _reduce(_Like(acc, keep), exps, axes, True, "sum", "sum", eager=aten.sum.dim_IntList)
    read_total = loader(total, c)
    result = Pointwise(acc, keep, lambda ctx, idx: ops.add(ops.log(read_total(ctx, idx)), shift(ctx, idx)),
                       ops_of(total, mx) | {"log", "logsumexp"})
    return _drop_axes(out, result, axes, keepdim, "logsumexp")


@register("linalg_vector_norm.default")
def _vector_norm(out, x, ord=2, dims=None, keepdim=False, dtype=None):
    """sum(|x|^p)^(1/p) over dims: p = 1, 2 without pow, +-inf as amax/amin of |x|, 0 counting."""
    axes = _reduced_axes(x, dims)
    d, acc = ir_dtype(out.dtype), acc_dtype(out.dtype)
    c = opmath(d)
    p = float(ord)
    if p == INF or p == -INF:
        kind, elem, post = "max" if p > 0 else "min", lambda a: ops.abs(a), None
    elif p == 0:
        kind, elem, post = "sum", lambda a: kir.cast(ops.ne(a, kir.const(0.0, c)), c), None
    elif p == 1:
        kind, elem, post = "sum", lambda a: ops.abs(a), None
    elif p == 2:
        kind, elem, post = "sum", lambda a: ops.mul(a, a), lambda s: ops.sqrt(s)
    else:
        kind, elem = "sum", lambda a: ops.pow(ops.abs(a), kir.const(p, c))
        post = lambda s: ops.pow(s, kir.const(1.0 / p, c))  # noqa: E731
    terms = pointwise("linalg_vector_norm", _Like(acc, x.shape), [x], elem, c)
    total = _reduce(_Like(acc, _keep_shape(x, axes)), terms, axes, True, kind, "linalg_vector_norm")
    return _drop_axes(out, total, axes, keepdim, "linalg_vector_norm", post, c)


@register("std.correction")
def _std(out, x, dims=None, correction=None, keepdim=False):
    var = _var(_Like(acc_dtype(out.dtype), out.shape), x, dims, correction, keepdim)
    d = ir_dtype(out.dtype)
    return Pointwise(out.dtype, out.shape, lambda ctx, idx: _cast(ops.sqrt(var.fn(ctx, idx)), ir_dtype(var.dtype), d),
                     var.ops | {"std"})


@register("var.correction")
def _var(out, x, dims=None, correction=None, keepdim=False):
    """Variance from Welford's partial statistics: along the innermost reduced axis, each row's
    mean and sum of squared deviations from it (two passes over the row in one kernel: stable
    where the sum of squares minus the squared sum is not, and both loops vectorise); along each
    further axis the partial (mean, m2) pairs combine as in Chan's parallel form of Welford's
    update: mean = the mean of the means, m2 = the sum of the m2s + count * the sum of the
    squared deviations of the means. Each mean is shifted by its row's first element (Note
    [Shifted means])."""
    n = len(x.shape)
    if n == 0:  # one element: no deviation, divided by max(0, 1 - correction) (0 / 0: NaN, as eager)
        correction = 1 if correction is None else correction
        # (a - a)^2: +0 (a * 0 was -0 for a negative a, and 1 / var then -inf), NaN for inf or NaN
        return pointwise("var", out, [x], lambda a: ops.div(ops.mul(ops.sub(a, a), ops.sub(a, a)),
                                                     kir.const(float(max(1 - correction, 0)), ir_dtype(out.dtype))))
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        dims = list(range(n))
    dims = sorted({d % n for d in (dims if isinstance(dims, (list, tuple)) else [dims])})
    count = 1
    for d in dims:
        count *= x.shape[d]
    correction = 1 if correction is None else correction
    sd = acc_dtype(out.dtype)
    to_merged = lambda idx: idx  # noqa: E731
    src, src_dims = x, dims
    merged = merge_reduced_dims(x, dims)
    if merged is not None:
        src, src_dims, to_merged = merged
    keep = list(src.shape)
    axes = list(reversed(src_dims))  # the innermost first
    mean, m2 = _row_mean_m2(src, axes[0], sd)
    partial = keep[axes[0]]
    keep[axes[0]] = 1
    for axis in axes[1:]:
        mean, m2 = _chan_combine(mean, m2, list(keep), axis, partial, sd)
        partial *= keep[axis]
        keep[axis] = 1
    denom = kir.const(float(max(count - correction, 0)), ir_dtype(sd))
    od = ir_dtype(out.dtype)

    def var_fn(ctx, idx):  # idx: of the (merged) keepdim shape
        value = ops.div(_value_at(ctx, m2, idx), denom)
        return value if od == ir_dtype(sd) else kir.cast(value, od)

    var = Pointwise(out.dtype, keep, var_fn, ops_of(x) | {"var"})
    var.space = m2.space
    # The mean comes with the variance: batch norm's decomposition asks for var and then mean of
    # the same input over the same axes, and gets this one (one kernel stores both).
    mean_keep = Pointwise(out.dtype, keep, lambda ctx, idx: _cast(_value_at(ctx, mean, idx), ir_dtype(sd), od),
                          ops_of(x) | {"mean"})
    mean_keep.space = var.space
    make_group([var, mean_keep])
    if V.graph is not None:
        V.graph.statistics[(x.handle, tuple(dims))] = (mean_keep, to_merged, merged is not None)
    return _from_keepdim(out, var, dims, keepdim, n, to_merged, merged is not None)


def _cast(expr, src, dst):
    return expr if src == dst else kir.cast(expr, dst)


def _from_keepdim(out, value, dims, keepdim, n, to_merged, merged):
    """A statistic computed in the (merged) keepdim shape, seen as the op's result."""
    if keepdim and not merged:
        return value
    reduced = set(dims)

    def fn(ctx, idx):
        if not keepdim:
            it = iter(idx)
            idx = [Affine(0) if d in reduced else next(it) for d in range(n)]
        return value.fn(ctx, to_merged(list(idx)))

    result = Pointwise(out.dtype, out.shape, fn, value.ops)
    result.squeeze_of = value
    return result


def _value_at(ctx, value, idx):
    return ctx.reduction_value(value, idx) if isinstance(value, Reduction) else value.fn(ctx, idx)


# Note [Shifted means]
# A row's mean is computed as K + sum(x - K) / n with K its first element (0 where that is not
# finite), its squared deviations then from that mean. Equal finite elements then have exactly
# their value as mean (x - K is 0) and a variance of exactly 0, as eager's Welford gives: sum / n
# can be an ulp off them, so std of a constant column was 4e-8 and x % std finite where eager's
# is NaN (fuzz seed 191, program 3329), and layer norm of a constant row 3.8e-5 instead of 0 (fuzz
# seed 901, program 4712). Over several axes the partial means combine the same way, shifted by
# the first of them (std of an expanded scalar had a gradient of 1.04 where eager's is 0: fuzz
# seed 931, program 1624). This replaced a max and a min per row that found the constant rows:
# two more passes over each row, which made the digits CNN's batch-norm statistics slower than
# eager's. The shift also keeps the sum small where the values sit far from 0.
def _shifted_mean(dtype, kept, extent, axis, keep_shape, element, names):
    """Lazy mean along `axis` of `element(ctx, kept indices, r)` (Note [Shifted means]): a
    Pointwise over the reduction's loop space, the shifted sum its one Reduction."""
    dt = ir_dtype(dtype)
    zero, inf = kir.const(0.0, dt), kir.const(INF, dt)

    def shift(ctx, k):
        if extent == 0:  # no first element to read
            return zero
        first = element(ctx, k, Affine(0))
        return ops.where(ops.lt(ops.abs(first), inf), first, zero)

    total = Reduction(dtype, kept, extent, "sum", lambda ctx, k, r: ops.sub(element(ctx, k, r), shift(ctx, k)),
                      names, keep_shape)
    total.axis = axis

    def mean_fn(ctx, idx):
        k = idx[:axis] + idx[axis + 1:]
        s, K = ctx.reduction_value(total, idx), shift(ctx, k)
        if extent == 0:  # 0 / 0: NaN, as eager's mean of nothing
            return ops.div(s, kir.const(0.0, dt))
        # s == 0: K itself, so a row of -0. keeps its sign (K + 0. is +0.)
        return ops.where(ops.eq(s, zero), K, ops.add(K, ops.div(s, kir.const(float(extent), dt))))

    mean = Pointwise(dtype, keep_shape, mean_fn, names)
    mean.space = total.space
    return mean


def _row_mean_m2(x, axis, sd):
    """Lazy (mean, m2) along one axis of x: values of reductions of the same loop, so one kernel."""
    shape = list(x.shape)
    kept = shape[:axis] + shape[axis + 1:]
    keep_shape = shape[:axis] + [1] + shape[axis + 1:]
    ld = loader(x, ir_dtype(sd))

    def at(kept_idx, r):
        return kept_idx[:axis] + [r] + kept_idx[axis:]

    mean = _shifted_mean(sd, kept, shape[axis], axis, keep_shape, lambda ctx, k, r: ld(ctx, at(k, r)),
                         ops_of(x) | {"var_mean"})

    def deviation(ctx, k, r):
        d = ops.sub(ld(ctx, at(k, r)), mean.fn(ctx, at(k, Affine(0))))
        return ops.mul(d, d)

    m2 = Reduction(sd, kept, shape[axis], "sum", deviation, {"var_mean"}, keep_shape)
    m2.axis = axis
    return mean, m2


def _chan_combine(mean, m2, shape, axis, partial, sd):
    """Partial statistics (mean and m2 over `partial` elements each, keepdim shape `shape`)
    realized by one kernel, then combined along `axis` as lazy (mean, m2)."""
    mean_buf, m2_buf = V.graph.realize_reductions([mean, m2], mean.space)
    dt = ir_dtype(sd)
    k = shape[axis]
    kept = shape[:axis] + shape[axis + 1:]
    keep_shape = shape[:axis] + [1] + shape[axis + 1:]

    def at(kept_idx, r):
        return kept_idx[:axis] + [r] + kept_idx[axis:]

    new_mean = _shifted_mean(sd, kept, k, axis, keep_shape, lambda ctx, ki, r: ctx.load(mean_buf, at(ki, r)),
                             {"var_mean"})

    def spread(ctx, ki, r):
        d = ops.sub(ctx.load(mean_buf, at(ki, r)), new_mean.fn(ctx, at(ki, Affine(0))))
        return ops.mul(d, d)

    dev = Reduction(sd, kept, k, "sum", spread, {"var_mean"}, keep_shape)
    dev.axis = axis
    m2_sum = Reduction(sd, kept, k, "sum", lambda ctx, ki, r: ctx.load(m2_buf, at(ki, r)), {"var_mean"}, keep_shape)
    m2_sum.axis = axis
    combined = Pointwise(sd, keep_shape, lambda ctx, idx: ops.add(ctx.reduction_value(m2_sum, idx), ops.mul(
        kir.const(float(partial), dt), ctx.reduction_value(dev, idx))), {"var_mean"})
    combined.space = LoopSpace(kept, k, axis)
    return new_mean, combined


def _softmax_lowering(is_log):
    return lambda out, x, dim, half_to_float=False: _softmax(out, x, dim, is_log)


def _softmax(out, x, dim, is_log):
    """exp(x - max) * (1 / sum(exp(x - max))) along dim (log: x - max - log(sum)); along the
    last dim the max, the sum and the result are one kernel."""
    n = len(x.shape)
    d = ir_dtype(out.dtype)
    if n == 0:  # one element: 1 (log: 0), NaN for a NaN or an infinity as exp(x - x) gives
        return pointwise("log_softmax" if is_log else "softmax", out, [x],
                         lambda a: ops.sub(a, a) if is_log else ops.exp(ops.sub(a, a)))
    dim = dim % n
    shape = list(x.shape)
    keep = shape[:dim] + [1] + shape[dim + 1:]
    # the max in the compute dtype: a bfloat16 max, rounded, shifted the float32 values the
    # exponentials read, and the largest element of a row got exp(0.35) = 1.42 (fuzz seed 261,
    # program 6773: softmax of a fused x ** x)
    mx = _reduce(_Like(acc_dtype(out.dtype), keep), x, [dim], True, "max", "amax")
    ld = loader(x, d)

    def shifted(ctx, idx):
        return ops.sub(ld(ctx, idx), ctx.reduction_value(mx, idx[:dim] + [Affine(0)] + idx[dim + 1:]))

    exp_sum = Reduction(acc_dtype(out.dtype), shape[:dim] + shape[dim + 1:], shape[dim], "sum",
                        lambda ctx, kept, r: ops.exp(shifted(ctx, kept[:dim] + [r] + kept[dim:])), {"exp", "sum"}, keep)
    exp_sum.axis = dim

    # bfloat16 over the last dim: the sum and its log rounded to bfloat16 as eager's kernel keeps
    # them (Note in tensor/ops/activation.cc's SoftmaxKernel; fuzz seed 371, program 3296)
    round_log_sum = is_log and d == "bf16" and dim == n - 1

    def fn(ctx, idx):
        s = ctx.reduction_value(exp_sum, idx[:dim] + [Affine(0)] + idx[dim + 1:])
        if is_log:
            log_sum = kir.cast(ops.log(kir.cast(s, "bf16")), "bf16") if round_log_sum else ops.log(s)
            value = ops.sub(shifted(ctx, idx), log_sum)
        else:
            # times the reciprocal of the sum, as eager's kernels (a multiply per element, 1/sum
            # hoisted out of the loop; a division per element cost 1.3x eager's time)
            value = ops.mul(ops.exp(shifted(ctx, idx)), ops.reciprocal(s))
        # read inline, the result is rounded as eager's is (Note [bfloat16 rounds at every op])
        return kir.cast(value, "bf16") if d == "bf16" else value

    return Pointwise(out.dtype, shape, fn, ops_of(x) | {"amax", "exp", "sum", "log_softmax" if is_log else "softmax"})


register("_softmax.default")(_softmax_lowering(False))
register("_log_softmax.default")(_softmax_lowering(True))
