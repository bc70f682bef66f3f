"""The issue-17 additions to kiln.nn against torch.nn (PyTorch 2.13): GLU, LogSigmoid, Softmin,
Softsign, Tanhshrink, Hardshrink, Softshrink, Threshold, the padding modules, PixelShuffle/Unshuffle,
ChannelShuffle, CosineSimilarity, PairwiseDistance, KLDivLoss, MarginRankingLoss, Bilinear, nn.Buffer,
F.normalize and F.gumbel_softmax.

Every functional runs on the same data in both libraries (float32 and float64, contiguous and strided
inputs): values, dtypes and shapes equal, and float64 gradients from `autograd.grad` equal. Modules
must print as torch's and compute the same (Bilinear with torch's weights loaded). Bad input raises
torch's exception class. One inductor-compiled program calls every functional and must match eager
in values and gradients. gumbel_softmax is checked statistically, and exactly with its noise fixed.
"""

import warnings

import numpy as np
import pytest

import kiln
import kiln.nn.functional as KF
from conftest import assert_same, requires_torch, torch

pytestmark = requires_torch

if torch is not None:
    import torch.nn.functional as TF

RNG = np.random.default_rng(17)


def arr(*shape, low=-2.0, high=2.0):
    return RNG.uniform(low, high, size=shape)


def lib_of(F):
    return kiln if F is KF else torch


def make(lib, a, dtype, strided, requires_grad=False):
    """numpy array -> tensor of lib; strided: a view with stride 2 in the last dimension."""
    dt = getattr(lib, dtype)
    if strided:
        t = lib.tensor(np.repeat(a, 2, axis=-1), dtype=dt)[..., ::2]
        assert not t.is_contiguous() or a.shape[-1] <= 1
    else:
        t = lib.tensor(a, dtype=dt)
    return t.requires_grad_(requires_grad) if requires_grad else t


