"""Gradients through kiln.nn against torch.nn: every layer (train and eval mode), MultiheadAttention,
every loss and reduction; the input's .grad and every parameter's .grad must match torch's.
Also zero_grad, requires_grad_, Parameter leaves, no_grad in init, clip_grad_norm_/clip_grad_value_.
"""

import math

import numpy as np
import pytest

import kiln
import kiln.nn.functional as KF
from conftest import assert_same, requires_torch, torch
from test_nn_modules import LAYERS, BATCHNORMS, LOSSES, MHA, _loss_inputs, arr, build

pytestmark = requires_torch

TOL = (2e-4, 2e-5)


def compare_grads(km, tm, k_inputs, t_inputs):
    for (kn, kp), (tn, tp) in zip(km.named_parameters(), tm.named_parameters()):
        assert kn == tn
        if tp.grad is None:
            assert kp.grad is None, kn
        else:
            assert kp.grad is not None, f"{kn} has no grad"
            assert_same(kp.grad, tp.grad, *TOL)
    for k, t in zip(k_inputs, t_inputs):
        if t.requires_grad:
            assert_same(k.grad, t.grad, *TOL)


def forward_backward(km, tm, shapes, seed_shift=0):
    arrays = [arr(*s) for s in shapes]
    k_in = [kiln.tensor(a, requires_grad=True) for a in arrays]
    t_in = [torch.tensor(a, requires_grad=True) for a in arrays]
    t_out = tm(*t_in)
    k_out = km(*k_in)
    w = arr(*t_out.shape)  # a random linear functional of the output: loss = sum(out * w)
    (t_out * torch.tensor(w)).sum().backward()
    (k_out * kiln.tensor(w)).sum().backward()
    compare_grads(km, tm, k_in, t_in)


GRAD_LAYERS = [c for c in LAYERS if not c[0].startswith(("Identity", "Dropout"))] + \
    [(n, c, [[s] for s in shapes]) for n, c, shapes in BATCHNORMS]


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("name,ctor,calls", GRAD_LAYERS, ids=[c[0] for c in GRAD_LAYERS])
def test_layer_gradients(name, ctor, calls, mode):
    km, tm = build(ctor)
    km.train(mode == "train")
    tm.train(mode == "train")
    for shapes in calls[:1]:
        km.zero_grad()
        tm.zero_grad()
        forward_backward(km, tm, shapes)


@pytest.mark.parametrize("kwargs", [{}, {"padding_idx": 1}, {"scale_grad_by_freq": True}, {"max_norm": 1.0}],
                         ids=["plain", "pad", "freq", "max_norm"])
def test_embedding_gradients(kwargs):
    km, tm = build(lambda nn: nn.Embedding(6, 3, **kwargs))
    idx = np.array([[0, 1, 1], [5, 1, 2]])
    w = arr(2, 3, 3)
    (tm(torch.tensor(idx)) * torch.tensor(w)).sum().backward()
    (km(kiln.tensor(idx)) * kiln.tensor(w)).sum().backward()
    compare_grads(km, tm, [], [])


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("name,ctor_kw,call_kw", [c for c in MHA if c[0] in
                                                  ("self", "batch_first", "no_weights", "key_padding", "cross",
                                                   "bias_kv_zero_attn", "bool_mask")],
                         ids=["self", "batch_first", "no_weights", "bool_mask", "key_padding", "bias_kv_zero_attn",
                              "cross"])
def test_multihead_attention_gradients(name, ctor_kw, call_kw, mode):
    E, H, N, L = 8, 2, 3, 4
    km, tm = build(lambda nn: nn.MultiheadAttention(E, H, **ctor_kw))
    km.train(mode == "train")
    tm.train(mode == "train")
    bf = ctor_kw.get("batch_first", False)
    shape = (N, L, E) if bf else (L, N, E)
    q, kv = arr(*shape), arr(*shape)
    kq, tq = kiln.tensor(q, requires_grad=True), torch.tensor(q, requires_grad=True)
    cross = call_kw.get("cross", False)
    kk, tk = (kiln.tensor(kv, requires_grad=True), torch.tensor(kv, requires_grad=True)) if cross else (kq, tq)
    extra_k, extra_t = {}, {}
    if call_kw.get("attn_mask") == "bool":
        m = np.triu(np.ones((L, L), dtype=bool), 1)
        extra_k["attn_mask"], extra_t["attn_mask"] = kiln.tensor(m), torch.tensor(m)
    if call_kw.get("key_padding_mask"):
        kp = np.zeros((N, L), dtype=bool)
        kp[0, -1] = True
        extra_k["key_padding_mask"], extra_t["key_padding_mask"] = kiln.tensor(kp), torch.tensor(kp)
    need = call_kw.get("need_weights", True)
    t_out, t_w = tm(tq, tk, tk, need_weights=need, **extra_t)
    k_out, k_w = km(kq, kk, kk, need_weights=need, **extra_k)
    w = arr(*t_out.shape)
    t_loss = (t_out * torch.tensor(w)).sum() + (0 if t_w is None else t_w.pow(2).sum())
    k_loss = (k_out * kiln.tensor(w)).sum() + (0 if k_w is None else k_w.pow(2).sum())
    t_loss.backward()
    k_loss.backward()
    compare_grads(km, tm, [kq] + ([kk] if cross else []), [tq] + ([tk] if cross else []))


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("name,fn,kind", LOSSES, ids=[c[0] for c in LOSSES])
def test_loss_gradients(name, fn, kind, reduction):
    arrays = _loss_inputs(kind)
    x = arrays[0]
    float_target = arrays[1].dtype.kind == "f"
    kx, tx = kiln.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    kt, tt = (kiln.tensor(arrays[1], requires_grad=True), torch.tensor(arrays[1], requires_grad=True)) \
        if float_target and not kind.startswith("prob") else (kiln.tensor(arrays[1]), torch.tensor(arrays[1]))
    rest_k, rest_t = [kiln.tensor(a) for a in arrays[2:]], [torch.tensor(a) for a in arrays[2:]]
    t_out = fn(torch.nn.functional, tx, tt, reduction, *rest_t)
    k_out = fn(KF, kx, kt, reduction, *rest_k)
    g = arr(*t_out.shape)
    (t_out * torch.tensor(g)).sum().backward()
    (k_out * kiln.tensor(g)).sum().backward()
    assert_same(kx.grad, tx.grad, *TOL)
    if tt.requires_grad:
        assert_same(kt.grad, tt.grad, *TOL)


