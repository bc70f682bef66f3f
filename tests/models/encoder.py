"""The Transformer language model of pytorch/examples (word_language_model/model.py) at toy size,
with the encoder layer written by hand around nn.MultiheadAttention (post-norm, ReLU feed-forward, as
nn.TransformerEncoderLayer computes it) and the example's idioms: sinusoidal PositionalEncoding in a
registered buffer, embedding scaled by sqrt(d), and the causal mask cached on the module in forward
(`self.src_mask = mask`), log_softmax + NLL loss, Adam.

Not here yet: nn.TransformerEncoder / nn.TransformerEncoderLayer themselves, which kiln lacks."""

import math

from harness import Recipe

VOCAB, D, HEADS, FF, LAYERS, SEQ = 64, 32, 4, 64, 2, 12
BATCH = 4


def build(torch):
    nn, F = torch.nn, torch.nn.functional

    class PositionalEncoding(nn.Module):
        def __init__(self, d_model, dropout=0.0, max_len=64):
            super().__init__()
            self.dropout = nn.Dropout(p=dropout)
            pe = torch.zeros(max_len, d_model)
            position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
            div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
            pe[:, 0::2] = torch.sin(position * div_term)
            pe[:, 1::2] = torch.cos(position * div_term)
            pe = pe.unsqueeze(0).transpose(0, 1)
            self.register_buffer("pe", pe)

        def forward(self, x):
            x = x + self.pe[: x.size(0), :]
            return self.dropout(x)

    class EncoderLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.self_attn = nn.MultiheadAttention(D, HEADS, dropout=0.0)
            self.linear1 = nn.Linear(D, FF)
            self.dropout = nn.Dropout(0.0)
            self.linear2 = nn.Linear(FF, D)
            self.norm1 = nn.LayerNorm(D)
            self.norm2 = nn.LayerNorm(D)

        def forward(self, src, src_mask):
            x = self.norm1(src + self.self_attn(src, src, src, attn_mask=src_mask, need_weights=False)[0])
            return self.norm2(x + self.linear2(self.dropout(F.relu(self.linear1(x)))))

    class TransformerModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.src_mask = None
            self.pos_encoder = PositionalEncoding(D)
            self.layers = nn.ModuleList([EncoderLayer() for _ in range(LAYERS)])
            self.encoder = nn.Embedding(VOCAB, D)
            self.decoder = nn.Linear(D, VOCAB)
            self.ninp = D

        def _generate_square_subsequent_mask(self, sz):
            return torch.log(torch.tril(torch.ones(sz, sz)))

        def forward(self, src, has_mask=True):
            if has_mask:
                if self.src_mask is None or self.src_mask.size(0) != len(src):
                    mask = self._generate_square_subsequent_mask(len(src))
                    self.src_mask = mask
            else:
                self.src_mask = None
            src = self.encoder(src) * math.sqrt(self.ninp)
            output = self.pos_encoder(src)
            for layer in self.layers:
                output = layer(output, self.src_mask)
            output = self.decoder(output)
            return F.log_softmax(output, dim=-1)

    return TransformerModel()


def batches(rng):
    out = []
    for _ in range(3):
        data = rng.integers(0, VOCAB, (SEQ + 1, BATCH))
        out.append((data[:-1], data[1:]))
    return out


def loss(torch, model, data, targets):
    output = model(data)
    return torch.nn.functional.nll_loss(output.view(-1, VOCAB), targets.reshape(-1))


def optimizer(torch, model):
    return torch.optim.Adam(model.parameters(), lr=1e-3)


# The first step stores the mask (`self.src_mask is None`), the second sees it stored: PyTorch's
# torch.compile recompiles once for that guard too (its CompileCounter counts 2 frames).
ENCODER = Recipe("encoder", build, batches, loss, optimizer, clip=0.25, frames=2)
