"""kiln.jit: PyTorch's TorchScript names, for programs that script or trace a model on the way.
kiln has no TorchScript: script() and trace() return the function or module unchanged (it still runs
eagerly; compile it with kiln.compile for speed), the decorators (ignore, unused, export,
_overload_method) return what they decorate, Final is typing.Final, is_scripting() and
is_tracing() are False, and save()/load() raise NotImplementedError pointing at kiln.save/kiln.load.
"""

from typing import Final  # noqa: F401  (kiln.jit.Final[int] in class annotations, as in TorchScript)


class Error(Exception):
    """An error raised by TorchScript (torch.jit.Error, also torch.JITException); kiln runs no
    TorchScript, so nothing raises it, but programs name it in `except` clauses."""


def script(obj, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """Returns `obj` unchanged: kiln has no TorchScript. Use kiln.compile(obj) to compile a function
    or module."""
    return obj


def trace(func, example_inputs=None, *args, **kwargs):
    """Returns `func` unchanged (example inputs are not run): kiln has no TorchScript. Use
    kiln.compile(func) to compile it, or kiln.fx / kiln._dynamo.explain to see its graph."""
    return func


def trace_module(mod, inputs, *args, **kwargs):
    """Returns `mod` unchanged (see trace)."""
    return mod


def ignore(drop=False, **kwargs):
    """@ignore or @ignore(drop=...): leaves the function as Python (everything is, in kiln)."""
    if callable(drop):
        return drop
    return lambda fn: fn


def unused(fn):
    return fn


def export(fn):
    return fn


def _overload_method(func):
    return func


def _overload(func):
    return func


def is_scripting():
    return False


def is_tracing():
    return False


def save(m, f, _extra_files=None):
    raise NotImplementedError("kiln.jit.save(): kiln has no TorchScript archives; save the module's "
                              "state with kiln.save(module.state_dict(), f)")


def load(f, map_location=None, _extra_files=None, _restore_shapes=False):
    raise NotImplementedError("kiln.jit.load(): kiln has no TorchScript archives; load a state dict with "
                              "kiln.load(f) and module.load_state_dict(...)")
