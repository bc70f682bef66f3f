"""The recompile limit: config.recompile_limit and its old name cache_size_limit as one setting (as
PyTorch's), and the warning when a frame hits it: the short reason first, the fix that applies,
attributed to the user's line that made the call; the fix it names works."""

import os
import subprocess
import sys
import warnings

import pytest

import kiln
import kiln._dynamo as dynamo
from kiln._dynamo.testing import CompileCounter
from conftest import requires_torch


@pytest.fixture(autouse=True)
def _fresh():
    dynamo.reset()
    yield
    dynamo.reset()


@pytest.fixture
def limit_two(monkeypatch):
    monkeypatch.setattr(dynamo.config, "recompile_limit", 2)


def _call_line():
    return sys._getframe(1).f_lineno + 1  # the line after the caller's


# --- the setting ------------------------------------------------------------------------------------
@requires_torch
def test_defaults_and_alias_like_torch():
    import torch._dynamo.config as torch_config

    assert dynamo.config.recompile_limit == torch_config.recompile_limit == 8
    assert dynamo.config.cache_size_limit == torch_config.cache_size_limit == 8
    try:
        for config in (dynamo.config, torch_config):
            config.cache_size_limit = 3
            assert config.recompile_limit == 3
            config.recompile_limit = 5
            assert config.cache_size_limit == 5
    finally:
        dynamo.config.recompile_limit = torch_config.recompile_limit = 8
    assert "cache_size_limit" in dir(dynamo.config)


def test_alias_under_monkeypatch_and_bad_values(monkeypatch):
    monkeypatch.setattr(dynamo.config, "cache_size_limit", 4)
    assert dynamo.config.recompile_limit == 4
    monkeypatch.undo()
    assert dynamo.config.recompile_limit == dynamo.config.cache_size_limit == 8
    with pytest.raises(TypeError, match=r"recompile_limit must be an int, got str \('8'\)"):
        dynamo.config.cache_size_limit = "8"
    with pytest.raises(TypeError, match="recompile_limit must be an int, got bool"):
        dynamo.config.recompile_limit = True
    with pytest.raises(ValueError, match="recompile_limit must be >= 0, got -1"):
        dynamo.config.recompile_limit = -1
    with pytest.raises(AttributeError, match="alias of recompile_limit"):
        del dynamo.config.cache_size_limit
    assert dynamo.config.recompile_limit == 8


