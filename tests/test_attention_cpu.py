"""The fused CPU attention (tensor/ops/attention.cc, Note [Flash attention on the CPU]) against
PyTorch's _scaled_dot_product_flash_attention_for_cpu: outputs, logsumexp, gradients and layouts
across dtypes, masks, causal alignment, grouped heads and sizes past the kernel's blocks; which
calls F.scaled_dot_product_attention routes to it (the same as PyTorch's); its errors; compiled
training through it."""

import numpy as np
import pytest

import kiln
import kiln.nn.functional as KF
from conftest import requires_torch, torch

RNG = np.random.default_rng(7)
TOL = {"float64": 1e-12, "float32": 2e-5, "bfloat16": 3e-2, "float16": 5e-3}


def _pair(shape, dtype, layout="bhle"):
    """The same random data as a kiln and a torch tensor, optionally stored [B, L, H, E]."""
    a = RNG.standard_normal(shape)
    if layout == "blhe":
        a = np.ascontiguousarray(a.transpose(0, 2, 1, 3))
    k, t = kiln.tensor(a, dtype=getattr(kiln, dtype)), torch.tensor(a, dtype=getattr(torch, dtype))
    if layout == "blhe":
        k, t = k.transpose(1, 2), t.transpose(1, 2)
    return k, t


def _close(got, want, dtype):
    tol = TOL[dtype]
    g, w = np.array(got.detach().double().tolist()), np.array(want.detach().double().tolist())
    np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


def _strides(t):
    """Strides of the dims longer than 1 (the others address nothing)."""
    return [st for st, n in zip(t.stride(), t.shape) if n > 1]


# (B, H, Hk, L, S, E, is_causal, mask, layout): blocks of 64 query rows and 512 keys are crossed
CASES = [
    (2, 4, 4, 5, 7, 8, False, None, "bhle"),
    (2, 4, 4, 5, 7, 8, True, None, "blhe"),
    (2, 4, 2, 70, 130, 16, True, None, "bhle"),      # grouped heads, two query blocks
    (1, 1, 1, 6, 3, 4, True, None, "bhle"),          # causal with L > S: later rows see every key
    (1, 2, 2, 3, 9, 4, True, None, "bhle"),          # causal with L < S: top-left aligned
    (1, 2, 2, 3, 5, 4, False, "2d", "bhle"),
    (2, 3, 3, 66, 600, 8, False, "4d", "blhe"),      # two key blocks: the online softmax rescales
    (1, 2, 2, 3, 5, 4, False, "masked_row", "bhle"),  # a row of -inf: output 0, logsumexp 0
    (2, 2, 2, 130, 520, 8, True, "4d_heads", "bhle"),
]


def _mask(kind, B, H, L, S, dtype):
    if kind is None:
        return None, None
    shape = {"2d": (L, S), "4d": (B, 1, L, S), "4d_heads": (1, H, 1, S), "masked_row": (L, S)}[kind]
    m = RNG.standard_normal(shape)
    if kind == "masked_row":
        m[1] = -np.inf
    return kiln.tensor(m, dtype=getattr(kiln, dtype)), torch.tensor(m, dtype=getattr(torch, dtype))


@requires_torch
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_matches_pytorch_flash_kernel(case, dtype):
    B, H, Hk, L, S, E, causal, mask_kind, layout = case
    (kq, tq), (kk, tk), (kv, tv) = _pair((B, H, L, E), dtype, layout), _pair((B, Hk, S, E), dtype), \
        _pair((B, Hk, S, E), dtype, layout)
    km, tm = _mask(mask_kind, B, H, L, S, dtype)
    for t in (kq, kk, kv, tq, tk, tv):
        t.requires_grad_()
    ko, kl = kiln.ops.aten._scaled_dot_product_flash_attention_for_cpu(kq, kk, kv, 0.0, causal, attn_mask=km)
    to, tl = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(tq, tk, tv, 0.0, causal, attn_mask=tm)
    _close(ko, to, dtype)
    _close(kl, tl, "float16" if dtype == "bfloat16" else dtype)  # float32 from bfloat16 products
    assert _strides(ko) == _strides(to) and _strides(kl) == _strides(tl)
    assert kl.dtype == getattr(kiln, str(tl.dtype)[6:])
    assert not kl.requires_grad and ko.grad_fn.name() == "ScaledDotProductFlashAttentionForCpuBackward0"
    g = RNG.standard_normal(ko.shape)
    (ko * kiln.tensor(g, dtype=ko.dtype)).sum().backward()
    (to * torch.tensor(g, dtype=to.dtype)).sum().backward()
    for a, b in ((kq, tq), (kk, tk), (kv, tv)):
        _close(a.grad, b.grad, dtype)
        assert _strides(a.grad) == _strides(b.grad)  # PyTorch's layout contract: the input's


