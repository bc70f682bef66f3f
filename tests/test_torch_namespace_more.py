"""Issue 17's torch-namespace names against PyTorch 2.13: the torch-level forms of nn.functional ops
(kiln/_nn_toplevel.py: aten's signatures, int reductions, (values, indices) tuples, embedding_bag's
four outputs), the special functions (kiln/_special_more.py: polygamma, mvlgamma, igamma/igammac,
also against mpmath, nextafter bit for bit), the utilities (kiln/_utilities_more.py: logspace,
isin, histogram, trapezoid, combinations, lu_unpack, triangular_solve, ...), the Tensor methods of
kiln/_tensor_methods_extra.py (index_reduce, complex conversions, random fills by their moments,
as_subclass, apply_), the global switches and constants; values on strided float32/float64 inputs,
float64 gradients, torch's errors, and compiled programs (inductor, aot_eager) against eager.
"""

import math
import warnings

import numpy as np
import pytest

import kiln
from conftest import assert_same, requires_torch, torch

pytestmark = requires_torch

RNG = np.random.default_rng(2013)


def arr(*shape, low=-2.0, high=2.0):
    return RNG.uniform(low, high, size=shape)


def make(lib, a, dtype, strided=False, requires_grad=False):
    """numpy array -> tensor of lib (integer arrays stay int64); strided: a view with stride 2 in
    the last dimension."""
    dt = lib.int64 if a.dtype.kind == "i" else getattr(lib, dtype)
    t = lib.tensor(np.repeat(a, 2, axis=-1), dtype=dt)[..., ::2] if strided and a.ndim else lib.tensor(a, dtype=dt)
    return t.requires_grad_(True) if requires_grad else t


def quietly(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args)


def outputs(value):
    return list(value) if isinstance(value, (tuple, list)) else [value]


def run_both(fn, arrays, diff, dtype, strided):
    """fn(lib, *tensors) in kiln and torch on the same data; values compared, then the float64
    gradients of one weighted sum of the floating outputs."""
    k_in = [make(kiln, a, dtype, strided, i in diff and dtype == "float64") for i, a in enumerate(arrays)]
    t_in = [make(torch, a, dtype, strided, i in diff and dtype == "float64") for i, a in enumerate(arrays)]
    k_out, t_out = outputs(quietly(fn, kiln, *k_in)), outputs(quietly(fn, torch, *t_in))
    tol = (1e-10, 1e-12) if dtype == "float64" else (1e-5, 1e-6)
    assert len(k_out) == len(t_out)
    for ko, to in zip(k_out, t_out):
        assert_same(ko, to.detach(), *tol)
    if dtype != "float64" or not diff:
        return
    k_loss = sum((o * kiln.tensor(w)).sum() for o, w in _weights(k_out))
    t_loss = sum((o * torch.tensor(w)).sum() for o, w in _weights(t_out))
    wrt = [i for i in diff]
    k_grads = kiln.autograd.grad(k_loss, [k_in[i] for i in wrt], allow_unused=True)
    t_grads = torch.autograd.grad(t_loss, [t_in[i] for i in wrt], allow_unused=True)
    for kg, tg in zip(k_grads, t_grads):
        if tg is None:
            assert kg is None or not kg.abs().sum().item()
        else:  # torch's float64 celu backward is off by ~3e-8 (alpha's reciprocal rounded to float32)
            assert_same(kg, tg, 5e-8, 1e-10)


def _weights(outs):
    rng = np.random.default_rng(5)
    return [(o, rng.uniform(0.5, 1.5, tuple(o.shape))) for o in outs if o.dtype.is_floating_point and o.requires_grad]


