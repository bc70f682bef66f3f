"""kiln._dynamo.exc: why capture stopped.

`Unsupported` is a graph break: the symbolic interpreter met something it cannot model. It carries
the reason, the user's file:line and a one-line suggestion; with fullgraph=True it reaches the user.
"""


class Unsupported(RuntimeError):
    """Something in the frame cannot be put in a graph; the graph breaks there (or, under
    fullgraph=True, this is raised)."""

    def __init__(self, reason, suggestion=None, *, location=None, user_stack=None):
        self.reason = reason
        self.suggestion = suggestion
        self.location = location
        self.user_stack = list(user_stack or [])
        super().__init__(self._text())

    def _text(self):
        text = self.reason
        if self.location:
            text += f"\n  at {self.location}"
        if self.suggestion:
            text += f"\n  hint: {self.suggestion}"
        return text

    def locate(self, location, user_stack):
        """Attach where it happened (the innermost user frame), once."""
        if self.location is None:
            self.location = location
            self.user_stack = list(user_stack)
            self.args = (self._text(),)
        return self


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


def unimplemented(reason, suggestion=None):
    raise Unsupported(reason, suggestion)