# (id, fn(F, *inputs), input arrays, which inputs are differentiable)
FUNCS = [
    ("glu", lambda F, x: F.glu(x), [arr(3, 6)], [0]),
    ("glu-dim0", lambda F, x: F.glu(x, 0), [arr(4, 5)], [0]),
    ("logsigmoid", lambda F, x: F.logsigmoid(x), [np.array([[-60.0, -25.0, -3.0, 0.0], [1e-3, 3.0, 25.0, 60.0]])],
     [0]),
    ("softsign", lambda F, x: F.softsign(x), [arr(3, 4)], [0]),
    ("tanhshrink", lambda F, x: F.tanhshrink(x), [arr(3, 4)], [0]),
    ("hardshrink", lambda F, x: F.hardshrink(x, 0.7), [arr(4, 6)], [0]),
    ("softshrink", lambda F, x: F.softshrink(x), [arr(4, 6)], [0]),
    ("softshrink-0", lambda F, x: F.softshrink(x, 0.0), [arr(4, 6)], [0]),
    ("softmin", lambda F, x: F.softmin(x, dim=1), [arr(3, 5)], [0]),
    ("softmin-dtype", lambda F, x: F.softmin(x, 0, dtype=lib_of(F).float64), [arr(3, 5)], [0]),
    ("normalize", lambda F, x: F.normalize(x), [arr(3, 4)], [0]),
    ("normalize-p1-dim0", lambda F, x: F.normalize(x, p=1.0, dim=0), [arr(3, 4)], [0]),
    ("normalize-zero-row", lambda F, x: F.normalize(x, dim=-1), [np.concatenate([arr(2, 4), np.zeros((1, 4))])],
     [0]),
    ("pixel_shuffle", lambda F, x: F.pixel_shuffle(x, 2), [arr(2, 8, 3, 2)], [0]),
    ("pixel_shuffle-3d", lambda F, x: F.pixel_shuffle(x, 3), [arr(9, 2, 3)], [0]),
    ("pixel_shuffle-5d", lambda F, x: F.pixel_shuffle(x, 2), [arr(2, 1, 4, 2, 2)], [0]),
    ("pixel_unshuffle", lambda F, x: F.pixel_unshuffle(x, 2), [arr(2, 3, 4, 6)], [0]),
    ("pixel_unshuffle-3d", lambda F, x: F.pixel_unshuffle(x, 3), [arr(1, 3, 6)], [0]),
    ("channel_shuffle", lambda F, x: F.channel_shuffle(x, 3), [arr(2, 6, 2, 2)], [0]),
    ("cosine_similarity", lambda F, a, b: F.cosine_similarity(a, b), [arr(4, 5), arr(4, 5)], [0, 1]),
    ("cosine_similarity-bcast", lambda F, a, b: F.cosine_similarity(a, b, dim=-1), [arr(3, 1, 4), arr(2, 4)],
     [0, 1]),
    ("cosine_similarity-zero", lambda F, a, b: F.cosine_similarity(a, b, dim=1, eps=1e-3),
     [np.concatenate([arr(2, 3), np.zeros((1, 3)), 1e-4 * arr(1, 3)]), arr(4, 3)], [0, 1]),
    ("pairwise_distance", lambda F, a, b: F.pairwise_distance(a, b), [arr(4, 5), arr(4, 5)], [0, 1]),
    ("pairwise_distance-p1-keepdim", lambda F, a, b: F.pairwise_distance(a, b, p=1.0, keepdim=True),
     [arr(4, 5), arr(5)], [0, 1]),
    ("pairwise_distance-p3", lambda F, a, b: F.pairwise_distance(a, b, p=3.0, eps=1e-3), [arr(2, 3, 4), arr(2, 3, 4)],
     [0, 1]),
    ("pairwise_distance-inf", lambda F, a, b: F.pairwise_distance(a, b, p=float("inf")), [arr(4, 5), arr(4, 5)],
     [0, 1]),
    ("bilinear", lambda F, a, b, w, c: F.bilinear(a, b, w, c), [arr(5, 3), arr(5, 4), arr(2, 3, 4), arr(2)],
     [0, 1, 2, 3]),
    ("bilinear-3d-nobias", lambda F, a, b, w: F.bilinear(a, b, w), [arr(2, 3, 3), arr(2, 3, 4), arr(2, 3, 4)],
     [0, 1, 2]),
    ("bilinear-1d", lambda F, a, b, w, c: F.bilinear(a, b, w, c), [arr(3), arr(4), arr(2, 3, 4), arr(2)],
     [0, 1, 2, 3]),
    ("kl_div-batchmean", lambda F, x, t: F.kl_div(x, t, reduction="batchmean"),
     [arr(4, 5), np.concatenate([arr(3, 5, low=0, high=1), np.zeros((1, 5))])], [0, 1]),
    ("kl_div-none", lambda F, x, t: F.kl_div(x, t, reduction="none"), [arr(4, 5), arr(4, 5, low=0, high=1)], [0, 1]),
    ("kl_div-sum-logtarget", lambda F, x, t: F.kl_div(x, t, reduction="sum", log_target=True),
     [arr(4, 5), arr(4, 5)], [0, 1]),
    ("kl_div-mean", lambda F, x, t: F.kl_div(x, t), [arr(4, 5), arr(4, 5, low=0, high=1)], [0, 1]),
    ("kl_div-legacy", lambda F, x, t: F.kl_div(x, t, size_average=False), [arr(4, 5), arr(4, 5, low=0, high=1)],
     [0, 1]),
    ("margin_ranking", lambda F, a, b, y: F.margin_ranking_loss(a, b, y, margin=0.3),
     [arr(6), arr(6), np.sign(arr(6))], [0, 1]),
    ("margin_ranking-none", lambda F, a, b, y: F.margin_ranking_loss(a, b, y, reduction="none"),
     [arr(2, 3), arr(2, 3), np.sign(arr(2, 3))], [0, 1]),
    ("margin_ranking-sum", lambda F, a, b, y: F.margin_ranking_loss(a, b, y, 0.5, reduction="sum"),
     [arr(2, 3), arr(2, 3), np.sign(arr(2, 3))], [0, 1]),
]


