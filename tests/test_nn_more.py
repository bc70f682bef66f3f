"""Issue 17's second batch of kiln.nn against torch.nn (PyTorch 2.13): ParameterList, ParameterDict and
Container; the activations CELU, SELU, PReLU, RReLU and Softmax2d; the losses CosineEmbedding,
GaussianNLL, HingeEmbedding, MultiLabelMargin, MultiLabelSoftMargin, MultiMargin, PoissonNLL,
SoftMargin, TripletMargin, TripletMarginWithDistance and NLLLoss2d; LocalResponseNorm,
CrossMapLRN2d and F.pdist.

Every functional runs on the same data in both libraries (float32 and float64, contiguous and strided
inputs, every reduction, weights where they exist): values, dtypes and shapes equal, and float64
gradients from `autograd.grad` equal. Modules print as torch's and compute the same with torch's
state loaded. The containers are driven through the same script in both libraries and must report
the same names, reprs, state dicts and errors. RReLU's training mode is random (kiln's generator), so
it is checked by its bounds, statistics and gradient; its evaluation mode by values. CrossMapLRN2d's
values are torch's; its gradient is checked by gradcheck, as torch's hand-written backward fails it.
Bad input raises torch's exception class (and message, where kiln words it). One program per group
is compiled (inductor and aot_eager) and must match eager in values and gradients with no graph break.
"""

import copy
import math
import warnings
from collections import OrderedDict

import numpy as np
import pytest

import kiln
import kiln.nn.functional as KF
from conftest import assert_same, requires_torch, torch

pytestmark = requires_torch

if torch is not None:
    import torch.nn.functional as TF

RNG = np.random.default_rng(1717)


def arr(*shape, low=-2.0, high=2.0):
    return RNG.uniform(low, high, size=shape)


def signs(*shape):
    return np.where(RNG.uniform(size=shape) > 0.5, 1.0, -1.0)


def lib_of(F):
    return kiln if F is KF else torch


def make(lib, a, dtype, strided, requires_grad=False):
    """numpy array -> tensor of lib (integer arrays stay int64); strided: a view with stride 2 in
    the last dimension."""
    dt = lib.int64 if a.dtype.kind == "i" else getattr(lib, dtype)
    if strided and a.ndim:
        t = lib.tensor(np.repeat(a, 2, axis=-1), dtype=dt)[..., ::2]
    else:
        t = lib.tensor(a, dtype=dt)
    return t.requires_grad_(True) if requires_grad else t


def quietly(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args)


EDGES = np.array([[-3.0, -1.0, -0.25, 0.0], [0.0, 0.5, 1.5, 4.0]])  # both branches and the kink at 0
MULTILABEL = np.array([[3, 0, -1, 1, 2], [1, 1, 4, 0, -1], [4, 3, 2, 1, 0], [-1, 2, 3, 0, 0]])

