"""Per-call cost of arithmetic with a Python number (`x + 1`, `2 * x`, `where(c, x, 0.0)`) on small
tensors, kiln against PyTorch eager, interleaved in one process; and kiln's two ways to run
`x + 1`: add.Scalar (what an untraced call takes) and add.Tensor of a wrapped number (what PyTorch
runs, and what kiln records while tracing: Note [Numbers in arithmetic], python/csrc/arg_parser.cc).

    tools/python tools/bench/scalar_overhead.py

CPU time at one thread (time.process_time, set_num_threads(1) for both): best of ROUNDS rounds and
the spread (worst / best) of those rounds, then the wall time at two threads.
"""

import time

import kiln

try:
    import torch
except ImportError:
    torch = None

ROUNDS, CALLS = 9, 20000

CASES = [
    ("x + 1", lambda T, x, c: x + 1),
    ("1 + x", lambda T, x, c: 1 + x),
    ("x * 0.5", lambda T, x, c: x * 0.5),
    ("x / 2", lambda T, x, c: x / 2),
    ("x.add_(1)", lambda T, x, c: x.add_(1)),
    ("where(c, x, 0.0)", lambda T, x, c: T.where(c, x, 0.0)),
]


def rounds(fn, clock, calls=CALLS):
    fn()
    out = []
    for _ in range(ROUNDS):
        start = clock()
        for _ in range(calls):
            fn()
        out.append((clock() - start) / calls * 1e6)
    return min(out), max(out) / min(out)


def row(name, k, t):
    ratio = f"{k[0] / t[0]:5.2f}" if t else "  -  "
    peer = f"{t[0]:6.2f} us (x{t[1]:.2f})" if t else "-"
    print(f"  {name:18s} kiln {k[0]:6.2f} us (x{k[1]:.2f})  torch {peer}  kiln/torch {ratio}")


def main():
    libs = [kiln] + ([torch] if torch is not None else [])
    for threads, clock, label in [(1, time.process_time, "CPU time, 1 thread"), (2, time.perf_counter, "wall, 2 threads")]:
        for lib in libs:
            lib.set_num_threads(threads)
        print(f"{label}, 8 float32 elements (best, spread):")
        for name, fn in CASES:
            args = {lib: (lib.rand(8), lib.rand(8) > 0.5) for lib in libs}
            k = rounds(lambda: fn(kiln, *args[kiln]), clock)
            t = rounds(lambda: fn(torch, *args[torch]), clock) if torch is not None else None
            row(name, k, t)
    kiln.set_num_threads(1)
    x = kiln.rand(8)
    scalar = rounds(lambda: kiln.ops.aten.add.Scalar(x, 1), time.process_time)
    wrapped = rounds(lambda: kiln.ops.aten.add.Tensor(x, 1), time.process_time)
    print(f"kiln x + 1 by overload, CPU time: add.Scalar {scalar[0]:.2f} us, add.Tensor of a wrapped number "
          f"{wrapped[0]:.2f} us ({wrapped[0] - scalar[0]:+.2f} us)")


if __name__ == "__main__":
    main()
