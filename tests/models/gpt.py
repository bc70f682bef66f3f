"""nanoGPT (karpathy/nanoGPT model.py) at toy size: tied token embedding and LM head, causal
self-attention written both ways nanoGPT writes it (masked_fill on a registered tril buffer, and
F.scaled_dot_product_attention(is_causal=True)), LayerNorm, GELU, dropout 0, AdamW with the
decay/no-decay parameter groups of configure_optimizers, clip_grad_norm_(1.0); and its sampling loop
(generate: topk, masking by a comparison, softmax, multinomial, cat), for test_zoo_sampling.py."""

import math

import numpy as np

from harness import Recipe

VOCAB, BLOCK, LAYERS, HEADS, EMBD = 64, 16, 2, 4, 32
BATCH = 4


def build(torch, flash=False):
    # flash=True also ties the other way round (minGPT-style `lm_head.weight = wte.weight`).
    nn, F = torch.nn, torch.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(EMBD, 3 * EMBD)
            self.c_proj = nn.Linear(EMBD, EMBD)
            self.attn_dropout = nn.Dropout(0.0)
            self.resid_dropout = nn.Dropout(0.0)
            self.n_head, self.n_embd, self.dropout = HEADS, EMBD, 0.0
            self.flash = flash
            if not self.flash:
                self.register_buffer("bias", torch.tril(torch.ones(BLOCK, BLOCK)).view(1, 1, BLOCK, BLOCK))

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            if self.flash:
                y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0, is_causal=True)
            else:
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
                att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
                att = F.softmax(att, dim=-1)
                att = self.attn_dropout(att)
                y = att @ v
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.resid_dropout(self.c_proj(y))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(EMBD, 4 * EMBD)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * EMBD, EMBD)
            self.dropout = nn.Dropout(0.0)

        def forward(self, x):
            return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(EMBD)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(EMBD)
            self.mlp = MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(VOCAB, EMBD),
                wpe=nn.Embedding(BLOCK, EMBD),
                drop=nn.Dropout(0.0),
                h=nn.ModuleList([Block() for _ in range(LAYERS)]),
                ln_f=nn.LayerNorm(EMBD),
            ))
            self.lm_head = nn.Linear(EMBD, VOCAB, bias=False)
            if flash:
                self.lm_head.weight = self.transformer.wte.weight
            else:
                self.transformer.wte.weight = self.lm_head.weight  # weight tying, as nanoGPT writes it
            self.apply(self._init_weights)
            for pn, p in self.named_parameters():
                if pn.endswith("c_proj.weight"):
                    torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * LAYERS))

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    torch.nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

        def forward(self, idx, targets=None):
            device = idx.device
            b, t = idx.size()
            assert t <= BLOCK, f"Cannot forward sequence of length {t}, block size is only {BLOCK}"
            pos = torch.arange(0, t, dtype=torch.long, device=device)
            x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
            for block in self.transformer.h:
                x = block(x)
            x = self.transformer.ln_f(x)
            if targets is not None:
                logits = self.lm_head(x)
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
            else:  # inference: the last position only, as nanoGPT's (a list index keeps the time dim)
                logits = self.lm_head(x[:, [-1], :])
                loss = None
            return logits, loss

        def configure_optimizers(self, weight_decay, learning_rate, betas):
            param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
            decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
            nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
            optim_groups = [
                {"params": decay_params, "weight_decay": weight_decay},
                {"params": nodecay_params, "weight_decay": 0.0},
            ]
            return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas)

    return GPT()


def generate(torch, model, idx, max_new_tokens, temperature=1.0, top_k=None):
    """nanoGPT's sampling loop: crop to the block, scale the last logits, keep the top k, sample."""
    F = torch.nn.functional
    with torch.no_grad():
        for _ in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= BLOCK else idx[:, -BLOCK:]
            logits, _ = model(idx_cond)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float("Inf")
            probs = F.softmax(logits, dim=-1)
            idx_next = torch.multinomial(probs, num_samples=1)
            idx = torch.cat((idx, idx_next), dim=1)
    return idx


def batches(rng):
    data = rng.integers(0, VOCAB, size=1000)
    out = []
    for _ in range(3):
        ix = rng.integers(0, len(data) - BLOCK, size=BATCH)
        x = np.stack([data[i:i + BLOCK] for i in ix])
        y = np.stack([data[i + 1:i + 1 + BLOCK] for i in ix])
        y[0, :3] = -1  # ignore_index, as a padded batch would have
        out.append((x, y))
    return out


def loss(torch, model, x, y):
    _, loss = model(x, y)
    return loss


def optimizer(torch, model):
    return model.configure_optimizers(weight_decay=0.1, learning_rate=1e-3, betas=(0.9, 0.95))


GPT_MASKED = Recipe("gpt", build, batches, loss, optimizer, clip=1.0)
GPT_SDPA = Recipe("gpt_sdpa", lambda torch: build(torch, flash=True), batches, loss, optimizer, clip=1.0)
