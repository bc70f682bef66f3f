"""Eager pointwise ops on CUDA: the generated kernels (codegen/nvptx_codegen.h through
tensor/cuda/pointwise.h) against kiln's CPU results (which match PyTorch's), and against PyTorch's
CUDA results where PyTorch has CUDA (the H200): every binary and unary op of the pointwise tables in
every dtype they take, the layouts a kernel distinguishes (contiguous with vector accesses, a
misaligned view, broadcasting, transposes, 0-d and Python-number operands), in-place and out=
variants, device-side conversions and fills, sizes around the vector width, the kernel cache, and
the errors PyTorch raises."""

import os
import subprocess
import sys

import numpy as np
import pytest

import kiln

from cuda_util import ALL, FLOATS, INTS, host, needs_kernels

pytestmark = needs_kernels

try:
    import torch

    TORCH_CUDA = torch.cuda.is_available()
except ImportError:
    torch, TORCH_CUDA = None, False

# relative tolerance of math that is not correctly rounded on both sides (libdevice against libm)
MATH_TOL = {"float32": 4e-6, "float64": 1e-13, "float16": 1e-3, "bfloat16": 8e-3}


def close(got, want, tol=None, what=""):
    """got (CUDA) against want (CPU): same dtype and shape; equal (NaNs agree, -0 equals 0 only
    within a tolerance), or within tol relative to max(1, |want|); names the first mismatch."""
    assert got.device.type == "cuda", what
    g = got.cpu()
    assert g.dtype == want.dtype and tuple(g.shape) == tuple(want.shape), (what, g.dtype, want.dtype, g.shape)
    a, b = g.double().numpy().ravel(), want.double().numpy().ravel()
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    if tol is None or not want.dtype.is_floating_point:
        same &= (np.signbit(a) == np.signbit(b)) | np.isnan(a)  # -0 is not 0; a NaN's sign is no result
    else:
        finite = np.isfinite(a) & np.isfinite(b)
        err = np.zeros_like(a)
        err[finite] = np.abs(a[finite] - b[finite]) / np.maximum(1.0, np.abs(b[finite]))
        same |= finite & (err <= tol)
    if not same.all():
        i = int(np.argmin(same))
        x = want.reshape(-1)[i] if want.numel() else None
        raise AssertionError(f"{what}: {int((~same).sum())} of {a.size} differ; first at flat index {i}: "
                             f"cuda {a[i]!r}, cpu {b[i]!r} ({x})")


# name: (ops callable, exact, dtypes it takes)
BINARY = {
    "add": (kiln.add, True, ALL), "sub": (kiln.sub, True, FLOATS + INTS), "mul": (kiln.mul, True, ALL),
    "div": (kiln.div, True, ALL), "remainder": (kiln.remainder, True, FLOATS + INTS),
    "fmod": (kiln.fmod, True, FLOATS + INTS), "floor_divide": (kiln.floor_divide, True, FLOATS + INTS),
    "maximum": (kiln.maximum, True, ALL), "minimum": (kiln.minimum, True, ALL),
    "fmax": (kiln.fmax, True, ALL), "fmin": (kiln.fmin, True, ALL),
    "eq": (kiln.eq, True, ALL), "ne": (kiln.ne, True, ALL), "lt": (kiln.lt, True, ALL),
    "le": (kiln.le, True, ALL), "gt": (kiln.gt, True, ALL), "ge": (kiln.ge, True, ALL),
    "logical_and": (kiln.logical_and, True, ALL), "logical_or": (kiln.logical_or, True, ALL),
    "logical_xor": (kiln.logical_xor, True, ALL),
    "bitwise_and": (kiln.bitwise_and, True, INTS + ["bool"]), "bitwise_or": (kiln.bitwise_or, True, INTS + ["bool"]),
    "bitwise_xor": (kiln.bitwise_xor, True, INTS + ["bool"]),
    "atan2": (kiln.atan2, False, FLOATS), "hypot": (kiln.hypot, False, FLOATS),
    "copysign": (kiln.copysign, True, FLOATS), "xlogy": (kiln.xlogy, False, FLOATS),
    "pow": (kiln.pow, False, FLOATS + INTS),
    "div_trunc": (lambda a, b: kiln.div(a, b, rounding_mode="trunc"), True, FLOATS + INTS),
    "div_floor": (lambda a, b: kiln.div(a, b, rounding_mode="floor"), True, FLOATS + INTS),
    "bitwise_left_shift": (kiln.bitwise_left_shift, True, ["int64", "int32", "int16", "int8", "uint8"]),
    "bitwise_right_shift": (kiln.bitwise_right_shift, True, ["int64", "int32", "int16", "int8", "uint8"]),
}
CASES = [(op, dt) for op, (_, _, dts) in BINARY.items() for dt in dts]


