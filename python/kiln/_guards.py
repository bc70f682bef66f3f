"""Compile IDs: which frame, and which of its compiles, a log line, a graph or a kernel came from.

As PyTorch's torch._guards.CompileId: `[frame_id/frame_compile_id]`, where frame_id numbers the
code objects kiln compiles (a resume function after a graph break is a frame of its own) in the
order they are first compiled, and frame_compile_id counts that frame's compiles (a recompile after
a guard failure is `/1`, `/2`, ...). The id is current while a frame is translated and its graphs
are compiled (AOT, Inductor), so every log line, debug folder and trace event of that compile can
name it.
"""

import contextlib
import dataclasses
import threading
import weakref


@dataclasses.dataclass(frozen=True)
class CompileId:
    frame_id: int
    frame_compile_id: int

    def __str__(self):
        return f"{self.frame_id}/{self.frame_compile_id}"


_frame_ids = weakref.WeakKeyDictionary()   # code object -> frame id
_compile_counts = weakref.WeakKeyDictionary()  # code object -> compiles started
_next_frame_id = [0]
_lock = threading.Lock()
_local = threading.local()


def next_compile_id(code):
    """The id of a compile of `code` that is about to start."""
    with _lock:
        frame_id = _frame_ids.get(code)
        if frame_id is None:
            frame_id = _frame_ids[code] = _next_frame_id[0]
            _next_frame_id[0] += 1
        count = _compile_counts.get(code, 0)
        _compile_counts[code] = count + 1
    return CompileId(frame_id, count)


def reset_compile_ids():
    """kiln._dynamo.reset(): frames are numbered from 0 again (as torch._dynamo.reset())."""
    with _lock:
        _frame_ids.clear()
        _compile_counts.clear()
        _next_frame_id[0] = 0


class CompileContext:
    """The compile in progress on this thread (PyTorch's CompileContext, reduced to its id)."""

    @staticmethod
    def current_compile_id():
        """The CompileId of the compile running on this thread, or None outside one."""
        stack = getattr(_local, "stack", None)
        return stack[-1] if stack else None


@contextlib.contextmanager
def compile_context(compile_id):
    """Makes `compile_id` current for the duration (compiles can nest: a frame compiled while
    another's backend runs user code)."""
    stack = _local.__dict__.setdefault("stack", [])
    stack.append(compile_id)
    try:
        yield compile_id
    finally:
        stack.pop()


def current_compile_id():
    return CompileContext.current_compile_id()
