"""kiln.nn layers, functionals and losses against torch.nn (PyTorch 2.13, the oracle).

Each layer case builds the same module in both libraries from one constructor (`lambda nn: ...`),
checks that the reprs are equal string for string and that the state_dict keys are equal, copies
torch's weights into kiln through `load_state_dict` (so state_dicts load across), then compares the
forward pass in train and eval mode, and the buffers afterwards (BatchNorm's running statistics).
Losses and functionals are compared over their options; bad input must raise torch's exception class.
"""

import warnings

import numpy as np
import pytest

import kiln
import kiln.nn.functional as KF
from conftest import assert_same, requires_torch, torch

pytestmark = requires_torch

RNG = np.random.default_rng(0)


def arr(*shape, low=-2.0, high=2.0, dtype=np.float32):
    return RNG.uniform(low, high, size=shape).astype(dtype)


def both(a):
    """The same numpy array as a (kiln, torch) tensor pair."""
    return kiln.tensor(a), torch.tensor(a)


def load_from_torch(km, tm):
    """Copies torch module tm's state into kiln module km (the keys must be the same, in order)."""
    tsd = tm.state_dict()
    assert list(km.state_dict().keys()) == list(tsd.keys())
    result = km.load_state_dict({k: kiln.tensor(v.detach().numpy()) for k, v in tsd.items()})
    assert result.missing_keys == [] and result.unexpected_keys == []


def build(ctor):
    tm = ctor(torch.nn)
    km = ctor(kiln.nn)
    assert repr(km) == repr(tm)
    load_from_torch(km, tm)
    return km, tm


def run(km, tm, inputs, tol=None):
    k_in = [kiln.tensor(a) for a in inputs]
    t_in = [torch.tensor(a) for a in inputs]
    got = km(*k_in)
    want = tm(*t_in)
    if isinstance(want, torch.Tensor):
        want = want.detach()
    else:
        want = tuple(None if w is None else w.detach() for w in want)
    rtol, atol = tol or (None, None)
    if isinstance(want, tuple):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert (g is None) == (w is None)
            if w is not None:
                assert_same(g, w, rtol, atol)
    else:
        assert_same(got, want, rtol, atol)


def check_buffers(km, tm):
    for (kn, kb), (tn, tb) in zip(km.named_buffers(), tm.named_buffers()):
        assert kn == tn
        assert_same(kb, tb.detach())


