"""Dynamo's two costs, kiln beside PyTorch 2.13 in the same run (when torch is installed):

1. call overhead: a compiled `x + 1` (backend "eager") against the same function called
   eagerly, per call, on a 10-element tensor; target: compiled at most 1.5x eager;
2. capture: the first call of the compiled digits CNN's forward (tools/digits.py `cnn`, batch 64,
   eval mode) minus an eager call, i.e. bytecode capture + guards + code generation; target:
   at most 30 ms.

    tools/python tools/bench/dynamo_bench.py
"""

import sys
import time

sys.path.insert(0, __file__.rsplit("/", 2)[0])
from digits import cnn  # noqa: E402

import kiln  # noqa: E402
import kiln._dynamo  # noqa: E402

try:
    import torch
    import torch._dynamo
except ImportError:
    torch = None


def per_call_us(fn, x, n=20000):
    for _ in range(200):
        fn(x)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn(x)
        best = min(best, (time.perf_counter() - t0) / n)
    return best * 1e6


def overhead(lib, compile_fn):
    def add_one(x):
        return x + 1

    x = lib.ones(10)
    eager = per_call_us(add_one, x)
    compiled = compile_fn(add_one)
    compiled(x)
    return eager, per_call_us(compiled, x)


def capture_ms(lib, compile_fn, reset, repeat=5):
    lib.manual_seed(0)
    model = cnn(lib).eval()
    x = lib.randn(64, 64)
    with lib.no_grad():
        model(x)
        t0 = time.perf_counter()
        model(x)
        eager = time.perf_counter() - t0
        times = []
        for _ in range(repeat):
            reset()
            compiled = compile_fn(model)
            t0 = time.perf_counter()
            compiled(x)
            times.append(time.perf_counter() - t0 - eager)
    return min(times) * 1e3


def main():
    rows = []
    k_eager, k_comp = overhead(kiln, lambda f: kiln.compile(f, backend="eager"))
    k_capture = capture_ms(kiln, lambda m: kiln.compile(m, backend="eager"), kiln._dynamo.reset)
    rows.append(("kiln", k_eager, k_comp, k_capture))
    if torch is not None:
        t_eager, t_comp = overhead(torch, lambda f: torch.compile(f, backend="eager"))
        t_capture = capture_ms(torch, lambda m: torch.compile(m, backend="eager"), torch._dynamo.reset)
        rows.append((f"torch {torch.__version__.split('+')[0]}", t_eager, t_comp, t_capture))
    print(f"{'':14} {'eager x+1':>10} {'compiled':>10} {'ratio':>6} {'CNN capture':>12}")
    for name, eager, comp, capture in rows:
        print(f"{name:14} {eager:8.2f}us {comp:8.2f}us {comp / eager:5.2f}x {capture:9.1f} ms")
    print("targets: kiln compiled/eager <= 1.5x; CNN capture <= 30 ms")


if __name__ == "__main__":
    main()
