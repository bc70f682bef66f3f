"""kiln.distributions against torch.distributions (PyTorch 2.13): Normal, Bernoulli, Categorical,
Uniform and kl_divergence on fixed parameters in float32 and float64 (log_prob, entropy, moments,
cdf/icdf, derived probs/logits, float64 gradients of log_prob), rsample gradients with the noise
fixed in both libraries, sample shapes and statistics (20k draws), expand, and validation errors
(torch's exception class and message start)."""

import math

import numpy as np
import pytest

import kiln
import kiln.distributions as KD
from conftest import assert_same, requires_torch, torch

pytestmark = requires_torch

if torch is not None:
    import torch.distributions as TD

RNG = np.random.default_rng(5)
DTYPES = ["float32", "float64"]


def T(lib, a, dtype, requires_grad=False):
    t = lib.tensor(np.asarray(a), dtype=getattr(lib, dtype))
    return t.requires_grad_(True) if requires_grad else t


def same(k, t, dtype):
    """Close at the precision of the result's dtype (a distribution of Python numbers is float32)."""
    tol = (1e-5, 1e-5) if t.dtype == torch.float32 else (1e-10, 1e-12)
    assert_same(k, t.detach(), *tol)


# (id, constructor(D, lib, dtype, rg) -> distribution, values to score(lib, dtype))
LOC, SCALE = RNG.uniform(-2, 2, (3, 4)), RNG.uniform(0.2, 2.0, (3, 4))
PROBS = RNG.uniform(0.05, 0.95, (5,))
CAT_P = RNG.uniform(0.1, 1.0, (3, 4))
CAT_L = RNG.uniform(-3, 3, (3, 4))
LOW, HIGH = RNG.uniform(-2, 0, (4,)), RNG.uniform(0.5, 2, (4,))
X_NORMAL, X_BCAST = RNG.uniform(-3, 3, (2, 3, 4)), RNG.uniform(-3, 3, (4,))
B_LOGITS, Q_LOGITS = RNG.uniform(-4, 4, (2, 5)), RNG.uniform(-2, 2, 5)

