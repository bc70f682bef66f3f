"""KILN_TRACE's events (kiln/_logging/_structured.py) and tools/compile_report.py's page, rendered in
headless Chromium for a GPT-style training step with graph breaks and recompiles."""

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
for name in ("KILN_LOGS", "KILN_TRACE"):
    ENV.pop(name, None)
REPORT = os.path.join(ROOT, "tools", "compile_report.py")
PHASES = {"dynamo", "aot", "inductor lowering", "LLVM codegen"}

# nanoGPT (tests/models/gpt.py) trained by a compiled step: loss.backward() and loss.item() are graph
# breaks; the third call's longer sequence recompiles the step with a symbolic length.
GPT_PROGRAM = """
import sys
sys.path.insert(0, {models!r})
import kiln
import gpt

kiln.manual_seed(0)
model = gpt.build(kiln)
opt = model.configure_optimizers(0.1, 1e-3, (0.9, 0.95))


@kiln.compile
def train_step(idx, targets):
    logits, loss = model(idx, targets)
    loss.backward()
    if loss.item() > 100.0:  # diverged?
        print("diverged")
    return loss


for T in (8, 8, 12):
    idx = kiln.randint(0, gpt.VOCAB, (gpt.BATCH, T))
    loss = train_step(idx, idx.roll(-1, 1))
    opt.step()
    opt.zero_grad()
print("loss", float(loss))
"""


def run_program(tmp_path, code, **env):
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(code))
    return subprocess.run([sys.executable, str(script)], env=dict(ENV, **env), capture_output=True, text=True,
                          timeout=300, cwd=tmp_path), str(script)


def read_events(directory):
    files = glob.glob(os.path.join(directory, "kiln_trace_*.jsonl"))
    assert len(files) == 1, files
    with open(files[0]) as f:
        return [json.loads(line) for line in f]