def operands(op, name, shape, seed):
    a, b = host(name, shape, seed), host(name, shape, seed + 1)
    if op in ("div", "remainder", "fmod", "floor_divide", "div_trunc", "div_floor") and name in INTS:
        b = kiln.where(b == 0, kiln.ones_like(b), b)  # integer division by zero is an error on the CPU
    if op == "pow" and name in INTS:
        b = b.abs() % 4
    if op in ("bitwise_left_shift", "bitwise_right_shift"):
        b = b.abs() % 9
    if op in ("xlogy", "pow") and name in FLOATS:
        b = b.abs() + 0.25 if op == "xlogy" else b
        a = a.abs() if op == "pow" else a
    return a, b


@pytest.mark.parametrize("op,name", CASES)
def test_binary_ops_every_dtype(op, name):
    fn, exact, _ = BINARY[op]
    for shape in [(1,), (7,), (4, 129), (1000, 33)]:  # tails, one vector, many blocks
        a, b = operands(op, name, shape, seed=len(op) + shape[-1])
        want = fn(a, b)
        close(fn(a.cuda(), b.cuda()), want, None if exact else MATH_TOL.get(name), (op, name, shape))


@pytest.mark.parametrize("op", ["add", "mul", "sub", "div", "maximum", "lt", "pow", "atan2", "fmod", "remainder"])
def test_layouts(op):
    fn, exact, _ = BINARY[op]
    tol = None if exact else MATH_TOL["float32"]
    a, b = operands(op, "float32", (64, 48), seed=3)
    ca, cb = a.cuda(), b.cuda()
    row = b[0]  # broadcast along rows
    col = b[:, :1]  # broadcast along columns
    cases = [
        (ca.t(), cb.t(), a.t(), b.t()),  # both transposed
        (ca, cb.t().contiguous().t(), a, b.t().contiguous().t()),  # one column-major
        (ca[:, 1:], cb[:, 1:], a[:, 1:], b[:, 1:]),  # rows that start unaligned
        (ca.reshape(-1)[1:], cb.reshape(-1)[:-1], a.reshape(-1)[1:], b.reshape(-1)[:-1]),  # misaligned, contiguous
        (ca, row.cuda(), a, row), (ca, col.cuda(), a, col),
        (ca[::2, ::3], cb[::2, ::3], a[::2, ::3], b[::2, ::3]),
        (ca.unsqueeze(0).expand(3, 64, 48), cb, a.unsqueeze(0).expand(3, 64, 48), b),
    ]
    for x, y, hx, hy in cases:
        got, want = fn(x, y), fn(hx, hy)
        close(got, want, tol, (op, tuple(x.shape), x.stride()))
        assert got.stride() == want.stride(), (op, got.stride(), want.stride())  # the CPU's output layout


