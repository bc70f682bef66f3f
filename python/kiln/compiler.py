"""kiln.compiler: PyTorch's public torch.compiler functions, over kiln._dynamo. kiln._dynamo is
imported on first use (it would add ~100 ms to `import kiln`). is_compiling() is False when called
eagerly and True inside a function kiln.compile captures: the interpreter answers it at trace
time (kiln._dynamo.variables.kiln_fns), so code can branch on it as in PyTorch.
"""

__all__ = ["reset", "disable", "is_compiling", "is_dynamo_compiling", "allow_in_graph"]


def reset():
    """Forgets every compiled function's cached graphs (kiln._dynamo.reset)."""
    from kiln import _dynamo

    _dynamo.reset()


def disable(fn=None, recursive=True, *, reason=None):
    """Runs `fn` eagerly even when called from compiled code; as a decorator when fn is None."""
    from kiln._dynamo import eval_frame

    return eval_frame.disable(fn, recursive=recursive)


def allow_in_graph(fn):
    """Calls to `fn` become one graph node instead of being traced into (kiln._dynamo.allow_in_graph)."""
    from kiln import _dynamo

    return _dynamo.allow_in_graph(fn)


def is_compiling():
    """True while kiln.compile captures the calling code, False when it runs eagerly."""
    return False


def is_dynamo_compiling():
    """As is_compiling (kiln has one capture mechanism)."""
    return False
