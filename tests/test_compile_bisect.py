"""kiln._dynamo.bisect, tools/compile_bisect.py and the minifier against seeded compiler bugs
(KILN_TEST_SEEDED_BUG, kiln/_inductor/seeded_bugs.py): each bug is found in the backend, graph
and subsystem it sits in, every time, and the repro written for it fails while the bug is there
and passes without it. The variable is read when kiln._inductor is imported, so every run is a
subprocess."""

import json
import os
import subprocess
import sys

import pytest

import kiln

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
for name in ("KILN_LOGS", "KILN_TEST_SEEDED_BUG", "KILN_REPRO_AFTER", "KILN_COMPILE_DEBUG", "KILN_BISECT_BACKEND"):
    ENV.pop(name, None)

# Programs the bisector is given: pointwise ops with a relu fused into them, a layer norm, a second
# graph after a break; and an MLP whose backward graph has the transposed weight gradients.
POINTWISE = """
import kiln
kiln.manual_seed(0)
ln = kiln.nn.LayerNorm(4)
def f(x):
    y = x.cos() + 1
    print("a graph break")
    y = (y.relu() * 2).sin() + ln(y)
    return y.tanh()
x = kiln.randn(3, 4)
"""
MLP = """
import kiln
kiln.manual_seed(0)
f = kiln.nn.Sequential(kiln.nn.Linear(4, 8), kiln.nn.Tanh(), kiln.nn.Linear(8, 2))
x = kiln.randn(5, 4)
"""
BISECT = """
import dataclasses, json, contextlib, io
with contextlib.redirect_stdout(io.StringIO()):
    result = kiln._dynamo.bisect(f, x, repro_dir={repro_dir!r})
print(json.dumps(dataclasses.asdict(result)))
"""


