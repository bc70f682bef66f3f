"""torch.fft's functions on CUDA through cuFFT (tensor/ops/fft_cuda.cc), against kiln's CPU FFT
(tested against PyTorch and numpy in tests/): complex and real inputs, one and several dims,
power-of-two and other lengths, cropping and padding (n=, s=), every norm, two-sided r2c, and the
gradients of r2c, c2c and c2r."""

import pytest

import kiln

from cuda_util import close_scaled as close, host, needs_kernels

pytestmark = needs_kernels
TOL = {"float32": 2e-5, "float64": 1e-12}


def complex_host(name, shape, seed):
    return kiln.complex(host(name, shape, seed), host(name, shape, seed + 100))


CASES = [
    ("fft", lambda f, x, norm: f.fft(x, norm=norm)),
    ("fft n=11 dim 0", lambda f, x, norm: f.fft(x, n=11, dim=0, norm=norm)),
    ("ifft", lambda f, x, norm: f.ifft(x, dim=1, norm=norm)),
    ("fft2", lambda f, x, norm: f.fft2(x, norm=norm)),
    ("ifftn s", lambda f, x, norm: f.ifftn(x, s=(5, 9), norm=norm)),
    ("irfft", lambda f, x, norm: f.irfft(x, norm=norm)),
    ("irfft n=15", lambda f, x, norm: f.irfft(x, n=15, norm=norm)),
    ("irfft2", lambda f, x, norm: f.irfft2(x, norm=norm)),
    ("hfft", lambda f, x, norm: f.hfft(x, norm=norm)),
]
REAL_CASES = [
    ("rfft", lambda f, x, norm: f.rfft(x, norm=norm)),
    ("rfft n=12", lambda f, x, norm: f.rfft(x, n=12, dim=1, norm=norm)),
    ("rfft2", lambda f, x, norm: f.rfft2(x, norm=norm)),
    ("rfftn dims", lambda f, x, norm: f.rfftn(x, dim=(0, 2), norm=norm)),
    ("ihfft", lambda f, x, norm: f.ihfft(x, norm=norm)),
    ("fft of real (two-sided r2c)", lambda f, x, norm: f.fft(x, norm=norm)),
    ("fft2 of real", lambda f, x, norm: f.fft2(x, norm=norm)),
]


@pytest.mark.parametrize("name", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(4, 8, 16), (3, 7, 10)])
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_transforms(name, shape, norm):
    tol = TOL[name] * 10
    z = complex_host(name, shape, 1)
    for label, fn in CASES:
        close(fn(kiln.fft, z.cuda(), norm), fn(kiln.fft, z, norm), tol, label)
    x = host(name, shape, 2)
    for label, fn in REAL_CASES:
        close(fn(kiln.fft, x.cuda(), norm), fn(kiln.fft, x, norm), tol, label)


def test_round_trips_and_helpers():
    x = host("float32", (6, 32), 3)
    close(kiln.fft.irfft(kiln.fft.rfft(x.cuda()), n=32), x, 1e-5, "irfft(rfft(x))")
    z = complex_host("float64", (5, 9), 4)
    close(kiln.fft.ifft(kiln.fft.fft(z.cuda())), z, 1e-12, "ifft(fft(z))")
    close(kiln.fft.fftshift(kiln.fft.fft(z.cuda())), kiln.fft.fftshift(kiln.fft.fft(z)), 1e-12, "fftshift")
    s = host("float32", (400,), 5)
    win = kiln.hann_window(64)
    close(kiln.stft(s.cuda(), 64, window=win.cuda(), return_complex=True), kiln.stft(s, 64, window=win, return_complex=True),
          1e-4, "stft")


@pytest.mark.parametrize("name", ["float32", "float64"])
def test_gradients(name):
    tol = TOL[name] * 100
    x = host(name, (4, 10), 6)
    g = host(name, (4, 6, 2), 7)

    def r2c(t):
        return (kiln.view_as_real(kiln.fft.rfft(t)) * g.to(t.device)).sum()

    def c2c(t):
        return (kiln.view_as_real(kiln.fft.fft(kiln.view_as_complex(t), n=6)) * g.to(t.device)).sum()

    def c2r(t):
        return (kiln.fft.irfft(kiln.view_as_complex(t), n=10) * x.to(t.device)).sum()

    for label, fn, arg in (("rfft", r2c, x), ("fft", c2c, host(name, (4, 5, 2), 8)), ("irfft", c2r, g)):
        a, c = arg.cuda().requires_grad_(), arg.clone().requires_grad_()
        fn(a).backward()
        fn(c).backward()
        close(a.grad, c.grad, tol, label)
