"""The Transformer language model of pytorch/examples (word_language_model/model.py) at toy size, as
the example writes it: `TransformerModel(nn.Transformer)`, whose nn.TransformerEncoder of
nn.TransformerEncoderLayers (post-norm, ReLU feed-forward) and final LayerNorm it runs as
`self.encoder(src, mask=self.src_mask)`, its decoder stack replaced by the output Linear. The example's
idioms: sinusoidal PositionalEncoding in a registered buffer, embedding scaled by sqrt(d), the causal
mask built from triu/masked_fill and cached on the module in forward (`self.src_mask = mask`), which
TransformerEncoder recognises as causal (`is_causal=None`), init_weights after nn.Transformer's
xavier_uniform_, log_softmax + NLL loss, Adam. Dropout is 0 (the run must be deterministic)."""

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

    class TransformerModel(nn.Transformer):
        def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.0):
            super().__init__(d_model=ninp, nhead=nhead, dim_feedforward=nhid, num_encoder_layers=nlayers,
                             dropout=dropout)
            self.model_type = "Transformer"
            self.src_mask = None
            self.pos_encoder = PositionalEncoding(ninp, dropout)
            self.input_emb = nn.Embedding(ntoken, ninp)
            self.ninp = ninp
            self.decoder = nn.Linear(ninp, ntoken)
            self.init_weights()

        def _generate_square_subsequent_mask(self, sz):
            mask = (torch.triu(torch.ones(sz, sz)) == 1).transpose(0, 1)
            return mask.float().masked_fill(mask == 0, float("-inf")).masked_fill(mask == 1, float(0.0))

        def init_weights(self):
            initrange = 0.1
            nn.init.uniform_(self.input_emb.weight, -initrange, initrange)
            nn.init.zeros_(self.decoder.bias)
            nn.init.uniform_(self.decoder.weight, -initrange, initrange)

        def forward(self, src, has_mask=True):
            if has_mask:
                device = src.device
                if self.src_mask is None or self.src_mask.size(0) != len(src):
                    mask = self._generate_square_subsequent_mask(len(src)).to(device)
                    self.src_mask = mask
            else:
                self.src_mask = None
            src = self.input_emb(src) * math.sqrt(self.ninp)
            src = self.pos_encoder(src)
            output = self.encoder(src, mask=self.src_mask)
            output = self.decoder(output)
            return F.log_softmax(output, dim=-1)

    return TransformerModel(VOCAB, D, HEADS, FF, LAYERS)


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


# PyTorch makes 4 graphs: the causal-mask check in TransformerEncoder.forward (`bool((mask ==
# causal).all())`, is_causal=None) breaks the graph, and the second step recompiles for `self.src_mask
# is None`. PyTorch then runs TransformerEncoder.forward eagerly (a torch.nn frame is not compiled on
# its own), its graphs being the model up to the encoder, the resumed model and the resumed loss (and
# the recompiled start). kiln.compile also compiles that frame: the mask check up to the break and the
# resumed layer loop are 2 graphs more.
ENCODER = Recipe("encoder", build, batches, loss, optimizer, clip=0.25, frames=4, kiln_frames=6)
