"""Inductor (kiln.compile, backend "inductor") against kiln eager and PyTorch 2.13's
torch.compile (Inductor, CPU), in one run:

1. cold compile of RMSNorm+SiLU (first call minus an eager call; PyTorch with its caches off);
2. the fused RMSNorm+SiLU kernel on 2048x4096 float32 against the machine's copy bandwidth
   (x.clone(): 32 MiB read + 32 MiB written);
3. training steps (forward, cross-entropy, backward, SGD) of the digits MLP and CNN, batch 128:
   kiln.compile's default mode and mode="reduce-overhead" against eager (wall time), and the
   compiled step against eager in CPU time at one thread, interleaved.

    tools/python tools/bench/inductor_bench.py [--no-torch]
"""

import os
import sys
import time

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
sys.path.insert(0, __file__.rsplit("/", 2)[0])
from digits import cnn, mlp  # noqa: E402

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from eager_bench import best  # noqa: E402

import kiln  # noqa: E402
import kiln._dynamo  # noqa: E402

try:
    import torch
    import torch._dynamo
except ImportError:
    torch = None
if "--no-torch" in sys.argv:
    torch = None


def rms_silu(lib):
    F = lib.nn.functional

    def f(x, w):
        return F.silu(x * lib.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w)

    return f


def cold_compile(lib, compile_fn, reset):
    x, w = lib.randn(64, 256), lib.randn(256)
    f = rms_silu(lib)
    with lib.no_grad():
        f(x, w)
        t0 = time.perf_counter()
        f(x, w)
        eager = time.perf_counter() - t0
        reset()
        cf = compile_fn(f)
        t0 = time.perf_counter()
        cf(x, w)
        return time.perf_counter() - t0 - eager


def kernel_time(lib, compile_fn):
    x, w = lib.randn(2048, 4096), lib.randn(4096)
    f = rms_silu(lib)
    with lib.no_grad():
        cf = compile_fn(f)
        cf(x, w)
        return best(lambda: cf(x, w)), best(lambda: f(x, w)), best(lambda: x.clone())


def step_time(lib, make, compile_fn):
    lib.manual_seed(0)
    model = make(lib)
    run = compile_fn(model) if compile_fn else model
    opt = lib.optim.SGD(model.parameters(), lr=0.01)
    x = lib.randn(128, 64)
    y = lib.randint(0, 10, (128,))
    F = lib.nn.functional

    def step():
        opt.zero_grad()
        F.cross_entropy(run(x), y).backward()
        opt.step()

    t0 = time.perf_counter()
    step()
    first = time.perf_counter() - t0
    return best(step), first


def main():
    kc = lambda f: kiln.compile(f, backend="inductor")  # noqa: E731
    rows = []
    cold = cold_compile(kiln, kc, kiln._dynamo.reset)
    k_fused, k_eager, k_copy = kernel_time(kiln, kc)
    t_row = None
    if torch is not None:
        tc = lambda f: torch.compile(f)  # noqa: E731
        t_cold = cold_compile(torch, tc, torch._dynamo.reset)
        t_fused, t_eager, t_copy = kernel_time(torch, tc)
        t_row = (t_cold, t_fused, t_eager, t_copy)
    print(f"RMSNorm+SiLU cold compile: kiln {cold * 1e3:.0f} ms" +
          (f", torch.compile {t_row[0]:.1f} s ({cold / t_row[0]:.3f}x)" if t_row else ""))
    gbs = 2 * 2048 * 4096 * 4 / 1e9
    print(f"RMSNorm+SiLU 2048x4096 f32: kiln fused {k_fused * 1e3:.2f} ms ({gbs / k_fused:.1f} GB/s), "
          f"kiln eager {k_eager * 1e3:.2f} ms, copy {k_copy * 1e3:.2f} ms ({gbs / k_copy:.1f} GB/s): "
          f"{k_copy / k_fused * 100:.0f}% of copy bandwidth" +
          (f"; torch.compile {t_row[1] * 1e3:.2f} ms (kiln/torch {k_fused / t_row[1]:.2f}x)" if t_row else ""))
    print()
    print(f"{'training step, batch 128':28} {'kiln eager':>11} {'kiln compiled':>14} {'ratio':>6} "
          f"{'first step +':>13} {'reduce-overhead':>16}" +
          (f" {'torch eager':>12} {'torch.compile':>14} {'kiln/torch.c':>12}" if torch else ""))
    for name, make in (("digits MLP", mlp), ("digits CNN", cnn)):
        k_e, k_e_first = step_time(kiln, make, None)
        kiln._dynamo.reset()
        k_c, k_c_first = step_time(kiln, make, kc)
        kiln._dynamo.reset()
        k_r, _ = step_time(kiln, make, lambda m: kiln.compile(m, mode="reduce-overhead"))
        line = (f"{name:28} {k_e * 1e3:9.2f}ms {k_c * 1e3:12.2f}ms {k_c / k_e:5.2f}x "
                f"{(k_c_first - k_e_first) * 1e3:10.0f} ms {k_r * 1e3:8.2f}ms {k_r / k_e:5.2f}x")
        if torch is not None:
            t_e, _ = step_time(torch, make, None)
            torch._dynamo.reset()
            t_c, _ = step_time(torch, make, torch.compile)
            line += f" {t_e * 1e3:10.2f}ms {t_c * 1e3:12.2f}ms {k_c / t_c:11.2f}x"
        print(line)
    print()
    steps_cpu_one_thread()
    print("targets: cold compile <= 0.2 s and <= 0.05x torch.compile; fused kernel >= 80% of copy bandwidth "
          "and <= 1.0x torch.compile; compiled steps <= 0.8x kiln eager and <= 1.0x torch.compile")


def steps_cpu_one_thread(rounds=7):
    """kiln's compiled steps against its eager ones in CPU time at one thread, interleaved (what a
    loaded machine inflates least): min and median per step over `rounds`, and their ratio."""
    threads = kiln.get_num_threads()
    kiln.set_num_threads(1)
    try:
        print(f"{'CPU time, one thread':28} {'kiln eager min/med':>20} {'compiled min/med':>18} {'ratio':>6} {'spread':>7}")
        for name, make, n in (("digits MLP", mlp, 200), ("digits CNN", cnn, 40)):
            steps = []
            for compiled in (False, True):
                kiln._dynamo.reset()
                kiln.manual_seed(0)
                model = make(kiln)
                run = kiln.compile(model) if compiled else model
                opt = kiln.optim.SGD(model.parameters(), lr=0.01)
                x, y = kiln.randn(128, 64), kiln.randint(0, 10, (128,))

                def step(run=run, opt=opt, x=x, y=y):
                    opt.zero_grad()
                    kiln.nn.functional.cross_entropy(run(x), y).backward()
                    opt.step()

                for _ in range(3):
                    step()
                steps.append(step)
            times = ([], [])
            for _ in range(rounds):
                for step, acc in zip(steps, times):
                    start = time.process_time()
                    for _ in range(n):
                        step()
                    acc.append((time.process_time() - start) / n)
            (e, c) = (sorted(t) for t in times)
            med = lambda t: t[len(t) // 2]  # noqa: E731
            print(f"{name:28} {e[0] * 1e3:9.3f}/{med(e) * 1e3:.3f} ms {c[0] * 1e3:8.3f}/{med(c) * 1e3:.3f} ms "
                  f"{c[0] / e[0]:5.2f}x {(med(c) - c[0]) / c[0]:6.0%}")
    finally:
        kiln.set_num_threads(threads)


if __name__ == "__main__":
    main()
