"""Complex tensors (issue 17): complex64/complex128, their construction, printing, promotion,
views (view_as_real, view_as_complex, real, imag), arithmetic, gradients and compiled runs, each
against PyTorch 2.13."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # the oracle, installed for Python 3.11 only

import kiln

DTYPES = [(kiln.complex64, torch.complex64), (kiln.complex128, torch.complex128)]


def k_of(t, requires_grad=False):
    """The kiln tensor holding torch tensor t's values (and layout when it is a plain transpose)."""
    out = kiln.tensor(t.detach().numpy().tolist(), dtype=getattr(kiln, str(t.dtype).split(".")[1]))
    return out.requires_grad_(requires_grad)


def close(k, t, rtol=1e-5, atol=1e-6):
    assert str(k.dtype).split(".")[1] == str(t.dtype).split(".")[1], (k.dtype, t.dtype)
    assert tuple(k.shape) == tuple(t.shape)
    np.testing.assert_allclose(k.detach().numpy(), t.detach().resolve_conj().numpy(), rtol=rtol, atol=atol)


def test_dtypes():
    assert kiln.cfloat is kiln.complex64 and kiln.cdouble is kiln.complex128
    for kd, td in DTYPES:
        assert repr(kd) == repr(td).replace("torch", "kiln")
        assert kd.is_complex and not kd.is_floating_point and kd.is_signed
        assert kd.itemsize == td.itemsize
        assert str(kd.to_real()) == str(td.to_real()).replace("torch", "kiln")
    assert kiln.float64.to_complex() is kiln.complex128
    pairs = [("float32", "complex64"), ("float64", "complex64"), ("int64", "complex128"), ("complex64", "complex128"),
             ("bool", "complex64"), ("bfloat16", "complex64")]
    for a, b in pairs:
        assert str(kiln.promote_types(getattr(kiln, a), getattr(kiln, b))).split(".")[1] == \
            str(torch.promote_types(getattr(torch, a), getattr(torch, b))).split(".")[1]
    assert kiln.finfo(kiln.complex64) == kiln.finfo(kiln.float32)


@pytest.mark.parametrize("data", [[1 + 2j, 3 - 1j], [[0.5j, 2], [-1.25 + 0j, 1e-5 + 1e5j]], 2 - 3j,
                                  [1e10 + 1j, float("nan") + 1j, float("inf") - 2j]])
def test_construction_and_printing(data):
    for kd, td in DTYPES:
        t = torch.tensor(data, dtype=td)
        k = kiln.tensor(data, dtype=kd)
        # (line breaks may differ where "kiln." is one character shorter than "torch.")
        assert repr(k).split() == repr(t).replace("torch.", "kiln.").split()
        assert str(k.tolist()) == str(t.tolist())  # (nan != nan)
    assert kiln.tensor(data).dtype is kiln.complex64  # inferred as torch infers it
    if isinstance(data, complex):
        assert kiln.tensor(data).item() == torch.tensor(data).item()


def test_numpy_round_trip():
    a = (np.arange(6) + 1j * np.arange(6)[::-1]).reshape(2, 3)
    for np_dtype, kd in [(np.complex64, kiln.complex64), (np.complex128, kiln.complex128)]:
        k = kiln.from_numpy(a.astype(np_dtype))
        assert k.dtype is kd
        np.testing.assert_array_equal(k.numpy(), a.astype(np_dtype))


def test_views_share_memory():
    for kd, td in DTYPES:
        t = torch.tensor([[1 + 2j, 3 - 4j, 5j], [-1 + 0j, 2 + 2j, 0j]], dtype=td)
        k = k_of(t)
        for fn in (lambda x: torch_like(x).view_as_real(x), lambda x: torch_like(x).view_as_real(x.t()),
                   lambda x: torch_like(x).view_as_real(x[:, 1:]), lambda x: x.real, lambda x: x.imag,
                   lambda x: x.t().imag):
            kv, tv = fn(k), fn(t)
            close(kv, tv)
            assert kv.stride() == tv.stride() and kv.storage_offset() == tv.storage_offset()
        # the parts are views: writing through them changes the complex tensor
        k.real.mul_(2)
        t.real.mul_(2)
        k.imag[0] = -7
        t.imag[0] = -7
        close(k, t)
        pairs = torch.randn(3, 4, 2, dtype=td.to_real())
        kp = kiln.tensor(pairs.numpy())
        close(kiln.view_as_complex(kp), torch.view_as_complex(pairs))
        close(kiln.view_as_complex(kp[:, 1:]), torch.view_as_complex(pairs[:, 1:]))


