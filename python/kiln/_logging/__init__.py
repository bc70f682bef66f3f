"""kiln._logging: KILN_LOGS and set_logs, as torch._logging (TORCH_LOGS).

    KILN_LOGS=help python train.py                    # every name, with what it shows (a ValueError)
    KILN_LOGS="+dynamo,graph_breaks,recompiles" python train.py
    kiln._logging.set_logs(dynamo=logging.DEBUG, graph_breaks=True)

KILN_TRACE=dir writes the compile's events as JSON lines (_structured.py; tools/compile_report.py
renders them), and _metrics.py keeps the counters and compile times kiln._dynamo.utils shows;
KILN_LOGS=perf_hints prints their summary at exit.

A module that logs an artifact writes through getArtifactLogger(__name__, "graph_breaks").debug(...)
and its ordinary messages through logging.getLogger(__name__); names are registered in
_registrations.py, and _internal.py holds the parsing and the handlers (its banner says how).
"""

import atexit

from kiln._logging import _registrations  # noqa: F401  (every name, before the setting is read)

from kiln._logging import _internal, _metrics, _structured
from kiln._logging._internal import DEFAULT_LOGGING, getArtifactLogger, set_logs  # noqa: F401
from kiln._logging._structured import trace_structured  # noqa: F401

__all__ = ["DEFAULT_LOGGING", "getArtifactLogger", "set_logs", "trace_structured"]


def _init_logs():
    """Reads KILN_LOGS and KILN_TRACE (at `import kiln`)."""
    _internal._init_logs()
    _structured.init_trace()


def _print_summary_at_exit():
    # as PyTorch's dump_compile_times, at exit; only for a process that compiled something
    if _internal.artifact_enabled("perf_hints") and _metrics.counters["frames"]["total"]:
        getArtifactLogger("kiln._dynamo.utils", "perf_hints").debug("%s", _metrics.summary())


atexit.register(_print_summary_at_exit)
