"""Where a training step's time goes: forward, forward+backward and optimizer step of the demo's
digits MLP and CNN (batch 128, Adam), kiln against PyTorch in the same run.

    tools/python tools/bench/step_breakdown.py
"""

import sys

import numpy as np

import kiln

sys.path.insert(0, __file__.rsplit("/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 2)[0])
from digits import cnn, mlp  # noqa: E402
from eager_bench import best  # noqa: E402

try:
    import torch
except ImportError:
    torch = None


def main():
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((128, 64)).astype(np.float32)
    y_np = rng.integers(0, 10, 128)
    print(f"{'model':6s} {'lib':6s} {'forward':>10s} {'fwd+bwd':>10s} {'opt.step':>10s}")
    for name, make in (("MLP", mlp), ("CNN", cnn)):
        for lib in (kiln, torch):
            if lib is None:
                continue
            lib.manual_seed(0)
            model = make(lib)
            opt = lib.optim.Adam(model.parameters(), lr=1e-3)
            x, y = lib.tensor(x_np), lib.tensor(y_np)
            F = lib.nn.functional

            def forward():
                return F.cross_entropy(model(x), y)

            def forward_backward():
                opt.zero_grad()
                forward().backward()

            forward_backward()
            print(f"{name:6s} {lib.__name__:6s} {best(forward) * 1e6:8.0f}us {best(forward_backward) * 1e6:8.0f}us "
                  f"{best(opt.step) * 1e6:8.0f}us")


if __name__ == "__main__":
    main()
