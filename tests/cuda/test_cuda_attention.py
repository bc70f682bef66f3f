"""scaled_dot_product_attention on CUDA tensors: the fused kernel is CPU-only (Note [Flash attention
on the CPU], tensor/ops/attention.cc), so CUDA inputs take the math path, and give the CPU's values
and gradients; a leaf's .grad keeps the leaf's layout on CUDA too (Note [Gradient layout contract])."""

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F

from cuda_util import close, host, needs_kernels

pytestmark = needs_kernels


@pytest.mark.parametrize("kw", [{}, {"is_causal": True}, {"mask": True}], ids=["plain", "causal", "mask"])
def test_attention_on_cuda_matches_the_cpu(kw):
    kw = dict(kw)
    q, k, v = (host("float32", (2, 4, 33, 16), seed=s).transpose(1, 2).contiguous().transpose(1, 2)
               for s in range(3))
    if kw.pop("mask", False):
        kw["attn_mask"] = host("float32", (33, 33), seed=4) > 0
    g = host("float32", (2, 4, 33, 16), seed=5)
    results = {}
    for device in ("cpu", "cuda"):
        ins = [t.detach().to(device).requires_grad_() for t in (q, k, v)]
        extra = {n: (a.to(device) if isinstance(a, kiln.Tensor) else a) for n, a in kw.items()}
        y = F.scaled_dot_product_attention(*ins, **extra)
        (y * g.to(device)).sum().backward()
        results[device] = (y, [t.grad for t in ins], [t.stride() for t in ins])
    (yc, gc, sc), (yg, gg, sg) = results["cpu"], results["cuda"]
    close(yg, yc, 1e-4, "output")
    for a, b, s in zip(gg, gc, sg):
        close(a, b, 1e-4, "grad")
        assert a.stride() == s  # the leaf's transposed layout


@pytest.mark.parametrize("add_zero_attn", [False, True])
def test_multihead_attention_on_cuda_matches_the_cpu(add_zero_attn):
    """nn.MultiheadAttention's composite makes helper tensors (the zero attention row, the causal
    mask) on its inputs' device; they were made on the CPU and failed on CUDA inputs."""
    kiln.manual_seed(0)
    mha = kiln.nn.MultiheadAttention(32, 4, add_zero_attn=add_zero_attn, batch_first=True)
    x = host("float32", (3, 10, 32), seed=7)
    results = {}
    for device in ("cpu", "cuda"):
        m = mha.to(device)
        m.zero_grad()
        xi = x.detach().to(device).requires_grad_()  # a leaf on each device (x stays as it is)
        y, w = m(xi, xi, xi, is_causal=False)
        y.square().sum().backward()
        # kept on their device: close() takes the CUDA result first and reads it back itself
        results[device] = [t.detach().clone() for t in (y, w, xi.grad, m.in_proj_weight.grad)]
    for a, b in zip(results["cuda"], results["cpu"]):
        close(a, b, 1e-4, "mha")
