"""Window functions (issue 17): hann_window, hamming_window, blackman_window, bartlett_window and
kaiser_window, as PyTorch's aten factories compute them, and i0, the modified Bessel function of
the first kind of order 0 that Kaiser's window is made of.

A window of length L is sampled at n = 0..L-1 over a period of N - 1 samples, with N = L + 1 when
`periodic` (the periodic window is the symmetric window of length L + 1 without its last sample,
for spectral analysis) and N = L otherwise. Every formula is evaluated in the requested dtype,
operation by operation as aten's (arange, multiply by the scalar step, cos, ...), so the values
match PyTorch's to the last bit or nearly; L = 0 gives an empty tensor and L = 1 a single 1.

i0 is Cephes' Chebyshev expansion, the one PyTorch's calc_i0 evaluates: exp(x) times a series in
x/2 - 2 for |x| <= 8, in 32/x - 2 over sqrt(x) above, each summed by Clenshaw's recurrence. Both
branches are computed on inputs clamped into their own range and the right one selected, so
neither produces an inf or NaN whose zero-weighted gradient would poison the other's. The gradient
is that of the series (i1 to float64 rounding).
"""

import math

from kiln import _C
from kiln._composites import _kiln

__all__ = ["i0", "i0_", "hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window"]

# Cephes i0.c: Chebyshev coefficients of exp(-x) I0(x) on [0, 8] ...
_I0E_A = (
    -4.41534164647933937950e-18, 3.33079451882223809783e-17, -2.43127984654795469359e-16,
    1.71539128555513303061e-15, -1.16853328779934516808e-14, 7.67618549860493561688e-14,
    -4.85644678311192946090e-13, 2.95505266312963983461e-12, -1.72682629144155570723e-11,
    9.67580903537323691224e-11, -5.18979560163526290666e-10, 2.65982372468238665035e-9,
    -1.30002500998624804212e-8, 6.04699502254191894932e-8, -2.67079385394061173391e-7,
    1.11738753912010371815e-6, -4.41673835845875056359e-6, 1.64484480707288970893e-5,
    -5.75419501008210370398e-5, 1.88502885095841655729e-4, -5.76375574538582365885e-4,
    1.63947561694133579842e-3, -4.32430999505057594430e-3, 1.05464603945949983183e-2,
    -2.37374148058994688156e-2, 4.93052842396707084878e-2, -9.49010970480476444210e-2,
    1.71620901522208775349e-1, -3.04682672343198398683e-1, 6.76795274409476084995e-1,
)
# ... and of exp(-x) sqrt(x) I0(x) on (8, inf), in 32/x - 2.
_I0E_B = (
    -7.23318048787475395456e-18, -4.83050448594418207126e-18, 4.46562142029675999901e-17,
    3.46122286769746109310e-17, -2.82762398051658348494e-16, -3.42548561967721913462e-16,
    1.77256013305652638360e-15, 3.81168066935262242075e-15, -9.55484669882830764870e-15,
    -4.15056934728722208663e-14, 1.54008621752140982691e-14, 3.85277838274214270114e-13,
    7.18012445138366623367e-13, -1.79417853150680611778e-12, -1.32158118404477131188e-11,
    -3.14991652796324136454e-11, 1.18891471078464383424e-11, 4.94060238822496958910e-10,
    3.39623202570838634515e-9, 2.26666899049817806459e-8, 2.04891858946906374183e-7,
    2.89137052083475648297e-6, 6.88975834691682398426e-5, 3.36911647825569408990e-3,
    8.04490411014108831608e-1,
)


def _chebyshev(y, coefficients):
    """Cephes' chbevl: the Chebyshev series with these coefficients at y, by Clenshaw's recurrence."""
    b0, b1, b2 = y * 0 + coefficients[0], y * 0, y * 0
    for c in coefficients[1:]:
        b2, b1 = b1, b0
        b0 = y * b1 - b2 + c
    return 0.5 * (b0 - b2)


def _i0_floating(x):
    k = _kiln()
    ax = x.abs()
    small = ax <= 8.0
    near = k.where(small, ax, 0.0)  # each branch sees only arguments in its own range
    far = k.where(small, 8.0, ax)
    near_value = near.exp() * _chebyshev(near / 2.0 - 2.0, _I0E_A)
    far_value = far.exp() * _chebyshev(32.0 / far - 2.0, _I0E_B) / far.sqrt()
    return k.where(small, near_value, far_value)


def _check_out(result, out):
    if not _C.can_cast(result.dtype, out.dtype):
        raise RuntimeError(f"result type {_type_name(result.dtype)} can't be cast to the desired output type "
                           f"{_type_name(out.dtype)}")


def _type_name(dtype):
    from kiln._composites import _type_name as name

    return name(dtype)


def i0(input, *, out=None):
    """The modified Bessel function of the first kind of order 0, elementwise (torch.i0). Integer and
    bool inputs give the default float dtype; 16-bit floats are computed in float32."""
    k = _kiln()
    dtype = input.dtype if input.dtype.is_floating_point else k.get_default_dtype()
    compute = k.float32 if dtype in (k.float16, k.bfloat16) else dtype
    result = _i0_floating(input.to(compute)).to(dtype)
    if out is None:
        return result
    _check_out(result, out)
    return out.copy_(result)  # kiln has no resize_: out must have the input's shape already


def i0_(input):
    """i0 in place (torch.i0_ / Tensor.i0_); an integer tensor cannot hold the float result."""
    return i0(input, out=input)


