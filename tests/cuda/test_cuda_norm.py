"""layer_norm and group_norm and their backward, nll_loss2d, linalg.vector_norm, masked_fill, cat and
conj_physical on CUDA, against kiln's CPU kernels (tested against PyTorch in tests/): several shapes
and dtypes, with and without affine parameters, non-contiguous inputs."""

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F

from cuda_util import ALL, FLOATS, host, needs_kernels

pytestmark = needs_kernels
TOL = {"float32": 3e-5, "float64": 1e-12, "bfloat16": 3e-2, "float16": 3e-3}


def close(got, want, tol=0.0, what=""):
    assert got.device.type == "cuda", what
    got = got.detach().cpu()
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype, got.shape, want.shape)
    np.testing.assert_allclose(got.double().numpy(), want.detach().double().numpy(), rtol=tol, atol=tol,
                               err_msg=str(what), equal_nan=True)


@pytest.mark.parametrize("name", FLOATS)
# rows of up to 8192 (float64: 4096) take the one-pass kernels (Note [One-pass layer_norm]); 8193 the
# generated reductions
@pytest.mark.parametrize("shape,normalized", [((4, 7, 33), (33,)), ((6, 1000), (1000,)), ((3, 5, 6), (5, 6)),
                                              ((2, 0, 8), (8,)), ((3, 8192), (8192,)), ((2, 8193), (8193,)),
                                              ((70, 64), (64,))])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_forward_and_backward(name, shape, normalized, affine):
    tol = TOL[name]
    x = host(name, shape, 1)
    w = host(name, normalized, 2) if affine else None
    b = host(name, normalized, 3) if affine else None
    ins_c = [t.clone().requires_grad_() if t is not None else None for t in (x, w, b)]
    ins_g = [t.cuda().requires_grad_() if t is not None else None for t in (x, w, b)]
    yc = F.layer_norm(ins_c[0], normalized, ins_c[1], ins_c[2], eps=1e-5)
    yg = F.layer_norm(ins_g[0], normalized, ins_g[1], ins_g[2], eps=1e-5)
    close(yg, yc, tol, "forward")
    g = host(name, shape, 4)
    yc.backward(g)
    yg.backward(g.cuda())
    for a, c, what in zip(ins_g, ins_c, ["grad input", "grad weight", "grad bias"]):
        if a is not None:
            # the row sums' rounding grows with the row's length
            scale = (10 if name in ("float16", "bfloat16") else 4) * max(1, shape[-1] / 1000)
            close(a.grad, c.grad, tol * scale, what)
    out, mean, rstd = kiln.native_layer_norm(x.cuda(), list(normalized), None, None, 1e-5)
    out_c, mean_c, rstd_c = kiln.native_layer_norm(x, list(normalized), None, None, 1e-5)
    close(mean, mean_c, tol, "mean")
    close(rstd, rstd_c, tol * 10, "rstd")


def test_layer_norm_non_contiguous_and_constant_rows():
    x = host("float32", (64, 48), 5).t()
    close(F.layer_norm(x.cuda(), (64,)), F.layer_norm(x, (64,)), 3e-5, "transposed input")
    c = kiln.full((3, 10), 2.5)
    close(F.layer_norm(c.cuda(), (10,)), F.layer_norm(c, (10,)), 0, "constant rows: zero variance")


@pytest.mark.parametrize("name", FLOATS)
def test_vector_norm(name):
    x = host(name, (7, 9, 5), 6)
    x[0, 0, 0] = 0
    for ord in [2, 1, 0, float("inf"), float("-inf"), 3, 0.5, -1.5]:
        for dim, keepdim in [(None, False), ((1,), False), ((0, 2), True), ((-1,), False)]:
            want = kiln.linalg.vector_norm(x, ord, dim, keepdim)
            close(kiln.linalg.vector_norm(x.cuda(), ord, dim, keepdim), want, TOL[name] * 3, (ord, dim))
    close(kiln.linalg.vector_norm(x.cuda(), dtype=kiln.float64), kiln.linalg.vector_norm(x, dtype=kiln.float64), 1e-6)
    params = [kiln.nn.Parameter(host("float32", s, i).cuda()) for i, s in enumerate([(5, 3), (7,)])]
    cpu = [kiln.nn.Parameter(p.detach().cpu()) for p in params]
    for ps in (params, cpu):
        for p in ps:
            p.grad = p.detach() * 10
    total_g = kiln.nn.utils.clip_grad_norm_(params, 1.0)
    total_c = kiln.nn.utils.clip_grad_norm_(cpu, 1.0)
    close(total_g, total_c, 1e-5, "clip_grad_norm_ total")
    for a, c in zip(params, cpu):
        close(a.grad, c.grad, 1e-5, "clipped")


