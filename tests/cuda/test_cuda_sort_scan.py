"""sort, topk, cumsum/cumprod and multinomial on CUDA (tensor/cuda/kernels/sort.cu, scan.cu), against
kiln's CPU kernels (tested against PyTorch in tests/): sorts and topk must return the same values
and the same indices (both devices sort stably, NaN largest), so every tie and NaN case is exact;
scans agree to the accumulator's rounding. Rows short enough for one tile, rows of several tiles
(one and several merge passes), every dtype, every dim, non-contiguous inputs."""

import math

import numpy as np
import pytest

import kiln

from cuda_util import ALL, FLOATS, INTS, close_scaled as close, host, needs_kernels

pytestmark = needs_kernels


def exact(got, want, what=""):
    assert got.device.type == "cuda", what
    g = got.cpu()
    assert g.dtype == want.dtype and tuple(g.shape) == tuple(want.shape), (what, g.dtype, want.dtype, g.shape)
    np.testing.assert_array_equal(g.double().numpy(), want.double().numpy(), err_msg=str(what))


def with_ties_and_nans(name, shape, seed):
    """Values from a small set (many ties), with NaN and infinities among the floats."""
    rng = np.random.default_rng(seed)
    if name == "bool":
        return kiln.tensor(rng.random(shape) > 0.5)
    v = rng.integers(0 if name == "uint8" else -5, 5, shape).astype(np.float64)
    if name in FLOATS:
        mask = rng.random(shape)
        v[mask < 0.05] = np.nan
        v[(mask >= 0.05) & (mask < 0.08)] = np.inf
        v[(mask >= 0.08) & (mask < 0.1)] = -np.inf
        v[(mask >= 0.1) & (mask < 0.12)] = -0.0
    return kiln.tensor(v).to(getattr(kiln, name))


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("n", [1, 7, 64, 2048, 2049, 5000, 70000])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_rows(name, n, descending):
    rows = 3 if n <= 5000 else 1
    x = with_ties_and_nans(name, (rows, n), n)
    for stable in (True, None):
        vg, ig = x.cuda().sort(dim=-1, descending=descending, stable=stable)
        vc, ic = x.sort(dim=-1, descending=descending, stable=True)
        exact(vg, vc, ("values", name, n))
        exact(ig, ic, ("indices", name, n))


@pytest.mark.parametrize("name", ["float32", "int64", "float16"])
def test_sort_every_dim_and_layout(name):
    x = host(name, (6, 300, 5), 1)
    for dim in (0, 1, 2, -1):
        for t in (x, x.transpose(0, 2)):
            vg, ig = t.cuda().sort(dim=dim)
            vc, ic = t.sort(dim=dim)
            exact(vg, vc, ("values", dim))
            exact(ig, ic, ("indices", dim))
    exact(kiln.argsort(x.cuda(), dim=1, descending=True), kiln.argsort(x, dim=1, descending=True), "argsort")
    # 0-d and empty
    s = host(name, (), 2)
    exact(s.cuda().sort().values, s.sort().values, "0-d")
    e = host(name, (0, 4), 3)
    assert tuple(e.cuda().sort(dim=0).indices.shape) == (0, 4)
    # a transposed (non-contiguous) input sorted along its now-outer dim
    t = x[0].t()
    exact(t.cuda().sort(dim=1).indices, t.sort(dim=1).indices, "transposed")


@pytest.mark.parametrize("name", FLOATS + INTS)
@pytest.mark.parametrize("largest", [True, False])
def test_topk(name, largest):
    x = with_ties_and_nans(name, (4, 3000), 5)
    for k in (1, 5, 3000):
        vg, ig = x.cuda().topk(k, dim=1, largest=largest)
        vc, ic = x.topk(k, dim=1, largest=largest)
        exact(vg, vc, ("topk values", k))
        exact(ig, ic, ("topk indices", k))
    y = host(name, (7, 5, 3), 6).transpose(0, 1)
    exact(y.cuda().topk(2, dim=1).indices, y.topk(2, dim=1).indices, "topk dim 1")
    exact(y.cuda().topk(0, dim=0).values, y.topk(0, dim=0).values, "topk 0")


def test_sort_derived_ops():
    """Python composites over sort, cumsum and the other CUDA ops (median, kthvalue, unique, quantile,
    repeat_interleave, cummax, searchsorted, histc, bincount, ...)."""
    x = host("float32", (5, 301), 7)
    exact(x.cuda().median(dim=1).indices, x.median(dim=1).indices, "median")
    exact(x.cuda().kthvalue(17, dim=1).values, x.kthvalue(17, dim=1).values, "kthvalue")
    q = kiln.tensor([0.1, 0.5, 0.9])
    close(kiln.quantile(x.cuda(), q.cuda(), dim=1), kiln.quantile(x, q, dim=1), 1e-6, "quantile")
    i = host("int64", (500,), 8)
    u_g, inv_g, cnt_g = kiln.unique(i.cuda(), return_inverse=True, return_counts=True)
    u_c, inv_c, cnt_c = kiln.unique(i, return_inverse=True, return_counts=True)
    for g, c, what in ((u_g, u_c, "unique"), (inv_g, inv_c, "inverse"), (cnt_g, cnt_c, "counts")):
        exact(g, c, what)
    r = kiln.tensor([2, 0, 3, 1])
    exact(kiln.arange(4).cuda().repeat_interleave(r.cuda()), kiln.arange(4).repeat_interleave(r), "repeat_interleave")
    # composites that made their helper tensors on the CPU (a device mismatch on CUDA inputs)
    exact(kiln.cummax(x.cuda(), 1).indices, kiln.cummax(x, 1).indices, "cummax")
    close(kiln.logcumsumexp(x.cuda(), 1), kiln.logcumsumexp(x, 1), 1e-5, "logcumsumexp")
    edges = kiln.linspace(-3, 3, 11)
    exact(kiln.searchsorted(edges.cuda(), x.cuda()), kiln.searchsorted(edges, x), "searchsorted")
    exact(kiln.bucketize(x.cuda(), edges.cuda(), right=True), kiln.bucketize(x, edges, right=True), "bucketize")
    exact(kiln.histc(x.cuda(), bins=7), kiln.histc(x, bins=7), "histc")
    exact(kiln.bincount(i.abs().cuda(), minlength=30), kiln.bincount(i.abs(), minlength=30), "bincount")
    idx = host("int64", (5, 301), 9).abs().remainder(301)
    close(x.cuda().scatter_reduce(1, idx.cuda(), x.cuda(), "mean"), x.scatter_reduce(1, idx, x, "mean"), 1e-5,
          "scatter_reduce mean")
    exact(x.cuda().index_fill(1, kiln.tensor([0, 5]).cuda(), 2.0), x.index_fill(1, kiln.tensor([0, 5]), 2.0), "index_fill")