# --- torch-level forms of nn.functional ops -----------------------------------------------------------
W3 = arr(4, 3, 3)
NN_FUNCS = [
    ("celu", lambda L, x: L.celu(x, 0.7), [arr(3, 6)], [0]),
    ("selu", lambda L, x: L.selu(x), [arr(3, 6)], [0]),
    ("prelu", lambda L, x, w: L.prelu(x, w), [arr(2, 3, 4), arr(3, low=0.1, high=0.4)], [0, 1]),
    ("prelu-method", lambda L, x, w: x.prelu(w), [arr(2, 3, 4), arr(1)], [0, 1]),
    ("rrelu-eval", lambda L, x: L.rrelu(x, 0.1, 0.3), [arr(3, 6)], [0]),
    ("hardshrink", lambda L, x: L.hardshrink(x, 0.6), [arr(3, 6)], [0]),
    ("hardshrink-method", lambda L, x: x.hardshrink(), [arr(3, 6)], [0]),
    ("conv1d", lambda L, x, w: L.conv1d(x, w, None, 2, 1), [arr(2, 3, 9), arr(4, 3, 3)], [0, 1]),
    ("conv3d", lambda L, x, w: L.conv3d(x, w, padding=1), [arr(1, 2, 4, 4, 4), arr(3, 2, 2, 2, 2)], [0, 1]),
    ("conv_transpose1d", lambda L, x, w: L.conv_transpose1d(x, w, None, 2, 1, 1), [arr(2, 4, 5), W3], [0, 1]),
    ("conv_transpose2d", lambda L, x, w: L.conv_transpose2d(x, w, stride=2), [arr(1, 2, 3, 4), arr(2, 3, 2, 2)],
     [0, 1]),
    ("conv_transpose3d", lambda L, x, w: L.conv_transpose3d(x, w), [arr(1, 2, 2, 3, 2), arr(2, 1, 2, 2, 2)], [0, 1]),
    ("avg_pool1d", lambda L, x: L.avg_pool1d(x, 3), [arr(2, 3, 10)], [0]),
    ("avg_pool1d-pad", lambda L, x: L.avg_pool1d(x, 3, 2, 1, True, False), [arr(2, 3, 10)], [0]),
    ("max_pool1d", lambda L, x: L.max_pool1d(x, 3), [arr(2, 3, 10)], [0]),
    ("max_pool1d_with_indices", lambda L, x: L.max_pool1d_with_indices(x, 2, (), 1, 2), [arr(2, 3, 9)], [0]),
    ("max_pool3d", lambda L, x: L.max_pool3d(x, 2, 1), [arr(1, 2, 4, 3, 5)], [0]),
    ("adaptive_avg_pool1d", lambda L, x: L.adaptive_avg_pool1d(x, 4), [arr(2, 3, 10)], [0]),
    ("adaptive_max_pool1d", lambda L, x: L.adaptive_max_pool1d(x, 3), [arr(2, 3, 10)], [0]),
    ("pdist", lambda L, x: L.pdist(x, 3.0), [arr(5, 3)], [0]),
    ("pixel_shuffle", lambda L, x: L.pixel_shuffle(x, 2), [arr(1, 8, 2, 3)], [0]),
    ("pixel_unshuffle", lambda L, x: L.pixel_unshuffle(x, 2), [arr(1, 2, 4, 6)], [0]),
    ("channel_shuffle", lambda L, x: L.channel_shuffle(x, 3), [arr(2, 6, 2, 2)], [0]),
    ("native_channel_shuffle", lambda L, x: L.native_channel_shuffle(x, 2), [arr(2, 6, 3)], []),
    ("cosine_similarity", lambda L, a, b: L.cosine_similarity(a, b, 0), [arr(4, 5), arr(4, 5)], [0, 1]),
    ("pairwise_distance", lambda L, a, b: L.pairwise_distance(a, b, 1.5, 1e-6, True), [arr(4, 5), arr(4, 5)], [0, 1]),
    ("bilinear", lambda L, a, b, w, c: L.bilinear(a, b, w, c), [arr(3, 4), arr(3, 2), arr(5, 4, 2), arr(5)],
     [0, 1, 2, 3]),
    ("instance_norm", lambda L, x, w, b: L.instance_norm(x, w, b, None, None, True, 0.1, 1e-5, False),
     [arr(2, 3, 5), arr(3), arr(3)], [0, 1, 2]),
    ("rms_norm", lambda L, x, w: L.rms_norm(x, [4], w, 1e-6), [arr(3, 4), arr(4)], [0, 1]),
    ("kl_div", lambda L, x, y: L.kl_div(x, y), [arr(3, 4), arr(3, 4, low=0.1, high=1.0)], [0, 1]),
    ("kl_div-sum-log", lambda L, x, y: L.kl_div(x, y, 2, log_target=True), [arr(3, 4), arr(3, 4)], [0, 1]),
    ("kl_div-none", lambda L, x, y: L.kl_div(x, y, 0), [arr(3, 4), arr(3, 4, low=0.1, high=1.0)], [0, 1]),
    ("kl_div-enum-5", lambda L, x, y: L.kl_div(x, y, 5), [arr(3, 4), arr(3, 4, low=0.1, high=1.0)], [0, 1]),
    ("margin_ranking_loss", lambda L, a, b, y: L.margin_ranking_loss(a, b, y.sign(), 0.3, 2),
     [arr(6), arr(6), arr(6)], [0, 1]),
    ("hinge_embedding_loss", lambda L, x, y: L.hinge_embedding_loss(x, y.sign(), 1.5), [arr(3, 4), arr(3, 4)], [0]),
    ("cosine_embedding_loss", lambda L, a, b, y: L.cosine_embedding_loss(a, b, y.sign(), 0.2, 0),
     [arr(4, 5), arr(4, 5), arr(4)], [0, 1]),
    ("poisson_nll_loss", lambda L, x, y: L.poisson_nll_loss(x, y, True, True, 1e-8, 1),
     [arr(3, 4), arr(3, 4, low=0.0, high=3.0)], [0]),
    ("poisson_nll_loss-rate", lambda L, x, y: L.poisson_nll_loss(x, y, False, False, 1e-6, 2),
     [arr(3, 4, low=0.1, high=2.0), arr(3, 4, low=0.0, high=3.0)], [0]),
    ("triplet_margin_loss", lambda L, a, p, n: L.triplet_margin_loss(a, p, n, 0.5, 1.0, 1e-6, True),
     [arr(4, 5), arr(4, 5), arr(4, 5)], [0, 1, 2]),
    ("alpha_dropout-eval", lambda L, x: L.alpha_dropout(x, 0.5, False) * 1, [arr(3, 4)], [0]),
    ("feature_dropout-p0", lambda L, x: L.feature_dropout(x, 0.0, True) * 1, [arr(3, 4)], [0]),
    ("grid_sampler", lambda L, x, g: L.grid_sampler(x, g, 0, 1, False), [arr(1, 2, 4, 5), arr(1, 3, 2, 2, low=-1.1,
                                                                                                   high=1.1)], [0, 1]),
    ("grid_sampler_2d-nearest", lambda L, x, g: L.grid_sampler_2d(x, g, 1, 2, True),
     [arr(2, 1, 3, 3), arr(2, 2, 4, 2, low=-1, high=1)], [0]),
    ("grid_sampler_3d", lambda L, x, g: L.grid_sampler_3d(x, g, 0, 0, True),
     [arr(1, 2, 3, 3, 3), arr(1, 2, 2, 2, 3, low=-1, high=1)], [0, 1]),
    ("affine_grid_generator", lambda L, t: L.affine_grid_generator(t, [2, 3, 4, 5], False), [arr(2, 2, 3)], [0]),
]


@pytest.mark.parametrize("strided", [False, True], ids=["contiguous", "strided"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name, fn, arrays, diff", NN_FUNCS, ids=[f[0] for f in NN_FUNCS])
def test_nn_toplevel_matches_torch(name, fn, arrays, diff, dtype, strided):
    run_both(fn, arrays, diff, dtype, strided)


def test_nn_toplevel_results_are_plain_tuples_and_in_place_forms():
    x = kiln.tensor(arr(2, 3, 8), dtype=kiln.float32)
    assert type(kiln.max_pool1d_with_indices(x, 2)) is tuple and type(kiln.adaptive_max_pool1d(x, 2)) is tuple
    for name, args in (("celu_", (0.5,)), ("selu_", ()), ("rrelu_", (0.2, 0.4))):
        data = arr(3, 4)
        k, t = kiln.tensor(data), torch.tensor(data)
        assert getattr(kiln, name)(k, *args) is k
        getattr(torch, name)(t, *args)
        assert_same(k, t, 1e-6, 1e-7)
    for name in ("alpha_dropout", "feature_alpha_dropout", "feature_dropout"):  # eval and p=0: the input itself
        assert getattr(kiln, name)(x, 0.5, False) is x and getattr(kiln, name)(x, 0.0, True) is x
        y = x.clone()
        assert getattr(kiln, name + "_")(y, 1.0, True) is y
        assert_same(y, getattr(torch, name + "_")(torch.tensor(x.numpy()), 1.0, True))


def test_feature_dropout_drops_whole_channels():
    kiln.manual_seed(3)
    x = kiln.ones(8, 64, 5)
    out = kiln.feature_dropout(x, 0.5, True)
    per_channel = out.amax(-1), out.amin(-1)
    assert (per_channel[0] == per_channel[1]).all().item()  # a channel is all 0 or all 2
    assert set(out.unique().tolist()) <= {0.0, 2.0} and 0.3 < (out == 0).float().mean().item() < 0.7
    alpha = kiln.feature_alpha_dropout(kiln.randn(4, 256, 3), 0.3, True)
    assert alpha.shape == (4, 256, 3)


def test_rrelu_generator_draws_in_bounds_and_repeats():
    x = kiln.tensor(-np.abs(arr(200)) - 0.1)
    a = kiln.rrelu(x, 0.2, 0.4, True, kiln.Generator().manual_seed(7))
    b = kiln.rrelu(x, 0.2, 0.4, True, kiln.Generator().manual_seed(7))
    slope = a / x
    assert kiln.equal(a, b) and slope.min().item() >= 0.2 - 1e-12 and slope.max().item() <= 0.4 + 1e-12


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize("padding_idx", [None, 2, -1])
def test_embedding_bag_four_outputs_as_torch(mode, padding_idx, dtype):
    weight = arr(10, 3)
    indices = np.array([1, 2, 4, 5, 4, 3, 2, 9, 9, 0])
    offsets = np.array([0, 4, 4, 7])
    k_w, t_w = make(kiln, weight, dtype, requires_grad=dtype == "float64"), make(torch, weight, dtype,
                                                                                  requires_grad=dtype == "float64")
    k_out = kiln.embedding_bag(k_w, kiln.tensor(indices), kiln.tensor(offsets), False, mode, False, None, False,
                               padding_idx)
    t_out = torch.embedding_bag(t_w, torch.tensor(indices), torch.tensor(offsets), False, mode, False, None, False,
                                padding_idx)
    for k, t in zip(k_out, t_out):
        assert_same(k, t.detach(), 1e-6, 1e-7)
    if dtype == "float64":
        g = arr(*k_out[0].shape)
        (k_out[0] * kiln.tensor(g)).sum().backward()
        (t_out[0] * torch.tensor(g)).sum().backward()
        assert_same(k_w.grad, t_w.grad, 1e-12, 1e-12)


def test_embedding_bag_per_sample_weights_and_last_offset():
    weight, indices = arr(6, 4), np.array([0, 5, 2, 2, 1, 3])
    psw = arr(6)
    args = dict(scale_grad_by_freq=False, mode=0, sparse=False)
    k = kiln.embedding_bag(kiln.tensor(weight, dtype=kiln.float32), kiln.tensor(indices), kiln.tensor([0, 2, 6]),
                           per_sample_weights=kiln.tensor(psw, dtype=kiln.float32), include_last_offset=True, **args)
    t = torch.embedding_bag(torch.tensor(weight, dtype=torch.float32), torch.tensor(indices), torch.tensor([0, 2, 6]),
                            per_sample_weights=torch.tensor(psw, dtype=torch.float32), include_last_offset=True,
                            **args)
    for ko, to in zip(k, t):
        assert_same(ko, to, 1e-6, 1e-6)


# --- special functions ---------------------------------------------------------------------------------
SPECIAL_X = np.concatenate([np.linspace(-5.3, 12.0, 61), [0.0, -1.0, -2.0, 1e-8, 0.25, 40.0, 300.0, 1e4,
                                                           math.inf, -math.inf, math.nan]])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 7])
