"""The hot ops of real models (issue 19), kiln eager against PyTorch eager on the CPU, interleaved.

    tools/python tools/bench/hot_ops_bench.py [--rounds 7] [--only gelu,erf]

Each case runs kiln and PyTorch alternately for several rounds. A round times a batch of calls
(sized to ~20 ms) and keeps the time per call. Two measures, both printed as min and median over
the rounds and as the ratio kiln / PyTorch (lower is better):
  - cpu@1: CPU time of the process (time.process_time) with both libraries at one thread, which a
    loaded machine does not inflate the way it inflates wall time;
  - wall@2: wall time with both at two threads.
The spread column is (median - min) / min of kiln's cpu@1 times: above ~10%, rerun.
"""

import argparse
import statistics
import time

import numpy as np

import kiln

try:
    import torch
except ImportError:
    torch = None


def cases(lib, rng):
    """name -> zero-argument callable, for one library; the same data for both."""
    is_kiln = lib is kiln
    tensor = (lambda a, **kw: kiln.tensor(a, **kw)) if is_kiln else (lambda a, **kw: torch.tensor(a, **kw))
    F = lib.nn.functional
    x_np = rng.standard_normal((1024, 256)).astype(np.float32)
    x = tensor(x_np)
    xg = tensor(x_np, requires_grad=True)
    g = tensor(rng.standard_normal((1024, 256)).astype(np.float32))
    big = tensor(rng.standard_normal((1024, 1024)).astype(np.float32))
    # layer norm on a GPT-sized activation: batch 8 x length 128 rows of 256
    ln_x = tensor(rng.standard_normal((8, 128, 256)).astype(np.float32), requires_grad=True)
    ln_w = tensor(rng.standard_normal(256).astype(np.float32), requires_grad=True)
    ln_b = tensor(rng.standard_normal(256).astype(np.float32), requires_grad=True)
    ln_g = tensor(rng.standard_normal((8, 128, 256)).astype(np.float32))
    # cross_entropy over a GPT vocabulary: 1024 tokens x 2048 classes
    logits = tensor(rng.standard_normal((1024, 2048)).astype(np.float32), requires_grad=True)
    target = tensor(rng.integers(0, 2048, 1024))
    idx = tensor(rng.integers(0, 1024, 512))
    # per-call cost of indexing a small tensor (the parse, not the copy)
    small = tensor(rng.standard_normal((8, 16)).astype(np.float32))
    small_i, small_m = tensor(np.array([1, 3])), small > 0
    small2 = tensor(rng.standard_normal((8, 16)).astype(np.float32))
    one = tensor(rng.standard_normal(1).astype(np.float32))

    def fwd_bwd(fn, inp, grad):
        def run():
            y = fn(inp)
            y.backward(grad)
            inp.grad = None
        return run

    def ln_fwd_bwd():
        y = F.layer_norm(ln_x, (256,), ln_w, ln_b)
        y.backward(ln_g)
        ln_x.grad = ln_w.grad = ln_b.grad = None

    def ce_fwd_bwd():
        F.cross_entropy(logits, target).backward()
        logits.grad = None

    return {
        "gelu 1024x256": lambda: F.gelu(x),
        "gelu fwd+bwd 1024x256": fwd_bwd(F.gelu, xg, g),
        "gelu tanh 1024x256": lambda: F.gelu(x, approximate="tanh"),
        "erf 1024x256": lambda: lib.erf(x),
        "silu 1024x256": lambda: F.silu(x),
        "silu fwd+bwd 1024x256": fwd_bwd(F.silu, xg, g),
        "sigmoid 1024x256": lambda: lib.sigmoid(x),
        "exp 1024x256": lambda: lib.exp(x),
        "tanh 1024x256": lambda: lib.tanh(x),
        "relu 1024x256": lambda: lib.relu(x),
        "x + y 1024x256": lambda: x + g,
        "sum(0) 1024x1024": lambda: big.sum(0),
        "t().contiguous() 1024x1024": lambda: big.t().contiguous(),
        "layer_norm fwd 8x128x256": lambda: F.layer_norm(ln_x.detach(), (256,), ln_w.detach(), ln_b.detach()),
        "layer_norm fwd+bwd 8x128x256": ln_fwd_bwd,
        "cross_entropy 1024x2048": lambda: F.cross_entropy(logits.detach(), target),
        "cross_entropy fwd+bwd 1024x2048": ce_fwd_bwd,
        "x[idx] 1024x1024 (512 rows)": lambda: big[idx],
        "x[:, 1::2] copy 1024x1024": lambda: big[:, 1::2].contiguous(),
        "x[0] 8x16": lambda: small[0],
        "x[i] 8x16 (2 rows)": lambda: small[small_i],
        "x[mask] 8x16": lambda: small[small_m],
        "x[0] = 1.0 8x16": lambda: small.__setitem__(0, 1.0),
        "x[:, 1:3] = 0.0 8x16": lambda: small.__setitem__((slice(None), slice(1, 3)), 0.0),
        "x[i] = 1.0 8x16": lambda: small.__setitem__(small_i, 1.0),
        "x[mask] = 0.5 8x16": lambda: small.__setitem__(small_m, 0.5),
        "nonzero 8x16": lambda: small_m.nonzero(),
        "x + 1 one element": lambda: one + 1,
        "x * y 8x16": lambda: small * small2,
        "exp 8x16": lambda: small.exp(),
    }


