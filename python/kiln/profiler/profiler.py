"""kiln.profiler.profile, schedule, record_function and the enums, with torch.profiler's API.

A profile is a state machine over training steps, as torch's: schedule(step) says what each step
is (NONE, WARMUP, RECORD, RECORD_AND_SAVE); moving from one action to the next prepares, starts or
stops a recording window and, after a RECORD_AND_SAVE step (or when the profile exits while
recording), calls on_trace_ready(prof), where prof.key_averages() / prof.events() /
prof.export_chrome_trace() read that window. Without a schedule the whole `with` block is one window.
What a window measures is in _op_hooks.py: the Python entry points of kiln's ops, and record_function
ranges; the README says what this leaves out.
"""

import contextlib
import enum
import gzip
import os
import socket
import time
import warnings

from kiln.profiler import _op_hooks
from kiln.profiler._events import EventList, FunctionEvent


class ProfilerActivity(enum.Enum):
    """What a profile records. kiln measures CPU time only: the device activities are accepted and
    record nothing (kiln runs on the CPU)."""

    CPU = 0
    XPU = 1
    CUDA = 2
    HPU = 3
    MTIA = 4
    PrivateUse1 = 5

    def __str__(self):
        return f"ProfilerActivity.{self.name}"


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3
    DEVICE_STOPPED = 4


def supported_activities():
    return {ProfilerActivity.CPU}


def schedule(*, wait, warmup, active, repeat=0, skip_first=0, skip_first_wait=0):
    """torch.profiler.schedule: skip `skip_first` steps, then cycles of `wait` idle, `warmup` and
    `active` recorded steps (the last one RECORD_AND_SAVE), `repeat` times (0: forever)."""

    def schedule_fn(step):
        if step < 0:
            raise AssertionError(f"Step must be non-negative. Got {step}.")
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait != 0:  # the first cycle's wait is skipped
            step += wait
        num_steps = wait + warmup + active
        if repeat > 0 and step / num_steps >= repeat:
            return ProfilerAction.NONE
        mod_step = step % num_steps
        if mod_step < wait:
            return ProfilerAction.NONE
        if mod_step < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if mod_step < num_steps - 1 else ProfilerAction.RECORD_AND_SAVE

    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise AssertionError(f"Invalid profiler schedule arguments. Got wait={wait} (need >= 0), warmup={warmup} "
                             f"(need >= 0), active={active} (need > 0), repeat={repeat} (need >= 0), "
                             f"skip_first={skip_first} (need >= 0).")
    if warmup == 0:
        warnings.warn("Profiler won't be using warmup, this can skew profiler results", stacklevel=2)
    return schedule_fn


def _default_schedule(_step):
    return ProfilerAction.RECORD


class record_function(contextlib.ContextDecorator):
    """A named range in the profile (`with record_function("forward"):` or as a decorator); it
    records nothing when no profile is recording. `args` is kept in the trace."""

    def __init__(self, name, args=None):
        self.name, self.args = name, args
        self._range = None
        self._recorder = None

    def __enter__(self):
        recorder = _op_hooks.active
        if recorder is not None:
            self._recorder = recorder
            self._range = recorder.open(self.name, "user_annotation", args=self.args)
        return self

    def __exit__(self, *exc):
        if self._range is not None:
            self._recorder.close(self._range)
            self._range = self._recorder = None
        return False


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False, use_python_export=False):
    """An on_trace_ready handler writing each window's Chrome trace to
    `dir_name/<worker_name>.<time_ns>.pt.trace.json[.gz]`, as torch's."""

    def handler_fn(prof):
        os.makedirs(dir_name, exist_ok=True)
        name = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        path = os.path.join(dir_name, f"{name}.{time.time_ns()}.pt.trace.json")
        prof.export_chrome_trace(path)
        if use_gzip:
            with open(path, "rb") as src, gzip.open(path + ".gz", "wb") as dst:
                dst.write(src.read())
            os.remove(path)

    return handler_fn


def _events_of(recorder):
    """The finished ranges of a window as FunctionEvents with parents and children, in start order."""
    to_us = 1e-3
    events, by_id = EventList(), {}
    for r in recorder.finished():
        # every step's range is one key, "ProfilerStep*", as torch's (the trace keeps the number)
        name = "ProfilerStep*" if r.name.startswith("ProfilerStep#") else r.name
        event = FunctionEvent(r.id, name, r.thread, (recorder.epoch_ns + r.start_ns) * to_us,
                              (recorder.epoch_ns + r.end_ns) * to_us, input_shapes=r.input_shapes,
                              is_user_annotation=r.kind == "user_annotation", args=r.args, trace_name=r.name)
        by_id[r.id] = event
        events.append(event)
    for r in recorder.finished():
        parent = r.parent
        while parent is not None and parent.id not in by_id:  # an unfinished parent: the next one up
            parent = parent.parent
        if parent is not None:
            by_id[r.id].set_cpu_parent(by_id[parent.id])
            by_id[parent.id].append_cpu_child(by_id[r.id])
    events.sort(key=lambda e: (e.time_range.start, -e.time_range.end))
    return events


