"""kiln._logging._structured: KILN_TRACE=dir, the compile's events as JSON lines (PyTorch's TORCH_TRACE).

    KILN_TRACE=/tmp/trace python train.py && python tools/compile_report.py /tmp/trace

Every event is one line of JSON in `<dir>/kiln_trace_<pid>_<time>.jsonl`: `event` (its kind), `time`,
`pid`, `compile_id` ("0/1", kiln/_guards.py; null outside a compile) with `frame_id` and
`frame_compile_id`, the event's own fields, and for the long ones a `payload` (a graph's code, a
kernel's source). The kinds, and who writes them:

    compile_start, compile_end       _dynamo/compile_events.py  function, file, line, user stack; status
                                                                (compiled, eager: with the reason, error)
    graph_break                      _dynamo/compile_events.py  reason, hint, file, line, source text
    recompile                        _dynamo/compile_events.py  the failed guards, the short reason
    internal_error                   _dynamo/compile_events.py  kiln's compiler failed at a graph's first call
    guards                           _dynamo/guards.py          the guard tree (payload)
    dynamo_graph                     _dynamo/output_graph.py    the FX graph (payload)
    aot_joint_graph, aot_forward_graph, aot_backward_graph, aot_inference_graph   _functorch/aot_autograd.py
    inductor_output_code             _inductor/compile_fx.py    kernels (name, source), fallbacks, code
    compile_phase                    _logging/_metrics.py       phase, step, seconds (exclusive)

The setting is read at `import kiln` (set_trace_dir changes it from Python); writing never raises:
a trace that cannot be written is switched off with one warning, and the compile goes on.
"""

import json
import logging
import os
import sysconfig
import threading
import time
import traceback

from kiln._guards import current_compile_id

TRACE_ENV_VAR = "KILN_TRACE"
log = logging.getLogger("kiln._logging")
_STDLIB = sysconfig.get_paths()["stdlib"] + os.sep
_lock = threading.Lock()
_state = {"dir": None, "pid": None, "file": None}


def set_trace_dir(path):
    """Writes trace events under `path` from now on (None stops)."""
    with _lock:
        if _state["file"] is not None:
            _state["file"].close()
        _state.update(dir=os.path.abspath(path) if path else None, pid=None, file=None)


def init_trace():
    set_trace_dir(os.environ.get(TRACE_ENV_VAR) or None)


def enabled():
    return _state["dir"] is not None


def trace_file():
    """The file this process writes (None until its first event)."""
    return _state["file"].name if _state["file"] is not None else None


def _open():
    # a file per process: a DataLoader worker forked after the first event writes its own
    if _state["pid"] != os.getpid():
        os.makedirs(_state["dir"], exist_ok=True)
        stamp = time.strftime("%Y%m%d_%H%M%S")
        _state["file"] = open(os.path.join(_state["dir"], f"kiln_trace_{os.getpid()}_{stamp}.jsonl"), "a")
        _state["pid"] = os.getpid()
    return _state["file"]


def trace_structured(event, metadata=None, payload_fn=None, compile_id=None):
    """Writes one event. `metadata`: a dict, or a function returning one (called only when
    tracing); `payload_fn`: a function returning the long text; `compile_id`: the current one
    when None."""
    if _state["dir"] is None:
        return
    cid = compile_id if compile_id is not None else current_compile_id()
    record = {"event": event, "time": time.time(), "pid": os.getpid(),
              "compile_id": str(cid) if cid is not None else None,
              "frame_id": getattr(cid, "frame_id", None), "frame_compile_id": getattr(cid, "frame_compile_id", None)}
    try:
        record.update(metadata() if callable(metadata) else metadata or {})
        if payload_fn is not None:
            record["payload"] = payload_fn()
        line = json.dumps(record, default=str)
    except Exception as e:  # noqa: BLE001 - a field that cannot be described must not stop a compile
        record["trace_error"] = f"{type(e).__name__}: {e}"
        line = json.dumps({k: v for k, v in record.items() if k != "payload"}, default=str)
    with _lock:
        if _state["dir"] is None:
            return
        try:
            f = _open()
            f.write(line + "\n")
            f.flush()
        except OSError as e:
            log.warning("KILN_TRACE: cannot write under %s (%s); tracing is off from now on", _state["dir"], e)
            _state.update(dir=None, pid=None, file=None)


def user_stack(skip_dir, limit=8):
    """The innermost frames outside `skip_dir` (kiln's package), outermost first, as
    [{"file", "line", "function", "code"}]: where the user's program asked for the compile (the
    standard library's frames between it and kiln, such as contextlib's, dropped too)."""
    frames = [f for f in traceback.extract_stack()[:-1] if not f.filename.startswith(skip_dir)]
    while frames and frames[-1].filename.startswith(_STDLIB):
        frames.pop()
    return [{"file": f.filename, "line": f.lineno, "function": f.name, "code": (f.line or "").strip()}
            for f in frames[-limit:]]
