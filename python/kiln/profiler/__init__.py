"""kiln.profiler: torch.profiler's API over kiln's ops (see README.md for what is measured).

    with kiln.profiler.profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        with kiln.profiler.record_function("model_inference"):
            model(x)
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=10))
"""

from kiln.profiler._events import EventList, FunctionEvent, FunctionEventAvg  # noqa: F401
from kiln.profiler.profiler import (  # noqa: F401
    ProfilerAction, ProfilerActivity, profile, record_function, schedule, supported_activities,
    tensorboard_trace_handler,
)

__all__ = ["ProfilerAction", "ProfilerActivity", "profile", "record_function", "schedule", "supported_activities",
           "tensorboard_trace_handler"]
