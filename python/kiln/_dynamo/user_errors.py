"""Errors that reach the user from a compile: the user's call chain, kiln's own frames hidden.

A graph break under fullgraph=True, or an error inside kiln's compiler that is not turned into
a warning (suppress_errors=False), propagates out of the frame hook. Raised as they are, they show
ten to twenty frames of kiln's interpreter, an internal exception chained above them ("During
handling of the above exception...") and only the innermost user line, without its text. Here
such an error keeps its type and message (callers and tests match on them), loses kiln's frames
and its chain, and gains a note with the user's call chain as Python prints a traceback:

    kiln._dynamo.exc.Unsupported: Tensor.item() reads a tensor's data into Python
      at /home/me/train.py:3 in helper
      hint: ...
    User code (most recent call last):
      File "/home/me/train.py", line 6, in f
        return helper(y) + 1
      File "/home/me/train.py", line 3, in helper
        return x.sum().item()
    (kiln's own frames are hidden: KILN_LOGS=+dynamo or kiln._dynamo.config.verbose = True shows them)

One kiln frame remains, the hook's entry, which raises it.
"""

import logging

from kiln._dynamo import config
from kiln.fx.traceback import format_stack

_HIDDEN_NOTE = "(kiln's own frames are hidden: KILN_LOGS=+dynamo or kiln._dynamo.config.verbose = True shows them)"


def show_kiln_frames():
    """Whether errors keep kiln's frames: kiln._dynamo.config.verbose, or KILN_LOGS=+dynamo."""
    return config.verbose or logging.getLogger("kiln._dynamo").isEnabledFor(logging.DEBUG)


def user_frames(error):
    """The user's call chain for `error`, [(file, line, function)] outermost first, or []."""
    frames = getattr(error, "frames", None) or getattr(error, "kiln_user_frames", None)
    if frames:
        return list(frames)
    location = getattr(error, "kiln_user_location", None)
    if location is not None:
        return [(location[0], location[1], getattr(error, "kiln_user_function", "?"))]
    return []


def without_kiln_frames(error):
    """`error` with no traceback of kiln's frames and a note naming the user's call chain; raise it
    `from None` (no chained internal exception)."""
    frames = user_frames(error)
    if frames and not getattr(error, "_kiln_user_note", False):
        error.add_note("User code (most recent call last):\n" + format_stack(frames).rstrip("\n") + "\n"
                       + _HIDDEN_NOTE)
        error._kiln_user_note = True
    return error.with_traceback(None)
