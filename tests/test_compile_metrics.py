"""kiln._dynamo.utils.counters and compile_times() against PyTorch's, the compile time by phase, the
summary KILN_LOGS=perf_hints prints at exit, and the thread-oversubscription warning."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

import kiln
from kiln._dynamo import utils
from kiln._inductor import oversubscription
from conftest import requires_torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
ENV.pop("KILN_LOGS", None)

# A graph break (print), then two calls with new sizes: the first recompiles each frame with a
# symbolic size (automatic dynamic shapes), the second runs those entries.
PROGRAM = """
def f(x):
    y = x.sin()
    print("between")
    return y.cos() + 1
"""


def run(code, **env):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=dict(ENV, **env), capture_output=True,
                          text=True, timeout=300)


def _compile_and_call(lib, sizes=(4, 5, 6)):
    namespace = {}
    exec(PROGRAM, namespace)
    cf = lib.compile(namespace["f"])
    for n in sizes:
        cf(lib.randn(n))


@pytest.fixture
def fresh_counters():
    kiln._dynamo.reset()
    utils.counters.clear()
    yield utils.counters
    kiln._dynamo.reset()


TORCH_COUNTERS = """
import json, torch
ns = {}
exec(%r, ns)
cf = torch.compile(ns["f"])
for n in (4, 5, 6):
    cf(torch.randn(n))
print(json.dumps({k: dict(v) for k, v in torch._dynamo.utils.counters.items()}))
""" % PROGRAM


@requires_torch
def test_counters_count_what_pytorchs_count(fresh_counters):
    # PyTorch in a process of its own: importing torch._dynamo turns distributions' argument
    # validation off for the whole process (torch/_dynamo/eval_frame.py), which other tests check
    out = run(TORCH_COUNTERS)
    assert out.returncode == 0, out.stderr
    theirs = json.loads(out.stdout.splitlines()[-1])
    _compile_and_call(kiln)
    ours = fresh_counters
    assert dict(ours["frames"]) == theirs["frames"] == {"total": 4, "ok": 4}
    assert ours["stats"]["unique_graphs"] == theirs["stats"]["unique_graphs"] == 4
    assert ours["stats"]["calls_captured"] == theirs["stats"]["calls_captured"]
    assert sum(ours["graph_break"].values()) == sum(theirs["graph_break"].values()) == 2
    assert list(ours["graph_break"]) == ["print() is a side effect in Python"]
    # kiln's AOT traces a graph with symbolic sizes once per size (aot_autograd.py), PyTorch's once
    assert ours["aot_autograd"]["total"] == ours["aot_autograd"]["ok"] == 6
    assert ours["inductor"]["generated_kernel_count"] == 6  # sin, and cos+add, for each of the three sizes
    # kiln's own: the recompiles by their short reason (the frame and the resume function after the break)
    assert sorted(ours["recompiles"]) == ["f: x: size mismatch at index 0: expected 4, actual 5",
                                          "f: y: size mismatch at index 0: expected 4, actual 5"]


def test_compile_times_in_pytorchs_formats(fresh_counters):
    _compile_and_call(kiln)
    text = utils.compile_times()
    lines = text.splitlines()
    assert lines[0] == "kiln._dynamo compilation metrics:"
    assert lines[1].split() == ["Function", "Runtimes", "(s)"]
    rows = {line.split()[0]: line.split(None, 1)[1] for line in lines[3:]}
    for step in ("_compile.compile_inner", "build_guards", "create_aot_dispatcher_function", "compile_fx_inner",
                 "GraphLowering.run", "compile_kernels"):
        assert step in rows, step
    assert len(rows["_compile.compile_inner"].split(", ")) == 4  # one value per compile (4 frames compiled)
    headers, values = utils.compile_times(repr="csv", aggregate=True)
    assert headers == list(utils.compilation_time_metrics) and len(values) == len(headers)
    total = dict(zip(headers, values))["_compile.compile_inner"]
    assert float(total) == pytest.approx(sum(utils.compilation_time_metrics["_compile.compile_inner"]), abs=1e-5)
    headers, values = utils.compile_times(repr="csv")
    assert len(dict(zip(headers, values))["compile_fx_inner"].split(", ")) == 6  # two graphs, three sizes
    assert utils.compile_times(repr="other") is None
    kiln._dynamo.reset()  # as torch._dynamo.reset(): times start over, counters stay
    assert utils.compilation_time_metrics == {} and utils.counters["frames"]["total"] == 4


def test_phases_are_exclusive_and_add_up_to_the_compiles(fresh_counters):
    _compile_and_call(kiln)
    phases = dict(utils.phase_times)
    assert set(phases) == set(utils.PHASES)
    assert all(seconds > 0 for seconds in phases.values())
    # the outermost timed steps: Dynamo's translation, and AOT's at each graph's first call
    metrics = utils.compilation_time_metrics
    outer = sum(metrics["_compile.compile_inner"]) + sum(metrics["create_aot_dispatcher_function"])
    assert sum(phases.values()) == pytest.approx(outer, rel=1e-6)
    assert phases["LLVM codegen"] == pytest.approx(sum(metrics["compile_kernels"]), rel=1e-6)


def test_perf_hints_prints_the_summary_at_exit():
    code = "import kiln\n" + PROGRAM + "cf = kiln.compile(f)\nfor n in (4, 5, 6):\n    cf(kiln.randn(n))\n"
    out = run(code, KILN_LOGS="perf_hints")
    assert out.returncode == 0, out.stderr
    err = out.stderr
    assert "[kiln] [perf_hints] Compile summary: 4 of 4 frames compiled, 4 graphs" in err
    assert "2 graph breaks, 2 recompiles, 6 kernels" in err
    assert "Compile time by phase" in err and "LLVM codegen" in err
    assert "  2 x print() is a side effect in Python" in err
    assert "  1 x f: x: size mismatch at index 0: expected 4, actual 5" in err
    assert "kiln._dynamo compilation metrics:" in err and "compile_fx_inner" in err
    quiet = run(code)
    assert quiet.returncode == 0 and "Compile summary" not in quiet.stderr
    from_python = run("import kiln\nkiln._logging.set_logs(perf_hints=True)\n" + code)
    assert "Compile summary: 4 of 4 frames compiled" in from_python.stderr
    nothing_compiled = run("import kiln\nkiln.randn(3).sin()\n", KILN_LOGS="perf_hints")
    assert nothing_compiled.returncode == 0 and "Compile summary" not in nothing_compiled.stderr


# --- thread oversubscription ------------------------------------------------------------------------
class _Sample:
    def __init__(self, wall, busy, own, cpus=2):
        self.wall, self.busy, self.own, self.cpus = wall, busy, own, list(range(cpus))


def test_others_busy_cores_subtracts_this_process():
    # 0.2 s: the CPUs were busy 0.5 s in all, 0.2 s of it this process: others kept 1.5 cores busy
    assert oversubscription.others_busy_cores(_Sample(1.0, 10.0, 3.0), _Sample(1.2, 10.5, 3.2)) == pytest.approx(1.5)
    assert oversubscription.others_busy_cores(_Sample(1.0, 10.0, 3.0), _Sample(1.05, 10.5, 3.0)) is None  # too short
    assert oversubscription.others_busy_cores(_Sample(1.0, 10.0, 3.0), _Sample(1.2, 10.2, 3.2)) == 0.0


def test_oversubscribed_when_threads_exceed_the_free_cores():
    assert oversubscription.oversubscribed(threads=2, cpus=2, others=1.5)
    assert oversubscription.oversubscribed(threads=8, cpus=8, others=2.0)
    assert not oversubscription.oversubscribed(threads=2, cpus=2, others=0.3)   # an idle machine
    assert not oversubscription.oversubscribed(threads=1, cpus=2, others=4.0)   # one thread never waits on others
    assert not oversubscription.oversubscribed(threads=4, cpus=8, others=3.0)   # fewer threads than free cores
    assert not oversubscription.oversubscribed(threads=2, cpus=2, others=None)  # nothing measured


LOADED = """
import subprocess, sys, time, warnings
import kiln
busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range({n})]
time.sleep(0.5)
try:
    kiln.set_num_threads({threads})
    m = kiln.nn.Sequential(*[kiln.nn.Sequential(kiln.nn.Linear(64, 64), kiln.nn.GELU(), kiln.nn.LayerNorm(64))
                             for _ in range(8)])  # compiles long enough to measure the load (0.1 s)
    step = kiln.compile(m)
    step(kiln.randn(32, 64)).sum().backward()   # the user's line the warning names
    step2 = kiln.compile(lambda x: (x.tanh() * 2).softmax(-1))
    step2(kiln.randn(16, 16))
    print("ran")
