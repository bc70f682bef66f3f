"""Source provenance and compile IDs in what KILN_LOGS prints: each printed graph (Dynamo's, AOT's
joint/forward/backward) and Inductor's output code (kernels and wrapper calls) names the user's
line as `# File "model.py", line N, in forward: <source>`; every line of a compile (graph breaks,
guards, recompiles, graphs, AOT graphs, output code, Inductor's summary) carries its
`[frame/recompile]` id, the backward compiled lazily at the first backward too."""

import os
import re
import subprocess
import sys

import kiln
from kiln.fx.traceback import format_stack, parse_stack, provenance_comment, user_frame

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
ENV.pop("KILN_LOGS", None)

# line numbers matter: the tests look for them
MODEL = '''import kiln
class M(kiln.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = kiln.nn.Linear(4, 3)
    def forward(self, x):
        x = self.fc(x)
        y = x.relu() * 2
        return y.sum()
m = M()
f = kiln.compile(m)
loss = f(kiln.randn(2, 4))
loss.backward()
def g(x, w):
    a = x @ w
    b = a.relu()
    return a, b
cg = kiln.compile(g)
a, b = cg(kiln.randn(3, 4), kiln.randn(4, 5, requires_grad=True))
b.sum().backward()
def h(x):
    y = x.cos()
    print("break")
    return y + 1
ch = kiln.compile(h)
ch(kiln.randn(3))
ch(kiln.randn(3, dtype=kiln.float64))
print("done")
'''


def run_model(tmp_path, logs):
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    result = subprocess.run([sys.executable, str(path)], env=dict(ENV, KILN_LOGS=logs), capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "done" in result.stdout
    return str(path), result.stderr


def comment(path, line, text):
    return f'# File "{path}", line {line}, in forward: {text}'


def section(stderr, title):
    """The text of the first log record whose first line contains `title`."""
    start = stderr.index(title)
    end = stderr.find("\n[kiln]", start)
    return stderr[start:end if end >= 0 else len(stderr)]


def test_dynamo_graph_names_each_user_line(tmp_path):
    path, err = run_model(tmp_path, "graph_code")
    graph = section(err, "TRACED GRAPH forward")
    lines = graph.splitlines()
    for line, text, op in [(7, "x = self.fc(x)", "linear = "), (8, "y = x.relu() * 2", "relu = "),
                           (9, "return y.sum()", "sum_1 = ")]:
        at = lines.index("        " + comment(path, line, text))
        assert lines[at + 1].strip().startswith(op), graph


def test_aot_graphs_carry_provenance_to_aten_nodes(tmp_path):
    path, err = run_model(tmp_path, "aot_graphs")
    forward = section(err, "Forward graph:")
    lines = [line.strip() for line in forward.splitlines()]
    # linear became t + addmm: both under the user's line of self.fc
    at = lines.index(comment(path, 7, "x = self.fc(x)"))
    assert lines[at + 1].startswith("t: ") and lines[at + 2].startswith("addmm: "), forward
    assert comment(path, 8, "y = x.relu() * 2") in lines
    # the backward's own ops come from autograd, not a user line: said, not inherited silently
    backward = section(err, "Backward graph:")
    assert "# No stacktrace found for following nodes" in backward


def test_inductor_kernels_and_wrapper_name_user_lines(tmp_path):
    path, err = run_model(tmp_path, "output_code")
    code = section(err, "Output code")
    kernel = code[code.index("# kernel cpp_fused_mul_relu_sum_0"):code.index("# wrapper")]
    # the fused kernel computes lines 8 and 9, listed in program order
    assert kernel.index(comment(path, 8, "y = x.relu() * 2")) < kernel.index(comment(path, 9, "return y.sum()"))
    wrapper = code[code.index("def call(args):"):].splitlines()
    extern = next(i for i, line in enumerate(wrapper) if "extern_addmm_default(" in line)
    assert wrapper[extern - 1].strip() == comment(path, 7, "x = self.fc(x)")
    launch = next(i for i, line in enumerate(wrapper) if line.strip().startswith("cpp_fused_mul_relu_sum_0("))
    assert wrapper[launch - 2:launch] == ["    " + comment(path, 8, "y = x.relu() * 2"),
                                          "    " + comment(path, 9, "return y.sum()")]


def test_every_line_of_a_compile_names_its_compile_id(tmp_path):
    _, err = run_model(tmp_path, "+dynamo,+aot,+inductor,graph_breaks,guards,recompiles,graph_code,aot_graphs,"
                                 "output_code")
    records = [line for line in err.splitlines() if line.startswith("[kiln]")]
    kinds = {}
    for record in records:
        m = re.match(r"\[kiln\] \[(\w+)\] (\[\d+/\d+\] )?", record)
        assert m, record
        kinds.setdefault(m.group(1), []).append(m.group(2))
    for kind in ("graph_breaks", "guards", "recompiles", "graph_code", "aot_graphs", "output_code", "inductor"):
        assert kind in kinds, sorted(kinds)
        assert all(kinds[kind]), f"a {kind} line without a compile id"
    assert "[2/1] Recompiling function h" in err  # h is frame 2 (after forward and g); its second compile
    # g's backward for a call where a's gradient is absent is compiled at the first backward,
    # after g's compile ended: it still names g's compile
    assert re.search(r"\[kiln\] \[aot_graphs\] \[1/0\] Backward graph without tangents", err), err


def test_stack_trace_text_round_trips():
    frames = [(__file__, 1, "outer"), (os.path.join(os.path.dirname(kiln.__file__), "nn", "x.py"), 3, "forward")]
    text = format_stack(frames)
    assert parse_stack(text) == frames
    assert user_frame(text) == frames[0]  # kiln's own frame is skipped for the user's line
    assert provenance_comment(text).startswith(f'# File "{__file__}", line 1, in outer: ')
    assert provenance_comment(None) is None


def test_guards_name_the_user_line_not_kiln_modules(tmp_path):
    path, err = run_model(tmp_path, "guards")
    guards = section(err, "GUARDS:")
    origins = re.findall(r"\(from (.*?):(\d+) in (\w+)\)", guards)
    assert origins, guards
    # parameters are read inside nn.Linear.forward: named by the user's `x = self.fc(x)` line
    assert set(origins) <= {(path, "7", "forward")}, guards
