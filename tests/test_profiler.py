"""kiln.profiler (issue 17) against torch.profiler, PyTorch 2.13.

The table is compared character for character with torch's on the same events (FunctionEvents
built with fixed times in both libraries, so the layout, sorting, row limits, percentages and time
formats are checked exactly); schedules and the steps on_trace_ready sees equal torch's; a real
profile records kiln's ops by name with nested times that add up, input shapes, record_function and
ProfilerStep ranges, a Chrome trace; the op entry points are restored afterwards, and profiling a
compiled function changes none of its results.
"""

import json
import warnings

import pytest

import kiln
import kiln._dynamo
from kiln.profiler import ProfilerAction, ProfilerActivity, profile, record_function, schedule
from conftest import requires_torch, torch

pytestmark = requires_torch


# --- the table ------------------------------------------------------------------------------------
# (name, start_us, end_us, input_shapes, parent index)
EVENTS = [
    ("model_inference", 0.0, 1500.0, [], None),
    ("aten::linear", 10.0, 610.5, [[8, 4], [3, 4], [3]], 0),
    ("aten::addmm", 20.0, 600.25, [[3], [8, 4], [4, 3]], 1),
    ("aten::relu", 700.0, 760.0, [[8, 3]], 0),
    ("aten::linear", 800.0, 1200.0, [[8, 3], [2, 3], [2]], 0),
    ("aten::addmm", 810.0, 1190.0, [[2], [8, 3], [3, 2]], 4),
    ("a_very_long_record_function_name_that_the_table_has_to_cut_short", 1250.0, 1490.0, [], 0),
    ("aten::sum", 2000.0, 2000.75, [[8, 2]], None),
    ("aten::sum", 2100.0, 1102100.0, [[8, 2]], None),
]


def _event_list(lib, with_shapes=True):
    if lib is torch:
        from torch.autograd.profiler_util import EventList as TorchEventList, FunctionEvent

        def EventList(events):
            result = TorchEventList(events)
            result._tree_built = True  # the parents and children are set below, as kiln's are
            return result
    else:
        from kiln.profiler import EventList, FunctionEvent
    events = []
    for i, (name, start, end, shapes, parent) in enumerate(EVENTS):
        event = FunctionEvent(id=i, name=name, thread=1, start_us=start, end_us=end,
                              input_shapes=shapes if with_shapes else [])
        event.stack = []
        if parent is not None:
            event.set_cpu_parent(events[parent])
            events[parent].append_cpu_child(event)
        events.append(event)
    return EventList(events)


@pytest.mark.parametrize("options", [
    {}, {"sort_by": "cpu_time_total"}, {"sort_by": "self_cpu_time_total", "row_limit": 3},
    {"sort_by": "count"}, {"sort_by": "cpu_time", "header": "TITLE"}, {"top_level_events_only": True},
    {"max_name_column_width": 20}, {"time_unit": "ms"}, {"time_unit": "us", "row_limit": 2},
    {"sort_by": "self_cuda_time_total"},
], ids=str)
@pytest.mark.parametrize("group_by_input_shape", [False, True])
def test_table_matches_torch(options, group_by_input_shape):
    want = _event_list(torch).key_averages(group_by_input_shapes=group_by_input_shape).table(**options)
    got = _event_list(kiln).key_averages(group_by_input_shapes=group_by_input_shape).table(**options)
    assert got == want


def test_table_of_events_and_without_shapes_matches_torch():
    assert _event_list(kiln).table() == _event_list(torch).table()
    assert _event_list(kiln, False).key_averages().table(sort_by="cpu_time_total") == \
        _event_list(torch, False).key_averages().table(sort_by="cpu_time_total")
    got, want = _event_list(kiln).key_averages(), _event_list(torch).key_averages()
    assert [(e.key, e.count, e.cpu_time_total, e.self_cpu_time_total, e.cpu_time) for e in got] == \
        [(e.key, e.count, e.cpu_time_total, e.self_cpu_time_total, e.cpu_time) for e in want]
    assert got.self_cpu_time_total == want.self_cpu_time_total
    assert _event_list(kiln).key_averages().table(row_limit=0).count("\n") == 5
    assert kiln.profiler.EventList([]).table() == ""


# --- schedules and steps --------------------------------------------------------------------------
SCHEDULES = [dict(wait=1, warmup=1, active=2), dict(wait=1, warmup=1, active=2, repeat=2),
             dict(wait=0, warmup=2, active=1, skip_first=3), dict(wait=2, warmup=1, active=3, skip_first=1,
                                                                   skip_first_wait=1, repeat=1)]


@pytest.mark.parametrize("args", SCHEDULES, ids=str)
def test_schedule_matches_torch(args):
    got, want = schedule(**args), torch.profiler.schedule(**args)
    assert [got(i).name for i in range(24)] == [want(i).name for i in range(24)]


def test_schedule_checks_as_torch():
    for lib in (kiln, torch):
        with pytest.raises(AssertionError, match="Invalid profiler schedule arguments"):
            lib.profiler.schedule(wait=0, warmup=0, active=0)
        with pytest.warns(UserWarning, match="won't be using warmup"):
            lib.profiler.schedule(wait=1, warmup=0, active=1)


