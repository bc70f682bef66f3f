"""Costly graph breaks warn by default (no KILN_LOGS), once per line, as PyTorch warns about
Tensor.item() and C functions it cannot trace (break_warnings.py); other breaks stay silent."""

import os
import subprocess
import sys
import time
import warnings

import kiln
import kiln._dynamo as dynamo
from dynamo_util import fresh_dynamo  # noqa: F401 (fresh_dynamo is autouse)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def item_break(x):
    y = x * 2
    s = y.sum().item()
    return y + s


def c_function_break(x):
    y = x + 1
    time.perf_counter()
    return y * 2


def quiet_break(x):
    y = x + 1
    print(end="")  # a break, but one users write on purpose: no warning
    return y * 2


def compiled_warnings(fn, calls):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = kiln.compile(fn, backend="eager")
        for x in calls:
            compiled(x)
    return [w for w in caught if "kiln.compile: graph break" in str(w.message)]


def test_item_warns_once_at_the_user_line():
    caught = compiled_warnings(item_break, [kiln.ones(3), kiln.ones(4), kiln.ones(3, dtype=kiln.float64)])
    assert len(caught) == 1  # three compiles of the same line: one warning
    w = caught[0]
    assert w.category is UserWarning
    assert (w.filename, w.lineno) == (__file__, item_break.__code__.co_firstlineno + 2)
    assert "Tensor.item()" in str(w.message) and "capture_scalar_outputs = True" in str(w.message)


def test_unknown_c_function_warns_once():
    caught = compiled_warnings(c_function_break, [kiln.ones(2), kiln.ones(2)])
    assert len(caught) == 1
    assert "`time.perf_counter`" in str(caught[0].message)
    assert caught[0].lineno == c_function_break.__code__.co_firstlineno + 2


def test_other_breaks_do_not_warn():
    assert compiled_warnings(quiet_break, [kiln.ones(2)]) == []


def test_reset_warns_again():
    assert len(compiled_warnings(item_break, [kiln.ones(2)])) == 1
    dynamo.reset()
    assert len(compiled_warnings(item_break, [kiln.ones(2)])) == 1


def test_warning_shows_without_any_logging_setting():
    code = ("import kiln\n"
            "def f(x):\n"
            "    return x * x.sum().item()\n"
            "cf = kiln.compile(f)\n"
            "for n in range(3):\n"
            "    cf(kiln.ones(n + 1))\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    env.pop("KILN_LOGS", None)
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("UserWarning: kiln.compile: graph break in f") == 1, result.stderr


def test_builtin_methods_and_kiln_internals_do_not_warn():
    from kiln._dynamo.variables.builtin import _c_function_name, _is_python_builtin
    from kiln import _C

    assert _is_python_builtin([].append) and _is_python_builtin(len)
    assert not _is_python_builtin(time.perf_counter)
    assert _c_function_name(time.perf_counter) == "time.perf_counter"
    assert _c_function_name(_C._set_autocast_state) == "kiln._C._set_autocast_state"


def exp_sum(x):
    y = kiln.linalg.matrix_exp(x)  # kiln's matrix_exp reads a norm with .item() inside
    return y.sum()


def test_warning_for_a_break_inside_a_library_names_the_user_line_and_the_callee():
    caught = compiled_warnings(exp_sum, [kiln.randn(3, 3)])
    assert len(caught) == 1
    assert (caught[0].filename, caught[0].lineno) == (__file__, exp_sum.__code__.co_firstlineno + 1)
    assert "(inside matrix_exp (" in str(caught[0].message)
