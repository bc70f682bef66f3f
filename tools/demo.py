"""The demo (tools/demo.sh): trains an MLP and a small CNN on the digits data eagerly and compiled
(and eagerly on the GPU when kiln.cuda.is_available()), with a progress bar, and prints a table (parameters, epochs, seconds, test accuracy on the fixed 360-sample
split); then a short tour of eager kiln and a timing table of a few ops against numpy and PyTorch.
`--tour-only` / `--train-only` run one part."""

import os
import sys

import numpy as np

import kiln

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench"))
from eager_bench import best as best_time  # noqa: E402

try:
    import torch
except ImportError:  # the 3.12 environment has no torch
    torch = None


def show(title, value):
    print(f"--- {title}")
    print(value)


def progress(prefix, step, total, loss, rate):
    width = 24
    done = width * step // total
    bar = "#" * done + "." * (width - done)
    line = f"\r{prefix} [{bar}] {step}/{total} {rate:7.1f} steps/s loss {loss:.4f}"
    if sys.stdout.isatty():
        print(line, end="", flush=True)
    elif step == total:
        print(line[1:], flush=True)


def train(name, make, epochs, lr, data, batch_size=64, compiled=False, device="cpu"):
    """Trains `make(kiln)` on `device` with AdamW and a seeded shuffling DataLoader (through
    kiln.compile when `compiled`); returns a table row."""
    import time

    from kiln import nn
    from kiln.utils.data import DataLoader, TensorDataset

    x_train, y_train, x_test, y_test = data
    kiln.manual_seed(0)
    model = make(kiln).to(device)
    params = sum(p.numel() for p in model.parameters())
    opt = kiln.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    sched = kiln.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=epochs * -(-len(x_train) // batch_size))
    loader = DataLoader(TensorDataset(kiln.tensor(x_train), kiln.tensor(y_train)), batch_size=batch_size,
                        shuffle=True, generator=kiln.Generator().manual_seed(0))
    loss_fn = nn.CrossEntropyLoss()
    run = kiln.compile(model) if compiled else model
    start = time.perf_counter()
    first_step = None
    steps = 0
    step_times = []
    for epoch in range(epochs):
        model.train()
        epoch_start = time.perf_counter()
        total = len(loader)
        for step, (xb, yb) in enumerate(loader, 1):
            step_start = time.perf_counter()
            xb, yb = xb.to(device), yb.to(device)
            opt.zero_grad()
            loss = loss_fn(run(xb), yb)
            loss.backward()
            opt.step()
            sched.step()
            steps += 1
            step_times.append(time.perf_counter() - step_start)
            if first_step is None:
                first_step = step_times[0]
            if step % 5 == 0 or step == total:
                rate = step / (time.perf_counter() - epoch_start)
                progress(f"{name}{' compiled' if compiled else ''}{' ' + device if device != 'cpu' else ''} epoch {epoch + 1:2d}/{epochs}", step, total,
                         loss.item(), rate)
    seconds = time.perf_counter() - start
    if sys.stdout.isatty():
        print()
    model.eval()
    with kiln.no_grad():
        pred = run(kiln.tensor(x_test).to(device)).argmax(1)
    accuracy = float((pred.cpu() == kiln.tensor(y_test)).float().mean())
    # the median step: the steady state (a compiled model recompiles once more when the last, smaller
    # batch of the first epoch comes; the seconds column counts that)
    step_ms = sorted(step_times[1:] or step_times)[len(step_times[1:] or step_times) // 2] * 1e3
    return (name, device, "compiled" if compiled else "eager", params, epochs, seconds, step_ms, first_step * 1e3,
            accuracy)


def train_models():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from digits import cnn, load_digits, mlp

    data = load_digits()
    print(f"digits: {len(data[0])} train / {len(data[2])} test samples, 8x8 pixels, 10 classes")
    rows = []
    for name, make, epochs, lr in (("MLP", mlp, 30, 3e-3), ("CNN", cnn, 12, 1e-2)):
        rows.append(train(name, make, epochs, lr, data))
        rows.append(train(name, make, epochs, lr, data, compiled=True))
        if kiln.cuda.is_available():  # compiled CUDA kernels come with the GPU code generator (issue 21)
            rows.append(train(name, make, epochs, lr, data, device="cuda"))
    print()
    print(f"{'model':<6}{'device':>7}{'mode':>10}{'parameters':>12}{'epochs':>8}{'seconds':>9}{'median step ms':>16}{'speed-up':>10}"
          f"{'first step ms':>15}{'test accuracy':>15}")
    eager_step = {}
    for name, device, mode, params, epochs, seconds, step_ms, first_ms, acc in rows:
        eager_step.setdefault(name, step_ms)
        print(f"{name:<6}{device:>7}{mode:>10}{params:>12,}{epochs:>8}{seconds:>9.1f}{step_ms:>16.2f}"
              f"{eager_step[name] / step_ms:>9.2f}x{first_ms:>15.0f}{acc * 100:>14.2f}%")
    print()


def main():
    if "--tour-only" not in sys.argv:
        train_models()
    if "--train-only" in sys.argv:
        return
    kiln.manual_seed(0)
    show("kiln.arange(12).view(3, 4)", kiln.arange(12).view(3, 4))
    x = kiln.arange(12, dtype=kiln.float32).view(3, 4)
    show("x.t() is a view sharing storage; x.t().is_contiguous()", x.t().is_contiguous())
    show("x[:, 1::2]", x[:, 1::2])
    show("broadcasting: x + kiln.tensor([10., 20., 30., 40.])", x + kiln.tensor([10.0, 20.0, 30.0, 40.0]))
    show("type promotion: kiln.tensor([1, 2], dtype=kiln.int32) + 2.5",
         kiln.tensor([1, 2], dtype=kiln.int32) + 2.5)
    show("x.sum(dim=1), x.mean()", (x.sum(dim=1), x.mean()))
    if hasattr(kiln, "matmul"):
        show("x @ x.t()", x @ x.t())
    show("from_numpy shares memory", kiln.from_numpy(np.ones(3)))

    print()
    print("timing (best of 5; ratio = kiln / peer, lower is better)")
    rows = []
    n = 1 << 22
    a_np = np.random.rand(n).astype(np.float32)
    b_np = np.random.rand(n).astype(np.float32)
    a, b = kiln.from_numpy(a_np), kiln.from_numpy(b_np)
    one = kiln.ones(1)
    cases = [
        ("x + 1 (1 element)", lambda: one + 1, lambda: np.ones(1, np.float32) + 1, None),
        (f"x * y + 1 ({n:,} floats)", lambda: a * b + 1, lambda: a_np * b_np + 1, None),
        (f"sum ({n:,} floats)", lambda: a.sum(), lambda: a_np.sum(), None),
    ]
    if torch is not None:
        ta, tb, tone = torch.from_numpy(a_np), torch.from_numpy(b_np), torch.ones(1)
        cases[0] = cases[0][:3] + (lambda: tone + 1,)
        cases[1] = cases[1][:3] + (lambda: ta * tb + 1,)
        cases[2] = cases[2][:3] + (lambda: ta.sum(),)
    if hasattr(kiln, "mm"):
        m_np = np.random.rand(512, 512).astype(np.float32)
        m = kiln.from_numpy(m_np)
        tm = torch.from_numpy(m_np) if torch is not None else None
        cases.append(("matmul 512x512x512", lambda: m @ m, lambda: m_np @ m_np,
                      (lambda: tm @ tm) if tm is not None else None))
    for name, k_fn, np_fn, t_fn in cases:
        tk, tn = best_time(k_fn), best_time(np_fn)
        tt = best_time(t_fn) if t_fn else None
        rows.append((name, tk, tn, tt))
    print(f"{'op':<28}{'kiln':>12}{'numpy':>12}{'torch':>12}{'kiln/numpy':>12}{'kiln/torch':>12}")
    for name, tk, tn, tt in rows:
        tt_s = f"{tt * 1e6:10.1f}us" if tt else f"{'-':>12}"
        ratio_t = f"{tk / tt:11.2f}x" if tt else f"{'-':>12}"
        print(f"{name:<28}{tk * 1e6:10.1f}us{tn * 1e6:10.1f}us{tt_s}{tk / tn:11.2f}x{ratio_t}")


if __name__ == "__main__":
    main()