def test_numbers_and_zero_dim_operands():
    x = host("float32", (33, 17), seed=5)
    c = x.cuda()
    close(c + 1.5, x + 1.5)
    close(c * 2, x * 2)
    close(2.5 - c, 2.5 - x)
    close(c / 3, x / 3)
    close(c ** 2, x ** 2)
    close(c ** 0.5, x ** 0.5)  # sqrt's edges, as the CPU's fast path
    close(c.abs() ** 1.7, x.abs() ** 1.7, MATH_TOL["float32"])
    close(c + kiln.tensor(2.0), x + kiln.tensor(2.0))  # a 0-d CPU tensor joins a CUDA one
    close(kiln.tensor(2.0) * c, kiln.tensor(2.0) * x)
    close(c + kiln.tensor(2.0).cuda(), x + kiln.tensor(2.0))
    close(kiln.add(c, c, alpha=0.5), kiln.add(x, x, alpha=0.5))
    close(kiln.sub(c, c, alpha=-3), kiln.sub(x, x, alpha=-3))
    # numbers meet 16-bit floats in float, not rounded to the 16-bit type first (PyTorch's CUDA kernels
    # read them with original_scalar_value<opmath_t>; its CPU kernels round them first for add and sub)
    for name in ["bfloat16", "float16"]:
        h = host(name, (100,), seed=6)
        close(h.cuda() * 0.1, (h.float() * 0.1).to(h.dtype))
        close(h.cuda() + 0.1, (h.float() + 0.1).to(h.dtype))
    i = host("int32", (50,), seed=7)
    close(i.cuda() + 3, i + 3)
    close(i.cuda() * 2.5, i * 2.5)  # promotes to float
    close(i.cuda() / 4, i / 4)
    close(i.cuda() // 3, i // 3)
    close(i.cuda() % -3, i % -3)


def test_inplace_and_out_variants():
    x, y = host("float32", (40, 30), seed=8), host("float32", (40, 30), seed=9)
    c = x.cuda()
    c.add_(y.cuda(), alpha=2)
    close(c, x + 2 * y)
    c.mul_(0.5).sub_(1)
    close(c, (x + 2 * y) * 0.5 - 1)
    i = host("int64", (40, 30), seed=10).cuda()
    i.add_(3)
    close(i, host("int64", (40, 30), seed=10) + 3)
    out = kiln.empty(40, 30, device="cuda")
    kiln.mul(x.cuda(), y.cuda(), out=out)
    close(out, x * y)
    # a strided destination: only its elements change
    d = kiln.zeros(40, 60, device="cuda")
    d[:, ::2].copy_(x.cuda()).add_(1)
    want = kiln.zeros(40, 60)
    want[:, ::2] = x + 1
    close(d, want)
    # an out= of another (castable) dtype, and one that must grow
    o64 = kiln.empty(40, 30, dtype=kiln.float64, device="cuda")
    kiln.add(x.cuda(), y.cuda(), out=o64)
    close(o64, (x + y).double())
    grow = kiln.empty(0, device="cuda")
    kiln.sub(x.cuda(), y.cuda(), out=grow)
    close(grow, x - y)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        i.add_(1.5)


UNARY_EXACT = ["neg", "abs", "sign", "floor", "ceil", "round", "trunc", "frac", "relu", "logical_not",
               "isnan", "isinf", "isfinite", "signbit", "reciprocal", "sqrt", "rsqrt"]
UNARY_MATH = ["exp", "exp2", "log", "log2", "log10", "log1p", "expm1", "sigmoid", "tanh", "sin", "cos", "tan",
              "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc", "lgamma", "silu", "mish"]
DOMAIN = {"log": (0.01, 5), "log2": (0.01, 5), "log10": (0.01, 5), "log1p": (-0.9, 5), "sqrt": (0, 9), "rsqrt": (0.01, 9),
          "asin": (-1, 1), "acos": (-1, 1), "atanh": (-0.99, 0.99), "acosh": (1, 5), "lgamma": (0.1, 8),
          "reciprocal": (0.1, 4)}


def unary(name):
    return getattr(kiln.nn.functional, name) if name in ("silu", "mish") else getattr(kiln, name)


@pytest.mark.parametrize("op", UNARY_EXACT + UNARY_MATH)
@pytest.mark.parametrize("name", FLOATS)
def test_unary_float_ops(op, name):
    lo, hi = DOMAIN.get(op, (-4, 4))
    x = host(name, (3001,), seed=11, low=lo, high=hi)
    if op in UNARY_EXACT:
        x[:4] = kiln.tensor([float("nan"), float("inf"), -0.0, 2.5])  # edges: NaN, inf, -0, half to even
    got, want = unary(op)(x.cuda()), unary(op)(x)
    tol = None if op in UNARY_EXACT and op not in ("sqrt", "rsqrt", "reciprocal") else MATH_TOL[name] * 4
    if op == "relu":
        tol = 0.0  # relu(-0.0): -0.0 on PyTorch's CPU, +0.0 on its GPU (test_signed_zeros_and_halves_as_pytorch_cuda)
    close(got, want, tol, (op, name))


@pytest.mark.parametrize("name", INTS + ["bool"])
def test_unary_integer_ops(name):
    x = host(name, (500,), seed=12)
    ops = ["abs", "sign", "logical_not", "isnan", "isinf", "isfinite", "signbit", "bitwise_not", "floor", "trunc",
           "neg", "relu"]
    for op in ops:
        try:
            want = getattr(kiln, op)(x)
        except (RuntimeError, NotImplementedError) as e:  # bool refuses some: CUDA must refuse them the same way
            with pytest.raises(type(e), match=str(e).split(":")[-1].strip()[:40].replace("(", ".").replace(")", ".")):
                getattr(kiln, op)(x.cuda())
            continue
        close(getattr(kiln, op)(x.cuda()), want, None, (op, name))
    close(kiln.exp(x.cuda()), kiln.exp(x), MATH_TOL["float32"])  # integers compute in the default float dtype
    close(kiln.sqrt(x.cuda().abs() if name != "bool" else x.cuda()), kiln.sqrt(x.abs() if name != "bool" else x),
          MATH_TOL["float32"])


def test_unary_inplace_and_out():
    x = host("float32", (64, 64), seed=13)
    c = x.cuda()
    c.exp_().neg_()
    close(c, -x.exp(), MATH_TOL["float32"])
    out = kiln.empty(64, 64, device="cuda")
    kiln.tanh(x.cuda().t(), out=out)
    close(out, x.t().tanh(), MATH_TOL["float32"])
    with pytest.raises(NotImplementedError, match="erfinv"):
        kiln.erfinv(x.cuda())  # no CUDA kernel yet: PyTorch's error for a missing backend kernel


@pytest.mark.parametrize("src", ALL)
def test_conversions_on_the_device(src):
    x = host(src, (37, 29), seed=14, low=-300, high=300)
    c = x.cuda()
    for dst in ALL:
        dt = getattr(kiln, dst)
        if src in FLOATS and dst in ("uint8", "int8", "int16"):
            continue  # out-of-range float to a narrow integer is undefined behaviour in C++, on both sides
        close(c.to(dt), x.to(dt), None, (src, dst))
        close(c.t().to(dt), x.t().to(dt), None, (src, dst, "transposed"))
        close(c[:, ::2].to(dt), x[:, ::2].to(dt), None, (src, dst, "strided"))


def test_fills_and_broadcasting_copies_on_the_device():
    for name in ALL:
        dt = getattr(kiln, name)
        y = kiln.zeros(8, 10, dtype=dt, device="cuda")
        y[:, 1::3].fill_(1)
        want = kiln.zeros(8, 10, dtype=dt)
        want[:, 1::3] = 1
        close(y, want, None, name)
        row = host(name, (10,), seed=15)
        y.copy_(row.cuda())  # broadcast on the device
        close(y, row.expand(8, 10).contiguous(), None, name)
        y.copy_(kiln.tensor(3).to(dt))  # a 0-d CPU source
        close(y, kiln.full((8, 10), 3, dtype=dt), None, name)


@pytest.mark.parametrize("n", [0, 1, 3, 4, 5, 127, 128, 129, 511, 512, 513, 4097, 1 << 20])
def test_sizes_around_the_vector_and_block(n):
    x, y = host("float32", (n,), seed=16), host("float32", (n,), seed=17)
    close(x.cuda() * y.cuda() + 1, x * y + 1)
    h = host("bfloat16", (n,), seed=18)
    close(h.cuda() * 2 - 1, h * 2 - 1)
    b = host("bool", (n,), seed=19)
    close(~b.cuda(), ~b)


def test_kernels_are_compiled_once_per_expression_and_layout(tmp_path):
    # in a fresh process with an empty disk cache: no kernel of another test is there already
    code = ("import kiln; s = kiln._C._cuda_pointwise_cache_stats; x = kiln.ones(1000, device='cuda'); "
            "x * 3.25 + 7; before = s()\n"  # warm: mul and add kernels exist
            "for v in [1.0, 2.0, 3.5]: x * v + v\n"  # numbers are parameters: no new kernels
            "kiln.ones(77777, device='cuda') * 5.0; after = s()\n"  # other sizes: the same kernels
            "x[::2] * 2.0; print([before, after, s()])")  # a strided layout is another kernel
    env = dict(os.environ, KILN_CUDA_CACHE_DIR=str(tmp_path))
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    before, after, last = eval(run.stdout)
    assert before["disk_hits"] == after["disk_hits"] == last["disk_hits"] == 0, run.stdout
    assert after["compiled"] == before["compiled"], (before, after)
    assert after["hits"] >= before["hits"] + 7
    assert last["compiled"] == after["compiled"] + 1, (after, last)


def test_a_later_process_loads_the_kernels_from_disk(tmp_path):
    code = ("import kiln; x = kiln.arange(10, dtype=kiln.float32, device='cuda'); "
            "y = (x * 3 + 1).exp().sin(); print(y.cpu().tolist()); print(kiln._C._cuda_pointwise_cache_stats())")
    env = dict(os.environ, KILN_CUDA_CACHE_DIR=str(tmp_path))
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
            for _ in range(2)]
    first, second = (r.stdout.splitlines() for r in runs)
    assert first[0] == second[0]  # the same values
    s1, s2 = (eval(r[1]) for r in (first, second))
    assert s1["compiled"] >= 4 and s1["disk_hits"] == 0, s1  # mul, add, exp, sin
    assert s2["compiled"] == 0 and s2["disk_hits"] == s1["compiled"], s2
    assert len(list(tmp_path.glob("*.cubin"))) == s1["compiled"]


