"""The backward aten ops (and the digits CNN's forward convolution), eager kiln against PyTorch
eager (CPU, same machine, same run).

    tools/python tools/bench/backward_bench.py

Prints one row per op: kiln's and PyTorch's best time and their ratio (kiln / torch, lower is
better), on the same inputs through `kiln.ops.aten.<op>` and `torch.ops.aten.<op>`.
"""

import os
import sys

import numpy as np

import kiln

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eager_bench import best, torch  # noqa: E402


def cases():
    rng = np.random.default_rng(0)

    def arr(*shape, low=-2.0, high=2.0):
        return rng.uniform(low, high, size=shape).astype(np.float32)

    g, x = arr(4 * 1024 * 1024), arr(4 * 1024 * 1024)
    yield "gelu_backward (4M float32)", "gelu_backward", lambda T: [T(g), T(x)]
    yield "silu_backward (4M float32)", "silu_backward", lambda T: [T(g), T(x)]
    yield "threshold_backward (4M float32)", "threshold_backward", lambda T: [T(g), T(x), 0]
    gs, ys = arr(1024, 1024), rng.dirichlet(np.ones(1024), size=1024).astype(np.float32)
    yield "_softmax_backward_data 1024x1024", "_softmax_backward_data", lambda T: [T(gs), T(ys), 1, T.float32]
    gl, xl = arr(2048, 1024), arr(2048, 1024)
    mean, rstd = xl.mean(1, keepdims=True), 1 / np.sqrt(xl.var(1, keepdims=True) + 1e-5)
    wl, bl = arr(1024), arr(1024)
    yield "native_layer_norm_backward 2048x1024", "native_layer_norm_backward", \
        lambda T: [T(gl), T(xl), [1024], T(mean), T(rstd), T(wl), T(bl), [True, True, True]]
    xb, gb = arr(16, 64, 32, 32), arr(16, 64, 32, 32)
    mb, ib = xb.mean((0, 2, 3)), 1 / np.sqrt(xb.var((0, 2, 3)) + 1e-5)
    yield "native_batch_norm_backward 16x64x32x32", "native_batch_norm_backward", \
        lambda T: [T(gb), T(xb), T(arr(64)), None, None, T(mb), T(ib), True, 1e-5, [True, True, True]]
    xc, wc, gc = arr(8, 32, 32, 32), arr(64, 32, 3, 3), arr(8, 64, 32, 32)
    yield "convolution_backward 8x32x32x32, 64x3x3", "convolution_backward", \
        lambda T: [T(gc), T(xc), T(wc), [64], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, True]]
    # The digits CNN's second convolution (Note [Sample-parallel convolution]), forward and backward.
    xd, wd, bd, gd = arr(128, 16, 8, 8), arr(32, 16, 3, 3), arr(32), arr(128, 32, 8, 8)
    yield "convolution 128x16x8x8, 32x3x3 (forward)", "convolution", \
        lambda T: [T(xd), T(wd), T(bd), [1, 1], [1, 1], [1, 1], False, [0, 0], 1]
    yield "convolution_backward 128x16x8x8, 32x3x3", "convolution_backward", \
        lambda T: [T(gd), T(xd), T(wd), [32], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, True]]
    xp = arr(16, 64, 32, 32)
    gp = arr(16, 64, 16, 16)
    yield "avg_pool2d_backward 16x64x32x32 k2", "avg_pool2d_backward", \
        lambda T: [T(gp), T(xp), [2, 2], [2, 2], [0, 0], False, True, None]
    ge, ie = arr(8192, 256), rng.integers(0, 1000, size=(8192,))
    yield "embedding_dense_backward 8192x256", "embedding_dense_backward", \
        lambda T: [T(ge), T(ie), 1000, -1, False]
    gm, xm, tm = np.float32(0.5), arr(2048, 1024), arr(2048, 1024)
    yield "mse_loss_backward 2048x1024 (mean)", "mse_loss_backward", lambda T: [T(gm), T(xm), T(tm), 1]


class Maker:
    def __init__(self, lib):
        self.lib, self.float32 = lib, lib.float32

    def __call__(self, a):
        return self.lib.from_numpy(np.ascontiguousarray(a)) if np.ndim(a) else self.lib.tensor(float(a))


def main():
    print(f"{'case':<44}{'kiln':>12}{'torch':>12}{'ratio':>9}")
    for label, name, build in cases():
        k_args = build(Maker(kiln))
        tk = best(lambda: getattr(kiln.ops.aten, name)(*k_args))
        tt = None
        if torch is not None:
            t_args = build(Maker(torch))
            tt = best(lambda: getattr(torch.ops.aten, name)(*t_args))
        tt_s = f"{tt * 1e6:10.1f}us" if tt else f"{'-':>12}"
        ratio = f"{tk / tt:8.2f}x" if tt else f"{'-':>9}"
        print(f"{label:<44}{tk * 1e6:10.1f}us{tt_s}{ratio}")


if __name__ == "__main__":
    main()
