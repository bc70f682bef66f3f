"""Complex arithmetic on CUDA (tensor/ops/complex_cuda.cc, Note [Complex on CUDA]: each result as two
real kernels over the (real, imag) halves) against kiln's CPU complex kernels: +, -, *, / with
tensors, real tensors and Python numbers, alpha, broadcasting, in place (the result overlapping an
operand), division's extreme ranges, abs/neg/reciprocal, the transcendental functions (exp, log,
sqrt, rsqrt, sigmoid, tanh, sin, cos, tan, sinh, cosh) and predicates, ==/!=, where/masked_fill,
tril/triu, index_select/flip, complex randn, sums and means, norms, and a llama-style rotary
embedding (polar, view_as_complex, a complex product, view_as_real) with its gradient."""

import pytest

import kiln

from cuda_util import close, host, needs_kernels

pytestmark = needs_kernels
TOL = {"float32": 1e-6, "float64": 1e-14}


def complex_host(name, shape, seed, scale=1.0):
    return kiln.complex(host(name, shape, seed) * scale, host(name, shape, seed + 50) * scale)


@pytest.mark.parametrize("name", ["float32", "float64"])
def test_binary_ops(name):
    tol = TOL[name] * 10
    z, w = complex_host(name, (5, 7), 1), complex_host(name, (7,), 2)
    r = host(name, (5, 1), 3)
    cases = [("add", lambda a, b: a + b), ("sub", lambda a, b: a - b), ("mul", lambda a, b: a * b),
             ("div", lambda a, b: a / b), ("add alpha", lambda a, b: kiln.add(a, b, alpha=-2.5)),
             ("sub complex alpha", lambda a, b: kiln.sub(a, b, alpha=1 - 2j))]
    for label, fn in cases:
        close(fn(z.cuda(), w.cuda()), fn(z, w), tol, label)
        close(fn(z.cuda(), r.cuda()), fn(z, r), tol, (label, "real operand"))
        close(fn(r.cuda(), z.cuda()), fn(r, z), tol, (label, "real first"))
    for label, fn in (("* number", lambda a: a * (1.5 - 2j)), ("/ number", lambda a: a / 3),
                      ("+ number", lambda a: a + 2j), ("rsub", lambda a: 1 - a)):
        close(fn(z.cuda()), fn(z), tol, label)
    # in place: the result is an operand, read by both halves' kernels
    for label, op in (("mul_", "mul_"), ("div_", "div_"), ("add_", "add_")):
        a_g, a_c = z.cuda(), z.clone()
        getattr(a_g, op)(w.cuda())
        getattr(a_c, op)(w)
        close(a_g, a_c, tol, label)
    s_g, s_c = z.cuda(), z.clone()
    s_g.mul_(s_g)
    s_c.mul_(s_c)
    close(s_g, s_c, tol, "z *= z")
    # a transposed operand
    close(z.t().cuda() * z.t().cuda(), z.t() * z.t(), tol, "strided")


def test_division_ranges_and_unary_ops():
    big = kiln.tensor([1e30 + 1e30j, 1e-30 + 3e-30j, 3.0 + 0j, 0j, 1 + 0j], dtype=kiln.complex64)
    den = kiln.tensor([1e30 + 2e30j, 1e-30 - 1e-30j, 0j, 0j, 1e-20 + 1e20j], dtype=kiln.complex64)
    close(big.cuda() / den.cuda(), big / den, 1e-6, "Smith's division")
    z = complex_host("float64", (4, 6), 4)
    close(z.cuda().abs(), z.abs(), 1e-14, "abs")
    close(-z.cuda(), -z, 0, "neg")
    close(z.cuda().reciprocal(), z.reciprocal(), 1e-14, "reciprocal")
    huge = kiln.tensor([3e38 + 3e38j], dtype=kiln.complex64)
    close(huge.cuda().abs(), huge.abs(), 1e-6, "abs without overflow")


