"""Ops brought to CUDA after the first kernels: the pointwise losses (mse, smooth_l1, huber, binary
cross entropy with and without logits) and their gradients, var/std/var_mean/std_mean, logsumexp,
constant padding, the functional view scatters, flip, one_hot, masked_select, dot, round(decimals)
and logit's gradient, against kiln's CPU kernels (tested against PyTorch in tests/): every floating
dtype, each reduction, broadcast and non-contiguous operands."""

import pytest

import kiln
import kiln.nn.functional as F

from cuda_util import FLOATS, close_scaled as close, host, needs_kernels

pytestmark = needs_kernels
TOL = {"float32": 2e-5, "float64": 1e-12, "bfloat16": 2e-2, "float16": 2e-3}


def both(fn, *tensors):
    cpu = [t.clone().requires_grad_() if t is not None and t.is_floating_point() else t for t in tensors]
    gpu = [t.cuda().requires_grad_() if t is not None and t.is_floating_point() else
           (t.cuda() if t is not None else None) for t in tensors]
    yc, yg = fn(*cpu), fn(*gpu)
    g = host("float64", tuple(yc.shape), 9).to(yc.dtype)
    yc.backward(g)
    yg.backward(g.cuda())
    return yg, yc, [(a.grad, c.grad) for a, c in zip(gpu, cpu) if c is not None and c.requires_grad]


LOSSES = [("mse", lambda x, y, r: F.mse_loss(x, y, reduction=r)),
          ("smooth_l1", lambda x, y, r: F.smooth_l1_loss(x, y, reduction=r, beta=0.7)),
          ("huber", lambda x, y, r: F.huber_loss(x, y, reduction=r, delta=1.3))]


@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("loss", range(len(LOSSES)))
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_pointwise_losses(name, loss, reduction):
    label, fn = LOSSES[loss]
    x, y = host(name, (6, 7), 1), host(name, (6, 7), 2)
    yg, yc, grads = both(lambda x, y: fn(x, y, reduction), x, y)
    close(yg, yc, TOL[name] * 4, (label, "forward"))
    for (a, c), what in zip(grads, ["grad input", "grad target"]):
        close(a, c, TOL[name] * 4, (label, what))
    # a broadcast target, a transposed input
    xt = host(name, (7, 6), 3).t()
    close(fn(xt.cuda(), y[0].cuda(), reduction), fn(xt, y[0], reduction), TOL[name] * 4, (label, "broadcast"))


@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy(name, reduction, weighted):
    x = host(name, (5, 6), 1, 0.01, 0.99)
    t = host(name, (5, 6), 2, 0.0, 1.0)
    w = host(name, (6,), 3, 0.5, 2.0) if weighted else None
    yg, yc, grads = both(lambda x: F.binary_cross_entropy(x, t.to(x.device), w.to(x.device) if weighted else None,
                                                          reduction=reduction), x)
    close(yg, yc, TOL[name] * 4, "bce forward")
    close(grads[0][0], grads[0][1], TOL[name] * 4, "bce grad")
    logits = host(name, (5, 6), 4, -20.0, 20.0)
    pw = host(name, (6,), 5, 0.5, 3.0)
    fn = lambda z: F.binary_cross_entropy_with_logits(  # noqa: E731
        z, t.to(z.device), w.to(z.device) if weighted else None, reduction=reduction, pos_weight=pw.to(z.device))
    yg, yc, grads = both(fn, logits)
    close(yg, yc, TOL[name] * 4, "with logits forward")
    close(grads[0][0], grads[0][1], TOL[name] * 4, "with logits grad")


def test_binary_cross_entropy_refuses_inputs_outside_0_1():
    t = kiln.zeros(3).cuda()
    for bad in (1.5, -0.1, float("nan")):
        with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
            F.binary_cross_entropy(kiln.tensor([0.5, bad, 0.2]).cuda(), t)


@pytest.mark.parametrize("name", FLOATS)
def test_var_std_and_means(name):
    x = host(name, (4, 5, 6), 1)
    for dim, correction, keepdim in [(None, 1, False), ((1,), 0, True), ((0, 2), 1, False), ((2,), 2.5, False),
                                     ((1,), 5, False), ((1,), 6, False)]:
        for fn in (kiln.var, kiln.std):
            close(fn(x.cuda(), dim, correction=correction, keepdim=keepdim),
                  fn(x, dim, correction=correction, keepdim=keepdim), TOL[name] * 4, (fn.__name__, dim, correction))
        for fn in (kiln.var_mean, kiln.std_mean):
            (vg, mg), (vc, mc) = (fn(t, dim, correction=correction, keepdim=keepdim) for t in (x.cuda(), x))
            close(vg, vc, TOL[name] * 4, (fn.__name__, "var", dim))
            close(mg, mc, TOL[name] * 4, (fn.__name__, "mean", dim))
    close(x.cuda().transpose(0, 2).var(1), x.transpose(0, 2).var(1), TOL[name] * 4, "non-contiguous")
    yg, yc, grads = both(lambda t: t.std(1), x)  # the backward is composed of CUDA ops
    close(grads[0][0], grads[0][1], TOL[name] * 8, "std grad")


