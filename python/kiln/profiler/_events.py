"""The profiler's results, as torch.autograd.profiler_util: FunctionEvent (one timed range, its parent
and children), FunctionEventAvg (the ranges of one key summed), and EventList with key_averages(),
table() (torch's layout: Name, Self CPU %, Self CPU, CPU total %, CPU total, CPU time avg, # of Calls,
and Input Shapes when recorded) and export_chrome_trace() (the Chrome/Perfetto JSON trace format).

Times are in microseconds. An event's self time is its total minus its children's totals; the
percentages are shares of the sum of all self times (the time the top-level ranges cover).
"""

import json
import os
from collections import OrderedDict


def _format_time(time_us):
    if time_us >= 1e6:
        return f"{time_us / 1e6:.3f}s"
    if time_us >= 1e3:
        return f"{time_us / 1e3:.3f}ms"
    return f"{time_us:.3f}us"


def _format_time_share(time_us, total_us):
    if total_us == 0:
        return "NaN"
    return f"{time_us * 100.0 / total_us:.2f}%"


class _TimesMixin:
    """The derived fields and formatted strings torch's events expose."""

    @property
    def cpu_time(self):  # average over the calls
        return 0.0 if self.count == 0 else self.cpu_time_total / self.count

    @property
    def self_cpu_time_total_str(self):
        return _format_time(self.self_cpu_time_total)

    @property
    def cpu_time_total_str(self):
        return _format_time(self.cpu_time_total)

    @property
    def cpu_time_str(self):
        return _format_time(self.cpu_time)

    # kiln measures CPU time only: the device and memory columns torch can sort by read zero
    device_time_total = self_device_time_total = device_time = 0.0
    cpu_memory_usage = self_cpu_memory_usage = device_memory_usage = self_device_memory_usage = 0


class Interval:
    def __init__(self, start, end):
        self.start, self.end = start, end

    def elapsed_us(self):
        return self.end - self.start

    def __repr__(self):
        return f"Interval(start={self.start}, end={self.end})"


class FunctionEvent(_TimesMixin):
    """One timed range: an op call ("aten::mm") or a record_function block."""

    def __init__(self, id, name, thread, start_us, end_us, input_shapes=None, is_user_annotation=False, args=None,
                 trace_name=None):
        self.id, self.name, self.key, self.thread = id, name, name, thread
        self.trace_name = trace_name if trace_name is not None else name  # "ProfilerStep#3" for "ProfilerStep*"
        self.time_range = Interval(start_us, end_us)
        self.input_shapes = input_shapes or []
        self.is_user_annotation = is_user_annotation
        self.args = args
        self.cpu_parent = None
        self.cpu_children = []
        self.count = 1
        self.stack = []

    def append_cpu_child(self, child):
        self.cpu_children.append(child)

    def set_cpu_parent(self, parent):
        self.cpu_parent = parent

    @property
    def cpu_time_total(self):
        return self.time_range.elapsed_us()

    @property
    def self_cpu_time_total(self):
        return self.cpu_time_total - sum(child.cpu_time_total for child in self.cpu_children)

    def __repr__(self):
        return (f"<FunctionEvent id={self.id} name={self.name} thread={self.thread} "
                f"cpu_time={self.cpu_time_str} start_us={self.time_range.start:.3f} end_us={self.time_range.end:.3f} "
                f"cpu_children={[c.id for c in self.cpu_children]} input_shapes={self.input_shapes}>")


class FunctionEventAvg(_TimesMixin):
    """The events sharing one key (name, and input shapes when grouped by them), summed."""

    def __init__(self):
        self.key = None
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.input_shapes = None
        self.cpu_parent = None
        self.cpu_children = None
        self.is_user_annotation = False

    def add(self, other):
        if self.key is None:
            self.key, self.input_shapes = other.key, other.input_shapes
            self.cpu_parent, self.cpu_children = other.cpu_parent, other.cpu_children
            self.is_user_annotation = other.is_user_annotation
        self.count += other.count
        self.cpu_time_total += other.cpu_time_total
        self.self_cpu_time_total += other.self_cpu_time_total
        return self

    def __iadd__(self, other):
        return self.add(other)

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={self.self_cpu_time_total_str} "
                f"cpu_time={self.cpu_time_str} input_shapes={self.input_shapes}>")