@pytest.mark.parametrize("kw", [dict(), dict(is_causal=True), dict(attn_mask="bool"), dict(attn_mask="float"),
                                dict(scale=0.5)], ids=["plain", "causal", "bool", "float", "scale"])
def test_sdpa_gradients(kw):
    kw = dict(kw)
    q, k, v = arr(2, 2, 4, 8), arr(2, 2, 4, 8), arr(2, 2, 4, 3)
    ks = [kiln.tensor(a, requires_grad=True) for a in (q, k, v)]
    ts = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    mask = kw.pop("attn_mask", None)
    if mask == "bool":
        m = np.tril(np.ones((4, 4), dtype=bool))
        kw_k, kw_t = dict(kw, attn_mask=kiln.tensor(m)), dict(kw, attn_mask=torch.tensor(m))
    elif mask == "float":
        m = arr(4, 4)
        kw_k, kw_t = dict(kw, attn_mask=kiln.tensor(m)), dict(kw, attn_mask=torch.tensor(m))
    else:
        kw_k = kw_t = kw
    g = arr(2, 2, 4, 3)
    (torch.nn.functional.scaled_dot_product_attention(*ts, **kw_t) * torch.tensor(g)).sum().backward()
    (KF.scaled_dot_product_attention(*ks, **kw_k) * kiln.tensor(g)).sum().backward()
    for a, b in zip(ks, ts):
        assert_same(a.grad, b.grad, *TOL)


def test_rms_norm_gradients():
    x, w = arr(3, 5), arr(5)
    kx, kw = kiln.tensor(x, requires_grad=True), kiln.tensor(w, requires_grad=True)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    torch.nn.functional.rms_norm(tx, (5,), tw).pow(2).sum().backward()
    KF.rms_norm(kx, (5,), kw).pow(2).sum().backward()
    assert_same(kx.grad, tx.grad, *TOL)
    assert_same(kw.grad, tw.grad, *TOL)


# --- grad-related Module API ------------------------------------------------------------------------
def test_parameters_are_leaves_requiring_grad():
    m = kiln.nn.Linear(3, 2)
    for p in m.parameters():
        assert p.requires_grad and p.is_leaf and p.grad is None
    p = kiln.nn.Parameter(kiln.ones(2), requires_grad=False)
    assert not p.requires_grad
    assert not m.state_dict()["weight"].requires_grad  # state_dict detaches
    assert m.state_dict(keep_vars=True)["weight"].requires_grad


def test_zero_grad_and_requires_grad_():
    m = kiln.nn.Sequential(kiln.nn.Linear(3, 2), kiln.nn.Flatten(), kiln.nn.Linear(2, 1))
    m(kiln.ones(4, 3)).sum().backward()
    assert all(p.grad is not None for p in m.parameters())
    m.zero_grad(set_to_none=False)
    assert all(p.grad is not None and p.grad.abs().sum().item() == 0 for p in m.parameters())
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())
    assert not m(kiln.ones(1, 3)).requires_grad
    m[0].requires_grad_()
    out = m(kiln.ones(1, 3)).sum()
    out.backward()
    assert m[0].weight.grad is not None and m[2].weight.grad is None


def test_gradients_accumulate_and_survive_to_dtype():
    m = kiln.nn.Linear(2, 2)
    for _ in range(2):
        m(kiln.ones(1, 2)).sum().backward()
    assert m.bias.grad.tolist() == [2.0, 2.0]
    m.double()
    assert m.bias.grad.dtype == kiln.float64 and m.bias.requires_grad and m.bias.is_leaf


