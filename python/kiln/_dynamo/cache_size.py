"""The recompile limit: when a code object has compiled too often, and the warning that says why.

Each new set of failed guards compiles a frame again; past config.recompile_limit entries
(cache_size_limit is its old name) the frame runs eagerly from then on, with one warning per code
object. The warning leads with the short reason (the last failed guard, as `x: size mismatch ...`),
then the fix that applies: when input sizes kept changing and compiled statically, which dims to
mark dynamic; otherwise the general ones. It is attributed to the user's line that made the call,
so Python's warning filters and `-W error` see the user's module, not kiln's.
"""

import os
import sys
import warnings
import weakref

from kiln._dynamo import config
from kiln._dynamo.source import LocalSource

_KILN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_warned = weakref.WeakSet()  # codes already warned about


def exceeds_recompile_limit(entries):
    return len(entries) >= config.recompile_limit


def warn_recompile_limit(code, name, last_reason, frame_state, dynamic, static_reason):
    """One warning per code object. `name`: the user's name for the function; `last_reason`: the newest entry's failed guard (check_verbose's
    text); `frame_state`: source name -> (sizes, strides) seen, None where compiles differed;
    `dynamic`: kiln.compile's argument; `static_reason`: why this frame compiles statically, if it
    must (Note [Symbolic layouts checked at the hints])."""
    if code in _warned:
        return
    _warned.add(code)
    limit = config.recompile_limit
    message = (f"kiln._dynamo hit config.recompile_limit ({limit}) for {name} ({code.co_filename}:"
               f"{code.co_firstlineno}): {_short(last_reason)}. {name} runs eagerly from now on.\n"
               f"{_fix(code, frame_state, dynamic, static_reason, limit)}\n"
               f'To log every recompilation\'s reason, use KILN_LOGS="recompiles".')
    warn_at_user_frame(message, UserWarning)


def _short(reason):
    """`x: size mismatch at index 0: expected 3, actual 4` from the guard tree's
    `TENSOR_MATCH: check_tensor(L['x'], ...) -- size mismatch ...  # L['x'] (from f.py:3 in f)`
    (dynamo/guards.cc: "text -- detail  # origin"); the whole text when it has another form."""
    text, _, origin = reason.partition("  # ")
    check, _, detail = text.partition(" -- ")
    if not detail:
        return reason
    subject = origin.split(" (from ")[0].strip() or check
    local = subject[3:-2] if subject.startswith("L['") and subject.endswith("']") else subject
    return f"{local}: {detail}"


def _fix(code, frame_state, dynamic, static_reason, limit):
    raise_limit = f"raise kiln._dynamo.config.recompile_limit (now {limit})"
    varied = _varied_locals(code, frame_state)
    if static_reason is not None:
        return (f"To keep it compiled: it compiles for static sizes only ({static_reason}), so each new size is "
                f"a new entry; {raise_limit}.")
    if varied and dynamic is False:
        names = " and ".join(f"{local} (dim {', '.join(map(str, dims))})" for local, dims in varied)
        return (f"To keep it compiled: the sizes of {names} changed between calls, and dynamic=False compiles "
                f"each size anew (mark_dynamic is ignored under it): compile with dynamic=True or without "
                f"dynamic=False, or {raise_limit}.")
    if varied and not config.automatic_dynamic_shapes and dynamic is None:
        marks = ", ".join(f"kiln._dynamo.mark_dynamic({local}, {dims[0] if len(dims) == 1 else list(dims)})"
                          for local, dims in varied)
        return (f"To keep it compiled: {marks} before the call, or kiln.compile(..., dynamic=True), "
                f"or {raise_limit}.")
    return ("To keep it compiled: if tensor sizes change between calls, kiln._dynamo.mark_dynamic(tensor, dim) "
            f"before the call or kiln.compile(..., dynamic=True); if the recompiles are expected, {raise_limit}.")


def _varied_locals(code, frame_state):
    """[(argument name, dims whose size changed between compiles)] for the frame's own locals."""
    by_source = {LocalSource(n).name(): n for n in code.co_varnames}
    found = []
    for key, (sizes, _) in frame_state.items():
        if key not in by_source:  # an int argument's entry (dynamic_ints.py), or not a local
            continue
        dims = [d for d, s in enumerate(sizes) if s is None]
        if dims:
            found.append((by_source[key], dims))
    return found


def user_frame():
    """The innermost frame outside kiln's package: the user's line whose call is being compiled."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_KILN_DIR):
        frame = frame.f_back
    return frame


def warn_at_user_frame(message, category):
    """warnings.warn(message, category) as if called at the user's line (as a stacklevel that
    skips every kiln frame would): the user's module for filters, its registry for 'once'. No
    module_globals, as warnings.warn passes none: with them the source line is asked of the
    module's loader, and `python -c`'s __main__ loader raises ImportError."""
    frame = user_frame()
    if frame is None:
        warnings.warn(message, category, stacklevel=2)
        return
    module_globals = frame.f_globals
    warnings.warn_explicit(message, category, frame.f_code.co_filename, frame.f_lineno,
                           module=module_globals.get("__name__", "<string>"),
                           registry=module_globals.setdefault("__warningregistry__", {}))