# --- layers: (constructor, list of input shapes per call) ------------------------------------------
LAYERS = [
    ("Linear", lambda nn: nn.Linear(5, 3), [[(4, 5)], [(2, 3, 5)], [(5,)]]),
    ("Linear-nobias", lambda nn: nn.Linear(5, 3, bias=False), [[(4, 5)], [(0, 5)]]),
    ("Conv2d", lambda nn: nn.Conv2d(3, 6, 3), [[(2, 3, 7, 8)], [(3, 7, 8)]]),
    ("Conv2d-stride-pad", lambda nn: nn.Conv2d(3, 4, (2, 3), stride=2, padding=1), [[(2, 3, 7, 8)]]),
    ("Conv2d-tuple-pad", lambda nn: nn.Conv2d(2, 4, 3, stride=(1, 2), padding=(1, 2), bias=False), [[(1, 2, 6, 6)]]),
    ("Conv2d-same-even", lambda nn: nn.Conv2d(2, 3, 4, padding="same"), [[(2, 2, 7, 6)]]),
    ("Conv2d-same-dilated", lambda nn: nn.Conv2d(2, 3, (3, 2), padding="same", dilation=2), [[(1, 2, 9, 9)]]),
    ("Conv2d-valid", lambda nn: nn.Conv2d(2, 3, 3, padding="valid"), [[(1, 2, 5, 5)]]),
    ("Conv2d-groups", lambda nn: nn.Conv2d(6, 9, 3, groups=3, dilation=(2, 1)), [[(2, 6, 8, 8)]]),
    ("Conv2d-depthwise", lambda nn: nn.Conv2d(4, 4, 3, groups=4, padding=1), [[(2, 4, 5, 5)]]),
    ("Conv2d-reflect", lambda nn: nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect"), [[(1, 2, 5, 5)]]),
    ("Conv2d-circular", lambda nn: nn.Conv2d(2, 3, 3, padding=(1, 2), padding_mode="circular"), [[(1, 2, 5, 5)]]),
    ("LayerNorm", lambda nn: nn.LayerNorm(5), [[(4, 5)], [(2, 3, 5)]]),
    ("LayerNorm-2d", lambda nn: nn.LayerNorm((3, 5), eps=1e-3), [[(2, 3, 5)]]),
    ("LayerNorm-noaffine", lambda nn: nn.LayerNorm(5, elementwise_affine=False), [[(4, 5)]]),
    ("LayerNorm-nobias", lambda nn: nn.LayerNorm([5], bias=False), [[(4, 5)]]),
    ("RMSNorm", lambda nn: nn.RMSNorm(5), [[(4, 5)], [(2, 3, 5)]]),
    ("RMSNorm-2d-eps", lambda nn: nn.RMSNorm((3, 5), eps=1e-3), [[(2, 3, 5)]]),
    ("RMSNorm-noaffine", lambda nn: nn.RMSNorm([5], elementwise_affine=False), [[(4, 5)]]),
    ("GroupNorm", lambda nn: nn.GroupNorm(2, 4), [[(3, 4, 5)], [(2, 4, 3, 3)]]),
    ("GroupNorm-noaffine", lambda nn: nn.GroupNorm(4, 4, eps=1e-3, affine=False), [[(2, 4, 3, 3)]]),
    ("GroupNorm-nobias", lambda nn: nn.GroupNorm(1, 4, bias=False), [[(2, 4, 3)]]),
    ("Dropout-0", lambda nn: nn.Dropout(0.0), [[(4, 5)]]),
    ("ReLU", lambda nn: nn.ReLU(), [[(4, 5)]]),
    ("GELU", lambda nn: nn.GELU(), [[(4, 5)]]),
    ("GELU-tanh", lambda nn: nn.GELU(approximate="tanh"), [[(4, 5)]]),
    ("SiLU", lambda nn: nn.SiLU(), [[(4, 5)]]),
    ("Sigmoid", lambda nn: nn.Sigmoid(), [[(4, 5)]]),
    ("Tanh", lambda nn: nn.Tanh(), [[(4, 5)]]),
    ("Softmax", lambda nn: nn.Softmax(dim=1), [[(4, 5)], [(2, 3, 4)]]),
    ("Softmax-last", lambda nn: nn.Softmax(-1), [[(2, 3, 4)]]),
    ("LogSoftmax", lambda nn: nn.LogSoftmax(dim=1), [[(4, 5)]]),
    ("LeakyReLU", lambda nn: nn.LeakyReLU(), [[(4, 5)]]),
    ("LeakyReLU-0.2", lambda nn: nn.LeakyReLU(0.2), [[(4, 5)]]),
    ("ReLU6", lambda nn: nn.ReLU6(), [[(4, 5)]]),
    ("ELU", lambda nn: nn.ELU(alpha=0.5), [[(4, 5)]]),
    ("Hardtanh", lambda nn: nn.Hardtanh(-0.5, 1.5), [[(4, 5)]]),
    ("Hardsigmoid", lambda nn: nn.Hardsigmoid(), [[(4, 5)]]),
    ("Hardswish", lambda nn: nn.Hardswish(), [[(4, 5)]]),
    ("Mish", lambda nn: nn.Mish(), [[(4, 5)]]),
    ("Softplus", lambda nn: nn.Softplus(beta=2.0, threshold=1.0), [[(4, 5)]]),
    ("Identity", lambda nn: nn.Identity(54, unused="x"), [[(4, 5)]]),
    ("Flatten", lambda nn: nn.Flatten(), [[(2, 3, 4, 5)]]),
    ("Flatten-0-1", lambda nn: nn.Flatten(0, 1), [[(2, 3, 4)]]),
    ("Unflatten", lambda nn: nn.Unflatten(1, (2, 3)), [[(4, 6)]]),
    ("MaxPool2d", lambda nn: nn.MaxPool2d(2), [[(2, 3, 6, 7)], [(3, 6, 6)]]),
    ("MaxPool2d-opts", lambda nn: nn.MaxPool2d(3, stride=2, padding=1), [[(2, 3, 7, 7)]]),
    ("MaxPool2d-dil-ceil", lambda nn: nn.MaxPool2d((2, 3), 1, 1, dilation=2, ceil_mode=True), [[(1, 2, 7, 8)]]),
    ("AvgPool2d", lambda nn: nn.AvgPool2d(2), [[(2, 3, 6, 7)]]),
    ("AvgPool2d-opts", lambda nn: nn.AvgPool2d(3, 2, 1, count_include_pad=False), [[(2, 3, 7, 7)]]),
    ("AvgPool2d-ceil-div", lambda nn: nn.AvgPool2d(2, ceil_mode=True, divisor_override=3), [[(1, 2, 5, 5)]]),
    ("AdaptiveAvgPool2d", lambda nn: nn.AdaptiveAvgPool2d((2, 3)), [[(2, 3, 7, 8)]]),
    ("AdaptiveAvgPool2d-1", lambda nn: nn.AdaptiveAvgPool2d(1), [[(2, 3, 5, 5)]]),
    ("AdaptiveAvgPool2d-None", lambda nn: nn.AdaptiveAvgPool2d((None, 2)), [[(2, 3, 5, 5)]]),
    ("Sequential-mlp", lambda nn: nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 3)),
     [[(5, 6)]]),
    ("Sequential-cnn", lambda nn: nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                                                nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 3 * 3, 5)),
     [[(2, 3, 6, 6)]]),
]


@pytest.mark.parametrize("name,ctor,calls", LAYERS, ids=[c[0] for c in LAYERS])
def test_layer_matches_torch(name, ctor, calls):
    km, tm = build(ctor)
    for mode in ("train", "eval"):
        km.train(mode == "train")
        tm.train(mode == "train")
        for shapes in calls:
            run(km, tm, [arr(*s) for s in shapes], tol=(1e-4, 1e-5))
    check_buffers(km, tm)


BATCHNORMS = [
    ("BatchNorm1d", lambda nn: nn.BatchNorm1d(4), [(8, 4), (6, 4, 5)]),
    ("BatchNorm1d-cumulative", lambda nn: nn.BatchNorm1d(4, momentum=None), [(8, 4), (5, 4)]),
    ("BatchNorm1d-noaffine", lambda nn: nn.BatchNorm1d(4, eps=1e-3, momentum=0.3, affine=False), [(8, 4)]),
    ("BatchNorm1d-nostats", lambda nn: nn.BatchNorm1d(4, track_running_stats=False), [(8, 4)]),
    ("BatchNorm2d", lambda nn: nn.BatchNorm2d(3), [(4, 3, 5, 5), (2, 3, 4, 4)]),
    ("BatchNorm2d-cumulative-nobias", lambda nn: nn.BatchNorm2d(3, momentum=None, bias=False), [(4, 3, 5, 5)]),
]


@pytest.mark.parametrize("name,ctor,shapes", BATCHNORMS, ids=[c[0] for c in BATCHNORMS])
def test_batchnorm_running_stats(name, ctor, shapes):
    km, tm = build(ctor)
    for _ in range(3):  # several training steps update running_mean/var and num_batches_tracked
        for s in shapes:
            run(km, tm, [arr(*s, low=-1, high=3)], tol=(1e-4, 1e-5))
            check_buffers(km, tm)
    km.eval()
    tm.eval()
    for s in shapes:
        run(km, tm, [arr(*s)], tol=(1e-4, 1e-5))  # eval uses the running statistics
    check_buffers(km, tm)


