"""The demo (tools/demo.sh): trains an MLP and a small CNN on the digits data eagerly and compiled
(and eagerly on the GPU when kiln.cuda.is_available()), with a progress bar, and prints a table
(parameters, epochs, seconds, test accuracy on the fixed 360-sample split), saved with a plot of
loss and test accuracy per epoch (eager against compiled) in --out; then a short tour of eager
kiln and a timing table of a few ops against numpy and PyTorch."""

import argparse
import os
import sys
import time

TOOLS = os.path.dirname(os.path.abspath(__file__))
MODELS = {"mlp": ("MLP", 30, 3e-3), "cnn": ("CNN", 12, 1e-2)}  # --model: (name, epochs, learning rate)


def parse_args(argv=None):
    """The options; --help prints them and exits before kiln is imported or anything runs."""
    parser = argparse.ArgumentParser(
        prog="tools/demo.py", description=__doc__.split("\n\n")[0].replace("\n", " "),
        epilog="bash tools/demo.sh passes its arguments here (after setting up and building kiln; not for --help).")
    part = parser.add_mutually_exclusive_group()
    part.add_argument("--train-only", action="store_true", help="train the models, skip the tour")
    part.add_argument("--tour-only", action="store_true", help="run the eager tour and timing table only")
    parser.add_argument("--model", choices=list(MODELS), action="append",
                        help="train this model only (repeatable; default: mlp and cnn)")
    parser.add_argument("--compiled-only", action="store_true",
                        help="train through kiln.compile only (no eager runs to compare against)")
    parser.add_argument("--epochs", type=_positive_int, metavar="N",
                        help="epochs for every model (default: 30 for mlp, 12 for cnn)")
    parser.add_argument("--out", default="demo-out", metavar="DIR",
                        help="where the table (digits.txt) and the plot (digits.png) go (default: %(default)s)")
    return parser.parse_args(argv)


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


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
    kiln.compile when `compiled`), scoring the test split after each epoch; returns a table row
    and the per-epoch history (mean training loss, test accuracy)."""
    import kiln
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
    test_x, test_y = kiln.tensor(x_test).to(device), kiln.tensor(y_test)

    def accuracy():  # eval mode, no grad: no dropout, batch norm's running statistics left alone
        model.eval()
        with kiln.no_grad():
            pred = run(test_x).argmax(1)
        return float((pred.cpu() == test_y).float().mean())

    start = time.perf_counter()
    scoring = 0.0  # seconds spent on the test split: not training time
    first_step = None
    steps = 0
    step_times = []
    history = dict(model=name, mode="compiled" if compiled else "eager", loss=[], accuracy=[],
                   label=f"{'compiled' if compiled else 'eager'}{' ' + device if device != 'cpu' else ''}")
    for epoch in range(epochs):
        model.train()
        epoch_start = time.perf_counter()
        total = len(loader)
        loss_sum = None  # on the device: no synchronisation per step
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
            loss_sum = loss.detach() if loss_sum is None else loss_sum + loss.detach()
            if first_step is None:
                first_step = step_times[0]
            if step % 5 == 0 or step == total:
                rate = step / (time.perf_counter() - epoch_start)
                progress(f"{name}{' compiled' if compiled else ''}{' ' + device if device != 'cpu' else ''} epoch {epoch + 1:2d}/{epochs}", step, total,
                         loss.item(), rate)
        history["loss"].append(loss_sum.item() / total)
        scoring_start = time.perf_counter()
        history["accuracy"].append(accuracy())
        scoring += time.perf_counter() - scoring_start
    seconds = time.perf_counter() - start - scoring
    if sys.stdout.isatty():
        print()
    # the median step: the steady state (a compiled model recompiles once more when the last, smaller
    # batch of the first epoch comes; the seconds column counts that)
    step_ms = sorted(step_times[1:] or step_times)[len(step_times[1:] or step_times) // 2] * 1e3
    row = (name, device, history["mode"], params, epochs, seconds, step_ms, first_step * 1e3, history["accuracy"][-1])
    return row, history


def train_models(args):
    import kiln

    sys.path.insert(0, TOOLS)
    from digits import cnn, load_digits, mlp
    from demo_plot import plot_training

    makers = {"mlp": mlp, "cnn": cnn}
    data = load_digits()
    print(f"digits: {len(data[0])} train / {len(data[2])} test samples, 8x8 pixels, 10 classes")
    rows, histories = [], []
    for key in [k for k in MODELS if k in (args.model or MODELS)]:
        name, epochs, lr = MODELS[key]
        epochs = args.epochs or epochs
        runs = [dict(compiled=True)] if args.compiled_only else [dict(), dict(compiled=True)]
        if kiln.cuda.is_available() and not args.compiled_only:  # compiled CUDA kernels: issue 21
            runs.append(dict(device="cuda"))
        for options in runs:
            row, history = train(name, makers[key], epochs, lr, data, **options)
            rows.append(row)
            histories.append(history)
    table = [f"{'model':<6}{'device':>7}{'mode':>10}{'parameters':>12}{'epochs':>8}{'seconds':>9}{'median step ms':>16}"
             f"{'speed-up':>10}{'first step ms':>15}{'test accuracy':>15}"]
    eager_step = {name: step_ms for name, _, mode, _, _, _, step_ms, _, _ in reversed(rows) if mode == "eager"}
    for name, device, mode, params, epochs, seconds, step_ms, first_ms, acc in rows:
        speed_up = f"{eager_step[name] / step_ms:>9.2f}x" if name in eager_step else f"{'-':>10}"
        table.append(f"{name:<6}{device:>7}{mode:>10}{params:>12,}{epochs:>8}{seconds:>9.1f}{step_ms:>16.2f}"
                     f"{speed_up}{first_ms:>15.0f}{acc * 100:>14.2f}%")
    print()
    print("\n".join(table))
    os.makedirs(args.out, exist_ok=True)
    table_path = os.path.join(args.out, "digits.txt")
    with open(table_path, "w") as f:
        f.write("\n".join(table) + "\n")
    print(f"table: {table_path}")
    plot_path = plot_training(histories, os.path.join(args.out, "digits.png"))
    if plot_path is not None:
        print(f"plot: {plot_path} (loss and test accuracy per epoch, eager against compiled)")
    print()


def main(argv=None):
    args = parse_args(argv)
    if not args.tour_only:
        train_models(args)
    if args.train_only:
        return
    tour()


def tour():
    import numpy as np

    import kiln

    sys.path.insert(0, os.path.join(TOOLS, "bench"))
    from eager_bench import best as best_time

    try:
        import torch
    except ImportError:  # the 3.12 environment has no torch
        torch = None
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
