"""Power-average and unpooling functionals of kiln.nn.functional: lp_pool1d/2d/3d and max_unpool1d/2d/3d.

lp_pool*d are PyTorch's own Python compositions, line for line: (sum over the window of x**p)**(1/p)
from avg_pool*d times the window size (max_pool*d of |x| for p = +-inf).

max_unpool*d has an aten kernel in PyTorch (max_unpool2d/3d; the 1-D form runs the 2-D one on a unit
width); kiln composes it as a scatter: each (sample, channel) volume's values written into a zero
output of the requested size at the flat positions a max pooling's indices name, so the gradient
of a value is the output gradient gathered at its index, as aten's derivative. The indices are
range-checked with aten's message before the scatter (on real tensors only: under a fake-tensor
trace the values are unknown and the check is skipped, as for kiln's other data-dependent checks).
Positions two indices share get one of the values (aten leaves which unspecified too).
"""

import kiln
from kiln._composites import _is_fake
from kiln.nn._arg_tuples import _pair, _single, _triple
from kiln.nn._conv_functional import _type_name
from kiln.nn._pool3d_functional import avg_pool3d, max_pool3d
from kiln.nn._pool_functional import avg_pool1d, avg_pool2d, max_pool1d, max_pool2d

__all__ = ["lp_pool1d", "lp_pool2d", "lp_pool3d", "max_unpool1d", "max_unpool2d", "max_unpool3d"]


