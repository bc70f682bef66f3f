"""kiln._dynamo.utils: compile counters and times at PyTorch's address (torch._dynamo.utils).

    from kiln._dynamo.utils import compile_times, counters
    print(compile_times())                   # seconds per compile step, every run of each
    headers, values = compile_times(repr="csv", aggregate=True)
    counters["graph_break"]                  # Counter: reason -> how many times
    counters["stats"]["unique_graphs"], counters["frames"]["ok"], counters["recompiles"]

They live in kiln/_logging/_metrics.py (its banner lists the counters and the compile phases),
below every stage that counts; KILN_LOGS=perf_hints prints their summary at exit.
"""

from kiln._logging._metrics import (  # noqa: F401
    PHASES, compilation_time_metrics, compile_times, counters, dynamo_timed, phase_times, reset_frame_count,
    summary,
)

__all__ = ["compilation_time_metrics", "compile_times", "counters", "dynamo_timed", "reset_frame_count"]