@pytest.fixture(scope="module")
def gpt_trace(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gpt")
    out, script = run_program(tmp, GPT_PROGRAM.format(models=os.path.join(ROOT, "tests", "models")),
                              KILN_TRACE=str(tmp / "trace"))
    assert out.returncode == 0 and "loss" in out.stdout, out.stderr
    return tmp / "trace", script


def test_trace_events_name_compiles_and_user_lines(gpt_trace):
    trace, script = gpt_trace
    events = read_events(trace)
    kinds = {e["event"] for e in events}
    assert {"compile_start", "compile_end", "graph_break", "recompile", "guards", "dynamo_graph", "aot_joint_graph",
            "aot_forward_graph", "aot_backward_graph", "inductor_output_code", "compile_phase"} <= kinds
    by_id = {}
    for e in events:
        by_id.setdefault(e["compile_id"], []).append(e["event"])
    # the first compile of frame 0 holds its graph, its AOT graphs, its kernels and its guards
    assert {"compile_start", "dynamo_graph", "aot_forward_graph", "aot_backward_graph", "inductor_output_code",
            "guards", "compile_end"} <= set(by_id["0/0"])
    start = next(e for e in events if e["event"] == "compile_start" and e["compile_id"] == "0/0")
    assert (start["function"], start["file"], start["frame_id"], start["frame_compile_id"]) == \
        ("train_step", script, 0, 0)
    assert start["user_stack"][-1]["code"] == "loss = train_step(idx, idx.roll(-1, 1))"
    breaks = [e for e in events if e["event"] == "graph_break"]
    lines = {(b["reason"], b["file"], b["code"]) for b in breaks}
    assert ("Tensor.backward()", script, "loss.backward()") in lines
    assert ("Tensor.item() reads a tensor's data into Python", script, "if loss.item() > 100.0:  # diverged?") in lines
    assert all(b["hint"] for b in breaks)
    recompile = next(e for e in events if e["event"] == "recompile" and e["compile_id"] == "0/1")
    assert recompile["reason"] == "idx: size mismatch at index 1: expected 8, actual 12"
    assert "TENSOR_MATCH" in recompile["reasons"][0] and recompile["limit_hit"] is False
    outputs = [e for e in events if e["event"] == "inductor_output_code" and e["compile_id"] == "0/0"]
    assert sorted(o["is_backward"] for o in outputs) == [False, True]
    kernels = [k for o in outputs for k in o["kernels"]]
    assert kernels and all(k["name"].startswith("cpp_fused_") and k["source"] for k in kernels)
    assert all(k["name"] in o["payload"] for o in outputs for k in o["kernels"])  # the output code calls them
    guards = next(e for e in events if e["event"] == "guards" and e["compile_id"] == "0/0")
    assert "TENSOR_MATCH" in guards["payload"]
    phases = {e["phase"] for e in events if e["event"] == "compile_phase"}
    assert phases == PHASES
    assert all(e["compile_id"] is not None for e in events)  # every event belongs to a compile


def test_an_unwritable_trace_is_switched_off_and_the_program_runs(tmp_path):
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("")
    out, _ = run_program(tmp_path, """
        import kiln
        f = kiln.compile(lambda x: x.sin() + 1)
        print(f(kiln.zeros(3)).tolist())
        print(f(kiln.zeros(3)).tolist())
        """, KILN_TRACE=str(blocker / "trace"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["[1.0, 1.0, 1.0]"] * 2
    assert out.stderr.count("KILN_TRACE: cannot write under") == 1


def test_trace_and_report_say_why_a_frame_runs_eagerly(tmp_path):
    out, script = run_program(tmp_path, """
        import warnings
        import kiln
        from kiln._dynamo.backends.common import aot_autograd

        def failing(gm, example_inputs):
            raise ZeroDivisionError("seeded: the backend fails at compile time")

        def failing_late(gm, example_inputs):
            raise ZeroDivisionError("seeded: the forward compiler fails at the first call")

        def no_tensor_ops(n):
            return n * 2

        def f(x):
            return x.sin() + 1

        def g(x):
            return x.cos() * 2

        warnings.simplefilter("ignore")
        print(kiln.compile(no_tensor_ops)(3))
        print(kiln.compile(f, backend=failing)(kiln.zeros(2)).tolist())
        print(kiln.compile(g, backend=aot_autograd(fw_compiler=failing_late))(kiln.zeros(2)).tolist())
        """, KILN_TRACE=str(tmp_path / "trace"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:3] == ["6", "[1.0, 1.0]", "[2.0, 2.0]"]  # each ran eagerly, as eager does
    events = read_events(tmp_path / "trace")
    ends = {e["function"]: e for e in events if e["event"] == "compile_end"}
    assert (ends["no_tensor_ops"]["status"], ends["no_tensor_ops"]["reason"]) == ("eager", "no tensor ops")
    assert ends["f"]["status"] == "eager"
    assert ends["f"]["reason"] == "kiln's compiler failed: ZeroDivisionError: seeded: the backend fails at compile time"
    assert ends["g"]["status"] == "compiled"  # AOT compiles at the first call, after Dynamo's compile ended
    late = [e for e in events if e["event"] == "internal_error"]
    assert [(e["compile_id"], e["error"]) for e in late] == \
        [(ends["g"]["compile_id"], "ZeroDivisionError: seeded: the forward compiler fails at the first call")]
    report = subprocess.run([sys.executable, REPORT, str(tmp_path / "trace")], capture_output=True, text=True)
    assert report.returncode == 0, report.stderr
    page = (tmp_path / "trace" / "index.html").read_text()
    assert "runs eagerly: no tensor ops" in page
    assert "runs eagerly: kiln&#x27;s compiler failed: ZeroDivisionError: seeded: the backend fails" in page
    assert "kiln's compiler failed at the graph's first call, so it runs eagerly: ZeroDivisionError" in page


def test_report_of_an_empty_directory_says_what_to_do(tmp_path):
    out = subprocess.run([sys.executable, REPORT, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == str(tmp_path / "index.html")
    assert "run the program with KILN_TRACE set to this directory" in (tmp_path / "index.html").read_text()
    missing = subprocess.run([sys.executable, REPORT, str(tmp_path / "nowhere")], capture_output=True, text=True)
    assert missing.returncode == 2 and "is not a directory" in missing.stderr


def _chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(_chromium() is None, reason="headless Chromium renders the page: Debian's `chromium` package "
                                                "is not installed (tools/setup.sh installs it)")
def test_report_renders_in_headless_chromium(gpt_trace, tmp_path):
    trace, script = gpt_trace
    page = tmp_path / "report.html"
    out = subprocess.run([sys.executable, REPORT, str(trace), "-o", str(page)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    source = page.read_text()
    # self-contained: nothing is loaded from anywhere else
    assert not re.search(r"<script|<link|<img|<iframe|@import|url\(|https?://", source)
    chromium = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run(chromium + ["--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", dom.stdout)).replace("&gt;", ">").replace("&#x27;", "'")
    assert "<title>kiln compile report</title>" in dom.stdout
    # the summary: 3 frames (the step and the code after each break), their compiles, breaks, recompiles
    summary = re.search(r"frames compiles graph breaks recompiles graphs kernels (\d+) (\d+) (\d+) (\d+) (\d+) (\d+)", text)
    assert summary is not None, text[:2000]
    frames, compiles, breaks, recompiles, graphs, kernels = map(int, summary.groups())
    assert frames == 3 and breaks >= 3 and recompiles >= 1 and compiles == frames + recompiles and kernels > 20
    assert "Frame 0: train_step" in text and "Frame 1: train_step (resumed after a graph break)" in text
    # breaks with the user's source line and the hint
    assert "Graph break: Tensor.backward()" in text and "loss.backward()" in text
    assert f"{script}:15 in train_step" in text and "hint: call it outside the compiled function" in text
    assert "if loss.item() > 100.0: # diverged?" in text
    # a recompile with its reason, its guards, graphs, kernels and the time per phase
    assert "Recompile of train_step: idx: size mismatch at index 1: expected 8, actual 12" in text
    for section in ("Guards", "Dynamo graph", "Joint graph", "Forward graph", "Backward graph",
                    "Inductor (forward/inference):", "Inductor (backward):", "cpp_fused_", "output code",
                    "Compile time by phase", "dynamo (s)", "aot (s)", "inductor lowering (s)", "LLVM codegen (s)"):
        assert section in text, section
    shot = tmp_path / "report.png"
    subprocess.run(chromium + ["--hide-scrollbars", "--window-size=1280,2000", f"--screenshot={shot}", page.as_uri()],
                   capture_output=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 20000  # a page with content, not a blank one
