"""The convolution functionals of kiln.nn.functional: conv1d/2d/3d and conv_transpose1d/2d/3d.

1-D and 2-D convolutions are one `aten.convolution` call each, as in PyTorch (its Python layer
hands them to C++). kiln's convolution kernel stops at two spatial dimensions, so the 3-D forms are
composed here from 2-D convolutions over the depth taps (Note [3-D convolution from 2-D ones]); being
compositions of registry ops, they get autograd, fake tensors and compilation from those ops. The
argument checks that the 2-D kernel would word for 2 dimensions are made here for 3, with
PyTorch's messages (its ConvUtils.h).

Note [3-D convolution from 2-D ones]
A 3-D convolution is a sum over the kernel's depth taps kd of 2-D convolutions: output depth od
reads input depth od*stride + kd*dilation with the weight slice w[:, :, kd]. conv3d stacks the kD
strided depth slices of the padded input next to the channels (an im2col along depth only) and
runs ONE grouped conv2d over a batch of N*D_out images whose channels are (group, kd, channel), so
the sum over kd happens inside the GEMM. The cost is that unfolded copy: kD times the input (times
D_out*stride/D), against nothing for a direct 3-D kernel; the arithmetic is the same.
conv_transpose3d runs ONE grouped conv_transpose2d over the N*D input depth slices with weights
reshaped to produce every (out channel, kd) pair, then scatters each tap's slab to output depth
d*stride + kd*dilation - padding (a zero-interleave for the stride, then one pad per tap, negative
pads cropping) and sums the kD slabs: kD output-sized temporaries.
"""

import warnings

import kiln
from kiln.nn._arg_tuples import _pair, _single

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"]

_same_padding_warned = False  # PyTorch's TORCH_WARN_ONCE: once per process


def _size_str(shape):
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _batched(name, input, spatial_dims):
    """(input with a batch dimension, whether one was added); PyTorch's rank check and message."""
    if input.dim() not in (spatial_dims + 1, spatial_dims + 2):
        raise RuntimeError(f"Expected {spatial_dims + 1}D (unbatched) or {spatial_dims + 2}D (batched) input to "
                           f"{name}, but got input of size: {_size_str(input.shape)}")
    if input.dim() == spatial_dims + 1:
        return input.unsqueeze(0), True
    return input, False


def _expand_param(name, value, n):
    """An int or a list of 1 or n ints -> a tuple of n (ConvUtils.h's expand_param_if_needed)."""
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if len(values) not in (1, n):
        raise RuntimeError(f"expected {name} to be a single integer value or a list of {n} values to match the "
                           f"convolution dimensions, but got {name}={_size_str(values)}")
    return tuple(values * n) if len(values) == 1 else tuple(values)