CASES = [
    ("normal", lambda D, L, dt, rg: D.Normal(T(L, LOC, dt, rg), T(L, SCALE, dt, rg)),
     lambda L, dt: T(L, X_NORMAL, dt)),
    ("normal-scalar", lambda D, L, dt, rg: D.Normal(0.5, 2.0),
     lambda L, dt: T(L, [0.1, -1.0, 4.0], "float32")),
    ("normal-bcast", lambda D, L, dt, rg: D.Normal(T(L, LOC[0], dt, rg), 1.5),
     lambda L, dt: T(L, X_BCAST, dt)),
    ("bernoulli-probs", lambda D, L, dt, rg: D.Bernoulli(probs=T(L, PROBS, dt, rg)),
     lambda L, dt: T(L, [1.0, 0.0, 1.0, 1.0, 0.0], dt)),
    ("bernoulli-logits", lambda D, L, dt, rg: D.Bernoulli(logits=T(L, B_LOGITS, dt, rg)),
     lambda L, dt: T(L, [[1.0, 0.0, 1.0, 1.0, 0.0], [0.0] * 5], dt)),
    ("categorical-probs", lambda D, L, dt, rg: D.Categorical(probs=T(L, CAT_P, dt, rg)),
     lambda L, dt: L.tensor([[0, 3, 1], [2, 2, 0]])),
    ("categorical-logits", lambda D, L, dt, rg: D.Categorical(logits=T(L, CAT_L, dt, rg)),
     lambda L, dt: L.tensor([1, 0, 3])),
    ("categorical-1d", lambda D, L, dt, rg: D.Categorical(logits=T(L, CAT_L[0], dt, rg)),
     lambda L, dt: L.tensor([[1, 0], [3, 2]])),
    ("uniform", lambda D, L, dt, rg: D.Uniform(T(L, LOW, dt, rg), T(L, HIGH, dt, rg)),
     lambda L, dt: T(L, (LOW + HIGH) / 2 + 0.1, dt)),
    ("uniform-scalar", lambda D, L, dt, rg: D.Uniform(-1.0, 3.0),
     lambda L, dt: T(L, [0.0, 2.9], "float32")),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name, ctor, values", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(name, ctor, values, dtype):
    kd, td = ctor(KD, kiln, dtype, False), ctor(TD, torch, dtype, False)
    assert tuple(kd.batch_shape) == tuple(td.batch_shape) and tuple(kd.event_shape) == tuple(td.event_shape)
    assert repr(kd).replace("kiln.", "") == repr(td).replace("torch.", "")
    same(kd.log_prob(values(kiln, dtype)), td.log_prob(values(torch, dtype)), dtype)
    same(kd.entropy(), td.entropy(), dtype)
    for attr in ("mean", "variance", "stddev"):
        same(getattr(kd, attr), getattr(td, attr), dtype)
    if hasattr(td, "probs") and "categorical" in name or "bernoulli" in name:
        same(kd.probs, td.probs, dtype)
        same(kd.logits, td.logits, dtype)
    if name.startswith(("normal", "uniform")):
        v = values(kiln, dtype)
        same(kd.cdf(v), td.cdf(values(torch, dtype)), dtype)
        q = np.array([0.1, 0.5, 0.9]).reshape((3,) + (1,) * len(kd.batch_shape))
        same(kd.icdf(T(kiln, q, dtype)), td.icdf(T(torch, q, dtype)), dtype)
    if hasattr(td, "enumerate_support") and td.has_enumerate_support:
        assert_same(kd.enumerate_support(), td.enumerate_support())
        assert_same(kd.enumerate_support(expand=False), td.enumerate_support(expand=False))


class _Recorder:
    """Stands in for a library in a CASES constructor: records the tensors it creates."""

    def __init__(self, lib):
        self.lib, self.created = lib, []
        self.float32, self.float64 = lib.float32, lib.float64

    def tensor(self, *args, **kwargs):
        t = self.lib.tensor(*args, **kwargs)
        self.created.append(t)
        return t


@pytest.mark.parametrize("name, ctor, values", [c for c in CASES if "scalar" not in c[0]],
                         ids=[c[0] for c in CASES if "scalar" not in c[0]])
def test_log_prob_and_entropy_gradients(name, ctor, values):
    grads = []
    for D, L in ((KD, kiln), (TD, torch)):
        rec = _Recorder(L)
        dist = ctor(D, rec, "float64", True)
        leaves = [t for t in rec.created if t.requires_grad]
        out = dist.log_prob(values(L, "float64")).sum() + dist.entropy().sum()
        grads.append(L.autograd.grad(out, leaves))
    for a, b in zip(*grads):
        assert_same(a, b, 1e-9, 1e-11)


@pytest.mark.parametrize("dtype", DTYPES)
def test_kl_divergence(dtype):
    def pairs(D, L):
        return [
            (D.Normal(T(L, LOC, dtype), T(L, SCALE, dtype)), D.Normal(T(L, LOC[::-1].copy(), dtype), 1.3)),
            (D.Categorical(probs=T(L, CAT_P, dtype)), D.Categorical(logits=T(L, CAT_L, dtype))),
            # zeros in p (term 0) and in q (inf)
            (D.Categorical(probs=T(L, [[0.0, 0.5, 0.5], [0.2, 0.3, 0.5]], dtype)),
             D.Categorical(probs=T(L, [[0.5, 0.5, 0.0], [0.3, 0.3, 0.4]], dtype))),
            (D.Bernoulli(probs=T(L, PROBS, dtype)), D.Bernoulli(logits=T(L, Q_LOGITS, dtype))),
            (D.Bernoulli(probs=T(L, [0.0, 1.0, 0.3, 0.3, 0.0], dtype)),
             D.Bernoulli(probs=T(L, [0.5, 0.5, 0.0, 1.0, 0.0], dtype))),
            (D.Uniform(T(L, LOW, dtype), T(L, HIGH, dtype)), D.Uniform(T(L, LOW - 0.5, dtype), T(L, HIGH + 1, dtype))),
            (D.Uniform(T(L, [0.0, 0.0, -1.0], dtype), T(L, [1.0, 2.0, 1.0], dtype)),
             D.Uniform(T(L, [0.1, -1.0, -1.0], dtype), T(L, [2.0, 1.5, 1.0], dtype))),
        ]

    for (kp, kq), (tp, tq) in zip(pairs(KD, kiln), pairs(TD, torch)):
        same(KD.kl_divergence(kp, kq), TD.kl_divergence(tp, tq), dtype)
    with pytest.raises(NotImplementedError, match="No KL"):
        KD.kl_divergence(KD.Normal(0.0, 1.0), KD.Uniform(0.0, 1.0))


def test_kl_gradients_float64():
    def run(D, L):
        loc = L.tensor(LOC, requires_grad=True)
        logits = L.tensor(CAT_L, requires_grad=True)
        kl = D.kl_divergence(D.Normal(loc, 1.0), D.Normal(L.tensor(LOC[::-1].copy()), 2.0)).sum() + \
            D.kl_divergence(D.Categorical(logits=logits), D.Categorical(probs=L.tensor(CAT_P))).sum()
        return L.autograd.grad(kl, [loc, logits])

    for a, b in zip(run(KD, kiln), run(TD, torch)):
        assert_same(a, b, 1e-9, 1e-12)


def test_normal_rsample_gradient_with_fixed_noise(monkeypatch):
    eps = RNG.standard_normal((7, 3, 4))
    monkeypatch.setattr(KD.normal, "_standard_normal", lambda shape, dtype: kiln.tensor(eps, dtype=dtype))
    monkeypatch.setattr(TD.normal, "_standard_normal",
                        lambda shape, dtype, device: torch.tensor(eps, dtype=dtype))

    def run(D, L):
        loc, scale = L.tensor(LOC, requires_grad=True), L.tensor(SCALE, requires_grad=True)
        x = D.Normal(loc, scale).rsample((7,))
        assert tuple(x.shape) == (7, 3, 4)
        return (x, *L.autograd.grad((x ** 2).mean(), [loc, scale]))

    for a, b in zip(run(KD, kiln), run(TD, torch)):
        assert_same(a, b.detach(), 1e-12, 1e-12)
    # d mean(rsample) / d loc = 1/12 each, d / d scale = mean of eps over the sample axis / 12
    loc, scale = kiln.tensor(LOC, requires_grad=True), kiln.tensor(SCALE, requires_grad=True)
    gl, gs = kiln.autograd.grad(KD.Normal(loc, scale).rsample((7,)).mean(), [loc, scale])
    np.testing.assert_allclose(np.array(gl.tolist()), 1 / 12 * np.ones((3, 4)) * 1.0, rtol=1e-12)
    np.testing.assert_allclose(np.array(gs.tolist()), eps.sum(0) / (7 * 12), rtol=1e-10)
    assert not KD.Normal(loc, scale).sample((7,)).requires_grad


def test_uniform_rsample_gradient_with_fixed_noise(monkeypatch):
    u = RNG.uniform(0, 1, (6, 4))
    monkeypatch.setattr(kiln, "rand", lambda shape, dtype=None: kiln.tensor(u, dtype=dtype))
    monkeypatch.setattr(torch, "rand", lambda shape, dtype=None, device=None: torch.tensor(u, dtype=dtype))

    def run(D, L):
        low, high = L.tensor(LOW, requires_grad=True), L.tensor(HIGH, requires_grad=True)
        x = D.Uniform(low, high).rsample((6,))
        return (x, *L.autograd.grad(x.sin().sum(), [low, high]))

    for a, b in zip(run(KD, kiln), run(TD, torch)):
        assert_same(a, b.detach(), 1e-12, 1e-12)


def _check_mean(samples, mean, var, n):
    samples = np.array(samples.tolist(), dtype=np.float64)
    se = np.sqrt(np.asarray(var) / n)
    assert np.all(np.abs(samples.mean(0) - mean) < 5 * se + 1e-12), (samples.mean(0), mean, se)


def test_sample_shapes_and_statistics():
    kiln.manual_seed(0)
    n = 20000
    d = KD.Normal(kiln.tensor([0.0, 3.0]), kiln.tensor([1.0, 0.5]))
    s = d.sample((n,))
    assert tuple(s.shape) == (n, 2) and s.dtype == kiln.float32
    _check_mean(s, [0.0, 3.0], [1.0, 0.25], n)
    np.testing.assert_allclose(np.array(s.tolist()).std(0), [1.0, 0.5], rtol=0.03)
    assert tuple(d.sample().shape) == (2,) and tuple(d.sample((2, 3)).shape) == (2, 3, 2)

    p = np.array([0.1, 0.7])
    b = KD.Bernoulli(probs=kiln.tensor(p, dtype=kiln.float64))
    s = b.sample((n,))
    assert tuple(s.shape) == (n, 2) and s.dtype == kiln.float64
    assert set(np.unique(np.array(s.tolist()))) <= {0.0, 1.0}
    _check_mean(s, p, p * (1 - p), n)

    probs = np.array([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]])
    c = KD.Categorical(probs=kiln.tensor(probs))
    s = c.sample((n,))
    assert tuple(s.shape) == (n, 2) and s.dtype == kiln.int64
    onehot = np.eye(3)[np.array(s.tolist())]  # (n, 2, 3)
    _check_mean(kiln.tensor(onehot), probs, probs * (1 - probs), n)
    assert tuple(c.sample().shape) == (2,) and tuple(c.sample((4, 5)).shape) == (4, 5, 2)
    assert tuple(KD.Categorical(logits=kiln.zeros(6)).sample((3,)).shape) == (3,)

    u = KD.Uniform(kiln.tensor([-1.0, 2.0]), kiln.tensor([1.0, 6.0]))
    s = u.sample((n,))
    arr = np.array(s.tolist())
    assert tuple(s.shape) == (n, 2) and (arr >= [-1, 2]).all() and (arr < [1, 6]).all()
    _check_mean(s, [0.0, 4.0], [4 / 12, 16 / 12], n)


