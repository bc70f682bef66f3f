"""F.unfold / F.fold (im2col / col2im) and F.affine_grid / F.grid_sample, composed from kiln ops
(kiln.nn.functional re-exports them; split out because functional.py is long).

im2col and col2im are one gather and its transpose: every (channel, kernel tap, block) of the
column matrix reads (unfold) or adds into (fold) one element of the zero-padded image, at the flat
index _im2col_index computes. unfold is index_select over those indices, fold is index_add of the
columns at the same indices, so each is the other's gradient, exactly as in PyTorch.

grid_sample follows aten's grid_sampler_2d/3d formula: grid coordinates in [-1, 1] are unnormalized
to pixel coordinates (align_corners), folded back by the padding mode (border: clip; reflection:
reflect then clip), then read at the 2^d neighbouring pixels with linear weights ("bilinear";
trilinear for 5-D input) or at the rounded pixel ("nearest", round half to even as nearbyint).
Pixels outside the image read as zero. Gradients reach the input through gather and the grid through
the weights and the coordinate transforms, as aten's analytic backward computes them.
"""

import math
import warnings

import kiln
from kiln import _C
from kiln._composites import _type_name
from kiln.amp.autocast_mode import float32_under_autocast as _float32_under_autocast

__all__ = ["unfold", "fold", "affine_grid", "grid_sample"]


def _pair(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x, x)


def _check_conv_args(kernel, dilation, padding, stride, pad_check=True):
    kh, kw = kernel
    if not (kh > 0 and kw > 0):
        raise RuntimeError(f"kernel size should be greater than zero, but got kernel_height: {kh} kernel_width: {kw}")
    if not (dilation[0] > 0 and dilation[1] > 0):
        raise RuntimeError(f"dilation should be greater than zero, but got dilation_height: {dilation[0]} "
                           f"dilation_width: {dilation[1]}")
    if pad_check and not (padding[0] >= 0 and padding[1] >= 0):
        raise RuntimeError(f"padding should be non-negative, but got pad_height: {padding[0]} "
                           f"pad_width: {padding[1]}")
    if not (stride[0] > 0 and stride[1] > 0):
        raise RuntimeError(f"stride should be greater than zero, but got stride_height: {stride[0]} "
                           f"stride_width: {stride[1]}")


def _check_floating(kernel, input):
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{_type_name(input.dtype)}'")


def _blocks(size, kernel, dilation, padding, stride):
    """How many kernel placements fit along one spatial dim (aten's div_rtn: floor division)."""
    return (size + 2 * padding - (dilation * (kernel - 1) + 1)) // stride + 1


