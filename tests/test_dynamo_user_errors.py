"""Errors a compile raises show the user's call chain with its source text, without kiln's frames
or a chained internal exception (user_errors.py), unless kiln._dynamo.config.verbose or
KILN_LOGS=+dynamo asks for them."""

import os
import subprocess
import sys

import pytest

import kiln
import kiln._dynamo as dynamo
from kiln._dynamo import config
from dynamo_util import fresh_dynamo  # noqa: F401 (fresh_dynamo is autouse)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
ENV.pop("KILN_LOGS", None)
KILN_DIR = os.path.join(ROOT, "python", "kiln")

PROGRAM = '''import kiln
def helper(x):
    return x.sum().item()
def f(x):
    y = x * 2
    return helper(y) + 1
kiln.compile(f, fullgraph=True)(kiln.randn(3))
'''


def run_program(tmp_path, program=PROGRAM, **env):
    path = tmp_path / "prog.py"
    path.write_text(program)
    result = subprocess.run([sys.executable, str(path)], env=dict(ENV, **env), capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 1
    return str(path), result.stderr


def kiln_frames(stderr):
    return [line for line in stderr.splitlines() if line.strip().startswith(f'File "{KILN_DIR}')]


def test_fullgraph_break_shows_the_user_chain_and_hides_kiln(tmp_path):
    path, err = run_program(tmp_path)
    assert len(kiln_frames(err)) == 1, err  # the hook's entry, which raises it
    assert "During handling of the above exception" not in err and "direct cause" not in err
    assert "kiln._dynamo.exc.Unsupported: Tensor.item() reads a tensor's data into Python" in err
    chain = err[err.index("User code (most recent call last):"):]
    assert (f'  File "{path}", line 6, in f\n    return helper(y) + 1\n'
            f'  File "{path}", line 3, in helper\n    return x.sum().item()\n') in chain
    assert "KILN_LOGS=+dynamo or kiln._dynamo.config.verbose = True" in chain


def test_plus_dynamo_keeps_kiln_frames(tmp_path):
    _, err = run_program(tmp_path, KILN_LOGS="+dynamo")
    assert len(kiln_frames(err)) > 5
    assert "User code (most recent call last)" not in err


def test_config_verbose_keeps_kiln_frames(monkeypatch):
    def f(x):
        return x.sum().item()

    monkeypatch.setattr(config, "verbose", True)
    with pytest.raises(dynamo.exc.Unsupported) as info:
        kiln.compile(f, backend="eager", fullgraph=True)(kiln.ones(2))
    files = {str(entry.path) for entry in info.traceback}
    assert any(name.startswith(KILN_DIR) and "symbolic_convert" in name for name in files)
    assert not getattr(info.value, "__notes__", None)


def test_fullgraph_internal_error_keeps_its_type_and_names_the_user_line(monkeypatch):
    # an internal error in kiln's compiler (a bug), raised because fullgraph=True asks for errors
    from kiln._dynamo.variables import tensor as tensor_vars

    def broken(self, tx, name, args, kwargs):
        raise AssertionError("a bug in kiln")

    monkeypatch.setattr(tensor_vars.TensorVariable, "call_method", broken)

    def f(x):
        y = x + 1
        return y.cos()

    with pytest.raises(AssertionError, match="a bug in kiln") as info:
        kiln.compile(f, backend="eager", fullgraph=True)(kiln.ones(2))
    error = info.value
    assert error.__cause__ is None and error.__suppress_context__
    assert [e.name for e in info.traceback] == ["test_fullgraph_internal_error_keeps_its_type_and_names_the_user_line",
                                                "__call__"]
    note = "\n".join(error.__notes__)
    assert f'line {f.__code__.co_firstlineno + 2}, in f\n    return y.cos()' in note


def test_user_errors_in_eager_fallback_are_unchanged():
    # not a compile error: a user's IndexError still comes from running the code as eager does
    def f(a, i):
        return a.index_select(0, i) * 2

    with pytest.raises(IndexError) as eager:
        f(kiln.ones(3), kiln.tensor([5]))
    with pytest.raises(IndexError) as compiled:
        kiln.compile(f, backend="eager")(kiln.ones(3), kiln.tensor([5]))
    assert str(compiled.value) == str(eager.value)