def test_polygamma_matches_torch(n, dtype):
    tol = (1e-10, 0) if dtype == "float64" else (2e-5, 1e-6)
    k, t = kiln.polygamma(n, make(kiln, SPECIAL_X, dtype)), torch.polygamma(n, make(torch, SPECIAL_X, dtype))
    assert_same(k, t, *tol)
    x = make(kiln, SPECIAL_X[:40], dtype, strided=True)  # strided, and the method (self first)
    assert_same(x.polygamma(n), torch.polygamma(n, make(torch, SPECIAL_X[:40], dtype, strided=True)), *tol)


def test_polygamma_gradients_integer_input_and_in_place():
    data = np.array([-2.5, -0.3, 0.2, 1.0, 3.7, 9.0])
    for n in (0, 1, 2, 3):
        k = kiln.tensor(data, requires_grad=True)
        t = torch.tensor(data, requires_grad=True)
        (gk,) = kiln.autograd.grad(kiln.polygamma(n, k).sum(), k, create_graph=True)
        (gt,) = torch.autograd.grad(torch.polygamma(n, t).sum(), t, create_graph=True)
        assert_same(gk, gt.detach(), 1e-9, 1e-12)
        (ggk,) = kiln.autograd.grad(gk.sum(), k)  # double backward: polygamma(n + 2)
        (ggt,) = torch.autograd.grad(gt.sum(), t)
        assert_same(ggk, ggt, 1e-8, 1e-10)
    assert_same(kiln.polygamma(1, kiln.tensor([1, 2, 3])), torch.polygamma(1, torch.tensor([1, 2, 3])))
    x = kiln.tensor([0.5, 2.0])
    assert x.polygamma_(2) is x
    assert_same(x, torch.tensor([0.5, 2.0]).polygamma_(2), 1e-6)


@pytest.mark.parametrize("p", [1, 2, 5])
def test_mvlgamma_values_and_gradients(p):
    data = arr(3, 4, low=(p - 1) / 2 + 0.05, high=6.0)
    run_both(lambda L, x: L.mvlgamma(x, p), [data], [0], "float64", True)
    run_both(lambda L, x: x.mvlgamma(p), [data], [0], "float32", False)
    k, t = kiln.tensor(data), torch.tensor(data)
    assert k.mvlgamma_(p) is k
    assert_same(k, t.mvlgamma_(p), 1e-12)


IGAMMA_A = np.array([1e-3, 0.1, 0.5, 1.0, 2.0, 5.0, 20.0, 25.0, 50.0, 150.0, 300.0, 1000.0])
IGAMMA_X = np.array([1e-4, 0.05, 0.3, 0.5, 0.8, 1.0, 1.05, 1.5, 2.0, 4.9, 5.0, 5.1, 10.0, 19.0, 22.0, 45.0, 50.0,
                     55.0, 100.0, 150.0, 300.0, 320.0, 1000.0, 1050.0])


@pytest.mark.parametrize("name", ["igamma", "igammac"])
def test_igamma_matches_torch_over_a_grid(name):
    # torch's Temme expansion (a > 20, x near a) is itself off by up to ~1.6e-9 relative: see the mpmath test
    a, x = np.meshgrid(IGAMMA_A, IGAMMA_X, indexing="ij")
    k = getattr(kiln, name)(kiln.tensor(a), kiln.tensor(x))
    t = getattr(torch, name)(torch.tensor(a), torch.tensor(x))
    assert_same(k, t, 3e-9, 1e-300)
    # in float32 torch's Q of a tiny `a` is off by up to 1.4e-4 (kiln's float64 value is mpmath's)
    assert_same(getattr(kiln, name)(kiln.tensor(a, dtype=kiln.float32), kiln.tensor(x, dtype=kiln.float32)),
                getattr(torch, name)(torch.tensor(a, dtype=torch.float32), torch.tensor(x, dtype=torch.float32)),
                2e-4, 1e-30)


def test_igamma_is_accurate_against_mpmath():
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    for a, x in ((25.0, 19.0), (50.0, 45.0), (100.0, 100.0), (0.5, 0.3), (3.0, 40.0), (1e-3, 0.9), (1000.0, 1050.0)):
        p = kiln.igamma(kiln.tensor(a, dtype=kiln.float64), kiln.tensor(x, dtype=kiln.float64)).item()
        q = kiln.igammac(kiln.tensor(a, dtype=kiln.float64), kiln.tensor(x, dtype=kiln.float64)).item()
        assert p == pytest.approx(float(mpmath.gammainc(a, 0, x, regularized=True)), rel=1e-12)
        assert q == pytest.approx(float(mpmath.gammainc(a, x, mpmath.inf, regularized=True)), rel=1e-12)