class EventList(list):
    """A list of FunctionEvents (or FunctionEventAvgs) with torch's summaries."""

    @property
    def self_cpu_time_total(self):
        return sum(event.self_cpu_time_total for event in self)

    def key_averages(self, group_by_input_shapes=False, group_by_stack_n=0, group_by_overload_name=False):
        """One FunctionEventAvg per key, in the order keys first occur."""
        groups = OrderedDict()
        for event in self:
            key = (event.key, str(event.input_shapes)) if group_by_input_shapes else (event.key,)
            groups.setdefault(key, FunctionEventAvg()).add(event)
        averages = EventList(groups.values())
        if not group_by_input_shapes:  # the shapes of one call would misdescribe the others
            for average in averages:
                average.input_shapes = ""
        return averages

    def total_average(self):
        total = FunctionEventAvg()
        for event in self:
            total.add(event)
        total.key = "Total"
        return total

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75, max_name_column_width=55,
              max_shapes_column_width=80, header=None, top_level_events_only=False, time_unit=None):
        return _build_table(self, sort_by, header, row_limit, max_name_column_width, max_shapes_column_width,
                            top_level_events_only, time_unit)

    def export_chrome_trace(self, path):
        """The events as a Chrome trace (chrome://tracing, Perfetto): complete ("X") events in
        microseconds, ops in category "cpu_op", record_function ranges in "user_annotation"."""
        pid = os.getpid()
        trace = []
        for event in self:
            args = {"External id": event.id}
            if event.input_shapes:
                args["Input Dims"] = event.input_shapes
            if getattr(event, "args", None) is not None:
                args["Args"] = event.args
            trace.append({"ph": "X", "cat": "user_annotation" if event.is_user_annotation else "cpu_op",
                          "name": getattr(event, "trace_name", event.name), "pid": pid, "tid": event.thread,
                          "ts": event.time_range.start, "dur": event.cpu_time_total, "args": args})
        with open(path, "w") as f:
            json.dump({"schemaVersion": 1, "displayTimeUnit": "ms", "traceEvents": trace, "traceName": str(path)}, f)

    def __str__(self):
        return self.table()


def _time_text(time_us, default, time_unit):
    if time_unit == "s":
        return f"{time_us / 1e6:.3f}s"
    if time_unit == "ms":
        return f"{time_us / 1e3:.3f}ms"
    if time_unit == "us":
        return f"{time_us:.3f}us"
    return default


def _build_table(events, sort_by, header, row_limit, max_name_column_width, max_shapes_column_width,
                 top_level_events_only, time_unit):
    """torch.autograd.profiler_util._build_table for CPU events: the same columns, widths and footer."""
    if len(events) == 0:
        return ""
    if sort_by is not None:
        key = sort_by.replace("cuda", "device").replace("xpu", "device").replace("privateuse1", "device")
        events = EventList(sorted(events, key=lambda event: getattr(event, key), reverse=True))
    has_input_shapes = any(event.input_shapes for event in events)
    name_width = max(len(event.key) for event in events) + 4
    if max_name_column_width is not None:
        name_width = min(name_width, max_name_column_width)
    shapes_width = max(len(str(event.input_shapes)) for event in events) + 4
    if max_shapes_column_width is not None:
        shapes_width = min(shapes_width, max_shapes_column_width)
    headers = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "# of Calls"]
    widths = [name_width] + [12] * (len(headers) - 1)
    if has_input_shapes:
        headers.append("Input Shapes")
        widths.append(shapes_width)
    row_format = "".join("{: >" + str(w) + "}  " for w in widths)
    separator = "".join("-" * w + "  " for w in widths)
    line_length = sum(w + 2 for w in widths) - 2
    total_self = sum(event.self_cpu_time_total for event in events)
    lines = []
    if header is not None:
        lines += ["=" * line_length, header]
    if top_level_events_only:
        lines += ["=" * line_length, "This report only display top-level ops statistics"]
    lines += [separator, row_format.format(*headers), separator]
    shown = 0
    for event in events:
        if shown == row_limit:
            break
        if top_level_events_only and event.cpu_parent is not None:
            continue
        shown += 1
        name = event.key
        if max_name_column_width is not None and len(name) >= max_name_column_width - 3:
            name = name[:max_name_column_width - 3] + "..."
        row = [name, _format_time_share(event.self_cpu_time_total, total_self),
               _time_text(event.self_cpu_time_total, event.self_cpu_time_total_str, time_unit),
               _format_time_share(event.cpu_time_total, total_self),
               _time_text(event.cpu_time_total, event.cpu_time_total_str, time_unit),
               _time_text(event.cpu_time, event.cpu_time_str, time_unit), event.count]
        if has_input_shapes:
            row.append(str(event.input_shapes)[:shapes_width])
        lines.append(row_format.format(*row))
    lines += [separator, f"Self CPU time total: {_time_text(total_self, _format_time(total_self), time_unit)}"]
    return "".join(line + "\n" for line in lines)