class profile:
    """torch.profiler.profile: `with profile(...) as prof:` records the ops kiln runs, then
    prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10)."""

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None, record_shapes=False,
                 profile_memory=False, with_stack=False, with_flops=False, with_modules=False,
                 experimental_config=None, execution_trace_observer=None, acc_events=False, use_cuda=None,
                 custom_trace_id_callback=None, post_processing_timeout_s=None):
        self.activities = set(activities) if activities is not None else supported_activities()
        if len(self.activities) == 0:
            raise AssertionError("No valid profiler activities found")
        for activity in self.activities:
            if not isinstance(activity, ProfilerActivity):
                raise TypeError(f"kiln.profiler.profile: activities must be ProfilerActivity values, got {activity!r}")
        self.record_shapes = record_shapes
        self.profile_memory, self.with_stack, self.with_flops = profile_memory, with_stack, with_flops
        self.with_modules = with_modules
        self.on_trace_ready = on_trace_ready
        self.record_steps = schedule is not None
        self.schedule = schedule if schedule is not None else _default_schedule
        self.step_num = 0
        self.current_action = self.schedule(self.step_num)
        self._recorder = None  # the window being recorded
        self._events = None  # the last finished window's events
        self._step_range = None

    # --- the recording window ---
    def _prepare(self):
        self._recorder = _op_hooks.Recorder(self.record_shapes)

    def _start(self):
        if _op_hooks.active is not None and _op_hooks.active is not self._recorder:
            raise RuntimeError("kiln.profiler: another profile is already recording; profiles cannot nest")
        if self._recorder is None:
            self._prepare()
        _op_hooks.install()
        _op_hooks.active = self._recorder

    def _stop(self):
        if _op_hooks.active is self._recorder:
            _op_hooks.active = None
            _op_hooks.uninstall()
        if self._recorder is not None:
            self._events = _events_of(self._recorder)
            self._recorder = None

    def _trace_ready(self):
        if self.on_trace_ready:
            self.on_trace_ready(self)

    def _warn(self, message):
        def action():
            warnings.warn(message, stacklevel=3)

        return action

    def _transitions(self, prev, current):
        A = ProfilerAction
        stop_save = [self._stop, self._trace_ready]
        table = {
            (A.NONE, A.NONE): [], (A.NONE, A.WARMUP): [self._prepare],
            (A.NONE, A.RECORD): [self._prepare, self._start], (A.NONE, A.RECORD_AND_SAVE): [self._prepare, self._start],
            (A.WARMUP, A.NONE): [self._warn("Incorrect schedule: WARMUP followed by NONE"), self._start, self._stop],
            (A.WARMUP, A.WARMUP): [], (A.WARMUP, A.RECORD): [self._start], (A.WARMUP, A.RECORD_AND_SAVE): [self._start],
            (A.RECORD, A.NONE): [self._warn("Incorrect schedule: RECORD followed by NONE"), self._stop],
            (A.RECORD, A.WARMUP): [self._warn("Incorrect schedule: RECORD followed by WARMUP"), self._stop],
            (A.RECORD, A.RECORD): [], (A.RECORD, A.RECORD_AND_SAVE): [],
            (A.RECORD_AND_SAVE, A.NONE): stop_save, (A.RECORD_AND_SAVE, A.WARMUP): stop_save + [self._prepare],
            (A.RECORD_AND_SAVE, A.RECORD): stop_save + [self._prepare, self._start],
            (A.RECORD_AND_SAVE, A.RECORD_AND_SAVE): stop_save + [self._prepare, self._start],
            (A.WARMUP, None): [self._start, self._stop], (A.RECORD, None): stop_save,
            (A.RECORD_AND_SAVE, None): stop_save,
        }
        return table.get((prev, current), [])

    def _transit(self, prev, current):
        for action in self._transitions(prev, current):
            action()

    # --- torch.profiler.profile's methods ---
    def start(self):
        self._transit(ProfilerAction.NONE, self.current_action)
        if self.record_steps:
            self._open_step()

    def stop(self):
        self._close_step()
        self._transit(self.current_action, None)

    def step(self):
        """Marks the end of a training step: the schedule decides what the next one records."""
        self._close_step()
        prev = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        self._transit(prev, self.current_action)
        if self.record_steps:
            self._open_step()

    def _open_step(self):
        self._step_range = record_function(f"ProfilerStep#{self.step_num}").__enter__()

    def _close_step(self):
        if self._step_range is not None:
            self._step_range.__exit__(None, None, None)
            self._step_range = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        self.stop()
        return False

    def events(self):
        if self._events is None:
            raise AssertionError("kiln.profiler: no recording has finished yet")
        return self._events

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0, group_by_overload_name=False):
        return self.events().key_averages(group_by_input_shape, group_by_stack_n, group_by_overload_name)

    def export_chrome_trace(self, path):
        return self.events().export_chrome_trace(path)
