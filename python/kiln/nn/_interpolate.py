"""F.interpolate (and the deprecated F.upsample, upsample_nearest, upsample_bilinear) for kiln.

PyTorch's Python layer (argument checks, size/scale_factor resolution, the mode x rank dispatch and
its errors) is reproduced as is. The aten upsample kernels it calls have no kiln registry entry, so
each is composed here from index_select and pointwise arithmetic, one spatial dimension at a time
(Note [Separable resampling]); autograd, fake tensors and the compilers see those ops.

Note [Separable resampling]
Every mode resamples each spatial dimension independently: output position o of a dimension of
input size I and output size O reads input positions idx_j(o) with weights w_j(o) (nearest: one
tap of weight 1; linear: two; cubic: four). The kernels evaluate the taps nested, the innermost
(last) dimension first: bilinear is (x[h0,w0]*lw0 + x[h0,w1]*lw1)*lh0 + (...)*lh1. Resampling
the last dimension first and then the others in reverse order computes exactly that expression,
with the same float rounding. Positions and weights follow aten/src/ATen/native/UpSample.h and
cpu/UpSampleKernel.cpp, computed in the kernel's precision (float32 for float32 and 16-bit inputs,
float64 for float64; nearest always in float32):
  scale     = 1/scale_factor when one was given (and > 0), else I/O; (I-1)/(O-1) with align_corners
  nearest   idx = min(floor(o * scale), I-1); the 2-D kernel alone (nearest_idx) takes o when O == I
            and o // 2 when O == 2I, whatever the scale_factor (1-D and 3-D use the formula)
  exact     idx = min(floor((o + 0.5) * scale), I-1)
  linear    src = scale*(o + 0.5) - 0.5 clamped at 0 (scale*o with align_corners); i0 = min(floor(src),
            I-1), i1 = i0 + (i0 < I-1), l1 = clamp(src - i0, 0, 1), l0 = 1 - l1  (O == I: o, weight 1)
  cubic     src as linear, unclamped; t = clamp(src - floor(src), 0, 1); taps floor(src)-1 .. +2
            clamped to [0, I-1], Keys' weights with A = -0.75
  area      adaptive average pooling to the output size
Positions and weights are computed from `arange` inside the program (as PyTorch's decompositions
do) rather than as host constants, so a compiled program holds them as a few pointwise ops.
"""

import warnings

import kiln
from kiln.nn._pool_functional import _adaptive_windows, adaptive_avg_pool1d, adaptive_avg_pool2d

__all__ = ["interpolate", "upsample", "upsample_nearest", "upsample_bilinear"]

_CUBIC_A = -0.75
_AXES = ("D", "H", "W")