# (id, fn(F, *inputs), input arrays, which inputs are differentiable)
FUNCS = [
    ("celu", lambda F, x: F.celu(x), [EDGES], [0]),
    ("celu-alpha", lambda F, x: F.celu(x, 0.4), [arr(3, 5)], [0]),
    ("celu-alpha-big", lambda F, x: F.celu(x, alpha=2.5), [EDGES], [0]),
    ("selu", lambda F, x: F.selu(x), [EDGES], [0]),
    ("selu-3d", lambda F, x: F.selu(x), [arr(2, 3, 4)], [0]),
    ("prelu-shared", lambda F, x, w: F.prelu(x, w), [arr(2, 3, 4), np.array([0.25])], [0, 1]),
    ("prelu-channels", lambda F, x, w: F.prelu(x, w), [np.concatenate([arr(2, 3, 2), np.zeros((2, 3, 1))], -1),
                                                        arr(3)], [0, 1]),
    ("prelu-4d", lambda F, x, w: F.prelu(x, w), [arr(2, 3, 2, 3), arr(3)], [0, 1]),
    ("prelu-1d", lambda F, x, w: F.prelu(x, w), [arr(6), arr(1)], [0, 1]),
    ("prelu-0d-weight", lambda F, x, w: F.prelu(x, w), [arr(2, 4), np.array(-0.3)], [0, 1]),
    ("rrelu-eval", lambda F, x: F.rrelu(x), [EDGES], [0]),
    ("rrelu-eval-bounds", lambda F, x: F.rrelu(x, 0.05, 0.6, training=False), [arr(3, 4)], [0]),
    ("softmax2d", lambda F, x: lib_of(F).nn.Softmax2d()(x), [arr(2, 3, 2, 4)], [0]),
    ("softmax2d-3d", lambda F, x: lib_of(F).nn.Softmax2d()(x), [arr(3, 2, 4)], [0]),
    ("lrn-3d", lambda F, x: F.local_response_norm(x, 3, alpha=0.5), [arr(2, 5, 4)], [0]),
    ("lrn-4d-even", lambda F, x: F.local_response_norm(x, 2, alpha=0.3, beta=0.6, k=2.0), [arr(2, 5, 3, 2)], [0]),
    ("lrn-5d-wide", lambda F, x: F.local_response_norm(x, 7, 1e-2), [arr(2, 3, 2, 2, 3)], [0]),
    ("pdist", lambda F, x: F.pdist(x), [arr(5, 3)], [0]),
    ("pdist-dup-rows", lambda F, x: F.pdist(x), [np.array([[1.0, 2.0, 0.5], [1.0, 2.0, 0.5], [0.0, 1.0, -1.0]])],
     [0]),
    ("pdist-p1", lambda F, x: F.pdist(x, 1), [arr(4, 3)], [0]),
    ("pdist-p0", lambda F, x: F.pdist(x, 0), [arr(4, 3)], [0]),
    ("pdist-p0.5", lambda F, x: F.pdist(x, 0.5), [arr(4, 3)], [0]),
    ("pdist-p3", lambda F, x: F.pdist(x, 3), [arr(4, 3)], [0]),
    ("pdist-inf", lambda F, x: F.pdist(x, math.inf), [arr(4, 3)], [0]),
    ("pdist-inf-ties", lambda F, x: F.pdist(x, math.inf), [np.array([[1.0, 2.0], [0.0, 1.0], [1.0, 2.0]])], [0]),
    ("pdist-one-row", lambda F, x: F.pdist(x), [arr(1, 3)], [0]),
    ("cosine_embedding", lambda F, a, b, y: F.cosine_embedding_loss(a, b, y), [arr(4, 5), arr(4, 5),
                                                                                np.array([1.0, -1.0, 1.0, -1.0])],
     [0, 1]),
    ("cosine_embedding-none-margin", lambda F, a, b, y: F.cosine_embedding_loss(a, b, y, 0.3, reduction="none"),
     [arr(5, 3), arr(5, 3), np.array([1.0, -1.0, 0.0, -1.0, 1.0])], [0, 1]),
    ("cosine_embedding-0d", lambda F, a, b, y: F.cosine_embedding_loss(a, b, y, -0.2, reduction="sum"),
     [arr(6), arr(6), np.array(-1.0)], [0, 1]),
    ("cosine_embedding-zero-vector", lambda F, a, b, y: F.cosine_embedding_loss(a, b, y, reduction="none"),
     [np.concatenate([arr(2, 3), np.zeros((1, 3))]), arr(3, 3), np.array([1.0, 1.0, -1.0])], [0, 1]),
    ("hinge_embedding", lambda F, x, y: F.hinge_embedding_loss(x, y), [arr(4, 5), signs(4, 5)], [0]),
    ("hinge_embedding-none", lambda F, x, y: F.hinge_embedding_loss(x, y, margin=0.5, reduction="none"),
     [arr(3, 4), signs(3, 4)], [0]),
    ("hinge_embedding-bcast", lambda F, x, y: F.hinge_embedding_loss(x, y, 2.0, reduction="sum"),
     [arr(4), signs(3, 4)], [0]),
    ("soft_margin", lambda F, x, y: F.soft_margin_loss(x, y), [arr(4, 5), signs(4, 5)], [0]),
    ("soft_margin-none-bcast", lambda F, x, y: F.soft_margin_loss(x, y, reduction="none"), [arr(3, 4), signs(4)],
     [0]),
    ("soft_margin-sum", lambda F, x, y: F.soft_margin_loss(x, y, reduction="sum"), [arr(2, 3, 4), arr(2, 3, 4)], [0]),
    ("poisson_nll", lambda F, x, y: F.poisson_nll_loss(x, y), [arr(4, 5), arr(4, 5, low=0, high=4)], [0, 1]),
    ("poisson_nll-none", lambda F, x, y: F.poisson_nll_loss(x, y, reduction="none"),
     [arr(3, 4), arr(3, 4, low=0, high=4)], [0, 1]),
    ("poisson_nll-rates-full", lambda F, x, y: F.poisson_nll_loss(x, y, log_input=False, full=True, eps=1e-4),
     [arr(4, 5, low=0.1, high=3), np.concatenate([arr(3, 5, low=0.2, high=5), np.ones((1, 5))])], [0, 1]),
    ("poisson_nll-full-sum", lambda F, x, y: F.poisson_nll_loss(x, y, full=True, reduction="sum"),
     [arr(3, 4), arr(3, 4, low=0.5, high=6)], [0, 1]),
    ("gaussian_nll", lambda F, x, y, v: F.gaussian_nll_loss(x, y, v), [arr(4, 5), arr(4, 5), arr(4, 5, low=0, high=2)],
     [0, 1, 2]),
    ("gaussian_nll-clamped-full", lambda F, x, y, v: F.gaussian_nll_loss(x, y, v, full=True, eps=0.05,
                                                                         reduction="none"),
     [arr(3, 4), arr(3, 4), np.concatenate([arr(2, 4, low=0, high=2), np.full((1, 4), 0.01)])], [0, 1, 2]),
    ("gaussian_nll-one-var-per-sample", lambda F, x, y, v: F.gaussian_nll_loss(x, y, v, reduction="sum"),
     [arr(4, 3), arr(4, 3), arr(4, low=0.1, high=2)], [0, 1, 2]),
    ("gaussian_nll-broadcast-var", lambda F, x, y, v: F.gaussian_nll_loss(x, y, v),
     [arr(2, 3, 4), arr(2, 3, 4), arr(2, 1, 4, low=0.1, high=2)], [0, 1, 2]),
    ("gaussian_nll-float-var", lambda F, x, y: F.gaussian_nll_loss(x, y, 0.7), [arr(3, 4), arr(3, 4)], [0, 1]),
    ("multilabel_soft_margin", lambda F, x, y: F.multilabel_soft_margin_loss(x, y),
     [arr(4, 5), (RNG.uniform(size=(4, 5)) > 0.5) * 1.0], [0, 1]),
    ("multilabel_soft_margin-weight-none", lambda F, x, y, w: F.multilabel_soft_margin_loss(x, y, w, reduction="none"),
     [arr(3, 4), arr(3, 4, low=0, high=1), arr(4, low=0, high=2)], [0, 1, 2]),
    ("multilabel_soft_margin-sum", lambda F, x, y: F.multilabel_soft_margin_loss(x, y, reduction="sum"),
     [arr(2, 3, 4), arr(2, 3, 4, low=0, high=1)], [0, 1]),
    ("multi_margin", lambda F, x, y: F.multi_margin_loss(x, y), [arr(4, 5), np.array([0, 4, 2, 2])], [0]),
    ("multi_margin-none", lambda F, x, y: F.multi_margin_loss(x, y, reduction="none"),
     [arr(4, 5), np.array([1, 0, 3, 4])], [0]),
    ("multi_margin-p2-weight", lambda F, x, y, w: F.multi_margin_loss(x, y, p=2, margin=0.7, weight=w),
     [arr(4, 5), np.array([0, 4, 2, 2]), arr(5, low=0, high=2)], [0]),
    ("multi_margin-weight-sum", lambda F, x, y, w: F.multi_margin_loss(x, y, weight=w, reduction="sum"),
     [arr(3, 4), np.array([3, 3, 0]), arr(4, low=0, high=2)], [0]),
    ("multi_margin-1d", lambda F, x, y: F.multi_margin_loss(x, y, reduction="none"), [arr(5), np.array(3)], [0]),
    ("multi_margin-1d-target1", lambda F, x, y: F.multi_margin_loss(x, y, reduction="none"), [arr(5), np.array([1])],
     [0]),
    ("multilabel_margin", lambda F, x, y: F.multilabel_margin_loss(x, y), [arr(4, 5), MULTILABEL], [0]),
    ("multilabel_margin-none", lambda F, x, y: F.multilabel_margin_loss(x, y, reduction="none"),
     [arr(4, 5), MULTILABEL], [0]),
    ("multilabel_margin-1d", lambda F, x, y: F.multilabel_margin_loss(x, y, reduction="sum"),
     [arr(4), np.array([2, 0, -1, 3])], [0]),
    ("triplet_margin", lambda F, a, p, n: F.triplet_margin_loss(a, p, n), [arr(4, 5), arr(4, 5), arr(4, 5)],
     [0, 1, 2]),
    ("triplet_margin-swap-p1-none", lambda F, a, p, n: F.triplet_margin_loss(a, p, n, 0.5, 1, swap=True,
                                                                              reduction="none"),
     [arr(5, 3), arr(5, 3), arr(5, 3)], [0, 1, 2]),
    ("triplet_margin-1d-p3", lambda F, a, p, n: F.triplet_margin_loss(a, p, n, margin=2.0, p=3.0, eps=1e-3),
     [arr(4), arr(4), arr(4)], [0, 1, 2]),
    ("triplet_distance-default", lambda F, a, p, n: F.triplet_margin_with_distance_loss(a, p, n),
     [arr(4, 5), arr(4, 5), arr(4, 5)], [0, 1, 2]),
    ("triplet_distance-cosine-swap", lambda F, a, p, n: F.triplet_margin_with_distance_loss(
        a, p, n, distance_function=lambda u, v: 1 - F.cosine_similarity(u, v), margin=0.4, swap=True,
        reduction="none"), [arr(4, 5), arr(4, 5), arr(4, 5)], [0, 1, 2]),
    ("triplet_distance-sum", lambda F, a, p, n: F.triplet_margin_with_distance_loss(
        a, p, n, distance_function=F.pairwise_distance, reduction="sum"), [arr(3, 4), arr(3, 4), arr(3, 4)],
     [0, 1, 2]),
]


