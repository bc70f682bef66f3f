"""What the tests of generated CUDA kernels share: whether kernels can run here (the H200, not the
fake driver), the dtype lists, host() inputs (seeded; integers in [-20, 20), uint8 [0, 20), floats
uniform in [low, high)), and the comparisons of a CUDA result with the CPU's."""

import numpy as np
import pytest

import kiln

CUDA = kiln.cuda.is_available()
FAKE_DRIVER = CUDA and kiln.cuda.get_device_name(0) == "kiln fake CUDA device"
KERNELS = CUDA and not FAKE_DRIVER and kiln._C._cuda_nvjitlink_available()
needs_kernels = pytest.mark.skipif(not KERNELS, reason="generated kernels need the GPU and nvJitLink (tools/gpu/test.sh)")

FLOATS = ["float32", "float64", "float16", "bfloat16"]
INTS = ["int64", "int32", "int16", "int8", "uint8"]
ALL = FLOATS + INTS + ["bool"]


def host(name, shape, seed=0, low=-3.0, high=3.0):
    rng = np.random.default_rng(seed)
    if name == "bool":
        return kiln.tensor(rng.random(shape) > 0.5)
    if name in INTS:
        lo = 0 if name == "uint8" else -20
        return kiln.tensor(rng.integers(lo, 20, shape)).to(getattr(kiln, name))
    return kiln.tensor(rng.uniform(low, high, shape)).to(getattr(kiln, name))


def _host_pair(got, want, what):
    """got on the host and want, checked for dtype and shape; complex ones as (real, imag) pairs."""
    assert got.device.type == "cuda", what
    g, w = got.detach().cpu(), want.detach()
    assert g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape), (what, g.dtype, w.dtype, g.shape, w.shape)
    if g.is_complex():
        g, w = kiln.view_as_real(g), kiln.view_as_real(w)
    return g, w


def close(got, want, tol, what=""):
    """got (a CUDA tensor) equals want (the CPU's) in dtype and shape, and in value to rtol = atol =
    tol (complex values as (real, imag) pairs; NaN and infinities where want has them)."""
    g, w = _host_pair(got, want, what)
    np.testing.assert_allclose(g.double().numpy(), w.double().numpy(), rtol=tol, atol=tol, err_msg=str(what),
                               equal_nan=True)


def close_scaled(got, want, tol, what=""):
    """got (a CUDA tensor) equals want (the CPU's) in dtype and shape, and in value to rtol tol and an
    atol of tol times want's largest finite magnitude (at least 1): sums of many terms round to their
    size. Infinities and NaNs must sit where want has them."""
    g, want = _host_pair(got, want, what)
    magnitude = want.double().abs()
    finite = magnitude[magnitude.isfinite()]
    scale = max(1.0, float(finite.max())) if finite.numel() else 1.0
    np.testing.assert_allclose(g.double().numpy(), want.double().numpy(), rtol=tol, atol=tol * scale,
                               err_msg=str(what), equal_nan=True)
