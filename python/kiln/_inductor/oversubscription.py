"""Thread oversubscription: kiln's kernels asking for more threads than the machine has cores free.

Generated kernels split their outer loop over kiln.get_num_threads() threads and then wait for the
slowest one. When other processes keep the cores busy, a kernel thread waits for a core while the
others wait for it, at every kernel: a compiled training step was measured 10x slower than eager
on a loaded 2-core machine (eager's small ops mostly run on one thread), and kiln.set_num_threads(1)
fixed it. Nothing failed, so nobody was told.

The check, after Inductor compiles a graph: since the last measurement (the first starts when
kiln.compile picks Inductor: a graph whose kernels are cached on disk compiles in milliseconds, too
short to measure), how many cores did *other* processes keep busy? That is the busy time /proc/stat counts on the CPUs this process may use, less this
process's own CPU time, over the wall time. When kiln's
threads exceed the cores left free by more than half a core, one warning (at the user's line, and
on the perf_hints log) says so and gives the fix. Off with KILN_CHECK_THREADS=0 or
kiln._inductor.config.check_thread_oversubscription = False; without /proc/stat (not Linux) the
1-minute load average stands in for the other processes' load.
"""

import logging
import os
import time

import kiln
from kiln._inductor import config
from kiln._logging import getArtifactLogger

perf_hints_log = getArtifactLogger(__name__, "perf_hints")
_MIN_WINDOW_S = 0.1  # /proc/stat counts in 10 ms ticks: a shorter window is too coarse to tell
_warned = [False]


def _cpus():
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return list(range(os.cpu_count() or 1))


def _busy_seconds(cpus):
    """Seconds the CPUs in `cpus` spent busy since boot (/proc/stat), or None where unreadable."""
    try:
        with open("/proc/stat") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    wanted = {f"cpu{c}" for c in cpus}
    ticks = 0
    for line in lines:
        fields = line.split()
        if fields and fields[0] in wanted:
            # user nice system idle iowait irq softirq steal: all but idle and iowait are busy
            values = [int(v) for v in fields[1:9]]
            ticks += sum(values) - values[3] - values[4]
    return ticks / os.sysconf("SC_CLK_TCK")


class Sample:
    """The machine's busy time, this process's CPU time and the wall clock, at one moment."""

    def __init__(self):
        self.cpus = _cpus()
        self.busy = _busy_seconds(self.cpus)
        self.own = time.process_time()
        self.wall = time.perf_counter()


def others_busy_cores(start, end):
    """Cores other processes kept busy between two Samples (None: window too short to tell)."""
    window = end.wall - start.wall
    if start.busy is None or end.busy is None:
        try:
            return os.getloadavg()[0]
        except (AttributeError, OSError):
            return None
    if window < _MIN_WINDOW_S:
        return None
    return max(0.0, ((end.busy - start.busy) - (end.own - start.own)) / window)


def oversubscribed(threads, cpus, others):
    """Whether `threads` kernel threads exceed the cores that `others` busy cores leave free of `cpus`."""
    return threads > 1 and others is not None and threads > cpus - others + 0.5


def check():
    """After a graph's compile: warns once if kiln's threads exceed the cores other processes have
    left free since the last measurement."""
    if _warned[0] or not config.check_thread_oversubscription:
        return
    end = Sample()
    threads, cpus = kiln.get_num_threads(), len(end.cpus)
    others = others_busy_cores(_window_start[0], end)
    if others is None:
        return  # too short: measured later over a longer window
    _window_start[0] = end
    if not oversubscribed(threads, cpus, others):
        return
    _warned[0] = True
    message = (f"kiln: other processes keep {others:.1f} of this machine's {cpus} cores busy, and kiln runs "
               f"each compiled kernel on {threads} threads, more than the cores left free; kernels then wait "
               f"for each other and a compiled step can run many times slower than eager. Fix: "
               f"kiln.set_num_threads({max(1, int(cpus - others))}) (or OMP_NUM_THREADS) before running, or "
               f"free the cores. (KILN_CHECK_THREADS=0 turns this check off.)")
    perf_hints_log.debug("%s", message)
    from kiln._dynamo.cache_size import warn_at_user_frame

    warn_at_user_frame(message, RuntimeWarning)


# Measured from the first kiln.compile(..., backend="inductor") (which imports this module): the
# program's own set-up is part of the window, while a graph with cached kernels compiles in a few
# milliseconds, too short to tell
_window_start = [Sample()]
