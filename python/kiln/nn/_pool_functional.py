"""The pooling functionals of kiln.nn.functional: max/avg/adaptive pooling in 1-D and 2-D.

The 2-D forms call kiln's aten ops (max_pool2d(_with_indices), avg_pool2d, adaptive_avg_pool2d).
The 1-D forms run them on a unit height, as PyTorch's aten does (its max_pool1d, avg_pool1d,
adaptive_avg_pool1d and adaptive_max_pool1d all unsqueeze(-2)), after PyTorch's 1-D checks.
kiln has no adaptive max pooling kernel, so adaptive_max_pool2d is composed here (Note [Adaptive max
pooling as a gather]); autograd differentiates the gather and the max.

Note [Adaptive max pooling as a gather]
Output cell o of an adaptive pooling over a length-I dimension reads the window
[floor(o*I/O), ceil((o+1)*I/O)). Windows differ in length by at most one; each is gathered as K =
the longest length indices, the short ones repeating their last element (a repeat never wins a
max over its first occurrence, so values, indices and gradients are unchanged). Rows and columns
are gathered separately (index_select), the (kh, kw) window flattened in row-major order and
reduced with max, whose first maximum is the kernel's first maximum (it scans rows, then columns,
replacing only on a strictly greater value). The flat input index h*W + w of the winner is read
from the same gathered index grid. The cost is the gathered copy: about (ceil(I/O)+1)/(I/O) times
the input per dimension.
"""

import kiln
from kiln.nn._arg_tuples import _list_with_default, _pair
from kiln.nn._conv_functional import _type_name

__all__ = ["max_pool1d", "max_pool1d_with_indices", "max_pool2d", "max_pool2d_with_indices", "avg_pool1d",
           "avg_pool2d", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d",
           "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d", "adaptive_max_pool2d_with_indices"]


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _check_dim_range(name, input, low, high):
    """ATen's checkDimRange(name, self, low, high exclusive)."""
    if not low <= input.dim() < high:
        raise RuntimeError(f"Expected {low} to {high - 1} dimensions, but got {input.dim()}-dimensional tensor for "
                           f"argument #1 'self' (while checking arguments for {name})")


def _check_1d(name, arg, values):
    if len(values) != 1:
        raise RuntimeError(f"{name}() argument '{arg}' should contain one int (got {len(values)})")