def _is_integer(x):
    """int, numpy integer, or an integral tensor (PyTorch's _is_integer)."""
    if isinstance(x, int):
        return True
    if type(x).__module__ == "numpy" and hasattr(x, "dtype") and x.dtype.kind in "iu":
        return True
    return isinstance(x, kiln.Tensor) and not x.is_floating_point()


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None,
                antialias=False):
    """Resamples (N, C, *spatial) input to `size` or by `scale_factor` (PyTorch's F.interpolate)."""
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: "
                             "linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    dim = input.dim() - 2  # the number of spatial dimensions
    # Exactly one of output_size and scale_factors is a list after this block.
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    elif size is not None:
        scale_factors = None
        if isinstance(size, (list, tuple)):
            if len(size) != dim:
                raise ValueError("Input and output must have the same number of spatial dimensions, but got input "
                                 f"with spatial dimensions of {list(input.shape[2:])} and output size of {size}. "
                                 "Please provide input tensor in (N, C, d1, d2, ...,dK) format and output size in "
                                 "(o1, o2, ...,oK) format.")
            if not all(_is_integer(x) for x in size):
                raise TypeError("expected size to be one of int or Tuple[int] or Tuple[int, int] or "
                                f"Tuple[int, int, int], but got size with types {[type(x) for x in size]}")
            output_size = [int(x) for x in size]
        else:
            output_size = [int(size) for _ in range(dim)]
    elif scale_factor is not None:
        output_size = None
        if isinstance(scale_factor, (list, tuple)):
            if len(scale_factor) != dim:
                raise ValueError("Input and scale_factor must have the same number of spatial dimensions, but got "
                                 f"input with spatial dimensions of {list(input.shape[2:])} and scale_factor of shape "
                                 f"{scale_factor}. Please provide input tensor in (N, C, d1, d2, ...,dK) format and "
                                 "scale_factor in (s1, s2, ...,sK) format.")
            scale_factors = list(scale_factor)
        else:
            scale_factors = [scale_factor for _ in range(dim)]
    else:
        raise ValueError("either size or scale_factor should be defined")
    if recompute_scale_factor is not None and recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if mode == "area" and output_size is None:  # area pools to a size, never by a factor
        recompute_scale_factor = True
    if recompute_scale_factor is not None and recompute_scale_factor:
        output_size = [int(input.size(i + 2) * scale_factors[i]) for i in range(dim)]
        scale_factors = None
    if antialias and not (mode in ("bilinear", "bicubic", "lanczos") and input.ndim == 4):
        raise ValueError("Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and requires a 4-D "
                         "tensor as input")
    if input.dim() == 4 and mode == "lanczos":
        if align_corners:
            raise ValueError("Lanczos mode does not support align_corners=True")
        if not antialias:
            raise ValueError("Lanczos mode requires antialias=True")
    if antialias:
        raise NotImplementedError("kiln: F.interpolate(antialias=True) is not implemented (PyTorch's "
                                  "_upsample_bilinear2d_aa / _upsample_bicubic2d_aa / _upsample_lanczos2d_aa)")

    if mode in ("nearest", "nearest-exact") and input.dim() in (3, 4, 5):
        return _upsample(input, output_size, scale_factors, mode, None)
    if mode == "area" and input.dim() in (3, 4, 5):
        return (adaptive_avg_pool1d, adaptive_avg_pool2d, _adaptive_avg_pool3d)[input.dim() - 3](input, output_size)
    if (input.dim(), mode) in ((3, "linear"), (4, "bilinear"), (5, "trilinear"), (4, "bicubic")):
        return _upsample(input, output_size, scale_factors, mode, align_corners)
    wanted = {"linear": 3, "bilinear": 4, "trilinear": 5}
    if mode in wanted and input.dim() in (3, 4, 5):
        raise NotImplementedError(f"Got {input.dim()}D input, but {mode} mode needs {wanted[mode]}D input")
    raise NotImplementedError("Input Error: Only 3D, 4D and 5D input Tensors supported"
                              f" (got {input.dim()}D) for the modes: nearest | linear | bilinear | bicubic |"
                              f" trilinear | lanczos | area | nearest-exact (got {mode})")


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# --- the upsample kernels, composed (Note [Separable resampling]) -------------------------------
def _check_upsample(input, output_size):
    """UpSample.h's upsample_{1,2,3}d_common_check and the kernels' non-empty check."""
    dims = len(output_size)
    in_sizes = list(input.shape[2:])
    if any(s == 0 for s in input.shape[1:]):
        raise RuntimeError(f"Non-empty {dims + 2}D data tensor expected but got a tensor with sizes "
                           f"{list(input.shape)}")
    if all(s > 0 for s in in_sizes + list(output_size)):
        return
    axes = _AXES[3 - dims:]
    got_in = ", ".join(f"{a}: {s}" for a, s in zip(axes, in_sizes))
    got_out = ", ".join(f"{a}: {s}" for a, s in zip(axes, output_size))
    joiner = " and output" if dims == 1 else " output"
    raise RuntimeError(f"Input and output sizes should be greater than 0, but got input ({got_in}){joiner} ({got_out})")


def _upsample(input, output_size, scale_factors, mode, align_corners):
    if output_size is None:  # UpSample.h's compute_output_size: the product truncated to an integer
        output_size = [int(size * scale) for size, scale in zip(input.shape[2:], scale_factors)]
    _check_upsample(input, output_size)
    dims = len(output_size)
    scales = scale_factors if scale_factors is not None else [None] * dims
    if mode in ("nearest", "nearest-exact"):
        out = input
        for d in reversed(range(dims)):
            out = out.index_select(2 + d, _nearest_index(input.shape[2 + d], output_size[d], scales[d],
                                                         mode == "nearest-exact", mode == "nearest" and dims == 2,
                                                         input.device))
        return out.contiguous()
    if not input.is_floating_point():
        raise NotImplementedError(f'"upsample_{mode}{dims}d" not implemented for \'{str(input.dtype).split(".")[-1]}\'')
    # 16-bit floats compute in float32 (the kernels' opmath type) and round once at the end
    compute = input.dtype if input.dtype in (kiln.float32, kiln.float64) else kiln.float32
    out = input.to(compute)
    for d in reversed(range(dims)):
        resample = _cubic_along if mode == "bicubic" else _linear_along
        out = resample(out, 2 + d, input.shape[2 + d], output_size[d], scales[d], align_corners)
    return out.to(input.dtype).contiguous()


def _scale(in_size, out_size, scale_factor):
    """UpSample.h's compute_scales_value: 1/scale_factor when given and positive, else I/O. A Python
    float: multiplied into a float32 tensor it rounds to float32, as the kernel's float scale (the
    quotient of two integers below 2^24 rounds the same through double)."""
    if scale_factor is not None and scale_factor > 0:
        return 1.0 / scale_factor
    return in_size / out_size