# --- window functions -----------------------------------------------------------------------------
_CPP_DTYPE_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
                    "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
                    "uint8": "unsigned char", "bool": "bool"}


def _tensor_options(dtype, dtype_given, layout, layout_given, pin_memory):
    """c10::TensorOptions printed as aten's window checks print it."""
    strided = _kiln().strided
    dtype_text = _CPP_DTYPE_NAMES.get(str(dtype)[5:], str(dtype)[5:]) + ("" if dtype_given else " (default)")
    layout_text = ("Strided" if layout is None or layout == strided else "Sparse") + \
        ("" if layout_given else " (default)")
    return (f"TensorOptions(dtype={dtype_text}, device=cpu, layout={layout_text}, requires_grad=false (default), "
            f"pinned_memory={'true' if pin_memory else 'false'}, memory_format=(nullopt))")


def _window(name, window_length, periodic, dtype, layout, device, pin_memory, requires_grad, formula):
    """aten's window_function_checks, the L = 0 and L = 1 cases, then `formula(n, N)` on
    n = arange(L) in `dtype` with N the period (L + 1 when periodic), made under no_grad."""
    k = _kiln()
    if not isinstance(window_length, int) or isinstance(window_length, bool):
        raise TypeError(f"{name}(): argument 'window_length' (position 1) must be int, not "
                        f"{type(window_length).__name__}")
    resolved = k.get_default_dtype() if dtype is None else dtype
    if layout is not None and layout != k.strided:
        raise RuntimeError(f"{name} is not implemented for sparse types, got: "
                           f"{_tensor_options(resolved, dtype is not None, layout, True, pin_memory)}")
    if not resolved.is_floating_point:
        raise RuntimeError(f"{name} expects floating point dtypes, got: "
                           f"{_tensor_options(resolved, dtype is not None, layout, layout is not None, pin_memory)}")
    if window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={window_length}")
    factory = {"dtype": resolved, "device": device}
    with k.no_grad():
        if window_length <= 1:
            window = k.ones(window_length, **factory)
        else:
            period = window_length + 1 if periodic else window_length
            window = formula(k.arange(window_length, **factory), period)
    return window.requires_grad_(requires_grad) if requires_grad else window


def _times(t, factor):
    """t * factor as aten's window code multiplies by a C++ Scalar: the factor rounded to t's dtype
    first. (A Python number times a float16/bfloat16 tensor is computed with the number in float32,
    not rounded; the windows of those dtypes differ in the last bit between the two.)"""
    return t * _kiln().full((), factor, dtype=t.dtype, device=t.device)


def _cosine_formula(alpha, beta):
    """aten's Hamming window: alpha - beta cos(2 pi n / (N - 1))."""
    return lambda n, period: _times(_times(n, math.pi * 2.0 / (period - 1)).cos(), -beta) + alpha


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None, layout=None, device=None,
                   pin_memory=False, requires_grad=False):
    """alpha - beta cos(2 pi n / (N - 1)) (torch.hamming_window)."""
    return _window("hamming_window", window_length, periodic, dtype, layout, device, pin_memory, requires_grad,
                   _cosine_formula(alpha, beta))


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, pin_memory=False,
                requires_grad=False):
    """0.5 - 0.5 cos(2 pi n / (N - 1)) (torch.hann_window: aten's Hamming window with alpha = beta = 0.5)."""
    return _window("hann_window", window_length, periodic, dtype, layout, device, pin_memory, requires_grad,
                   _cosine_formula(0.5, 0.5))


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, pin_memory=False,
                    requires_grad=False):
    """0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1)) (torch.blackman_window)."""
    def formula(n, period):
        phase = _times(n, math.pi / (period - 1))
        return _times(_times(phase, 4).cos(), 0.08) - _times(_times(phase, 2).cos(), 0.5) + 0.42

    return _window("blackman_window", window_length, periodic, dtype, layout, device, pin_memory, requires_grad,
                   formula)


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, pin_memory=False,
                    requires_grad=False):
    """The triangle 2n / (N - 1) up to the middle, 2 - 2n / (N - 1) after it (torch.bartlett_window)."""
    def formula(n, period):
        ramp = _times(n, 2.0 / (period - 1))
        first_half = ((period - 1) >> 1) + 1  # aten's split point, of the full symmetric window
        return _kiln().where(n < first_half, ramp, _times(ramp, -1) + 2)

    return _window("bartlett_window", window_length, periodic, dtype, layout, device, pin_memory, requires_grad,
                   formula)


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None, device=None,
                  pin_memory=False, requires_grad=False):
    """I0(beta sqrt(1 - ((n - alpha) / alpha)^2)) / I0(beta), alpha = (N - 1) / 2 (torch.kaiser_window),
    computed in float32 for 16-bit dtypes as aten's kernel does."""
    def formula(n, period):
        k = _kiln()
        compute = k.float32 if n.dtype in (k.float16, k.bfloat16) else n.dtype
        alpha = (period - 1) / 2.0
        x = n.to(compute)
        arg = ((1 - ((x - alpha) / alpha) ** 2).abs()).sqrt() * beta
        return (_i0_floating(arg) / _i0_floating(k.full((), beta, dtype=compute, device=n.device))).to(n.dtype)

    return _window("kaiser_window", window_length, periodic, dtype, layout, device, pin_memory, requires_grad,
                   formula)