# --- 2-D: one aten op each ----------------------------------------------------------------------
def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    stride = [] if stride is None else stride
    return kiln.max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    if return_indices:
        return max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    stride = [] if stride is None else stride
    return kiln.max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    stride = [] if stride is None else stride
    return kiln.avg_pool2d(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


def adaptive_avg_pool2d(input, output_size):
    output_size = _pair(output_size)
    output_size = [input.shape[input.dim() - 2 + i] if s is None else s for i, s in enumerate(output_size)]
    return kiln.adaptive_avg_pool2d(input, output_size)


# --- 1-D: the 2-D ops on a unit height ----------------------------------------------------------
def _pooling_output_size(size, kernel, pad, stride, dilation, ceil_mode):
    """Pool.h's pooling_output_shape: the window count, with ceil_mode's last window kept only when
    it starts inside the input or its left padding."""
    span = size + 2 * pad - dilation * (kernel - 1) - 1
    out = (span + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _check_max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode):
    """aten's check_max_pool1d: max_pool1d without indices has its own kernel and messages."""
    if input.dim() not in (2, 3) or any(s == 0 for s in input.shape[1:]):
        raise RuntimeError("max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size for "
                           f"input, but got:{list(input.shape)}")
    if len(kernel_size) != 1:
        raise RuntimeError("max_pool1d() kernel_size must be an int, list of ints or tuple of ints of size 1 but got "
                           f"size {len(kernel_size)}")
    if len(stride) not in (0, 1):
        raise RuntimeError("max_pool1d() stride must be None, an int, list of ints, or tuple of ints of size 1 but "
                           f"got size {len(stride)}")
    if len(padding) != 1:
        raise RuntimeError("max_pool1d() padding must be an int, list of ints, or tuple of ints of size 1 but got "
                           f"size {len(padding)}")
    if len(dilation) != 1:
        raise RuntimeError("max_pool1d() dilation must be an int, list of ints or tuple of ints of size 1 but got "
                           f"size {len(dilation)}")
    (k,), (p,), (d,) = kernel_size, padding, dilation
    s = stride[0] if stride else k
    if k <= 0:
        raise RuntimeError(f"max_pool1d() kernel_size must be greater than zero, but got {k}")
    if s <= 0:
        raise RuntimeError(f"max_pool1d() stride must be greater than zero, but got {s}")
    if p < 0:
        raise RuntimeError(f"max_pool1d() padding must be non-negative, but got {p}")
    if p > k // 2:
        raise RuntimeError(f"max_pool1d() padding should be at most half of kernel size, but got padding={p} and "
                           f"kernel_size={k}")
    if d <= 0:
        raise RuntimeError(f"max_pool1d() dilation must be greater than zero, but got {d}")
    out = _pooling_output_size(input.shape[-1], k, p, s, d, ceil_mode)
    if out <= 0:
        raise RuntimeError(f"max_pool1d() Invalid computed output size: {out}")


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    """(values, indices) of a 1-D max pooling over (N, C, L) or (C, L); indices along L."""
    kernel_size, padding, dilation = _as_list(kernel_size), _as_list(padding), _as_list(dilation)
    stride = kernel_size if stride is None or _as_list(stride) == [] else _as_list(stride)
    _check_dim_range("max_pool1d", input, 2, 4)
    for arg, values in (("kernel_size", kernel_size), ("stride", stride), ("padding", padding),
                        ("dilation", dilation)):
        _check_1d("max_pool1d", arg, values)
    out, indices = kiln.max_pool2d_with_indices(input.unsqueeze(-2), [1, kernel_size[0]], [1, stride[0]],
                                                [0, padding[0]], [1, dilation[0]], ceil_mode)
    return out.squeeze(-2), indices.squeeze(-2)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """1-D max pooling over (N, C, L) or (C, L); with return_indices, (values, indices)."""
    if return_indices:
        return max_pool1d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    kernel_size, padding, dilation = _as_list(kernel_size), _as_list(padding), _as_list(dilation)
    stride = [] if stride is None else _as_list(stride)
    _check_max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode)
    stride = stride or kernel_size
    return kiln.max_pool2d(input.unsqueeze(-2), [1, kernel_size[0]], [1, stride[0]], [0, padding[0]],
                           [1, dilation[0]], ceil_mode).squeeze(-2)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """1-D average pooling over (N, C, L) or (C, L)."""
    kernel_size, padding = _as_list(kernel_size), _as_list(padding)
    stride = kernel_size if stride is None or _as_list(stride) == [] else _as_list(stride)
    _check_dim_range("avg_pool1d", input, 2, 4)
    for arg, values in (("kernel_size", kernel_size), ("stride", stride), ("padding", padding)):
        _check_1d("avg_pool1d", arg, values)
    return kiln.avg_pool2d(input.unsqueeze(-2), [1, kernel_size[0]], [1, stride[0]], [0, padding[0]], ceil_mode,
                           count_include_pad, None).squeeze(-2)


def adaptive_avg_pool1d(input, output_size):
    """1-D adaptive average pooling over (N, C, L) or (C, L) to length output_size."""
    output_size = _as_list(output_size)
    _check_dim_range("adaptive_avg_pool1d", input, 2, 4)
    _check_1d("adaptive_avg_pool1d", "output_size", output_size)
    return kiln.adaptive_avg_pool2d(input.unsqueeze(-2), [1, output_size[0]]).squeeze(-2)


