"""Lowerings of library-kernel ops, in C++ (inductor/lowering/nn.h): the matmul template
(max-autotune's generated alternative) and max pooling with indices, with its backward. Here:
each op's arguments as aten passes them, and the kernels a lowering formed taken into the graph's
records in order."""

from kiln._C._inductor import lowering as c
from kiln._inductor.lowering.common import formed, graph_context, register, value_arg


def mm_template(out, a, b, bias=None, beta=1, alpha=1):
    """A matmul (addmm with a bias) as a generated kernel, the bias and any pointwise op after it
    its epilogue in the same kernel."""
    return c.matmul_template(out.dtype, value_arg(a), value_arg(b), None if bias is None else value_arg(bias),
                             float(beta), float(alpha))


def _pool_params(kernel_size, stride, padding, dilation):
    pair = lambda v: list(v) * 2 if isinstance(v, (list, tuple)) and len(v) == 1 else (  # noqa: E731
        list(v) if isinstance(v, (list, tuple)) else [v, v])
    k = pair(kernel_size)
    s = pair(stride) if stride not in (None, [], ()) else list(k)
    return k, s, pair(padding), pair(dilation)


@register("max_pool2d_with_indices.default")
def _max_pool2d_with_indices(outs, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    k, s, p, d = _pool_params(kernel_size, stride, padding, dilation)
    values_out, indices_out = outs
    return formed(c.max_pool2d_with_indices(graph_context(), values_out.dtype, list(values_out.shape),
                                            indices_out.dtype, list(indices_out.shape), value_arg(x), k, s, p, d,
                                            bool(ceil_mode)))


@register("max_pool2d_with_indices_backward.default")
def _max_pool2d_with_indices_backward(out, grad, x, kernel_size, stride, padding, dilation, ceil_mode, indices):
    k, s, p, d = _pool_params(kernel_size, stride, padding, dilation)
    return formed(c.max_pool2d_with_indices_backward(graph_context(), out.dtype, list(out.shape), value_arg(grad),
                                                      value_arg(x), k, s, p, d, value_arg(indices)))
