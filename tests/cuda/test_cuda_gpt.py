"""A GPT-style model (embeddings, causal self-attention with a masked_fill mask, layer_norm, GELU MLP,
dropout, weight tying, cross_entropy with ignore_index) trained with AdamW and clip_grad_norm_ on CUDA
and on the CPU from the same weights and seed: dropout draws the same masks on both devices
(tensor/cuda/kernels/random.cu), so losses, gradients and parameters agree step by step; and its
nanoGPT-style sampling loop draws the CPU's tokens."""

import math

import numpy as np

import kiln
import kiln.nn as nn
import kiln.nn.functional as F

from cuda_util import needs_kernels

pytestmark = needs_kernels


class Attention(nn.Module):
    def __init__(self, d, heads, length):
        super().__init__()
        self.qkv, self.out, self.heads = nn.Linear(d, 3 * d), nn.Linear(d, d), heads
        self.drop = nn.Dropout(0.1)
        self.register_buffer("causal", kiln.tril(kiln.ones(length, length)).view(1, 1, length, length))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in self.qkv(x).split(c, dim=2))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.shape[-1])
        att = self.drop(F.softmax(att.masked_fill(self.causal[:, :, :t, :t] == 0, float("-inf")), dim=-1))
        return self.drop(self.out((att @ v).transpose(1, 2).contiguous().view(b, t, c)))


class Block(nn.Module):
    def __init__(self, d, heads, length):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = Attention(d, heads, length)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.Dropout(0.1))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab=97, d=64, heads=4, layers=2, length=24):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(length, d)
        self.blocks = nn.Sequential(*[Block(d, heads, length) for _ in range(layers)])
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)
        self.tok.weight = self.head.weight

    def forward(self, idx, targets):
        t = idx.shape[1]
        pos = kiln.arange(t, device=idx.device)
        x = F.dropout(self.tok(idx) + self.pos(pos), 0.1, self.training)
        logits = self.head(self.ln(self.blocks(x)))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1), ignore_index=-1)


def test_gpt_training_matches_the_cpu():
    kiln.manual_seed(0)
    cpu = TinyGPT()
    gpu = TinyGPT()
    gpu.load_state_dict(cpu.state_dict())
    gpu.to("cuda")
    assert gpu.tok.weight is gpu.head.weight
    oc = kiln.optim.AdamW(cpu.parameters(), lr=3e-3, weight_decay=0.1)
    og = kiln.optim.AdamW(gpu.parameters(), lr=3e-3, weight_decay=0.1)
    data = kiln.tensor(np.random.default_rng(2).integers(0, 97, (8, 25)))
    x, y = data[:, :-1].contiguous(), data[:, 1:].contiguous()
    y[0, :3] = -1  # ignored targets
    losses = []
    for step in range(4):  # one batch, learnt a little more each step
        kiln.manual_seed(100 + step)  # the same dropout masks on both devices
        lc = cpu(x, y)
        kiln.manual_seed(100 + step)
        lg = gpu(x.cuda(), y.cuda())
        np.testing.assert_allclose(lg.item(), lc.item(), rtol=2e-5, err_msg=f"loss at step {step}")
        losses.append(lc.item())
        for model, opt, loss in ((cpu, oc, lc), (gpu, og, lg)):
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        for (name, pc), pg in zip(cpu.named_parameters(), gpu.parameters()):
            np.testing.assert_allclose(pg.grad.cpu().numpy(), pc.grad.numpy(), rtol=1e-3, atol=2e-5,
                                       err_msg=f"{name} grad at step {step}")
        oc.step()
        og.step()
    assert losses[-1] < losses[0], losses
    for (name, pc), pg in zip(cpu.named_parameters(), gpu.parameters()):
        want, got = pc.detach().numpy(), pg.detach().cpu().numpy()
        if name.endswith("qkv.bias"):
            # The key bias cannot change the attention (softmax ignores a per-row constant), so its
            # gradient is rounding noise that Adam scales to steps of lr: compare queries and values.
            want, got = np.delete(want, np.s_[64:128]), np.delete(got, np.s_[64:128])
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=name)


def generate(model, idx, steps, length, top_k=10, temperature=0.8):
    """nanoGPT's sampling loop: the last position's logits, top-k cut, softmax, multinomial."""
    with kiln.no_grad():
        for _ in range(steps):
            cond = idx[:, -length:]
            x = model.tok(cond) + model.pos(kiln.arange(cond.shape[1], device=idx.device))
            logits = model.head(model.ln(model.blocks(x)))[:, -1, :] / temperature
            v, _ = kiln.topk(logits, min(top_k, logits.shape[-1]))
            logits[logits < v[:, [-1]]] = -float("inf")
            probs = F.softmax(logits, dim=-1)
            nxt = kiln.multinomial(probs, num_samples=1)
            assert bool((kiln.gather(logits, 1, nxt) > -float("inf")).all()), "a token outside the top k"
            idx = kiln.cat((idx, nxt), dim=1)
    return idx


def test_sampling_as_nanogpt_draws_the_cpus_tokens():
    """topk, boolean-mask assignment, softmax and multinomial on CUDA: with one seed the GPU draws the
    CPU's tokens (multinomial's uniforms and order are the CPU's, Note [multinomial])."""
    kiln.manual_seed(0)
    model = TinyGPT().eval()
    start = kiln.tensor([[1], [5]])
    kiln.manual_seed(7)
    want = generate(model, start, 30, 24)
    kiln.manual_seed(7)
    got = generate(model.cuda(), start.cuda(), 30, 24)
    assert got.device.type == "cuda" and tuple(got.shape) == (2, 31)
    np.testing.assert_array_equal(got.cpu().numpy(), want.numpy())