def test_gradients_match_finite_differences():
    q, k, v = (kiln.randn(1, 2, 5, 3, dtype=kiln.float64, requires_grad=True) for _ in range(3))
    mask = kiln.randn(5, 5, dtype=kiln.float64)
    for causal, m in ((True, None), (False, mask)):
        assert kiln.autograd.gradcheck(
            lambda a, b, c: kiln.ops.aten._scaled_dot_product_flash_attention_for_cpu(a, b, c, 0.0, causal,
                                                                                       attn_mask=m)[0], (q, k, v))


@requires_torch
def test_scaled_dot_product_attention_picks_the_kernel_as_pytorch_does():
    def run(lib, q, k, v, **kw):
        F = KF if lib is kiln else torch.nn.functional
        y = F.scaled_dot_product_attention(q, k, v, **kw)
        name = type(y.grad_fn).__name__ if lib is torch else y.grad_fn.name()
        return name == "ScaledDotProductFlashAttentionForCpuBackward0", y

    shapes = [
        ((2, 4, 5, 8), (2, 4, 7, 8), (2, 4, 7, 8), {}),
        ((2, 4, 5, 8), (2, 4, 7, 8), (2, 4, 7, 8), {"is_causal": True, "scale": 0.3}),
        ((2, 4, 5, 8), (2, 2, 7, 8), (2, 2, 7, 8), {"enable_gqa": True}),
        ((2, 4, 5, 8), (2, 4, 7, 8), (2, 4, 7, 6), {}),          # value head size differs: math
        ((4, 5, 8), (4, 7, 8), (4, 7, 8), {}),                    # 3-D: math
        ((2, 4, 5, 8), (2, 4, 7, 8), (2, 4, 7, 8), {"mask": (5, 7)}),
        ((2, 4, 5, 8), (2, 4, 7, 8), (2, 4, 7, 8), {"mask": (2, 1, 5, 7), "bool": True}),
        ((2, 4, 5, 8), (2, 4, 7, 8), (2, 4, 7, 8), {"mask": (5, 7), "mask_grad": True}),  # math
    ]
    for qs, ks, vs, kw in shapes:
        kw = dict(kw)
        mask_shape, as_bool, mask_grad = kw.pop("mask", None), kw.pop("bool", False), kw.pop("mask_grad", False)
        arrays = [RNG.standard_normal(s) for s in (qs, ks, vs)]
        mask = None if mask_shape is None else (RNG.random(mask_shape) > 0.3 if as_bool else
                                                RNG.standard_normal(mask_shape))
        fused, outs = [], []
        for lib in (kiln, torch):
            ts = [lib.tensor(a, dtype=lib.float32, requires_grad=True) for a in arrays]
            m = None if mask is None else lib.tensor(mask, requires_grad=mask_grad) if not as_bool else \
                lib.tensor(mask)
            if m is not None:
                kw["attn_mask"] = m if as_bool else m.float() if not mask_grad else m.float().detach().requires_grad_()
            used, y = run(lib, *ts, **kw)
            fused.append(used)
            outs.append(y)
        assert fused[0] == fused[1], (qs, ks, vs, kw, fused)
        _close(outs[0], outs[1], "float32")