def test_expand():
    for D, L in ((KD, kiln), (TD, torch)):
        d = D.Normal(L.tensor([0.0, 1.0]), L.tensor([1.0, 2.0])).expand((3, 2))
        assert tuple(d.batch_shape) == (3, 2) and tuple(d.sample().shape) == (3, 2)
        c = D.Categorical(logits=L.zeros(4)).expand((5,))
        assert tuple(c.batch_shape) == (5,) and tuple(c.logits.shape) == (5, 4)
        b = D.Bernoulli(probs=L.tensor(0.3)).expand((2,))
        assert tuple(b.sample((3,)).shape) == (3, 2)
        u = D.Uniform(0.0, 1.0).expand((2, 2))
        assert tuple(u.rsample().shape) == (2, 2)


ERRORS = [
    ("normal-scale", lambda D, L: D.Normal(L.tensor([0.0, 1.0]), L.tensor([1.0, 0.0])), "Expected parameter scale"),
    ("normal-nan-loc", lambda D, L: D.Normal(L.tensor(float("nan")), 1.0), "Expected parameter loc"),
    ("bernoulli-probs", lambda D, L: D.Bernoulli(probs=L.tensor([0.5, 1.5])), "Expected parameter probs"),
    ("bernoulli-both", lambda D, L: D.Bernoulli(probs=L.tensor(0.5), logits=L.tensor(0.0)), "Either `probs`"),
    ("bernoulli-none", lambda D, L: D.Bernoulli(), "Either `probs`"),
    ("categorical-probs", lambda D, L: D.Categorical(probs=L.tensor([0.5, -0.5, 1.0])), "Expected parameter probs"),
    ("categorical-0d", lambda D, L: D.Categorical(probs=L.tensor(1.0)), "`probs` parameter must be at least"),
    ("categorical-logits-0d", lambda D, L: D.Categorical(logits=L.tensor(1.0)), "`logits` parameter must be"),
    ("uniform-order", lambda D, L: D.Uniform(L.tensor([0.0, 2.0]), L.tensor([1.0, 1.0])), "Expected parameter low"),
    ("normal-value-nan", lambda D, L: D.Normal(0.0, 1.0).log_prob(L.tensor(float("nan"))), "Expected value argument"),
    ("bernoulli-value", lambda D, L: D.Bernoulli(probs=L.tensor([0.3])).log_prob(L.tensor([0.5])),
     "Expected value argument"),
    ("categorical-value", lambda D, L: D.Categorical(logits=L.zeros(3)).log_prob(L.tensor(3)),
     "Expected value argument"),
    ("uniform-value", lambda D, L: D.Uniform(0.0, 1.0).log_prob(L.tensor(1.5)), "Expected value argument"),
    ("value-not-tensor", lambda D, L: D.Normal(0.0, 1.0).log_prob(0.5), "The value argument to log_prob"),
    ("value-shape", lambda D, L: D.Normal(L.zeros(3), L.ones(3)).log_prob(L.zeros(2)), "Value is not broadcastable"),
    ("broadcast-args", lambda D, L: D.Normal("a", 1.0), None),
]


