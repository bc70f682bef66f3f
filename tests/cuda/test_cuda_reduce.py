"""Eager reductions on CUDA: the generated reduction kernels (codegen/nvptx_reduce.h through
tensor/cuda/reduce.h) against kiln's CPU results (which match PyTorch's) and float64 references:
sum, mean, prod, amax/amin, max/min (all and with indices), argmax/argmin, any/all and
count_nonzero, in every dtype they take, over every dim set and layout class the launcher tells
apart (row reductions with vector loads, misaligned rows, column reductions, several reduced dims,
transposed and broadcast inputs), the sizes that split a reduction across blocks, NaN and tie
semantics, empty reductions, and the errors PyTorch raises."""

import numpy as np
import pytest

import kiln

try:
    import torch

    TORCH_CUDA = torch.cuda.is_available()
except ImportError:
    torch, TORCH_CUDA = None, False

from cuda_util import FLOATS, INTS, host, needs_kernels

pytestmark = needs_kernels
# relative error of a sum, against the sum of magnitudes: accumulation order differs between devices
SUM_TOL = {"float32": 2e-6, "float64": 1e-14, "float16": 2e-3, "bfloat16": 1.6e-2}


def exact(got, want, what):
    assert got.device.type == "cuda", what
    g = got.cpu()
    assert g.dtype == want.dtype and tuple(g.shape) == tuple(want.shape), (what, g.dtype, want.dtype, g.shape, want.shape)
    a, b = g.double().numpy().ravel(), want.double().numpy().ravel()
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    if not same.all():
        i = int(np.argmin(same))
        raise AssertionError(f"{what}: {int((~same).sum())} of {a.size} differ; first at {i}: cuda {a[i]!r}, cpu {b[i]!r}")


def summed(got, want, magnitude, tol, what):
    """got within tol * magnitude (the sum of |x| each output reduces) of want."""
    g = got.cpu()
    assert g.dtype == want.dtype and tuple(g.shape) == tuple(want.shape), (what, g.dtype, want.dtype, g.shape, want.shape)
    a, b, m = g.double().numpy().ravel(), want.double().numpy().ravel(), magnitude.double().numpy().ravel()
    bad = ~((np.abs(a - b) <= tol * np.maximum(m, 1e-30) + 1e-300) | (np.isnan(a) & np.isnan(b)))
    if bad.any():
        i = int(np.argmax(bad))
        raise AssertionError(f"{what}: {int(bad.sum())} of {a.size} differ; first at {i}: cuda {a[i]!r}, want {b[i]!r}, "
                             f"tolerance {tol * m[i]!r}")


SHAPES_DIMS = [
    ((1,), None), ((7,), None), ((1000,), None), ((3, 5, 7), None), ((3, 5, 7), 0), ((3, 5, 7), 1), ((3, 5, 7), 2),
    ((3, 5, 7), (0, 2)), ((64, 1000), 1), ((1000, 64), 0), ((1000, 64), 1), ((2, 3, 4, 5), (1, 3)),
    ((17, 1, 33), (0, 1)), ((4, 0, 3), 1), ((4, 0, 3), (0, 2)), ((129, 257), (0, 1)),
]


@pytest.mark.parametrize("name", FLOATS + INTS + ["bool"])
def test_sum_every_dtype_and_dim_set(name):
    for shape, dim in SHAPES_DIMS:
        x = host(name, shape, seed=len(shape) + sum(shape))
        for keepdim in (False, True):
            want = x.sum() if dim is None else x.sum(dim, keepdim=keepdim)
            got = x.cuda().sum() if dim is None else x.cuda().sum(dim, keepdim=keepdim)
            what = ("sum", name, shape, dim, keepdim)
            if name in FLOATS:
                mag = x.double().abs().sum() if dim is None else x.double().abs().sum(dim, keepdim=keepdim)
                summed(got, want, mag.to(want.dtype).double(), SUM_TOL[name], what)
            else:
                exact(got, want, what)
            if dim is None:
                break


@pytest.mark.parametrize("name", FLOATS)
def test_mean_and_dtype_argument(name):
    for shape, dim in SHAPES_DIMS:
        x = host(name, shape, seed=sum(shape))
        want = x.mean() if dim is None else x.mean(dim)
        got = x.cuda().mean() if dim is None else x.cuda().mean(dim)
        mag = (x.double().abs().mean() if dim is None else x.double().abs().mean(dim)).nan_to_num(0.0)
        summed(got, want, mag, SUM_TOL[name], ("mean", name, shape, dim))
    x = host("int32", (50, 70), seed=1)
    exact(x.cuda().sum(1, dtype=kiln.float64), x.sum(1, dtype=kiln.float64), "sum dtype=float64")
    y = host("bfloat16", (50, 70), seed=2)
    summed(y.cuda().sum(0, dtype=kiln.float32), y.sum(0, dtype=kiln.float32), y.float().abs().sum(0), 2e-6, "bf16 -> f32")


