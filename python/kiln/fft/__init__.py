"""kiln.fft: torch.fft's discrete Fourier transforms.

Every function is composed, as PyTorch's are, from three ops (tensor/ops/fft.cc): _fft_c2c
(complex to complex), _fft_r2c (real to complex, optionally only the first n/2+1 frequencies) and
_fft_c2r (such a onesided spectrum back to real), each with a normalization mode. So gradients,
fake tensors and compilation come from those ops. `n`/`s` pad with zeros or trim each transformed
dim first; `norm` is "backward" (the default: forward unscaled, inverse by 1/n), "ortho"
(1/sqrt(n) both ways) or "forward" (forward by 1/n, inverse unscaled).
"""

import kiln

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2",
           "fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

_NONE, _BY_ROOT_N, _BY_N = 0, 1, 2


def _norm(norm, forward):
    """The normalization mode of a transform in direction `forward` for torch's `norm` string."""
    if norm is None or norm == "backward":
        return _NONE if forward else _BY_N
    if norm == "forward":
        return _BY_N if forward else _NONE
    if norm == "ortho":
        return _BY_ROOT_N
    raise RuntimeError(f'Invalid normalization mode: "{norm}"')


def _aten():
    return kiln.ops.aten


def _promote(name, x, require_complex=False):
    """Integers and bools compute in the default float dtype; require_complex lifts reals too."""
    if not isinstance(x, kiln.Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(x).__name__}")
    if x.dtype in (kiln.float16, kiln.bfloat16):
        raise RuntimeError(f"Unsupported dtype {'Half' if x.dtype is kiln.float16 else 'BFloat16'}")
    if not x.dtype.is_complex and not x.dtype.is_floating_point:
        x = x.to(kiln.get_default_dtype())
    if require_complex and not x.dtype.is_complex:
        x = x.to(x.dtype.to_complex())
    return x


def _resize(x, dims, sizes):
    """x with each dim in `dims` trimmed or zero-padded to its size in `sizes` (-1 keeps it)."""
    pad = [0] * (2 * x.ndim)
    for d, n in zip(dims, sizes):
        if n == -1:
            continue
        if n < 1:
            raise RuntimeError(f"Invalid number of data points ({n}) specified")
        if n < x.shape[d]:
            x = x.narrow(d, 0, n)
        elif n > x.shape[d]:
            pad[2 * (x.ndim - 1 - d) + 1] = n - x.shape[d]
    if any(pad):
        # constant_pad_nd lists (left, right) pairs from the last dim backwards
        while pad and pad[-1] == 0 and pad[-2] == 0:
            pad = pad[:-2]
        x = kiln.nn.functional.pad(x, pad)
    return x


def _dim1(x, dim):
    if not -max(x.ndim, 1) <= dim < max(x.ndim, 1):
        raise IndexError(f"Dimension out of range (expected to be in range of [{-max(x.ndim, 1)}, "
                         f"{max(x.ndim, 1) - 1}], but got {dim})")
    if x.ndim == 0:
        raise IndexError("Dimension specified as -1 but tensor has no dimensions")
    return dim % x.ndim


def _out(result, out):
    if out is None:
        return result
    out.resize_(result.shape)
    return out.copy_(result)


# --- one dimension -------------------------------------------------------------------------------

def _c2c_or_r2c(name, input, n, dim, norm, forward, out):
    x = _promote(name, input)
    dim = _dim1(x, dim)
    x = _resize(x, [dim], [-1 if n is None else n])
    mode = _norm(norm, forward)
    if x.dtype.is_complex:
        return _out(_aten()._fft_c2c(x, [dim], mode, forward), out)
    result = _aten()._fft_r2c(x, [dim], mode, False)
    return _out(result if forward else result.conj(), out)


def fft(input, n=None, dim=-1, norm=None, *, out=None):
    """The one-dimensional discrete Fourier transform of `input` along `dim`."""
    return _c2c_or_r2c("fft", input, n, dim, norm, True, out)


def ifft(input, n=None, dim=-1, norm=None, *, out=None):
    """The inverse of fft."""
    return _c2c_or_r2c("ifft", input, n, dim, norm, False, out)


def _r2c_onesided(name, input, n, dim, norm, forward):
    """The n // 2 + 1 non-negative frequencies of a real signal (conjugated for the inverse)."""
    x = _promote(name, input)
    if x.dtype.is_complex:
        raise RuntimeError(f"{name} expects a real input tensor, but got {_display(x.dtype)}")
    dim = _dim1(x, dim)
    x = _resize(x, [dim], [-1 if n is None else n])
    result = _aten()._fft_r2c(x, [dim], _norm(norm, forward), True)
    return result if forward else result.conj()