def test_igamma_special_values_broadcasting_and_gradients():
    a = np.array([0.0, -1.0, 0.0, 2.0, math.inf, 2.0, math.inf, math.nan, 3.0])
    x = np.array([1.0, 1.0, 0.0, 0.0, 1.0, math.inf, math.inf, 1.0, -1.0])
    for name in ("igamma", "igammac"):
        assert_same(getattr(kiln, name)(kiln.tensor(a), kiln.tensor(x)), getattr(torch, name)(torch.tensor(a),
                                                                                              torch.tensor(x)))
        # broadcasting, dtype promotion and the gradient of x (the only one torch has)
        ka, kx = kiln.tensor(arr(3, 1, low=0.5, high=4), dtype=kiln.float32), kiln.tensor(arr(4, low=0.1, high=6),
                                                                                           requires_grad=True)
        ta, tx = torch.tensor(ka.numpy()), torch.tensor(kx.detach().numpy(), requires_grad=True)
        kv, tv = getattr(kiln, name)(ka, kx), getattr(torch, name)(ta, tx)
        assert_same(kv, tv.detach(), 1e-12)
        kv.sum().backward()
        tv.sum().backward()
        assert_same(kx.grad, tx.grad, 1e-8, 1e-12)  # torch's formula takes lgamma of the float32 `a`
        ka.requires_grad_(True)
        with pytest.raises(NotImplementedError, match=f"the derivative for '{name}: input' is not implemented."):
            getattr(kiln, name)(ka, kx.detach()).sum().backward()
    k, t = kiln.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0])
    assert k.igamma_(kiln.tensor([0.5, 3.0])) is k and k.igammac(kiln.tensor(1.0)).shape == (2,)
    assert_same(k, t.igamma_(torch.tensor([0.5, 3.0])))
    k, t = kiln.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0])
    assert_same(k.igammac_(kiln.tensor([0.5, 3.0])), t.igammac_(torch.tensor([0.5, 3.0])))


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
def test_nextafter_bit_for_bit(dtype):
    x = np.array([0.0, -0.0, 1.0, -1.0, 1e-30, 3.5, -2.25, 1e5, math.inf, -math.inf, math.nan, 2.0])
    y = np.array([1.0, -1.0, 0.0, -2.0, 0.0, 3.5, 5.0, math.inf, 0.0, -math.inf, 1.0, math.nan])
    k = kiln.nextafter(kiln.tensor(x).to(getattr(kiln, dtype)), kiln.tensor(y).to(getattr(kiln, dtype)))
    t = torch.nextafter(torch.tensor(x).to(getattr(torch, dtype)), torch.tensor(y).to(getattr(torch, dtype)))
    assert k.dtype == getattr(kiln, dtype)
    assert np.array_equal(np.array(k.float().tolist()), np.array(t.float().tolist()), equal_nan=True)
    assert [math.copysign(1, v) for v in k.float().tolist()] == [math.copysign(1, v) for v in t.float().tolist()]


def test_nextafter_method_in_place_promotion_and_gradient():
    k = kiln.tensor([1.0, 2.0], requires_grad=True)
    other = kiln.tensor([2.0, 0.0], dtype=kiln.float64, requires_grad=True)
    out = k.nextafter(other)
    assert out.dtype == kiln.float64
    out.sum().backward()
    t = torch.tensor([1.0, 2.0], requires_grad=True)
    t_other = torch.tensor([2.0, 0.0], dtype=torch.float64, requires_grad=True)
    t.nextafter(t_other).sum().backward()
    assert_same(k.grad, t.grad)
    assert_same(other.grad, t_other.grad)
    v = kiln.tensor([1.0, 2.0])
    assert v.nextafter_(kiln.tensor([0.0, 3.0])) is v
    assert_same(v, torch.tensor([1.0, 2.0]).nextafter_(torch.tensor([0.0, 3.0])))


# --- utilities -----------------------------------------------------------------------------------
INT_DATA = np.array([[3, 1, 4, 1], [5, 9, 2, 6]])
UTILITIES = [
    ("logspace", lambda L: L.logspace(-1, 2, 7)),
    ("logspace-base-dtype", lambda L: L.logspace(0, 3, 4, base=2, dtype=L.float64)),
    ("logspace-int", lambda L: L.logspace(0, 2, 3, base=2, dtype=L.int64)),
    ("range", lambda L: L.range(1, 4)),
    ("range-step", lambda L: L.range(0, 1, 0.25, dtype=L.float64)),
    ("cartesian_prod", lambda L: L.cartesian_prod(L.tensor([1, 2]), L.tensor([3, 4, 5]), L.tensor([6]))),
    ("combinations", lambda L: L.combinations(L.tensor([1.5, 2.5, 3.5, 4.5]), 3)),
    ("combinations-replacement", lambda L: L.combinations(L.tensor([1, 2, 3]), 2, True)),
    ("combinations-too-long", lambda L: L.combinations(L.tensor([1, 2]), 3)),
    ("combinations-0", lambda L: L.combinations(L.tensor([1, 2]), 0)),
    ("block_diag", lambda L: L.block_diag(L.tensor(2.0), L.ones(2), L.ones(2, 3, dtype=L.int64), L.zeros(0, 2))),
    ("vander", lambda L: L.vander(L.tensor([1, 2, 3]), 4)),
    ("vander-increasing", lambda L: L.vander(L.tensor([1.5, -2.0]), increasing=True)),
    ("vander-0", lambda L: L.vander(L.tensor([1.5, -2.0]), 0)),
    ("row_stack", lambda L: L.row_stack([L.tensor([1, 2]), L.tensor([[3, 4], [5, 6]])])),
    ("unravel_index", lambda L: L.unravel_index(L.tensor([[5, 7], [0, 23]]), (2, 3, 4))),
    ("unravel_index-int", lambda L: L.unravel_index(L.tensor(5), 7)),
    ("trapezoid-dx", lambda L: L.trapezoid(L.tensor(INT_DATA), dx=0.5)),
    ("trapz-int", lambda L: L.trapz(L.tensor(INT_DATA), dim=0)),
    ("trapezoid-x", lambda L: L.trapezoid(L.tensor(INT_DATA, dtype=L.float64), L.tensor([0.0, 1.0, 3.0, 3.5]))),
    ("trapezoid-empty", lambda L: L.trapezoid(L.zeros(3, 0))),
    ("cumulative_trapezoid", lambda L: L.cumulative_trapezoid(L.tensor(INT_DATA), dim=0)),
    ("cumulative_trapezoid-x", lambda L: L.cumulative_trapezoid(L.tensor(INT_DATA, dtype=L.float64),
                                                                L.tensor([[0.0, 1, 3, 3.5], [1, 2, 2, 4]]))),
    ("isin", lambda L: L.isin(L.tensor(INT_DATA), L.tensor([1, 9, 7]))),
    ("isin-invert-float", lambda L: L.isin(L.tensor([1.0, math.nan, 2.5]), L.tensor([2.5, math.nan]), invert=True)),
    ("isin-scalar-element", lambda L: L.isin(3, L.tensor([1, 3]))),
    ("isin-scalar-test", lambda L: L.isin(L.tensor([1, 3]), 3)),
    ("isin-mixed", lambda L: L.isin(L.tensor([1, 2, 3]), L.tensor([2.0, 3.5]))),
    ("histogram", lambda L: L.histogram(L.tensor([1.0, 2.0, 1.0, 2.5, 7.0]), bins=4)),
    ("histogram-range-weight", lambda L: L.histogram(L.tensor([1.0, 2.0, 1.0, -1.0, 3.0]), 3, range=(0.0, 3.0),
                                                     weight=L.tensor([1.0, 2.0, 0.5, 4.0, 3.0]))),
    ("histogram-edges-density", lambda L: L.tensor([0.5, 1.5, 2.0, 2.25, 9.0], dtype=L.float64).histogram(
        L.tensor([0.0, 1.0, 2.0, 2.25], dtype=L.float64), density=True)),
    ("histogram-equal", lambda L: L.histogram(L.tensor([1.0, 1.0]), 3)),
    ("chain_matmul", lambda L: L.chain_matmul(L.tensor(arr(2, 3)), L.tensor(arr(3, 4)), L.tensor(arr(4, 1)))),
    ("detach", lambda L: L.detach(L.tensor([1.0]))),
    ("unsafe_chunk", lambda L: L.unsafe_chunk(L.arange(7), 3)),
    ("unsafe_split", lambda L: L.arange(7).unsafe_split(3)),
    ("unsafe_split_with_sizes", lambda L: L.unsafe_split_with_sizes(L.arange(6).reshape(2, 3), [1, 2], 1)),
]