def test_errors():
    x = kiln.ones(3, device="cuda")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device, but found at least two "
                                           "devices, cuda:0 and cpu!"):
        x + kiln.ones(3)
    with pytest.raises(RuntimeError, match="The size of tensor a \\(3\\) must match the size of tensor b \\(4\\)"):
        x + kiln.ones(4, device="cuda")
    with pytest.raises(NotImplementedError, match="not implemented for 'ComplexFloat'"):
        kiln.ones(2, dtype=kiln.complex64, device="cuda").log1p()  # as on the CPU: complex log1p has no kernel
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with two bool tensors is not supported"):
        kiln.ones(2, dtype=kiln.bool, device="cuda") - kiln.ones(2, dtype=kiln.bool, device="cuda")


@pytest.mark.skipif(not TORCH_CUDA, reason="PyTorch with CUDA is the peer on the H200 only")
@pytest.mark.parametrize("name", FLOATS)
def test_against_pytorch_cuda(name):
    rng = np.random.default_rng(20)
    a, b = rng.uniform(-3, 3, (257, 129)), rng.uniform(0.5, 3, (257, 129))
    tdt, kdt = getattr(torch, name), getattr(kiln, name)
    ta, tb = torch.tensor(a).to(tdt).cuda(), torch.tensor(b).to(tdt).cuda()
    ka, kb = kiln.tensor(a).to(kdt).cuda(), kiln.tensor(b).to(kdt).cuda()
    pairs = [
        (lambda m, x, y: x * y + 1, True), (lambda m, x, y: x / y - x, True), (lambda m, x, y: m.maximum(x, y), True),
        (lambda m, x, y: x.exp(), False), (lambda m, x, y: y.log(), False), (lambda m, x, y: x.tanh(), False),
        (lambda m, x, y: x.sigmoid(), False), (lambda m, x, y: m.nn.functional.silu(x), False),
        (lambda m, x, y: x ** 2, True), (lambda m, x, y: y ** 0.5, True), (lambda m, x, y: x % y, False),
        (lambda m, x, y: m.atan2(x, y), False), (lambda m, x, y: x.sin() + y.cos(), False),
    ]
    for fn, exact in pairs:
        want = fn(torch, ta, tb).double().cpu().numpy()
        got = fn(kiln, ka, kb).double().cpu().numpy()
        tol = 0 if exact else MATH_TOL[name] * 4
        err = np.abs(got - want) / np.maximum(1.0, np.abs(want))
        assert err.max() <= tol, (name, err.max())


