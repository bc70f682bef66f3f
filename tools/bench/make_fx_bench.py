"""make_fx of a training step (forward, cross_entropy, backward) of the digits CNN under fake
tensors (tools/digits.py `cnn`, batch 128): time per trace and node count, kiln beside PyTorch
2.13's make_fx of the same step in the same run (when torch is installed). Target: < 50 ms.

    tools/python tools/bench/make_fx_bench.py

The parameters and buffers are inputs (func.functional_call), as AOTAutograd traces them, so the
graph holds the whole step: conv/batch-norm/SiLU/pool/linear forward, the loss, every backward op
and the running-statistics updates.
"""

import importlib
import sys
import time

sys.path.insert(0, __file__.rsplit("/", 2)[0])
from digits import cnn  # noqa: E402

import kiln  # noqa: E402
import kiln.func  # noqa: E402,F401

try:
    import torch
    import torch.func  # noqa: F401
except ImportError:
    torch = None


def step_fn(lib, model, names, n_params):
    func = lib.func.functional_call
    F = lib.nn.functional

    def step(*args):
        tensors = args[:-2]
        x, y = args[-2:]
        params = {n: t for n, t in zip(names, tensors)}
        loss = F.cross_entropy(func(model, params, (x,)), y)
        grads = lib.autograd.grad(loss, list(tensors[:n_params]))
        return loss, grads

    return step


def setup(lib, make_fx, mode):
    lib.manual_seed(0)
    model = cnn(lib)
    params = dict(model.named_parameters())
    buffers = dict(model.named_buffers())
    names = list(params) + list(buffers)
    inputs = [p.detach().requires_grad_() for p in params.values()] + [b.clone() for b in buffers.values()]
    x = lib.randn(128, 64)
    y = lib.randint(0, 10, (128,))
    step = step_fn(lib, model, names, len(params))
    return lambda: make_fx(step, tracing_mode=mode)(*inputs, x, y)


def measure(trace, repeat=10):
    gm = trace()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        gm = trace()
        times.append(time.perf_counter() - t0)
    nodes = len([n for n in gm.graph.nodes if n.op == "call_function"])
    return min(times) * 1e3, len(gm.graph.nodes), nodes


def main():
    from kiln.fx.experimental.proxy_tensor import make_fx
    mode = "fake"
    try:
        importlib.import_module("kiln._subclasses.fake_tensor")
    except ImportError:
        mode = "real"  # fake tensors not built into this checkout: real tensors (compute included)
    ms, total, calls = measure(setup(kiln, make_fx, mode))
    print(f"kiln  make_fx({mode}) CNN train step: {ms:7.2f} ms per trace, {total} nodes ({calls} call_function)")
    if torch is not None:
        from torch.fx.experimental.proxy_tensor import make_fx as torch_make_fx
        tms, ttotal, tcalls = measure(setup(torch, torch_make_fx, mode))
        print(f"torch make_fx({mode}) CNN train step: {tms:7.2f} ms per trace, {ttotal} nodes ({tcalls} call_function)")
        print(f"ratio kiln/torch: {ms / tms:.2f}")
    print(f"target < 50 ms: {'met' if ms < 50 else 'NOT met'}")


if __name__ == "__main__":
    main()