@pytest.mark.parametrize("name, fn", UTILITIES, ids=[u[0] for u in UTILITIES])
def test_utilities_match_torch(name, fn):
    state = RNG.bit_generator.state
    k = quietly(fn, kiln)
    RNG.bit_generator.state = state
    t = quietly(fn, torch)
    if type(t).__module__ == "torch.return_types":
        assert type(k).__name__ == type(t).__name__ and k.__match_args__ == t.__match_args__
    else:
        assert type(k) is type(t) or not isinstance(t, (tuple, list))
    assert_same(k, t, 1e-6, 1e-6)


def test_range_and_deprecations_warn_as_torch():
    with pytest.warns(UserWarning, match="torch.range is deprecated"):
        kiln.range(0, 2)
    with pytest.warns(UserWarning, match="torch.range is deprecated"):
        kiln.range(0, 2)  # every call
    kiln.set_warn_always(True)
    try:
        with pytest.warns(UserWarning, match="torch.chain_matmul is deprecated"):
            kiln.chain_matmul(kiln.ones(2, 2), kiln.ones(2, 2))
        with pytest.warns(UserWarning, match="torch.triangular_solve is deprecated"):
            kiln.triangular_solve(kiln.ones(2, 1), kiln.eye(2))
        with pytest.warns(UserWarning, match="torch.lu is deprecated in favor of torch.linalg.lu_factor"):
            kiln.lu(kiln.eye(2))
    finally:
        kiln.set_warn_always(False)


def test_utilities_gradients_as_torch():
    y = arr(3, 5)
    run_both(lambda L, y: L.trapezoid(y, dx=0.3), [y], [0], "float64", True)
    run_both(lambda L, y, x: L.trapezoid(y, x, dim=0), [y, arr(3)], [0, 1], "float64", True)
    run_both(lambda L, y, x: L.cumulative_trapezoid(y, x), [y, arr(5)], [0, 1], "float64", True)
    run_both(lambda L, a, b: L.block_diag(a, b), [arr(2, 2), arr(1, 3)], [0, 1], "float64", False)
    # torch's vander backward fails (its cumprod_ writes over a saved slice): kiln's by finite differences
    assert kiln.autograd.gradcheck(lambda x: kiln.vander(x, 4), (kiln.tensor(arr(3), requires_grad=True),))
    run_both(lambda L, x: L.combinations(x, 2), [arr(4)], [0], "float64", True)
    run_both(lambda L, a, b: L.cartesian_prod(a, b), [arr(2), arr(3)], [0, 1], "float64", True)
    run_both(lambda L, a, b, c: quietly(L.chain_matmul, a, b, c), [arr(2, 3), arr(3, 4), arr(4, 2)], [0, 1, 2],
             "float64", True)
    run_both(lambda L, x: L.logspace(0, 1, 4) * x, [arr(4)], [0], "float64", False)


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (4, 2), (2, 5)])
def test_lu_lu_unpack_and_triangular_solve_as_torch(shape):
    A = arr(*shape)
    k_lu, k_piv = quietly(kiln.lu, kiln.tensor(A))
    t_lu, t_piv = quietly(torch.lu, torch.tensor(A))
    assert_same(k_lu, t_lu, 1e-12, 1e-12)
    assert_same(k_piv, t_piv)
    for unpack_data, unpack_pivots in ((True, True), (False, True), (True, False)):
        k = kiln.lu_unpack(k_lu, k_piv, unpack_data, unpack_pivots)
        t = torch.lu_unpack(t_lu, t_piv, unpack_data, unpack_pivots)
        assert type(k).__name__ == "lu_unpack" and k.P is k[0]
        assert_same(k, t, 1e-12, 1e-12)
    assert len(quietly(lambda: kiln.lu(kiln.tensor(A), get_infos=True))) == 3
    if shape[-1] == shape[-2]:
        B = arr(*shape[:-2], shape[-1], 2)
        for upper, transpose, unit in ((True, False, False), (False, True, False), (True, True, True)):
            k = quietly(kiln.triangular_solve, kiln.tensor(B), kiln.tensor(A), upper, transpose, unit)
            t = quietly(torch.triangular_solve, torch.tensor(B), torch.tensor(A), upper, transpose, unit)
            assert_same(k.solution, t.solution, 1e-9, 1e-10)
            assert_same(k.cloned_coefficient, t.cloned_coefficient)
        run_both(lambda L, b, a: quietly(lambda: b.triangular_solve(a, False)), [B, A + 4 * np.eye(shape[-1])],
                 [0, 1], "float64", False)


