import sys, time, math
sys.path.insert(0, "tools/gpu")
import kiln, torch
def build(lib):
    nn, F = lib.nn, lib.nn.functional
    vocab, d, heads, length, batch = 8192, 512, 8, 256, 32
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
            self.register_buffer("mask", lib.tril(lib.ones(length, length)).view(1, 1, length, length))
        def forward(self, x):
            b, t, c = x.shape
            q, k, v = (z.view(b, t, heads, c // heads).transpose(1, 2) for z in self.qkv(self.ln1(x)).split(c, 2))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // heads))
            att = F.dropout(F.softmax(att.masked_fill(self.mask == 0, float("-inf")), dim=-1), 0.1)
            x = x + F.dropout(self.proj((att @ v).transpose(1, 2).contiguous().view(b, t, c)), 0.1)
            return x + F.dropout(self.fc2(F.gelu(self.fc(self.ln2(x)))), 0.1)
    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(length, d)
            self.blocks = nn.Sequential(*[Block() for _ in range(4)])
            self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)
            self.tok.weight = self.head.weight
        def forward(self, idx, targets):
            x = F.dropout(self.tok(idx) + self.pos(lib.arange(idx.shape[1], device=idx.device)), 0.1)
            logits = self.head(self.ln(self.blocks(x)))
            return F.cross_entropy(logits.view(-1, vocab), targets.view(-1))
    lib.manual_seed(0)
    m = GPT().to("cuda")
    opt = lib.optim.AdamW(m.parameters(), lr=3e-4, weight_decay=0.1)
    x = lib.randint(0, vocab, (batch, length), device="cuda")
    return m, opt, x
def t(lib, fn, n=5):
    best = 1e9
    for _ in range(3):
        lib.cuda.synchronize(); t0 = time.perf_counter()
        for _ in range(n): fn()
        lib.cuda.synchronize(); best = min(best, (time.perf_counter() - t0) / n)
    return best * 1e3
for lib in (kiln, torch):
    m, opt, x = build(lib)
    loss = m(x, x); loss.backward()
    fwd = t(lib, lambda: m(x, x))
    def fb():
        m(x, x).backward()
    fb_t = t(lib, fb)
    clip = t(lib, lambda: lib.nn.utils.clip_grad_norm_(m.parameters(), 1.0))
    step = t(lib, lambda: opt.step())
    zero = t(lib, lambda: opt.zero_grad(set_to_none=False))
    # pieces
    X = lib.randn(32, 256, 512, device="cuda"); ln = lib.nn.LayerNorm(512).cuda()
    lnf = t(lib, lambda: ln(X), 50)
    Xg = X.clone().requires_grad_()
    def lnfb():
        ln(Xg).sum().backward()
    lnb = t(lib, lnfb, 20)
    A = lib.randn(32, 8, 256, 256, device="cuda"); M = lib.tril(lib.ones(256, 256)).view(1, 1, 256, 256).cuda()
    att = t(lib, lambda: lib.nn.functional.softmax(A.masked_fill(M == 0, float("-inf")), -1), 20)
    dro = t(lib, lambda: lib.nn.functional.dropout(A, 0.1), 20)
    print(lib.__name__, f"fwd {fwd:.2f} fwd+bwd {fb_t:.2f} clip {clip:.2f} adamw {step:.2f} zero {zero:.2f} | ln fwd {lnf:.3f} ln fwd+bwd {lnb:.3f} mask+softmax {att:.3f} dropout {dro:.3f} ms")
# forward pieces at GPT sizes
for lib in (kiln, torch):
    F = lib.nn.functional
    X = lib.randn(32 * 256, 512, device="cuda"); W = lib.randn(1536, 512, device="cuda"); B = lib.randn(1536, device="cuda")
    lin = t(lib, lambda: F.linear(X, W, B), 20)
    H = lib.randn(32 * 256, 2048, device="cuda")
    ge = t(lib, lambda: F.gelu(H), 20)
    L = lib.randn(32 * 256, 8192, device="cuda"); Y = lib.randint(0, 8192, (32 * 256,), device="cuda")
    ce = t(lib, lambda: F.cross_entropy(L, Y), 20)
    Q = lib.randn(32, 8, 256, 64, device="cuda")
    bm = t(lib, lambda: Q @ Q.transpose(-2, -1), 20)
    E = lib.nn.Embedding(8192, 512).cuda(); I = lib.randint(0, 8192, (32, 256), device="cuda")
    em = t(lib, lambda: E(I), 20)
    tc = t(lib, lambda: Q.transpose(1, 2).contiguous(), 20)
    print(lib.__name__, f"linear {lin:.3f} gelu {ge:.3f} ce {ce:.3f} bmm {bm:.3f} emb {em:.3f} transpose-contig {tc:.3f} ms")