SCAN_TOL = {"float32": 1e-5, "float64": 1e-12, "float16": 2e-3, "bfloat16": 1.6e-2}


@pytest.mark.parametrize("name", FLOATS + INTS + ["bool"])
@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_scans(name, op):
    # rows along the innermost dim (block per row), short rows and outer dims (a thread per line), few
    # long lines of an outer dim (moved innermost), non-contiguous input
    shapes = [((5, 3000), 1), ((300, 7), 1), ((4000, 3), 0), ((700, 6000), 0), ((2, 9, 300), 1), ((10,), 0)]
    for shape, dim in shapes:
        lo, hi = (0.9, 1.1) if op == "cumprod" else (-3.0, 3.0)
        x = host(name, shape, 9, lo, hi)
        if op == "cumprod" and name not in FLOATS:
            x = (x % 2) if name != "bool" else x  # keep integer products small
        want = getattr(x, op)(dim)
        got = getattr(x.cuda(), op)(dim)
        if name in FLOATS:
            close(got, want, SCAN_TOL[name] * (10 if op == "cumprod" else 1) * math.sqrt(shape[dim]), (op, shape, dim))
        else:
            exact(got, want, (op, shape, dim))
    t = host(name, (40, 50), 10, lo, hi).t()
    if name in FLOATS:
        close(getattr(t.cuda(), op)(1), getattr(t, op)(1), SCAN_TOL[name] * 10, "transposed")
    elif op == "cumsum":
        exact(t.cuda().cumsum(1), t.cumsum(1), "transposed")


def test_scan_dtype_and_inplace():
    x = host("int32", (6, 40), 11)
    exact(x.cuda().cumsum(1, dtype=kiln.float64), x.cumsum(1, dtype=kiln.float64), "dtype=")
    exact(x.cuda().cumsum(0), x.cumsum(0), "int32 -> int64")
    y, yc = host("float32", (6, 40), 12).cuda(), host("float32", (6, 40), 12)
    y.cumsum_(1)
    yc.cumsum_(1)
    close(y, yc, 1e-5, "cumsum_")
    s = host("float32", (), 13)
    close(s.cuda().cumsum(0), s.cumsum(0), 0, "0-d")
    g = host("float32", (8, 300), 14).cuda().requires_grad_()
    g.cumsum(1).pow(2).sum().backward()
    gc = g.detach().cpu().requires_grad_()
    gc.cumsum(1).pow(2).sum().backward()
    close(g.grad, gc.grad, 1e-4, "cumsum backward")


def seeded(device, seed):
    return kiln.Generator(device=device).manual_seed(seed)


@pytest.mark.parametrize("name", FLOATS)
def test_multinomial_draws_as_the_cpu(name):
    """One seed gives the same draws on either device (Note [multinomial])."""
    p = host(name, (6, 50), 15, 0.0, 1.0)
    p[:, 3] = 0  # never drawn with replacement; last without
    for n, replacement in ((1, False), (20, False), (50, False), (1, True), (200, True)):
        got = kiln.multinomial(p.cuda(), n, replacement, generator=seeded("cuda", 3))
        want = kiln.multinomial(p, n, replacement, generator=seeded("cpu", 3))
        exact(got, want, (n, replacement))
    exact(kiln.multinomial(p[0].cuda(), 5, generator=seeded("cuda", 4)), kiln.multinomial(p[0], 5, generator=seeded("cpu", 4)), "1-d")


def test_multinomial_frequencies_and_errors():
    p = kiln.tensor([0.1, 0.2, 0.3, 0.4], device="cuda")
    draws = kiln.multinomial(p, 200000, replacement=True).cpu()
    freq = kiln.bincount(draws, minlength=4).double() / 200000
    np.testing.assert_allclose(freq.numpy(), [0.1, 0.2, 0.3, 0.4], atol=0.01)
    first = kiln.multinomial(p.expand(100000, 4), 1).cpu().flatten()
    np.testing.assert_allclose((kiln.bincount(first, minlength=4).double() / 100000).numpy(), [0.1, 0.2, 0.3, 0.4],
                               atol=0.01)
    for bad, message in ((kiln.tensor([0.5, -0.1]), "element < 0"), (kiln.tensor([0.5, math.nan]), "inf"),
                         (kiln.tensor([0.0, 0.0]), "sum of probabilities")):
        with pytest.raises(RuntimeError, match=message):
            kiln.multinomial(bad.cuda(), 1)
    with pytest.raises(RuntimeError, match="encountering probability entry < 0"):
        kiln.multinomial(kiln.tensor([0.5, -0.1], device="cuda"), 3, replacement=True)
