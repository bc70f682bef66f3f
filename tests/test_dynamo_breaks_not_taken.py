"""Breaks PyTorch does not take, which kiln took: assigning a global, changing a list from outside in
place (`seen.append(y)` on a list captured from an enclosing function, or an argument), and id() of
an argument or a module. The first two are replayed after the graph (side_effects.py), id() is a
guarded constant. Oracle: the same program eagerly, and torch._dynamo.explain's break count. A
break inside a library function (copy.deepcopy) names the user's line that called it."""

import copy

import pytest

import kiln
import kiln._dynamo as dynamo
from kiln._dynamo.testing import CompileCounter
from conftest import requires_torch
from dynamo_util import close, fresh_dynamo  # noqa: F401 (fresh_dynamo is autouse)

steps = 0
last_total = None


def count_steps(x):
    global steps, last_total
    y = x * 2
    steps = steps + 1
    last_total = y.sum()
    return y + last_total


def test_global_store_is_replayed_after_the_graph():
    global steps
    steps = 0
    x = kiln.randn(3)
    explained = dynamo.explain(count_steps)(x)
    assert explained.graph_break_count == 0 and explained.graph_count == 1
    steps = 0
    counter = CompileCounter()
    out = kiln.compile(count_steps, backend=counter)(x)
    assert steps == 1 and counter.frame_count == 1
    close(last_total, (x * 2).sum())
    close(out, x * 2 + (x * 2).sum())


def _read_steps():
    return steps


def read_after_store(x):
    global steps
    steps = 41
    return x + _read_steps()  # an inlined function of this module reads the new value


def test_a_stored_global_reads_back_within_the_trace():
    global steps
    counter = CompileCounter()
    out = kiln.compile(read_after_store, backend=counter)(kiln.zeros(2))
    assert steps == 41 and counter.frame_count == 1
    close(out, kiln.full((2,), 41.0))


def test_assigning_a_global_of_another_module_breaks_once(monkeypatch, capsys):
    import dynamo_util

    monkeypatch.setattr(dynamo_util, "LAST", None, raising=False)
    # a function defined in another module that assigns that module's global
    namespace = {"__name__": "dynamo_util_twin"}
    exec("def store(v):\n    global LAST\n    LAST = v\n", namespace)
    store = namespace["store"]

    def f(x):
        y = x + 1
        store(y)
        return y * 2

    explained = dynamo.explain(f)(kiln.ones(2))
    assert explained.graph_break_count == 1, explained
    assert "assigning the global 'LAST' of another module" in explained.break_reasons[0].reason
    close(namespace["LAST"], kiln.full((2,), 2.0))
    dynamo.reset()
    kiln._logging.set_logs(graph_breaks=True)
    try:
        kiln.compile(f, backend="eager")(kiln.ones(2))
    finally:
        kiln._logging.set_logs()
    assert capsys.readouterr().err.count("Graph break:") == 1  # logged once, as it is counted once


def make_recorder():
    seen = []

    def record(x):
        y = x.sin()
        seen.append(y)
        seen.append(3)
        return y * 2

    return record, seen


def test_append_to_a_captured_list_is_replayed():
    record, seen = make_recorder()
    x = kiln.randn(4)
    explained = dynamo.explain(record)(x)
    assert explained.graph_break_count == 0, explained
    record, seen = make_recorder()
    out = kiln.compile(record, backend="inductor")(x)
    assert len(seen) == 2 and seen[1] == 3
    close(seen[0], x.sin())
    close(out, x.sin() * 2)


def extend_argument(x, out):
    out.extend([x + 1, x * 2])
    out[0] = out[0] - 1
    return x.cos()


def test_list_argument_changed_in_place_matches_eager():
    x = kiln.randn(3)
    eager, compiled = [], []
    expected = extend_argument(x, eager)
    counter = CompileCounter()
    got = kiln.compile(extend_argument, backend=counter)(x, compiled)
    assert counter.frame_count == 1
    close(got, expected)
    assert len(compiled) == len(eager) == 2
    for a, b in zip(compiled, eager):
        close(a, b)


def test_list_change_before_a_graph_break_is_visible_to_the_break():
    seen = []

    def f(x):
        seen.append(x + 1)
        print(len(seen))  # runs in Python: the append must have happened already
        return x * 2

    counter = CompileCounter()
    kiln.compile(f, backend=counter)(kiln.ones(2))
    assert len(seen) == 1


def ids(x, m):
    return x.cos(), id(x) + id(m)