# --- adaptive max pooling: a gather and a max (Note [Adaptive max pooling as a gather]) ----------
def _adaptive_windows(in_size, out_size, device):
    """(index tensor (out_size, K) of each window's input positions, repeats at the end, and K)."""
    k = 1  # the longest window (a plain loop: dynamo traces it, not max over a generator)
    for o in range(out_size):
        k = max(k, -((-(o + 1) * in_size) // out_size) - (o * in_size) // out_size)
    o = kiln.arange(out_size, device=device).unsqueeze(1)
    start = (o * in_size).div(out_size, rounding_mode="floor")
    last = ((o + 1) * in_size + out_size - 1).div(out_size, rounding_mode="floor") - 1
    return kiln.minimum(start + kiln.arange(k, device=device), last), k


def _adaptive_max_pool2d_impl(name, input, output_size):
    if input.dim() not in (3, 4):
        raise RuntimeError(f"{name}(): Expected 3D or 4D tensor, but got: {list(input.shape)}")
    for i in range(1, input.dim()):
        if input.shape[i] <= 0:
            raise RuntimeError(f"{name}(): Expected input to have non-zero size for non-batch dimensions, but input "
                               f"has sizes {list(input.shape)} with dimension {i} being empty")
    if input.dtype not in (kiln.float32, kiln.float64, kiln.float16, kiln.bfloat16):
        raise NotImplementedError(f'"{name}" not implemented for \'{_type_name(input.dtype)}\'')
    out_h, out_w = output_size
    if out_h < 0 or out_w < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(out_h, out_w)}: "
                           f"{list(input.shape[:-2]) + [out_h, out_w]}")
    in_h, in_w = input.shape[-2:]
    rows, kh = _adaptive_windows(in_h, out_h, input.device)
    cols, kw = _adaptive_windows(in_w, out_w, input.device)
    lead = tuple(input.shape[:-2])
    windows = input.index_select(-2, rows.reshape(-1)).index_select(-1, cols.reshape(-1))
    windows = windows.reshape(*lead, out_h, kh, out_w, kw).transpose(-3, -2).reshape(*lead, out_h, out_w, kh * kw)
    values, position = windows.max(-1)
    flat = (rows.reshape(out_h, 1, kh, 1) * in_w + cols.reshape(1, out_w, 1, kw)).reshape(out_h, out_w, kh * kw)
    indices = flat.expand(*lead, out_h, out_w, kh * kw).gather(-1, position.unsqueeze(-1)).squeeze(-1)
    return values, indices


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    """(values, indices) of a 2-D adaptive max pooling over (N, C, H, W) or (C, H, W); indices are
    flat h*W + w positions in each input plane, as PyTorch's."""
    output_size = _list_with_default(output_size, input.size())
    return _adaptive_max_pool2d_impl("adaptive_max_pool2d", input, _pair(output_size))


def adaptive_max_pool2d(input, output_size, return_indices=False):
    out = adaptive_max_pool2d_with_indices(input, output_size)
    return out if return_indices else out[0]


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    """(values, indices) of a 1-D adaptive max pooling over (N, C, L) or (C, L)."""
    output_size = _as_list(output_size)
    _check_dim_range("adaptive_max_pool1d", input, 2, 4)
    _check_1d("adaptive_max_pool1d", "output_size", output_size)
    for i in range(1, input.dim()):
        if input.shape[i] <= 0:
            raise RuntimeError("adaptive_max_pool1d(): Expected input to have non-zero size for non-batch dimensions, "
                               f"but input has sizes {list(input.shape)} with dimension {i} being empty")
    out, indices = _adaptive_max_pool2d_impl("adaptive_max_pool2d", input.unsqueeze(-2), (1, output_size[0]))
    return out.squeeze(-2), indices.squeeze(-2)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    out = adaptive_max_pool1d_with_indices(input, output_size)
    return out if return_indices else out[0]
