"""Complex arithmetic on CUDA (tensor/ops/complex_cuda.cc, Note [Complex on CUDA]: each result as two
real kernels over the (real, imag) halves) against kiln's CPU complex kernels: +, -, *, / with
tensors, real tensors and Python numbers, alpha, broadcasting, in place (the result overlapping an
operand), division's extreme ranges, abs/neg/reciprocal, sums and means, and a llama-style rotary
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
