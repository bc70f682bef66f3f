"""Decompositions of the reductions, matrix products, convolution and pooling wrappers,
normalizations and dropout, with their backward ops."""

import math

import kiln
from kiln._decomp import register_decomposition
from kiln._decomp.decompositions import broadcast_shape, dims_of, numel, scalar, to_dtype, to_float, where
from kiln._ops import ops

aten = ops.aten



# --- reductions ------------------------------------------------------------------------------

@register_decomposition(aten.sum.default)
def sum_all(self, dtype=None):
    return aten.sum.dim_IntList(self, None, False, dtype=dtype)


@register_decomposition(aten.max.default)
def max_all(self):
    return aten.amax.default(self, [])


@register_decomposition(aten.min.default)
def min_all(self):
    return aten.amin.default(self, [])


def _all_result(result, self):
    return to_dtype(result, kiln.uint8) if self.dtype == kiln.uint8 else result


@register_decomposition(aten.all.default)
def all_all(self):
    return _all_result(aten.logical_not.default(aten.any.default(aten.logical_not.default(self))), self)


@register_decomposition(aten.all.dim)
def all_dim(self, dim, keepdim=False):
    return _all_result(aten.logical_not.default(aten.any.dim(aten.logical_not.default(self), dim, keepdim)), self)


@register_decomposition(aten.all.dims)
def all_dims(self, dim=None, keepdim=False):
    return _all_result(aten.logical_not.default(aten.any.dims(aten.logical_not.default(self), dim, keepdim)), self)


@register_decomposition(aten.count_nonzero.dim_IntList)
def count_nonzero_dims(self, dim):
    return aten.sum.dim_IntList(aten.ne.Scalar(self, 0), list(dim), False, dtype=kiln.int64)


@register_decomposition(aten.count_nonzero.default)
def count_nonzero(self, dim=None):
    return aten.sum.dim_IntList(aten.ne.Scalar(self, 0), None if dim is None else [dim], False, dtype=kiln.int64)


@register_decomposition(aten.var.default)
def var_all(self, unbiased=True):
    return aten.var.correction(self, None, correction=1 if unbiased else 0)


@register_decomposition(aten.std.default)
def std_all(self, unbiased=True):
    return aten.sqrt.default(aten.var.correction(self, None, correction=1 if unbiased else 0))


@register_decomposition(aten.std.dim)
def std_dim(self, dim, unbiased=True, keepdim=False):
    return aten.sqrt.default(aten.var.correction(self, dim, correction=1 if unbiased else 0, keepdim=keepdim))


@register_decomposition(aten.std.correction)
def std_correction(self, dim=None, *, correction=None, keepdim=False):
    return aten.sqrt.default(aten.var.correction(self, dim, correction=correction, keepdim=keepdim))


def _var_mean(self, dim, correction, keepdim, std):
    var = aten.var.correction(self, dim, correction=correction, keepdim=keepdim)
    mean = aten.mean.dim(self, dim, keepdim)
    return (aten.sqrt.default(var) if std else var), mean


@register_decomposition(aten.var_mean.default)
def var_mean_all(self, unbiased=True):
    return _var_mean(self, None, 1 if unbiased else 0, False, False)


@register_decomposition(aten.var_mean.dim)
def var_mean_dim(self, dim, unbiased=True, keepdim=False):
    return _var_mean(self, dim, 1 if unbiased else 0, keepdim, False)


@register_decomposition(aten.var_mean.correction)
def var_mean_correction(self, dim=None, *, correction=None, keepdim=False):
    return _var_mean(self, dim, correction, keepdim, False)


@register_decomposition(aten.std_mean.default)
def std_mean_all(self, unbiased=True):
    return _var_mean(self, None, 1 if unbiased else 0, False, True)


@register_decomposition(aten.std_mean.dim)
def std_mean_dim(self, dim, unbiased=True, keepdim=False):
    return _var_mean(self, dim, 1 if unbiased else 0, keepdim, True)


@register_decomposition(aten.std_mean.correction)
def std_mean_correction(self, dim=None, *, correction=None, keepdim=False):
    return _var_mean(self, dim, correction, keepdim, True)


@register_decomposition(aten.logsumexp.default)
def logsumexp(self, dim, keepdim=False):
    x = to_float(self)
    dims = dims_of(x, dim)
    if x.dim() == 0:
        return aten.clone.default(x)
    peak = aten.amax.default(x, dims, True)
    peak = where(aten.isinf.default(peak), 0.0, peak)  # all -inf (or an inf) lines: no shift
    total = aten.sum.dim_IntList(aten.exp.default(aten.sub.Tensor(x, peak)), dims, keepdim)
    if not keepdim:
        peak = aten.squeeze.dims(peak, dims)
    return aten.add.Tensor(aten.log.default(total), peak)


