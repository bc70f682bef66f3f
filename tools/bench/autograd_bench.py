"""kiln's autograd and training step against PyTorch eager (CPU, same machine, same run): the
figures issue 3 names.

    tools/python tools/bench/autograd_bench.py

Rows: `(x * 2).sum().backward()` on a one-element tensor (per-call overhead of recording and
running a graph), and an Adam training step (zero_grad, forward, cross_entropy, backward, step)
of the demo's digits MLP (64-128-128-10, GELU, batch 128) and CNN (batch 128; tools/digits.py),
from identical weights. Ratio = kiln / torch time (lower is better).
"""

import sys

import numpy as np

import kiln

sys.path.insert(0, __file__.rsplit("/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 2)[0])
from eager_bench import best  # noqa: E402
from digits import cnn, mlp  # noqa: E402  (the demo's models)

try:
    import torch
except ImportError:
    torch = None


def tiny_backward(lib):
    x = lib.ones(1, requires_grad=True)

    def step():
        (x * 2).sum().backward()

    return step


def train_step(lib, make, x_np, y_np, torch_model=None):
    model = make(lib)
    if torch_model is not None:  # identical weights
        model.load_state_dict({k: lib.tensor(v.detach().numpy()) for k, v in torch_model.state_dict().items()})
    opt = lib.optim.Adam(model.parameters(), lr=1e-3)
    x, y = lib.tensor(x_np), lib.tensor(y_np)
    F = lib.nn.functional

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    return model, step


def main():
    rng = np.random.default_rng(0)
    rows = []

    def row(name, k_fn, t_fn):
        tk = best(k_fn)
        tt = best(t_fn) if t_fn else float("nan")
        rows.append((name, tk, tt))

    row("(x*2).sum().backward(), 1 element", tiny_backward(kiln), tiny_backward(torch) if torch else None)
    y = rng.integers(0, 10, 128)
    x_mlp = rng.standard_normal((128, 64)).astype(np.float32)
    x_cnn = x_mlp  # the CNN unflattens [N, 64] to [N, 1, 8, 8] itself
    for name, make, x in (("Adam step, MLP 64-128-128-10, batch 128", mlp, x_mlp),
                          ("Adam step, CNN (digits), batch 128", cnn, x_cnn)):
        if torch is not None:
            torch.manual_seed(0)
            t_model, t_step = train_step(torch, make, x, y)
            _, k_step = train_step(kiln, make, x, y, t_model)
        else:
            _, k_step = train_step(kiln, make, x, y)
            t_step = None
        row(name, k_step, t_step)

    print(f"{'case':44s} {'kiln':>10s} {'torch':>10s} {'ratio':>7s}")
    for name, tk, tt in rows:
        print(f"{name:44s} {tk * 1e6:8.1f}us {tt * 1e6:8.1f}us {tk / tt:6.2f}x")


if __name__ == "__main__":
    main()