def _c2r(name, input, n, dim, norm, forward):
    """The real signal of length n (default 2 * (input.size(dim) - 1)) whose onesided spectrum is
    `input` (its conjugate, for the forward direction)."""
    x = _promote(name, input, require_complex=True)
    dim = _dim1(x, dim)
    n = 2 * (x.shape[dim] - 1) if n is None else n
    if n < 1:
        raise RuntimeError(f"Invalid number of data points ({n}) specified")
    x = _resize(x, [dim], [n // 2 + 1])
    return _aten()._fft_c2r(x.conj() if forward else x, [dim], _norm(norm, forward), n)


def rfft(input, n=None, dim=-1, norm=None, *, out=None):
    """fft of a real signal, keeping the n // 2 + 1 non-negative frequencies."""
    return _out(_r2c_onesided("rfft", input, n, dim, norm, True), out)


def irfft(input, n=None, dim=-1, norm=None, *, out=None):
    """The inverse of rfft: a real signal of length n (default 2 * (input.size(dim) - 1))."""
    return _out(_c2r("irfft", input, n, dim, norm, False), out)


def hfft(input, n=None, dim=-1, norm=None, *, out=None):
    """fft of a signal whose first half is `input` and is Hermitian-symmetric: a real spectrum."""
    return _out(_c2r("hfft", input, n, dim, norm, True), out)


def ihfft(input, n=None, dim=-1, norm=None, *, out=None):
    """The inverse of hfft: the onesided spectrum of a real signal's inverse transform."""
    return _out(_r2c_onesided("ihfft", input, n, dim, norm, False), out)


def _display(dtype):
    return {kiln.complex64: "ComplexFloat", kiln.complex128: "ComplexDouble"}.get(dtype, str(dtype))


# --- n dimensions --------------------------------------------------------------------------------

def _dims_and_sizes(name, x, s, dim, default_dims=None):
    """torch's canonical (dims, sizes): every dim when neither is given, the last len(s) dims for
    `s` alone; sizes -1 keep a dim's size."""
    if dim is None and s is None and default_dims is not None:
        dim = default_dims
    if dim is not None:
        dims = [dim] if isinstance(dim, int) else list(dim)
        dims = [_dim1(x, d) for d in dims]
        if len(set(dims)) != len(dims):
            raise RuntimeError("FFT dims must be unique")
        if s is not None and len(s) != len(dims):
            raise RuntimeError("When given, dim and shape arguments must have the same length")
    elif s is not None:
        if len(s) > x.ndim:
            raise RuntimeError(f"Got shape with {len(s)} values but input tensor only has {x.ndim} dimensions.")
        dims = list(range(x.ndim - len(s), x.ndim))
    else:
        dims = list(range(x.ndim))
    sizes = list(s) if s is not None else [-1] * len(dims)
    sizes = [x.shape[d] if n == -1 else n for d, n in zip(dims, sizes)]
    return dims, sizes


def _fftn(name, input, s, dim, norm, forward, out, default_dims=None):
    x = _promote(name, input)
    dims, sizes = _dims_and_sizes(name, x, s, dim, default_dims)
    x = _resize(x, dims, sizes)
    mode = _norm(norm, forward)
    if not dims:
        return _out(x.clone() if x.dtype.is_complex else x.to(x.dtype.to_complex()), out)
    if x.dtype.is_complex:
        return _out(_aten()._fft_c2c(x, dims, mode, forward), out)
    result = _aten()._fft_r2c(x, dims, mode, False)
    return _out(result if forward else result.conj(), out)


def fftn(input, s=None, dim=None, norm=None, *, out=None):
    """The n-dimensional discrete Fourier transform (all dims unless `s` or `dim` says)."""
    return _fftn("fftn", input, s, dim, norm, True, out)


def ifftn(input, s=None, dim=None, norm=None, *, out=None):
    return _fftn("ifftn", input, s, dim, norm, False, out)


def fft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return _fftn("fft2", input, s, dim, norm, True, out)


def ifft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return _fftn("ifft2", input, s, dim, norm, False, out)


def rfftn(input, s=None, dim=None, norm=None, *, out=None):
    """fftn of a real signal, the last transformed dim keeping its non-negative frequencies."""
    x = _promote("rfftn", input)
    if x.dtype.is_complex:
        raise RuntimeError(f"rfftn expects a real-valued input tensor, but got {_display(x.dtype)}")
    dims, sizes = _dims_and_sizes("rfftn", x, s, dim)
    if not dims:
        raise RuntimeError("rfftn must transform at least one axis")
    x = _resize(x, dims, sizes)
    return _out(_aten()._fft_r2c(x, dims, _norm(norm, True), True), out)


def rfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return rfftn(input, s, dim, norm, out=out)


def _c2r_sizes(name, x, s, dim):
    dims, sizes = _dims_and_sizes(name, x, s, dim)
    if not dims:
        raise RuntimeError(f"{name} must transform at least one axis")
    last = 2 * (x.shape[dims[-1]] - 1) if s is None or s[-1] == -1 else s[-1]
    if last < 1:
        raise RuntimeError(f"Invalid number of data points ({last}) specified")
    sizes[-1] = last // 2 + 1
    return dims, sizes, last


def irfftn(input, s=None, dim=None, norm=None, *, out=None):
    """The inverse of rfftn."""
    x = _promote("irfftn", input, require_complex=True)
    dims, sizes, last = _c2r_sizes("irfftn", x, s, dim)
    x = _resize(x, dims, sizes)
    return _out(_aten()._fft_c2r(x, dims, _norm(norm, False), last), out)


def irfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return irfftn(input, s, dim, norm, out=out)


def hfftn(input, s=None, dim=None, norm=None, *, out=None):
    """n-dimensional hfft: complex transforms over the leading dims, then hfft over the last."""
    x = _promote("hfftn", input, require_complex=True)
    dims, sizes, last = _c2r_sizes("hfftn", x, s, dim)
    x = _resize(x, dims, sizes)
    mode = _norm(norm, True)
    if len(dims) > 1:
        x = _aten()._fft_c2c(x, dims[:-1], mode, True)
    return _out(_aten()._fft_c2r(x.conj(), dims[-1:], mode, last), out)


def hfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return hfftn(input, s, dim, norm, out=out)


def ihfftn(input, s=None, dim=None, norm=None, *, out=None):
    """The inverse of hfftn."""
    x = _promote("ihfftn", input)
    if x.dtype.is_complex:
        raise RuntimeError(f"ihfftn expects a real-valued input tensor, but got {_display(x.dtype)}")
    dims, sizes = _dims_and_sizes("ihfftn", x, s, dim)
    if not dims:
        raise RuntimeError("ihfftn must transform at least one axis")
    x = _resize(x, dims, sizes)
    mode = _norm(norm, False)
    result = _aten()._fft_r2c(x, dims[-1:], mode, True).conj()
    if len(dims) > 1:  # as torch._refs.fft.ihfftn: the leading dims' inverse transforms of the conjugate
        result = _aten()._fft_c2c(result, dims[:-1], mode, False)
    return _out(result, out)


def ihfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return ihfftn(input, s, dim, norm, out=out)


# --- frequencies and shifts ----------------------------------------------------------------------

def fftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """The sample frequencies of an n-point fft: [0, 1, ..., (n-1)//2, -(n//2), ..., -1] / (d n)."""
    half = (n + 1) // 2
    values = kiln.cat([kiln.arange(half, dtype=dtype, device=device),
                       kiln.arange(-(n // 2), 0, dtype=dtype, device=device)])
    if not values.dtype.is_floating_point and not values.dtype.is_complex:
        values = values.to(kiln.get_default_dtype())
    result = (values * (1.0 / (n * d))).requires_grad_(requires_grad)
    return _out(result, out)


def rfftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """The sample frequencies of an n-point rfft: [0, 1, ..., n // 2] / (d n)."""
    values = kiln.arange(n // 2 + 1, dtype=dtype, device=device)
    if not values.dtype.is_floating_point and not values.dtype.is_complex:
        values = values.to(kiln.get_default_dtype())
    result = (values * (1.0 / (n * d))).requires_grad_(requires_grad)
    return _out(result, out)


def _shift(input, dim, inverse):
    dims = list(range(input.ndim)) if dim is None else [dim] if isinstance(dim, int) else list(dim)
    shifts = [(input.shape[d] + 1) // 2 if inverse else input.shape[d] // 2 for d in dims]
    return input.roll(shifts, dims)


def fftshift(input, dim=None):
    """The zero frequency moved to the centre of each dim in `dim` (every dim by default)."""
    return _shift(input, dim, False)


def ifftshift(input, dim=None):
    """The inverse of fftshift."""
    return _shift(input, dim, True)