def test_layouts_and_splits():
    """Transposed, sliced, misaligned and broadcast inputs; sizes that split across blocks."""
    x = host("float32", (300, 500), seed=3)
    cx = x.cuda()
    cases = [
        (lambda t: t.t().sum(0), "transposed rows"), (lambda t: t.t().sum(1), "transposed columns"),
        (lambda t: t[:, 1:].sum(1), "misaligned rows"), (lambda t: t.reshape(-1)[3:].sum(), "misaligned flat"),
        (lambda t: t[::2, ::3].sum(1), "strided"), (lambda t: t[::2, ::3].sum(0), "strided columns"),
        (lambda t: t[0].expand(40, 500).sum(0), "broadcast input"), (lambda t: t.unsqueeze(1).expand(300, 4, 500).sum((0, 2)), "expanded middle"),
        (lambda t: t.reshape(30, 10, 500).permute(2, 0, 1).sum((1, 2)), "permuted"),
    ]
    for fn, what in cases:
        want = fn(x)
        summed(fn(cx), want, fn(x.abs()), 2e-6, what)
    for shape, dim in [(((1 << 24) + 5,), None), (((1 << 22),), 0), ((4, 1 << 20), 1), ((1 << 18, 3), 0), ((100000, 33), 0),
                       ((8192, 1024), 0)]:
        x = host("float32", shape, seed=7)
        cx = x.cuda()
        want, got = (x.sum(), cx.sum()) if dim is None else (x.sum(dim), cx.sum(dim))
        mag = x.abs().sum() if dim is None else x.abs().sum(dim)
        summed(got, want, mag, 4e-6, ("split", shape, dim))
        a_want, a_got = (x.argmax(), cx.argmax()) if dim is None else (x.argmax(dim), cx.argmax(dim))
        exact(a_got, a_want, ("argmax split", shape, dim))


@pytest.mark.parametrize("name", FLOATS + INTS + ["bool"])
def test_min_max_and_arg_every_dtype(name):
    for shape, dim in SHAPES_DIMS:
        if 0 in shape:
            continue
        x = host(name, shape, seed=11 + sum(shape), low=-2, high=2)
        cx = x.cuda()
        exact(cx.amax(), x.amax(), ("amax", name, shape))
        exact(cx.amin(), x.amin(), ("amin", name, shape))
        exact(cx.max(), x.max(), ("max", name, shape))
        exact(cx.min(), x.min(), ("min", name, shape))
        if name != "bool":
            exact(cx.argmax(), x.argmax(), ("argmax", name, shape))
            exact(cx.argmin(), x.argmin(), ("argmin", name, shape))
        if dim is None:
            continue
        exact(cx.amax(dim), x.amax(dim), ("amax", name, shape, dim))
        exact(cx.amin(dim, keepdim=True), x.amin(dim, keepdim=True), ("amin", name, shape, dim))
        if isinstance(dim, int):
            for fn in ("max", "min"):
                gv, gi = getattr(cx, fn)(dim)
                wv, wi = getattr(x, fn)(dim)
                exact(gv, wv, (fn, name, shape, dim))
                exact(gi, wi, (fn + " indices", name, shape, dim))
            if name != "bool":
                exact(cx.argmax(dim, keepdim=True), x.argmax(dim, keepdim=True), ("argmax", name, shape, dim))
                exact(cx.argmin(dim), x.argmin(dim), ("argmin", name, shape, dim))


def test_nan_and_ties():
    x = kiln.tensor([[1.0, 5.0, 5.0, 2.0], [float("nan"), 3.0, float("nan"), 9.0], [-float("inf")] * 4,
                     [0.0, -0.0, 7.0, 7.0]])
    for dim in (0, 1):
        for t in (x, x.t().contiguous().t()):
            exact(t.cuda().argmax(dim), t.argmax(dim), ("argmax", dim))
            exact(t.cuda().argmin(dim), t.argmin(dim), ("argmin", dim))
            exact(t.cuda().amax(dim), t.amax(dim), ("amax", dim))
            exact(t.cuda().max(dim)[1], t.max(dim)[1], ("max indices", dim))
    # ties across threads and splits: the first index wins; the first NaN too
    big = kiln.zeros(1 << 20)
    big[[70000, 300000, 900000]] = 4.0
    assert big.cuda().argmax().item() == 70000
    big[[500000, 800000]] = float("nan")
    assert big.cuda().argmax().item() == 500000 and big.cuda().argmin().item() == 500000
    assert np.isnan(big.cuda().amax().item()) and np.isnan(big.cuda().sum().item())
    ints = kiln.tensor([[3, 7, 7, 1, 7]] * 3).t()
    exact(ints.cuda().argmax(0), ints.argmax(0), "int ties")


