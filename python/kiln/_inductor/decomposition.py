"""Decompositions only Inductor applies: core ops that stay whole everywhere else (kiln._decomp's
table never decomposes a core op) but lower better as their parts. Layer norm as var_mean and
pointwise ops becomes one kernel per row block (the statistics and the normalisation together),
and its backward two reductions along the row and a pointwise epilogue; eval-mode batch norm a
per-channel scale and shift that fuses with the activation after it.
"""

import kiln
from kiln._decomp.decompositions import numel, to_dtype

aten = kiln.ops.aten


def _row_dims(x, normalized_shape):
    return list(range(x.dim() - len(normalized_shape), x.dim()))


def _stats_dtype(x):
    return kiln.float32 if x.dtype in (kiln.float16, kiln.bfloat16) else x.dtype


def _row_major(x):
    """x itself when row-major, else a row-major copy. Eager's layer norm and its backward read
    their inputs row-major and return row-major results, whatever the input's strides (PyTorch's
    decomposition does the same, `contiguous(input)`): the decomposed pointwise ops would follow
    a transposed input's strides, and the graph's outputs (Note [Output strides]) with them."""
    return x if x.is_contiguous() else aten.clone.default(x, memory_format=kiln.contiguous_format)


def _saved_stats_dtype(input, *params):
    """The dtype of a norm's saved statistics (layer norm's mean and rstd, batch norm's), as eager's
    (NormStatDtype in tensor/ops/norm.cc): float32 for a 16-bit input with a parameter of another
    dtype (PyTorch's "mixed type"), else the input's. Rounded to bfloat16 where eager keeps float32, the backward's
    x_hat lost the bits that cancel in rstd * (g - mean(g) - x_hat * mean(g * x_hat)): a gradient of
    0.0011 came out -0.076 (fuzz seed 801, program 62)."""
    mixed = input.dtype in (kiln.float16, kiln.bfloat16) and any(p is not None and p.dtype != input.dtype
                                                                  for p in params)
    return kiln.float32 if mixed else input.dtype


def native_layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """(out, mean, rstd): mean and rstd keep the normalized dims (size 1), in eager's dtype for them
    (_saved_stats_dtype)."""
    dims = _row_dims(input, normalized_shape)
    x = to_dtype(_row_major(input), _stats_dtype(input))
    var, mean = aten.var_mean.correction(x, dims, correction=0, keepdim=True)
    rstd = aten.rsqrt.default(aten.add.Scalar(var, eps))
    out = aten.mul.Tensor(aten.sub.Tensor(x, mean), rstd)
    if weight is not None:
        out = aten.mul.Tensor(out, weight)
    if bias is not None:
        out = aten.add.Tensor(out, bias)
    stats = _saved_stats_dtype(input, weight, bias)
    return to_dtype(out, input.dtype), to_dtype(mean, stats), to_dtype(rstd, stats)


def native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask):
    """grad_input = rstd / N * (N * g - sum(g) - x_hat * sum(g * x_hat)) with g = grad_out * weight
    and x_hat the normalised input, sums along the row; grad_weight and grad_bias sum over the
    leading dims."""
    dims = _row_dims(input, normalized_shape)
    lead = list(range(input.dim() - len(normalized_shape)))
    n = numel(normalized_shape)
    compute = _stats_dtype(input)
    x, dy = to_dtype(_row_major(input), compute), to_dtype(_row_major(grad_out), compute)
    mean, rstd = to_dtype(mean, compute), to_dtype(rstd, compute)
    x_hat = aten.mul.Tensor(aten.sub.Tensor(x, mean), rstd)
    g = aten.mul.Tensor(dy, to_dtype(weight, compute)) if weight is not None else dy
    grad_input = grad_weight = grad_bias = None
    if output_mask[0]:
        sum_g = aten.sum.dim_IntList(g, dims, True)
        sum_g_xhat = aten.sum.dim_IntList(aten.mul.Tensor(g, x_hat), dims, True)
        inner = aten.sub.Tensor(aten.sub.Tensor(aten.mul.Scalar(g, n), sum_g), aten.mul.Tensor(x_hat, sum_g_xhat))
        grad_input = to_dtype(aten.mul.Tensor(aten.div.Scalar(rstd, n), inner), input.dtype)
    if output_mask[1] and weight is not None:
        prod = aten.mul.Tensor(dy, x_hat)
        grad_weight = to_dtype(aten.sum.dim_IntList(prod, lead, False) if lead else prod, weight.dtype)
    if output_mask[2] and bias is not None:
        grad_bias = to_dtype(aten.sum.dim_IntList(dy, lead, False) if lead else dy, bias.dtype)
    return grad_input, grad_weight, grad_bias