@pytest.mark.parametrize("name", ALL)
def test_masked_fill(name):
    x = host(name, (5, 6, 7), 7)
    mask = host("bool", (6, 1), 8)
    value = True if name == "bool" else (3 if name in ("int64", "int32", "int16", "int8", "uint8") else -2.5)
    close(x.cuda().masked_fill(mask.cuda(), value), x.masked_fill(mask, value), what="broadcast mask")
    close(x.cuda().masked_fill(mask.cuda(), kiln.tensor(value)), x.masked_fill(mask, kiln.tensor(value)), what="0-d value")
    xt = x.transpose(0, 2).cuda()
    xt.masked_fill_(host("bool", (7, 6, 5), 9).cuda(), value)
    close(xt, x.transpose(0, 2).clone().masked_fill_(host("bool", (7, 6, 5), 9), value), what="in place, non-contiguous")
    if name in ("float32", "float16", "bfloat16"):
        close(x.cuda().masked_fill(mask.cuda(), float("-inf")), x.masked_fill(mask, float("-inf")), what="-inf")
    if name == "int8":
        with pytest.raises(RuntimeError, match="value cannot be converted to type int8_t without overflow"):
            x.cuda().masked_fill_(mask.cuda(), 1000)


@pytest.mark.parametrize("name", ALL)
def test_cat(name):
    parts = [host(name, (3, 4, 5), 10), host(name, (3, 2, 5), 11), host(name, (3, 0, 5), 12)]
    close(kiln.cat([p.cuda() for p in parts], 1), kiln.cat(parts, 1), what="dim 1")
    close(kiln.cat([parts[0].cuda(), parts[0].transpose(0, 2).contiguous().transpose(0, 2).cuda()], -1),
          kiln.cat([parts[0], parts[0]], -1), what="non-contiguous input")
    mixed = [host(name, (2, 3), 13).cuda(), host("float32", (1, 3), 14).cuda()]
    close(kiln.cat(mixed), kiln.cat([m.cpu() for m in mixed]), 1e-6, "promotion")
    close(kiln.stack([p.cuda() for p in parts[:1] * 3], 0), kiln.stack(parts[:1] * 3, 0), what="stack")


@pytest.mark.parametrize("name", ALL)
def test_tril_triu(name):
    x = host(name, (3, 6, 9), 15)
    for k in [-2, 0, 3]:
        close(kiln.tril(x.cuda(), k), kiln.tril(x, k), what=("tril", k))
        close(kiln.triu(x.cuda(), k), kiln.triu(x, k), what=("triu", k))
    xt = x.transpose(1, 2).cuda()
    xt.tril_(1)
    close(xt, x.transpose(1, 2).clone().tril_(1), what="tril_ non-contiguous")
    close(kiln.tril(kiln.ones(256, 256, device="cuda")), kiln.tril(kiln.ones(256, 256)), what="causal mask")


@pytest.mark.parametrize("name", ["float32", "bfloat16", "float64"])
def test_clip_grad_norm_multi_tensor(name):
    """The two-pass CUDA path (norm 2, one dtype): more tensors than one launch holds (96), a gradient of
    more chunks than one launch runs; against the CPU and against foreach=False on CUDA."""
    rng = np.random.default_rng(16)
    shapes = [(4500, 4700)] + [(int(rng.integers(1, 40)),) for _ in range(120)]
    grads = [rng.standard_normal(s).astype(np.float32) * 0.1 for s in shapes]

    def params(device, dtype):
        ps = [kiln.nn.Parameter(kiln.zeros(s, dtype=dtype, device=device)) for s in shapes]
        for p, g in zip(ps, grads):
            p.grad = kiln.tensor(g).to(dtype).to(device)
        return ps

    dt = getattr(kiln, name)
    tol = 2e-2 if name == "bfloat16" else 1e-5
    cuda, single, cpu = params("cuda", dt), params("cuda", dt), params("cpu", dt)
    exact = kiln.linalg.vector_norm(kiln.cat([kiln.tensor(g).to(dt).double().flatten() for g in grads])).to(dt)
    # per-tensor norms rounded to bfloat16 first (foreach=False, the CPU, PyTorch's foreach_norm): coarser
    for ps, kw, loose in [(cuda, {}, 1), (single, {"foreach": False}, 3), (cpu, {}, 3)]:
        total = kiln.nn.utils.clip_grad_norm_(ps, 5.0, **kw)
        assert total.dtype == dt
        close(total if total.device.type == "cuda" else total.cuda(), exact, tol * loose, ("total", ps[0].device, kw))
    for a, b, c in zip(cuda, single, cpu):  # (their totals differ by up to 3 * tol for bfloat16)
        close(a.grad, c.grad, tol * 4, "clipped vs the CPU")
        close(a.grad, b.grad.cpu(), tol * 4, "clipped vs foreach=False")
    inf = params("cuda", dt)[:3]
    inf[1].grad[0] = float("inf")
    with pytest.raises(RuntimeError, match="non-finite"):
        kiln.nn.utils.clip_grad_norm_(inf, 1.0, error_if_nonfinite=True)


