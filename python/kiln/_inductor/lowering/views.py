"""View lowerings (permute, transpose, expand, squeeze, slice, select, view), in C++
(inductor/lowering/views.h): affine maps of indices; a view of a Buffer stays a strided Buffer
over the same memory (no kernel, no copy). Here: each op's arguments as aten passes them."""

from kiln._C._inductor import lowering as c_lowering
from kiln._inductor.lowering.common import register, value_arg


# The view ops are affine maps of indices, lowered in C++ (inductor/lowering/views.h, Note [Views
# as index maps]): of a Buffer a strided Buffer over the same memory, of a lazy value a Pointwise
# reading it through the map.
@register("permute.default")
def _permute(out, x, dims):
    return c_lowering.permute(out.dtype, list(out.shape), value_arg(x), list(dims))


@register("t.default")
def _t(out, x):
    return c_lowering.permute(out.dtype, list(out.shape), value_arg(x), list(reversed(range(len(x.shape)))))


@register("transpose.int")
def _transpose(out, x, a, b):
    return c_lowering.transpose(out.dtype, list(out.shape), value_arg(x), a, b)


@register("expand.default")
def _expand(out, x, size, implicit=False):
    return c_lowering.expand(out.dtype, list(out.shape), value_arg(x))


@register("unsqueeze.default")
def _unsqueeze(out, x, dim):
    return c_lowering.unsqueeze(out.dtype, list(out.shape), value_arg(x), dim)


@register("squeeze.dim", "squeeze.dims", "squeeze.default")
def _squeeze(out, x, dims=None):
    if dims is not None and not isinstance(dims, (list, tuple)):
        dims = [dims]
    return c_lowering.squeeze(out.dtype, list(out.shape), value_arg(x), None if dims is None else list(dims))


@register("slice.Tensor")
def _slice(out, x, dim=0, start=None, end=None, step=1):
    return c_lowering.slice(out.dtype, list(out.shape), value_arg(x), dim, start, step)


@register("select.int")
def _select(out, x, dim, index):
    return c_lowering.select(out.dtype, list(out.shape), value_arg(x), dim, index)


@register("view.default", "_unsafe_view.default", "reshape.default")
def _view(out, x, size):
    # a strided view of a buffer whose layout allows it; ViewOfUnrealized otherwise (graph.py
    # realizes x and lowers the node again)
    return c_lowering.view(out.dtype, list(out.shape), value_arg(x))