def per_call(fn, clock, number):
    start = clock()
    for _ in range(number):
        fn()
    return (clock() - start) / number


def calls_for(fn, clock, target=0.02):
    fn()
    number = 1
    while per_call(fn, clock, number) * number < target / 4:
        number *= 2
    return max(1, int(number * 4))


def measure(fns, clock, rounds):
    """fns: {lib: fn}; interleaved rounds; lib -> list of per-call times."""
    numbers = {lib: calls_for(fn, clock) for lib, fn in fns.items()}
    times = {lib: [] for lib in fns}
    for _ in range(rounds):
        for lib, fn in fns.items():
            times[lib].append(per_call(fn, clock, numbers[lib]))
    return times


def set_threads(n):
    kiln.set_num_threads(n)
    if torch is not None:
        torch.set_num_threads(n)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--only", default="", help="comma-separated substrings of case names")
    args = parser.parse_args()
    libs = {"kiln": kiln} if torch is None else {"kiln": kiln, "torch": torch}
    built = {name: cases(lib, np.random.default_rng(0)) for name, lib in libs.items()}
    names = [n for n in built["kiln"] if not args.only or any(s in n for s in args.only.split(","))]
    print(f"{'case':<34}{'kiln cpu@1 min/med':>20}{'torch':>18}{'ratio':>7}{'spread':>8}"
          f"{'kiln wall@2':>14}{'torch':>10}{'ratio':>7}")
    for name in names:
        fns = {lib: built[lib][name] for lib in libs}
        set_threads(1)
        cpu = measure(fns, time.process_time, args.rounds)
        set_threads(2)
        wall = measure(fns, time.perf_counter, args.rounds)
        k, kw = cpu["kiln"], wall["kiln"]
        row = f"{name:<34}{min(k) * 1e6:9.1f}/{statistics.median(k) * 1e6:<9.1f}us"
        if torch is not None:
            t, tw = cpu["torch"], wall["torch"]
            row += f"{min(t) * 1e6:8.1f}/{statistics.median(t) * 1e6:<8.1f}{min(k) / min(t):6.2f}x"
        row += f"{(statistics.median(k) - min(k)) / min(k):7.0%} {min(kw) * 1e6:11.1f}us"
        if torch is not None:
            row += f"{min(tw) * 1e6:10.1f}{min(kw) / min(tw):6.2f}x"
        print(row, flush=True)


if __name__ == "__main__":
    main()
