"""A llama-style decoder (meta-llama/llama model.py): RMSNorm written by hand, rotary embeddings,
grouped-query attention (repeat_kv), the causal mask built in forward with full + triu, SwiGLU
feed-forward, untied output head, AdamW.

Two rotary forms: `llama` has Hugging Face's LlamaRotaryEmbedding (real cos/sin buffers and
rotate_half); `llama_complex` has meta's own (precompute_freqs_cis with torch.outer and
torch.polar, kept as a plain attribute re-assigned by `.to(h.device)` in forward, and
apply_rotary_emb through view_as_complex, a complex multiply and view_as_real)."""

import functools
import math

from harness import Recipe

VOCAB, SEQ, LAYERS, HEADS, KV_HEADS, DIM, HIDDEN = 64, 12, 2, 4, 2, 32, 64
BATCH = 4


def build(torch, rotary="cos_sin"):
    nn, F = torch.nn, torch.nn.functional
    head_dim = DIM // HEADS

    class RMSNorm(nn.Module):
        def __init__(self, dim, eps=1e-6):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(dim))

        def _norm(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

        def forward(self, x):
            output = self._norm(x.float()).type_as(x)
            return output * self.weight

    def rotate_half(x):
        x1 = x[..., : x.shape[-1] // 2]
        x2 = x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    def apply_rotary_pos_emb(q, k, cos, sin):
        cos, sin = cos[None, :, None, :], sin[None, :, None, :]  # (1, seq, 1, head_dim)
        return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)

    def precompute_freqs_cis(dim, end, theta=10000.0):
        freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
        t = torch.arange(end, device=freqs.device, dtype=torch.float32)
        freqs = torch.outer(t, freqs)
        return torch.polar(torch.ones_like(freqs), freqs)  # complex64

    def reshape_for_broadcast(freqs_cis, x):
        ndim = x.ndim
        assert 0 <= 1 < ndim
        assert freqs_cis.shape == (x.shape[1], x.shape[-1])
        shape = [d if i == 1 or i == ndim - 1 else 1 for i, d in enumerate(x.shape)]
        return freqs_cis.view(*shape)

    def apply_rotary_emb(xq, xk, freqs_cis):
        xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
        xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
        freqs_cis = reshape_for_broadcast(freqs_cis, xq_)
        xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
        xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
        return xq_out.type_as(xq), xk_out.type_as(xk)

    def repeat_kv(x, n_rep):
        bs, slen, n_kv_heads, hd = x.shape
        if n_rep == 1:
            return x
        return x[:, :, :, None, :].expand(bs, slen, n_kv_heads, n_rep, hd).reshape(bs, slen, n_kv_heads * n_rep, hd)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.n_rep = HEADS // KV_HEADS
            self.wq = nn.Linear(DIM, HEADS * head_dim, bias=False)
            self.wk = nn.Linear(DIM, KV_HEADS * head_dim, bias=False)
            self.wv = nn.Linear(DIM, KV_HEADS * head_dim, bias=False)
            self.wo = nn.Linear(HEADS * head_dim, DIM, bias=False)

        def forward(self, x, rope, mask):
            bsz, seqlen, _ = x.shape
            xq = self.wq(x).view(bsz, seqlen, HEADS, head_dim)
            xk = self.wk(x).view(bsz, seqlen, KV_HEADS, head_dim)
            xv = self.wv(x).view(bsz, seqlen, KV_HEADS, head_dim)
            if rotary == "complex":
                xq, xk = apply_rotary_emb(xq, xk, freqs_cis=rope)
            else:
                xq, xk = apply_rotary_pos_emb(xq, xk, *rope)
            keys, values = repeat_kv(xk, self.n_rep), repeat_kv(xv, self.n_rep)
            xq, keys, values = xq.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2)
            scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(head_dim)
            scores = scores + mask
            scores = F.softmax(scores.float(), dim=-1).type_as(xq)
            output = torch.matmul(scores, values)
            return self.wo(output.transpose(1, 2).contiguous().view(bsz, seqlen, -1))

    class FeedForward(nn.Module):
        def __init__(self):
            super().__init__()
            self.w1 = nn.Linear(DIM, HIDDEN, bias=False)
            self.w2 = nn.Linear(HIDDEN, DIM, bias=False)
            self.w3 = nn.Linear(DIM, HIDDEN, bias=False)

        def forward(self, x):
            return self.w2(F.silu(self.w1(x)) * self.w3(x))

    class TransformerBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = Attention()
            self.feed_forward = FeedForward()
            self.attention_norm = RMSNorm(DIM)
            self.ffn_norm = RMSNorm(DIM)

        def forward(self, x, rope, mask):
            h = x + self.attention(self.attention_norm(x), rope, mask)
            return h + self.feed_forward(self.ffn_norm(h))

    class Transformer(nn.Module):
        def __init__(self, theta=10000.0):
            super().__init__()
            self.tok_embeddings = nn.Embedding(VOCAB, DIM)
            self.layers = nn.ModuleList([TransformerBlock() for _ in range(LAYERS)])
            self.norm = RMSNorm(DIM)
            self.output = nn.Linear(DIM, VOCAB, bias=False)
            if rotary == "complex":
                self.freqs_cis = precompute_freqs_cis(head_dim, SEQ * 2)
                return
            inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2).float() / head_dim))
            # Hugging Face's current form; its older `torch.outer(t, inv_freq)` needs kiln.outer (missing).
            freqs = (inv_freq[:, None] @ torch.arange(SEQ * 2).float()[None, :]).transpose(0, 1)
            emb = torch.cat((freqs, freqs), dim=-1)
            self.register_buffer("cos_cached", emb.cos(), persistent=False)
            self.register_buffer("sin_cached", emb.sin(), persistent=False)

        def forward(self, tokens, targets):
            _bsz, seqlen = tokens.shape
            h = self.tok_embeddings(tokens)
            if rotary == "complex":
                self.freqs_cis = self.freqs_cis.to(h.device)
                rope = self.freqs_cis[0:seqlen]
            else:
                rope = self.cos_cached[:seqlen], self.sin_cached[:seqlen]
            mask = torch.full((seqlen, seqlen), float("-inf"), device=tokens.device)
            mask = torch.triu(mask, diagonal=1).type_as(h)
            for layer in self.layers:
                h = layer(h, rope, mask)
            logits = self.output(self.norm(h)).float()
            return F.cross_entropy(logits.view(-1, VOCAB), targets.reshape(-1))

    return Transformer()


def batches(rng):
    return [(rng.integers(0, VOCAB, (BATCH, SEQ)), rng.integers(0, VOCAB, (BATCH, SEQ))) for _ in range(3)]


def loss(torch, model, tokens, targets):
    return model(tokens, targets)


def optimizer(torch, model):
    return torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)


LLAMA = Recipe("llama", build, batches, loss, optimizer, clip=1.0)
LLAMA_COMPLEX = Recipe("llama_complex", functools.partial(build, rotary="complex"), batches, loss, optimizer, clip=1.0)
