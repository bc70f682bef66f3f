"""Lowerings of library-kernel ops: the matmul template (max-autotune's generated alternative)
and max pooling with indices, with its backward."""

from kiln._C._inductor import kernel_ir as kir
from kiln._C._inductor.kernel_ir import ops
from kiln._inductor.ir import V, Affine, Buffer, Pointwise, Reduction, contiguous_strides, ir_dtype, make_group
from kiln._inductor.lowering.common import Fallback, broadcast_indices, loader, ops_of, register, shape_of


# --- templates (max-autotune's generated alternatives) -------------------------------------------
def mm_template(out, a, b, bias=None, beta=1, alpha=1):
    """A matmul (addmm with a bias) as a generated kernel: out[i, j] = sum_k a[i, k] * b[k, j],
    computed over [M, N] x K (the inner loop walks k: vectorised when a's rows and b's columns are
    contiguous, as x @ w.t() has them); the bias, and any pointwise op after it, are its
    epilogue in the same kernel."""
    d = ir_dtype(out.dtype)
    if d not in ("f32", "f64"):
        raise Fallback(f"matmul template for {out.dtype}")
    (M, K), N = a.shape, b.shape[1]
    la, lb = loader(a, d), loader(b, d)
    red = Reduction(out.dtype, [M, N], K, "sum", lambda ctx, k, r: ops.mul(la(ctx, [k[0], r]), lb(ctx, [r, k[1]])),
                    ops_of(a, b) | {"mm"}, [M, N, 1])
    red.axis = 2
    lbias = loader(bias, d) if bias is not None else None
    bias_shape = shape_of(bias) if bias is not None else []

    def fn(ctx, idx):
        value = ctx.reduction_value(red, list(idx) + [Affine(0)])
        if alpha != 1:
            value = ops.mul(value, kir.const(float(alpha), d))
        if lbias is not None:
            term = lbias(ctx, broadcast_indices(idx, bias_shape, [M, N]))
            value = ops.add(value, term if beta == 1 else ops.mul(term, kir.const(float(beta), d)))
        return value

    result = Pointwise(out.dtype, [M, N], fn, red.ops | ({"addmm"} if bias is not None else set()))
    result.space = red.space
    return result


# --- pooling ---------------------------------------------------------------------------------------
def _pool_params(x, kernel_size, stride, padding, dilation):
    pair = lambda v: list(v) * 2 if isinstance(v, (list, tuple)) and len(v) == 1 else (  # noqa: E731
        list(v) if isinstance(v, (list, tuple)) else [v, v])
    k = pair(kernel_size)
    s = pair(stride) if stride not in (None, [], ()) else list(k)
    return k, s, pair(padding), pair(dilation)


def index_expr(affine):
    """The value of an affine index as an i64 expression of the loop indices."""
    expr = kir.const(affine.offset, "i64")
    for var, coeff in sorted(affine.coeffs.items()):
        if coeff:
            expr = ops.add(expr, ops.mul(kir.index(var), kir.const(coeff, "i64")))
    return expr


@register("max_pool2d_with_indices.default")
def _max_pool2d_with_indices(outs, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """Each output element is the maximum of its window, unrolled (the window is small), and the
    flat index (h * W + w) of the first maximum; NaN wins, as in PyTorch's kernel (a later NaN
    replaces an earlier one). Padded windows and ceil_mode's partial last windows (which would read
    outside the input) fall back."""
    k, s, p, d = _pool_params(x, kernel_size, stride, padding, dilation)
    if any(p) or d != [1, 1]:
        raise Fallback("max_pool2d with padding or dilation")
    values_out, indices_out = outs
    if ceil_mode and any((o - 1) * st + kk > size for o, st, kk, size in
                         zip(values_out.shape[-2:], s, k, x.shape[-2:])):
        # ceil_mode's last window runs past the input: the unrolled loads would read outside it
        raise Fallback("max_pool2d with ceil_mode windows past the input")
    if isinstance(x, Pointwise) and x.ops and not V.graph.cheap_to_recompute(x):
        x = V.graph.realize(x)  # read k*k times per output: computed once, not in every window
    W = x.shape[-1]
    vd = ir_dtype(values_out.dtype)
    ld = loader(x, vd)
    lead = len(x.shape) - 2

    def window(ctx, idx):
        oh, ow = idx[lead], idx[lead + 1]
        best = flat = None
        for i in range(k[0]):
            for j in range(k[1]):
                h, w = oh.scale(s[0]) + i, ow.scale(s[1]) + j
                v = ld(ctx, idx[:lead] + [h, w])
                at = index_expr(h.scale(W) + w)
                if best is None:
                    best, flat = v, at
                else:
                    take = ops.logical_or(ops.gt(v, best), ops.ne(v, v))
                    best, flat = ops.where(take, v, best), ops.where(take, at, flat)
        return best, flat

    values = Pointwise(values_out.dtype, values_out.shape, lambda ctx, idx: window(ctx, idx)[0],
                       ops_of(x) | {"max_pool2d_with_indices"})
    indices = Pointwise(indices_out.dtype, indices_out.shape, lambda ctx, idx: window(ctx, idx)[1],
                        ops_of(x) | {"max_pool2d_with_indices"})
    make_group([values, indices])
    return values, indices


@register("max_pool2d_with_indices_backward.default")
def _max_pool2d_with_indices_backward(out, grad, x, kernel_size, stride, padding, dilation, ceil_mode, indices):
    """For windows that tile the input exactly (stride = kernel, no padding): every input element
    lies in one window, so the gradient is computed over [N, C, OH, kh, OW, kw] (element
    (oh, i, ow, j) is input row oh * kh + i, column ow * kw + j): the window's gradient where
    its index names this element, else 0. That buffer, contiguous, is the [N, C, H, W] result."""
    k, s, p, d = _pool_params(x, kernel_size, stride, padding, dilation)
    H, W = x.shape[-2], x.shape[-1]
    OH, OW = grad.shape[-2], grad.shape[-1]
    if s != k or any(p) or d != [1, 1] or OH * k[0] != H or OW * k[1] != W:
        raise Fallback("max_pool2d backward with overlapping, padded or partial windows")
    lead = len(x.shape) - 2
    gd = ir_dtype(out.dtype)
    lg, li = loader(grad, gd), loader(indices, "i64")
    tiled = list(x.shape[:lead]) + [OH, k[0], OW, k[1]]

    def fn(ctx, idx):
        oh, i, ow, j = idx[lead:]
        window = idx[:lead] + [oh, ow]
        here = index_expr((oh.scale(k[0]) + i).scale(W) + ow.scale(k[1]) + j)
        return ops.where(ops.eq(li(ctx, window), here), lg(ctx, window), kir.const(0.0, gd))

    buf = V.graph.realize(Pointwise(out.dtype, tiled, fn, ops_of(grad) | {"max_pool2d_with_indices_backward"}))
    return Buffer(None, out.dtype, list(out.shape), contiguous_strides(list(out.shape)), buf.offset, origin=buf)
