"""tools/demo.py and tools/demo.sh: --help prints usage and runs nothing, bad options are refused
with argparse's exit code 2 naming what was given, a short run (one model, few epochs) prints its
table and saves it with the PNG plot, --compiled-only trains compiled only, and the plot itself
(tools/demo_plot.py) on made-up numbers, with and without matplotlib."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO = os.path.join(ROOT, "tools", "demo.py")
ENV = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
ENV.pop("KILN_LOGS", None)
OPTIONS = ("--train-only", "--tour-only", "--model {mlp,cnn}", "--compiled-only", "--epochs N", "--out DIR")
HEADER = "model  device      mode  parameters  epochs  seconds  median step ms  speed-up  first step ms  test accuracy"

sys.path.insert(0, os.path.join(ROOT, "tools"))
from demo_plot import plot_training  # noqa: E402


def demo(*args, cwd):
    return subprocess.run([sys.executable, DEMO, *args], env=ENV, cwd=cwd, capture_output=True, text=True,
                          timeout=600)


def test_help_prints_usage_and_runs_nothing(tmp_path):
    out = demo("--help", cwd=tmp_path)
    assert out.returncode == 0 and out.stderr == ""
    assert out.stdout.startswith("usage: tools/demo.py")
    for option in OPTIONS:
        assert option in out.stdout, option
    assert "digits:" not in out.stdout and os.listdir(tmp_path) == []  # nothing trained, nothing written
    code = (f"import runpy, sys\nsys.argv = ['demo.py', '-h']\n"
            f"try:\n    runpy.run_path({DEMO!r}, run_name='__main__')\n"
            f"except SystemExit as e:\n    print('exit', e.code, 'kiln' in sys.modules, 'numpy' in sys.modules)\n")
    probe = subprocess.run([sys.executable, "-c", code], env=ENV, cwd=tmp_path, capture_output=True, text=True)
    assert probe.stdout.splitlines()[-1] == "exit 0 False False"  # usage before kiln is imported


def test_demo_sh_help_needs_no_build(tmp_path):
    out = subprocess.run(["bash", os.path.join(ROOT, "tools", "demo.sh"), "--model", "mlp", "--help"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("usage: tools/demo.py")
    assert "[setup]" not in out.stderr and "bazel" not in out.stderr.lower()


@pytest.mark.parametrize("args, message", [
    (["--model", "rnn"], "argument --model: invalid choice: 'rnn' (choose from 'mlp', 'cnn')"),
    (["--epochs", "0"], "argument --epochs: expected a positive integer, got 0"),
    (["--epochs", "two"], "argument --epochs: expected a positive integer, got 'two'"),
    (["--train-only", "--tour-only"], "argument --tour-only: not allowed with argument --train-only"),
    (["--plot"], "unrecognized arguments: --plot"),
])
def test_bad_options_are_refused(tmp_path, args, message):
    out = demo(*args, cwd=tmp_path)
    assert out.returncode == 2 and message in out.stderr and os.listdir(tmp_path) == []


def _table(stdout):
    lines = stdout.splitlines()
    start = lines.index(HEADER)
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith(("MLP", "CNN")))
    return lines[start:end]


def test_short_run_saves_its_table_and_plot(tmp_path):
    out = demo("--train-only", "--model", "mlp", "--epochs", "2", "--out", "results", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    table = _table(out.stdout)
    assert [row.split()[:3] for row in table[1:]] == [["MLP", "cpu", "eager"], ["MLP", "cpu", "compiled"]]
    assert all(row.split()[4] == "2" for row in table[1:])  # epochs
    eager_acc, compiled_acc = (row.split()[-1] for row in table[1:])
    assert eager_acc == compiled_acc and float(eager_acc.rstrip("%")) > 50
    saved = (tmp_path / "results" / "digits.txt").read_text().splitlines()
    assert saved == table
    png = (tmp_path / "results" / "digits.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000
    assert "table: results/digits.txt" in out.stdout and "plot: results/digits.png" in out.stdout
    assert "kiln.arange" not in out.stdout  # --train-only: no tour


def test_compiled_only_trains_one_compiled_model(tmp_path):
    out = demo("--train-only", "--compiled-only", "--model", "cnn", "--epochs", "1", "--out", "o", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    [row] = _table(out.stdout)[1:]
    assert row.split()[:3] == ["CNN", "cpu", "compiled"] and row.split()[7] == "-"  # no eager: no speed-up
    assert (tmp_path / "o" / "digits.png").stat().st_size > 0


def _fake_histories():
    histories = []
    for model, epochs in (("MLP", 4), ("CNN", 3)):
        for mode, shift in (("eager", 0.0), ("compiled", 0.01)):
            histories.append(dict(model=model, mode=mode, label=mode,
                                  loss=[2.0 / (e + 1) + shift for e in range(epochs)],
                                  accuracy=[0.5 + 0.1 * e - shift for e in range(epochs)]))
    return histories


def test_plot_on_made_up_numbers(tmp_path):
    pytest.importorskip("matplotlib")
    path = str(tmp_path / "curves.png")
    assert plot_training(_fake_histories(), path) == path
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(path) > 10_000


def test_plot_is_skipped_with_one_line_without_matplotlib(tmp_path, monkeypatch, capsys):
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.ticker"):
        monkeypatch.setitem(sys.modules, name, None)  # `import matplotlib...` raises ImportError
    path = tmp_path / "curves.png"
    assert plot_training(_fake_histories(), str(path)) is None
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 1 and printed[0].startswith("plot: skipped (") and "pip install matplotlib" in printed[0]
    assert not path.exists()