@register_decomposition(aten.linalg_vector_norm.default)
def linalg_vector_norm(self, ord=2, dim=None, keepdim=False, *, dtype=None):
    x = self if dtype is None else to_dtype(self, dtype)
    dims = None if dim is None or (not isinstance(dim, int) and len(dim) == 0) else dim
    if ord == 0:
        return aten.sum.dim_IntList(to_dtype(aten.ne.Scalar(x, 0), x.dtype), dims, keepdim)
    a = aten.abs.default(x)
    if ord == math.inf:
        return aten.amax.default(a, [] if dims is None else dims, keepdim)
    if ord == -math.inf:
        return aten.amin.default(a, [] if dims is None else dims, keepdim)
    if ord == 1:
        return aten.sum.dim_IntList(a, dims, keepdim)
    if ord == 2:
        return aten.sqrt.default(aten.sum.dim_IntList(aten.mul.Tensor(a, a), dims, keepdim))
    return aten.pow.Tensor_Scalar(aten.sum.dim_IntList(aten.pow.Tensor_Scalar(a, ord), dims, keepdim), 1.0 / ord)


@register_decomposition(aten.norm.ScalarOpt_dtype)
def norm_dtype(self, p, *, dtype):
    return aten.linalg_vector_norm.default(self, 2 if p is None else p, None, False, dtype=dtype)


@register_decomposition(aten.norm.Scalar)
def norm_scalar(self, p=2):
    return aten.linalg_vector_norm.default(self, p)


@register_decomposition(aten.norm.ScalarOpt_dim_dtype)
def norm_dim_dtype(self, p, dim, keepdim, *, dtype):
    return aten.linalg_vector_norm.default(self, 2 if p is None else p, dim, keepdim, dtype=dtype)


@register_decomposition(aten.norm.ScalarOpt_dim)
def norm_dim(self, p, dim, keepdim=False):
    return aten.linalg_vector_norm.default(self, 2 if p is None else p, dim, keepdim)


@register_decomposition(aten.cumprod.default)
def cumprod(self, dim, *, dtype=None):
    # out[i] = prod_j x[j] over j <= i: a product over a masked [n, n] square along `dim`.
    if dtype is None:
        dtype = self.dtype if self.dtype.is_floating_point else kiln.int64
    x = to_dtype(self, dtype)
    if x.dim() == 0:
        return aten.clone.default(x)
    dim = dim % x.dim()
    n = x.shape[dim]
    idx = aten.arange.start_step(0, n, 1, dtype=kiln.int64, device=x.device)
    mask = aten.ge.Tensor(aten.unsqueeze.default(idx, 1), aten.unsqueeze.default(idx, 0))  # [i, j]: j <= i
    mask = aten.view.default(mask, [n, n] + [1] * (x.dim() - dim - 1))
    square = aten.where.self(mask, aten.unsqueeze.default(x, dim), scalar(1, x))
    return aten.prod.dim_int(square, dim + 1, False, dtype=dtype)


# --- matrix products -------------------------------------------------------------------------

@register_decomposition(aten.dot.default)
def dot(self, tensor):
    return aten.sum.dim_IntList(aten.mul.Tensor(self, tensor), None)


@register_decomposition(aten.mv.default)
def mv(self, vec):
    return aten.squeeze.dim(aten.mm.default(self, aten.unsqueeze.default(vec, 1)), 1)


@register_decomposition(aten.baddbmm.default)
def baddbmm(self, batch1, batch2, *, beta=1, alpha=1):
    product = aten.bmm.default(batch1, batch2)
    if alpha != 1:
        product = aten.mul.Scalar(product, alpha)
    if beta == 0:  # self is ignored, NaN included
        return product
    scaled = self if beta == 1 else aten.mul.Scalar(self, beta)
    return aten.add.Tensor(scaled, product)