def test_dropout_train_and_eval():
    x = kiln.ones(200, 100)
    d = kiln.nn.Dropout(0.3)
    y = d(x)
    kept = (y != 0).float().mean().item()
    assert abs(kept - 0.7) < 0.02
    assert np.allclose(np.unique(y.numpy()), [0.0, 1 / 0.7])
    d.eval()
    assert d(x).tolist() == x.tolist()
    z = kiln.ones(10)
    KF.dropout(z, 0.5, training=True, inplace=True)
    assert set(z.tolist()) <= {0.0, 2.0}
    assert KF.dropout(x, 1.0).abs().sum().item() == 0
    assert repr(kiln.nn.Dropout(0.25, inplace=True)) == repr(torch.nn.Dropout(0.25, inplace=True))


def test_inplace_activations():
    for ctor in (lambda nn: nn.ReLU(inplace=True), lambda nn: nn.SiLU(inplace=True),
                 lambda nn: nn.LeakyReLU(0.1, inplace=True), lambda nn: nn.ReLU6(inplace=True),
                 lambda nn: nn.ELU(0.3, inplace=True), lambda nn: nn.Hardtanh(inplace=True),
                 lambda nn: nn.Hardsigmoid(inplace=True), lambda nn: nn.Hardswish(inplace=True),
                 lambda nn: nn.Mish(inplace=True)):
        km, tm = build(ctor)
        a = arr(3, 4)
        kx, tx = both(a)
        ky, ty = km(kx), tm(tx)
        assert ky is kx
        assert_same(kx, tx)


# --- embedding -----------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs", [{}, {"padding_idx": 0}, {"padding_idx": -1}, {"scale_grad_by_freq": True}],
                         ids=["plain", "pad0", "pad-1", "freq"])
def test_embedding(kwargs):
    km, tm = build(lambda nn: nn.Embedding(10, 4, **kwargs))
    idx = RNG.integers(0, 10, size=(3, 5))
    assert_same(km(kiln.tensor(idx)), tm(torch.tensor(idx)).detach())
    if "padding_idx" in kwargs:  # the padding row starts at zero
        fresh = kiln.nn.Embedding(10, 4, **kwargs)
        assert fresh.weight[kwargs["padding_idx"]].tolist() == [0.0] * 4


@pytest.mark.parametrize("norm_type", [2.0, 1.0])
def test_embedding_max_norm(norm_type):
    km, tm = build(lambda nn: nn.Embedding(6, 4, max_norm=1.5, norm_type=norm_type))
    idx = [[0, 2, 2], [5, 1, 0]]
    assert_same(km(kiln.tensor(idx)), tm(torch.tensor(idx)).detach())
    assert_same(km.weight.detach(), tm.weight.detach())  # looked-up rows renormalised in place, others kept


def test_embedding_from_pretrained():
    w = arr(6, 3)
    km = kiln.nn.Embedding.from_pretrained(kiln.tensor(w), padding_idx=2)
    tm = torch.nn.Embedding.from_pretrained(torch.tensor(w), padding_idx=2)
    assert repr(km) == repr(tm)
    assert_same(km.weight.detach(), tm.weight.detach())
    assert km.weight.requires_grad == tm.weight.requires_grad
    idx = [[0, 2, 5], [1, 1, 3]]
    assert_same(km(kiln.tensor(idx)), tm(torch.tensor(idx)).detach())
    k2 = kiln.nn.Embedding.from_pretrained(kiln.tensor(w), freeze=False)
    t2 = torch.nn.Embedding.from_pretrained(torch.tensor(w), freeze=False)
    assert k2.weight.requires_grad == t2.weight.requires_grad


# --- multi-head attention ------------------------------------------------------------------------
MHA = [
    ("self", dict(), dict()),
    ("batch_first", dict(batch_first=True), dict()),
    ("nobias", dict(bias=False), dict()),
    ("no_weights", dict(), dict(need_weights=False)),
    ("per_head", dict(), dict(average_attn_weights=False)),
    ("bool_mask", dict(), dict(attn_mask="bool")),
    ("float_mask", dict(batch_first=True), dict(attn_mask="float", need_weights=False)),
    ("3d_mask", dict(), dict(attn_mask="bool3d")),
    ("key_padding", dict(batch_first=True), dict(key_padding_mask=True)),
    ("key_padding_no_weights", dict(), dict(key_padding_mask=True, need_weights=False)),
    ("both_masks", dict(), dict(key_padding_mask=True, attn_mask="bool")),
    ("bias_kv_zero_attn", dict(add_bias_kv=True, add_zero_attn=True), dict()),
    ("cross", dict(batch_first=True), dict(cross=True)),
    ("unbatched", dict(), dict(unbatched=True)),
]


@pytest.mark.parametrize("name,ctor_kw,call_kw", MHA, ids=[c[0] for c in MHA])
def test_multihead_attention(name, ctor_kw, call_kw):
    E, H, N, L, S = 8, 2, 3, 4, 5
    call_kw = dict(call_kw)
    km, tm = build(lambda nn: nn.MultiheadAttention(E, H, **ctor_kw))
    bf = ctor_kw.get("batch_first", False)
    cross = call_kw.pop("cross", False)
    unbatched = call_kw.pop("unbatched", False)
    src = S if cross else L

    def shape(n):
        return (n, E) if unbatched else ((N, n, E) if bf else (n, N, E))

    q = arr(*shape(L))
    kv = arr(*shape(src)) if cross else q
    extra_k, extra_t = {}, {}
    mask_kind = call_kw.pop("attn_mask", None)
    if mask_kind is not None:
        if mask_kind.startswith("bool"):
            m = np.triu(np.ones((L, src), dtype=bool), 1)
            if mask_kind == "bool3d":
                m = np.broadcast_to(m, (N * H, L, src)).copy()
                m[1, :, 0] = True
                m[1, :, 1] = False
        else:
            m = arr(L, src)
        extra_k["attn_mask"], extra_t["attn_mask"] = kiln.tensor(m), torch.tensor(m)
    if call_kw.pop("key_padding_mask", False):
        kp = np.zeros((N, src), dtype=bool)
        kp[0, -1] = kp[2, -2:] = True
        extra_k["key_padding_mask"], extra_t["key_padding_mask"] = kiln.tensor(kp), torch.tensor(kp)
    for mode in (True, False):
        km.train(mode)
        tm.train(mode)
        kq, tq = both(q)
        kk, tk = (kq, tq) if not cross else both(kv)
        got = km(kq, kk, kk, **extra_k, **call_kw)
        want = tm(tq, tk, tk, **extra_t, **call_kw)
        assert_same(got[0], want[0].detach(), 1e-4, 1e-5)
        if want[1] is None:
            assert got[1] is None
        else:
            assert_same(got[1], want[1].detach(), 1e-4, 1e-5)


