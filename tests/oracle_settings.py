"""How PyTorch runs as the oracle: the same oneDNN code on every machine.

PyTorch's float32 gelu runs oneDNN, whose code depends on the machine: on AVX-512 (avx512_core)
a piecewise minimax polynomial whose tail below x = -4 is off by up to 100% relative (and -0.
where the AVX2 code gives +0.), on AVX2 the Abramowitz-Stegun erf, 0.5 * fma(x, erf, x), which
kiln reproduces (tensor/ops/activation.cc). The oracle is pinned to oneDNN's AVX2 code, so the
tests and the fuzzer judge kiln against the same PyTorch on AVX2 and AVX-512 machines. (Its aten
kernels keep the machine's choice: kiln's tolerances cover their 8- or 16-lane reductions, and
torch.compile's code, the reference for Inductor, follows them.) ONEDNN_MAX_CPU_ISA is read at
oneDNN's first use."""

import os

ORACLE_ENV = {"ONEDNN_MAX_CPU_ISA": "AVX2"}


def pin(env=os.environ):
    """Sets the oracle's oneDNN instruction set in `env` (a user's explicit choice wins)."""
    for key, value in ORACLE_ENV.items():
        env.setdefault(key, value)
    return env