def torch_like(x):
    return kiln if isinstance(x, kiln.Tensor) else torch


def test_view_errors():
    checks = [
        (lambda m: m.view_as_real(m.ones(3)), "view_as_real is only supported for complex tensors"),
        (lambda m: m.view_as_complex(m.ones(3, 3)), "Tensor must have a last dimension of size 2"),
        (lambda m: m.view_as_complex(m.ones(2, 4)[:, ::2]), "Tensor must have a last dimension with stride 1"),
        (lambda m: m.view_as_complex(m.ones(3, 2, dtype=m.int64)), "view_as_complex is only supported for half, float and double"),
        (lambda m: m.view_as_complex(m.ones(3, 3)[:, 1:]), "Tensor must have a stride divisible by 2"),
        (lambda m: m.ones(3).imag, "imag is not implemented for tensors with non-complex dtypes."),
        (lambda m: m.complex(m.ones(2), m.ones(2, dtype=m.float64)), "Expected object of scalar type Float"),
        (lambda m: m.polar(m.ones(2, dtype=m.int64), m.ones(2, dtype=m.int64)), "Expected both inputs to be Half"),
    ]
    for fn, message in checks:
        with pytest.raises(RuntimeError, match=message):
            fn(torch)
        with pytest.raises(RuntimeError, match=message):
            fn(kiln)


def test_arithmetic_and_promotion():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))
    b = rng.standard_normal((4,)) + 1j * rng.standard_normal((4,))
    r = rng.standard_normal((3, 1))
    for kd, td in DTYPES:
        ta, tb = torch.tensor(a, dtype=td), torch.tensor(b, dtype=td)
        tr = torch.tensor(r, dtype=torch.float32)
        ka, kb, kr = k_of(ta), k_of(tb), k_of(tr)
        for fn in (lambda m, x, y, z: x + y, lambda m, x, y, z: x - 2 * y, lambda m, x, y, z: x * y,
                   lambda m, x, y, z: x / y, lambda m, x, y, z: x * z, lambda m, x, y, z: z / x,
                   lambda m, x, y, z: x + 1j, lambda m, x, y, z: z * (2 - 1j), lambda m, x, y, z: -x,
                   lambda m, x, y, z: m.add(x, y, alpha=2 + 1j), lambda m, x, y, z: x.t() * y[:3],
                   lambda m, x, y, z: (x == x.conj()) | (x != y), lambda m, x, y, z: x.abs(),
                   lambda m, x, y, z: x.angle(), lambda m, x, y, z: x.conj(), lambda m, x, y, z: x.exp(),
                   lambda m, x, y, z: x.sum(0), lambda m, x, y, z: x.mean(), lambda m, x, y, z: x.sum(),
                   lambda m, x, y, z: m.sgn(x), lambda m, x, y, z: x.reciprocal(), lambda m, x, y, z: x.sqrt(),
                   lambda m, x, y, z: x.to(m.complex128), lambda m, x, y, z: z.to(m.complex64),
                   lambda m, x, y, z: m.where(z > 0, x, y), lambda m, x, y, z: m.cat([x, y[None]]),
                   lambda m, x, y, z: x[m.tensor([2, 0])], lambda m, x, y, z: x.flip(0).clone()):
            close(fn(kiln, ka, kb, kr), fn(torch, ta, tb, tr), rtol=1e-4, atol=1e-5)
        kc = ka.clone()
        tc = ta.clone()
        kc.mul_(kb)
        tc.mul_(tb)
        close(kc, tc)
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        kiln.ones(2).add_(kiln.ones(2, dtype=kiln.complex64))
    with pytest.raises(NotImplementedError, match="not implemented for 'ComplexFloat'"):
        kiln.ones(2, dtype=kiln.complex64).floor()


