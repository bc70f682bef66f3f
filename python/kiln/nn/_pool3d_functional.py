"""The 3-D pooling functionals of kiln.nn.functional: max_pool3d(_with_indices), avg_pool3d,
adaptive_avg_pool3d and adaptive_max_pool3d(_with_indices) over (N, C, D, H, W) or (C, D, H, W).

kiln's pooling kernels stop at 2-D, so each 3-D pooling is two 2-D ones (Note [3-D pooling as two
2-D poolings]); the arguments are checked first with aten's 3-D rules and messages, so a bad call
names the 3-D op, never the 2-D one it is built from. Autograd differentiates the composition, and
the tracers see 2-D pooling ops, which Inductor lowers.

Note [3-D pooling as two 2-D poolings]
A 3-D pooling window is a box, the product of one window per dimension, and max, sum and mean
over a box are separable. Stage one pools (H, W) over the input seen as (B, D, H, W), B the
leading dimensions flattened; stage two pools D over that result seen as (B, 1, D, Ho*Wo) with a
(kD, 1) kernel. Each stage applies aten's per-dimension output-size rule (padding, dilation,
ceil_mode), so the output sizes are max_pool3d's.
- max: stage one keeps the first maximum of each depth slice in (h, w) order, stage two the first
  depth holding the maximum, so the winner is the first in (d, h, w) order, as aten's kernel (it
  scans d, h, w and replaces only on a greater value). Its index d*H*W + h*W + w is the depth read
  from stage two's index and stage one's index gathered at that depth.
- average: the box sum is both stages with divisor_override=1; aten's divisor (the window clipped to
  the padded input, or to the input when count_include_pad is False) is a product of per-dimension
  counts, built in Python from the static sizes and divided out once (truncating for int64, as
  aten's integer kernel).
- adaptive: an adaptive window is a box too (floor(o*I/O) to ceil((o+1)*I/O) per dimension); the
  mean of a box is the mean over its depth window of its (h, w) means, and the adaptive max composes
  as the max does (stage two maps Ho*Wo onto itself).
The cost is one intermediate of B*D*Ho*Wo elements.
"""

import kiln
from kiln.nn._arg_tuples import _list_with_default
from kiln.nn._conv_functional import _type_name
from kiln.nn._pool_functional import _adaptive_max_pool2d_impl, _as_list

__all__ = ["max_pool3d", "max_pool3d_with_indices", "avg_pool3d", "adaptive_avg_pool3d", "adaptive_max_pool3d",
           "adaptive_max_pool3d_with_indices"]


def _triple_arg(values, message, may_be_empty=False):
    """A kernel/stride/padding/dilation argument as 3 ints, or aten's RuntimeError naming it."""
    values = _as_list(values)
    if len(values) not in ((0, 1, 3) if may_be_empty else (1, 3)):
        raise RuntimeError(message)
    return values * 3 if len(values) == 1 else values


def _half_of(n):
    return int(n / 2)  # C++ division truncates toward zero (a zero kernel gives (-d + 1) / 2 == 0)