def _same_padding(input, weight, stride, dilation, spatial_dims):
    """padding='same' as PyTorch's _convolution_same: the symmetric part as the convolution's padding,
    the odd element of an even total (right/bottom side) as an explicit zero pad of the input."""
    stride = _expand_param("stride", stride, spatial_dims)
    if any(s != 1 for s in stride):
        raise RuntimeError("padding='same' is not supported for strided convolutions")
    dilation = _expand_param("dilation", dilation, spatial_dims)
    symmetric, extra = [], [0, 0] * spatial_dims  # extra in F.pad order: last dimension first
    for i, (d, k) in enumerate(zip(dilation, weight.shape[2:])):
        total = d * (k - 1)
        symmetric.append(total // 2)
        extra[2 * (spatial_dims - 1 - i) + 1] = total - 2 * (total // 2)
    if any(extra):
        global _same_padding_warned
        if not _same_padding_warned:
            _same_padding_warned = True
            warnings.warn("Using padding='same' with even kernel lengths and odd dilation may require a zero-padded "
                          "copy of the input be created")
        input = kiln.constant_pad_nd(input, extra, 0)
    return input, tuple(symmetric)


def _resolve_padding(input, weight, padding, stride, dilation, spatial_dims):
    """(input, numeric padding) for an int/tuple padding or the strings 'valid' and 'same'."""
    if not isinstance(padding, str):
        return input, padding
    if padding == "valid":
        return input, 0
    if padding == "same":
        if weight.dim() != spatial_dims + 2:  # let the convolution's own check word the rank error
            return input, 0
        return _same_padding(input, weight, stride, dilation, spatial_dims)
    raise RuntimeError(f"Invalid padding string: '{padding}'")


# --- 1-D and 2-D: one aten.convolution --------------------------------------------------------------
def _conv(name, spatial_dims, ntuple, input, weight, bias, stride, padding, dilation, groups):
    input, batch_added = _batched(name, input, spatial_dims)
    input, padding = _resolve_padding(input, weight, padding, stride, dilation, spatial_dims)
    out = kiln.convolution(input, weight, bias, list(ntuple(stride)), list(ntuple(padding)), list(ntuple(dilation)),
                           False, [0] * spatial_dims, groups)
    return out.squeeze(0) if batch_added else out


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution over (N, C, L) or (C, L); padding is an int, a 1-tuple, 'valid' or 'same'."""
    return _conv("conv1d", 1, _single, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution over (N, C, H, W) or (C, H, W); padding is an int, a pair, 'valid' or 'same'."""
    return _conv("conv2d", 2, _pair, input, weight, bias, stride, padding, dilation, groups)


def _check_transposed_output(input, weight, stride, padding, output_padding, dilation, spatial_dims):
    """PyTorch's 'Output size is too small' check, which kiln's transposed kernel lacks (it fails later
    with a negative-dimension error). 1-D sizes print as 2-D ones, as PyTorch runs 1-D as 2-D."""
    ins = list(input.shape[2:])
    outs = [(i - 1) * s - 2 * p + d * (k - 1) + op + 1
            for i, s, p, d, k, op in zip(ins, stride, padding, dilation, weight.shape[2:], output_padding)]
    if any(o <= 0 for o in outs):
        if spatial_dims == 1:
            ins, outs = [1] + ins, [1] + outs
        raise RuntimeError(f"Given input size per channel: ({' x '.join(map(str, ins))}). Calculated output size per "
                           f"channel: ({' x '.join(map(str, outs))}). Output size is too small")


def _conv_transpose(name, spatial_dims, input, weight, bias, stride, padding, output_padding, groups, dilation):
    input, batch_added = _batched(name, input, spatial_dims)
    if isinstance(padding, str):
        raise TypeError(f"{name}(): argument 'padding' must be tuple of ints, not str")
    params = [_expand_param(n, v, spatial_dims) for n, v in
              (("stride", stride), ("padding", padding), ("output_padding", output_padding), ("dilation", dilation))]
    if spatial_dims == 3:
        _check_conv3d(input, weight, bias, params[0], params[1], params[3], True, params[2], groups)
    if (weight.dim() == spatial_dims + 2 and input.shape[1] == weight.shape[0] and min(params[0]) > 0
            and min(params[3]) > 0):
        _check_transposed_output(input, weight, *params, spatial_dims)
    if spatial_dims == 3:
        out = _conv_transpose3d_from_2d(input, weight, bias, *params, groups)
    else:
        s, p, op, d = (list(v) for v in params)
        out = kiln.convolution(input, weight, bias, s, p, d, True, op, groups)
    return out.squeeze(0) if batch_added else out


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """1-D transposed convolution ("deconvolution") over (N, C, L) or (C, L); weight (C_in, C_out/groups, k)."""
    return _conv_transpose("conv_transpose1d", 1, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """2-D transposed convolution over (N, C, H, W) or (C, H, W); weight (C_in, C_out/groups, kh, kw)."""
    return _conv_transpose("conv_transpose2d", 2, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """3-D transposed convolution over (N, C, D, H, W) or (C, D, H, W), composed from a 2-D one
    (Note [3-D convolution from 2-D ones])."""
    return _conv_transpose("conv_transpose3d", 3, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


# --- 3-D: composed from 2-D convolutions ------------------------------------------------------------
def _check_conv3d(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """ConvUtils.h's checks for a 3-D convolution, worded as PyTorch's (the 2-D convolution inside
    would describe its own 4-D operands instead)."""
    if weight.dim() < 3:
        raise RuntimeError("weight should have at least three dimensions")
    # PyTorch sizes the parameter lists by the weight's rank before it compares the input's
    for name, values in (("stride", stride), ("padding", padding), ("dilation", dilation),
                         ("output_padding", output_padding)):
        _expand_param(name, values, weight.dim() - 2)
    if input.dim() != weight.dim():
        raise RuntimeError(f"Expected {weight.dim()}-dimensional input for {weight.dim()}-dimensional weight "
                           f"{_size_str(weight.shape)}, but got {input.dim()}-dimensional input of size "
                           f"{_size_str(input.shape)} instead")
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(p < 0 for p in padding):
        raise RuntimeError("negative padding is not supported")
    if any(p < 0 for p in output_padding):
        raise RuntimeError("negative output_padding is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError(f"dilation should be greater than zero, but got {_size_str(dilation)}")
    if transposed and not all(op < s or op < d for op, s, d in zip(output_padding, stride, dilation)):
        got = "".join(f" {what}_{axis}: {v}" for what, values in
                      (("output_padding", output_padding), ("stride", stride), ("dilation", dilation))
                      for axis, v in zip(("depth", "height", "width"), values))
        raise RuntimeError(f"output padding must be smaller than either stride or dilation, but got{got}")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if input.dtype != weight.dtype:
        raise RuntimeError(f"expected scalar type {_type_name(input.dtype)} but found {_type_name(weight.dtype)}")
    w = tuple(weight.shape)
    if w[0] < groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be at least {groups} at dimension 0, but got "
                           f"weight of size {_size_str(w)} instead")
    if w[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but "
                           f"got weight of size [{_size_str(w)}] instead")
    channels = input.shape[1]
    if not transposed and channels != w[1] * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {_size_str(w)}, expected input"
                           f"{_size_str(input.shape)} to have {w[1] * groups} channels, but got {channels} channels "
                           "instead")
    if transposed and channels != w[0]:
        raise RuntimeError(f"Given transposed=1, weight of size {_size_str(w)}, expected input"
                           f"{_size_str(input.shape)} to have {w[0]} channels, but got {channels} channels instead")
    out_channels = w[1] * groups if transposed else w[0]
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != out_channels):
        raise RuntimeError(f"Given {'transposed=1, ' if transposed else ''}weight of size {_size_str(w)}, expected "
                           f"bias to be 1-dimensional with {out_channels} elements, but got bias of size "
                           f"{_size_str(bias.shape)} instead")
    if not transposed:
        padded = [i + 2 * p for i, p in zip(input.shape[2:], padding)]
        kernel = [(k - 1) * d + 1 for k, d in zip(w[2:], dilation)]
        if any(p < k for p, k in zip(padded, kernel)):
            raise RuntimeError(f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). Kernel "
                               f"size: ({' x '.join(map(str, kernel))}). Kernel size can't be greater than actual "
                               "input size")


def _type_name(dtype):
    """PyTorch's display name of a scalar type (Float, Double, Half, ...) for its messages."""
    names = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "int64": "Long",
             "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}
    short = str(dtype).split(".")[-1]
    return names.get(short, short)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D convolution over (N, C, D, H, W) or (C, D, H, W); padding is an int, a triple, 'valid' or
    'same'. Composed from one 2-D convolution (Note [3-D convolution from 2-D ones])."""
    input, batch_added = _batched("conv3d", input, 3)
    input, padding = _resolve_padding(input, weight, padding, stride, dilation, 3)
    stride, padding, dilation = (_expand_param(n, v, 3) for n, v in
                                 (("stride", stride), ("padding", padding), ("dilation", dilation)))
    _check_conv3d(input, weight, bias, stride, padding, dilation, False, (0, 0, 0), groups)
    out = _conv3d_from_2d(input, weight, bias, stride, padding, dilation, groups)
    return out.squeeze(0) if batch_added else out


def _conv3d_from_2d(input, weight, bias, stride, padding, dilation, groups):
    n, c, depth = input.shape[:3]
    h, w = input.shape[3:]
    out_channels, c_per_group, kd = weight.shape[:3]
    (sd, sh, sw), (pd, ph, pw), (dd, dh, dw) = stride, padding, dilation
    x = kiln.constant_pad_nd(input, [0, 0, 0, 0, pd, pd], 0) if pd else input
    d_out = (depth + 2 * pd - dd * (kd - 1) - 1) // sd + 1
    span = (d_out - 1) * sd + 1
    # taps[:, :, :, t] = the padded input at depths od*sd + t*dd, od < d_out: (N, C, D_out, kD, H, W)
    taps = kiln.stack([x.narrow(2, t * dd, span)[:, :, ::sd] for t in range(kd)], 3)
    # channels ordered (group, tap, channel) so that each group of the 2-D convolution sees its own
    # channels at every tap, matching the weight laid out as (out, tap, channel)
    images = (taps.reshape(n, groups, c_per_group, d_out, kd, h, w).permute(0, 3, 1, 4, 2, 5, 6)
              .reshape(n * d_out, groups * kd * c_per_group, h, w))
    weight2d = weight.permute(0, 2, 1, 3, 4).reshape(out_channels, kd * c_per_group, *weight.shape[3:])
    out = kiln.convolution(images, weight2d, bias, [sh, sw], [ph, pw], [dh, dw], False, [0, 0], groups)
    out = out.reshape(n, d_out, out_channels, *out.shape[2:]).permute(0, 2, 1, 3, 4)
    return out.contiguous()  # PyTorch's conv3d returns a contiguous tensor


def _conv_transpose3d_from_2d(input, weight, bias, stride, padding, output_padding, dilation, groups):
    n, c_in, depth = input.shape[:3]
    h, w = input.shape[3:]
    out_per_group, kd = weight.shape[1:3]
    out_channels = out_per_group * groups
    (sd, sh, sw), (pd, ph, pw), (opd, oph, opw), (dd, dh, dw) = stride, padding, output_padding, dilation
    images = input.permute(0, 2, 1, 3, 4).reshape(n * depth, c_in, h, w)
    # (C_in, C_out/g, kD, kh, kw) -> (C_in, C_out/g * kD, kh, kw): output channel (o, tap) of each group
    weight2d = weight.reshape(c_in, out_per_group * kd, *weight.shape[3:])
    planes = kiln.convolution(images, weight2d, None, [sh, sw], [ph, pw], [dh, dw], True, [oph, opw], groups)
    h_out, w_out = planes.shape[2:]
    # (N, C_out, kD, D, H_out, W_out): slab t holds what each input depth contributes through tap t
    slabs = planes.reshape(n, depth, out_channels, kd, h_out, w_out).permute(0, 2, 3, 1, 4, 5)
    if sd > 1:  # input depth d lands at d*sd: interleave sd-1 zero planes, drop the trailing ones
        slabs = kiln.constant_pad_nd(slabs.unsqueeze(4), [0, 0, 0, 0, 0, sd - 1], 0)
        slabs = slabs.reshape(n, out_channels, kd, depth * sd, h_out, w_out).narrow(3, 0, (depth - 1) * sd + 1)
    span = slabs.shape[3]
    d_out = (depth - 1) * sd - 2 * pd + dd * (kd - 1) + opd + 1
    out = None
    for t in range(kd):  # tap t starts at depth t*dd - pd of the output; pads past either end crop
        before = t * dd - pd
        placed = kiln.constant_pad_nd(slabs[:, :, t], [0, 0, 0, 0, before, d_out - before - span], 0)
        out = placed if out is None else out + placed
    if bias is not None:
        out = out + bias.reshape(1, out_channels, 1, 1, 1)
    return out