def test_comparison_with_python_complex_numbers():
    t = torch.tensor([1 + 2j, 2j, 3 + 0j])
    k = k_of(t)
    for f in (lambda x: x == (1 + 2j), lambda x: x != 2j, lambda x: (3 + 0j) == x, lambda x: x == 3):
        got, want = f(k), f(t)
        assert isinstance(got, kiln.Tensor) and got.tolist() == want.tolist()


def test_real_angle_of_real_input():
    t = torch.tensor([-2.0, 0.0, 3.0, float("nan"), -0.0])
    close(k_of(t).angle(), t.angle())
    close(kiln.tensor([-1, 2]).angle(), torch.tensor([-1, 2]).angle())


def test_complex_and_polar():
    rng = np.random.default_rng(1)
    for rd in (torch.float32, torch.float64):
        re, im = torch.tensor(rng.standard_normal((2, 3)), dtype=rd), torch.tensor(rng.standard_normal(3), dtype=rd)
        close(kiln.complex(k_of(re), k_of(im)), torch.complex(re, im))
        close(kiln.polar(k_of(re.abs()), k_of(im)), torch.polar(re.abs(), im))


def rotary(m, x, freqs):
    """meta-llama's apply_rotary_emb on x: (batch, seq, heads, head_dim)."""
    xc = m.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    f = freqs.view(1, x.shape[1], 1, xc.shape[-1])
    return m.view_as_real(xc * f).flatten(3).type_as(x)