def test_backend_switches_and_dropout():
    from kiln.nn.attention import SDPBackend, sdpa_kernel

    fused = "ScaledDotProductFlashAttentionForCpuBackward0"
    q = kiln.randn(1, 2, 4, 8, requires_grad=True)
    want = KF.scaled_dot_product_attention(q, q, q)
    assert want.grad_fn.name() == fused
    with sdpa_kernel(SDPBackend.MATH):
        y = KF.scaled_dot_product_attention(q, q, q)
        assert y.grad_fn.name() != fused
        np.testing.assert_allclose(y.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert KF.scaled_dot_product_attention(q, q, q).grad_fn.name() == fused  # restored on exit
    assert KF.scaled_dot_product_attention(q, q, q, dropout_p=0.5).grad_fn.name() != fused
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        assert KF.scaled_dot_product_attention(q, q, q).grad_fn.name() == fused
        with pytest.raises(RuntimeError, match="No available kernel"):
            KF.scaled_dot_product_attention(q, q, q, dropout_p=0.5)  # as PyTorch: flash has no dropout
    kiln.backends.cuda.enable_flash_sdp(False)
    try:
        assert KF.scaled_dot_product_attention(q, q, q).grad_fn.name() != fused
    finally:
        kiln.backends.cuda.enable_flash_sdp(True)
    with pytest.raises(AssertionError, match="instance of SDPBackend"):
        with sdpa_kernel(["math"]):
            pass


@pytest.mark.parametrize("call,message", [
    (lambda q: (q, q, q, 0.1), "Currently do not support dropout > 0"),
    (lambda q: (q[0], q[0], q[0]), "Accept only 4 dims inputs shape of {B, H, T, K}"),
    (lambda q: (q.long(), q.long(), q.long()), "Expected data type in FP32, FP64, BF16, FP16, but got Long"),
    (lambda q: (q, q.double(), q), "expected scalar type Float but found Double"),
    (lambda q: (q, q[..., :3], q), "Q/K/V should have the same head size"),
    (lambda q: (q, q[:1], q[:1]), "same batch size"),
    (lambda q: (q, q[:, :2], q[:, :2]), "must be a multiple of the number of key/value heads"),
])
def test_errors(call, message):
    q = kiln.randn(2, 3, 4, 8)
    with pytest.raises(RuntimeError, match=message.replace("{", r"\{").replace("}", r"\}")):
        kiln.ops.aten._scaled_dot_product_flash_attention_for_cpu(*call(q))


def test_mask_errors_and_its_gradient_refused():
    q = kiln.randn(2, 3, 4, 8)
    f = kiln.ops.aten._scaled_dot_product_flash_attention_for_cpu
    with pytest.raises(RuntimeError, match="Attention mask is the same data type as query"):
        f(q, q, q, attn_mask=kiln.ones(4, 4, dtype=kiln.bool))
    with pytest.raises(RuntimeError, match=r"Attention mask dim in \{2, 4\}"):
        f(q, q, q, attn_mask=kiln.ones(3, 4, 4))
    with pytest.raises(RuntimeError, match="must match the existing size"):
        f(q, q, q, attn_mask=kiln.ones(3, 4))
    with pytest.raises(RuntimeError, match="not differentiable with respect to argument 'attn_mask'"):
        f(q, q, q, attn_mask=kiln.ones(4, 4, requires_grad=True))


def test_compiled_attention_trains_like_eager():
    # compiled, the fused op is one extern call (no masked_fill/where/all fallbacks around a softmax)
    from kiln._inductor import compile_fx

    kiln.manual_seed(0)
    B, H, L, E = 2, 4, 16, 8
    proj = kiln.nn.Linear(H * E, 3 * H * E)

    def attention(x):
        q, k, v = proj(x).split(H * E, dim=2)
        q, k, v = (t.view(B, L, H, E).transpose(1, 2) for t in (q, k, v))
        y = KF.scaled_dot_product_attention(q, k, v, is_causal=True)
        return y.transpose(1, 2).contiguous().view(B, L, H * E)

    x = kiln.randn(B, L, H * E)
    g = kiln.randn(B, L, H * E)
    (attention(x) * g).sum().backward()
    want = [p.grad.clone() for p in proj.parameters()]
    for p in proj.parameters():
        p.grad = None
    kiln._dynamo.reset()
    graphs = []
    compile_fx.graph_sinks.append(graphs)
    try:
        (kiln.compile(attention)(x) * g).sum().backward()
    finally:
        compile_fx.graph_sinks.remove(graphs)
    for p, w in zip(proj.parameters(), want):
        np.testing.assert_allclose(p.grad.numpy(), w.numpy(), rtol=1e-5, atol=1e-6)
    fallbacks = [op for gr in graphs for op, _ in gr.fallbacks]
    assert any("_scaled_dot_product_flash_attention_for_cpu.default" in op for op in fallbacks), fallbacks
    assert any("_scaled_dot_product_flash_attention_for_cpu_backward" in op for op in fallbacks), fallbacks
    assert not any(name in op for op in fallbacks for name in ("masked_fill", "where", "tril", "softmax")), fallbacks


def test_no_key_heads_is_not_routed():
    # zero key/value heads with enable_gqa: the routing check divides by the head count only when
    # there are heads (a ZeroDivisionError in the check before)
    q, k = kiln.randn(1, 2, 3, 4), kiln.randn(1, 0, 3, 4)
    assert KF._fused_attention_applies(q, k, k, None, 0.0, True) is False