# --- functionals ---------------------------------------------------------------------------------
SDPA = [
    ("plain", (2, 3, 4, 8), 5, dict()),
    ("3d", (3, 4, 8), 6, dict()),
    ("causal", (2, 2, 5, 4), 5, dict(is_causal=True)),
    ("scale", (2, 4, 8), 4, dict(scale=0.3)),
    ("bool_mask", (2, 2, 4, 8), 6, dict(attn_mask="bool")),
    ("float_mask", (2, 2, 4, 8), 6, dict(attn_mask="float")),
    ("fully_masked_row", (2, 3, 4), 5, dict(attn_mask="masked_row")),
    ("broadcast_mask", (2, 2, 3, 4), 5, dict(attn_mask="broadcast")),
]


@pytest.mark.parametrize("name,qshape,S,kw", SDPA, ids=[c[0] for c in SDPA])
def test_scaled_dot_product_attention(name, qshape, S, kw):
    kw = dict(kw)
    q = arr(*qshape)
    k = arr(*qshape[:-2], S, qshape[-1])
    v = arr(*qshape[:-2], S, 3)
    kk, tk = {}, {}
    mask = kw.pop("attn_mask", None)
    if mask == "bool":
        m = RNG.random((qshape[-2], S)) > 0.3
        m[:, 0] = True  # no fully masked row
        kk["attn_mask"], tk["attn_mask"] = kiln.tensor(m), torch.tensor(m)
    elif mask == "masked_row":
        m = RNG.random((qshape[-2], S)) > 0.3
        m[1, :] = False  # a row that attends to nothing gives zeros (PyTorch's _safe_softmax)
        kk["attn_mask"], tk["attn_mask"] = kiln.tensor(m), torch.tensor(m)
    elif mask == "broadcast":
        m = arr(qshape[0], 1, qshape[-2], S)
        kk["attn_mask"], tk["attn_mask"] = kiln.tensor(m), torch.tensor(m)
    elif mask == "float":
        m = arr(qshape[-2], S)
        kk["attn_mask"], tk["attn_mask"] = kiln.tensor(m), torch.tensor(m)
    got = KF.scaled_dot_product_attention(*map(kiln.tensor, (q, k, v)), **kk, **kw)
    want = torch.nn.functional.scaled_dot_product_attention(*map(torch.tensor, (q, k, v)), **tk, **kw)
    assert_same(got, want, 1e-4, 1e-5)


def test_sdpa_dropout_and_gqa():
    q, k, v = arr(1, 4, 3, 8), arr(1, 2, 5, 8), arr(1, 2, 5, 8)
    got = KF.scaled_dot_product_attention(*map(kiln.tensor, (q, k, v)), enable_gqa=True)
    want = torch.nn.functional.scaled_dot_product_attention(*map(torch.tensor, (q, k, v)), enable_gqa=True)
    assert_same(got, want, 1e-4, 1e-5)
    ones = kiln.ones(1, 1, 200, 4)
    out = KF.scaled_dot_product_attention(ones, ones, kiln.ones(1, 1, 200, 4), dropout_p=0.5)
    assert abs(out.mean().item() - 1.0) < 0.1  # dropout rescales by 1/(1-p): the mean is kept


FUNCTIONAL = [
    ("linear", lambda F, x, w: F.linear(x, w), [(3, 4), (5, 4)]),
    ("conv2d-same", lambda F, x, w: F.conv2d(x, w, padding="same"), [(1, 2, 5, 6), (3, 2, 2, 3)]),
    ("conv2d-valid-stride", lambda F, x, w: F.conv2d(x, w, None, 2, "valid"), [(1, 2, 5, 6), (3, 2, 2, 3)]),
    ("relu", lambda F, x: F.relu(x), [(3, 4)]),
    ("gelu-tanh", lambda F, x: F.gelu(x, approximate="tanh"), [(3, 4)]),
    ("silu", lambda F, x: F.silu(x), [(3, 4)]),
    ("sigmoid", lambda F, x: F.sigmoid(x), [(3, 4)]),
    ("tanh", lambda F, x: F.tanh(x), [(3, 4)]),
    ("softmax-dtype", lambda F, x: F.softmax(x, dim=0, dtype=kiln.float64 if F is KF else torch.float64), [(3, 4)]),
    ("log_softmax", lambda F, x: F.log_softmax(x, -1), [(3, 4)]),
    ("leaky_relu", lambda F, x: F.leaky_relu(x, 0.3), [(3, 4)]),
    ("layer_norm", lambda F, x, w, b: F.layer_norm(x, (4,), w, b, 1e-3), [(3, 4), (4,), (4,)]),
    ("rms_norm", lambda F, x, w: F.rms_norm(x, [4], w), [(3, 4), (4,)]),
    ("rms_norm-noweight", lambda F, x: F.rms_norm(x, (3, 4), eps=0.1), [(2, 3, 4)]),
    ("group_norm", lambda F, x: F.group_norm(x, 3), [(2, 6, 5)]),
    ("batch_norm-eval", lambda F, x, m, v: F.batch_norm(x, m, v.abs()), [(4, 3), (3,), (3,)]),
    ("batch_norm-train", lambda F, x: F.batch_norm(x, None, None, training=True), [(4, 3, 2)]),
    ("max_pool2d", lambda F, x: F.max_pool2d(x, 2, 1), [(1, 2, 4, 5)]),
    ("max_pool2d-indices", lambda F, x: F.max_pool2d(x, 2, return_indices=True), [(1, 2, 4, 5)]),
    ("avg_pool2d", lambda F, x: F.avg_pool2d(x, (2, 3), padding=1), [(1, 2, 4, 5)]),
    ("adaptive_avg_pool2d", lambda F, x: F.adaptive_avg_pool2d(x, 3), [(1, 2, 7, 5)]),
    ("pad", lambda F, x: F.pad(x, (1, 2, 0, 1)), [(2, 3, 4)]),
    ("pad-value", lambda F, x: F.pad(x, [1, 1], value=2.5), [(2, 3)]),
    ("pad-reflect", lambda F, x: F.pad(x, (2, 1), mode="reflect"), [(1, 2, 4)]),
    ("pad-replicate", lambda F, x: F.pad(x, (1, 1, 2, 0), mode="replicate"), [(1, 2, 4, 3)]),
]