@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("shape,groups", [((4, 6, 5, 5), 3), ((2, 8, 33), 8), ((3, 4), 1), ((2, 32, 16, 16), 4),
                                          ((0, 6, 3), 2), ((2, 6, 0), 3)])
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm_forward_and_backward(name, shape, groups, affine):
    tol = TOL[name]
    x = host(name, shape, 1)
    w = host(name, (shape[1],), 2) if affine else None
    b = host(name, (shape[1],), 3) if affine else None
    ins_c = [t.clone().requires_grad_() if t is not None else None for t in (x, w, b)]
    ins_g = [t.cuda().requires_grad_() if t is not None else None for t in (x, w, b)]
    yc = F.group_norm(ins_c[0], groups, ins_c[1], ins_c[2], eps=1e-5)
    yg = F.group_norm(ins_g[0], groups, ins_g[1], ins_g[2], eps=1e-5)
    close(yg, yc, tol * 2, "forward")
    g = host(name, shape, 4)
    yc.backward(g)
    yg.backward(g.cuda())
    group_size = x.numel() // max(1, shape[0] * groups)
    for a, c, what in zip(ins_g, ins_c, ["grad input", "grad weight", "grad bias"]):
        if a is not None:
            scale = (10 if name in ("float16", "bfloat16") else 4) * max(1, group_size / 500)
            close(a.grad, c.grad, tol * scale, what)
    if x.numel():
        n, c = shape[0], shape[1]
        out, mean, rstd = kiln.native_group_norm(x.cuda(), None, None, n, c, x.numel() // (n * c), groups, 1e-5)
        _, mean_c, rstd_c = kiln.native_group_norm(x, None, None, n, c, x.numel() // (n * c), groups, 1e-5)
        close(mean, mean_c, tol, "mean")
        close(rstd, rstd_c, tol * 4, "rstd")
    # a non-contiguous input
    xt = host(name, (shape[0], shape[1], 7), 5).transpose(0, 1).contiguous().transpose(0, 1) if len(shape) > 2 else x
    close(F.group_norm(xt.cuda(), groups), F.group_norm(xt, groups), tol * 2, "non-contiguous")


@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss2d_and_spatial_cross_entropy(name, reduction, weighted):
    tol = TOL[name] * 8
    x = host(name, (3, 5, 4, 6), 6)
    t = host("int64", (3, 4, 6), 7).remainder(5)
    t[0, 0, 0] = -100  # ignored
    w = host(name, (5,), 8, 0.5, 2.0) if weighted else None
    xc, xg = x.clone().requires_grad_(), x.cuda().requires_grad_()
    lc = F.cross_entropy(xc, t, w, reduction=reduction)
    lg = F.cross_entropy(xg, t.cuda(), w.cuda() if weighted else None, reduction=reduction)
    close(lg, lc, tol, "loss")
    g = host(name, tuple(lc.shape), 9)
    lc.backward(g)
    lg.backward(g.cuda())
    close(xg.grad, xc.grad, tol, "grad")
    ls = F.log_softmax(x, 1)
    close(F.nll_loss(ls.cuda(), t.cuda(), reduction=reduction), F.nll_loss(ls, t, reduction=reduction), tol, "nll_loss2d")


def test_conj_physical():
    z = kiln.complex(host("float32", (4, 5), 1), host("float32", (4, 5), 2))
    got = kiln.conj_physical(z.cuda().t())
    want = kiln.conj_physical(z.t())
    assert got.device.type == "cuda" and got.dtype == want.dtype
    np.testing.assert_array_equal(kiln.view_as_real(got.cpu()).numpy(), kiln.view_as_real(want).numpy())
    close(kiln.conj_physical(host("float32", (3,), 3).cuda()), kiln.conj_physical(host("float32", (3,), 3)), 0, "real")