@pytest.mark.parametrize("name", FLOATS)
def test_logsumexp(name):
    x = host(name, (4, 9), 1)
    x[1] = float("-inf")
    x[2, 3] = float("inf")
    for dim in (0, 1, (0, 1)):
        close(kiln.logsumexp(x.cuda(), dim), kiln.logsumexp(x, dim), TOL[name] * 4, dim)


@pytest.mark.parametrize("name", FLOATS + ["int64", "bool"])
def test_constant_pad_and_view_scatters(name):
    x = host(name, (3, 4, 5), 1)
    for pad, value in [((1, 2), 0), ((2, 0, 1, 1), 1.5 if name not in ("int64", "bool") else 1), ((-1, 2, 0, -2), 0)]:
        close(F.pad(x.cuda(), pad, value=value), F.pad(x, pad, value=value), 0, ("pad", pad))
    src = host(name, (3, 2, 5), 2)
    close(kiln.slice_scatter(x.cuda(), src.cuda(), 1, 1, 3), kiln.slice_scatter(x, src, 1, 1, 3), 0, "slice_scatter")
    close(kiln.select_scatter(x.cuda(), src[:, 0].cuda(), 1, 2), kiln.select_scatter(x, src[:, 0], 1, 2), 0,
          "select_scatter")
    d = host(name, (3, 4), 3)
    close(kiln.diagonal_scatter(x.cuda(), d.cuda(), 0, 1, 2), kiln.diagonal_scatter(x, d, 0, 1, 2), 0,
          "diagonal_scatter")
    close(kiln.as_strided_scatter(x.cuda(), d.cuda(), (3, 4), (20, 1)), kiln.as_strided_scatter(x, d, (3, 4), (20, 1)),
          0, "as_strided_scatter")


@pytest.mark.parametrize("name", FLOATS + ["int64", "bool"])
def test_flip_one_hot_masked_select(name):
    x = host(name, (3, 4, 5), 1)
    for dims in ((0,), (2,), (0, 2), (-1, 1), ()):
        close(kiln.flip(x.cuda(), dims), kiln.flip(x, dims), 0, ("flip", dims))
    close(kiln.flip(x.cuda().transpose(0, 2), (1,)), kiln.flip(x.transpose(0, 2), (1,)), 0, "flip non-contiguous")
    mask = host("bool", (4, 5), 2)
    close(kiln.masked_select(x.cuda(), mask.cuda()), kiln.masked_select(x, mask), 0, "masked_select broadcast")
    idx = kiln.tensor([[0, 3, 1], [2, 2, 0]])
    for classes in (-1, 6):
        close(F.one_hot(idx.cuda(), classes), F.one_hot(idx, classes), 0, ("one_hot", classes))
    with pytest.raises(RuntimeError, match="Class values must be smaller than num_classes"):
        F.one_hot(idx.cuda(), 3)
    with pytest.raises(RuntimeError, match="Class values must be non-negative"):
        F.one_hot((idx - 1).cuda(), 6)


@pytest.mark.parametrize("name", FLOATS)
def test_dot_round_decimals_and_logit_backward(name):
    a, b = host(name, (37,), 1), host(name, (37,), 2)
    close(kiln.dot(a.cuda(), b.cuda()), kiln.dot(a, b), TOL[name] * 8, "dot")
    close(kiln.dot(a[:0].cuda(), b[:0].cuda()), kiln.dot(a[:0], b[:0]), 0, "empty dot")
    x = host(name, (6, 7), 3, -50.0, 50.0)
    for decimals in (0, 1, 2, -1):
        close(kiln.round(x.cuda(), decimals=decimals), kiln.round(x, decimals=decimals), TOL[name], ("round", decimals))
    p = host(name, (40,), 4, -0.2, 1.2)
    p[0], p[1] = 0.0, 1.0
    g = host(name, (40,), 5)
    for eps in (None, 0.1, 0.0):
        close(kiln.ops.aten.logit_backward(g.cuda(), p.cuda(), eps), kiln.ops.aten.logit_backward(g, p, eps),
              TOL[name] * 4, ("logit_backward", eps))
