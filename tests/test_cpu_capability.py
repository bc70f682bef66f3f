"""kiln.backends.cpu.get_cpu_capability() and Note [CPU instruction sets]: the hot CPU loops run
AVX-512 versions where the CPU has AVX-512, AVX2 ones otherwise or under ATEN_CPU_CAPABILITY=avx2.
Both compute the same element functions: elementwise ops and activations with their backward,
softmax and log_softmax rows forward and backward, cross_entropy, layer_norm, gathers and
transposed copies, in float32, float64, bfloat16 and int32, contiguous and strided, with NaN and
infinities, give the same bits. float32 exp, sigmoid, silu, erf, GELU and its backward run
hand-vectorised AVX-512 loops (Note [Hand-vectorised runs]); they are compared on 8M float bit
patterns spread over the whole range. Each version runs in its own process (the capability is read once)."""

import os
import subprocess
import sys

import numpy as np

import kiln

PROGRAM = r"""
import sys
import numpy as np
import kiln
F = kiln.nn.functional
rng = np.random.default_rng(0)
a = (rng.standard_normal((67, 130)) * 4).astype(np.float32)
a[0, :7] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 88.5, -104.0]
results = []
def add(t):
    results.append(np.ascontiguousarray(t.detach().float().numpy() if t.dtype == kiln.bfloat16 else t.detach().numpy()))
for dtype in (kiln.float32, kiln.float64, kiln.bfloat16):
    for x in (kiln.tensor(a).to(dtype), kiln.tensor(a).to(dtype).t(), kiln.tensor(a).to(dtype)[:, ::3]):
        for f in (F.gelu, lambda v: F.gelu(v, approximate="tanh"), F.silu, kiln.sigmoid, kiln.tanh, kiln.exp, kiln.erf,
                  F.softplus, F.elu, F.mish, lambda v: v * 2 + 1, lambda v: kiln.where(v > 0, v, v / 3),
                  lambda v: F.softmax(v, -1), lambda v: F.log_softmax(v, -1), lambda v: F.softmax(v, 0),
                  lambda v: F.layer_norm(v, v.shape[-1:]), lambda v: v.t().contiguous(),
                  lambda v: v[kiln.tensor([3, 0, -1, 3])]):
            add(f(x))
            xg = x.detach().clone().requires_grad_()
            y = f(xg)
            if y.requires_grad:
                y.backward(kiln.ones_like(y))
                add(xg.grad)
logits = kiln.tensor(a[:, :100] * 0.5, requires_grad=True)
loss = F.cross_entropy(logits.nan_to_num(), kiln.tensor(rng.integers(0, 100, 67)))
loss.backward()
add(loss); add(logits.grad)
add(kiln.tensor(rng.integers(-1000, 1000, (40, 33)).astype(np.int32)).t().contiguous())
np.savez(sys.argv[1], *results)
print(kiln.backends.cpu.get_cpu_capability())
"""


EVERY_FLOAT = r"""
import sys
import numpy as np
import kiln
F = kiln.nn.functional
# every 509th bit pattern (all signs, exponents, NaNs and infinities) and a dense band near 0,
# an odd count so the masked tail runs too
bits = np.arange(0, 2**32, 509, dtype=np.uint64).astype(np.uint32).view(np.float32)
x = kiln.tensor(np.concatenate([bits, np.linspace(-9, 9, 1_000_003, dtype=np.float32)]))
g = kiln.tensor(np.resize(np.float32([1.0, -2.5, 0.37, 3e-3, 7.0]), x.shape[0]))
results = [F.gelu(x), kiln.ops.aten.gelu_backward(g, x), F.gelu(x[::2]), kiln.ops.aten.gelu_backward(g[::2], x[::2]),
           kiln.exp(x), kiln.sigmoid(x), F.silu(x), kiln.sigmoid(x[::2]), kiln.erf(x), kiln.erf(x[::2])]
np.savez(sys.argv[1], *[r.numpy() for r in results])
print(kiln.backends.cpu.get_cpu_capability())
"""


def run(capability, path, program=PROGRAM):
    env = dict(os.environ)
    env.pop("ATEN_CPU_CAPABILITY", None)
    if capability:
        env["ATEN_CPU_CAPABILITY"] = capability
    out = subprocess.run([sys.executable, "-c", program, str(path)], env=env, capture_output=True, text=True,
                         check=True)
    with np.load(path) as results:
        return out.stdout.strip(), [results[f"arr_{i}"] for i in range(len(results.files))]


def test_capability_names_the_instruction_set():
    assert kiln.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512")


def test_avx2_and_avx512_versions_give_the_same_results(tmp_path):
    default_name, default_results = run(None, tmp_path / "default.npz")
    avx2_name, avx2_results = run("avx2", tmp_path / "avx2.npz")
    assert avx2_name == "AVX2"
    with open("/proc/cpuinfo") as f:
        flags = set(next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), []))
    has_avx512 = {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= flags
    assert default_name == ("AVX512" if has_avx512 else "AVX2")
    assert len(default_results) == len(avx2_results) > 300
    identical = 0
    for got, want in zip(default_results, avx2_results):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        if np.array_equal(got, want, equal_nan=True):
            identical += 1
        elif got.dtype.kind == "f":
            finite = np.isfinite(want)
            np.testing.assert_array_equal(got[~finite], want[~finite])
            np.testing.assert_array_max_ulp(got[finite], want[finite], maxulp=1)
        else:
            np.testing.assert_array_equal(got, want)
    assert identical == len(default_results), identical


def test_gelu_runs_give_the_same_bits_on_every_float(tmp_path):
    default_name, default_results = run(None, tmp_path / "default.npz", EVERY_FLOAT)
    _, avx2_results = run("avx2", tmp_path / "avx2.npz", EVERY_FLOAT)
    for got, want in zip(default_results, avx2_results):
        nan = np.isnan(want)
        np.testing.assert_array_equal(np.isnan(got), nan)  # a NaN's sign may differ (vec_avx512.h)
        np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))