@pytest.mark.skipif(not TORCH_CUDA, reason="PyTorch with CUDA is the peer on the H200 only")
def test_signed_zeros_and_halves_as_pytorch_cuda():
    vals = [-0.0, 0.0, 2.5, -2.5, 0.5, -1.5, float("nan"), float("-inf"), 3.0]
    for name in FLOATS:
        t = torch.tensor(vals, dtype=getattr(torch, name), device="cuda")
        k = kiln.tensor(vals).to(getattr(kiln, name)).cuda()
        for op in ["relu", "round", "neg", "abs", "floor", "ceil", "trunc", "sign", "sqrt", "reciprocal"]:
            want = getattr(torch, op)(t).double().cpu().numpy()
            got = getattr(kiln, op)(k).double().cpu().numpy()
            same = ((got == want) & (np.signbit(got) == np.signbit(want))) | (np.isnan(got) & np.isnan(want))
            assert same.all(), (op, name, got, want)


@pytest.mark.parametrize("name", FLOATS + ["int64", "int32", "uint8"])
def test_clamp_lerp_addcmul_addcdiv(name):
    x, lo, hi = host(name, (33, 65), seed=21), host(name, (65,), seed=22), host(name, (33, 1), seed=23)
    c = x.cuda()
    close(c.clamp(-1, 2), x.clamp(-1, 2), None, name)
    close(c.clamp(min=0), x.clamp(min=0), None, name)
    close(c.clamp(max=1), x.clamp(max=1), None, name)
    close(kiln.clamp(c, lo.cuda(), hi.cuda()), kiln.clamp(x, lo, hi), None, name)
    close(c.clamp_min(1), x.clamp_min(1), None, name)
    y = c.clone()
    y.clamp_(-0.5 if name in FLOATS else 0, 1)
    close(y, x.clamp(-0.5 if name in FLOATS else 0, 1), None, name)
    if name in FLOATS:
        nan = x.clone()
        nan[0, :3] = float("nan")
        close(nan.cuda().clamp(-1, 1), nan.clamp(-1, 1), None, name)  # NaN stays
        e, w = host(name, (33, 65), seed=24), host(name, (33, 65), seed=25, low=-1, high=2)
        # PyTorch's CPU kernels round a number weight or value to a 16-bit self's dtype first; its
        # CUDA kernels read it in float: a few 16-bit ulps apart
        tol = {"float16": 4e-3, "bfloat16": 3e-2}.get(name, MATH_TOL[name])
        close(kiln.lerp(c, e.cuda(), 0.3), kiln.lerp(x, e, 0.3), tol, name)
        close(kiln.lerp(c, e.cuda(), 0.8), kiln.lerp(x, e, 0.8), tol, name)
        close(kiln.lerp(c, e.cuda(), w.cuda()), kiln.lerp(x, e, w), tol, name)
        d = host(name, (33, 65), seed=26, low=0.5, high=2)
        close(kiln.addcdiv(c, e.cuda(), d.cuda(), value=-0.5), kiln.addcdiv(x, e, d, value=-0.5), tol, name)
        z = c.clone()
        z.lerp_(e.cuda(), 0.1).addcdiv_(e.cuda(), d.cuda(), value=2)
        close(z, x.lerp(e, 0.1).addcdiv(e, d, value=2), tol, name)
    t1, t2 = host(name, (33, 65), seed=27), host(name, (65,), seed=28)
    tol = {"float16": 4e-3, "bfloat16": 3e-2}.get(name, MATH_TOL.get(name))
    close(kiln.addcmul(c, t1.cuda(), t2.cuda(), value=2), kiln.addcmul(x, t1, t2, value=2), tol, name)
    z = c.clone()
    z.addcmul_(t1.cuda(), t2.cuda())
    close(z, x.addcmul(t1, t2), tol, name)
