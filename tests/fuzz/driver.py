"""Runs fuzz programs in worker subprocesses: a signal or a hang is a failure of that program.

`run_range` starts `python -m fuzz.worker` on programs [start, end); when the worker dies (a
crash) or a step of a program (a mode, or the torch.compile reference of one) runs past `timeout`
seconds (a hang, the worker is killed), the program in flight is recorded as such and a new worker
resumes after it. Results are dicts:
{index, status: ok|mismatch|crash|hang, source, program, failures: {mode: [problems]}, detail}.

Note [The reference's own time]: when PyTorch's eager raised in an op that compiled code drops,
the worker compiles the program with torch.compile as the reference (worker.check). On a loaded
machine that is the slowest step by far: PyTorch's Inductor imports itself (the first time in a
worker) and runs a C++ compiler per kernel, seconds to tens of seconds, where kiln's compile of the
same program takes a fraction of a second (fuzz seed 181: six programs "hung" under 16 jobs, all
in this step). The worker announces the step (event "reference"), which gets the startup allowance
on top of `timeout`; a hang in it is reported as the reference's, not as kiln's.
"""

import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time

import oracle_settings

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON_DIR = os.path.join(os.path.dirname(TESTS_DIR), "python")


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([TESTS_DIR, PYTHON_DIR, env.get("PYTHONPATH", "")])
    env.setdefault("OMP_NUM_THREADS", "1")
    return oracle_settings.pin(env)  # oneDNN's AVX2 code on every machine (PyTorch's gelu)


def _worker(args, stderr):
    return subprocess.Popen([sys.executable, "-m", "fuzz.worker", *args], stdout=subprocess.PIPE,
                            stderr=stderr, env=_env(), start_new_session=True)


STARTUP_S = 120  # importing kiln and torch on a loaded machine, before the first program starts
# (and PyTorch's Inductor compiling the reference: Note [The reference's own time])


def _read_events(proc, timeout):
    """Yields parsed @@FUZZ events; yields ('timeout', None) when none came within `timeout` s
    (plus STARTUP_S for the first, and after a "reference" event)."""
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    fd = proc.stdout.fileno()
    wait = timeout + STARTUP_S
    pending = b""  # read but not yet complete lines: the fd is read directly, as a buffered reader
    # holding the next lines would leave select() waiting on an empty pipe (a worker that went
    # silent after two quick events was a hang in the mode before the last one)
    while True:
        ready = sel.select(wait)
        wait = timeout
        if not ready:
            yield "timeout", None
            return
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            if line.startswith(b"@@FUZZ "):
                event = json.loads(line[7:])
                if event["event"] == "reference":
                    wait = timeout + STARTUP_S
                yield "event", event


def _kill(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _describe_exit(code):
    if code is not None and code < 0:
        return f"killed by signal {signal.Signals(-code).name}"
    return f"exit status {code}"


def run_worker(args, timeout, on_result=None):
    """Runs one worker invocation to its end; returns (results, index of the first program not done)."""
    results, current = [], None
    with tempfile.TemporaryFile(mode="w+") as err:
        proc = _worker(args, err)
        hung, mode, in_reference = False, "", False
        for kind, ev in _read_events(proc, timeout):
            if kind == "timeout":
                hung = True
                break
            if ev["event"] == "start":
                current, mode, in_reference = ev, "", False
            elif ev["event"] == "mode":
                mode, in_reference = ev["label"], False
            elif ev["event"] == "reference":
                in_reference = True
            else:
                failures = ev["failures"]
                status = "mismatch" if failures else "ok"
                res = dict(index=ev["index"], status=status, source=current["source"],
                           program=current["program"], failures=failures, detail="")
                results.append(res)
                on_result and on_result(res)
                current = None
        if hung:
            _kill(proc)
        else:
            proc.wait()
        if current is not None:
            err.seek(0)
            tail = err.read()[-3000:]
            # A signal is kiln's crash; a Python traceback out of the worker is the fuzzer's own bug.
            status = "hang" if hung else "crash" if proc.returncode < 0 else "error"
            detail = f"no result after {timeout}s" if hung else _describe_exit(proc.returncode)
            if in_reference:
                detail = f"torch.compile (the reference) gave {detail}" if hung else \
                    f"torch.compile (the reference) ended with {detail}"
            res = dict(index=current["index"], status=status, source=current["source"],
                       program=current["program"], failures={mode: [f"{status}: {detail}"]},
                       detail=f"{status} in mode {mode}: {detail}\n{tail}")
            results.append(res)
            on_result and on_result(res)
            return results, current["index"] + 1
        if proc.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"fuzz worker failed outside a program ({_describe_exit(proc.returncode)}):\n"
                               + err.read()[-3000:])
    return results, None


def run_range(seed, start, end, backends, timeout=120, on_result=None):
    """Every program in [start, end) of `seed`, in as many workers as crashes and hangs need."""
    results = []
    while start < end:
        got, resume = run_worker(["--seed", str(seed), "--start", str(start), "--end", str(end),
                                  "--backends", ",".join(backends)], timeout, on_result)
        results += got
        if resume is None:
            break
        start = resume
    return results


def run_programs(paths, backends, timeout=120):
    """Every program stored in `paths` (JSON files of one Program each), in as few workers as
    crashes and hangs allow; result i is paths[i]'s."""
    results, done = [], 0
    while done < len(paths):
        args = [a for p in paths[done:] for a in ("--program", p)]
        got, resume = run_worker(args + ["--backends", ",".join(backends)], timeout)
        for r in got:
            r["index"] += done
        results += got
        if resume is None:
            break
        done += resume
    return results


def run_program(program_json, only, backends, timeout=120):
    """One program (a Program's JSON) in one mode: its single result."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(program_json, f)
    try:
        got, _ = run_worker(["--program", f.name, "--only", only, "--backends", ",".join(backends)], timeout)
    finally:
        os.unlink(f.name)
    return got[0] if got else None


def now():
    return time.monotonic()