# --- the warning ------------------------------------------------------------------------------------
def test_limit_counts_the_setting_under_either_name(monkeypatch):
    monkeypatch.setattr(dynamo.config, "cache_size_limit", 3)
    cnt = CompileCounter()
    cf = kiln.compile(lambda x, n: x * n, backend=cnt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in range(6):
            assert cf(kiln.ones(2), n).tolist() == [float(n)] * 2
    assert cnt.frame_count == 3


def test_warning_gives_reason_then_fix_at_the_users_line(limit_two):
    cnt = CompileCounter()

    def g(x):
        return x * 2

    cg = kiln.compile(g, backend=cnt, dynamic=False)
    cg(kiln.ones(1))
    cg(kiln.ones(2))
    with pytest.warns(UserWarning) as record:
        line = _call_line()
        out = cg(kiln.ones(3))
    assert out.tolist() == [2.0, 2.0, 2.0] and cnt.frame_count == 2  # eager from now on
    [w] = record
    assert w.filename == __file__ and w.lineno == line  # the user's call, not kiln's convert_frame.py
    text = str(w.message)
    first, fix = text.splitlines()[:2]
    assert first.startswith(f"kiln._dynamo hit config.recompile_limit (2) for g ({__file__}:")
    assert "x: size mismatch at index 0: expected 2, actual 3" in first and first.endswith("g runs eagerly from now on.")
    assert fix.startswith("To keep it compiled: the sizes of x (dim 0) changed between calls")
    assert "dynamic=True" in fix and "raise kiln._dynamo.config.recompile_limit (now 2)" in fix
    assert 'KILN_LOGS="recompiles"' in text
    with warnings.catch_warnings():  # once per function
        warnings.simplefilter("error")
        assert cg(kiln.ones(4)).tolist() == [2.0] * 4


def test_the_mark_dynamic_it_names_keeps_the_function_compiled(limit_two, monkeypatch):
    monkeypatch.setattr(dynamo.config, "automatic_dynamic_shapes", False)
    cnt = CompileCounter()

    def h(x, scale):
        return x.sum(0) * scale

    ch = kiln.compile(h, backend=cnt)
    ch(kiln.ones(1, 3), 2.0)
    ch(kiln.ones(2, 3), 2.0)
    with pytest.warns(UserWarning, match=r"x: size mismatch at index 0: expected 2, actual 3") as record:
        ch(kiln.ones(3, 3), 2.0)
    fix = str(record[0].message).splitlines()[1]
    assert fix.startswith("To keep it compiled: kiln._dynamo.mark_dynamic(x, 0) before the call, "
                          "or kiln.compile(..., dynamic=True), or raise kiln._dynamo.config.recompile_limit")

    dynamo.reset()  # following the advice: one compile serves every size
    cnt = CompileCounter()
    ch = kiln.compile(h, backend=cnt)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in range(2, 7):  # (a size of 1 is specialised, as in PyTorch)
            x = kiln.ones(n, 3)
            dynamo.mark_dynamic(x, 0)
            assert ch(x, 2.0).tolist() == [2.0 * n] * 3
    assert cnt.frame_count == 1


def test_other_reasons_get_the_general_fix(limit_two):
    cf = kiln.compile(lambda x: x + 1, backend="eager")
    cf(kiln.ones(2))
    cf(kiln.ones(2, dtype=kiln.float64))
    with pytest.warns(UserWarning) as record:
        line = _call_line()
        cf(kiln.ones(2, dtype=kiln.int64))
    [w] = record
    assert w.filename == __file__ and w.lineno == line
    first, fix = str(w.message).splitlines()[:2]
    assert "<lambda>" in first and "x: dtype is int64" in first
    assert ("if tensor sizes change between calls, kiln._dynamo.mark_dynamic(tensor, dim) before the call or "
            "kiln.compile(..., dynamic=True); if the recompiles are expected, raise "
            "kiln._dynamo.config.recompile_limit (now 2)") in fix


def test_module_forward_is_attributed_to_the_caller_of_the_module(limit_two):
    lin = kiln.nn.Linear(3, 2)
    cm = kiln.compile(lin, backend="eager", dynamic=False)

    def step(batch):
        return cm(kiln.ones(batch, 3))

    step(1)
    step(2)
    with pytest.warns(UserWarning, match="input: size mismatch at index 0") as record:
        step(3)
    [w] = record
    assert w.filename == __file__ and w.lineno == step.__code__.co_firstlineno + 1  # inside step()
    assert "the sizes of input (dim 0) changed" in str(w.message)


def test_warning_filters_see_the_users_module(limit_two):
    cf = kiln.compile(lambda x: x - 1, backend="eager", dynamic=False)
    cf(kiln.ones(1))
    cf(kiln.ones(2))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=UserWarning, module=__name__)
        assert cf(kiln.ones(3)).tolist() == [0.0] * 3
    assert [w for w in record if "recompile_limit" in str(w.message)] == []


def test_warning_in_a_python_c_program():
    # `python -c`'s __main__ has a loader that cannot give source lines: the warning still prints
    code = ("import kiln\n"
            "kiln._dynamo.config.recompile_limit = 1\n"
            "f = kiln.compile(lambda x: x * 2, backend='eager', dynamic=False)\n"
            "for n in (1, 2, 3):\n"
            "    assert f(kiln.ones(n)).tolist() == [2.0] * n\n"
            "print('done')\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                                   "python"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "done\n"
    assert out.stderr.startswith("<string>:5: UserWarning: kiln._dynamo hit config.recompile_limit (1) for <lambda>")