def _native_batch_norm_legit_no_training(input, weight, bias, running_mean, running_var, momentum, eps):
    """Eval-mode batch norm as eager's kernel computes it (tensor/ops/norm.cc): a per-channel
    scale = weight * rsqrt(running_var + eps) and shift = bias - running_mean * scale, then
    x * scale + shift, row-major as eager's result. One pointwise kernel with what follows it (a
    ReLU, a residual add) instead of an eager call between kernels; the statistics outputs are
    empty, as eager's."""
    stat = _saved_stats_dtype(input, weight, bias, running_mean, running_var)
    compute = _stats_dtype(input)
    shape = [1, input.shape[1]] + [1] * (input.dim() - 2)
    scale = aten.rsqrt.default(aten.add.Scalar(to_dtype(running_var, compute), eps))
    if weight is not None:
        scale = aten.mul.Tensor(scale, to_dtype(weight, compute))
    shift = aten.neg.default(aten.mul.Tensor(to_dtype(running_mean, compute), scale))
    if bias is not None:
        shift = aten.add.Tensor(to_dtype(bias, compute), shift)
    x = to_dtype(_row_major(input), compute)
    out = aten.add.Tensor(aten.mul.Tensor(x, aten.view.default(scale, shape)), aten.view.default(shift, shape))
    empty = aten.empty.memory_format([0], dtype=stat, device=input.device)
    return to_dtype(out, input.dtype), empty, aten.empty.memory_format([0], dtype=stat, device=input.device)


def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    """Eval mode (running statistics) as above. Training mode writes the running statistics: it
    stays the eager kernel (NotImplemented: not decomposed)."""
    if training or running_mean is None or running_var is None:
        return NotImplemented
    return _native_batch_norm_legit_no_training(input, weight, bias, running_mean, running_var, momentum, eps)


def mean_all(self, dtype=None):
    """mean() of a whole tensor (core, as in PyTorch) as the mean.dim lowering over every dim."""
    return aten.mean.dim(self, None, False, dtype=dtype)


DECOMPOSITIONS = {aten.native_layer_norm.default: native_layer_norm,
                  aten.native_batch_norm.default: native_batch_norm,
                  aten._native_batch_norm_legit_no_training.default: _native_batch_norm_legit_no_training,
                  aten.native_layer_norm_backward.default: native_layer_norm_backward,
                  aten.mean.default: mean_all}


def decompositions():
    """What AOTAutograd decomposes for Inductor: composite kernels (batch norm and layer norm and
    their backwards, var_mean, the softmax backwards) into the reductions and pointwise ops that
    lower and fuse, so a norm's statistics, normalisation and the activation after it become
    kernels (DECOMPOSITIONS above holds the core ops only Inductor decomposes)."""
    from kiln._decomp import get_decompositions

    aten = kiln.ops.aten
    return {**DECOMPOSITIONS, **get_decompositions([
        aten._native_batch_norm_legit_functional,
        aten.native_batch_norm_backward, aten.var_mean, aten.std_mean, aten.std, aten.var.default,
        aten._softmax_backward_data, aten._log_softmax_backward_data, aten.native_dropout_backward,
        aten.sum.default, aten.rsub.Scalar, aten.rsub.Tensor,  # `2 - x` traces to rsub.Scalar, as in PyTorch
        # a number operand, as a 0-d tensor of the Tensor overload (whose lowering or fallback is there)
        aten.copysign.Scalar, aten.xlogy, aten.remainder.Scalar_Tensor, aten.__lshift__, aten.__rshift__,
        aten.bitwise_left_shift.Tensor_Scalar, aten.bitwise_left_shift.Scalar_Tensor,
        aten.bitwise_right_shift.Tensor_Scalar, aten.bitwise_right_shift.Scalar_Tensor,
    ])}