def test_init_runs_under_no_grad():
    m = kiln.nn.Linear(3, 3)
    kiln.nn.init.kaiming_uniform_(m.weight, a=math.sqrt(5))
    kiln.nn.init.trunc_normal_(m.weight, std=0.02)
    kiln.nn.init.zeros_(m.bias)
    assert m.weight.is_leaf and m.weight.grad_fn is None and m.bias.grad_fn is None


def test_load_state_dict_keeps_leaves():
    m = kiln.nn.Linear(3, 2)
    m.load_state_dict(kiln.nn.Linear(3, 2).state_dict())
    assert m.weight.is_leaf and m.weight.requires_grad and m.weight.grad_fn is None


@pytest.mark.parametrize("norm_type", [2.0, 1, 3.5, float("inf")])
def test_clip_grad_norm_matches_torch(norm_type):
    grads = [arr(3, 4) * 3, arr(4) * 3, arr(2, 2) * 3]

    def setup(lib):
        ps = [lib.nn.Parameter(lib.zeros(a.shape)) for a in grads]
        for p, a in zip(ps, grads):
            p.grad = lib.tensor(a)
        return ps

    kp, tp = setup(kiln), setup(torch)
    kn = kiln.nn.utils.clip_grad_norm_(kp, 1.5, norm_type=norm_type)
    tn = torch.nn.utils.clip_grad_norm_(tp, 1.5, norm_type=norm_type)
    assert_same(kn, tn, *TOL)
    for a, b in zip(kp, tp):
        assert_same(a.grad, b.grad, *TOL)
    again = kiln.nn.utils.clip_grad_norm_(kp, 100.0, norm_type=norm_type)  # under the limit: unchanged
    assert again.item() == pytest.approx(1.5, rel=1e-4)


def test_clip_grad_norm_nonfinite_and_value():
    p = kiln.nn.Parameter(kiln.zeros(3))
    p.grad = kiln.tensor([1.0, float("inf"), 2.0])
    with pytest.raises(RuntimeError, match="non-finite"):
        kiln.nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    assert kiln.nn.utils.clip_grad_norm_(p, 1.0).item() == float("inf")
    q = kiln.nn.Parameter(kiln.zeros(3))
    q.grad = kiln.tensor([-3.0, 0.5, 4.0])
    kiln.nn.utils.clip_grad_value_([q], 1.0)
    assert q.grad.tolist() == [-1.0, 0.5, 1.0]
    assert kiln.nn.utils.clip_grad_norm_(kiln.nn.Linear(2, 2).parameters(), 1.0).item() == 0.0


def test_training_steps_match_torch():
    """A few plain SGD steps on a small CNN+MLP give the same losses and weights as torch."""
    def ctor(nn):
        return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(4 * 3 * 3, 16), nn.GELU(), nn.Dropout(0.0), nn.LayerNorm(16),
                             nn.Linear(16, 3))

    km, tm = build(ctor)
    x, y = arr(8, 1, 6, 6), np.random.default_rng(3).integers(0, 3, size=8)
    for _ in range(3):
        losses = []
        for lib, m in ((kiln, km), (torch, tm)):
            m.zero_grad()
            loss = lib.nn.functional.cross_entropy(m(lib.tensor(x)), lib.tensor(y), label_smoothing=0.1)
            loss.backward()
            with lib.no_grad():
                for p in m.parameters():
                    p.sub_(0.1 * p.grad)
            losses.append(loss.item())
        assert losses[0] == pytest.approx(losses[1], rel=1e-4)
    for (kn, kp), (tn, tp) in zip(km.state_dict().items(), tm.state_dict().items()):
        assert kn == tn
        assert_same(kp, tp, 1e-3, 1e-4)


def test_optimizer_steps_on_module_parameters_match_torch():
    """kiln.optim.AdamW over Module.parameters() follows torch's trajectory (Linear, RMSNorm)."""
    def ctor(nn):
        return nn.Sequential(nn.Linear(5, 8), nn.RMSNorm(8), nn.Linear(8, 2))

    km, tm = build(ctor)
    kopt = kiln.optim.AdamW(km.parameters(), lr=1e-2)
    topt = torch.optim.AdamW(tm.parameters(), lr=1e-2)
    x, y = arr(6, 5), arr(6, 2)
    for _ in range(4):
        kopt.zero_grad()
        topt.zero_grad()
        # A smooth loss: with l1's sign gradients, a bias gradient that is 0 in one library and 1e-9
        # (summation order) in the other becomes a full Adam step of either sign.
        kloss = (km(kiln.tensor(x)) - kiln.tensor(y)).pow(2).mean()
        tloss = (tm(torch.tensor(x)) - torch.tensor(y)).pow(2).mean()
        kloss.backward()
        tloss.backward()
        kopt.step()
        topt.step()
        assert kloss.item() == pytest.approx(tloss.item(), rel=1e-4)
    for (kn, kp), (tn, tp) in zip(km.named_parameters(), tm.named_parameters()):
        assert kn == tn
        assert_same(kp.detach(), tp.detach(), 1e-4, 1e-5)