@pytest.mark.parametrize("desc, call, msg", ERRORS, ids=[e[0] for e in ERRORS])
def test_validation_errors(desc, call, msg):
    with pytest.raises(Exception) as want:
        call(TD, torch)
    with pytest.raises(Exception) as got:
        call(KD, kiln)
    assert type(got.value) is type(want.value), f"kiln {got.value!r}; torch {want.value!r}"
    if msg is not None:
        assert str(got.value).startswith(msg) and str(want.value).startswith(msg)
        if "invalid values" in str(want.value):  # same text up to the printed tensor
            head = str(want.value).split("\n")[0].replace("torch.", "")
            assert str(got.value).split("\n")[0].replace("kiln.", "") == head


def test_validate_args_off():
    for D, L in ((KD, kiln), (TD, torch)):
        d = D.Normal(L.tensor(0.0), L.tensor(-1.0), validate_args=False)  # no error
        assert math.isnan(d.log_prob(L.tensor(0.0)).item())
        u = D.Uniform(0.0, 1.0, validate_args=False)
        assert u.log_prob(L.tensor(2.0)).item() == -math.inf
        D.Distribution.set_default_validate_args(False)
        try:
            D.Normal(0.0, -1.0)
        finally:
            D.Distribution.set_default_validate_args(True)
        with pytest.raises(ValueError):
            D.Normal(0.0, -1.0)


def test_constraints_reprs_and_checks():
    from kiln.distributions import constraints as KC
    from torch.distributions import constraints as TC

    for name in ("real", "positive", "unit_interval", "boolean", "simplex", "real_vector", "nonnegative"):
        assert repr(getattr(KC, name)) == repr(getattr(TC, name))
        assert getattr(KC, name).event_dim == getattr(TC, name).event_dim
    assert repr(KC.integer_interval(0, 3)) == repr(TC.integer_interval(0, 3))
    assert repr(KC.interval(0.0, 2.0)) == repr(TC.interval(0.0, 2.0))
    v = np.array([[0.2, 0.8], [0.5, 0.6], [-0.1, 1.1]])
    for c in ("simplex", "real_vector", "unit_interval", "positive"):
        assert getattr(KC, c).check(kiln.tensor(v)).tolist() == getattr(TC, c).check(torch.tensor(v)).tolist()
    assert KC.is_dependent(KD.Uniform(0.0, 1.0).arg_constraints["low"]) is False
    assert KC.is_dependent(KD.Categorical.support) and KD.Categorical(logits=kiln.zeros(3)).support.upper_bound == 2