def _pooling_output_shape(size, kernel, pad, stride, dilation, ceil_mode):
    """aten's pooling_output_shape (Pool.h), with its checks and messages."""
    if stride == 0:
        raise RuntimeError("stride should not be zero")
    if pad < 0:
        raise RuntimeError(f"pad must be non-negative, but got pad: {pad}")
    if pad > _half_of((kernel - 1) * dilation + 1):
        raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={pad}, "
                           f"kernel_size={kernel} and dilation={dilation}")
    out = (size + 2 * pad - dilation * (kernel - 1) - 1 + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:  # the last window must start inside the input
        out -= 1
    return out


def _pool3d_output_sizes(name, input, kernel, stride, pad, dilation, ceil_mode, check_input_size):
    """(oD, oH, oW) after aten's pooling_output_shape per dimension and pool3d_shape_check."""
    sizes = list(input.shape)
    depth, height, width = sizes[-3:]
    out = [_pooling_output_shape(sizes[-3 + i], kernel[i], pad[i], stride[i], dilation[i], ceil_mode)
           for i in range(3)]
    (kt, kh, kw), (dt, dh, dw), (lt, lh, lw) = kernel, stride, dilation
    if min(kernel) <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kT: {kt} kH: {kh} kW: {kw}")
    if min(stride) <= 0:
        raise RuntimeError(f"stride should be greater than zero, but got dT: {dt} dH: {dh} dW: {dw}")
    if min(dilation) <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilationT: {lt} dilationH: {lh} "
                           f"dilationW: {lw}")
    for i, size in enumerate(sizes):
        if size <= 0 and not (len(sizes) == 5 and i == 0):  # (aten prints the size where it means i)
            raise RuntimeError(f"{name}: Expected input's non-batch dimensions to have positive length, but input "
                               f"has a shape of {sizes} and non-batch dimension {size} has length zero!")
    if check_input_size and (depth < kt or height < kh or width < kw):
        raise RuntimeError(f"input image (T: {depth} H: {height} W: {width}) smaller than kernel size (kT: {kt} "
                           f"kH: {kh} kW: {kw})")
    if kt // 2 < pad[0] or kw // 2 < pad[2] or kh // 2 < pad[1]:
        raise RuntimeError(f"pad should be smaller than or equal to half of kernel size, but got kT: {kt} kW: {kw} "
                           f"kH: {kh} padT: {pad[0]} padW: {pad[2]} padH: {pad[1]}")
    if min(out) < 1:
        slices = sizes[-4]
        raise RuntimeError(f"Given input size: ({slices}x{depth}x{height}x{width}). Calculated output size: "
                           f"({slices}x{out[0]}x{out[1]}x{out[2]}). Output size is too small")
    return out


def _as_planes(input):
    """input (*lead, D, H, W) as (B, D, H, W), and lead."""
    lead = tuple(input.shape[:-3])
    batch = 1
    for size in lead:
        batch *= size
    return input.reshape(batch, *input.shape[-3:]), lead


def _combine_indices(depth_then_plane, plane_index, plane_numel, in_plane_numel):
    """Stage two's index d*(Ho*Wo) + j and stage one's (B, D, Ho*Wo) plane indices -> the flat
    index d*H*W + h*W + w of each winner (Note [3-D pooling as two 2-D poolings])."""
    depth = depth_then_plane.div(plane_numel, rounding_mode="floor")
    return depth * in_plane_numel + plane_index.gather(2, depth)