@pytest.mark.parametrize("name", FLOATS + ["int64", "int32", "uint8"])
def test_prod(name):
    for shape, dim in SHAPES_DIMS:
        x = host(name, shape, seed=5, low=0.7, high=1.3) if name in FLOATS else host(name, shape, seed=5) % 3 + 1
        want = x.prod() if dim is None or not isinstance(dim, int) else x.prod(dim)
        got = x.cuda().prod() if dim is None or not isinstance(dim, int) else x.cuda().prod(dim)
        if name in ("float16", "bfloat16"):
            # PyTorch's CUDA prod multiplies 16-bit floats in float and rounds once (its CPU prod
            # rounds every step): against the float64 product
            ref = x.double().prod() if dim is None or not isinstance(dim, int) else x.double().prod(dim)
            summed(got, ref.to(want.dtype), ref.abs(), SUM_TOL[name], ("prod", name, shape, dim))
        elif name in FLOATS:
            summed(got, want, want.abs().double(), 4 * SUM_TOL[name], ("prod", name, shape, dim))
        else:
            exact(got, want, ("prod", name, shape, dim))


@pytest.mark.parametrize("name", ["float32", "bfloat16", "int64", "uint8", "bool"])
def test_any_all_count_nonzero(name):
    for shape, dim in SHAPES_DIMS:
        x = host(name, shape, seed=9)
        if name != "bool":
            x = x * (host("bool", shape, seed=10)).to(x.dtype)  # zeros among the values
        cx = x.cuda()
        exact(cx.any(), x.any(), ("any", name, shape))
        exact(cx.all(), x.all(), ("all", name, shape))
        exact(kiln.count_nonzero(cx), kiln.count_nonzero(x), ("count_nonzero", name, shape))
        if dim is not None:
            exact(cx.any(dim), x.any(dim), ("any", name, shape, dim))
            exact(cx.all(dim, keepdim=True), x.all(dim, keepdim=True), ("all", name, shape, dim))
            exact(kiln.count_nonzero(cx, dim), kiln.count_nonzero(x, dim), ("count_nonzero", name, shape, dim))
    nan = kiln.tensor([0.0, float("nan")]).cuda()
    assert nan.any().item() and not nan.all().item()


def test_empty_reductions_and_errors():
    e = kiln.zeros(0, 3).cuda()
    exact(e.sum(0), kiln.zeros(3), "empty sum")
    exact(e.prod(0), kiln.ones(3), "empty prod")
    assert np.isnan(e.mean(0).cpu().numpy()).all()
    exact(e.any(0), kiln.zeros(3, dtype=kiln.bool), "empty any")
    exact(e.all(0), kiln.ones(3, dtype=kiln.bool), "empty all")
    exact(e.amax(1), kiln.zeros(0), "amax over a non-empty dim of an empty tensor")
    for fn in (lambda t: t.amax(), lambda t: t.max(), lambda t: t.argmax(), lambda t: t.amax(0)):
        with pytest.raises((RuntimeError, IndexError)) as cuda_err:
            fn(e)
        with pytest.raises(type(cuda_err.value)) as cpu_err:
            fn(e.cpu())
        assert str(cuda_err.value) == str(cpu_err.value)
    with pytest.raises(NotImplementedError, match="prod"):  # (complex sums run, as (real, imag) pairs)
        kiln.ones(3, dtype=kiln.complex64).cuda().prod()


def test_kernels_are_cached_and_training_reductions_work():
    x = host("float32", (37, 91), seed=4).cuda()
    x.sum(1)
    before = kiln._C._cuda_pointwise_cache_stats()
    for _ in range(3):
        x.sum(1)
        x.mean(0)
    after = kiln._C._cuda_pointwise_cache_stats()
    assert after["compiled"] + after["disk_hits"] <= before["compiled"] + before["disk_hits"] + 2  # mean(0): 1 or 2 kernels
    # autograd through reductions on the device
    w = host("float32", (8, 5), seed=6).cuda().requires_grad_()
    (w * w).mean().backward()
    np.testing.assert_allclose(w.grad.cpu().numpy(), (w.detach().cpu() * 2 / 40).numpy(), rtol=1e-6)


@pytest.mark.skipif(not TORCH_CUDA, reason="PyTorch with CUDA is the peer on the GPU machine only")
@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32"])
def test_against_pytorch_cuda(name):
    """Accumulator types and rounding as PyTorch's CUDA kernels: 16-bit floats sum, average and
    multiply in float and round once."""
    rng = np.random.default_rng(0)
    for shape, dim in [((4096,), None), ((64, 1000), 1), ((1000, 64), 0), ((3, 5, 7), (0, 2))]:
        a = rng.uniform(0.7, 1.3, shape)
        k = kiln.tensor(a).to(getattr(kiln, name)).cuda()
        t = torch.tensor(a).to(getattr(torch, name)).cuda()
        for op in ("sum", "mean", "prod", "amax", "argmax"):
            if op in ("prod", "argmax") and not (dim is None or isinstance(dim, int)):
                continue
            got = getattr(k, op)() if dim is None else getattr(k, op)(dim)
            want = getattr(t, op)() if dim is None else getattr(t, op)(dim)
            g, w = got.cpu().double().numpy(), want.cpu().double().numpy()
            if op in ("amax", "argmax"):
                np.testing.assert_array_equal(g, w, err_msg=f"{op} {name} {shape} {dim}")
            else:
                np.testing.assert_allclose(g, w, rtol={"float16": 1e-3, "bfloat16": 8e-3, "float32": 1e-5}[name],
                                           err_msg=f"{op} {name} {shape} {dim}")
