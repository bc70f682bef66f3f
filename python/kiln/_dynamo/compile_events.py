"""What Dynamo reports about each compile besides its logs: counters and KILN_TRACE events.

convert_frame.py calls these at the points it already logs: a frame's compile starting and ending
(frame_compile), a graph break (graph_break), a recompile (recompile). Each updates
kiln._dynamo.utils.counters under PyTorch's names and writes its trace event (kiln/_logging/
_structured.py lists them) with the user's file, line and source text, so that
tools/compile_report.py can show a break or a recompile next to the code that caused it.
"""

import contextlib
import linecache
import os
import re
import threading

from kiln._dynamo.cache_size import _short
from kiln._logging import _structured
from kiln._logging._metrics import counters, dynamo_timed

_KILN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LOCATION = re.compile(r"^(?P<file>.*):(?P<line>\d+)(?: in (?P<function>.*))?$")


def _where(location):
    """{"file", "line", "function", "code"} of a `file:line in function` location (the
    interpreter's tx.location()), with the line's source text."""
    match = _LOCATION.match(location or "")
    if match is None:
        return {"file": None, "line": None, "function": None, "code": "", "location": location}
    line = int(match["line"])
    return {"file": match["file"], "line": line, "function": match["function"],
            "code": linecache.getline(match["file"], line).strip(), "location": location}


class _Outcome:
    result = None
    reason = None  # why the frame runs eagerly, when it does


_local = threading.local()


def _current():
    """This thread's compiles in progress, innermost last (one can start inside another's backend)."""
    return _local.__dict__.setdefault("outcomes", [])


@contextlib.contextmanager
def frame_compile(code, name):
    """Around one compile of `code` (inside its compile context): counts it in frames total/ok,
    times it as the dynamo phase, and writes compile_start and compile_end (status: compiled, or
    eager when the frame runs as written, or error)."""
    counters["frames"]["total"] += 1
    _structured.trace_structured("compile_start", lambda: {
        "function": name, "code_name": code.co_name, "file": code.co_filename, "line": code.co_firstlineno,
        "resume": code.co_name.startswith("__resume_in_"), "user_stack": _structured.user_stack(_KILN_DIR)})
    outcome = _Outcome()
    status, error = "error", None
    _current().append(outcome)
    try:
        with dynamo_timed("_compile.compile_inner", phase="dynamo"):
            yield outcome
        status = "compiled" if outcome.result is not None else "eager"
    except BaseException as e:
        error = _describe(e)
        raise
    finally:
        _current().pop()
        if status == "compiled":
            counters["frames"]["ok"] += 1
        _structured.trace_structured("compile_end", {"function": name, "status": status, "error": error,
                                                     "reason": outcome.reason})


def _describe(error):
    text = str(error)
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}"


def runs_eagerly(reason):
    """The frame being compiled runs as written instead (a SkipFrame's reason)."""
    if _current():
        _current()[-1].reason = reason


def internal_error(error):
    """kiln's compiler failed (Note [Internal errors] in convert_frame.py): the frame runs eagerly.
    During the frame's translation it is the compile's reason; at a graph's first call (AOT,
    Inductor) an event of its own, under the same compile ID."""
    inner = getattr(error, "inner_exception", None) or error
    counters["stats"]["internal_errors"] += 1
    if _current():
        _current()[-1].reason = f"kiln's compiler failed: {_describe(inner)}"
    else:
        _structured.trace_structured("internal_error", {"error": _describe(inner)})


def graph_break(error, whole_frame=None):
    """A graph break (an exc.Unsupported, or None for a break with no reason); `whole_frame`: why
    the frame then runs eagerly as a whole, if it does."""
    reason = getattr(error, "reason", None) or (str(error) if error is not None else "graph break")
    counters["graph_break"][reason] += 1
    if not _structured.enabled():
        return
    where = _where(getattr(error, "location", None))
    _structured.trace_structured("graph_break", {
        "reason": reason, "hint": getattr(error, "suggestion", None), **where,
        "user_stack": [_where(loc) for loc in getattr(error, "user_stack", [])], "whole_frame": whole_frame})


def recompile(code, name, reasons, limit_hit=False):
    """`code` compiles again: `reasons` are its cached entries' failed guards (newest first);
    `limit_hit`: past config.recompile_limit, it runs eagerly instead (counted apart)."""
    short = _short(reasons[0]) if reasons else "(unknown)"
    if limit_hit:
        counters["stats"]["recompile_limit_hit"] += 1
    else:
        counters["recompiles"][f"{name}: {short}"] += 1
    _structured.trace_structured("recompile", {"function": name, "file": code.co_filename, "line": code.co_firstlineno,
                                               "reason": short, "reasons": list(reasons), "limit_hit": limit_hit})
