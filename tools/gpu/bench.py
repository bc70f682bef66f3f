"""tools/gpu/bench.py: kiln's CUDA runtime side by side with PyTorch on the GPU machine, in one
process, interleaved, best (median where noted) of several rounds; a table of ratios last.

What exists so far (issue 18): the first CUDA op of a process, the caching allocator, copies between
host and device (pageable and pinned) and on the device, fill, mm through cuBLAS, and the generated
pointwise kernels (launch overhead, bandwidth, the first kernels' compile time), a Linear with its
bias (cuBLASLt's epilogue), a multi-tensor SGD step, and the generated
reduction kernels (whole tensors, rows, columns, short rows, argmax, a bias gradient, latency), eager
training steps of an MLP, the digits CNN and a GPT-style model, a ResNet-sized convolution and
batch_norm, and randn (the nvcc-built Philox kernels).
Run through tools/gpu/bench.sh (which unpacks the module)."""

import os
import statistics
import subprocess
import sys
import tempfile
import time

import kiln
import torch

ROWS = []


def row(name, k, t, unit, higher_is_better=False):
    ratio = (t / k) if higher_is_better else (k / t)
    ROWS.append((name, k, t, unit, ratio))
    print(f"{name:<44} kiln {k:10.3f} {unit:<6} torch {t:10.3f} {unit:<6} kiln/torch time {ratio:5.2f}x", flush=True)


def cold_start(lib, rounds=5, cache_dir=None):
    """Seconds from import to the first CUDA tensor's values on the host, in a fresh process each.
    cache_dir: kiln's kernel disk cache for the run (None: a new empty one each, so kernels compile)."""
    code = (f"import time; t0 = time.perf_counter(); import {lib}; t1 = time.perf_counter(); "
            f"x = {lib}.ones(1, device='cuda'); x.cpu(); t2 = time.perf_counter(); "
            f"y = (x * 2.5 + 1).exp(); y.cpu(); t3 = time.perf_counter(); "
            f"print(t1 - t0, t2 - t1, t3 - t2)")
    out = []
    for _ in range(rounds):
        env = dict(os.environ, KILN_CUDA_CACHE_DIR=cache_dir or tempfile.mkdtemp())
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
        out.append(tuple(map(float, p.stdout.split())))
    return out


