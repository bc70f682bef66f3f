"""Cold compile of the demo's digits training steps (issue 20's figure): the first compiled training
step of the MLP and the CNN over eager's first step, in fresh processes with an empty kernel cache,
and again with the cache that first run filled (warm), with the spread over several processes.

    tools/python tools/bench/cold_step_bench.py [--runs 5]

Each child process builds the model (tools/digits.py, batch 128), runs one eager training step
(forward, cross-entropy, backward) and then the first step of kiln.compile(model); the figure is
the compiled step's CPU time (`time.process_time`: every thread, LLVM's compile threads included)
minus the eager step's, the compile work the first compiled step adds. The issue's targets: the
CNN at most 0.35 s cold and 0.1 s warm over eager's first step.

The children import kiln's compiler modules from bytecode, as an installed package does (pip
byte-compiles at install; a checkout writes __pycache__ on first import): they run with a bytecode
cache of their own (PYTHONPYCACHEPREFIX, filled by compileall first), whatever PYTHONDONTWRITEBYTECODE
says. Compiling those modules from source in every process added ~0.12 s to each figure here.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 2)[0])
from digits import cnn, mlp  # noqa: E402

MODELS = {"mlp": mlp, "cnn": cnn}


def child(model_name):
    import kiln

    kiln.manual_seed(0)
    rng = np.random.default_rng(0)
    x = kiln.tensor(rng.standard_normal((128, 64)).astype(np.float32))
    y = kiln.tensor(rng.integers(0, 10, 128))
    F = kiln.nn.functional

    def step(model):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        return loss

    model = MODELS[model_name](kiln)
    start = time.process_time()
    step(model)
    eager = time.process_time() - start
    compiled = kiln.compile(model)
    start = time.process_time()
    step(compiled)
    first = time.process_time() - start
    print(json.dumps({"eager_s": eager, "compiled_s": first}))


def over_eager(model_name, cache, pycache):
    env = dict(os.environ, KILN_INDUCTOR_CACHE_DIR=cache, PYTHONPYCACHEPREFIX=pycache)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    out = subprocess.run([sys.executable, __file__, "--child", model_name], env=env, capture_output=True, text=True,
                         check=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    return r["compiled_s"] - r["eager_s"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child)
    with tempfile.TemporaryDirectory(prefix="kiln-pycache-") as pycache:
        subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(__file__.rsplit("/", 3)[0], "python", "kiln")],
                       env=dict(os.environ, PYTHONPYCACHEPREFIX=pycache), check=True)
        print("first compiled training step - eager's first step, CPU s (fresh processes; min / median / max)")
        print(f"{'model':<6}{'cold':>24}{'warm':>24}")
        for name in MODELS:
            cold, warm = [], []
            for _ in range(args.runs):
                with tempfile.TemporaryDirectory() as cache:
                    cold.append(over_eager(name, cache, pycache))
                    warm.append(over_eager(name, cache, pycache))  # the kernels the cold run compiled, from disk
            row = f"{name:<6}"
            for xs in (cold, warm):
                row += f"{min(xs):8.3f}{statistics.median(xs):8.3f}{max(xs):8.3f}"
            print(row, flush=True)


if __name__ == "__main__":
    main()
