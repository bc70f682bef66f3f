"""View lowerings (permute, transpose, expand, squeeze, slice, select, view): affine maps of
indices; a view of a Buffer stays a strided Buffer over the same memory (no kernel, no copy)."""

from kiln._C._inductor import lowering as c_lowering
from kiln._decomp.decompositions_shape import view_strides  # PyTorch's computeStride
from kiln._inductor.ir import Buffer, Pointwise, Reduction
from kiln._inductor.lowering.common import Fallback, ViewOfUnrealized, register


def strided_view(x, shape, strides, offset):
    """A view of Buffer x as another strided Buffer over the same memory (no kernel, no copy: a
    fallback op receives it as a strided tensor)."""
    return Buffer(None, x.dtype, shape, strides, offset, origin=x)


def _value(x):
    """x when it is a value of the graph; this node runs its eager kernel otherwise."""
    if not isinstance(x, (Buffer, Pointwise, Reduction)):
        raise Fallback(f"argument of type {type(x).__name__}")
    return x


# The view ops are affine maps of indices, lowered in C++ (inductor/lowering/views.h, Note [Views
# as index maps]): of a Buffer a strided Buffer over the same memory, of a lazy value a Pointwise
# reading it through the map.
@register("permute.default")
def _permute(out, x, dims):
    return c_lowering.permute(out.dtype, list(out.shape), _value(x), list(dims))


@register("t.default")
def _t(out, x):
    return c_lowering.permute(out.dtype, list(out.shape), _value(x), list(reversed(range(len(x.shape)))))


@register("transpose.int")
def _transpose(out, x, a, b):
    return c_lowering.transpose(out.dtype, list(out.shape), _value(x), a, b)


@register("expand.default")
def _expand(out, x, size, implicit=False):
    return c_lowering.expand(out.dtype, list(out.shape), _value(x))


@register("unsqueeze.default")
def _unsqueeze(out, x, dim):
    return c_lowering.unsqueeze(out.dtype, list(out.shape), _value(x), dim)


@register("squeeze.dim", "squeeze.dims", "squeeze.default")
def _squeeze(out, x, dims=None):
    if dims is not None and not isinstance(dims, (list, tuple)):
        dims = [dims]
    return c_lowering.squeeze(out.dtype, list(out.shape), _value(x), None if dims is None else list(dims))


@register("slice.Tensor")
def _slice(out, x, dim=0, start=None, end=None, step=1):
    return c_lowering.slice(out.dtype, list(out.shape), _value(x), dim, start, step)


@register("select.int")
def _select(out, x, dim, index):
    return c_lowering.select(out.dtype, list(out.shape), _value(x), dim, index)


@register("view.default", "_unsafe_view.default", "reshape.default")
def _view(out, x, size):
    if list(out.shape) == list(x.shape):
        return x
    if isinstance(x, Buffer):
        strides = view_strides(x.shape, x.stride, list(out.shape))
        if strides is not None:
            return Buffer(None, out.dtype, out.shape, strides, x.offset, origin=x)  # named by GraphLowering.define
    raise ViewOfUnrealized("view of a non-contiguous or unrealized value")  # graph.py realizes and retries
