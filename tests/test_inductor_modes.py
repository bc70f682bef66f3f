"""Inductor's modes and options: kiln.compile(mode="reduce-overhead") keeps intermediate buffers
between calls without letting outputs share them; mode="max-autotune" times the alternatives for
matmul and convolution, compiles the chosen one (a generated matmul fuses its bias and activation)
and remembers the choice on disk; unknown options raise as in PyTorch. Every compiled result is
compared with eager."""

import os
import sys

import numpy as np
import pytest

import kiln
import kiln._dynamo as dynamo
import kiln.nn.functional as F
from kiln._inductor import autotune, graph
from kiln._inductor.utils import run_and_get_code

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from digits import cnn, mlp  # noqa: E402
from training_util import assert_training_matches_eager  # noqa: E402


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(a.detach().double().numpy(), b.detach().double().numpy(), rtol=tol, atol=tol)


def kernels_of(codes):
    return [line.split()[2] for code in codes for line in code.splitlines() if line.startswith("# kernel ")]


@pytest.fixture(autouse=True)
def fresh(tmp_path, monkeypatch):
    """Each test: no compiled frames, and an empty autotune cache of its own."""
    monkeypatch.setenv("KILN_INDUCTOR_CACHE_DIR", str(tmp_path))
    autotune.clear_cache()
    dynamo.reset()
    yield
    dynamo.reset()
    autotune.clear_cache()


def force(monkeypatch, winner):
    """Makes `winner` the fastest alternative (when it applies); counts the timings taken."""
    timed = []

    def measure(name, run):
        run()
        timed.append(name)
        return 1.0 if name == winner else 2.0

    monkeypatch.setattr(autotune, "measure", measure)
    return timed


def test_unknown_options_and_modes_raise():
    with pytest.raises(RuntimeError, match="Unexpected optimization option bogus"):
        kiln.compile(lambda x: x, options={"bogus": True})
    with pytest.raises(RuntimeError, match="Unexpected type of attr max_autotune"):
        kiln.compile(lambda x: x, options={"max_autotune": 1})
    with pytest.raises(RuntimeError, match="Unrecognized mode"):
        kiln.compile(lambda x: x, mode="fastest")
    with pytest.raises(RuntimeError, match="Either mode or options"):
        kiln.compile(lambda x: x, mode="max-autotune", options={"max_autotune": True})


def test_reduce_overhead_keeps_intermediates_and_fresh_outputs():
    def fn(x, w):
        h = (x @ w).relu().exp()        # an intermediate kernel buffer (read by the next matmul)
        return (h @ w).sigmoid(), h.sum(-1)

    compiled = kiln.compile(fn, mode="reduce-overhead")
    x, w = kiln.randn(16, 8), kiln.randn(8, 8)
    with kiln.no_grad():
        first, codes = run_and_get_code(compiled, x, w)
        kept = [t.clone() for t in first]
        second = compiled(x * 3, w)      # reuses the static buffers
    assert "static_buffers" in codes[0]
    for got, want in zip(first, kept):   # the first call's outputs are not overwritten
        close(got, want)
    for got, want in zip(second, fn(x * 3, w)):
        close(got, want, tol=1e-4)


@pytest.mark.parametrize("make", [mlp, cnn], ids=["mlp", "cnn"])
def test_reduce_overhead_training_matches_eager(make):
    assert_training_matches_eager(lambda: make(kiln), lambda m: kiln.compile(m, mode="reduce-overhead"),
                                  lambda p: kiln.optim.SGD(p, lr=0.1))


def test_max_autotune_generated_matmul_fuses_its_epilogue(monkeypatch):
    timed = force(monkeypatch, "generated")
    lin = kiln.nn.Linear(32, 24)
    fn = lambda x: F.gelu(lin(x))  # noqa: E731
    x = kiln.randn(8, 32)
    with kiln.no_grad():
        out, codes = run_and_get_code(kiln.compile(fn, mode="max-autotune"), x)
        close(out, fn(x), tol=1e-5)
    names = kernels_of(codes)
    assert len(names) == 1 and all(p in names[0] for p in ("addmm", "gelu", "mm")), names
    assert "# autotune: aten.addmm.default -> generated" in codes[0]
    assert timed == ["extern", "generated"]


@pytest.mark.parametrize("winner", ["extern", "generated"])
def test_max_autotune_mlp_training_matches_eager(monkeypatch, winner):
    force(monkeypatch, winner)
    assert_training_matches_eager(lambda: mlp(kiln), lambda m: kiln.compile(m, mode="max-autotune"),
                                  lambda p: kiln.optim.SGD(p, lr=0.1))


@pytest.mark.parametrize("winner", ["extern", "im2col"])
def test_max_autotune_cnn_training_matches_eager(monkeypatch, winner):
    force(monkeypatch, winner)
    assert_training_matches_eager(lambda: cnn(kiln), lambda m: kiln.compile(m, mode="max-autotune"),
                                  lambda p: kiln.optim.SGD(p, lr=0.1))


def test_conv_im2col_alternative_matches_the_extern_kernel():
    x = kiln.randn(2, 3, 9, 7)
    for (co, k, stride, padding, dilation) in [(4, 3, 1, 1, 1), (5, 2, 2, 0, 1), (3, 3, 1, 2, 2)]:
        w, b = kiln.randn(co, 3, k, k), kiln.randn(co)
        args = (x, w, b, [stride] * 2, [padding] * 2, [dilation] * 2, False, [0, 0], 1)
        close(autotune.conv2d_im2col(*args), kiln.ops.aten.convolution.default(*args), tol=1e-4)
        close(autotune.conv2d_im2col(x, w, None, *args[3:]), kiln.ops.aten.convolution.default(x, w, None, *args[3:]),
              tol=1e-4)


def test_max_autotune_choice_is_cached_on_disk(monkeypatch, tmp_path):
    timed = force(monkeypatch, "generated")
    fn = lambda a, b: (a @ b).relu()  # noqa: E731
    a, b = kiln.randn(16, 12), kiln.randn(12, 20)
    with kiln.no_grad():
        close(kiln.compile(fn, mode="max-autotune")(a, b), fn(a, b), tol=1e-5)
        assert timed == ["extern", "generated"]
        assert os.path.exists(os.path.join(str(tmp_path), "autotune.json"))
        dynamo.reset()
        autotune._choices = None        # a new process: the choice comes back from disk
        _, codes = run_and_get_code(kiln.compile(fn, mode="max-autotune"), a, b)
    assert timed == ["extern", "generated"]  # not timed again
    assert "# autotune: aten.mm.default -> generated" in codes[0]


def test_max_autotune_drops_an_alternative_that_disagrees(monkeypatch):
    force(monkeypatch, "generated")
    broken = graph._generated_mm

    def wrong(*args):
        run = broken(*args)
        return lambda: run() + 1.0

    monkeypatch.setattr(graph, "_generated_mm", wrong)
    fn = lambda a, b: a @ b  # noqa: E731
    a, b = kiln.randn(4, 6), kiln.randn(6, 5)
    with kiln.no_grad():
        out, codes = run_and_get_code(kiln.compile(fn, mode="max-autotune"), a, b)
    close(out, fn(a, b))
    assert "# autotune: aten.mm.default -> extern" in codes[0]