def test_asarray_frombuffer_share_memory():
    base = kiln.tensor([1.0, 2.0])
    assert kiln.asarray(base) is base and kiln.asarray(base, copy=True) is not base
    assert kiln.asarray(base, dtype=kiln.float64).dtype == kiln.float64
    array = np.array([1, 2, 3], dtype=np.int32)
    shared = kiln.asarray(array)
    array[0] = 7
    assert shared.dtype == kiln.int32 and shared.tolist() == [7, 2, 3]
    assert_same(kiln.asarray([[1, 2], [3, 4.5]]), torch.asarray([[1, 2], [3, 4.5]]))
    with pytest.raises(ValueError, match="can't alias arbitrary sequence into a tensor."):
        kiln.asarray([1, 2], copy=False)
    assert kiln.asarray(3.0, requires_grad=True).requires_grad
    buffer = bytearray(np.arange(6, dtype=np.int16).tobytes())
    k = kiln.frombuffer(buffer, dtype=kiln.int16, count=3, offset=2)
    assert_same(k, torch.frombuffer(bytearray(buffer), dtype=torch.int16, count=3, offset=2))
    k[0] = 100  # writes reach the buffer
    assert np.frombuffer(buffer, dtype=np.int16)[1] == 100
    for kwargs in (dict(dtype=kiln.int16, offset=6 * 2), dict(dtype=kiln.int32, offset=2),
                   dict(dtype=kiln.int16, count=9)):
        with pytest.raises(ValueError) as k_err:
            kiln.frombuffer(buffer, **kwargs)
        t_kwargs = dict(kwargs, dtype=getattr(torch, str(kwargs["dtype"]).split(".")[1]))
        with pytest.raises(ValueError) as t_err:
            torch.frombuffer(bytearray(buffer), **t_kwargs)
        assert str(k_err.value) == str(t_err.value)


# --- Tensor methods ----------------------------------------------------------------------------------
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_index_reduce_matches_torch(reduce, include_self, dtype):
    index = np.array([0, 4, 2, 0, 4])
    self_data, source = arr(5, 3), arr(5, 5)
    diff = [0, 1] if reduce in ("prod", "mean") else []

    def fn(L, s, src):
        ind = L.tensor(index)
        return (L.index_reduce(s, 1, L.tensor([0, 2, 0]), src[:, :3], reduce, include_self=include_self),
                s.index_reduce(0, ind, src[:3].t(), reduce, include_self=include_self))
    run_both(fn, [self_data, source], diff, dtype, True)
    k, t = kiln.tensor(self_data), torch.tensor(self_data)
    assert k.index_reduce_(0, kiln.tensor(index), kiln.tensor(source[:, :3]), reduce, include_self=include_self) is k
    assert_same(k, t.index_reduce_(0, torch.tensor(index), torch.tensor(source[:, :3]), reduce,
                                   include_self=include_self), 1e-12)


def test_index_reduce_integer_mean_as_torch():
    k = kiln.tensor([[4, 7], [1, 2]]).index_reduce(0, kiln.tensor([0, 0, 1]), kiln.tensor([[5, 8], [2, 2], [9, 4]]),
                                                   "mean")
    t = torch.tensor([[4, 7], [1, 2]]).index_reduce(0, torch.tensor([0, 0, 1]), torch.tensor([[5, 8], [2, 2], [9, 4]]),
                                                    "mean")
    assert_same(k, t)


def test_complex_conversions():
    x = kiln.tensor([[1.5, -2.0]])[:, ::1]
    assert_same(x.cfloat(), torch.tensor([[1.5, -2.0]]).cfloat())
    assert_same(x.cdouble(), torch.tensor([[1.5, -2.0]]).cdouble())
    assert complex(kiln.tensor([2.5])) == complex(torch.tensor([2.5])) == 2.5 + 0j
    assert complex(kiln.tensor(1 + 2j)) == 1 + 2j
    c = kiln.tensor([1 + 2j, -3j])
    assert c.conj_physical_() is c and c.tolist() == [1 - 2j, 3j]
    r = kiln.ones(2)
    assert r.conj_physical_() is r


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_random_fills_follow_their_laws(dtype):
    n, g = 200_000, kiln.Generator().manual_seed(11)
    e = kiln.empty(n, dtype=getattr(kiln, dtype))
    assert e.exponential_(2.0, generator=g) is e
    assert e.min().item() >= 0 and abs(e.double().mean().item() - 0.5) < 0.01 and abs(e.double().var().item()
                                                                                        - 0.25) < 0.01
    geometric = kiln.empty(n, dtype=getattr(kiln, dtype)).geometric_(0.25, generator=g)
    assert geometric.min().item() == 1 and (geometric == geometric.floor()).all().item()
    assert abs(geometric.double().mean().item() - 4.0) < 0.05 and abs((geometric == 1).double().mean().item()
                                                                       - 0.25) < 0.01
    cauchy = kiln.empty(n, dtype=getattr(kiln, dtype)).cauchy_(1.0, 2.0, generator=g)
    assert abs(cauchy.double().median().item() - 1.0) < 0.05
    quartiles = kiln.quantile(cauchy.double(), kiln.tensor([0.25, 0.75], dtype=kiln.float64))
    assert abs(quartiles[0].item() + 1.0) < 0.1 and abs(quartiles[1].item() - 3.0) < 0.1  # median -/+ sigma
    log_normal = kiln.empty(n, dtype=getattr(kiln, dtype)).log_normal_(0.5, 0.25, generator=g)
    logs = log_normal.double().log()
    assert abs(logs.mean().item() - 0.5) < 0.01 and abs(logs.std().item() - 0.25) < 0.01
    ints = kiln.zeros(1000, dtype=kiln.int64).geometric_(0.5)
    assert ints.dtype == kiln.int64 and ints.min().item() >= 1
    a = kiln.empty(5).exponential_(generator=kiln.Generator().manual_seed(3))
    b = kiln.empty(5).exponential_(generator=kiln.Generator().manual_seed(3))
    assert kiln.equal(a, b)


def test_as_subclass_apply_map_dim_order():
    class Tagged(kiln.Tensor):
        pass

    x = kiln.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    tagged = y.as_subclass(Tagged)
    assert type(tagged) is Tagged and tagged.grad_fn is not None
    (tagged * 2).sum().backward()
    assert x.grad.tolist() == [6.0, 6.0]
    assert type(kiln.ones(2).as_subclass(Tagged)) is Tagged
    t = kiln.tensor([[1, 2], [3, 4]])
    assert t.apply_(lambda v: v * 10 + 1) is t and t.tolist() == [[11, 21], [31, 41]]
    assert t.map_(kiln.tensor([1, 2]), lambda a, b: a - b).tolist() == [[10, 19], [30, 39]]
    f = kiln.ones(2)
    assert f.map2_(kiln.tensor([1.0, 2.0]), kiln.tensor([3.0, 5.0]), lambda a, b, c: a + b * c).tolist() == [4.0, 11.0]
    for shape, dims in (((2, 3, 4), (2, 0, 1)), ((2, 3), (1, 0))):
        assert kiln.ones(shape).permute(dims).dim_order() == torch.ones(shape).permute(dims).dim_order()
    assert not any(getattr(kiln.ones(1), name) for name in ("is_mps", "is_xla", "is_xpu", "is_nested"))


