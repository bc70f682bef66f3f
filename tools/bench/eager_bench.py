"""Eager kiln against PyTorch eager (CPU, same machine, same run): the figures issue 2 names.

    tools/python tools/bench/eager_bench.py

Prints one row per case: kiln's and PyTorch's best time, their ratio (kiln / torch, lower is
better) and, for the memory-bound cases, the bytes moved per second as a fraction of the
machine's copy bandwidth (numpy's copyto of 64 MB: bytes read + written per second). For
`x * y + 1` eager runs two ops: 5 arrays of 64 MB are read or written; `sum` reads one.
"""

import time

import numpy as np

import kiln

try:
    import torch
except ImportError:
    torch = None


def best(fn, min_time=0.2, repeat=5):
    # Let the other library's worker threads (OpenBLAS spins after a call) go idle first.
    time.sleep(0.3)
    fn()
    number, elapsed = 1, 0.0
    while True:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed > min_time / repeat:
            break
        number *= 2
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    return min(times)


def copy_bandwidth(n):
    """The machine's copy bandwidth (bytes read + written per second): the best of numpy's
    single-threaded copyto and the libraries' multi-threaded copy_ of 64 MB."""
    src = np.random.rand(n).astype(np.float32)
    dst = np.empty_like(src)
    t = best(lambda: np.copyto(dst, src))
    ks, kd = kiln.from_numpy(src), kiln.from_numpy(dst)
    t = min(t, best(lambda: kd.copy_(ks)))
    if torch is not None:
        ts, td = torch.from_numpy(src), torch.from_numpy(dst)
        t = min(t, best(lambda: td.copy_(ts)))
    return 2 * src.nbytes / t


def rmsnorm_silu(lib, x, w, eps=1e-6):
    y = x * lib.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w
    return y * lib.sigmoid(y)


def main():
    rows = []
    n = 16 * 1024 * 1024
    bw = copy_bandwidth(n)
    x1, t1 = kiln.ones(1), torch.ones(1) if torch else None
    rows.append(("x + 1 (1 element)", best(lambda: x1 + 1), best(lambda: t1 + 1) if torch else None, None, 0.5))

    a_np, b_np = np.random.rand(n).astype(np.float32), np.random.rand(n).astype(np.float32)
    a, b = kiln.from_numpy(a_np), kiln.from_numpy(b_np)
    ta, tb = (torch.from_numpy(a_np), torch.from_numpy(b_np)) if torch else (None, None)
    tk = best(lambda: a * b + 1)
    rows.append(("x * y + 1 (16M float32)", tk, best(lambda: ta * tb + 1) if torch else None,
                 5 * 4 * n / tk / bw, 1.0))
    tk = best(lambda: a.sum())
    rows.append(("sum (16M float32)", tk, best(lambda: ta.sum()) if torch else None, 4 * n / tk / bw, 1.0))

    # a column sum (a Linear bias's gradient): rows added into column accumulators (Note [Outer sums])
    g_np = np.random.rand(1024, 1024).astype(np.float32)
    gk, gt = kiln.from_numpy(g_np), torch.from_numpy(g_np) if torch else None
    tk = best(lambda: gk.sum(0))
    rows.append(("g.sum(0) 1024x1024 float32", tk, best(lambda: gt.sum(0)) if torch else None, 4 * g_np.size / tk / bw,
                 1.0))

    if hasattr(kiln, "mm"):
        m_np = np.random.rand(1024, 1024).astype(np.float32)
        m, tm = kiln.from_numpy(m_np), torch.from_numpy(m_np) if torch else None
        rows.append(("sgemm 1024x1024x1024", best(lambda: kiln.mm(m, m)), best(lambda: torch.mm(tm, tm)) if torch else None,
                     None, 1.1))

    x_np = np.random.rand(2048, 4096).astype(np.float32)
    w_np = np.random.rand(4096).astype(np.float32)
    xk, wk = kiln.from_numpy(x_np), kiln.from_numpy(w_np)
    xt, wt = (torch.from_numpy(x_np), torch.from_numpy(w_np)) if torch else (None, None)
    got, want = rmsnorm_silu(kiln, xk, wk), rmsnorm_silu(torch, xt, wt) if torch else None
    if torch:
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-5)
    rows.append(("RMSNorm+SiLU 2048x4096 (eager ops)", best(lambda: rmsnorm_silu(kiln, xk, wk)),
                 best(lambda: rmsnorm_silu(torch, xt, wt)) if torch else None, None, 1.0))

    print(f"copy bandwidth (best 64 MB copy: numpy, kiln, torch): {bw / 1e9:.1f} GB/s; threads: kiln {kiln.get_num_threads()}"
          + (f", torch {torch.get_num_threads()}" if torch else ""))
    print(f"{'case':<38}{'kiln':>12}{'torch':>12}{'ratio':>9}{'target':>9}{'of copy bw':>12}")
    for name, tk, tt, frac, target in rows:
        tt_s = f"{tt * 1e6:10.1f}us" if tt else f"{'-':>12}"
        ratio = f"{tk / tt:8.2f}x" if tt else f"{'-':>9}"
        frac_s = f"{frac * 100:11.0f}%" if frac else f"{'':>12}"
        print(f"{name:<38}{tk * 1e6:10.1f}us{tt_s}{ratio}{'<=' + str(target) + 'x':>9}{frac_s}")


if __name__ == "__main__":
    main()
