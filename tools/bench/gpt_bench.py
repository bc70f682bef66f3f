"""A nanoGPT-shaped training step on the CPU (issue 19): kiln against PyTorch, eager and compiled,
and the cold compile time by depth.

    tools/python tools/bench/gpt_bench.py [--layers 2,4,6] [--rounds 5] [--compile] [--cold 1,4,16]

The model is nanoGPT's (karpathy/nanoGPT model.py) at d=256, 4 heads, length 128, batch 8, vocab
512: token and position embeddings (tied LM head), pre-LayerNorm blocks of causal
F.scaled_dot_product_attention and a GELU MLP, AdamW. Both libraries start from the same weights.
Step times: CPU time at one thread (min and median of interleaved rounds) and wall time at two.
--compile adds kiln.compile against torch.compile (each warmed first); --cold times the first
compiled step at each depth in a fresh process with empty caches (kiln's kernel cache and
torch.compile's caches off), after one eager step of the same model and optimizer; that is compile
time plus one step, and a warm step after it: their difference is the compile time.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import kiln

try:
    import torch
except ImportError:
    torch = None

D, HEADS, LENGTH, BATCH, VOCAB = 256, 4, 128, 8, 512


def gpt(lib, layers):
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.c_attn, self.c_proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
            self.c_fc, self.mlp_proj = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

        def attn(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(D, dim=2)
            q, k, v = (t.view(B, T, HEADS, C // HEADS).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(VOCAB, D), nn.Embedding(LENGTH, D)
            self.h = nn.ModuleList([Block() for _ in range(layers)])
            self.ln_f = nn.LayerNorm(D)
            self.lm_head = nn.Linear(D, VOCAB, bias=False)
            self.wte.weight = self.lm_head.weight

        def forward(self, idx, targets):
            pos = lib.arange(0, idx.size(1))
            x = self.wte(idx) + self.wpe(pos)
            for block in self.h:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))

    return GPT()


def make_step(lib, layers, compiled, state=None):
    step, model = make_steps(lib, layers, (compiled,), state)
    return step[0], model


def make_steps(lib, layers, modes, state=None):
    """One training step per mode in `modes` (False: eager, True: compiled), all over one model
    and one optimizer."""
    lib.manual_seed(0)
    model = gpt(lib, layers)
    if state is not None:
        model.load_state_dict({k: lib.tensor(v) for k, v in state.items()})
    rng = np.random.default_rng(0)
    idx = lib.tensor(rng.integers(0, VOCAB, (BATCH, LENGTH)))
    targets = lib.tensor(rng.integers(0, VOCAB, (BATCH, LENGTH)))
    opt = lib.optim.AdamW(model.parameters(), lr=1e-3)

    def step_of(run):
        def step():
            opt.zero_grad(set_to_none=True)
            loss = run(idx, targets)
            loss.backward()
            opt.step()
            return loss
        return step

    return [step_of(lib.compile(model) if compiled else model) for compiled in modes], model


def timed(fn, clock):
    start = clock()
    fn()
    return clock() - start


def step_rows(layer_counts, rounds, compiled_too):
    libs = [kiln] + ([torch] if torch is not None else [])
    modes = [False, True] if compiled_too else [False]
    print(f"GPT step: d={D}, {HEADS} heads, length {LENGTH}, batch {BATCH}, AdamW")
    print(f"{'layers':<7}{'mode':<10}{'kiln cpu@1 min/med ms':>24}{'torch':>17}{'ratio':>7}{'spread':>8}"
          f"{'kiln wall@2':>13}{'torch':>9}{'ratio':>7}")
    eager_kiln = {}
    for layers in layer_counts:
        for compiled in modes:
            steps, state = {}, None
            for lib in libs:
                steps[lib], model = make_step(lib, layers, compiled, state)
                if lib is kiln:
                    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
            results = {}
            for threads, clock in ((1, time.process_time), (2, time.perf_counter)):
                for lib in libs:
                    lib.set_num_threads(threads)
                    for _ in range(2):  # compile and warm
                        steps[lib]()
                times = {lib: [] for lib in libs}
                for _ in range(rounds):
                    for lib in libs:
                        lib.set_num_threads(threads)
                        times[lib].append(timed(steps[lib], clock))
                results[threads] = times
            k1, k2 = results[1][kiln], results[2][kiln]
            mode = "compiled" if compiled else "eager"
            row = f"{layers:<7}{mode:<10}{min(k1) * 1e3:12.1f}/{statistics.median(k1) * 1e3:<11.1f}"
            if torch is not None:
                t1, t2 = results[1][torch], results[2][torch]
                row += f"{min(t1) * 1e3:8.1f}/{statistics.median(t1) * 1e3:<8.1f}{min(k1) / min(t1):6.2f}x"
            row += f"{(statistics.median(k1) - min(k1)) / min(k1):8.0%}{min(k2) * 1e3:11.1f}ms"
            if torch is not None:
                row += f"{min(t2) * 1e3:9.1f}{min(k2) / min(t2):6.2f}x"
            if compiled and layers in eager_kiln:
                row += f"   (kiln compiled / kiln eager at 1 thread: {min(k1) / eager_kiln[layers]:.2f}x)"
            eager_kiln.setdefault(layers, min(k1))
            print(row, flush=True)


def cold_child(lib_name, layers):
    """In a fresh process: one eager step, then the first compiled step (compile + one step), and
    the CPU seconds of a warm compiled step (the best of two after it). The eager step first
    touches the memory the step's tensors live in and makes AdamW's state, as it would in a
    program that switches to compile mode; neither is compile work (PyTorch's benchmark harness
    subtracts eager's first run from the compiled one likewise). Without it, the first touch of
    the 16-layer step's ~400 MB was 0.2 s of system time."""
    lib = kiln if lib_name == "kiln" else torch
    lib.set_num_threads(1)
    (eager, compiled), _ = make_steps(lib, layers, (False, True))
    eager()
    start, wall = time.process_time(), time.perf_counter()
    compiled()
    first, first_wall = time.process_time() - start, time.perf_counter() - wall
    warm = []
    for _ in range(2):
        start = time.process_time()
        compiled()
        warm.append(time.process_time() - start)
    print(json.dumps({"cpu_s": first, "wall_s": first_wall, "warm_cpu_s": min(warm)}))


def cold_rows(layer_counts):
    print("\ncold compile (fresh process, empty caches, after one eager step): CPU seconds of the first"
          "\ncompiled step (all threads; kernels compile on kiln._inductor.config.compile_threads;"
          "\ntorch.compile's compile workers are subprocesses, whose CPU time is not counted), its wall"
          "\nseconds, and compile = first step - a warm step (CPU)")
    libs = ["kiln"] + (["torch"] if torch is not None else [])
    print(f"{'layers':<8}" + "".join(f"{lib + ' first':>12}{'wall':>7}{'compile':>9}" for lib in libs)
          + ("   kiln/torch: first, compile (CPU), first (wall)" if torch is not None else ""))
    for layers in layer_counts:
        row = f"{layers:<8}"
        res = {}
        for lib_name in libs:
            with tempfile.TemporaryDirectory() as cache:
                env = dict(os.environ, KILN_INDUCTOR_CACHE_DIR=cache,
                           TORCHINDUCTOR_CACHE_DIR=cache, TORCHINDUCTOR_FORCE_DISABLE_CACHES="1",
                           TRITON_CACHE_DIR=cache)
                out = subprocess.run([sys.executable, __file__, "--cold-child", lib_name, str(layers)], env=env,
                                     capture_output=True, text=True, check=True).stdout
                r = json.loads(out.strip().splitlines()[-1])
                r["compile_s"] = r["cpu_s"] - r["warm_cpu_s"]
                res[lib_name] = r
                row += f"{r['cpu_s']:12.2f}{r['wall_s']:7.2f}{r['compile_s']:9.2f}"
        if "torch" in res:
            row += f"   {res['kiln']['cpu_s'] / res['torch']['cpu_s']:.2f}x, " \
                   f"{res['kiln']['compile_s'] / res['torch']['compile_s']:.2f}x, " \
                   f"{res['kiln']['wall_s'] / res['torch']['wall_s']:.2f}x"
        print(row, flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", default="2,4,6")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--compile", action="store_true", help="also time kiln.compile against torch.compile")
    parser.add_argument("--cold", default="", help="depths whose cold compile to time, e.g. 1,4,16")
    parser.add_argument("--cold-child", nargs=2, metavar=("LIB", "LAYERS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cold_child:
        return cold_child(args.cold_child[0], int(args.cold_child[1]))
    if args.layers:
        step_rows([int(n) for n in args.layers.split(",")], args.rounds, args.compile)
    if args.cold:
        cold_rows([int(n) for n in args.cold.split(",")])


if __name__ == "__main__":
    main()
