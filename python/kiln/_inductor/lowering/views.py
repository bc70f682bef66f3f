"""View lowerings (permute, transpose, expand, squeeze, slice, select, view): affine maps of
indices; a view of a Buffer stays a strided Buffer over the same memory (no kernel, no copy)."""

from kiln._decomp.decompositions_shape import view_strides  # PyTorch's computeStride
from kiln._inductor.ir import Affine, Buffer, Pointwise
from kiln._inductor.lowering.common import ViewOfUnrealized, broadcast_indices, loader, ops_of, register


def strided_view(x, shape, strides, offset):
    """A view of Buffer x as another strided Buffer over the same memory (no kernel, no copy: a
    fallback op receives it as a strided tensor)."""
    return Buffer(None, x.dtype, shape, strides, offset, origin=x)


def _view_layout(x, out, map_indices):
    """The strides and offset of out's view of Buffer x: the affine image of out's indices."""
    idx = [Affine.var(k) for k in range(len(out.shape))]
    src = map_indices(idx)
    total = Affine(x.offset)
    for i, s in zip(src, x.stride):
        total = total + i.scale(s)
    return [total.coeffs.get(k, 0) for k in range(len(out.shape))], total.offset


def view_of(x, out, map_indices, name):
    """A view: out indices -> x indices (affine). Of a Buffer, a strided Buffer; else lazy."""
    if isinstance(x, Buffer):
        strides, offset = _view_layout(x, out, map_indices)
        return strided_view(x, list(out.shape), strides, offset)
    ld = loader(x)
    return Pointwise(out.dtype, out.shape, lambda ctx, idx: ld(ctx, map_indices(idx)), ops_of(x))


@register("permute.default")
def _permute(out, x, dims):
    dims = [d % len(x.shape) for d in dims]

    def m(idx):
        src = [None] * len(dims)
        for o, d in enumerate(dims):
            src[d] = idx[o]
        return src

    return view_of(x, out, m, "permute")


@register("t.default")
def _t(out, x):
    return view_of(x, out, lambda idx: list(reversed(idx)), "t")


@register("transpose.int")
def _transpose(out, x, a, b):
    n = len(x.shape)
    a, b = a % n, b % n

    def m(idx):
        idx = list(idx)
        idx[a], idx[b] = idx[b], idx[a]
        return idx

    return view_of(x, out, m, "transpose")


@register("expand.default")
def _expand(out, x, size, implicit=False):
    return view_of(x, out, lambda idx: broadcast_indices(idx, x.shape, out.shape), "expand")


@register("unsqueeze.default")
def _unsqueeze(out, x, dim):
    dim = dim % len(out.shape)
    return view_of(x, out, lambda idx: idx[:dim] + idx[dim + 1:], "unsqueeze")


@register("squeeze.dim", "squeeze.dims", "squeeze.default")
def _squeeze(out, x, dims=None):
    if dims is None:
        dims = [d for d, s in enumerate(x.shape) if s == 1]
    dims = {d % len(x.shape) for d in (dims if isinstance(dims, (list, tuple)) else [dims]) if x.shape[d] == 1}

    def m(idx):
        it = iter(idx)
        return [Affine(0) if d in dims else next(it) for d in range(len(x.shape))]

    return view_of(x, out, m, "squeeze")


@register("slice.Tensor")
def _slice(out, x, dim=0, start=None, end=None, step=1):
    dim = dim % len(x.shape)
    size = x.shape[dim]
    start = 0 if start is None else (start + size if start < 0 else start)
    start = max(0, min(start, size))

    def m(idx):
        idx = list(idx)
        idx[dim] = idx[dim].scale(step) + start
        return idx

    return view_of(x, out, m, "slice")


@register("select.int")
def _select(out, x, dim, index):
    dim = dim % len(x.shape)
    index = index + x.shape[dim] if index < 0 else index
    return view_of(x, out, lambda idx: idx[:dim] + [Affine(index)] + idx[dim:], "select")


@register("view.default", "_unsafe_view.default", "reshape.default")
def _view(out, x, size):
    if list(out.shape) == list(x.shape):
        return x
    if isinstance(x, Buffer):
        strides = view_strides(x.shape, x.stride, list(out.shape))
        if strides is not None:
            return Buffer(None, out.dtype, out.shape, strides, x.offset, origin=x)  # named by GraphLowering.define
    raise ViewOfUnrealized("view of a non-contiguous or unrealized value")  # graph.py realizes and retries
