"""Reduction lowerings: sum, mean, prod, amax/amin, max/min, any/all, count_nonzero,
argmax/argmin, logsumexp, vector norms, var/std and softmax, lowered in C++
(inductor/lowering/reductions.h; Note [Outer reductions], Note [Shifted means]). Here: each op's
arguments as aten passes them, and the kernels a lowering formed (a variance's partial
statistics) taken into the graph's records in order."""

from kiln._C._inductor import lowering as c
from kiln._inductor.lowering.common import formed, graph_context, register, value_arg


def _dims(dims):
    """aten's dim argument (None, an int, or a list) as a list, or None for every dimension."""
    if dims is None:
        return None
    return list(dims) if isinstance(dims, (list, tuple)) else [dims]


def _reduction(name):
    def lower(out, x, dims=None, keepdim=False, dtype=None):
        return formed(c.reduce(graph_context(), name, out.dtype, list(out.shape), value_arg(x), _dims(dims), keepdim))

    return lower


register("sum.dim_IntList", "sum.default")(_reduction("sum"))
register("mean.dim")(_reduction("mean"))
register("amax.default")(_reduction("amax"))
register("amin.default")(_reduction("amin"))


@register("prod.dim_int")
def _prod(out, x, dim, keepdim=False, dtype=None):
    return formed(c.reduce(graph_context(), "prod", out.dtype, list(out.shape), value_arg(x), [dim], keepdim))


@register("prod.default")
def _prod_all(out, x, dtype=None):
    return formed(c.reduce(graph_context(), "prod", out.dtype, list(out.shape), value_arg(x), None, False))


def _over_every_element(name):
    return lambda out, x: formed(c.reduce(graph_context(), name, out.dtype, list(out.shape), value_arg(x), None, False))


register("max.default")(_over_every_element("max"))
register("min.default")(_over_every_element("min"))


def _any_all(any_):
    def lower(out, x, dims=None, keepdim=False):
        return formed(c.any_all(graph_context(), any_, out.dtype, list(out.shape), value_arg(x), _dims(dims), keepdim))

    return lower


register("any.default", "any.dim", "any.dims")(_any_all(True))
register("all.default", "all.dim", "all.dims")(_any_all(False))


@register("count_nonzero.dim_IntList", "count_nonzero.default")
def _count_nonzero(out, x, dims=None):
    return formed(c.count_nonzero(graph_context(), out.dtype, list(out.shape), value_arg(x), _dims(dims)))


def _arg_reduce(max_):
    def lower(out, x, dim=None, keepdim=False):
        return c.arg_reduce(max_, out.dtype, list(out.shape), value_arg(x), dim, keepdim)

    return lower


def _extreme_with_index(max_):
    """max.dim / min.dim: (amax or amin, argmax or argmin) along one axis, two reductions of the
    same loop (one kernel when both are realized together)."""
    def lower(outs, x, dim, keepdim=False):
        values_out, indices_out = outs
        x = value_arg(x)
        values = c.reduce(graph_context(), "amax" if max_ else "amin", values_out.dtype, list(values_out.shape), x,
                          [dim], keepdim)
        return formed(values), c.arg_reduce(max_, indices_out.dtype, list(indices_out.shape), x, dim, keepdim)

    return lower


register("max.dim")(_extreme_with_index(True))
register("min.dim")(_extreme_with_index(False))
register("argmax.default")(_arg_reduce(True))
register("argmin.default")(_arg_reduce(False))


@register("logsumexp.default")
def _logsumexp(out, x, dims, keepdim=False):
    return formed(c.logsumexp(graph_context(), out.dtype, list(out.shape), value_arg(x), _dims(dims), keepdim))


@register("linalg_vector_norm.default")
def _vector_norm(out, x, ord=2, dims=None, keepdim=False, dtype=None):
    return formed(c.vector_norm(graph_context(), out.dtype, list(out.shape), value_arg(x), float(ord), _dims(dims),
                                keepdim))


def _var_lowering(std):
    def lower(out, x, dims=None, correction=None, keepdim=False):
        correction = None if correction is None else float(correction)
        return formed(c.var(graph_context(), std, out.dtype, list(out.shape), value_arg(x), _dims(dims), correction,
                            keepdim))

    return lower


register("var.correction")(_var_lowering(False))
register("std.correction")(_var_lowering(True))


def _softmax_lowering(log):
    return lambda out, x, dim, half_to_float=False: formed(
        c.softmax(graph_context(), log, out.dtype, list(out.shape), value_arg(x), dim))


register("_softmax.default")(_softmax_lowering(False))
register("_log_softmax.default")(_softmax_lowering(True))