def freqs_cis(m, dim, end):
    freqs = 1.0 / (10000.0 ** (m.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    freqs = m.outer(m.arange(end, dtype=m.float32), freqs)
    return m.polar(m.ones_like(freqs), freqs)


def test_gradients_match_torch():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 5, 3, 8))
    w = rng.standard_normal((5, 4)) + 1j * rng.standard_normal((5, 4))
    for rd, cd in ((torch.float32, torch.complex64), (torch.float64, torch.complex128)):
        tx = torch.tensor(x, dtype=rd, requires_grad=True)
        tw = torch.tensor(w, dtype=cd, requires_grad=True)
        kx, kw = k_of(tx, True), k_of(tw, True)

        def loss(m, x, w):
            y = rotary(m, x, w)
            parts = m.view_as_complex(y.reshape(*y.shape[:-1], -1, 2))
            return (y * y).sum() + (parts.abs() * 0.5).sum() + parts.angle().sum() + (parts / (w[None, :, None] + 3)).real.sum()

        lt, lk = loss(torch, tx, tw), loss(kiln, kx, kw)
        lt.backward()
        lk.backward()
        tol = 1e-4 if rd is torch.float32 else 1e-9
        close(lk, lt, rtol=tol)
        close(kx.grad, tx.grad, rtol=tol, atol=tol)
        close(kw.grad, tw.grad, rtol=tol, atol=tol)
    # polar and complex take gradients through both parts
    a = torch.tensor([0.5, 2.0, 1.5], dtype=torch.float64, requires_grad=True)
    b = torch.tensor([0.1, -1.0, 3.0], dtype=torch.float64, requires_grad=True)
    ka, kb = k_of(a, True), k_of(b, True)
    for m, p, q in ((torch, a, b), (kiln, ka, kb)):
        z = m.polar(p, q) * m.complex(q, p)
        (z.real * 2 + z.imag.pow(2) + z.abs()).sum().backward()
    close(ka.grad, a.grad, rtol=1e-9)
    close(kb.grad, b.grad, rtol=1e-9)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_rotary_matches_eager(backend):
    rng = np.random.default_rng(3)
    freqs = freqs_cis(kiln, 8, 5)
    x = kiln.tensor(rng.standard_normal((2, 5, 3, 8)), dtype=kiln.float32)

    def step(x, freqs):
        y = rotary(kiln, x, freqs)
        return (y.tanh() * y).sum(), y

    kiln._dynamo.reset()
    compiled = kiln.compile(step, backend=backend, fullgraph=True)
    xe, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
    le, ye = step(xe, freqs)
    lc, yc = compiled(xc, freqs)
    le.backward()
    lc.backward()
    np.testing.assert_allclose(yc.detach().numpy(), ye.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(xc.grad.numpy(), xe.grad.numpy(), rtol=1e-5, atol=1e-6)
    # and against PyTorch
    ty = rotary(torch, torch.tensor(x.numpy()), freqs_cis(torch, 8, 5))
    np.testing.assert_allclose(ye.detach().numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_complex_arithmetic(backend):
    a = kiln.tensor([[1 + 2j, 3 - 1j], [0.5j, -2 + 0j]])
    b = kiln.tensor([2.0, -1.0])

    def f(a, b):
        z = a * b + a.conj() * 1j
        return z.abs(), z.real + z.imag, kiln.view_as_real(z / (a + 1))

    kiln._dynamo.reset()
    for e, c in zip(f(a, b), kiln.compile(f, backend=backend, fullgraph=True)(a, b)):
        assert e.dtype == c.dtype and e.shape == c.shape
        np.testing.assert_allclose(c.numpy(), e.numpy(), rtol=1e-6)


@pytest.mark.parametrize("name", ["complex64", "complex128"])
def test_setitem_and_fill_keep_the_imaginary_part(name):
    """x[i] = 1+2j makes a 0-d complex value and fills with it (fill_.Tensor): the imaginary part
    was dropped (a double conversion), found by the CUDA fill tests."""
    for key in [(slice(None), slice(1, None, 2)), 0, (1, 2)]:
        k = kiln.zeros(2, 3, dtype=getattr(kiln, name))
        t = torch.zeros(2, 3, dtype=getattr(torch, name))
        k[key] = 1 + 2j
        t[key] = 1 + 2j
        np.testing.assert_array_equal(k.numpy(), t.numpy())
    k = kiln.zeros(4, dtype=getattr(kiln, name)).fill_(kiln.tensor(-1.5 + 0.25j))
    t = torch.zeros(4, dtype=getattr(torch, name)).fill_(torch.tensor(-1.5 + 0.25j))
    np.testing.assert_array_equal(k.numpy(), t.numpy())


@pytest.mark.parametrize("kd,td", DTYPES)
def test_random_factories(kd, td):
    """rand/randn/normal_ of a complex dtype sample (real, imag) pairs as reals, as PyTorch's: randn
    has E|z|^2 = 1 (each part's variance 1/2), rand's parts are uniform in [0, 1)."""
    kiln.manual_seed(0)
    z = kiln.randn(20000, dtype=kd)
    assert z.dtype == kd and z.shape == (20000,)
    assert abs(float(z.abs().pow(2).mean()) - 1) < 0.05
    assert abs(float(z.real.var()) - 0.5) < 0.03 and abs(float(z.imag.var()) - 0.5) < 0.03
    u = kiln.rand(20000, dtype=kd)
    assert 0 <= float(u.real.min()) and float(u.imag.max()) < 1 and abs(float(u.imag.mean()) - 0.5) < 0.02
    n = kiln.empty(20000, dtype=kd).normal_(2, 3)
    assert abs(float(n.real.mean()) - 2) < 0.1 and abs(float(n.imag.std()) - 3 / 2 ** 0.5) < 0.1
    assert str(torch.randn(3, dtype=td).dtype).split(".")[1] == str(kd).split(".")[1]


def test_norms_of_complex_tensors():
    """vector_norm, matrix_norm and Tensor.norm of complex input are norms of the moduli (real results)
    with abs's gradient, as PyTorch's."""
    t = torch.randn(6, 5, dtype=torch.complex64)
    cases = [lambda m, x: m.linalg.vector_norm(x), lambda m, x: m.linalg.vector_norm(x, 3, dim=0),
             lambda m, x: m.linalg.vector_norm(x, float("inf"), dim=1, keepdim=True),
             lambda m, x: m.linalg.matrix_norm(x), lambda m, x: m.linalg.norm(x, 1), lambda m, x: x.norm(),
             lambda m, x: x.norm(p=1, dim=1)]
    for f in cases:
        tt, kt = t.clone().requires_grad_(), k_of(t, True)
        want, got = f(torch, tt), f(kiln, kt)
        close(got, want)
        want.sum().backward()
        got.sum().backward()
        close(kt.grad, tt.grad)