@register_decomposition(aten.matmul.default)
def matmul(self, other):
    da, db = self.dim(), other.dim()
    if da == 0 or db == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are {da}D and {db}D")
    if da == 1 and db == 1:
        return aten.dot.default(self, other)
    if da == 2 and db == 1:
        return aten.mv.default(self, other)
    if da == 1 and db == 2:
        return aten.squeeze.dim(aten.mm.default(aten.unsqueeze.default(self, 0), other), 0)
    if da == 2 and db == 2:
        return aten.mm.default(self, other)
    a = aten.unsqueeze.default(self, 0) if da == 1 else self
    b = aten.unsqueeze.default(other, 1) if db == 1 else other
    n, k = a.shape[-2], a.shape[-1]
    m = b.shape[-1]
    batch = broadcast_shape(list(a.shape[:-2]), list(b.shape[:-2]))
    nb = numel(batch)
    a3 = aten.reshape.default(aten.expand.default(a, batch + [n, k]), [nb, n, k])
    b3 = aten.reshape.default(aten.expand.default(b, batch + [b.shape[-2], m]), [nb, b.shape[-2], m])
    out = aten.view.default(aten.bmm.default(a3, b3), batch + [n, m])
    if da == 1:
        out = aten.squeeze.dim(out, -2)
    if db == 1:
        out = aten.squeeze.dim(out, -1)
    return out



@register_decomposition(aten.linear.default)
def linear(input, weight, bias=None):
    """PyTorch's: addmm for a matrix input with a bias, and for any other contiguous input with a vector
    bias, flattened to a matrix and viewed back (its _flatten_nd_linear); else matmul, then the bias."""
    wt = aten.permute.default(weight, [1, 0]) if weight.dim() == 2 else weight
    if input.dim() == 2 and bias is not None and weight.dim() == 2:
        return aten.addmm.default(bias, input, wt)
    if bias is not None and weight.dim() == 2 and bias.dim() == 1 and input.dim() >= 1 and input.is_contiguous():
        lead = list(input.shape[:-1])
        flat = aten.view.default(input, [numel(lead), input.shape[-1]])
        return aten.view.default(aten.addmm.default(bias, flat, wt), lead + [weight.shape[0]])
    out = aten.matmul.default(input, wt)
    return out if bias is None else aten.add.Tensor(out, bias)


@register_decomposition(aten._addmm_activation.default)
def _addmm_activation(self, mat1, mat2, beta=1, alpha=1, use_gelu=False):
    """PyTorch's: addmm, then relu or GELU (tanh-approximated on CUDA, as cuBLASLt's epilogue)."""
    out = aten.addmm.default(self, mat1, mat2, beta=beta, alpha=alpha)
    if not use_gelu:
        return aten.relu.default(out)
    return aten.gelu.default(out, approximate="tanh" if out.device.type == "cuda" else "none")


# --- convolution and pooling wrappers --------------------------------------------------------

def _pair(v):
    if isinstance(v, int):
        return [v, v]
    v = list(v)
    return v * 2 if len(v) == 1 else v


@register_decomposition(aten.conv2d.default)
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    unbatched = input.dim() == 3
    x = aten.unsqueeze.default(input, 0) if unbatched else input
    out = aten.convolution.default(x, weight, bias, _pair(stride), _pair(padding), _pair(dilation), False, [0, 0],
                                   groups)
    return aten.squeeze.dim(out, 0) if unbatched else out


