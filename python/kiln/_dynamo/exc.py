"""kiln._dynamo.exc: why capture stopped.

`Unsupported` is a graph break: the symbolic interpreter met something it cannot model. It carries
the reason, the user's file:line and a one-line suggestion; with fullgraph=True it reaches the user.
"""

import functools
import os
import sysconfig


class Unsupported(RuntimeError):
    """Something in the frame cannot be put in a graph; the graph breaks there (or, under
    fullgraph=True, this is raised).

    `costly`: a break users rarely mean and pay for on every call (`Tensor.item()`, a C function
    kiln cannot trace): it warns once per location even with no KILN_LOGS set (break_warnings.py).
    `frames`: the user's call chain [(file, line, function)], outermost first, kiln's and the
    standard library's frames left out; `location` names its innermost frame, and `inside` the
    library function the break happened in, when it was not the user's own code (copy.deepcopy)."""

    def __init__(self, reason, suggestion=None, *, location=None, user_stack=None, costly=None):
        self.reason = reason
        self.suggestion = suggestion
        self.location = location
        self.user_stack = list(user_stack or [])
        self.costly = costly
        self.frames = []
        self.inside = None
        super().__init__(self._text())

    def _text(self):
        text = self.reason
        if self.location:
            text += f"\n  at {self.location}"
        if self.inside:
            text += f"\n  inside {self.inside}"
        if self.suggestion:
            text += f"\n  hint: {self.suggestion}"
        return text

    def locate(self, location, user_stack, frames=None):
        """Attach where it happened, once: the innermost frame of the user's own code in `frames`
        (the translator's call chain, outermost first), else `location`."""
        if self.location is None:
            self.location = location
            self.user_stack = list(user_stack)
            if frames:
                own = [f for f in frames if is_user_file(f[0])]
                self.frames = own or list(frames)
                innermost = self.frames[-1]
                if frames[-1] != innermost:  # it broke inside a library function the user called
                    self.location = _where(innermost)
                    self.inside = f"{frames[-1][2]} ({frames[-1][0]}:{frames[-1][1]})"
            self.args = (self._text(),)
        return self


def _where(frame):
    return f"{frame[0]}:{frame[1]} in {frame[2]}"


_KILN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_STDLIB_DIRS = tuple({os.path.abspath(p) + os.sep for p in (sysconfig.get_paths()["stdlib"],
                                                         sysconfig.get_paths()["platstdlib"])})


@functools.lru_cache(maxsize=4096)  # asked for every frame of every node's stack
def is_user_file(filename):
    """Whether a frame of `filename` is the user's code: not kiln's, not the standard library's,
    not frozen or kiln-generated (`<frozen ...>`, `<kiln ...>`). Third-party packages count as the user's (their code is what
    the user called, and the place to change it)."""
    if filename.startswith("<"):  # `python -c`'s <string>, a notebook's cell: the user's; <frozen ...>: not
        return not filename.startswith(("<frozen", "<kiln"))
    path = os.path.abspath(filename)
    if path.startswith(_KILN_DIR + os.sep):
        return False
    return not path.startswith(_STDLIB_DIRS) or "site-packages" in path


class SpecializeShapes(Exception):
    """The trace over symbolic sizes cannot be trusted (Note [Symbolic layouts checked at the hints],
    symbolic_layouts.py): translation starts over with static shapes for this frame."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


class BackendCompilerFailed(RuntimeError):
    """The backend raised while compiling a captured graph."""

    def __init__(self, backend_name, inner):
        self.backend_name, self.inner_exception = backend_name, inner
        super().__init__(f"backend={backend_name!r} raised:\n{type(inner).__name__}: {inner}")


def unimplemented(reason, suggestion=None, costly=None):
    raise Unsupported(reason, suggestion, costly=costly)