def _steps_seen(lib, args, steps=9):
    seen = []

    def ready(prof):
        steps = [(e.key, e.count) for e in prof.key_averages() if e.key.startswith("ProfilerStep")]
        traced = sorted(e.trace_name for e in prof.events() if e.name.startswith("ProfilerStep"))
        seen.append((prof.step_num, steps, traced))

    x = lib.ones(4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with lib.profiler.profile(activities=[lib.profiler.ProfilerActivity.CPU],
                                  schedule=lib.profiler.schedule(**args), on_trace_ready=ready) as prof:
            for _ in range(steps):
                (x * 2).sum()
                prof.step()
    return seen


@pytest.mark.parametrize("args", SCHEDULES, ids=str)
def test_on_trace_ready_sees_the_steps_torch_sees(args):
    assert _steps_seen(kiln, args) == _steps_seen(torch, args)


def test_enums_match_torch():
    assert [(a.name, a.value) for a in ProfilerActivity] == \
        sorted(((n, a.value) for n, a in torch.profiler.ProfilerActivity.__members__.items()), key=lambda p: p[1])
    assert str(ProfilerActivity.CPU) == str(torch.profiler.ProfilerActivity.CPU)
    assert [(a.name, a.value) for a in ProfilerAction] == [(a.name, a.value) for a in torch.profiler.ProfilerAction]
    assert kiln.profiler.supported_activities() == {ProfilerActivity.CPU}


# --- a real profile -------------------------------------------------------------------------------
def _program(x, layer):
    with record_function("forward"):
        hidden = kiln.mm(x, x).relu() + 1
        out = layer(hidden)
        middle = kiln.median(out, 0)
    return out.sum() + middle.values.sum()


def test_profile_records_kiln_ops_nested():
    kiln.manual_seed(0)
    x, layer = kiln.randn(16, 16), kiln.nn.Linear(16, 4)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        _program(x, layer)
    events = prof.events()
    names = [e.name for e in events]
    assert names[:5] == ["forward", "aten::mm", "aten::relu", "aten::add", "aten::linear"]
    assert "aten::median" in names and "aten::sort" in names
    forward = events[0]
    assert forward.cpu_parent is None and [c.name for c in forward.cpu_children][:4] == names[1:5]
    median = next(e for e in events if e.name == "aten::median")
    assert median.cpu_parent is forward and any(c.name == "aten::sort" for c in median.cpu_children)
    assert median.input_shapes == [[16, 4], []]
    for event in events:  # self times are totals less the children's, never negative
        assert 0 <= event.self_cpu_time_total <= event.cpu_time_total
    averages = prof.key_averages()
    top_level_total = sum(e.cpu_time_total for e in events if e.cpu_parent is None)
    assert averages.self_cpu_time_total == pytest.approx(top_level_total)
    counts = {e.key: e.count for e in averages}
    assert counts["aten::sum"] == 3 and counts["aten::mm"] == 1  # two sums here, one inside median
    by_shape = prof.key_averages(group_by_input_shape=True)
    assert [e.input_shapes for e in by_shape if e.key == "aten::mm"] == [[[16, 16], [16, 16]]]
    table = averages.table(sort_by="self_cpu_time_total", row_limit=4)
    lines = table.splitlines()
    assert lines[1].split() == ["Name", "Self", "CPU", "%", "Self", "CPU", "CPU", "total", "%", "CPU", "total", "CPU",
                                "time", "avg", "#", "of", "Calls"]
    assert by_shape.table().splitlines()[1].split()[-2:] == ["Input", "Shapes"]
    assert len(lines) == 3 + 4 + 2 and lines[-1].startswith("Self CPU time total: ")
    selfs = sorted((e.self_cpu_time_total for e in averages), reverse=True)[:4]
    self_of = {e.key: e.self_cpu_time_total for e in averages}  # (two keys may tie: compare the times)
    assert [self_of[line.split()[0]] for line in lines[3:7]] == selfs


def _backward_nodes(lib, profile_fn):
    """The backward nodes a profile of one training step records: (outer, inner) name pairs in
    order, and each outer range's direct children."""
    lib.manual_seed(0)
    layer = lib.nn.Linear(6, 3)
    x = lib.randn(4, 6)
    with profile_fn() as prof:
        loss = (lib.nn.functional.relu(layer(x)) * 2).sum()
        loss.backward()
    events = prof.events()
    prefix = "autograd::engine::evaluate_function: "
    outer = [e for e in events if e.name.startswith(prefix)]
    return [(e.name, [c.name for c in e.cpu_children][:1]) for e in outer], events


def test_profile_records_backward_nodes_as_torch():
    # the engine reports each node it runs; PyTorch's profiler names them the same way
    got, events = _backward_nodes(kiln, profile)
    want, _ = _backward_nodes(torch, torch.profiler.profile)
    assert sorted(name for name, _ in got) == sorted(name for name, _ in want)
    for name, children in got:  # each holds the node's own range
        assert children == [name.split(": ", 1)[1]]
    for e in events:
        assert 0 <= e.self_cpu_time_total <= e.cpu_time_total
    assert kiln.profiler._op_hooks._installed == []  # the engine's observer went with the wrappers
    x = kiln.ones(2, requires_grad=True)
    (x * 3).sum().backward()  # outside a window: nothing recorded, nothing raised
    assert x.grad.tolist() == [3.0, 3.0]


def test_profile_without_shapes_and_outside_a_window_records_nothing_extra():
    x = kiln.ones(3, 3)
    with profile() as prof:
        (x @ x).sum()
    assert all(e.input_shapes == [] for e in prof.events())
    assert "Input Shapes" not in prof.key_averages(group_by_input_shape=True).table()
    with record_function("not recording"):  # no profile: a no-op
        (x + 1).sum()
    kept = len(prof.events())
    (x * 2).sum()
    assert len(prof.events()) == kept


# Note [Tensor operators]: an operator's range is named after the op its number slot runs
# (kiln._C._tensor_operators, the table the slots read), reflected and in-place forms included.
def test_operators_are_recorded_as_the_ops_they_run():
    x, m = kiln.randn(4), kiln.tensor([1, 2, 3, 4])
    with profile() as prof:
        x - 1
        1 - x
        m & 3
        m << 1
        -x
        y = x.clone()
        y *= 2
    names = [e.name for e in prof.events()]
    assert names == ["aten::sub", "aten::rsub", "aten::bitwise_and", "aten::__lshift__", "aten::neg", "aten::clone",
                     "aten::mul_"]
    assert {k: v for k, v in kiln._C._tensor_operators.items() if k in ("__rsub__", "__imul__", "__invert__")} == \
        {"__rsub__": "rsub", "__imul__": "mul_", "__invert__": "bitwise_not"}


def test_entry_points_are_restored_even_after_an_exception():
    before = (kiln.add, kiln.Tensor.add, kiln.Tensor.__add__, kiln.median, kiln.ops.aten.add.Tensor.__call__)
    with pytest.raises(ZeroDivisionError):
        with profile():
            assert kiln.add is not before[0]
            1 / 0
    assert (kiln.add, kiln.Tensor.add, kiln.Tensor.__add__, kiln.median,
            kiln.ops.aten.add.Tensor.__call__) == before
    assert "__add__" not in kiln.Tensor.__dict__  # TensorBase's C operator again


def test_profiles_do_not_nest():
    with profile():
        with pytest.raises(RuntimeError, match="already recording"):
            with profile():
                pass


def test_export_chrome_trace(tmp_path):
    x = kiln.ones(4, 4)
    with profile(record_shapes=True) as prof:
        with record_function("block", args="k=v"):
            (x @ x).relu()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    events = {e["name"]: e for e in trace["traceEvents"]}
    assert events["block"]["cat"] == "user_annotation" and events["block"]["ph"] == "X"
    assert events["aten::matmul"]["cat"] == "cpu_op" and events["aten::matmul"]["args"]["Input Dims"] == [[4, 4],
                                                                                                             [4, 4]]
    assert events["block"]["ts"] <= events["aten::matmul"]["ts"]
    assert events["aten::matmul"]["ts"] + events["aten::matmul"]["dur"] <= events["block"]["ts"] + events["block"][
        "dur"]


def test_tensorboard_trace_handler_writes_a_trace(tmp_path):
    handler = kiln.profiler.tensorboard_trace_handler(str(tmp_path / "log"), worker_name="w0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with profile(schedule=schedule(wait=0, warmup=0, active=1, repeat=1), on_trace_ready=handler) as prof:
            for _ in range(2):
                kiln.ones(2).sum()
                prof.step()
    files = list((tmp_path / "log").iterdir())
    assert len(files) == 1 and files[0].name.startswith("w0.") and files[0].name.endswith(".pt.trace.json")
    assert any(e["name"] == "aten::sum" for e in json.loads(files[0].read_text())["traceEvents"])


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_profiling_a_compiled_function_keeps_its_results(backend):
    x = kiln.randn(6, 5, requires_grad=True)

    def step(x):
        return (kiln.relu(x) * x.sin()).sum() + kiln.median(x)

    want = step(x)
    (want_grad,) = kiln.autograd.grad(want, [x])
    kiln._dynamo.reset()
    compiled = kiln.compile(step, backend=backend)
    with profile() as prof:
        got = compiled(x)
        (got_grad,) = kiln.autograd.grad(got, [x])
    kiln._dynamo.reset()
    assert got.item() == pytest.approx(want.item(), rel=1e-6)
    assert (got_grad - want_grad).abs().max().item() < 1e-5
    if backend == "aot_eager":  # its graphs call OpOverloads: forward and backward ops are seen
        keys = {e.key for e in prof.key_averages()}
        assert {"aten::relu", "aten::sin", "aten::cos"} <= keys
    assert not any(hasattr(f, "__wrapped__") for f in (kiln.add, kiln.Tensor.sin, kiln.median))  # restored