def call_quietly(fn, F, inputs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(F, *inputs)


@pytest.mark.parametrize("strided", [False, True], ids=["contig", "strided"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name, fn, arrays, diff", FUNCS, ids=[f[0] for f in FUNCS])
def test_functional_matches_torch(name, fn, arrays, diff, dtype, strided):
    k_in = [make(kiln, a, dtype, strided, i in diff and dtype == "float64") for i, a in enumerate(arrays)]
    t_in = [make(torch, a, dtype, strided, i in diff and dtype == "float64") for i, a in enumerate(arrays)]
    got, want = call_quietly(fn, KF, k_in), call_quietly(fn, TF, t_in)
    assert_same(got, want.detach())
    if dtype == "float64":
        g = np.random.default_rng(1).uniform(-1, 1, size=tuple(want.shape))
        k_grads = kiln.autograd.grad(got, [k_in[i] for i in diff], kiln.tensor(g))
        t_grads = torch.autograd.grad(want, [t_in[i] for i in diff], torch.tensor(g))
        for kg, tg in zip(k_grads, t_grads):
            assert_same(kg, tg, 1e-6, 1e-9)


def test_kl_div_mean_warns_and_bad_reduction():
    x, t = kiln.tensor(arr(2, 3)), kiln.tensor(arr(2, 3, low=0, high=1))
    with pytest.warns(UserWarning, match="'batchmean' divides only by the batch size"):
        KF.kl_div(x, t)
    with pytest.raises(ValueError):
        KF.kl_div(x, t, reduction="batch")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        KF.kl_div(x, t, reduction="batchmean")
    # a 0-dim input: batchmean is sum, as torch
    assert_same(KF.kl_div(kiln.tensor(0.3), kiln.tensor(0.5), reduction="batchmean"),
                TF.kl_div(torch.tensor(0.3), torch.tensor(0.5), reduction="batchmean"))


def test_hardshrink_softshrink_nan_and_ints():
    x = np.array([float("nan"), -1.0, 0.2, 0.5, -0.5, 3.0])
    for fn in (lambda F, v: F.hardshrink(v), lambda F, v: F.softshrink(v)):
        assert_same(fn(KF, kiln.tensor(x)), fn(TF, torch.tensor(x)))
    a, b = np.arange(6).reshape(2, 3), np.arange(1, 7).reshape(2, 3)
    assert_same(KF.cosine_similarity(kiln.tensor(a), kiln.tensor(b, dtype=kiln.float32)),
                TF.cosine_similarity(torch.tensor(a), torch.tensor(b, dtype=torch.float32)))


ERRORS = [
    ("glu-scalar", lambda F, L: F.glu(L.tensor(1.0))),
    ("glu-odd", lambda F, L: F.glu(L.ones(2, 3))),
    ("glu-bad-dim", lambda F, L: F.glu(L.ones(2, 4), 2)),
    ("softshrink-negative", lambda F, L: F.softshrink(L.ones(3), -0.5)),
    ("pixel_shuffle-2d", lambda F, L: F.pixel_shuffle(L.ones(4, 4), 2)),
    ("pixel_shuffle-channels", lambda F, L: F.pixel_shuffle(L.ones(1, 6, 2, 2), 2)),
    ("pixel_shuffle-factor", lambda F, L: F.pixel_shuffle(L.ones(1, 4, 2, 2), 0)),
    ("pixel_unshuffle-height", lambda F, L: F.pixel_unshuffle(L.ones(1, 1, 3, 4), 2)),
    ("pixel_unshuffle-width", lambda F, L: F.pixel_unshuffle(L.ones(1, 1, 4, 3), 2)),
    ("channel_shuffle-groups", lambda F, L: F.channel_shuffle(L.ones(1, 6, 2), 4)),
    ("channel_shuffle-2d", lambda F, L: F.channel_shuffle(L.ones(2, 6), 2)),
    ("cosine_similarity-ints", lambda F, L: F.cosine_similarity(L.ones(2, 3, dtype=L.int64), L.ones(2, 3, dtype=L.int64))),
    ("cosine_similarity-shapes", lambda F, L: F.cosine_similarity(L.ones(2, 3), L.ones(3, 3))),
    ("bilinear-dims", lambda F, L: F.bilinear(L.ones(2, 3), L.ones(4), L.ones(2, 3, 4))),
    ("bilinear-batch", lambda F, L: F.bilinear(L.ones(2, 3), L.ones(3, 4), L.ones(2, 3, 4))),
    ("bilinear-in1", lambda F, L: F.bilinear(L.ones(2, 2), L.ones(2, 4), L.ones(2, 3, 4))),
    ("bilinear-in2", lambda F, L: F.bilinear(L.ones(2, 3), L.ones(2, 5), L.ones(2, 3, 4))),
    ("bilinear-bias", lambda F, L: F.bilinear(L.ones(2, 3), L.ones(2, 4), L.ones(2, 3, 4), L.ones(3))),
    ("margin_ranking-dims", lambda F, L: F.margin_ranking_loss(L.ones(3), L.ones(3), L.ones(1, 3))),
    ("margin_ranking-reduction", lambda F, L: F.margin_ranking_loss(L.ones(3), L.ones(3), L.ones(3), reduction="x")),
    ("kl_div-shapes", lambda F, L: F.kl_div(L.ones(2, 3), L.ones(4, 3), reduction="sum")),
    ("reflection-pad-too-big", lambda F, L: L.nn.ReflectionPad1d(3)(L.ones(1, 2, 3))),
    ("bilinear-module-in1", lambda F, L: L.nn.Bilinear(0, 2, 3)),
]


@pytest.mark.parametrize("desc, call", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(desc, call):
    with pytest.raises(Exception) as want:
        call(TF, torch)
    with pytest.raises(Exception) as got:
        call(KF, kiln)
    want_cls = next(c for c in type(want.value).__mro__ if c.__module__ == "builtins")
    assert isinstance(got.value, want_cls), f"{desc}: kiln {type(got.value)} {got.value}; torch {want.value!r}"


# --- modules: constructor for both libraries, inputs -----------------------------------------------
MODULES = [
    (lambda nn: nn.GLU(), [arr(2, 4)]),
    (lambda nn: nn.GLU(dim=0), [arr(4, 3)]),
    (lambda nn: nn.LogSigmoid(), [arr(2, 3)]),
    (lambda nn: nn.Softmin(dim=1), [arr(2, 3)]),
    (lambda nn: nn.Softsign(), [arr(2, 3)]),
    (lambda nn: nn.Tanhshrink(), [arr(2, 3)]),
    (lambda nn: nn.Hardshrink(), [arr(2, 3)]),
    (lambda nn: nn.Hardshrink(1.2), [arr(2, 3)]),
    (lambda nn: nn.Softshrink(0.3), [arr(2, 3)]),
    (lambda nn: nn.Threshold(0.1, 20.0), [arr(2, 3)]),
    (lambda nn: nn.Threshold(0.1, 20, inplace=True), [arr(2, 3)]),
    (lambda nn: nn.ConstantPad1d(2, 3.5), [arr(2, 3, 4)]),
    (lambda nn: nn.ConstantPad1d((1, 0), -1), [arr(3, 4)]),
    (lambda nn: nn.ConstantPad2d((1, 2, 0, 3), 0.5), [arr(1, 2, 3, 4)]),
    (lambda nn: nn.ConstantPad3d(1, 2.0), [arr(1, 2, 2, 3, 2)]),
    (lambda nn: nn.ConstantPad3d((1, 0, 0, 2, 1, 1), 0), [arr(2, 2, 3, 2)]),
    (lambda nn: nn.ZeroPad1d(2), [arr(2, 3, 4)]),
    (lambda nn: nn.ZeroPad2d((1, 0, 2, 0)), [arr(1, 2, 3, 4)]),
    (lambda nn: nn.ReflectionPad1d(2), [arr(2, 3, 4)]),
    (lambda nn: nn.ReflectionPad1d((3, 1)), [arr(3, 5)]),
    (lambda nn: nn.ReflectionPad2d(1), [arr(1, 2, 3, 4)]),
    (lambda nn: nn.ReflectionPad2d((2, 0, 1, 2)), [arr(2, 3, 4)]),
    (lambda nn: nn.ReplicationPad1d((1, 2)), [arr(2, 3, 4)]),
    (lambda nn: nn.ReplicationPad2d(2), [arr(1, 2, 3, 4)]),
    (lambda nn: nn.PixelShuffle(2), [arr(1, 8, 2, 3)]),
    (lambda nn: nn.PixelUnshuffle(2), [arr(1, 2, 4, 6)]),
    (lambda nn: nn.ChannelShuffle(2), [arr(2, 4, 3, 3)]),
    (lambda nn: nn.CosineSimilarity(), [arr(3, 4), arr(3, 4)]),
    (lambda nn: nn.CosineSimilarity(dim=0, eps=1e-6), [arr(3, 4), arr(3, 4)]),
    (lambda nn: nn.PairwiseDistance(), [arr(3, 4), arr(3, 4)]),
    (lambda nn: nn.PairwiseDistance(p=1.0, eps=0.0, keepdim=True), [arr(3, 4), arr(3, 4)]),
    (lambda nn: nn.KLDivLoss(reduction="batchmean"), [arr(3, 4), arr(3, 4, low=0, high=1)]),
    (lambda nn: nn.KLDivLoss(reduction="sum", log_target=True), [arr(3, 4), arr(3, 4)]),
    (lambda nn: nn.MarginRankingLoss(), [arr(5), arr(5), np.sign(arr(5))]),
    (lambda nn: nn.MarginRankingLoss(margin=0.5, reduction="none"), [arr(5), arr(5), np.sign(arr(5))]),
    (lambda nn: nn.Bilinear(3, 4, 5), [arr(6, 3), arr(6, 4)]),
    (lambda nn: nn.Bilinear(3, 4, 2, bias=False), [arr(2, 6, 3), arr(2, 6, 4)]),
    (lambda nn: nn.Identity(3, unused=True), [arr(2)]),
]


@pytest.mark.parametrize("ctor, arrays", MODULES, ids=range(len(MODULES)))
def test_module_matches_torch(ctor, arrays):
    tm, km = ctor(torch.nn), ctor(kiln.nn)
    assert repr(km) == repr(tm)
    tsd = tm.state_dict()
    assert list(km.state_dict()) == list(tsd)
    assert [tuple(p.shape) for p in km.parameters()] == [tuple(p.shape) for p in tm.parameters()]
    km.load_state_dict({k: kiln.tensor(v.numpy()) for k, v in tsd.items()})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = km(*[kiln.tensor(a, dtype=kiln.float32) for a in arrays])
        want = tm(*[torch.tensor(a, dtype=torch.float32) for a in arrays])
    assert_same(got, want.detach())


def test_bilinear_init_as_torch():
    m = kiln.nn.Bilinear(4, 3, 2)
    bound = 1 / np.sqrt(4)
    assert tuple(m.weight.shape) == (2, 4, 3) and tuple(m.bias.shape) == (2,)
    for p in (m.weight, m.bias):
        v = np.array(p.tolist())
        assert (np.abs(v) <= bound).all() and np.abs(v).max() > bound / 4
    m64 = kiln.nn.Bilinear(2, 2, 2, dtype=kiln.float64)
    assert m64.weight.dtype == kiln.float64


def test_buffer_registration_as_torch():
    for lib in (torch, kiln):
        m = lib.nn.Module()
        base = lib.ones(2, requires_grad=True)
        m.a = lib.nn.Buffer(base)
        m.b = lib.nn.Buffer(lib.zeros(3), persistent=False)
        m.c = lib.nn.Buffer()
        m.plain = lib.ones(1)  # a plain tensor stays an attribute
        assert [n for n, _ in m.named_buffers()] == ["a", "b", "c"]
        assert list(m.state_dict()) == ["a", "c"]
        assert "plain" not in dict(m.named_buffers())
        assert isinstance(m.a, lib.nn.Buffer) and type(m.a) is lib.Tensor
        assert not isinstance(lib.ones(1), lib.nn.Buffer)
        assert m.a.requires_grad and m.a.grad_fn is None and m.a.persistent and not m.b.persistent
        assert tuple(m.c.shape) == (0,)
        m.b = lib.nn.Buffer(lib.ones(3), persistent=True)  # re-assigning a Buffer takes its flag
        assert list(m.state_dict()) == ["a", "b", "c"]
        m.b = lib.ones(4)  # a plain tensor to an existing buffer keeps it a buffer
        assert tuple(m.b.shape) == (4,) and "b" in m.state_dict()
        with pytest.raises(KeyError):
            m.plain = lib.nn.Buffer(lib.ones(1))  # an existing attribute
        with pytest.raises(TypeError):
            m.b = 3
        m2 = lib.nn.Module()
        m2.child = m
        assert [n for n, _ in m2.named_buffers()] == ["child.a", "child.b", "child.c"]


def _fixed_gumbels(shape, seed=3):
    return np.random.default_rng(seed).gumbel(size=shape)


@pytest.mark.parametrize("hard", [False, True])
@pytest.mark.parametrize("tau, dim", [(1.0, -1), (0.5, 0)])
def test_gumbel_softmax_fixed_noise(monkeypatch, hard, tau, dim):
    logits = arr(4, 5)
    g = _fixed_gumbels(logits.shape)
    monkeypatch.setattr(KF, "_gumbel_noise", lambda lg: kiln.tensor(g, dtype=lg.dtype))

    def exponential_(self, *args, **kwargs):  # torch draws E ~ Exp(1) and uses -log(E)
        with torch.no_grad():
            return self.copy_(torch.tensor(np.exp(-g), dtype=self.dtype))

    monkeypatch.setattr(torch.Tensor, "exponential_", exponential_)
    kx = kiln.tensor(logits, requires_grad=True)
    tx = torch.tensor(logits, requires_grad=True)
    got = KF.gumbel_softmax(kx, tau=tau, hard=hard, dim=dim)
    want = TF.gumbel_softmax(tx, tau=tau, hard=hard, dim=dim)
    assert_same(got, want.detach(), 1e-9, 1e-12)
    w = arr(4, 5)
    assert_same(kiln.autograd.grad(got, [kx], kiln.tensor(w))[0], torch.autograd.grad(want, [tx], torch.tensor(w))[0],
                1e-7, 1e-10)
    if hard:
        assert sorted(set(np.array(got.tolist()).ravel())) == [0.0, 1.0]


def test_gumbel_softmax_statistics():
    kiln.manual_seed(0)
    logits = np.log(np.array([0.1, 0.2, 0.3, 0.4]))
    n = 20000
    x = kiln.tensor(np.tile(logits, (n, 1)), dtype=kiln.float32)
    hard = np.array(KF.gumbel_softmax(x, hard=True).tolist())
    assert (hard.sum(1) == 1).all()
    freq = hard.mean(0)
    se = np.sqrt(0.25 / n)
    assert np.abs(freq - np.array([0.1, 0.2, 0.3, 0.4])).max() < 5 * se
    soft = KF.gumbel_softmax(x, tau=0.5)
    np.testing.assert_allclose(np.array(soft.sum(1).tolist()), 1.0, rtol=1e-5)
    with pytest.warns(UserWarning, match="deprecated"):
        KF.gumbel_softmax(x[:2], eps=1e-5)


# --- one compiled program over every functional -----------------------------------------------------
def _program(F, x, y, w, t, p):
    """x, y: (4, 6); w: (3, 6, 6) bilinear weight; t: (4, 6) probabilities; p: (2, 8, 2, 2)."""
    parts = [
        F.glu(x).sum(), F.logsigmoid(x).sum(), F.softsign(x).sum(), F.tanhshrink(x).sum(),
        F.hardshrink(x, 0.3).sum(), F.softshrink(x, 0.3).sum(), (F.softmin(x, 1) * y).sum(),
        (F.normalize(x) * y).sum(), F.cosine_similarity(x, y).sum(), F.pairwise_distance(x, y).sum(),
        F.bilinear(x, y, w).sum(), F.kl_div(F.log_softmax(x, 1), t, reduction="batchmean"),
        F.margin_ranking_loss(x, y, (x - y).sign(), margin=0.2),
        (F.pixel_shuffle(p, 2) * F.pixel_shuffle(p.flip(0), 2)).sum(),
        (F.pixel_unshuffle(p, 2) * F.channel_shuffle(F.pixel_unshuffle(p, 2), 4)).sum(),
        (F.pad(p, (1, 0, 1, 1), mode="reflect") ** 2).sum(), (F.pad(p, (1, 0, 0, 2), mode="replicate") ** 2).sum(),
    ]
    return kiln.stack(parts) if F is KF else torch.stack(parts)


def test_compiled_program_matches_eager():
    kiln._dynamo.reset()
    arrays = [arr(4, 6), arr(4, 6), arr(3, 6, 6), RNG.dirichlet(np.ones(6), size=4), arr(2, 8, 2, 2)]
    ins = [kiln.tensor(a, dtype=kiln.float32, requires_grad=True) for a in arrays]
    eager = _program(KF, *ins)
    compiled = kiln.compile(lambda *a: _program(KF, *a), backend="inductor")(*ins)
    assert_same(compiled, eager.detach(), 1e-4, 1e-5)
    t_ins = [torch.tensor(a, dtype=torch.float32, requires_grad=True) for a in arrays]
    assert_same(eager, _program(TF, *t_ins).detach(), 1e-4, 1e-5)
    g = kiln.tensor(arr(eager.shape[0]), dtype=kiln.float32)
    for ge, gc in zip(kiln.autograd.grad(eager, ins, g), kiln.autograd.grad(compiled, ins, g)):
        assert_same(gc, ge, 1e-4, 1e-5)
    kiln._dynamo.reset()