@pytest.mark.parametrize("strided", [False, True], ids=["contig", "strided"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name, fn, arrays, diff", FUNCS, ids=[f[0] for f in FUNCS])
def test_functional_matches_torch(name, fn, arrays, diff, dtype, strided):
    grad = dtype == "float64"
    k_in = [make(kiln, a, dtype, strided, grad and i in diff) for i, a in enumerate(arrays)]
    t_in = [make(torch, a, dtype, strided, grad and i in diff) for i, a in enumerate(arrays)]
    got, want = quietly(fn, KF, *k_in), quietly(fn, TF, *t_in)
    assert_same(got, want.detach())
    if grad:
        g = np.random.default_rng(1).uniform(-1, 1, size=tuple(want.shape))
        k_grads = kiln.autograd.grad(got, [k_in[i] for i in diff], kiln.tensor(g))
        t_grads = torch.autograd.grad(want, [t_in[i] for i in diff], torch.tensor(g))
        for kg, tg in zip(k_grads, t_grads):
            assert_same(kg, tg, 1e-6, 1e-9)


LEGACY = [  # size_average / reduce: the reduction they mean, and the deprecation warning
    lambda F, L: F.cosine_embedding_loss(L.ones(2, 3), L.ones(2, 3), L.ones(2), size_average=False),
    lambda F, L: F.hinge_embedding_loss(L.ones(2, 3), L.ones(2, 3), reduce=False),
    lambda F, L: F.soft_margin_loss(L.ones(2, 3), L.ones(2, 3), size_average=False),
    lambda F, L: F.poisson_nll_loss(L.ones(2, 3), L.ones(2, 3), reduce=False),
    lambda F, L: F.multilabel_soft_margin_loss(L.ones(2, 3), L.ones(2, 3), size_average=False),
    lambda F, L: F.multi_margin_loss(L.ones(2, 3), L.tensor([0, 2]), reduce=False),
    lambda F, L: F.multilabel_margin_loss(L.ones(2, 3), L.tensor([[0, -1, 0], [1, 2, -1]]), size_average=False),
    lambda F, L: F.triplet_margin_loss(L.ones(2, 3), L.zeros(2, 3), L.ones(2, 3), reduce=False),
]


@pytest.mark.parametrize("call", LEGACY, ids=range(len(LEGACY)))
def test_legacy_reduction_arguments(call):
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        got = call(KF, kiln)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_same(got, call(TF, torch))


def test_in_place_forms_match_torch():
    for name, call in [("celu_", lambda F, x: F.celu_(x, 0.5)), ("celu-inplace", lambda F, x: F.celu(x, inplace=True)),
                       ("selu_", lambda F, x: F.selu_(x)), ("selu-inplace", lambda F, x: F.selu(x, True)),
                       ("rrelu_", lambda F, x: F.rrelu_(x, 0.2, 0.4)),
                       ("rrelu-inplace", lambda F, x: F.rrelu(x, inplace=True))]:
        kx, tx = kiln.tensor(EDGES), torch.tensor(EDGES)
        k_version = kx._version
        kout, tout = call(KF, kx), call(TF, tx)
        assert kout is kx and kx._version > k_version, name
        assert_same(kx, tx)
        assert_same(kout, tout)


# --- RReLU's training mode: random slopes from kiln's generator -------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
def test_rrelu_training_slopes(dtype):
    lower, upper = 0.1, 0.3
    kiln.manual_seed(5)
    x = kiln.tensor(np.concatenate([-RNG.uniform(0.5, 2, 20000), RNG.uniform(0, 2, 5000), [0.0]]),
                    dtype=getattr(kiln, dtype))
    y = KF.rrelu(x, lower, upper, training=True)
    assert y.dtype == x.dtype and tuple(y.shape) == tuple(x.shape)
    xs, ys = np.array(x.tolist()), np.array(y.tolist())
    assert (ys[xs >= 0] == xs[xs >= 0]).all()  # the positive part and 0 pass unchanged
    slopes = ys[xs < 0] / xs[xs < 0]
    slack = 1e-2 if dtype == "bfloat16" else 1e-6
    assert slopes.min() >= lower - slack and slopes.max() <= upper + slack
    assert abs(slopes.mean() - (lower + upper) / 2) < 3e-3  # U(lower, upper): mean 0.2, sd 0.058
    assert abs(slopes.std() - (upper - lower) / math.sqrt(12)) < 3e-3
    assert len(np.unique(slopes)) > 1000
    kiln.manual_seed(5)
    assert_same(KF.rrelu(x, lower, upper, training=True), y)  # reproducible from the seed


def test_rrelu_training_gradient_is_the_slope():
    x = kiln.tensor(arr(50, 4), requires_grad=True)
    m = kiln.nn.RReLU(0.2, 0.5)
    assert m.training
    y = m(x)
    g = kiln.tensor(arr(50, 4))
    (gx,) = kiln.autograd.grad(y, [x], g)
    xs, ys = np.array(x.tolist()), np.array(y.tolist())
    slope = np.where(xs > 0, 1.0, ys / np.where(xs == 0, 1.0, xs))
    np.testing.assert_allclose(np.array(gx.tolist()), slope * np.array(g.tolist()), rtol=1e-12)
    assert ((slope[xs < 0] >= 0.2) & (slope[xs < 0] <= 0.5)).all()
    m.eval()  # evaluation: the mean slope, as torch
    tm = torch.nn.RReLU(0.2, 0.5).eval()
    assert_same(m(x).detach(), tm(torch.tensor(xs)))


def test_rrelu_in_place_training_and_module():
    kiln.manual_seed(3)
    x = kiln.tensor(arr(40))
    xs = np.array(x.tolist())
    m = kiln.nn.RReLU(inplace=True)
    out = m(x)
    assert out is x
    ys = np.array(x.tolist())
    assert (ys[xs > 0] == xs[xs > 0]).all()
    slopes = ys[xs < 0] / xs[xs < 0]
    assert ((slopes >= 1 / 8 - 1e-6) & (slopes <= 1 / 3 + 1e-6)).all()


# --- modules: constructor for both libraries, inputs --------------------------------------------------
MODULES = [
    (lambda nn: nn.CELU(), [arr(2, 4)]),
    (lambda nn: nn.CELU(0.5, inplace=True), [arr(2, 4)]),
    (lambda nn: nn.SELU(), [arr(2, 4)]),
    (lambda nn: nn.SELU(True), [arr(2, 4)]),
    (lambda nn: nn.PReLU(), [arr(2, 3, 4)]),
    (lambda nn: nn.PReLU(3, init=0.1), [arr(2, 3, 4)]),
    (lambda nn: nn.RReLU().eval(), [arr(2, 4)]),
    (lambda nn: nn.RReLU(0.1, 0.2, inplace=True).eval(), [arr(2, 4)]),
    (lambda nn: nn.Softmax2d(), [arr(1, 3, 2, 2)]),
    (lambda nn: nn.LocalResponseNorm(2), [arr(2, 4, 3)]),
    (lambda nn: nn.LocalResponseNorm(3, alpha=0.1, beta=0.5, k=2.0), [arr(2, 4, 2, 3)]),
    (lambda nn: nn.CrossMapLRN2d(3), [arr(2, 6, 2, 3)]),
    (lambda nn: nn.CrossMapLRN2d(5, alpha=0.5, beta=1.0, k=2), [arr(1, 7, 3, 2)]),
    (lambda nn: nn.CosineEmbeddingLoss(), [arr(3, 4), arr(3, 4), signs(3)]),
    (lambda nn: nn.CosineEmbeddingLoss(0.2, reduction="none"), [arr(3, 4), arr(3, 4), signs(3)]),
    (lambda nn: nn.HingeEmbeddingLoss(), [arr(3, 4), signs(3, 4)]),
    (lambda nn: nn.HingeEmbeddingLoss(margin=0.3, reduction="sum"), [arr(3, 4), signs(3, 4)]),
    (lambda nn: nn.SoftMarginLoss(), [arr(3, 4), signs(3, 4)]),
    (lambda nn: nn.SoftMarginLoss(reduction="none"), [arr(3, 4), signs(3, 4)]),
    (lambda nn: nn.PoissonNLLLoss(), [arr(3, 4), arr(3, 4, low=0, high=3)]),
    (lambda nn: nn.PoissonNLLLoss(log_input=False, full=True, eps=1e-6, reduction="sum"),
     [arr(3, 4, low=0.1, high=2), arr(3, 4, low=0.1, high=5)]),
    (lambda nn: nn.GaussianNLLLoss(), [arr(3, 4), arr(3, 4), arr(3, 4, low=0.1, high=2)]),
    (lambda nn: nn.GaussianNLLLoss(full=True, eps=1e-3, reduction="none"), [arr(3, 4), arr(3, 4), arr(3, 1, low=0.01, high=1)]),
    (lambda nn: nn.MultiLabelSoftMarginLoss(), [arr(3, 4), arr(3, 4, low=0, high=1)]),
    (lambda nn: nn.MultiLabelSoftMarginLoss(weight=(torch if nn is torch.nn else kiln).tensor([1.0, 2.0, 0.5, 1.0]),
                                            reduction="sum"), [arr(3, 4), arr(3, 4, low=0, high=1)]),
    (lambda nn: nn.MultiMarginLoss(), [arr(3, 4), np.array([0, 3, 1])]),
    (lambda nn: nn.MultiMarginLoss(p=2, margin=0.5, weight=(torch if nn is torch.nn else kiln).tensor(
        [1.0, 2.0, 0.5, 1.0]), reduction="none"), [arr(3, 4), np.array([0, 3, 1])]),
    (lambda nn: nn.MultiLabelMarginLoss(), [arr(2, 4), np.array([[3, 0, -1, 1], [1, 2, 3, 0]])]),
    (lambda nn: nn.TripletMarginLoss(), [arr(3, 4), arr(3, 4), arr(3, 4)]),
    (lambda nn: nn.TripletMarginLoss(margin=0.5, p=1.0, swap=True, reduction="none"),
     [arr(3, 4), arr(3, 4), arr(3, 4)]),
    (lambda nn: nn.TripletMarginWithDistanceLoss(), [arr(3, 4), arr(3, 4), arr(3, 4)]),
    (lambda nn: nn.TripletMarginWithDistanceLoss(distance_function=nn.PairwiseDistance(p=1.0), margin=0.3,
                                                 swap=True), [arr(3, 4), arr(3, 4), arr(3, 4)]),
    (lambda nn: nn.NLLLoss2d(), [arr(2, 3, 2, 2), np.array([[[0, 2], [1, 1]], [[2, 0], [0, 1]]])]),
]


@pytest.mark.parametrize("ctor, arrays", MODULES, ids=range(len(MODULES)))
def test_module_matches_torch(ctor, arrays):
    tm, km = quietly(ctor, torch.nn), quietly(ctor, kiln.nn)
    assert repr(km) == repr(tm)
    tsd = tm.state_dict()
    assert list(km.state_dict()) == list(tsd)
    km.load_state_dict({k: kiln.tensor(v.numpy()) for k, v in tsd.items()})
    got = km(*[make(kiln, a, "float32", False) for a in arrays])
    want = tm(*[make(torch, a, "float32", False) for a in arrays])
    assert_same(got, want.detach())


def test_prelu_parameters_and_gradients_as_torch():
    for num, init in [(1, 0.25), (4, -0.5)]:
        km, tm = kiln.nn.PReLU(num, init, dtype=kiln.float64), torch.nn.PReLU(num, init, dtype=torch.float64)
        assert [n for n, _ in km.named_parameters()] == ["weight"]
        assert_same(km.weight.detach(), tm.weight.detach())
        a = arr(3, 4, 2)
        kx, tx = kiln.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        g = arr(3, 4, 2)
        kg = kiln.autograd.grad(km(kx), [kx, km.weight], kiln.tensor(g))
        tg = torch.autograd.grad(tm(tx), [tx, tm.weight], torch.tensor(g))
        assert_same(kg, tg, 1e-9, 1e-12)
    km.reset_parameters()
    assert np.array(km.weight.tolist()).tolist() == [-0.5] * 4


def test_cross_map_lrn2d_values_and_gradcheck():
    """torch's values (channel 0 stays in every window) over sizes and channel counts; the gradient
    is that of these values (gradcheck), where torch's own backward fails gradcheck."""
    for size in (1, 2, 3, 4, 5, 9):
        for channels in (1, 3, 6):
            a = arr(2, channels, 3, 2)
            km = kiln.nn.CrossMapLRN2d(size, alpha=0.7, beta=0.6, k=1.5)
            tm = torch.nn.CrossMapLRN2d(size, alpha=0.7, beta=0.6, k=1.5)
            assert_same(km(kiln.tensor(a)), tm(torch.tensor(a)), 1e-10, 1e-12)
            assert_same(km(kiln.tensor(a, dtype=kiln.float32)), tm(torch.tensor(a, dtype=torch.float32)))
    x = kiln.tensor(arr(2, 5, 2, 2), requires_grad=True)
    for size in (1, 3, 4):
        assert kiln.autograd.gradcheck(lambda t: kiln.nn.CrossMapLRN2d(size, alpha=0.5)(t), (x,))
    strided = kiln.tensor(np.repeat(arr(1, 4, 2, 3), 2, axis=-1))[..., ::2]
    tstrided = torch.tensor(np.array(strided.tolist()))
    assert_same(kiln.nn.CrossMapLRN2d(3)(strided), torch.nn.CrossMapLRN2d(3)(tstrided))


def test_local_response_norm_empty_and_gradcheck():
    empty = kiln.zeros(0, 3, 4)
    assert KF.local_response_norm(empty, 2) is empty  # as torch, the input itself
    x = kiln.tensor(arr(2, 4, 3), requires_grad=True)
    assert kiln.autograd.gradcheck(lambda t: KF.local_response_norm(t, 3, alpha=0.4), (x,))


def test_pdist_shapes_as_torch():
    for shape in [(0, 3), (1, 3), (4, 0), (6, 2)]:
        a = arr(*shape)
        for p in (0, 1, 2, math.inf):
            assert_same(KF.pdist(kiln.tensor(a), p), TF.pdist(torch.tensor(a), p))
    t = kiln.tensor(arr(3, 4)).t()  # a transposed (column-major) input
    assert_same(KF.pdist(t), TF.pdist(torch.tensor(np.array(t.tolist()))))


def test_deprecated_classes_warn_as_torch():
    for lib in (torch, kiln):
        with pytest.warns(FutureWarning, match="`NLLLoss2d` has been deprecated. Please use `NLLLoss` instead"):
            m = lib.nn.NLLLoss2d(ignore_index=1)
        assert isinstance(m, lib.nn.NLLLoss) and m.ignore_index == 1 and repr(m) == "NLLLoss2d()"
        with pytest.warns(FutureWarning, match="`nn.Container` is deprecated"):
            c = lib.nn.Container(act=lib.nn.ReLU(), lin=lib.nn.Linear(2, 3))
        assert [n for n, _ in c.named_children()] == ["act", "lin"]
        assert repr(c) == "Container(\n  (act): ReLU()\n  (lin): Linear(in_features=2, out_features=3, bias=True)\n)"


def test_not_differentiable_arguments_as_torch():
    x = arr(3, 4)
    for lib, F in ((torch, TF), (kiln, KF)):
        t = lib.tensor(signs(3, 4), requires_grad=True)
        with pytest.raises(RuntimeError, match="'soft_margin_loss' is not differentiable with respect to argument "
                                               "'target'"):
            F.soft_margin_loss(lib.tensor(x), t)
        w = lib.ones(4, dtype=lib.float64, requires_grad=True)
        with pytest.raises(RuntimeError, match="'multi_margin_loss' is not differentiable with respect to argument "
                                               "'weight'"):
            F.multi_margin_loss(lib.tensor(x), lib.tensor([0, 1, 2]), weight=w)
        with lib.no_grad():  # allowed outside autograd
            F.soft_margin_loss(lib.tensor(x), t)
        target = lib.tensor(signs(3, 4), requires_grad=True)  # used only in comparisons: no gradient
        loss = F.hinge_embedding_loss(lib.tensor(x, requires_grad=True), target)
        assert lib.autograd.grad(loss, [target], allow_unused=True) == (None,)


def test_margin_losses_run_in_float32_under_autocast():
    x, y = arr(3, 4), arr(3, 4)
    calls = [
        lambda F, L, a, b: F.cosine_embedding_loss(a, b, L.ones(3)),
        lambda F, L, a, b: F.hinge_embedding_loss(a, b),
        lambda F, L, a, b: F.soft_margin_loss(a, b),
        lambda F, L, a, b: F.poisson_nll_loss(a, b),
        lambda F, L, a, b: F.triplet_margin_loss(a, b, a.flip(0)),
        lambda F, L, a, b: F.multi_margin_loss(a, L.tensor([0, 1, 2])),
        lambda F, L, a, b: F.multilabel_margin_loss(a, L.tensor([[0, 1, -1, 0]] * 3)),
        lambda F, L, a, b: F.multilabel_soft_margin_loss(a, b),  # Python in torch: no float32 policy
        lambda F, L, a, b: F.gaussian_nll_loss(a, b, b.abs()),
    ]
    for call in calls:
        with torch.autocast("cpu", torch.bfloat16):
            want = call(TF, torch, torch.tensor(x, dtype=torch.bfloat16), torch.tensor(y, dtype=torch.bfloat16))
        with kiln.autocast("cpu", kiln.bfloat16):
            got = call(KF, kiln, kiln.tensor(x, dtype=kiln.bfloat16), kiln.tensor(y, dtype=kiln.bfloat16))
        assert_same(got, want)


# --- errors: torch's class, and torch's message where marked ----------------------------------------
ERRORS = [  # (id, call(F, L), the same message as torch)
    ("celu-alpha-0", lambda F, L: F.celu(L.ones(3), 0.0), True),
    ("celu-ints", lambda F, L: F.celu(L.arange(3)), False),
    ("prelu-dtypes", lambda F, L: F.prelu(L.ones(2, 3), L.ones(3, dtype=L.float64)), True),
    ("prelu-channels", lambda F, L: F.prelu(L.ones(2, 3), L.ones(2)), True),
    ("prelu-channels-1d", lambda F, L: F.prelu(L.ones(4), L.ones(2)), True),
    ("prelu-0d-input", lambda F, L: F.prelu(L.tensor(1.0), L.ones(2)), True),
    ("prelu-2d-weight", lambda F, L: F.prelu(L.ones(2, 3), L.ones(1, 3)), True),
    ("prelu-ints", lambda F, L: F.prelu(L.arange(3), L.ones(1, dtype=L.int64)), True),
    ("rrelu-bounds", lambda F, L: F.rrelu(L.ones(3), 0.5, 0.2, training=True), True),
    ("rrelu-bounds-eval", lambda F, L: F.rrelu(L.ones(3), 0.5, 0.2), True),
    ("rrelu-ints", lambda F, L: F.rrelu(L.arange(3), training=True), True),
    ("rrelu-half", lambda F, L: F.rrelu(L.ones(3, dtype=L.float16), training=True), True),
    ("softmax2d-2d", lambda F, L: L.nn.Softmax2d()(L.ones(2, 3)), True),
    ("lrn-2d", lambda F, L: F.local_response_norm(L.ones(2, 3), 2), True),
    ("crossmap-3d", lambda F, L: L.nn.CrossMapLRN2d(3)(L.ones(2, 3, 4)), True),
    ("pdist-1d", lambda F, L: F.pdist(L.ones(3)), True),
    ("pdist-ints", lambda F, L: F.pdist(L.ones(3, 2, dtype=L.int64)), True),
    ("pdist-negative-p", lambda F, L: F.pdist(L.ones(3, 2), -1), True),
    ("pdist-half", lambda F, L: F.pdist(L.ones(3, 2, dtype=L.float16)), True),
    ("cosine_embedding-2d-target", lambda F, L: F.cosine_embedding_loss(L.ones(3, 4), L.ones(3, 4), L.ones(3, 1)),
     True),
    ("cosine_embedding-1d-target", lambda F, L: F.cosine_embedding_loss(L.ones(3, 4), L.ones(4), L.ones(3)), True),
    ("cosine_embedding-0d-target", lambda F, L: F.cosine_embedding_loss(L.ones(3, 4), L.ones(3, 4), L.tensor(1.0)),
     True),
    ("cosine_embedding-reduction", lambda F, L: F.cosine_embedding_loss(L.ones(2, 3), L.ones(2, 3), L.ones(2),
                                                                        reduction="avg"), True),
    ("soft_margin-bcast", lambda F, L: F.soft_margin_loss(L.ones(4), L.ones(3, 4)), True),
    ("poisson-reduction", lambda F, L: F.poisson_nll_loss(L.ones(2), L.ones(2), reduction="x"), True),
    ("gaussian-var-size", lambda F, L: F.gaussian_nll_loss(L.ones(3, 4), L.ones(3, 4), L.ones(2, 4)), True),
    ("gaussian-negative-float", lambda F, L: F.gaussian_nll_loss(L.ones(3, 4), L.ones(3, 4), -1.0), True),
    ("gaussian-negative-var", lambda F, L: F.gaussian_nll_loss(L.ones(3, 4), L.ones(3, 4), -L.ones(3, 4)), True),
    ("gaussian-reduction", lambda F, L: F.gaussian_nll_loss(L.ones(3), L.ones(3), L.ones(3), reduction="x"), True),
    ("multilabel_soft-reduction", lambda F, L: F.multilabel_soft_margin_loss(L.ones(2, 3), L.ones(2, 3),
                                                                             reduction="x"), True),
    ("multi_margin-p", lambda F, L: F.multi_margin_loss(L.ones(3, 4), L.tensor([0, 1, 1]), p=3), True),
    ("multi_margin-weight-2d", lambda F, L: F.multi_margin_loss(L.ones(3, 4), L.tensor([0, 1, 1]),
                                                                weight=L.ones(1, 4)), True),
    ("multi_margin-target-size", lambda F, L: F.multi_margin_loss(L.ones(3, 4), L.tensor([0, 1])), True),
    ("multi_margin-target-2d", lambda F, L: F.multi_margin_loss(L.ones(3, 4), L.tensor([[0, 1, 1]])), True),
    ("multi_margin-target-range", lambda F, L: F.multi_margin_loss(L.ones(3, 4), L.tensor([0, 1, 4])), True),
    ("multi_margin-target-negative", lambda F, L: F.multi_margin_loss(L.ones(3, 4), L.tensor([0, -1, 2])), True),
    ("multi_margin-empty-classes", lambda F, L: F.multi_margin_loss(L.ones(3, 0), L.tensor([0, 1, 1])), True),
    ("multi_margin-3d", lambda F, L: F.multi_margin_loss(L.ones(3, 4, 2), L.tensor([0, 1, 1])), True),
    ("multi_margin-weight-size", lambda F, L: F.multi_margin_loss(L.ones(3, 4), L.tensor([0, 1, 1]),
                                                                  weight=L.ones(3)), True),
    ("multi_margin-weight-dtype", lambda F, L: F.multi_margin_loss(L.ones(3, 4), L.tensor([0, 1, 1]),
                                                                   weight=L.ones(4, dtype=L.float64)), True),
    ("multi_margin-float-target", lambda F, L: F.multi_margin_loss(L.ones(3, 4), L.tensor([0.0, 1.0, 1.0])), True),
    ("multi_margin-int32-target", lambda F, L: F.multi_margin_loss(L.ones(3, 4), L.tensor([0, 1, 1],
                                                                                          dtype=L.int32)), True),
    ("multi_margin-ints", lambda F, L: F.multi_margin_loss(L.ones(3, 4, dtype=L.int64), L.tensor([0, 1, 1])), True),
    ("multi_margin-module-p", lambda F, L: L.nn.MultiMarginLoss(p=3), True),
    ("multi_margin-module-weight", lambda F, L: L.nn.MultiMarginLoss(weight=L.ones(2, 2)), True),
    ("multilabel_margin-target-size", lambda F, L: F.multilabel_margin_loss(L.ones(3, 4), L.tensor([0, 1, 1])), True),
    ("multilabel_margin-target-1d", lambda F, L: F.multilabel_margin_loss(L.ones(4), L.tensor([[0, 1, 2, 3]])), True),
    ("multilabel_margin-range", lambda F, L: F.multilabel_margin_loss(L.ones(2, 4), L.tensor([[0, 1, -1, 5]] * 2)),
     True),
    ("multilabel_margin-below-minus-one", lambda F, L: F.multilabel_margin_loss(L.ones(2, 4),
                                                                                L.tensor([[0, -2, -1, 1]] * 2)), True),
    ("multilabel_margin-3d", lambda F, L: F.multilabel_margin_loss(L.ones(3, 4, 1), L.tensor([[0, 1, 2, 3]] * 3)),
     True),
    ("multilabel_margin-float-target", lambda F, L: F.multilabel_margin_loss(L.ones(2, 4), L.ones(2, 4)), True),
    ("multilabel_margin-bfloat16", lambda F, L: F.multilabel_margin_loss(L.ones(2, 4, dtype=L.bfloat16),
                                                                         L.tensor([[0, -1, 0, 0]] * 2)), True),
    ("triplet-dims", lambda F, L: F.triplet_margin_loss(L.ones(3, 4), L.ones(3, 4), L.ones(4)), True),
    ("triplet-margin", lambda F, L: F.triplet_margin_loss(L.ones(3, 4), L.ones(3, 4), L.ones(3, 4), margin=0), True),
    ("triplet-module-margin", lambda F, L: L.nn.TripletMarginLoss(margin=-1.0), True),
    ("triplet_distance-dims", lambda F, L: F.triplet_margin_with_distance_loss(L.ones(3, 4), L.ones(4), L.ones(4)),
     True),
    ("triplet_distance-reduction", lambda F, L: F.triplet_margin_with_distance_loss(
        L.ones(3, 4), L.ones(3, 4), L.ones(3, 4), reduction="avg"), True),
    ("triplet_distance-margin", lambda F, L: F.triplet_margin_with_distance_loss(
        L.ones(3, 4), L.ones(3, 4), L.ones(3, 4), margin=0.0), True),
    ("triplet_distance-module-margin", lambda F, L: L.nn.TripletMarginWithDistanceLoss(margin=0), True),
]


@pytest.mark.parametrize("desc, call, same_message", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(desc, call, same_message):
    with pytest.raises(Exception) as want:
        call(TF, torch)
    with pytest.raises(Exception) as got:
        call(KF, kiln)
    want_cls = next(c for c in type(want.value).__mro__ if c.__module__ == "builtins")
    assert isinstance(got.value, want_cls), f"{desc}: kiln {type(got.value)} {got.value}; torch {want.value!r}"
    if same_message:
        assert str(got.value) == str(want.value)


# --- ParameterList and ParameterDict: one script, run in both libraries -------------------------------
def _as_text(value, lib):
    """A report of `value` comparable across the libraries (tensors by dtype, shape and values)."""
    if isinstance(value, lib.Tensor):
        return f"{type(value).__name__}{tuple(value.shape)}:{value.dtype}:{np.array(value.tolist()).round(6).tolist()}"
    return str(value).replace("torch.", "kiln.")


def _parameter_list_script(lib):
    nn, log = lib.nn, []
    base = lib.tensor(np.arange(6.0).reshape(2, 3))
    frozen = nn.Parameter(lib.ones(2), requires_grad=False)
    plist = nn.ParameterList([base, frozen, "not a tensor"])
    log += [repr(plist), len(plist), type(plist[0]).__name__, plist[0].requires_grad, plist[1] is frozen,
            plist[1].requires_grad, plist[2], plist[-1], plist[0].data_ptr() == base.data_ptr()]
    plist.append(lib.zeros(3, dtype=lib.float64))
    plist.extend([nn.Parameter(lib.ones(1)), None])
    plist += (lib.ones(2, 2),)
    log += [len(plist), [n for n, _ in plist.named_parameters()], list(plist.state_dict()), repr(plist)]
    plist[2] = lib.full((2,), 3.0)  # a tensor stored by index becomes a Parameter
    log += [type(plist[2]).__name__, [n for n, _ in plist.named_parameters()]]
    sliced = plist[1:6:2]
    log += [type(sliced).__name__, len(sliced), [n for n, _ in sliced.named_parameters()], sliced[0] is plist[1]]
    log += [[type(p).__name__ for p in plist], [k for k in dir(plist) if k.isdigit()]]
    for bad in (lambda: plist[7], lambda: plist[-8], lambda: plist.extend(lib.ones(3)), lambda: plist.extend(3),
                lambda: plist(1), lambda: plist["a"]):
        try:
            bad()
        except Exception as e:  # noqa: BLE001 -- the class and message are what is compared
            log.append(f"{type(e).__name__}: {e}")
    model = nn.Module()
    model.plist = plist
    model.head = nn.ParameterList([lib.ones(3)])
    log += [[n for n, _ in model.named_parameters()], list(model.state_dict())]
    state = {k: v * 2 for k, v in model.state_dict().items()}
    fresh = nn.Module()
    fresh.plist = nn.ParameterList([lib.zeros(2, 3), nn.Parameter(lib.zeros(2), requires_grad=False), "x",
                                    lib.zeros(3, dtype=lib.float64), lib.zeros(1), None, lib.zeros(2, 2)])
    fresh.plist[2] = lib.zeros(2)
    fresh.head = nn.ParameterList([lib.zeros(3)])
    log.append(repr(fresh.load_state_dict(state)))
    log += [_as_text(v, lib) for v in fresh.state_dict().values()]
    log.append(repr(nn.ParameterList()))
    log.append(repr(copy.deepcopy(plist)) == repr(plist))
    log += [p.dtype for p in plist.double() if isinstance(p, lib.Tensor)]
    return [_as_text(v, lib) for v in log]


def test_parameter_list_as_torch():
    for got, want in zip(_parameter_list_script(kiln), _parameter_list_script(torch), strict=True):
        assert got == want


def _parameter_dict_script(lib):
    nn, log = lib.nn, []
    pdict = nn.ParameterDict({"b": lib.ones(2), "a": nn.Parameter(lib.zeros(3), requires_grad=False), "c": 4})
    log += [repr(pdict), list(pdict), list(pdict.keys()), [n for n, _ in pdict.named_parameters()],
            type(pdict["b"]).__name__, pdict["a"].requires_grad, pdict["c"], "a" in pdict, "z" in pdict, len(pdict)]
    ordered = nn.ParameterDict(OrderedDict([("z", lib.ones(1)), ("y", lib.ones(2, 2))]))
    pairs = nn.ParameterDict([("q", lib.ones(1)), ("p", lib.full((2,), 2.0))])
    log += [list(ordered), list(pairs), list(reversed(pairs))]
    pdict["d"] = lib.arange(3.0)
    pdict.update(ordered)
    log += [list(pdict), type(pdict["d"]).__name__, list(pdict.state_dict())]
    log += [pdict.get("zz"), pdict.get("zz", 5), pdict.setdefault("e", lib.ones(1)).shape,
            pdict.setdefault("b").shape]
    popped = pdict.pop("c")
    key, value = pdict.popitem()
    log += [popped, key, value.shape, list(pdict)]
    copied = pdict.copy()
    log += [list(copied), copied["b"] is pdict["b"], type(copied).__name__]
    merged = pairs | ordered
    log += [list(merged), list(ordered.__ror__(pairs))]
    pairs |= {"n": lib.ones(1), "m": lib.ones(1)}
    log += [list(pairs), list(pdict.fromkeys(["u", "v"], lib.ones(1)))]
    log += [[k for k, _ in pdict.items()], [type(v).__name__ for v in pdict.values()]]
    del pdict["b"]
    log += [list(pdict), hasattr(pdict, "b")]
    for bad in (lambda: pdict["missing"], lambda: nn.ParameterDict().__setitem__(1, lib.ones(1)),
                lambda: nn.ParameterDict({"a": 1})[2], lambda: pdict.update(3),
                lambda: pdict.update([("k", lib.ones(1), 1)]), lambda: pdict.update([3]), lambda: pdict(1)):
        try:
            bad()
        except Exception as e:  # noqa: BLE001 -- the class and message are what is compared
            log.append(f"{type(e).__name__}: {e}")
    model = nn.Module()
    model.pdict = pdict
    log += [[n for n, _ in model.named_parameters()], list(model.state_dict())]
    state = {k: v + 1 for k, v in model.state_dict().items()}
    model.load_state_dict(state)
    log += [_as_text(v, lib) for v in model.state_dict().values()]
    pdict.clear()
    log += [len(pdict), repr(pdict), list(model.state_dict())]
    return [_as_text(v, lib) for v in log]


def test_parameter_dict_as_torch():
    got, want = _parameter_dict_script(kiln), _parameter_dict_script(torch)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g == w


class _Mixture:
    """A model holding its weights in a ParameterList and a ParameterDict (as real code does), written
    once for both libraries."""

    def __init__(self, lib):
        nn = lib.nn

        class Mixture(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ParameterList([lib.empty(4, 5), lib.empty(5)])
                self.heads = nn.ParameterDict({"scale": lib.empty(5), "shift": lib.empty(1)})
                self.act = nn.PReLU(5)

            def forward(self, x):
                h = x @ self.layers[0] + self.layers[1]
                for p in self.layers:
                    h = h + 0.1 * p.mean()
                return self.act(h) * self.heads["scale"] + self.heads["shift"]

        self.module = Mixture()


def test_parameter_containers_train_as_torch():
    tm, km = _Mixture(torch).module.double(), _Mixture(kiln).module.double()
    state = {k: arr(*v.shape) for k, v in tm.state_dict().items()}
    tm.load_state_dict({k: torch.tensor(v) for k, v in state.items()})
    km.load_state_dict({k: kiln.tensor(v) for k, v in state.items()})
    assert [n for n, _ in km.named_parameters()] == [n for n, _ in tm.named_parameters()] == [
        "layers.0", "layers.1", "heads.scale", "heads.shift", "act.weight"]
    x = arr(6, 4)
    kl, tl = (km(kiln.tensor(x)) ** 2).sum(), (tm(torch.tensor(x)) ** 2).sum()
    assert_same(kl, tl.detach(), 1e-10, 1e-12)
    kl.backward()
    tl.backward()
    for (name, kp), tp in zip(km.named_parameters(), tm.parameters()):
        assert_same(kp.grad, tp.grad, 1e-9, 1e-12)
    for backend in ("aot_eager", "inductor"):
        kiln._dynamo.reset()
        explained = kiln._dynamo.explain(km)(kiln.tensor(x))
        assert explained.graph_count == 1 and explained.graph_break_count == 0, explained.break_reasons
        km.zero_grad()
        compiled = kiln.compile(km, backend=backend)
        cl = (compiled(kiln.tensor(x)) ** 2).sum()
        assert_same(cl, tl.detach(), 1e-10, 1e-12)
        cl.backward()
        for kp, tp in zip(km.parameters(), tm.parameters()):
            assert_same(kp.grad, tp.grad, 1e-9, 1e-12)
    kiln._dynamo.reset()


# --- one compiled program per group ------------------------------------------------------------------
# modules called by the programs, made outside them (dynamo breaks the graph at a module's construction)
SOFTMAX2D_KILN, CROSS_MAP_KILN = kiln.nn.Softmax2d(), kiln.nn.CrossMapLRN2d(3, alpha=0.2)
if torch is not None:
    SOFTMAX2D_TORCH, CROSS_MAP_TORCH = torch.nn.Softmax2d(), torch.nn.CrossMapLRN2d(3, alpha=0.2)


def _cosine_distance_kiln(a, b):
    return 1 - KF.cosine_similarity(a, b)


def _cosine_distance_torch(a, b):
    return 1 - TF.cosine_similarity(a, b)


def _activations(F, x, w, c):
    """x: (4, 6); w: (3,) PReLU slopes; c: (2, 3, 2, 2)."""
    lib = lib_of(F)
    softmax2d = SOFTMAX2D_KILN if F is KF else SOFTMAX2D_TORCH
    parts = [F.celu(x, 0.6).sum(), (F.selu(x) * x).sum(), F.rrelu(x, 0.1, 0.3).sum(),
             (F.prelu(c, w) * c).sum(), (softmax2d(c) * c).sum(), F.prelu(x, w[:1]).sum()]
    return lib.stack(parts)


def _losses(F, x, y, z, v):
    """x, y, z: (4, 6); v: (4, 6) positive variances."""
    lib = lib_of(F)
    labels = lib.tensor([0, 5, 2, 2])
    multi = lib.tensor([[1, 4, -1, 0, 0, 0], [5, 0, 3, -1, 2, 2], [0, 1, 2, 3, 4, 5], [-1, 0, 0, 0, 0, 0]])
    weight = lib.tensor([1.0, 2.0, 0.5, 1.0, 1.5, 0.7])
    parts = [
        F.cosine_embedding_loss(x, y, lib.tensor([1.0, -1.0, -1.0, 1.0]), 0.1),
        F.hinge_embedding_loss(x, (y > 0).float() * 2 - 1, 0.7),
        F.soft_margin_loss(x, (z > 0).float() * 2 - 1, reduction="sum"),
        F.poisson_nll_loss(x, v),
        F.poisson_nll_loss(v, z.abs() + 1, log_input=False, full=True),
        F.gaussian_nll_loss(x, y, v, full=True),
        F.multilabel_soft_margin_loss(x, (y > 0).float(), weight=weight),
        F.multi_margin_loss(x, labels),
        F.multi_margin_loss(x, labels, p=2, margin=0.5, weight=weight, reduction="sum"),
        F.multilabel_margin_loss(x, multi),
        F.triplet_margin_loss(x, y, z, swap=True),
        F.triplet_margin_loss(x, y, z, p=1.0, reduction="sum"),
        F.triplet_margin_with_distance_loss(
            x, y, z, distance_function=_cosine_distance_kiln if F is KF else _cosine_distance_torch),
    ]
    return lib.stack(parts)


def _normalizations(F, x, c):
    """x: (5, 4); c: (2, 5, 3, 2)."""
    lib, cross_map = lib_of(F), CROSS_MAP_KILN if F is KF else CROSS_MAP_TORCH
    parts = [(F.local_response_norm(c, 3, alpha=0.3) * c).sum(), (F.local_response_norm(c[:, :, 0], 2) ** 2).sum(),
             (cross_map(c) * c).sum(), F.pdist(x).sum(), F.pdist(x, 1).sum(),
             F.pdist(x, math.inf).sum()]
    return lib.stack(parts)


PROGRAMS = [
    ("activations", _activations, [arr(4, 6), arr(3), arr(2, 3, 2, 2)]),
    ("losses", _losses, [arr(4, 6), arr(4, 6), arr(4, 6), arr(4, 6, low=0.2, high=2)]),
    ("normalizations", _normalizations, [arr(5, 4), arr(2, 5, 3, 2)]),
]


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("name, program, arrays", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_compiled_program_matches_eager(name, program, arrays, backend):
    kiln._dynamo.reset()
    ins = [kiln.tensor(a, dtype=kiln.float32, requires_grad=True) for a in arrays]
    eager = program(KF, *ins)
    t_ins = [torch.tensor(a, dtype=torch.float32, requires_grad=True) for a in arrays]
    assert_same(eager, program(TF, *t_ins).detach(), 1e-4, 1e-5)
    explained = kiln._dynamo.explain(lambda *a: program(KF, *a))(*ins)
    assert explained.graph_count == 1 and explained.graph_break_count == 0, explained.break_reasons
    compiled = kiln.compile(lambda *a: program(KF, *a), backend=backend)(*ins)
    assert_same(compiled, eager.detach(), 1e-4, 1e-5)
    g = kiln.tensor(arr(eager.shape[0]), dtype=kiln.float32)
    for ge, gc in zip(kiln.autograd.grad(eager, ins, g), kiln.autograd.grad(compiled, ins, g)):
        assert_same(gc, ge, 1e-4, 1e-5)
    kiln._dynamo.reset()


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_rrelu_training_draws_in_bounds(backend):
    kiln._dynamo.reset()
    x = kiln.tensor(-RNG.uniform(0.5, 2, (64, 8)), dtype=kiln.float32, requires_grad=True)
    compiled = kiln.compile(lambda t: KF.rrelu(t, 0.2, 0.4, training=True) * 2, backend=backend)
    y = compiled(x)
    slopes = np.array(y.tolist()) / np.array(x.tolist()) / 2
    assert slopes.min() >= 0.2 - 1e-6 and slopes.max() <= 0.4 + 1e-6 and len(np.unique(slopes)) > 100
    (gx,) = kiln.autograd.grad(y.sum(), [x])
    np.testing.assert_allclose(np.array(gx.tolist()), 2 * slopes, rtol=1e-5)  # the drawn slopes
    assert not np.array_equal(np.array(compiled(x).tolist()), np.array(y.tolist()))  # fresh draws per call
    kiln._dynamo.reset()