def timed(fn, sync, n, rounds=5):
    best = float("inf")
    for _ in range(rounds):
        sync()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def main():
    ks, ts = kiln.cuda.synchronize, torch.cuda.synchronize
    # 1. the first CUDA op in a process (import excluded), median of 5 fresh processes each, interleaved
    k_runs, t_runs = [], []
    for _ in range(5):
        k_runs += cold_start("kiln", 1)
        t_runs += cold_start("torch", 1)
    row("first CUDA op (context, alloc, copy) s", statistics.median(r[1] for r in k_runs),
        statistics.median(r[1] for r in t_runs), "s")
    row("import s", statistics.median(r[0] for r in k_runs), statistics.median(r[0] for r in t_runs), "s")
    row("first 3 pointwise kernels (compiled) ms", statistics.median(r[2] for r in k_runs) * 1e3,
        statistics.median(r[2] for r in t_runs) * 1e3, "ms")
    warm_dir = tempfile.mkdtemp()
    cold_start("kiln", 1, warm_dir)  # fills the disk cache
    k_warm = cold_start("kiln", 5, warm_dir)
    row("first 3 pointwise kernels (disk cache) ms", statistics.median(r[2] for r in k_warm) * 1e3,
        statistics.median(r[2] for r in t_runs) * 1e3, "ms")

    # 2. caching allocator: empty + free of 1 MiB, cached
    row("empty(1 MiB) + free, cached us", timed(lambda: kiln.empty(1 << 18, device="cuda"), ks, 20000) * 1e6,
        timed(lambda: torch.empty(1 << 18, device="cuda"), ts, 20000) * 1e6, "us")

    # 3. copies, 256 MiB
    n = 64 << 20
    for pinned in (False, True):
        kh, th = kiln.ones(n), torch.ones(n)
        if pinned:
            kh, th = kh.pin_memory(), th.pin_memory()
        kd, td = kiln.empty(n, device="cuda"), torch.empty(n, device="cuda")
        gb = n * 4 / 1e9
        label = "pinned" if pinned else "pageable"
        row(f"host->device {label} GB/s", gb / timed(lambda: kd.copy_(kh), ks, 5),
            gb / timed(lambda: td.copy_(th), ts, 5), "GB/s", higher_is_better=True)
        row(f"device->host {label} GB/s", gb / timed(lambda: kh.copy_(kd), ks, 5),
            gb / timed(lambda: th.copy_(td), ts, 5), "GB/s", higher_is_better=True)
    # 4. on the device: 1 GiB clone (read + write) and fill
    n = 256 << 20
    kd, td = kiln.ones(n, device="cuda"), torch.ones(n, device="cuda")
    gb = n * 4 / 1e9
    row("clone 1 GiB (read+write) TB/s", 2 * gb / timed(lambda: kd.clone(), ks, 20) / 1e3,
        2 * gb / timed(lambda: td.clone(), ts, 20) / 1e3, "TB/s", higher_is_better=True)
    row("fill_ 1 GiB TB/s", gb / timed(lambda: kd.fill_(2.0), ks, 20) / 1e3,
        gb / timed(lambda: td.fill_(2.0), ts, 20) / 1e3, "TB/s", higher_is_better=True)
    row("zeros(1) latency us", timed(lambda: kiln.zeros(1, device="cuda"), ks, 20000) * 1e6,
        timed(lambda: torch.zeros(1, device="cuda"), ts, 20000) * 1e6, "us")

    # 5. matmul through cuBLAS: sgemm, TF32, bf16 at 8192 and 1024 (random data, never zeros)
    for size, reps in ((8192, 10), (1024, 200)):
        flop = 2 * size ** 3
        for label, kdt, tdt, tf32 in (("sgemm", kiln.float32, torch.float32, False),
                                      ("tf32", kiln.float32, torch.float32, True),
                                      ("bf16", kiln.bfloat16, torch.bfloat16, False)):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            kiln.backends.cuda.matmul.allow_tf32 = tf32
            ta = torch.randn(size, size, device="cuda", dtype=tdt)
            tb = torch.randn(size, size, device="cuda", dtype=tdt)
            ka = kiln.empty(size, size, dtype=kdt, device="cuda").copy_(kiln.randn(size, size).to(kdt))
            kb = kiln.empty(size, size, dtype=kdt, device="cuda").copy_(kiln.randn(size, size).to(kdt))
            row(f"{label} {size} TFLOP/s", flop / timed(lambda: kiln.mm(ka, kb), ks, reps) / 1e12,
                flop / timed(lambda: torch.mm(ta, tb), ts, reps) / 1e12, "TFLOP/s", higher_is_better=True)
        torch.backends.cuda.matmul.allow_tf32 = False
        kiln.backends.cuda.matmul.allow_tf32 = False

    # 5b. a Linear layer's forward with its bias (addmm: cuBLASLt's bias epilogue in kiln and PyTorch)
    # on a GPT-sized activation, float32 and bf16
    for label, kdt, tdt in (("f32", kiln.float32, torch.float32), ("bf16", kiln.bfloat16, torch.bfloat16)):
        rows_, d_in, d_out = 8192, 1024, 4096
        tx, tw, tbias = (torch.randn(*s, device="cuda", dtype=tdt) for s in ((rows_, d_in), (d_out, d_in), (d_out,)))
        kx_, kw_, kb_ = (kiln.empty(*t.shape, dtype=kdt, device="cuda").copy_(kiln.randn(*t.shape).to(kdt))
                         for t in (tx, tw, tbias))
        flop = 2 * rows_ * d_in * d_out
        row(f"linear+bias 8192x1024->4096 {label} TFLOP/s",
            flop / timed(lambda: kiln.nn.functional.linear(kx_, kw_, kb_), ks, 50) / 1e12,
            flop / timed(lambda: torch.nn.functional.linear(tx, tw, tbias), ts, 50) / 1e12, "TFLOP/s",
            higher_is_better=True)

    # 5c. an SGD step with momentum and weight decay over resnet18's 62 parameter shapes (11.7M values):
    # kiln's multi-tensor kernel against PyTorch's foreach path
    resnet_shapes = [(64, 3, 7, 7), (64,), (64,)] + [(64, 64, 3, 3), (64,), (64,)] * 4 + \
        [(128, 64, 3, 3), (128,), (128,), (128, 128, 3, 3), (128,), (128,), (128, 64, 1, 1), (128,), (128,)] + \
        [(128, 128, 3, 3), (128,), (128,)] * 2 + \
        [(256, 128, 3, 3), (256,), (256,), (256, 256, 3, 3), (256,), (256,), (256, 128, 1, 1), (256,), (256,)] + \
        [(256, 256, 3, 3), (256,), (256,)] * 2 + \
        [(512, 256, 3, 3), (512,), (512,), (512, 512, 3, 3), (512,), (512,), (512, 256, 1, 1), (512,), (512,)] + \
        [(512, 512, 3, 3), (512,), (512,)] * 2 + [(1000, 512), (1000,)]

    def sgd_step(lib):
        ps = [lib.nn.Parameter(lib.randn(*s, device="cuda")) for s in resnet_shapes]
        for p in ps:
            p.grad = lib.randn(*p.shape, device="cuda")
        opt = lib.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=1e-4)
        return opt.step

    k_sgd, t_sgd = sgd_step(kiln), sgd_step(torch)
    k_sgd(), t_sgd()
    row(f"SGD momentum step, resnet18 params ({len(resnet_shapes)}) us", timed(k_sgd, ks, 50) * 1e6,
        timed(t_sgd, ts, 50) * 1e6, "us")

    # 6. generated pointwise kernels: launch overhead, then bandwidth on 64M elements
    k1, t1 = kiln.ones(1, device="cuda"), torch.ones(1, device="cuda")
    row("x + 1 on 1 element us", timed(lambda: k1 + 1, ks, 20000) * 1e6, timed(lambda: t1 + 1, ts, 20000) * 1e6, "us")

    def chain(m, x):
        for _ in range(4):
            x = m.relu(x * 1.01 + 0.1).sub(0.05)
        return x
    ks1k, ts1k = kiln.ones(1024, device="cuda"), torch.ones(1024, device="cuda")
    row("16 small pointwise ops (1024) us", timed(lambda: chain(kiln, ks1k), ks, 2000) * 1e6,
        timed(lambda: chain(torch, ts1k), ts, 2000) * 1e6, "us")
    n = 64 << 20
    kx, ky = kiln.empty(n, device="cuda").copy_(kiln.rand(n)), kiln.empty(n, device="cuda").copy_(kiln.rand(n))
    tx, ty = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
    gb = n * 4 / 1e9
    row("clone 256 MiB (copy) TB/s", 2 * gb / timed(lambda: kx.clone(), ks, 50) / 1e3,
        2 * gb / timed(lambda: tx.clone(), ts, 50) / 1e3, "TB/s", higher_is_better=True)
    row("x * y 64M f32 TB/s", 3 * gb / timed(lambda: kx * ky, ks, 50) / 1e3,
        3 * gb / timed(lambda: tx * ty, ts, 50) / 1e3, "TB/s", higher_is_better=True)
    row("x * y + 1 64M f32 (2 kernels) ms", timed(lambda: kx * ky + 1, ks, 50) * 1e3,
        timed(lambda: tx * ty + 1, ts, 50) * 1e3, "ms")
    row("exp(x) 64M f32 TB/s", 2 * gb / timed(lambda: kx.exp(), ks, 50) / 1e3,
        2 * gb / timed(lambda: tx.exp(), ts, 50) / 1e3, "TB/s", higher_is_better=True)
    kb, tb = kx.to(kiln.bfloat16), tx.to(torch.bfloat16)
    row("a + b 64M bf16 TB/s", 1.5 * gb / timed(lambda: kb + kb, ks, 50) / 1e3,
        1.5 * gb / timed(lambda: tb + tb, ts, 50) / 1e3, "TB/s", higher_is_better=True)
    row("f32 -> bf16 64M TB/s", 1.5 * gb / timed(lambda: kx.to(kiln.bfloat16), ks, 50) / 1e3,
        1.5 * gb / timed(lambda: tx.to(torch.bfloat16), ts, 50) / 1e3, "TB/s", higher_is_better=True)
    km, tm = kx.view(8192, 8192), tx.view(8192, 8192)
    row("x.t() + x 8192^2 f32 (strided) TB/s", 3 * gb / timed(lambda: km.t() + km, ks, 20) / 1e3,
        3 * gb / timed(lambda: tm.t() + tm, ts, 20) / 1e3, "TB/s", higher_is_better=True)
    row("x.t().contiguous() 8192^2 f32 TB/s", 2 * gb / timed(lambda: km.t().contiguous(), ks, 20) / 1e3,
        2 * gb / timed(lambda: tm.t().contiguous(), ts, 20) / 1e3, "TB/s", higher_is_better=True)

    # 6. reductions: whole tensors (split across blocks), rows (vector loads), columns, short rows
    def reduce_row(label, kfn, tfn, nbytes, reps=50):
        row(label, nbytes / timed(kfn, ks, reps) / 1e12, nbytes / timed(tfn, ts, reps) / 1e12, "TB/s",
            higher_is_better=True)

    reduce_row("x.sum() 64M f32 TB/s", lambda: kx.sum(), lambda: tx.sum(), 4 * n)
    kr, tr = kx.view(16384, 4096), tx.view(16384, 4096)
    reduce_row("x.sum(1) 16384x4096 f32 TB/s", lambda: kr.sum(1), lambda: tr.sum(1), 4 * n)
    reduce_row("x.sum(0) 8192x8192 f32 (columns) TB/s", lambda: km.sum(0), lambda: tm.sum(0), 4 * n)
    reduce_row("x.t().sum(1) 8192x8192 f32 TB/s", lambda: km.t().sum(1), lambda: tm.t().sum(1), 4 * n)
    reduce_row("x.sum(1) 4Mx16 f32 (short rows) TB/s", lambda: kx.view(-1, 16).sum(1), lambda: tx.view(-1, 16).sum(1), 4 * n)
    reduce_row("x.amax(1) 16384x4096 f32 TB/s", lambda: kr.amax(1), lambda: tr.amax(1), 4 * n)
    reduce_row("x.argmax(1) 16384x4096 f32 TB/s", lambda: kr.argmax(1), lambda: tr.argmax(1), 4 * n)
    kbr, tbr = kb.view(16384, 4096), tb.view(16384, 4096)
    reduce_row("x.sum(1) 16384x4096 bf16 TB/s", lambda: kbr.sum(1), lambda: tbr.sum(1), 2 * n)
    kg, tg = kx[: 8192 * 1024].view(8192, 1024), tx[: 8192 * 1024].view(8192, 1024)
    row("bias grad g.sum(0) 8192x1024 f32 us", timed(lambda: kg.sum(0), ks, 200) * 1e6,
        timed(lambda: tg.sum(0), ts, 200) * 1e6, "us")
    row("x.sum() 1024 f32 latency us", timed(lambda: ks1k.sum(), ks, 5000) * 1e6,
        timed(lambda: ts1k.sum(), ts, 5000) * 1e6, "us")
    # 7. eager training steps with cross_entropy and AdamW: an MLP (784-1024-1024-10, batch 512) and the
    # digits CNN (tools/digits.py: Conv2d, BatchNorm2d, SiLU, MaxPool2d, Linear; batch 64), whose
    # step the issue wants at most 1.0x PyTorch's
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from digits import cnn

    def mlp(lib):
        nn = lib.nn
        return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.GELU(), nn.Linear(1024, 10))

    def classifier_step(lib, make, batch, features, lr):
        lib.manual_seed(0)
        model = make(lib).to("cuda")
        opt = lib.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
        x, y = lib.randn(batch, features, device="cuda"), lib.randint(0, 10, (batch,), device="cuda")

        def step():
            opt.zero_grad()
            lib.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        return step

    for label, make, batch, features, lr in (("MLP training step (AdamW) us", mlp, 512, 784, 1e-3),
                                             ("digits CNN training step (AdamW, b64) us", cnn, 64, 64, 1e-2)):
        k_step, t_step = classifier_step(kiln, make, batch, features, lr), classifier_step(torch, make, batch, features, lr)
        for _ in range(3):
            k_step(), t_step()
        row(label, timed(k_step, ks, 50) * 1e6, timed(t_step, ts, 50) * 1e6, "us")

    # 7c. a ResNet-sized 3x3 convolution (64 channels, 32x56x56) and batch_norm, forward + backward,
    # float32 with both libraries' default TF32 convolutions (cuDNN's in PyTorch)
    def conv_bn(lib):
        lib.manual_seed(0)
        conv = lib.nn.Conv2d(64, 64, 3, padding=1, bias=False).to("cuda")
        bn = lib.nn.BatchNorm2d(64).to("cuda")
        x = lib.randn(32, 64, 56, 56, device="cuda", requires_grad=True)
        return (lambda: conv(x).sum().backward()), (lambda: bn(x).sum().backward())

    (k_conv, k_bn), (t_conv, t_bn) = conv_bn(kiln), conv_bn(torch)
    for _ in range(2):
        k_conv(), t_conv(), k_bn(), t_bn()
    row("conv2d 3x3 64ch 32x56x56 fwd+bwd ms", timed(k_conv, ks, 10) * 1e3, timed(t_conv, ts, 10) * 1e3, "ms")
    row("batch_norm 32x64x56x56 train fwd+bwd ms", timed(k_bn, ks, 20) * 1e3, timed(t_bn, ts, 20) * 1e3, "ms")

    # 8. a GPT-style training step (4 layers, d=512, 8 heads, batch 32, length 256, vocabulary 8192):
    # embeddings, layer_norm, attention through bmm, masked_fill, softmax, dropout, GELU, cross_entropy,
    # AdamW; the target is at most 1.0x PyTorch's eager step.
    def gpt_step(lib):
        import math

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
        model = GPT().to("cuda")
        opt = lib.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
        x = lib.randint(0, vocab, (batch, length), device="cuda")
        y = lib.randint(0, vocab, (batch, length), device="cuda")

        def step():
            opt.zero_grad(set_to_none=True)
            model(x, y).backward()
            lib.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
        return step

    k_gpt, t_gpt = gpt_step(kiln), gpt_step(torch)
    for _ in range(2):
        k_gpt(), t_gpt()
    row("GPT training step (4x512, b32 l256, AdamW) ms", timed(k_gpt, ks, 5) * 1e3, timed(t_gpt, ts, 5) * 1e3, "ms")
    row("dropout(p=0.1) 64M f32 (x, out, mask) TB/s",
        9 * n / timed(lambda: kiln.nn.functional.dropout(kx, 0.1), ks, 20) / 1e12,
        9 * n / timed(lambda: torch.nn.functional.dropout(tx, 0.1), ts, 20) / 1e12, "TB/s", higher_is_better=True)
    row("randn 64M f32 TB/s", 4 * n / timed(lambda: kiln.randn(n, device="cuda"), ks, 20) / 1e12,
        4 * n / timed(lambda: torch.randn(n, device="cuda"), ts, 20) / 1e12, "TB/s", higher_is_better=True)

    copy = 2 * gb / timed(lambda: kx.clone(), ks, 50) / 1e3
    total = 4 * n / timed(lambda: kx.sum(), ks, 50) / 1e12
    print(f"x.sum() 64M f32 reads at {total / copy:.0%} of kiln's copy bandwidth ({total:.2f} / {copy:.2f} TB/s)")

    print("\n| measure | kiln | torch | kiln/torch time |")
    print("| --- | --- | --- | --- |")
    for name, k, t, unit, ratio in ROWS:
        print(f"| {name} | {k:.3f} {unit} | {t:.3f} {unit} | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
