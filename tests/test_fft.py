"""kiln.fft, kiln.stft and kiln.istft against PyTorch 2.13: values for power-of-two, odd and prime
lengths (radix-2 and Bluestein), every norm, n/s padding and trimming, real and complex inputs,
float64 gradients, and compiled runs against eager."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # the oracle, installed for Python 3.11 only

import kiln

RNG = np.random.default_rng(0)


def pair(shape, complex_=False, dtype=np.float64, grad=False):
    a = RNG.standard_normal(shape)
    if complex_:
        a = a + 1j * RNG.standard_normal(shape)
    a = a.astype(np.complex128 if complex_ and dtype == np.float64 else np.complex64 if complex_ else dtype)
    t = torch.tensor(a, requires_grad=grad)
    k = kiln.tensor(a.tolist(), dtype=getattr(kiln, str(t.dtype).split(".")[1])).requires_grad_(grad)
    return k, t


def close(k, t, tol=1e-9):
    assert str(k.dtype).split(".")[1] == str(t.dtype).split(".")[1], (k.dtype, t.dtype)
    assert tuple(k.shape) == tuple(t.shape), (k.shape, t.shape)
    t = t.detach().resolve_conj()
    scale = max(1.0, float(np.abs(t.numpy()).max()) if t.numel() else 1.0)
    np.testing.assert_allclose(k.detach().numpy(), t.numpy(), rtol=tol, atol=tol * scale)


ONE_D = [
    ("fft", False), ("fft", True), ("ifft", False), ("ifft", True), ("rfft", False), ("irfft", True),
    ("hfft", True), ("ihfft", False),
]


@pytest.mark.parametrize("name,complex_", ONE_D)
@pytest.mark.parametrize("length", [1, 2, 8, 7, 12, 13, 64])
def test_one_dimensional(name, complex_, length):
    k, t = pair((3, length), complex_)
    for norm in (None, "backward", "ortho", "forward"):
        for n in (None, length + 3, max(1, length - 1)):
            if name in ("irfft", "hfft") and n is None and length == 1:
                continue  # n = 2 * (1 - 1) = 0: an error in both
            close(getattr(kiln.fft, name)(k, n=n, norm=norm), getattr(torch.fft, name)(t, n=n, norm=norm))
    if length > 1 or name not in ("irfft", "hfft"):
        close(getattr(kiln.fft, name)(k.t(), dim=0), getattr(torch.fft, name)(t.t(), dim=0))


@pytest.mark.parametrize("name,complex_", [("fftn", True), ("fftn", False), ("ifftn", True), ("rfftn", False),
                                           ("irfftn", True), ("hfftn", True), ("ihfftn", False), ("fft2", True),
                                           ("ifft2", False), ("rfft2", False), ("irfft2", True)])
def test_n_dimensional(name, complex_):
    k, t = pair((2, 5, 6), complex_)
    for kwargs in ({}, {"dim": (0, 2)}, {"s": (4, 7)}, {"s": (3, 8), "dim": (-1, 0)}, {"norm": "ortho"}):
        if name.endswith("2") and "dim" in kwargs and len(kwargs["dim"]) != 2:
            continue
        close(getattr(kiln.fft, name)(k, **kwargs), getattr(torch.fft, name)(t, **kwargs))


def test_float32_and_integer_inputs():
    k, t = pair((4, 10), dtype=np.float32)
    close(kiln.fft.rfft(k), torch.fft.rfft(t), tol=1e-5)
    close(kiln.fft.fft(k), torch.fft.fft(t), tol=1e-5)
    close(kiln.fft.fft(kiln.arange(6)), torch.fft.fft(torch.arange(6)), tol=1e-6)


def test_frequencies_and_shifts():
    for n in (1, 6, 7):
        close(kiln.fft.fftfreq(n, 0.5), torch.fft.fftfreq(n, 0.5), tol=1e-7)
        close(kiln.fft.rfftfreq(n), torch.fft.rfftfreq(n), tol=1e-7)
        close(kiln.fft.fftfreq(n, dtype=kiln.float64), torch.fft.fftfreq(n, dtype=torch.float64))
    k, t = pair((5, 4))
    for dim in (None, 0, (1,), (0, 1)):
        close(kiln.fft.fftshift(k, dim), torch.fft.fftshift(t, dim))
        close(kiln.fft.ifftshift(k, dim), torch.fft.ifftshift(t, dim))


def test_errors():
    for fn in (lambda m: m.fft.rfft(m.ones(3, dtype=m.complex64)), lambda m: m.fft.fft(m.ones(3), norm="bad"),
               lambda m: m.fft.irfft(m.ones(1, dtype=m.complex64)), lambda m: m.fft.fft(m.ones(3), n=0)):
        with pytest.raises(RuntimeError) as expected:
            fn(torch)
        with pytest.raises(RuntimeError, match=str(expected.value).split("\n")[0][:30].replace("(", r"\(")
                           .replace(")", r"\)")):
            fn(kiln)


@pytest.mark.parametrize("name,complex_", ONE_D + [("rfft2", False), ("irfftn", True), ("fftn", True)])
def test_gradients(name, complex_):
    k, t = pair((3, 6), complex_, grad=True)
    weight = RNG.standard_normal(200)
    outs = []
    for m, x in ((kiln, k), (torch, t)):
        y = getattr(m.fft, name)(x)
        w = m.tensor(weight[: y.numel()].reshape(y.shape), dtype=m.float64)
        if y.dtype.is_complex:
            y = m.view_as_real(y.resolve_conj()) * w[..., None]
        else:
            y = y * w
        (y * y).sum().backward()
        outs.append(x.grad)
    close(outs[0], outs[1], tol=1e-8)


def test_stft_and_istft():
    k, t = pair((2, 100))
    for kwargs in ({"n_fft": 16}, {"n_fft": 16, "hop_length": 5, "win_length": 12}, {"n_fft": 15, "center": False},
                   {"n_fft": 16, "normalized": True, "onesided": False}, {"n_fft": 8, "pad_mode": "constant"}):
        kw, tw = kiln.hann_window(kwargs.get("win_length", kwargs["n_fft"]), dtype=kiln.float64), \
            torch.hann_window(kwargs.get("win_length", kwargs["n_fft"]), dtype=torch.float64)
        ks = kiln.stft(k, window=kw, return_complex=True, **kwargs)
        ts = torch.stft(t, window=tw, return_complex=True, **kwargs)
        close(ks, ts)
        inverse = {key: v for key, v in kwargs.items() if key != "pad_mode"}
        if not kwargs.get("center", True):  # the Hann window's zero at the first sample: both refuse
            for m, spectrum, window in ((torch, ts, tw), (kiln, ks, kw)):
                with pytest.raises(RuntimeError, match="window overlap add min"):
                    m.istft(spectrum, window=window, length=100, **inverse)
            continue
        close(kiln.istft(ks, window=kw, length=100, **inverse), torch.istft(ts, window=tw, length=100, **inverse))
    close(k[0].stft(16, window=kiln.hann_window(16, dtype=kiln.float64), return_complex=True),
          t[0].stft(16, window=torch.hann_window(16, dtype=torch.float64), return_complex=True))
    with pytest.raises(RuntimeError, match="stft requires the return_complex parameter"):
        kiln.stft(k, 16)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_matches_eager(backend):
    x = kiln.tensor(RNG.standard_normal((4, 24)), dtype=kiln.float32)

    def f(x):
        spectrum = kiln.fft.rfft(x.tanh(), norm="ortho")
        filtered = spectrum * kiln.linspace(1.0, 0.0, spectrum.shape[-1])
        return kiln.fft.irfft(filtered, n=x.shape[-1], norm="ortho").sum(-1), spectrum.abs()

    kiln._dynamo.reset()
    xe, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
    expected = f(xe)
    got = kiln.compile(f, backend=backend, fullgraph=True)(xc)
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g.detach().numpy(), e.detach().numpy(), rtol=1e-5, atol=1e-6)
    expected[0].sum().backward()
    got[0].sum().backward()
    np.testing.assert_allclose(xc.grad.numpy(), xe.grad.numpy(), rtol=1e-5, atol=1e-6)
