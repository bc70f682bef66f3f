"""Fake-tensor exceptions raised by data-dependent ops without a ShapeEnv (PyTorch's
torch._subclasses.fake_tensor.DynamicOutputShapeException / DataDependentOutputException).
kiln._subclasses.fake_tensor re-exports them."""


def _overload(name):
    # "aten.nonzero.default" -> kiln.ops.aten.nonzero.default (None when it cannot be resolved)
    try:
        import kiln

        ns, op, overload = name.split(".")
        return getattr(getattr(getattr(kiln.ops, ns), op), overload)
    except (AttributeError, ValueError):
        return None


class DynamicOutputShapeException(RuntimeError):
    """An op whose output shape depends on data (nonzero, masked_select) ran on fake tensors
    without a ShapeEnv to give it an unbacked size. `func` is the op."""

    def __init__(self, func):
        super().__init__(func)
        self.func = _overload(func) if isinstance(func, str) else func


class DataDependentOutputException(RuntimeError):
    """An op whose output is data (item() / _local_scalar_dense) ran on fake tensors without a
    ShapeEnv. `func` is the op."""

    def __init__(self, func):
        super().__init__(func)
        self.func = _overload(func) if isinstance(func, str) else func