def _im2col_index(padded, kernel, dilation, stride, blocks):
    """Flat indices into a padded (Hp, Wp) image: [kh * kw, bh * bw], row (i, j) = kernel tap,
    column (y, x) = block, value = (y * sh + i * dh) * Wp + x * sw + j * dw."""
    rows = (kiln.arange(kernel[0]) * dilation[0]).reshape(-1, 1, 1, 1) + \
        (kiln.arange(blocks[0]) * stride[0]).reshape(1, 1, -1, 1)
    cols = (kiln.arange(kernel[1]) * dilation[1]).reshape(1, -1, 1, 1) + \
        (kiln.arange(blocks[1]) * stride[1]).reshape(1, 1, 1, -1)
    return (rows * padded[1] + cols).reshape(kernel[0] * kernel[1], blocks[0] * blocks[1])


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """im2col: (N, C, H, W) -> (N, C * kh * kw, L), one column per sliding block (L of them), in
    PyTorch's order (channel-major rows, blocks row by row). A 3-D input has no batch dim."""
    kernel, dilation, padding, stride = _pair(kernel_size), _pair(dilation), _pair(padding), _pair(stride)
    _check_conv_args(kernel, dilation, padding, stride)
    ndim = input.ndim
    valid = input.size(1) != 0 and input.size(2) != 0  # IndexError below 3-D, as aten's
    valid = valid and (input.size(0) != 0 if ndim == 3 else ndim == 4 and input.size(3) != 0)
    if not valid:
        raise RuntimeError("Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other non-zero "
                           f"dimensions for input, but got: {list(input.shape)}")
    height, width = input.shape[-2:]
    blocks = [_blocks(s, k, d, p, st) for s, k, d, p, st in zip((height, width), kernel, dilation, padding, stride)]
    if blocks[0] < 1 or blocks[1] < 1:
        raise RuntimeError(f"Given input with spatial size ({height}, {width}), kernel_size=({kernel[0]}, "
                           f"{kernel[1]}), dilation=({dilation[0]}, {dilation[1]}), padding=({padding[0]}, "
                           f"{padding[1]}), calculated shape of the array of sliding blocks as ({blocks[0]}, "
                           f"{blocks[1]}), but its components must be at least one.")
    _check_floating("im2col_out_cpu", input)
    batched = input if ndim == 4 else input.unsqueeze(0)
    n, c = batched.shape[:2]
    padded = kiln.constant_pad_nd(batched, [padding[1], padding[1], padding[0], padding[0]])
    padded_size = padded.shape[-2:]
    index = _im2col_index(padded_size, kernel, dilation, stride, blocks)
    columns = padded.reshape(n, c, padded_size[0] * padded_size[1]).index_select(2, index.reshape(-1))
    columns = columns.reshape(n, c * kernel[0] * kernel[1], blocks[0] * blocks[1])
    return columns if ndim == 4 else columns.squeeze(0)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """col2im: (N, C * kh * kw, L) -> (N, C, H, W), summing the blocks where they overlap (the
    transpose of unfold). A 2-D input has no batch dim."""
    output, kernel = _pair(output_size), _pair(kernel_size)
    dilation, padding, stride = _pair(dilation), _pair(padding), _pair(stride)
    _check_conv_args(kernel, dilation, padding, stride, pad_check=False)
    ndim = input.ndim
    if not ((ndim == 2 and input.shape[0] != 0 and input.shape[1] != 0) or
            (ndim == 3 and input.shape[1] != 0 and input.shape[2] != 0)):
        raise RuntimeError("Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero "
                           f"dimensions for input, but got: {list(input.shape)}")
    planes, length = input.shape[-2:]
    taps = kernel[0] * kernel[1]
    if planes % taps != 0:
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the product of kernel_size, but "
                           f"got input.size(1)={planes} and kernel_size=({kernel[0]}, {kernel[1]}).")
    blocks = [_blocks(s, k, d, p, st) for s, k, d, p, st in zip(output, kernel, dilation, padding, stride)]
    described = (f"Given output_size=({output[0]}, {output[1]}), kernel_size=({kernel[0]}, {kernel[1]}), "
                 f"dilation=({dilation[0]}, {dilation[1]}), padding=({padding[0]}, {padding[1]}), "
                 f"stride=({stride[0]}, {stride[1]}), ")
    if length != blocks[0] * blocks[1]:
        raise RuntimeError(described + f"expected size of input's dimension 2 to match the calculated number of "
                           f"sliding blocks {blocks[0]} * {blocks[1]} = {blocks[0] * blocks[1]}, but got "
                           f"input.size(2)={length}.")
    if blocks[0] < 1 or blocks[1] < 1:
        raise RuntimeError(described + f"calculated shape of the array of sliding blocks as ({blocks[0]}, "
                           f"{blocks[1]}), which is too small (non-positive)")
    _check_floating("col2im_out_cpu", input)
    batched = input if ndim == 3 else input.unsqueeze(0)
    n, c = batched.shape[0], planes // taps
    padded_size = (output[0] + 2 * padding[0], output[1] + 2 * padding[1])
    index = _im2col_index(padded_size, kernel, dilation, stride, blocks)
    image = kiln.zeros(n, c, padded_size[0] * padded_size[1], dtype=input.dtype)
    image = image.index_add(2, index.reshape(-1), batched.reshape(n, c, taps * length))
    image = image.reshape(n, c, *padded_size)
    if padding != (0, 0):  # a fresh contiguous tensor, as aten's col2im
        image = image[:, :, padding[0]:padding[0] + output[0], padding[1]:padding[1] + output[1]].contiguous()
    return image if ndim == 3 else image.squeeze(0)