@pytest.mark.parametrize("name,fn,shapes", FUNCTIONAL, ids=[c[0] for c in FUNCTIONAL])
def test_functional(name, fn, shapes):
    arrays = [arr(*s) for s in shapes]
    got = fn(KF, *map(kiln.tensor, arrays))
    want = fn(torch.nn.functional, *map(torch.tensor, arrays))
    assert_same(got, want, 1e-4, 1e-5)


def test_functional_half_precision():
    a = np.round(arr(3, 8) * 8) / 8
    for dt in ("float16", "bfloat16"):
        kx, tx = kiln.tensor(a).to(getattr(kiln, dt)), torch.tensor(a).to(getattr(torch, dt))
        kw, tw = kiln.ones(8, dtype=getattr(kiln, dt)), torch.ones(8, dtype=getattr(torch, dt))
        assert_same(KF.rms_norm(kx, (8,), kw), torch.nn.functional.rms_norm(tx, (8,), tw))
        assert_same(KF.rms_norm(kx, (8,)), torch.nn.functional.rms_norm(tx, (8,)))
        assert_same(KF.layer_norm(kx, (8,)), torch.nn.functional.layer_norm(tx, (8,)))


def test_one_hot_and_embedding_functional():
    idx = [[0, 3], [2, 1]]
    assert_same(KF.one_hot(kiln.tensor(idx)), torch.nn.functional.one_hot(torch.tensor(idx)))
    assert_same(KF.one_hot(kiln.tensor(idx), 6), torch.nn.functional.one_hot(torch.tensor(idx), 6))
    w = arr(5, 3)
    assert_same(KF.embedding(kiln.tensor(idx), kiln.tensor(w), padding_idx=-2),
                torch.nn.functional.embedding(torch.tensor(idx), torch.tensor(w), padding_idx=-2))


def test_softmax_implicit_dim_warns():
    a = arr(2, 3, 4)
    with pytest.warns(UserWarning, match="Implicit dimension"):
        got = KF.softmax(kiln.tensor(a))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = torch.nn.functional.softmax(torch.tensor(a))
    assert_same(got, want)


# --- losses --------------------------------------------------------------------------------------
def _targets(kind, n=6, c=5):
    if kind == "class":
        t = RNG.integers(0, c, size=(n,))
        t[1] = -100 if n > 1 else t[1]
        return t
    return None


LOSSES = [
    ("cross_entropy", lambda F, x, t, r: F.cross_entropy(x, t, reduction=r), "class"),
    ("cross_entropy-weight", lambda F, x, t, r, w: F.cross_entropy(x, t, w, reduction=r), "class+weight"),
    ("cross_entropy-ignore", lambda F, x, t, r: F.cross_entropy(x, t.clamp(min=0), ignore_index=2, reduction=r),
     "class"),
    ("cross_entropy-smooth", lambda F, x, t, r, w: F.cross_entropy(x, t, w, reduction=r, label_smoothing=0.2),
     "class+weight"),
    ("cross_entropy-probs", lambda F, x, t, r: F.cross_entropy(x, t, reduction=r), "probs"),
    ("cross_entropy-probs-smooth", lambda F, x, t, r, w: F.cross_entropy(x, t, w, reduction=r, label_smoothing=0.1),
     "probs+weight"),
    ("cross_entropy-spatial", lambda F, x, t, r: F.cross_entropy(x, t, reduction=r), "spatial"),
    ("nll_loss", lambda F, x, t, r: F.nll_loss(F.log_softmax(x, 1), t, reduction=r), "class"),
    ("nll_loss-weight", lambda F, x, t, r, w: F.nll_loss(x, t, w, reduction=r), "class+weight"),
    ("nll_loss-spatial", lambda F, x, t, r: F.nll_loss(x, t.clamp(min=0), reduction=r, ignore_index=1), "spatial"),
    ("mse_loss", lambda F, x, t, r: F.mse_loss(x, t, reduction=r), "same"),
    ("mse_loss-weight", lambda F, x, t, r, w: F.mse_loss(x, t, reduction=r, weight=w), "same+weight"),
    ("l1_loss", lambda F, x, t, r: F.l1_loss(x, t, reduction=r), "same"),
    ("l1_loss-weight", lambda F, x, t, r, w: F.l1_loss(x, t, reduction=r, weight=w), "same+weight"),
    ("smooth_l1_loss", lambda F, x, t, r: F.smooth_l1_loss(x, t, reduction=r), "same"),
    ("smooth_l1_loss-beta", lambda F, x, t, r: F.smooth_l1_loss(x, t, reduction=r, beta=0.5), "same"),
    ("smooth_l1_loss-beta0", lambda F, x, t, r: F.smooth_l1_loss(x, t, reduction=r, beta=0.0), "same"),
    ("huber_loss", lambda F, x, t, r: F.huber_loss(x, t, reduction=r, delta=0.7), "same"),
    ("huber_loss-weight", lambda F, x, t, r, w: F.huber_loss(x, t, reduction=r, weight=w), "same+weight"),
    ("binary_cross_entropy", lambda F, x, t, r: F.binary_cross_entropy(F.sigmoid(x), t, reduction=r), "prob"),
    ("binary_cross_entropy-weight", lambda F, x, t, r, w: F.binary_cross_entropy(F.sigmoid(x), t, w[0], reduction=r),
     "prob+weight"),
    ("bce_with_logits", lambda F, x, t, r: F.binary_cross_entropy_with_logits(x, t, reduction=r), "prob"),
    ("bce_with_logits-weights", lambda F, x, t, r, w: F.binary_cross_entropy_with_logits(
        x, t, w[0], reduction=r, pos_weight=w[0] * 2 + 0.5), "prob+weight"),
]


