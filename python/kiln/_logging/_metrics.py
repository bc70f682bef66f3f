"""kiln._logging._metrics: compile counters and times, as torch._dynamo.utils keeps them.

    counters["graph_break"][reason] += 1          # a Counter per category (PyTorch's names)
    with dynamo_timed("compile_fx_inner", phase="inductor lowering"):
        ...
    compile_times()                                # the table PyTorch's compile_times() prints

`counters` is PyTorch's dict of Counters: "frames" (total, ok), "stats" (calls_captured,
unique_graphs), "graph_break" (reason -> count), "aot_autograd" (total, ok), "inductor"
(generated_kernel_count, fallbacks), and kiln's "recompiles" (short reason -> count; PyTorch counts
recompiles only in its compile metrics). `compilation_time_metrics` maps each timed step to the
seconds of every run of it, inclusive of what it calls, as PyTorch's does.

A timed step may also name a *phase* of the compile (PHASES: dynamo, aot, inductor lowering, LLVM
codegen; a step without one belongs to its caller's): phase times are exclusive (a step's own
time, less the timed steps inside it), so a compile's phases add up to its wall time; they go to
phase_times and, with KILN_TRACE, to a `compile_phase` event naming the compile ID. kiln._dynamo.utils
re-exports all of this at PyTorch's address; it lives here, below every stage that counts (AOT and
Inductor must not import Dynamo).
"""

import collections
import contextlib
import gc
import threading
import time

from kiln._logging import _structured

PHASES = ("dynamo", "aot", "inductor lowering", "LLVM codegen")

counters = collections.defaultdict(collections.Counter)
compilation_time_metrics = {}  # step name -> [seconds of each run], in order of first run
phase_times = collections.defaultdict(float)  # phase -> seconds, exclusive, over the process
_local = threading.local()


class _Timing:
    __slots__ = ("phase", "inner")

    def __init__(self, phase):
        self.phase, self.inner = phase, 0.0


@contextlib.contextmanager
def dynamo_timed(key, phase=None):
    """Times the block under `key` (compilation_time_metrics) and, exclusive of timed blocks inside
    it, under `phase` (the caller's phase when None). The outermost timed block (a frame's capture,
    or AOT's trace and compile of a graph) pauses the cyclic garbage collector (Note [No cyclic GC
    while compiling])."""
    stack = _local.__dict__.setdefault("stack", [])
    timing = _Timing(phase or (stack[-1].phase if stack else None))
    pause_gc = not stack and gc.isenabled()
    stack.append(timing)
    start = time.perf_counter()
    if pause_gc:
        gc.disable()
    try:
        yield
    finally:
        if pause_gc:
            gc.enable()
        elapsed = time.perf_counter() - start
        stack.pop()
        if stack:
            stack[-1].inner += elapsed
        compilation_time_metrics.setdefault(key, []).append(elapsed)
        own = max(0.0, elapsed - timing.inner)
        if timing.phase is not None:
            phase_times[timing.phase] += own
            _structured.trace_structured("compile_phase", {"phase": timing.phase, "key": key, "seconds": own,
                                                           "inclusive_seconds": elapsed})


# Note [No cyclic GC while compiling]: a compile makes hundreds of thousands of objects that live
# until it ends (fx nodes and their metadata, lowering closures, IR), so CPython's collector, run
# every 700 allocations and now and then over everything, traversed them again and again without
# freeing any: 0.12 s of the 1.0 s cold compile of a 16-layer GPT step (tools/bench/gpt_bench.py
# --cold 16), growing with depth. The collector is off while the outermost compile step runs and
# back on after it, so what the compile left in cycles is collected by the next collection.
# Reference counting frees everything else as usual.


def reset_frame_count():
    """kiln._dynamo.reset(): the times start over (counters do not, as in PyTorch)."""
    compilation_time_metrics.clear()
    phase_times.clear()


def _table(rows, headers):
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    line = lambda r: "  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])


def compile_times(repr="str", aggregate=False):
    """Seconds spent in each timed compile step (PyTorch's compile_times): repr="str" a printable
    table, repr="csv" (headers, values); aggregate sums the runs of a step (one value each)
    instead of listing them."""

    def fmt(values, item):
        return item(sum(values)) if aggregate else ", ".join(map(item, values))

    if repr == "str":
        rows = [(k, fmt(v, lambda x: f"{x:.4f}")) for k, v in compilation_time_metrics.items()]
        return "kiln._dynamo compilation metrics:\n" + _table(rows, ("Function", "Runtimes (s)"))
    if repr == "csv":
        return list(compilation_time_metrics), [fmt(v, lambda x: f"{x:.6f}") for v in compilation_time_metrics.values()]
    return None


def summary():
    """The compile summary KILN_LOGS=perf_hints prints at exit: what was compiled, broken and
    recompiled, the time per phase, then compile_times(aggregate=True)."""
    frames, stats = counters["frames"], counters["stats"]
    breaks, recompiles = counters["graph_break"], counters["recompiles"]
    lines = [f"Compile summary: {frames['ok']} of {frames['total']} frames compiled, {stats['unique_graphs']} graphs "
             f"({stats['calls_captured']} calls captured), {sum(breaks.values())} graph breaks, "
             f"{sum(recompiles.values())} recompiles, {counters['inductor']['generated_kernel_count']} kernels"]
    total = sum(phase_times.values())
    if total:
        lines.append(f"Compile time by phase ({total:.3f} s): " + ", ".join(
            f"{p} {phase_times[p]:.3f} s" for p in PHASES if p in phase_times))
    for title, counter in (("Graph breaks", breaks), ("Recompiles", recompiles)):
        if counter:
            lines.append(f"{title}:")
            lines += [f"  {n} x {reason.splitlines()[0]}" for reason, n in counter.most_common()]
    lines.append(compile_times(aggregate=True))
    return "\n".join(lines)