# --- affine_grid --------------------------------------------------------------------------------
_ALIGN_CORNERS_WARNING = ("Default grid_sample and affine_grid behavior has changed to align_corners=False since "
                          "1.3.0. Please specify align_corners=True if the old behavior is desired. See the "
                          "documentation of grid_sample for details.")


def _linspace_from_neg_one(theta, steps, align_corners):
    """aten's linspace_from_neg_one: -1..1 over the pixel centres (align_corners=False) or corners."""
    if steps <= 1:
        return kiln.zeros((), dtype=theta.dtype)
    positions = kiln.linspace(-1, 1, steps, dtype=theta.dtype)
    return positions if align_corners else positions * (steps - 1) / steps


def affine_grid(theta, size, align_corners=None):
    """The sampling grid (N, H, W, 2) (or (N, D, H, W, 3)) of the affine maps `theta` (N, 2, 3)
    (or (N, 3, 4)) over an output of `size` (N, C, H, W) (or (N, C, D, H, W)): the homogeneous pixel
    coordinates in [-1, 1] times theta transposed (one bmm, as aten's affine_grid_generator)."""
    if align_corners is None:
        warnings.warn(_ALIGN_CORNERS_WARNING, stacklevel=2)
        align_corners = False
    if not theta.is_floating_point():
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    spatial = len(size) - 2
    if spatial not in (2, 3):
        raise NotImplementedError("affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  f"respectively. Got size {size}.")
    if theta.ndim != 3 or tuple(theta.shape[-2:]) != (spatial, spatial + 1):
        raise ValueError(f"Expected a batch of {spatial}D affine matrices of shape Nx{spatial}x{spatial + 1} for "
                         f"size {size}. Got {theta.shape}.")
    if align_corners and min(size[2:]) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size grids when "
                      "align_corners=True. This is not an intended use case of affine_grid. See the "
                      "documentation of affine_grid for details.", stacklevel=2)
    elif min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    n, spatial_size = size[0], list(size[2:])
    if theta.shape[0] != n:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: [{n}, {spatial + 1}] but "
                           f"got: [{theta.shape[0]}, {spatial + 1}].")
    # homogeneous coordinates (x, y[, z], 1): x runs along the last spatial dim
    axes = []
    for i, steps in enumerate(reversed(spatial_size)):
        shape = [1] * spatial
        shape[spatial - 1 - i] = steps
        axes.append(_linspace_from_neg_one(theta, steps, align_corners).reshape(shape).expand(spatial_size))
    axes.append(kiln.ones(spatial_size, dtype=theta.dtype))
    base = kiln.stack(axes, -1).reshape(1, -1, spatial + 1).expand(n, -1, spatial + 1)
    return base.bmm(theta.transpose(1, 2)).reshape(n, *spatial_size, spatial)


# --- grid_sample --------------------------------------------------------------------------------
def _unnormalize(coord, size, align_corners):
    if align_corners:
        return (coord + 1) / 2 * (size - 1)
    return ((coord + 1) * size - 1) / 2


def _clip(coord, size):
    return coord.clamp(0, size - 1)


def _reflect(coord, twice_low, twice_high):
    """aten's reflect_coordinates: fold `coord` into [low, high] by reflecting at both ends."""
    if twice_low == twice_high:
        return kiln.zeros_like(coord)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    distance = (coord - low).abs()
    extra = distance.fmod(span)
    flips = (distance / span).floor()
    return kiln.where(flips.fmod(2) == 0, extra + low, span - extra + low)


def _source_index(coord, size, padding_mode, align_corners):
    """aten's grid_sampler_compute_source_index: a grid coordinate -> a pixel coordinate."""
    coord = _unnormalize(coord, size, align_corners)
    if padding_mode == "border":
        coord = _clip(coord, size)
    elif padding_mode == "reflection":
        coord = _reflect(coord, 0, 2 * (size - 1)) if align_corners else _reflect(coord, -1, 2 * size - 1)
        coord = _clip(coord, size)
    return coord