@register_decomposition(aten.max_pool2d.default)
def max_pool2d(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return aten.max_pool2d_with_indices.default(self, kernel_size, stride, padding, dilation, ceil_mode)[0]


@register_decomposition(aten.adaptive_avg_pool2d.default)
def adaptive_avg_pool2d(self, output_size):
    return aten._adaptive_avg_pool2d.default(self, output_size)


# --- normalization ---------------------------------------------------------------------------

def _channel_shape(x):
    return [1, x.shape[1]] + [1] * (x.dim() - 2)


def _reduce_dims(x):
    return [0] + list(range(2, x.dim()))


@register_decomposition(aten.native_batch_norm.default)
def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    if running_mean is None and running_var is None:
        return aten._native_batch_norm_legit.no_stats(input, weight, bias, training, momentum, eps)
    if training:
        return aten._native_batch_norm_legit.default(input, weight, bias, running_mean, running_var, training,
                                                     momentum, eps)
    return aten._native_batch_norm_legit_no_training.default(input, weight, bias, running_mean, running_var,
                                                             momentum, eps)


@register_decomposition(aten._native_batch_norm_legit_functional.default)
def native_batch_norm_legit_functional(input, weight, bias, running_mean, running_var, training, momentum, eps):
    shape = _channel_shape(input)
    dims = _reduce_dims(input)
    if training:
        var, mean = aten.var_mean.correction(input, dims, correction=0, keepdim=True)
        rstd = aten.rsqrt.default(aten.add.Scalar(var, eps))
        out = aten.mul.Tensor(aten.sub.Tensor(input, mean), rstd)
        save_mean = aten.view.default(mean, [input.shape[1]])
        save_rstd = aten.view.default(rstd, [input.shape[1]])
        n = numel(input.shape) // input.shape[1]
        unbiased = aten.mul.Scalar(aten.view.default(var, [input.shape[1]]), n / max(n - 1, 1))
        new_mean = aten.add.Tensor(aten.mul.Scalar(running_mean, 1 - momentum),
                                   aten.mul.Scalar(to_dtype(save_mean, running_mean.dtype), momentum))
        new_var = aten.add.Tensor(aten.mul.Scalar(running_var, 1 - momentum),
                                  aten.mul.Scalar(to_dtype(unbiased, running_var.dtype), momentum))
    else:
        rstd = aten.rsqrt.default(aten.add.Scalar(running_var, eps))
        out = aten.mul.Tensor(aten.sub.Tensor(input, aten.view.default(running_mean, shape)),
                              aten.view.default(rstd, shape))
        save_mean = aten.empty.memory_format([0], dtype=input.dtype, device=input.device)
        save_rstd = aten.empty.memory_format([0], dtype=input.dtype, device=input.device)
        new_mean, new_var = aten.clone.default(running_mean), aten.clone.default(running_var)
    if weight is not None:
        out = aten.mul.Tensor(out, aten.view.default(weight, shape))
    if bias is not None:
        out = aten.add.Tensor(out, aten.view.default(bias, shape))
    return to_dtype(out, input.dtype), save_mean, save_rstd, new_mean, new_var


@register_decomposition(aten.batch_norm.default)
def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled):
    return aten.native_batch_norm.default(input, weight, bias, running_mean, running_var, training, momentum, eps)[0]


@register_decomposition(aten.layer_norm.default)
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):
    return aten.native_layer_norm.default(input, normalized_shape, weight, bias, eps)[0]


@register_decomposition(aten.group_norm.default)
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    n, c = input.shape[0], input.shape[1]
    hxw = numel(input.shape[2:])
    return aten.native_group_norm.default(input, weight, bias, n, c, hxw, num_groups, eps)[0]


@register_decomposition(aten.native_batch_norm_backward.default)
def native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train,
                               eps, output_mask):
    shape = _channel_shape(input)
    dims = _reduce_dims(input)
    if train:
        mean, invstd = save_mean, save_invstd
    else:
        mean, invstd = running_mean, aten.rsqrt.default(aten.add.Scalar(running_var, eps))
    mean_b, invstd_b = aten.view.default(mean, shape), aten.view.default(invstd, shape)
    n = numel(input.shape) // input.shape[1]
    grad_sum = aten.sum.dim_IntList(grad_out, dims)
    centered = aten.sub.Tensor(input, mean_b)
    dot_p = aten.sum.dim_IntList(aten.mul.Tensor(grad_out, centered), dims)
    scale = invstd_b if weight is None else aten.mul.Tensor(invstd_b, aten.view.default(weight, shape))
    grad_input = grad_weight = grad_bias = None
    if output_mask[0]:
        if train:
            proj = aten.mul.Tensor(aten.div.Scalar(aten.view.default(dot_p, shape), n), aten.mul.Tensor(invstd_b, invstd_b))
            grad_mean = aten.div.Scalar(aten.view.default(grad_sum, shape), n)
            inner = aten.sub.Tensor(aten.sub.Tensor(grad_out, aten.mul.Tensor(centered, proj)), grad_mean)
            grad_input = aten.mul.Tensor(inner, scale)
        else:
            grad_input = aten.mul.Tensor(grad_out, scale)
        grad_input = to_dtype(grad_input, input.dtype)
    if output_mask[1]:
        grad_weight = aten.mul.Tensor(dot_p, invstd)
    if output_mask[2]:
        grad_bias = grad_sum
    return grad_input, grad_weight, grad_bias


# --- dropout ---------------------------------------------------------------------------------

@register_decomposition(aten.dropout.default)
def dropout(input, p, train):
    if not train or p == 0:
        return aten.alias.default(input)
    return aten.native_dropout.default(input, p, train)[0]


@register_decomposition(aten.native_dropout_backward.default)
def native_dropout_backward(grad_output, mask, scale):
    return aten.mul.Scalar(aten.mul.Tensor(grad_output, to_dtype(mask, grad_output.dtype)), scale)
