"""Costly graph breaks warn once per location, even with no KILN_LOGS set (as PyTorch warns about
`Tensor.item()` and about C functions it cannot trace).

Most graph breaks are visible only through KILN_LOGS=graph_breaks; a user who never sets it does
not learn why a compiled step is slow. Two kinds are both common and rarely meant: reading a
tensor's data into Python (`.item()`, `int(t)`: the graph ends, the device syncs, and the rest of
the function runs in a new graph), and calling a C function kiln does not model (`time.time()`, an
extension's function). Such a break (Unsupported.costly) issues one UserWarning attributed to the
user's line (so `-W error` and warning filters see the user's module), once per file:line.
"""

import re
import warnings

_warned = set()  # (filename, line) already warned about
_LOCATION = re.compile(r"^(?P<file>.*):(?P<line>\d+) in (?P<name>.*)$")
_WHY = {
    "item": "reading a tensor's data into Python ends the graph and waits for the computation",
    "c_function": "the call runs in Python between two graphs",
}


def warn_costly_break(error):
    """One warning for `error` (an Unsupported) if it is costly and its location is new."""
    if error is None or not getattr(error, "costly", None):
        return
    where = _user_location(error)
    if where is None or where[:2] in _warned:
        return
    _warned.add(where[:2])
    filename, line, name = where
    inside = f" (inside {error.inside})" if getattr(error, "inside", None) else ""  # a library's line
    message = (f"kiln.compile: graph break in {name} ({filename}:{line}){inside}: {error.reason}; "
               f"{_WHY.get(error.costly, 'it costs time on every call')}.\n  hint: {error.suggestion}\n"
               f"  (warned once per line; KILN_LOGS=graph_breaks lists every graph break)")
    warnings.warn_explicit(message, UserWarning, filename, line)


def _user_location(error):
    if error.frames:
        return error.frames[-1]
    m = _LOCATION.match(error.location or "")
    return (m.group("file"), int(m.group("line")), m.group("name")) if m else None


def reset():
    """kiln._dynamo.reset(): warn again."""
    _warned.clear()