def _read(flat_input, spatial_size, pixels, scale=None):
    """input values (N, C, *out) at integer pixel coordinates [(N, *out) per spatial dim, slowest
    first], times `scale` (N, *out) if given; pixels outside the image read as 0."""
    n, c = flat_input.shape[:2]
    inside = None
    flat_index = None
    for position, size in zip(pixels, spatial_size):
        ok = (position >= 0) & (position < size)
        inside = ok if inside is None else inside & ok
        clamped = position.clamp(0, size - 1)
        flat_index = clamped if flat_index is None else flat_index * size + clamped
    out_shape = list(pixels[0].shape[1:])
    points = math.prod(out_shape)
    index = flat_index.reshape(n, 1, points).expand(n, c, points)
    values = flat_input.gather(2, index).reshape(n, c, *out_shape)
    if scale is not None:
        values = values * scale.unsqueeze(1)
    return kiln.where(inside.unsqueeze(1), values, kiln.zeros((), dtype=values.dtype))


_MODES = ("bilinear", "nearest", "bicubic")
_PADDING_MODES = ("zeros", "border", "reflection")


def _check_grid_sampler(input, grid):
    if input.shape[0] != grid.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, but got input with "
                           f"sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
    if grid.shape[-1] != input.ndim - 2:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {input.ndim - 2} in last dimension, but got "
                           f"grid with sizes {list(grid.shape)}")
    for i in range(2, input.ndim):
        if input.shape[i] <= 0:
            raise RuntimeError(f"grid_sampler(): expected input to have non-empty spatial dimensions, but input has "
                               f"sizes {list(input.shape)} with dimension {i} being empty")
    if input.ndim not in (4, 5) or input.ndim != grid.ndim:
        raise RuntimeError(f"grid_sampler(): expected 4D or 5D input and grid with same number of dimensions, but got "
                           f"input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}")
    kernel = "grid_sampler_2d_cpu_kernel_impl" if input.ndim == 4 else "grid_sampler_3d_cpu"
    _check_floating(kernel, input)
    if grid.dtype != input.dtype:
        raise RuntimeError(f"expected scalar type {_type_name(input.dtype)} but found {_type_name(grid.dtype)}")


@_float32_under_autocast
def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Samples `input` (N, C, H, W) (or (N, C, D, H, W)) at the locations of `grid` (N, Ho, Wo, 2)
    (or (N, Do, Ho, Wo, 3); (x, y[, z]) in [-1, 1]) -> (N, C, Ho, Wo) (or (N, C, Do, Ho, Wo))."""
    if mode not in _MODES:
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', "
                         f"but got: '{mode}'")
    if padding_mode not in _PADDING_MODES:
        raise ValueError("nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    if align_corners is None:
        warnings.warn(_ALIGN_CORNERS_WARNING, stacklevel=2)
        align_corners = False
    _check_grid_sampler(input, grid)
    if mode == "bicubic":
        raise NotImplementedError("grid_sample(): kiln implements mode='bilinear' and 'nearest'; 'bicubic' is not "
                                  "implemented")
    n, c = input.shape[:2]
    spatial_size = list(input.shape[2:])
    flat_input = input.reshape(n, c, math.prod(spatial_size))
    # grid's last dim is (x, y[, z]): x indexes the last spatial dim; coords lists slowest dim first
    coords = [_source_index(grid.select(-1, len(spatial_size) - 1 - i), size, padding_mode, align_corners)
              for i, size in enumerate(spatial_size)]
    if mode == "nearest":
        # the grid's gradient is zero, as aten's, but present: a factor 1 + (r - r) over the rounded
        # coordinates (round's derivative is 0) keeps the output connected to the grid
        rounded = [coord.round() for coord in coords]
        total = sum(rounded[1:], rounded[0])
        connect = 1 + (total - total.detach())
        return _read(flat_input, spatial_size, [r.detach().to(_C.int64) for r in rounded], connect)
    lows = [coord.detach().floor() for coord in coords]
    output = None
    for corner in range(2 ** len(coords)):  # each neighbour: low or high along every dim
        highs = [(corner >> (len(coords) - 1 - d)) & 1 for d in range(len(coords))]
        weight = None
        for coord, low, high in zip(coords, lows, highs):
            w = coord - low if high else low + 1 - coord
            weight = w if weight is None else weight * w
        pixels = [(low + high).to(_C.int64) for low, high in zip(lows, highs)]
        term = _read(flat_input, spatial_size, pixels, weight)
        output = term if output is None else output + term
    return output