finally:
    for p in busy:
        p.kill()
"""


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="the load is measured from /proc/stat (Linux)")
def test_warns_once_under_load_with_the_fix(tmp_path):
    cpus = len(os.sched_getaffinity(0))
    # an empty kernel cache: with its kernels cached, the program compiled within the 0.1 s the load
    # needs to be measured over, and no warning came (once, in a full local run, after compile-time
    # work made its Python part faster)
    out = run(LOADED.format(n=cpus + 1, threads=cpus), KILN_CHECK_THREADS="1", KILN_INDUCTOR_CACHE_DIR=str(tmp_path))
    assert out.returncode == 0 and "ran" in out.stdout, out.stderr
    assert out.stderr.count("RuntimeWarning: kiln: other processes keep") == 1, out.stderr
    assert "kiln.set_num_threads(" in out.stderr and "than the cores left free" in out.stderr
    # attributed to the user's line, not kiln's: the first compile's (11), or the second's (13) when
    # the first ended before the busy processes' load showed in /proc/stat (CI saw both)
    assert '<string>:11: RuntimeWarning' in out.stderr or '<string>:13: RuntimeWarning' in out.stderr, out.stderr
    one_thread = run(LOADED.format(n=cpus + 1, threads=1), KILN_CHECK_THREADS="1")
    assert one_thread.returncode == 0 and "other processes keep" not in one_thread.stderr
    switched_off = run(LOADED.format(n=cpus + 1, threads=cpus), KILN_CHECK_THREADS="0")
    assert switched_off.returncode == 0 and "other processes keep" not in switched_off.stderr
