"""Grad modes: no_grad, enable_grad, set_grad_enabled, inference_mode (context managers and
decorators, as in PyTorch). The flag lives in C++ (autograd/grad_mode.h), per thread."""

import functools

from kiln import _C


class _DecoratorContextManager:
    """A context manager that also decorates functions (and generator functions)."""

    def __call__(self, fn):
        import inspect

        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def gen_wrapper(*args, **kwargs):
                gen = fn(*args, **kwargs)
                with self.clone():
                    value = next(gen)
                while True:
                    try:
                        with self.clone():
                            sent = yield value
                        with self.clone():
                            value = gen.send(sent)
                    except StopIteration as stop:
                        return stop.value

            return gen_wrapper

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)

        return wrapper

    def clone(self):
        return self.__class__()


class no_grad(_DecoratorContextManager):
    """Ops inside record no backward graph (their outputs do not require grad)."""

    def __enter__(self):
        self.prev = _C.is_grad_enabled()
        _C._set_grad_enabled(False)

    def __exit__(self, *exc):
        _C._set_grad_enabled(self.prev)


class enable_grad(_DecoratorContextManager):
    """Turns grad mode back on inside a no_grad region."""

    def __enter__(self):
        self.prev = _C.is_grad_enabled()
        _C._set_grad_enabled(True)

    def __exit__(self, *exc):
        _C._set_grad_enabled(self.prev)


class set_grad_enabled(_DecoratorContextManager):
    """`set_grad_enabled(False)` as a call sets the mode; as a context manager it restores it."""

    def __init__(self, mode):
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled(): argument 'mode' must be bool, not {type(mode).__name__}")
        self.prev = _C.is_grad_enabled()
        self.mode = mode
        _C._set_grad_enabled(mode)

    def __call__(self, fn):
        # Used as a decorator, the constructor above has already switched the mode: restore it,
        # or `@set_grad_enabled(False)` would turn grad mode off for the whole program (as torch).
        _C._set_grad_enabled(self.prev)
        return super().__call__(fn)

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        _C._set_grad_enabled(self.prev)

    def clone(self):
        return self.__class__(self.mode)


class inference_mode(_DecoratorContextManager):
    """Like no_grad, and tensors made inside are inference tensors: they cannot be saved for a
    backward pass later."""

    def __init__(self, mode=True):
        self.mode = mode

    def __new__(cls, mode=True):
        if callable(mode) and not isinstance(mode, bool):  # @inference_mode without parentheses
            return cls()(mode)
        return super().__new__(cls)

    def __enter__(self):
        self.prev_grad = _C.is_grad_enabled()
        self.prev_inference = _C.is_inference_mode_enabled()
        if self.mode:
            _C._set_grad_enabled(False)
            _C._set_inference_mode(True)

    def __exit__(self, *exc):
        _C._set_grad_enabled(self.prev_grad)
        _C._set_inference_mode(self.prev_inference)

    def clone(self):
        return self.__class__(self.mode)


is_grad_enabled = _C.is_grad_enabled
is_inference_mode_enabled = _C.is_inference_mode_enabled