def _area_scale(in_size, out_size, align_corners, scale_factor):
    if align_corners:
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    return _scale(in_size, out_size, scale_factor)


def _nearest_index(in_size, out_size, scale_factor, exact, shortcuts, device):
    o = kiln.arange(out_size, device=device)
    if shortcuts and out_size == in_size:
        return o
    if shortcuts and out_size == 2 * in_size:
        return o.div(2, rounding_mode="floor")
    position = o.to(kiln.float32) + 0.5 if exact else o.to(kiln.float32)
    src = (position * _scale(in_size, out_size, scale_factor)).floor().to(kiln.int64)
    return src.clamp(max=in_size - 1)


def _source_position(in_size, out_size, scale_factor, align_corners, dtype, device, cubic):
    """area_pixel_compute_source_index for every output position, in `dtype`."""
    scale = _area_scale(in_size, out_size, align_corners, scale_factor)
    o = kiln.arange(out_size, device=device).to(dtype)
    if align_corners:
        return o * scale
    src = (o + 0.5) * scale - 0.5
    return src if cubic else src.clamp(min=0.0)


def _weighted_taps(x, dim, out_size, indices, weights):
    """sum_j x.index_select(dim, indices[j]) * weights[j], weights broadcast along `dim`."""
    shape = [1] * x.dim()
    shape[dim] = out_size
    out = None
    for index, weight in zip(indices, weights):
        term = x.index_select(dim, index) * weight.reshape(shape)
        out = term if out is None else out + term
    return out


def _linear_along(x, dim, in_size, out_size, scale_factor, align_corners):
    if out_size == in_size:  # UpSample.h copies: both taps the same position, weights 1 and 0
        o = kiln.arange(out_size, device=x.device)
        one = kiln.ones(out_size, dtype=x.dtype, device=x.device)
        return _weighted_taps(x, dim, out_size, [o, o], [one, one * 0])
    src = _source_position(in_size, out_size, scale_factor, align_corners, x.dtype, x.device, cubic=False)
    i0 = src.floor().to(kiln.int64).clamp(max=in_size - 1)
    l1 = (src - i0.to(x.dtype)).clamp(0.0, 1.0)
    i1 = (i0 + 1).clamp(max=in_size - 1)
    return _weighted_taps(x, dim, out_size, [i0, i1], [1.0 - l1, l1])


def _cubic_along(x, dim, in_size, out_size, scale_factor, align_corners):
    src = _source_position(in_size, out_size, scale_factor, align_corners, x.dtype, x.device, cubic=True)
    i0 = src.floor().to(kiln.int64).clamp(max=in_size - 1)
    t = (src - i0.to(x.dtype)).clamp(0.0, 1.0)
    a = _CUBIC_A

    def near(s):  # Keys' kernel on |s| <= 1
        return ((a + 2) * s - (a + 3)) * s * s + 1

    def far(s):  # and on 1 < |s| < 2
        return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a

    one_minus_t = 1.0 - t
    weights = [far(t + 1.0), near(t), near(one_minus_t), far(one_minus_t + 1.0)]
    indices = [(i0 + (j - 1)).clamp(0, in_size - 1) for j in range(4)]
    return _weighted_taps(x, dim, out_size, indices, weights)


def _adaptive_avg_pool3d(input, output_size):
    """Adaptive average pooling of (N, C, D, H, W) or (C, D, H, W) (interpolate's area mode on 5-D
    input): the depth windows averaged with a masked gather, then the 2-D op over (H, W)."""
    out_d, out_h, out_w = output_size
    in_d = input.shape[-3]
    windows, k = _adaptive_windows(in_d, out_d, input.device)
    starts = kiln.arange(out_d, device=input.device).mul(in_d).div(out_d, rounding_mode="floor")
    counts = windows[:, -1:] - starts.unsqueeze(1) + 1  # the last column is each window's last position
    # a repeated (clamped) position is not part of its window: weight 0 instead of 1/count
    in_window = kiln.arange(k, device=input.device) < counts
    weights = in_window.to(input.dtype) / counts.to(input.dtype)
    lead = tuple(input.shape[:-3])
    gathered = input.index_select(-3, windows.reshape(-1)).reshape(*lead, out_d, k, *input.shape[-2:])
    depth_pooled = (gathered * weights.reshape(out_d, k, 1, 1)).sum(-3)
    planes = depth_pooled.reshape(-1, out_d, *input.shape[-2:])
    return adaptive_avg_pool2d(planes, [out_h, out_w]).reshape(*lead, out_d, out_h, out_w)