# --- max pooling -----------------------------------------------------------------------------------
def _max_pool3d_impl(input, kernel_size, stride, padding, dilation, ceil_mode, with_indices):
    kernel = _triple_arg(kernel_size, "max_pool3d: kernel_size must either be a single int, or a tuple of three ints")
    stride = _triple_arg([] if stride is None else stride,
                         "max_pool3d: stride must either be omitted, a single int, or a tuple of three ints",
                         may_be_empty=True) or kernel
    pad = _triple_arg(padding, "max_pool3d: padding must either be a single int, or a tuple of three ints")
    dilation = _triple_arg(dilation, "max_pool3d: dilation must be either a single int, or a tuple of three ints")
    if input.dim() not in (4, 5):
        raise RuntimeError("non-empty 4D or 5D (batch mode) tensor expected for input")
    out_d, out_h, out_w = _pool3d_output_sizes("max_pool3d_with_indices_out_cpu_template()", input, kernel, stride,
                                               pad, dilation, ceil_mode, False)
    if input.dtype == kiln.bool:
        raise NotImplementedError("\"max_pool3d\" not implemented for 'Bool'")
    planes, lead = _as_planes(input)
    batch, depth, height, width = planes.shape
    hw_args = ([kernel[1], kernel[2]], [stride[1], stride[2]], [pad[1], pad[2]], [dilation[1], dilation[2]],
               ceil_mode)
    d_args = ([kernel[0], 1], [stride[0], 1], [pad[0], 0], [dilation[0], 1], ceil_mode)
    if not with_indices:
        pooled = kiln.max_pool2d(planes, *hw_args).reshape(batch, 1, depth, out_h * out_w)
        return kiln.max_pool2d(pooled, *d_args).reshape(*lead, out_d, out_h, out_w)
    pooled, plane_index = kiln.max_pool2d_with_indices(planes, *hw_args)
    values, depth_index = kiln.max_pool2d_with_indices(pooled.reshape(batch, 1, depth, out_h * out_w), *d_args)
    index = _combine_indices(depth_index, plane_index.reshape(batch, 1, depth, out_h * out_w), out_h * out_w,
                             height * width)
    out_shape = (*lead, out_d, out_h, out_w)
    return values.reshape(out_shape), index.reshape(out_shape)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    """(values, indices) of a 3-D max pooling; indices are flat d*H*W + h*W + w positions in each input
    volume, as PyTorch's."""
    return _max_pool3d_impl(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    if return_indices:
        return max_pool3d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return _max_pool3d_impl(input, kernel_size, stride, padding, dilation, ceil_mode, False)


# --- average pooling -------------------------------------------------------------------------------
def _window_counts(size, kernel, stride, pad, out, count_include_pad):
    """aten's avg_pool3d divisor along one dimension, for each output position."""
    counts = []
    for o in range(out):
        start = o * stride - pad
        end = min(start + kernel, size + pad)
        if count_include_pad:
            counts.append(end - start)
        else:
            counts.append(max(min(end, size) - max(start, 0), 1))  # (never empty: windows start inside)
    return counts


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """3-D average pooling: the box sum over the divisor aten uses (Note [3-D pooling as two 2-D poolings])."""
    kernel = _triple_arg(kernel_size, "avg_pool3d: kernel_size must be a single int, or a tuple of three ints")
    stride = _triple_arg([] if stride is None else stride,
                         "avg_pool3d: stride must be omitted, a single int, or a tuple of three ints",
                         may_be_empty=True) or kernel
    pad = _triple_arg(padding, "avg_pool3d: padding must be a single int, or a tuple of three ints")
    if input.dim() not in (4, 5):
        raise RuntimeError("non-empty 4D or 5D (batch mode) tensor expected for input")
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    out_d, out_h, out_w = _pool3d_output_sizes("avg_pool3d()", input, kernel, stride, pad, [1, 1, 1], ceil_mode,
                                               True)
    if input.dtype not in (kiln.float32, kiln.float64, kiln.int64):
        raise NotImplementedError(f"\"avg_pool3d_out_frame\" not implemented for '{_type_name(input.dtype)}'")
    planes, lead = _as_planes(input)
    batch, depth = planes.shape[:2]
    sums = kiln.avg_pool2d(planes, [kernel[1], kernel[2]], [stride[1], stride[2]], [pad[1], pad[2]], ceil_mode,
                           True, 1)
    sums = kiln.avg_pool2d(sums.reshape(batch, 1, depth, out_h * out_w), [kernel[0], 1], [stride[0], 1], [pad[0], 0],
                           ceil_mode, True, 1).reshape(*lead, out_d, out_h, out_w)
    if divisor_override is not None:
        divisor = divisor_override
    else:
        per_dim = [kiln.tensor(_window_counts(input.shape[-3 + i], kernel[i], stride[i], pad[i], n, count_include_pad),
                               dtype=kiln.int64, device=input.device) for i, n in enumerate((out_d, out_h, out_w))]
        divisor = per_dim[0].reshape(-1, 1, 1) * per_dim[1].reshape(-1, 1) * per_dim[2]
    if input.dtype == kiln.int64:
        return sums.div(divisor, rounding_mode="trunc")
    return sums / divisor


# --- adaptive pooling ------------------------------------------------------------------------------
def _adaptive_output_size(output_size, input):
    output_size = _list_with_default(output_size, input.size())
    return [output_size] * 3 if isinstance(output_size, int) else list(output_size)


def _check_nonempty(name, input):
    for i in range(1, input.dim()):
        if input.shape[i] <= 0:
            raise RuntimeError(f"{name}(): Expected input to have non-zero size for non-batch dimensions, but input "
                               f"has sizes {list(input.shape)} with dimension {i} being empty")


def _empty_result(input, lead, output_size):
    """A zero-element result still in input's graph (aten's outputs of an empty output_size are)."""
    return input.flatten(-3).narrow(-1, 0, 0).reshape(*lead, *output_size)


def adaptive_avg_pool3d(input, output_size):
    """3-D adaptive average pooling to output_size (an int, or 3 sizes where None keeps the input's)."""
    output_size = _adaptive_output_size(output_size, input)
    if len(output_size) != 3:
        raise RuntimeError("adaptive_avg_pool3d: output_size must be 3")
    out_d, out_h, out_w = output_size
    if min(output_size) < 0:
        raise RuntimeError("adaptive_avg_pool3d: elements of output_size must be greater than or equal to 0 but "
                           f"received {{{out_d}, {out_h},{out_w}}}")
    if output_size == [1, 1, 1]:  # aten's shortcut: a mean over the last three dimensions, whatever the rank
        return input.mean([-1, -2, -3], keepdim=True)
    _check_nonempty("adaptive_avg_pool3d", input)
    if input.dim() not in (4, 5):
        raise RuntimeError(f"adaptive_avg_pool3d(): Expected 4D or 5D tensor, but got {list(input.shape)}")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"adaptive_avg_pool3d_cpu\" not implemented for '{_type_name(input.dtype)}'")
    planes, lead = _as_planes(input)
    if min(output_size) == 0:
        return _empty_result(input, lead, output_size)
    # float16/bfloat16 in float32 between the stages, as aten accumulates them
    compute = planes if planes.dtype in (kiln.float32, kiln.float64) else planes.float()
    batch, depth = planes.shape[:2]
    means = kiln.adaptive_avg_pool2d(compute, [out_h, out_w]).reshape(batch, 1, depth, out_h * out_w)
    means = kiln.adaptive_avg_pool2d(means, [out_d, out_h * out_w])
    return means.to(input.dtype).reshape(*lead, out_d, out_h, out_w)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):
    """(values, indices) of a 3-D adaptive max pooling; indices are flat d*H*W + h*W + w positions."""
    output_size = _adaptive_output_size(output_size, input)
    if input.dim() not in (4, 5):
        raise RuntimeError(f"adaptive_max_pool3d(): Expected 4D or 5D tensor, but got: {list(input.shape)}")
    _check_nonempty("adaptive_max_pool3d", input)
    if len(output_size) != 3:
        raise RuntimeError("adaptive_max_pool3d(): internal error: output_size.size() must be 3")
    if min(output_size) < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(output_size)}: "
                           f"{list(input.shape[:-3]) + output_size}")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"adaptive_max_pool3d_cpu\" not implemented for '{_type_name(input.dtype)}'")
    out_d, out_h, out_w = output_size
    planes, lead = _as_planes(input)
    if min(output_size) == 0:
        values = _empty_result(input, lead, output_size)
        return values, kiln.zeros(values.shape, dtype=kiln.int64, device=input.device)
    batch, depth, height, width = planes.shape
    pooled, plane_index = _adaptive_max_pool2d_impl("adaptive_max_pool3d", planes, (out_h, out_w))
    values, depth_index = _adaptive_max_pool2d_impl(
        "adaptive_max_pool3d", pooled.reshape(batch, 1, depth, out_h * out_w), (out_d, out_h * out_w))
    index = _combine_indices(depth_index, plane_index.reshape(batch, 1, depth, out_h * out_w), out_h * out_w,
                             height * width)
    return values.reshape(*lead, *output_size), index.reshape(*lead, *output_size)


def adaptive_max_pool3d(input, output_size, return_indices=False):
    out = adaptive_max_pool3d_with_indices(input, output_size)
    return out if return_indices else out[0]