# --- power-average pooling (torch.nn.functional's compositions) ----------------------------------------
def _lp_finish(out, window, norm_type):
    return (kiln.sign(out) * kiln.relu(kiln.abs(out))).mul(window).pow(1.0 / norm_type)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    kd, kw, kh = _triple(kernel_size)
    if isinstance(norm_type, (int, float)):
        if norm_type == float("inf"):
            return max_pool3d(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
        if norm_type == -float("inf"):
            return -max_pool3d(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if stride is not None:
        out = avg_pool3d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    else:
        out = avg_pool3d(input.pow(norm_type), kernel_size, padding=0, ceil_mode=ceil_mode)
    return _lp_finish(out, kd * kw * kh, norm_type)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    kw, kh = _pair(kernel_size)
    if isinstance(norm_type, (int, float)):
        if norm_type == float("inf"):
            return max_pool2d(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
        if norm_type == -float("inf"):
            return -max_pool2d(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if stride is not None:
        out = avg_pool2d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    else:
        out = avg_pool2d(input.pow(norm_type), kernel_size, padding=0, ceil_mode=ceil_mode)
    return _lp_finish(out, kw * kh, norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    if isinstance(norm_type, (int, float)):
        if norm_type == float("inf"):
            return max_pool1d(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
        if norm_type == -float("inf"):
            return -max_pool1d(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if stride is not None:
        out = avg_pool1d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    else:
        out = avg_pool1d(input.pow(norm_type), kernel_size, padding=0, ceil_mode=ceil_mode)
    return _lp_finish(out, kernel_size, norm_type)


# --- max unpooling ------------------------------------------------------------------------------------
def _unpool_output_size(input, kernel_size, stride, padding, output_size):
    """torch.nn.functional._unpool_output_size: the default size inverts the pooling's, an explicit
    one (optionally with batch and channel sizes in front) must lie within a stride of it."""
    input_size = input.size()
    default_size = [(input_size[-len(kernel_size) + d] - 1) * stride[d] + kernel_size[d] - 2 * padding[d]
                    for d in range(len(kernel_size))]
    if output_size is None:
        ret = default_size
    else:
        if len(output_size) == len(kernel_size) + 2:
            output_size = output_size[2:]
        if len(output_size) != len(kernel_size):
            raise ValueError(f"output_size should be a sequence containing {len(kernel_size)} or "
                             f"{len(kernel_size) + 2} elements, but it has a length of '{len(output_size)}'")
        for d in range(len(kernel_size)):
            min_size = default_size[d] - stride[d]
            max_size = default_size[d] + stride[d]
            if not (min_size < output_size[d] < max_size):
                raise ValueError(f'invalid output_size "{output_size}" (dim {d} must be between {min_size} and '
                                 f'{max_size})')
        ret = output_size
    for d in range(len(kernel_size)):
        if ret[d] < 0:
            raise ValueError("max_unpooling: output_size must contain non-negative spatial dimensions, but got "
                             f"output_size[{d}]={ret[d]}")
    return ret


def _max_unpool(input, indices, output_size, spatial_dims, kernel_name, stride=None):
    """aten's max_unpooling2d/3d forward: checks, then the scatter (see the banner)."""
    if indices.dtype != kiln.int64:
        raise RuntimeError(f"elements in indices should be type int64 but got: {_type_name(indices.dtype)}")
    if input.dim() not in (spatial_dims + 1, spatial_dims + 2):
        raise RuntimeError(f"Input to max_unpooling{spatial_dims}d should be a {spatial_dims + 1}d or "
                           f"{spatial_dims + 2}d Tensor, but got a tensor with {input.dim()} dimensions.")
    if list(input.shape) != list(indices.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor ({list(input.shape)}) "
                           f"but got indices tensor with shape: {list(indices.shape)}")
    for i in range(1, input.dim()):
        if input.shape[i] <= 0:
            raise RuntimeError(f"{kernel_name}: Expected input to have non-zero size for non-batch dimensions, but "
                               f"got {list(input.shape)} with dimension {i} being empty.")
    if stride is not None and min(stride) <= 0:  # (max_unpool3d checks its stride; the 2-D kernel takes none)
        raise RuntimeError(f"strides should be greater than zero, but got stride: {list(stride)}")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"max_unpool{spatial_dims}d\" not implemented for '{_type_name(input.dtype)}'")
    lead = tuple(input.shape[:-spatial_dims])
    volume = 1
    for size in output_size:
        volume *= size
    flat_indices = indices.reshape(*lead, -1)
    if not _is_fake(indices) and indices.numel():
        bad = (flat_indices < 0) | (flat_indices >= volume)
        if bool(bad.any()):
            first = int(flat_indices[bad][0].item())
            sizes = "x".join(str(s) for s in output_size)
            raise RuntimeError(f"Found an invalid max index: {first} (output volumes are of size {sizes})")
    out = kiln.zeros(*lead, volume, dtype=input.dtype, device=input.device)
    return out.scatter(-1, flat_indices, input.reshape(*lead, -1)).reshape(*lead, *output_size)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of max_pool1d: values back at their indices, zeros elsewhere."""
    kernel_size = _single(kernel_size)
    stride = _single(stride) if stride is not None else kernel_size
    padding = _single(padding)
    output_size = _unpool_output_size(input, kernel_size, stride, padding, output_size)
    # PyTorch runs the 2-D kernel on a unit width, which is what its messages describe
    return _max_unpool(input.unsqueeze(-1), indices.unsqueeze(-1), list(output_size) + [1], 2,
                       "max_unpooling2d_forward_out_cpu()").squeeze(-1)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of max_pool2d: values back at their indices, zeros elsewhere."""
    kernel_size = _pair(kernel_size)
    stride = _pair(stride) if stride is not None else kernel_size
    padding = _pair(padding)
    output_size = _unpool_output_size(input, kernel_size, stride, padding, output_size)
    return _max_unpool(input, indices, list(output_size), 2, "max_unpooling2d_forward_out_cpu()")


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of max_pool3d: values back at their indices, zeros elsewhere."""
    kernel_size = _triple(kernel_size)
    stride = _triple(stride) if stride is not None else kernel_size
    padding = _triple(padding)
    output_size = _unpool_output_size(input, kernel_size, stride, padding, output_size)
    return _max_unpool(input, indices, list(output_size), 3, "max_unpooling3d_forward_out_cpu()", stride)