def run(args, timeout=300, **env):
    return subprocess.run(args, env=dict(ENV, **env), capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def bisect(program, tmp_path, bug):
    done = run([sys.executable, "-c", program + BISECT.format(repro_dir=str(tmp_path))], KILN_TEST_SEEDED_BUG=bug)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_repro(path, bug):
    return run([sys.executable, path], KILN_TEST_SEEDED_BUG=bug)


# (seeded bug, program, backend, subsystem, what the failing application names, failure kind)
SEEDED = [
    ("lowering", POINTWISE, "inductor", "lowerings", "aten.relu.default", "accuracy"),
    ("lowering_crash", POINTWISE, "inductor", "lowerings", "aten.sin.default", "crash"),
    ("fusion", POINTWISE, "inductor", "fusion", "aten.relu.default", "accuracy"),
    ("pass_crash", MLP, "inductor", "passes", "contiguous_transposed_products", "crash"),
    ("decomposition", POINTWISE, "aot_eager_decomp_partition", "decomposition", "aten.native_layer_norm.default",
     "accuracy"),
]


@pytest.mark.parametrize("bug,program,backend,subsystem,culprit,kind", SEEDED, ids=[s[0] for s in SEEDED])
def test_bisect_finds_seeded_bug_and_writes_a_failing_repro(tmp_path, bug, program, backend, subsystem, culprit, kind):
    result = bisect(program, tmp_path, bug)
    assert result["backend"] == backend
    assert result["failure"].startswith(kind)
    # POINTWISE has two graphs (the break): the bug sits in the second, MLP has one
    assert result["graph"] == (1 if program is POINTWISE else 0)
    assert result["graph_count"] == (2 if program is POINTWISE else 1)
    assert result["subsystem"] == subsystem
    assert culprit in result["debug_info"]
    repro = result["repro_path"]
    assert repro == str(tmp_path / "repro.py")
    source = open(repro).read()
    compile(source, repro, "exec")
    failing = run_repro(repro, bug)
    assert failing.returncode == 1, failing.stderr
    assert ("crashes" if kind == "crash" else "diverges") in failing.stderr
    assert run_repro(repro, "").returncode == 0


def test_minified_repro_is_small(tmp_path):
    """The relu lowering bug's repro keeps the relu and drops the rest of the graph."""
    result = bisect(POINTWISE, tmp_path, "lowering")
    forward = open(result["repro_path"]).read().split("def forward")[1].split("def load_args")[0]
    assert "relu" in forward
    for dropped in ("sin", "layer_norm", "tanh", "cos"):
        assert dropped not in forward


def test_bisect_without_a_bug_finds_nothing(tmp_path):
    result = bisect(POINTWISE, tmp_path, "")
    assert result["backend"] is None and result["repro_path"] is None
    assert not os.path.exists(tmp_path / "repro.py")


def test_bisect_in_process_restores_settings():
    """In this process (no seeded bug): every backend agrees; suppress_errors and the Inductor
    budgets are as before, and a later compile still works."""
    from kiln._dynamo import config
    from kiln._inductor import bisect_controls

    x = kiln.randn(3, 4)
    result = kiln._dynamo.bisect(lambda t: (t.relu() * 2).sin(), x)
    assert result.backend is None and "every backend agrees" in str(result)
    assert config.suppress_errors is True
    assert not bisect_controls.lowerings.recording and not bisect_controls.disabled_passes
    assert kiln.allclose(kiln.compile(lambda t: t.cos() + 1)(x), x.cos() + 1)


def test_unknown_seeded_bug_is_rejected():
    done = run([sys.executable, "-c", "import kiln._inductor"], KILN_TEST_SEEDED_BUG="nonsense")
    assert done.returncode != 0 and "unknown seeded bug" in done.stderr and "lowering_crash" in done.stderr


PROGRAM_FILE = POINTWISE + """
f = kiln.compile(f)
print(f(x).sum().item())
print(f(x * 2).tolist())
"""


@pytest.mark.parametrize("bug,subsystem", [("fusion", "fusion, application"), ("pass_crash", "passes: the pass")])
def test_compile_bisect_tool(tmp_path, bug, subsystem):
    script = tmp_path / "train.py"
    script.write_text(PROGRAM_FILE if bug == "fusion" else MLP + """
compiled = kiln.compile(f)
loss = compiled(x).sum()
loss.backward()
print(loss.item(), f[0].weight.grad.sum().item())
""")
    done = run([sys.executable, "tools/compile_bisect.py", "--repro-dir", str(tmp_path / "out"), str(script)],
               KILN_TEST_SEEDED_BUG=bug)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "inductor                     FAILS" in done.stdout
    assert "aot_eager                    agrees with eager" in done.stdout
    assert subsystem in done.stdout
    repro = tmp_path / "out" / "repro.py"
    assert f"kiln bisect: wrote {repro}" in done.stdout
    assert run_repro(str(repro), bug).returncode == 1
    assert run_repro(str(repro), "").returncode == 0


def test_compile_bisect_tool_help_and_clean_script(tmp_path):
    assert "compile_bisect" in run([sys.executable, "tools/compile_bisect.py", "--help"]).stdout
    script = tmp_path / "ok.py"
    script.write_text(PROGRAM_FILE)
    done = run([sys.executable, "tools/compile_bisect.py", str(script)])
    assert done.returncode == 0 and "every backend agrees with eager" in done.stdout, done.stdout + done.stderr


CRASHING = """
import kiln
def f(x):
    y = x.relu() * 2
    return y.sin() + 1
print(kiln.compile(f)(kiln.randn(3, 4)).shape)
"""


@pytest.mark.parametrize("after,filename", [("dynamo", "repro.py"), ("aot", "repro_aot.py")])
def test_repro_after_writes_a_crashing_compile(tmp_path, after, filename):
    done = run([sys.executable, "-c", CRASHING], KILN_TEST_SEEDED_BUG="lowering_crash", KILN_REPRO_AFTER=after,
               KILN_REPRO_DIR=str(tmp_path))
    assert done.returncode == 0, done.stderr  # the frame still falls back to eager, with its warning
    repro = tmp_path / filename
    assert f"KILN_REPRO_AFTER={after}" in done.stderr and f"wrote a repro: {repro}" in done.stderr
    assert "runs eagerly from now on" in done.stderr and "[3, 4]" in done.stdout
    assert run_repro(str(repro), "lowering_crash").returncode == 1
    assert run_repro(str(repro), "").returncode == 0
    if after == "aot":
        assert "kiln.ops.aten.sin.default" in repro.read_text()


def test_repro_level_4_writes_a_diverging_compile(tmp_path):
    """KILN_REPRO_LEVEL=4 (TORCHDYNAMO_REPRO_LEVEL=4): a graph that runs but differs from eager is
    written, minified to the wrong relu; the program goes on compiled."""
    done = run([sys.executable, "-c", CRASHING], KILN_TEST_SEEDED_BUG="lowering", KILN_REPRO_AFTER="dynamo",
               KILN_REPRO_LEVEL="4", KILN_REPRO_DIR=str(tmp_path))
    assert done.returncode == 0 and "[3, 4]" in done.stdout, done.stderr
    repro = tmp_path / "repro.py"
    assert "backend diverged from eager (output 0 differs" in done.stderr and str(repro) in done.stderr
    assert "runs eagerly" not in done.stderr
    assert ".relu()" in repro.read_text() and ".sin()" not in repro.read_text()
    assert run_repro(str(repro), "lowering").returncode == 1
    assert run_repro(str(repro), "").returncode == 0
    without = run([sys.executable, "-c", CRASHING], KILN_TEST_SEEDED_BUG="lowering", KILN_REPRO_AFTER="dynamo",
                  KILN_REPRO_DIR=str(tmp_path / "crash_only"))
    assert not (tmp_path / "crash_only").exists(), without.stderr  # level 2 (default): crashes only


def test_repro_after_rejects_unknown_level():
    done = run([sys.executable, "-c", CRASHING], KILN_REPRO_AFTER="inductor")
    assert done.returncode != 0 and "KILN_REPRO_AFTER must be 'dynamo' or 'aot'" in done.stderr


def test_minifier_keeps_the_failing_node():
    """minify() on a graph whose failure is `a node calls sin`: the result computes sin alone from
    an input holding its argument's value."""
    from kiln._dynamo.repro.minifier import minify

    def program(x, w):
        a = x * w
        b = a.sin()
        c = b.exp() + a
        return (c.sum(),)

    gm = kiln.fx.symbolic_trace(program)
    inputs = [kiln.randn(3), kiln.randn(3)]

    def calls_sin(candidate, _):
        return any("sin" in str(n.target) for n in candidate.graph.nodes)

    small, small_inputs = minify(gm, inputs, calls_sin)
    ops = [n for n in small.graph.nodes if n.op not in ("placeholder", "output")]
    assert len(ops) == 1 and "sin" in str(ops[0].target)
    assert len(small_inputs) == 1 and kiln.allclose(small_inputs[0], inputs[0] * inputs[1])