def _loss_inputs(kind):
    N, C = 6, 5
    if kind.startswith("spatial"):
        x = arr(2, C, 3, 4)
        t = RNG.integers(0, C, size=(2, 3, 4))
        t[0, 0, 0] = -100
        return [x, t]
    x = arr(N, C)
    base = kind.split("+")[0]
    if base == "class":
        t = RNG.integers(0, C, size=(N,))
        t[1] = -100
        t[2] = 2
    elif base == "probs":
        t = RNG.random((N, C)).astype(np.float32)
        t /= t.sum(1, keepdims=True)
    elif base == "prob":
        t = RNG.random((N, C)).astype(np.float32)
    else:
        t = arr(N, C)
    out = [x, t]
    if kind.endswith("+weight"):
        out.append(arr(C, low=0.1, high=2.0) if base in ("class", "probs") else arr(N, C, low=0.1, high=2.0))
    return out


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("name,fn,kind", LOSSES, ids=[c[0] for c in LOSSES])
def test_loss_functional(name, fn, kind, reduction):
    arrays = _loss_inputs(kind)
    got = fn(KF, *map(kiln.tensor, arrays[:2]), reduction, *map(kiln.tensor, arrays[2:]))
    want = fn(torch.nn.functional, *map(torch.tensor, arrays[:2]), reduction, *map(torch.tensor, arrays[2:]))
    assert_same(got, want, 1e-4, 1e-5)


LOSS_MODULES = [
    ("CrossEntropyLoss", lambda nn, w: nn.CrossEntropyLoss(), "class"),
    ("CrossEntropyLoss-opts", lambda nn, w: nn.CrossEntropyLoss(w, ignore_index=3, reduction="sum",
                                                              label_smoothing=0.1), "class+weight"),
    ("NLLLoss", lambda nn, w: nn.NLLLoss(w, reduction="none"), "class+weight"),
    ("MSELoss", lambda nn, w: nn.MSELoss(), "same"),
    ("L1Loss", lambda nn, w: nn.L1Loss(reduction="sum"), "same"),
    ("SmoothL1Loss", lambda nn, w: nn.SmoothL1Loss(beta=0.3), "same"),
    ("HuberLoss", lambda nn, w: nn.HuberLoss(delta=0.5), "same"),
    ("BCELoss", lambda nn, w: nn.BCELoss(w[0]), "prob+weight"),
    ("BCEWithLogitsLoss", lambda nn, w: nn.BCEWithLogitsLoss(pos_weight=w[0]), "prob+weight"),
]


@pytest.mark.parametrize("name,ctor,kind", LOSS_MODULES, ids=[c[0] for c in LOSS_MODULES])
def test_loss_module(name, ctor, kind):
    arrays = _loss_inputs(kind)
    w = arrays[2] if len(arrays) > 2 else None
    tm = ctor(torch.nn, None if w is None else torch.tensor(w))
    km = ctor(kiln.nn, None if w is None else kiln.tensor(w))
    assert repr(km) == repr(tm)
    assert list(km.state_dict()) == list(tm.state_dict())
    x, t = arrays[:2]
    if name == "CrossEntropyLoss-opts":
        t = np.maximum(t, 0)
    if name == "BCELoss":
        x = 1 / (1 + np.exp(-x))
    assert_same(km(kiln.tensor(x), kiln.tensor(t)), tm(torch.tensor(x), torch.tensor(t)), 1e-4, 1e-5)