def test_id_of_arguments_and_modules_is_a_guarded_constant():
    lin, other = kiln.nn.Linear(2, 2), kiln.nn.Linear(2, 2)
    x = kiln.randn(2)
    explained = dynamo.explain(ids)(x, lin)
    assert explained.graph_break_count == 0, explained
    counter = CompileCounter()
    cf = kiln.compile(ids, backend=counter)
    assert cf(x, lin)[1] == id(x) + id(lin)
    assert cf(x, other)[1] == id(x) + id(other)  # the identity guard fails: recompiled, not stale
    assert counter.frame_count == 2


def test_id_of_an_object_made_inside_still_breaks_with_a_clear_reason():
    def f(x):
        items = [x]
        return x + 1, id(items)

    explained = dynamo.explain(f)(kiln.ones(1))
    assert explained.graph_break_count == 1
    assert "made inside the compiled function" in explained.break_reasons[0].reason


def deep(x):
    y = copy.deepcopy([x, {1: x}])
    return y[0] + 1


def test_break_inside_a_library_call_names_the_user_line():
    err = _first_break(deep, kiln.ones(2))
    assert err.location == f"{__file__}:{deep.__code__.co_firstlineno + 1} in deep", err.location
    assert err.inside.startswith("deepcopy (") and "copy.py:" in err.inside
    assert err.frames[-1][:2] == (__file__, deep.__code__.co_firstlineno + 1)
    explained = dynamo.explain(deep)(kiln.ones(2))
    assert explained.graph_break_count >= 1  # the call still runs eagerly, with the same result
    close(kiln.compile(deep, backend="eager")(kiln.ones(2)), kiln.full((2,), 2.0))


def _first_break(fn, *args):
    """The first graph break's Unsupported, as kiln.compile(fullgraph=True) raises it."""
    with pytest.raises(dynamo.exc.Unsupported) as info:
        kiln.compile(fn, backend="eager", fullgraph=True)(*args)
    return info.value


@requires_torch
@pytest.mark.parametrize("program", ["globals", "captured_list", "ids"])
def test_pytorch_takes_no_break_here_either(program):
    import torch

    torch._dynamo.reset()
    source = {
        "globals": "steps = 0\ndef f(x):\n    global steps\n    steps = steps + 1\n    return x * 2\n",
        "captured_list": "def make():\n    seen = []\n    def f(x):\n        seen.append(x.sin())\n"
                         "        return x * 2\n    return f\nf = make()\n",
        "ids": "def f(x):\n    return x * 2, id(x)\n",
    }[program]
    torch_ns, kiln_ns = {}, {}
    exec(source, torch_ns)
    exec(source, kiln_ns)
    torch_breaks = torch._dynamo.explain(torch_ns["f"])(torch.ones(2)).graph_break_count
    kiln_breaks = dynamo.explain(kiln_ns["f"])(kiln.ones(2)).graph_break_count
    assert kiln_breaks == torch_breaks == 0


def test_dict_mutation_hint_names_what_the_dict_is():
    table = {"a": 1}

    def f(x):
        table["b"] = 2
        return x + 1

    explained = dynamo.explain(f)(kiln.ones(1))
    reason = explained.break_reasons[0].reason
    assert "(the variable 'table' captured from an enclosing function)" in reason, reason
    assert "argument" not in reason

    def g(x, d):
        d.pop("a")
        return x + 1

    reason = dynamo.explain(g)(kiln.ones(1), {"a": 1}).break_reasons[0].reason
    assert "(the argument 'd')" in reason, reason


class Logger(kiln.nn.Module):
    def __init__(self):
        super().__init__()
        self.log = []

    def forward(self, x):
        self.log.append(x + 1)  # each `self.log` read reaches the same list: both appends land
        self.log.append(x + 2)
        return x * 2


def test_list_attribute_read_twice_keeps_every_change():
    compiled_module, eager_module = Logger(), Logger()
    x = kiln.randn(2)
    counter = CompileCounter()
    close(kiln.compile(compiled_module, backend=counter)(x), eager_module(x))
    assert counter.frame_count == 1
    assert len(compiled_module.log) == len(eager_module.log) == 2
    for a, b in zip(compiled_module.log, eager_module.log):
        close(a, b)


def test_two_references_read_before_changing_break_safely():
    log = []

    def f(x):
        a, b = log_ref(), log_ref()
        a.append(x + 1)
        b.append(x + 2)
        return x * 2

    def log_ref():
        return log

    out = kiln.compile(f, backend="eager")(kiln.ones(2))
    close(out, kiln.full((2,), 2.0))
    assert [float(t[0]) for t in log] == [2.0, 3.0]
