"""KILN_COMPILE_DEBUG=1 (kiln/_inductor/debug.py): the folder is printed once; graph folders are
named by compile ID, function and forward/backward/inference; fx_graph_runnable.py reproduces the
compile (passes, and fails under a seeded lowering bug); output_code.py is Python that runs
alone; dynamo.log holds the graph breaks, guards and recompiles with their compile IDs."""

import ast
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
for name in ("KILN_LOGS", "KILN_TEST_SEEDED_BUG", "KILN_REPRO_AFTER", "KILN_BISECT_BACKEND"):
    ENV.pop(name, None)

PROGRAM = """
import kiln
lin = kiln.nn.Linear(4, 3)
def train_step(x):
    y = lin(x).relu()
    print("a graph break")
    return (y * 2).sin().sum()
step = kiln.compile(train_step)
step(kiln.randn(2, 4)).backward()
with kiln.no_grad():
    step(kiln.randn(5, 4))  # another size: a recompile, inference graphs
print("done")
"""


def run(args, cwd, **env):
    return subprocess.run(args, env=dict(ENV, **env), capture_output=True, text=True, timeout=300, cwd=cwd)


def test_debug_dump(tmp_path):
    done = run([sys.executable, "-c", PROGRAM], tmp_path, KILN_COMPILE_DEBUG="1")
    assert done.returncode == 0, done.stderr
    announced = re.findall(r"kiln: KILN_COMPILE_DEBUG=1: writing the compile's debug files to (\S+)", done.stderr)
    assert len(announced) == 1, done.stderr
    run_dir = announced[0]
    assert os.path.isdir(run_dir) and run_dir.startswith(str(tmp_path / "kiln_compile_debug" / "run_"))
    folders = sorted(d for d in os.listdir(run_dir) if os.path.isdir(os.path.join(run_dir, d)))
    # frame 0 (train_step) compiled twice, frame 1 (the resume function after the break) too
    assert "0_0-train_step-forward" in folders and "0_0-train_step-backward" in folders, folders
    assert any(re.fullmatch(r"\d+_1-train_step-inference", d) for d in folders), folders
    assert any(re.fullmatch(r"1_0-.+-(forward|inference)", d) for d in folders), folders
    for folder in folders:
        path = os.path.join(run_dir, folder)
        assert sorted(os.listdir(path)) == ["fx_graph_readable.py", "fx_graph_runnable.py", "ir_post_fusion.txt",
                                            "ir_pre_fusion.txt", "output_code.py"]
        for script in ("fx_graph_runnable.py", "output_code.py"):
            ast.parse(open(os.path.join(path, script)).read())
    forward = os.path.join(run_dir, "0_0-train_step-forward")
    runnable = run([sys.executable, "fx_graph_runnable.py"], forward)
    assert runnable.returncode == 0 and "inductor agrees with eager" in runnable.stderr, runnable.stderr
    broken = run([sys.executable, "fx_graph_runnable.py"], forward, KILN_TEST_SEEDED_BUG="lowering")
    assert broken.returncode == 1 and "diverges from eager" in broken.stderr, broken.stderr
    output = run([sys.executable, "output_code.py"], forward)
    assert output.returncode == 0, output.stderr
    assert "output 0: (2, 3)" in output.stdout  # the addmm's result, saved for backward
    log = open(os.path.join(run_dir, "dynamo.log")).read()
    assert "[0/0]" in log and "GUARDS" in log and "[0/1]" in log
    assert re.search(r"[Gg]raph break", log), log[:2000]
    assert re.search(r"[Rr]ecompil", log), log[:2000]
    assert "GUARDS" not in done.stderr  # the log goes to the file only, KILN_LOGS being unset


def test_debug_dump_off_writes_nothing(tmp_path):
    done = run([sys.executable, "-c", PROGRAM], tmp_path)
    assert done.returncode == 0, done.stderr
    assert not os.path.exists(tmp_path / "kiln_compile_debug") and "KILN_COMPILE_DEBUG" not in done.stderr