def test_legacy_reduction_arguments():
    x, t = arr(4, 3), arr(4, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for kw in (dict(size_average=False), dict(reduce=False), dict(size_average=True, reduce=True)):
            assert_same(KF.mse_loss(kiln.tensor(x), kiln.tensor(t), **kw),
                        torch.nn.functional.mse_loss(torch.tensor(x), torch.tensor(t), **kw))
            assert kiln.nn.L1Loss(**kw).reduction == torch.nn.L1Loss(**kw).reduction


def test_mse_loss_broadcast_warns():
    x, t = arr(4, 3), arr(1, 3)
    with pytest.warns(UserWarning, match="target size"):
        got = KF.mse_loss(kiln.tensor(x), kiln.tensor(t))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = torch.nn.functional.mse_loss(torch.tensor(x), torch.tensor(t))
    assert_same(got, want)


# --- dtype conversion --------------------------------------------------------------------------
def test_module_double_and_half_forward():
    km, tm = build(lambda nn: nn.Sequential(nn.Linear(4, 6), nn.LayerNorm(6), nn.ReLU(), nn.Linear(6, 2)))
    km.double()
    tm.double()
    a = arr(3, 4, dtype=np.float64)
    assert_same(km(kiln.tensor(a)), tm(torch.tensor(a)).detach())
    km.to(kiln.bfloat16)
    tm.to(torch.bfloat16)
    assert all(p.dtype == kiln.bfloat16 for p in km.parameters())
    xb = np.round(a * 8) / 8
    assert_same(km(kiln.tensor(xb).to(kiln.bfloat16)), tm(torch.tensor(xb).to(torch.bfloat16)).detach(), 5e-2, 5e-2)


def test_batchnorm_to_keeps_integer_buffer():
    km = kiln.nn.BatchNorm1d(3).half()
    tm = torch.nn.BatchNorm1d(3).half()
    assert [str(b.dtype) for b in km.buffers()] == [str(b.dtype).replace("torch", "kiln") for b in tm.buffers()]


# --- bad input -----------------------------------------------------------------------------------
BAD = [
    ("linear-shape", lambda nn, F, t: nn.Linear(4, 3)(t(2, 5))),
    ("conv-channels", lambda nn, F, t: nn.Conv2d(3, 4, 3)(t(1, 2, 5, 5))),
    ("conv-bad-padding-string", lambda nn, F, t: nn.Conv2d(3, 4, 3, padding="full")),
    ("conv-same-strided", lambda nn, F, t: nn.Conv2d(3, 4, 3, stride=2, padding="same")),
    ("conv-groups", lambda nn, F, t: nn.Conv2d(3, 4, 3, groups=2)),
    ("conv-padding-mode", lambda nn, F, t: nn.Conv2d(3, 4, 3, padding_mode="mirror")),
    ("F.conv2d-same-strided", lambda nn, F, t: F.conv2d(t(1, 2, 5, 5), t(3, 2, 3, 3), stride=2, padding="same")),
    ("batchnorm1d-dim", lambda nn, F, t: nn.BatchNorm1d(3)(t(2, 3, 4, 4))),
    ("batchnorm2d-dim", lambda nn, F, t: nn.BatchNorm2d(3)(t(2, 3))),
    ("batchnorm-one-value", lambda nn, F, t: nn.BatchNorm1d(3)(t(1, 3))),
    ("batchnorm-channels", lambda nn, F, t: nn.BatchNorm1d(3)(t(4, 5))),
    ("layernorm-shape", lambda nn, F, t: nn.LayerNorm(4)(t(2, 5))),
    ("rmsnorm-shape", lambda nn, F, t: nn.RMSNorm(4)(t(2, 5))),
    ("groupnorm-indivisible", lambda nn, F, t: nn.GroupNorm(3, 4)),
    ("groupnorm-1d", lambda nn, F, t: F.group_norm(t(4), 2)),
    ("embedding-index", lambda nn, F, t: nn.Embedding(5, 2)(t(3).long() * 0 + 7)),
    ("embedding-padding-idx", lambda nn, F, t: nn.Embedding(5, 2, padding_idx=5)),
    ("dropout-p", lambda nn, F, t: nn.Dropout(1.5)),
    ("F.dropout-p", lambda nn, F, t: F.dropout(t(3), -0.1)),
    ("softmax-dim", lambda nn, F, t: nn.Softmax(dim=3)(t(2, 3))),
    ("maxpool-too-big", lambda nn, F, t: nn.MaxPool2d(5)(t(1, 1, 3, 3))),
    ("cross_entropy-target-shape", lambda nn, F, t: F.cross_entropy(t(4, 3), t(5).long())),
    ("cross_entropy-class-range", lambda nn, F, t: F.cross_entropy(t(4, 3), t(4).long() * 0 + 3)),
    ("nll_loss-1d-target-dtype", lambda nn, F, t: F.nll_loss(t(4, 3), t(4))),
    ("bce-size", lambda nn, F, t: F.binary_cross_entropy(t(4).sigmoid(), t(3).sigmoid())),
    ("bce-logits-size", lambda nn, F, t: F.binary_cross_entropy_with_logits(t(4), t(4, 1))),
    ("bad-reduction", lambda nn, F, t: F.mse_loss(t(3), t(3), reduction="avg")),
    ("loss-module-bad-reduction", lambda nn, F, t: nn.L1Loss(reduction="max")(t(3), t(3))),
    ("mse-weight-size", lambda nn, F, t: F.mse_loss(t(3), t(3), weight=t(2))),
    ("hardtanh-range", lambda nn, F, t: nn.Hardtanh(1.0, 0.5)),
    ("mha-divisible", lambda nn, F, t: nn.MultiheadAttention(6, 4)),
    ("mha-nonpositive", lambda nn, F, t: nn.MultiheadAttention(0, 2)),
    ("mha-mask-shape", lambda nn, F, t: nn.MultiheadAttention(4, 2)(t(3, 1, 4), t(3, 1, 4), t(3, 1, 4),
                                                                      attn_mask=t(2, 2))),
    ("one_hot-negative", lambda nn, F, t: F.one_hot(t(3).long() * 0 - 1)),
    ("embedding-float-index", lambda nn, F, t: nn.Embedding(5, 2)(t(3))),
    ("max_pool2d-stride0", lambda nn, F, t: F.max_pool2d(t(1, 1, 4, 4), 2, 0)),
    ("max_pool2d-pad", lambda nn, F, t: F.max_pool2d(t(1, 1, 4, 4), 2, 1, 2)),
    ("huber-delta", lambda nn, F, t: F.huber_loss(t(3), t(3), delta=-1.0)),
    ("smooth_l1-beta", lambda nn, F, t: F.smooth_l1_loss(t(3), t(3), beta=-1.0)),
    ("bce-range", lambda nn, F, t: F.binary_cross_entropy(t(3) + 5, t(3).sigmoid())),
    ("nll-weight-size", lambda nn, F, t: F.nll_loss(t(4, 3), t(4).long() * 0, t(5))),
    ("ce-smoothing-range", lambda nn, F, t: F.cross_entropy(t(4, 3), t(4).long() * 0, label_smoothing=1.5)),
    ("layer_norm-weight", lambda nn, F, t: F.layer_norm(t(4, 3), (3,), t(4))),
    ("batch_norm-running", lambda nn, F, t: F.batch_norm(t(4, 3), t(4), t(4))),
    ("group_norm-weight", lambda nn, F, t: F.group_norm(t(4, 3), 1, t(4))),
    ("pad-reflect-size", lambda nn, F, t: F.pad(t(1, 4, 3), (3, 3), mode="reflect")),
    ("sdpa-causal-and-mask", lambda nn, F, t: F.scaled_dot_product_attention(t(1, 2, 4), t(1, 2, 4), t(1, 2, 4),
                                                                             attn_mask=t(2, 2), is_causal=True)),
    ("sdpa-head-dim", lambda nn, F, t: F.scaled_dot_product_attention(t(1, 2, 4), t(1, 2, 3), t(1, 2, 4))),
    ("unflatten-size", lambda nn, F, t: nn.Unflatten(1, (2, 4))(t(3, 6))),
    ("flatten-dims", lambda nn, F, t: nn.Flatten(2, 0)(t(3, 6))),
    ("sequential-index", lambda nn, F, t: nn.Sequential(nn.ReLU())[3]),
    ("modulelist-index", lambda nn, F, t: nn.ModuleList([nn.ReLU()])[-2]),
    ("moduledict-key", lambda nn, F, t: nn.ModuleDict({"a": nn.ReLU()})["b"]),
    ("module-no-attr", lambda nn, F, t: nn.Linear(2, 2).nonexistent),
    ("init-fan-1d", lambda nn, F, t: nn.init.kaiming_uniform_(t(4))),
    ("init-mode", lambda nn, F, t: nn.init.kaiming_normal_(t(4, 4), mode="fan_avg")),
    ("init-nonlinearity", lambda nn, F, t: nn.init.calculate_gain("swish")),
    ("init-slope", lambda nn, F, t: nn.init.calculate_gain("leaky_relu", "0.2")),
]


@pytest.mark.parametrize("name,call", BAD, ids=[c[0] for c in BAD])
def test_bad_input_raises_like_torch(name, call):
    def t_for(lib):
        return lambda *s: lib.tensor(arr(*s)) if s else lib.tensor(1.0)

    with pytest.raises(Exception) as expected:
        call(torch.nn, torch.nn.functional, t_for(torch))
    with pytest.raises(Exception) as got:
        call(kiln.nn, KF, t_for(kiln))
    want = next(c for c in type(expected.value).__mro__ if c.__module__ == "builtins")
    have = next(c for c in type(got.value).__mro__ if c.__module__ == "builtins")
    assert have is want, f"kiln raised {type(got.value).__name__}: {got.value}; torch raised " \
                         f"{type(expected.value).__name__}: {expected.value}"
    assert str(got.value)
    assert (kiln.ones(2) + 1).tolist() == [2.0, 2.0]


DTYPE_LAYERS = [c for c in LAYERS if c[0] in ("Linear", "Conv2d-same-even", "Conv2d-groups", "LayerNorm", "RMSNorm",
                                              "GroupNorm", "GELU-tanh", "Softmax", "MaxPool2d-opts",
                                              "AvgPool2d-opts", "AdaptiveAvgPool2d", "Sequential-cnn")]
DTYPE_TOL = {"float64": (1e-9, 1e-9), "float16": (1e-2, 1e-2), "bfloat16": (6e-2, 6e-2)}


@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16"])
@pytest.mark.parametrize("name,ctor,calls", DTYPE_LAYERS, ids=[c[0] for c in DTYPE_LAYERS])
def test_layer_dtypes(name, ctor, calls, dtype):
    km, tm = build(ctor)
    km.to(getattr(kiln, dtype))
    tm.to(getattr(torch, dtype))
    for mode in (True, False):
        km.train(mode)
        tm.train(mode)
        a = np.round(arr(*calls[0][0]) * 8) / 8  # exactly representable in every float type
        got = km(kiln.tensor(a).to(getattr(kiln, dtype)))
        want = tm(torch.tensor(a).to(getattr(torch, dtype))).detach()
        assert_same(got, want, *DTYPE_TOL[dtype])
    check_buffers(km, tm)


@pytest.mark.parametrize("name,ctor,calls", LAYERS, ids=[c[0] for c in LAYERS])
def test_layer_noncontiguous_input(name, ctor, calls):
    """The same layers fed strided views (every other element of the last dim) and transposed views."""
    km, tm = build(ctor)
    km.eval()
    tm.eval()
    shape = calls[0][0]
    wide = arr(*shape[:-1], shape[-1] * 2)
    assert_same(km(kiln.tensor(wide)[..., ::2]), tm(torch.tensor(wide)[..., ::2]).detach(), 1e-4, 1e-5)
    if len(shape) >= 2:
        swapped = np.ascontiguousarray(np.swapaxes(arr(*shape), -1, -2))
        assert_same(km(kiln.tensor(swapped).transpose(-1, -2)), tm(torch.tensor(swapped).transpose(-1, -2)).detach(),
                    1e-4, 1e-5)


@pytest.mark.parametrize("need_weights", [True, False])
def test_multihead_attention_kdim_vdim(need_weights):
    km, tm = build(lambda nn: nn.MultiheadAttention(8, 2, kdim=6, vdim=5, batch_first=True))
    q, k, v = arr(2, 3, 8), arr(2, 4, 6), arr(2, 4, 5)
    got = km(*map(kiln.tensor, (q, k, v)), need_weights=need_weights)
    want = tm(*map(torch.tensor, (q, k, v)), need_weights=need_weights)
    assert_same(got[0], want[0].detach(), 1e-4, 1e-5)
    if need_weights:
        assert_same(got[1], want[1].detach(), 1e-4, 1e-5)