def test_global_switches_and_constants():
    assert (kiln.e, kiln.pi, kiln.inf, kiln.newaxis) == (torch.e, torch.pi, torch.inf, torch.newaxis)
    assert math.isnan(kiln.nan)
    assert kiln.ones(2)[kiln.newaxis].shape == (1, 2)
    assert kiln.get_default_device() == kiln.device("cpu") and str(kiln.get_default_device()) == "cpu"
    kiln.set_default_device("cpu")
    kiln.set_default_device(None)
    with pytest.raises(AssertionError, match="Torch not compiled with CUDA enabled"):
        kiln.set_default_device("cuda")
    assert kiln.is_warn_always_enabled() is False
    with pytest.raises(RuntimeError, match="setWarnOnlyOnce expects a bool, but got int"):
        kiln.set_warn_always(1)
    assert (kiln.is_anomaly_enabled(), kiln.is_anomaly_check_nan_enabled()) == (False, True)
    kiln.set_anomaly_enabled(True, False)
    assert (kiln.is_anomaly_enabled(), kiln.is_anomaly_check_nan_enabled()) == (True, False)
    kiln.set_anomaly_enabled(False)
    assert kiln.get_num_interop_threads() >= 1
    with pytest.raises(RuntimeError, match="set_num_interop_threads expects a positive integer"):
        kiln.set_num_interop_threads(0)
    x = kiln.ones(2, requires_grad=True)
    d = kiln.detach(x * 2)
    assert not d.requires_grad and kiln.detach_(d) is d
    with kiln.inference_mode():
        assert kiln.is_inference(kiln.ones(1))
    assert not kiln.is_inference(x)


# --- errors -------------------------------------------------------------------------------------------
ERRORS = [
    ("polygamma-negative", lambda L: L.polygamma(-1, L.ones(2))),
    ("mvlgamma-p0", lambda L: L.mvlgamma(L.ones(2), 0)),
    ("igamma-long", lambda L: L.igamma(L.tensor([1, 2]), L.tensor([1, 2]))),
    ("igamma-float-other", lambda L: L.igamma(L.ones(2), 2.0)),
    ("nextafter-long", lambda L: L.nextafter(L.tensor([1]), L.tensor([2]))),
    ("dropout-p", lambda L: L.alpha_dropout(L.ones(2), 1.5, True)),
    ("feature-dropout-1d", lambda L: L.feature_dropout(L.ones(3), 0.5, True)),
    ("grid_sampler_2d-rank", lambda L: L.grid_sampler_2d(L.ones(1, 1, 2, 2, 2), L.ones(1, 2, 2, 2, 3), 0, 0, False)),
    ("grid_sampler_3d-rank", lambda L: L.grid_sampler_3d(L.ones(1, 1, 2, 2), L.ones(1, 2, 2, 2), 0, 0, False)),
    ("rrelu-bounds", lambda L: L.rrelu(L.ones(2), 0.5, 0.1)),
    ("celu-alpha-0", lambda L: L.celu(L.ones(2), 0.0)),
    ("celu-inplace-argument", lambda L: L.celu(L.ones(2), 1.0, True)),
    ("combinations-2d", lambda L: L.combinations(L.ones(2, 2))),
    ("combinations-negative", lambda L: L.combinations(L.ones(2), -1)),
    ("block_diag-3d", lambda L: L.block_diag(L.ones(1, 1, 1))),
    ("vander-2d", lambda L: L.vander(L.ones(2, 2))),
    ("vander-negative", lambda L: L.vander(L.ones(2), -1)),
    ("unravel-float", lambda L: L.unravel_index(L.ones(2), (2,))),
    ("unravel-negative", lambda L: L.unravel_index(L.tensor([1]), (2, -3))),
    ("trapezoid-bool", lambda L: L.trapezoid(L.ones(2, dtype=L.bool))),
    ("trapezoid-x-size", lambda L: L.trapezoid(L.ones(3), L.ones(2))),
    ("cumulative_trapezoid-x-size", lambda L: L.cumulative_trapezoid(L.ones(3), L.ones(2))),
    ("histogram-long", lambda L: L.histogram(L.tensor([1, 2]), 3)),
    ("histogram-bins-dtype", lambda L: L.histogram(L.ones(2), L.tensor([0.0, 1.0], dtype=L.float64))),
    ("histogram-range", lambda L: L.histogram(L.ones(2), 2, range=(2.0, 1.0))),
    ("histogram-bins-0", lambda L: L.histogram(L.ones(2), 0)),
    ("index_reduce-sum", lambda L: L.index_reduce(L.ones(3), 0, L.tensor([0]), L.ones(1), "sum")),
    ("index_reduce-float-index", lambda L: L.ones(3).index_reduce_(0, L.tensor([0.0]), L.ones(1), "prod")),
    ("exponential-lambda", lambda L: L.ones(3).exponential_(0.0)),
    ("exponential-long", lambda L: L.ones(3, dtype=L.int64).exponential_()),
    ("geometric-p", lambda L: L.ones(3).geometric_(0)),
    ("log_normal-std", lambda L: L.ones(3).log_normal_(1, 0)),
    ("cauchy-sigma", lambda L: L.ones(3).cauchy_(0, 0)),
    ("complex-many", lambda L: complex(L.ones(2))),
    ("chain_matmul-rank", lambda L: L.chain_matmul(L.ones(2), L.ones(2, 2))),
    ("set_num_interop_threads-0", lambda L: L.set_num_interop_threads(0)),
]