def rotary(x, end, dim):
    d = x.device
    freqs = 1.0 / (10000.0 ** (kiln.arange(0, dim, 2, device=d)[: (dim // 2)].float() / dim))
    freqs = kiln.outer(kiln.arange(end, device=d), freqs).float()
    freqs_cis = kiln.polar(kiln.ones_like(freqs), freqs).view(1, end, 1, dim // 2)
    x_ = kiln.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return kiln.view_as_real(x_ * freqs_cis).flatten(3).type_as(x)


def test_rotary_embedding_forward_and_backward():
    x = host("float32", (2, 10, 4, 16), 5)
    g = host("float32", (2, 10, 4, 16), 6)
    xg, xc = x.cuda().requires_grad_(), x.clone().requires_grad_()
    yg, yc = rotary(xg, 10, 16), rotary(xc, 10, 16)
    close(yg, yc, 1e-5, "rope")
    yg.backward(g.cuda())
    yc.backward(g)
    close(xg.grad, xc.grad, 1e-5, "rope grad")


@pytest.mark.parametrize("name", ["float32", "float64"])
def test_sums_and_broadcast_gradients(name):
    tol = TOL[name] * 100
    z = complex_host(name, (6, 300), 7)
    for label, fn in (("sum", lambda t: t.sum()), ("sum(1)", lambda t: t.sum(1)),
                      ("sum(0, keepdim)", lambda t: t.sum(0, keepdim=True)), ("mean(1)", lambda t: t.mean(1)),
                      ("transposed", lambda t: t.t().sum(1))):
        close(fn(z.cuda()), fn(z), tol, label)
    # a broadcast complex operand's gradient is summed back to its shape
    w = complex_host(name, (300,), 8)
    wg, wc = w.cuda().requires_grad_(), w.clone().requires_grad_()
    kiln.view_as_real(z.cuda() * wg).pow(2).sum().backward()
    kiln.view_as_real(z * wc).pow(2).sum().backward()
    close(wg.grad, wc.grad, tol, "broadcast grad")


UNARY = ["exp", "log", "sqrt", "rsqrt", "sigmoid", "tanh", "sin", "cos", "tan", "sinh", "cosh"]


@pytest.mark.parametrize("name", ["float32", "float64"])
def test_transcendental_functions(name):
    """Each against the CPU's std::complex functions: ordinary values (plain and transposed), the axes,
    zeros of either sign, large real parts (tanh's cut-over, exp's overflow) and non-finite values."""
    tol = 1e-5 if name == "float32" else 1e-12
    z = complex_host(name, (6, 9), 7, 2.0)
    dtype = kiln.complex64 if name == "float32" else kiln.complex128
    special = kiln.tensor([0j, complex(-0.0, 0.0), complex(0.0, -0.0), 2 + 0j, -2 + 0j, 3j, -3j, 1e-20 + 1e-20j,
                           30 + 1j, -30 + 2j, 60 - 1j, 400 + 0.5j, 1 + 30j, complex("inf"), complex("nan"),
                           complex(1, float("inf"))], dtype=dtype)
    for f in UNARY:
        close(getattr(z.cuda(), f)(), getattr(z, f)(), tol, f)
        close(getattr(z.t().cuda(), f)(), getattr(z.t(), f)(), tol, (f, "transposed"))
        got, want = getattr(special.cuda(), f)(), getattr(special, f)()
        finite = want.isfinite() & special.isfinite()  # C's rules for non-finite values are not all followed
        close(got[finite.cuda()], want[finite], tol, (f, "special values"))
    w = z.cuda()
    w.exp_()
    close(w, z.exp(), tol, "exp_ in place")


def test_predicates_and_equality():
    nan, inf = float("nan"), float("inf")
    z = kiln.tensor([0j, 1 + 0j, complex(nan, 0), complex(0, nan), complex(inf, 1), complex(1, -inf), 2 - 3j],
                    dtype=kiln.complex64)
    for f in ("isnan", "isinf", "isfinite", "logical_not"):
        close(getattr(z.cuda(), f)(), getattr(z, f)(), 0, f)
    w = kiln.tensor([0j, 1 + 1j, complex(nan, 0), complex(0, nan), complex(inf, 1), complex(1, -inf), 2 - 3j],
                    dtype=kiln.complex128)
    close(z.cuda() == w.cuda(), z == w, 0, "eq, mixed precision")
    close(z.cuda() != w.cuda(), z != w, 0, "ne")
    close(z.cuda() == (2 - 3j), z == (2 - 3j), 0, "eq number")
    close(z.cuda() == kiln.ones(7).cuda(), z == kiln.ones(7), 0, "eq real tensor")
    a = complex_host("float32", (4, 5), 8)
    assert kiln.allclose(a.cuda(), a.cuda() + 1e-9) and not kiln.equal(a.cuda(), a.cuda() + 1)


def test_where_masked_fill_tril_and_index_select():
    z, w = complex_host("float32", (5, 6), 9), complex_host("float64", (6,), 10)
    mask = host("float32", (5, 6), 11) > 0
    close(kiln.where(mask.cuda(), z.cuda(), w.cuda()), kiln.where(mask, z, w), 0, "where")
    close(kiln.where(mask.cuda(), z.cuda(), 0.5), kiln.where(mask, z, 0.5), 0, "where with a number")
    close(z.cuda().masked_fill(mask.cuda(), 2 - 1j), z.masked_fill(mask, 2 - 1j), 0, "masked_fill")
    m = z.cuda()
    m.masked_fill_(mask[0].cuda(), 0)
    close(m, z.masked_fill(mask[0], 0), 0, "masked_fill_ broadcast mask")
    close(z.cuda().sgn(), z.sgn(), 1e-6, "sgn")
    for k in (-1, 0, 2):
        close(z.cuda().tril(k), z.tril(k), 0, ("tril", k))
        close(z.t().cuda().triu(k), z.t().triu(k), 0, ("triu transposed", k))
    idx = kiln.tensor([4, 0, 2, 2])
    close(z.cuda().index_select(0, idx.cuda()), z.index_select(0, idx), 0, "index_select rows")
    close(z.cuda().index_select(1, idx.cuda()), z.index_select(1, idx), 0, "index_select columns")
    close(z.cuda().flip(0, 1), z.flip(0, 1), 0, "flip")
    close(z[2, 3].cuda().index_select(0, kiln.tensor([0]).cuda()), z[2, 3].index_select(0, kiln.tensor([0])), 0,
          "0-d")


def test_complex_randn_and_norms():
    """randn of a complex dtype draws (real, imag) pairs with variance 1/2 each: the CPU's numbers for
    one seed. Norms of complex tensors are norms of the moduli, with abs's gradient."""
    for dtype in (kiln.complex64, kiln.complex128):
        g = kiln.Generator(device="cuda").manual_seed(3)
        c = kiln.Generator().manual_seed(3)
        got, want = kiln.randn(1000, 3, dtype=dtype, generator=g, device="cuda"), kiln.randn(1000, 3, dtype=dtype, generator=c)
        close(got, want, 1e-6, ("randn", dtype))
        assert abs(float(want.abs().pow(2).mean()) - 1) < 0.1
    z = complex_host("float32", (7, 5), 12)
    zg, zc = z.cuda().requires_grad_(), z.clone().requires_grad_()
    for label, f in (("vector_norm", lambda t: kiln.linalg.vector_norm(t)), ("norm(1, dim)", lambda t: t.norm(1, dim=1)),
                     ("matrix_norm", lambda t: kiln.linalg.matrix_norm(t))):
        close(f(zg), f(zc), 1e-5, label)
        gg, = kiln.autograd.grad(f(zg).sum(), zg)
        gc, = kiln.autograd.grad(f(zc).sum(), zc)
        close(gg, gc, 1e-5, (label, "grad"))