@pytest.mark.parametrize("name, call", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(name, call):
    with pytest.raises(Exception) as t_err:
        quietly(call, torch)
    with pytest.raises(type(t_err.value)) as k_err:
        quietly(call, kiln)
    if name not in ("celu-inplace-argument", "unravel-float"):  # Python's wording; the dtype's module name
        assert str(k_err.value) == str(t_err.value)


# --- compiled ------------------------------------------------------------------------------------------
def _program(L, x, w, y):
    pooled, indices = L.max_pool1d_with_indices(x, 2)
    h = L.celu(L.conv1d(pooled, w, padding=1), 0.8) + L.hardshrink(pooled, 0.2)
    special = L.polygamma(1, h.abs() + 0.5) + L.polygamma(3, h * h + 1.0) + L.mvlgamma(h.abs() + 2.0, 3)
    shifted = L.nextafter(special, L.zeros_like(special))
    integral = L.trapezoid(shifted, dx=0.5) + L.cumulative_trapezoid(shifted).sum(-1)
    hits = L.isin(indices, L.tensor([0, 3, 5])).sum(-1).to(x.dtype)
    reduced = L.index_reduce(y, 0, L.tensor([1, 0, 1]), integral, "mean")
    table = L.block_diag(reduced, L.vander(y[0], 3)).sum(0)
    loss = L.kl_div(integral[:2].log_softmax(-1), y.softmax(-1), 1) + L.margin_ranking_loss(
        integral[0], integral[1], L.ones(4, dtype=x.dtype), 0.1, 2)
    return (integral + hits).sum(-1) + loss + table[:3].sum() + L.combinations(y[0]).sum()


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_program_matches_eager(backend):
    kiln._dynamo.reset()
    arrays = [arr(3, 4, 8), arr(4, 4, 3), arr(2, 4)]
    ins = [kiln.tensor(a, dtype=kiln.float64, requires_grad=i != 2) for i, a in enumerate(arrays)]
    eager = _program(kiln, *ins)
    t_ins = [torch.tensor(a, dtype=torch.float64, requires_grad=i != 2) for i, a in enumerate(arrays)]
    assert_same(eager, _program(torch, *t_ins).detach(), 1e-8, 1e-9)
    explained = kiln._dynamo.explain(lambda *a: _program(kiln, *a))(*ins)
    assert explained.graph_count == 1 and explained.graph_break_count == 0, explained.break_reasons
    compiled = kiln.compile(lambda *a: _program(kiln, *a), backend=backend)(*ins)
    assert_same(compiled, eager.detach(), 1e-9, 1e-10)
    g = kiln.tensor(arr(eager.shape[0]), dtype=kiln.float64)
    for ge, gc in zip(kiln.autograd.grad(eager, ins[:2], g), kiln.autograd.grad(compiled, ins[:2], g)):
        assert_same(gc, ge, 1e-9, 1e-10)
    kiln._dynamo.reset()


def test_compiled_igamma_breaks_the_graph_cleanly():
    """igamma's loops stop when the data has converged: kiln.compile runs it eagerly between graphs."""
    kiln._dynamo.reset()

    def f(a, x):
        return kiln.igamma(a.exp(), x * 2).sum() + kiln.igammac(a, x.exp()).sum()

    a, x = kiln.tensor(arr(5, low=0.1, high=3.0)), kiln.tensor(arr(5, low=0.1, high=3.0))
    explained = kiln._dynamo.explain(f)(a, x)
    assert explained.graph_break_count >= 1
    assert_same(kiln.compile(f, backend="aot_eager")(a, x), f(a, x), 1e-12)
    kiln._dynamo.reset()


@requires_torch
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "float64"])
@pytest.mark.parametrize("shape", [(), (0,), (7,), (3, 4), (2, 3, 2)])
def test_nonzero_static_matches_torch(dtype, shape):
    rng = np.random.default_rng(len(shape))
    data = rng.integers(0, 3, shape) * (rng.random(shape) > 0.4)
    for transpose in (False, True):
        k, t = kiln.tensor(data).to(getattr(kiln, dtype)), torch.tensor(data).to(getattr(torch, dtype))
        if transpose and k.dim() >= 2:
            k, t = k.transpose(0, 1), t.transpose(0, 1)
        for size, fill in ((0, -1), (2, -1), (int(np.count_nonzero(data)), 5), (20, -7)):
            want = torch.nonzero_static(t, size=size, fill_value=fill)
            assert_same(kiln.nonzero_static(k, size=size, fill_value=fill), want)
            assert_same(k.nonzero_static(size=size, fill_value=fill), want)
    compiled = kiln.compile(lambda x: kiln.nonzero_static(x, size=5) + 1, fullgraph=True, backend="inductor")
    kiln._dynamo.reset()
    assert_same(compiled(kiln.tensor(data)), torch.nonzero_static(torch.tensor(data), size=5) + 1)
    with pytest.raises(RuntimeError, match="'size' must be an non-negative integer"):
        kiln.nonzero_static(kiln.tensor(data), size=-1)


@requires_torch
@pytest.mark.parametrize("size,layout", [((2, 3, 4), (0, 2, 1)), ((2, 3, 4), (2, 1, 0)), ((5,), (0,)), ((), ()),
                                         ((2, 3), (1, 0)), ((2, 3), (0, 0)), ((2, 3), (0,)), ((2, 3), (0, 2))])
def test_empty_permuted_matches_torch(size, layout):
    def run(lib):
        try:
            t = lib.empty_permuted(size, layout, dtype=lib.float64)
        except RuntimeError as e:
            return ("raises", str(e))
        return tuple(t.shape), t.stride(), str(t.dtype).split(".")[-1], t.is_contiguous()

    assert run(kiln) == run(torch)


@requires_torch
def test_typename_and_grad_scaler_names():
    for make in (lambda lib: lib.zeros(2), lambda lib: lib.zeros(2, dtype=lib.int64), lambda lib: 3,
                 lambda lib: lib.nn.Linear(2, 2), lambda lib: lib.nn.Linear, lambda lib: "s"):
        assert kiln.typename(make(kiln)).replace("kiln", "torch") == torch.typename(make(torch))
    assert kiln.GradScaler is kiln.amp.GradScaler


@requires_torch
@pytest.mark.parametrize("value", [np.int64(2), np.float32(1.5), np.float64(-2.5), np.bool_(True), np.int32(3),
                                   np.float16(1.0), np.array(2.0), np.array([1, 2])])
def test_numpy_scalars_and_0d_arrays_make_0d_tensors(value):
    # np.ascontiguousarray made a numpy scalar 1-d: kiln.tensor(np.int64(2)) had shape [1]
    for make in ("tensor", "as_tensor", "asarray"):
        got, want = getattr(kiln, make)(value), getattr(torch, make)(value)
        assert tuple(got.shape) == tuple(want.shape) and str(got.dtype)[5:] == str(want.dtype)[6:], make
        assert got.tolist() == want.tolist()
    if isinstance(value, np.ndarray):  # asarray shares an array's memory, except a 0-d one's (copied, as in PyTorch)
        array = value.copy()
        got, want = kiln.asarray(array), torch.asarray(array)
        array[...] = 7
        assert got.tolist() == want.tolist()


def test_factories_take_requires_grad_as_torchs_do():
    """The functions that take requires_grad= are read from the registry's schemas (tensor options
    and no tensor input, or a *_like function: PyTorch's rule, python/csrc/module.cc), not listed by
    name: every one of them accepts it in torch too, and a non-factory refuses it."""
    factories = sorted(name for _, name, bits in kiln._C._packets() if bits & 1 and bits & 4)
    assert {"zeros", "ones", "full", "empty", "rand", "randn", "randint", "arange", "linspace", "eye",
            "zeros_like", "rand_like", "full_like", "scalar_tensor", "randperm"} <= set(factories)
    x = kiln.ones(2, 3)
    args = {"full": ((2,), 1.5), "full_like": (torch.ones(2), 1.5), "randint": (3, (2,)), "randperm": (3,),
            "eye": (2,), "arange": (3.0,), "linspace": (0.0, 1.0, 3), "scalar_tensor": (1.0,),
            "empty_strided": ((2,), (1,)), "randint_like": (torch.ones(2), 3)}
    for name in factories:  # each takes requires_grad in torch too
        t_args = args.get(name, (torch.ones(2),) if name.endswith("_like") else ((2,),))
        assert getattr(torch, name)(*t_args, requires_grad=name not in ("randint", "randperm", "randint_like")) \
            is not None, name
    assert kiln.zeros(2, requires_grad=True).requires_grad
    assert kiln.rand_like(x, requires_grad=True).requires_grad
    assert kiln.full((2,), 1.5, requires_grad=True).requires_grad
    assert not kiln.ones_like(x).requires_grad
    with pytest.raises(TypeError):
        kiln.add(x, x, requires_grad=True)
    with pytest.raises(TypeError):
        torch.add(torch.ones(2), torch.ones(2), requires_grad=True)
