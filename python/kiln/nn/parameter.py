"""nn.Parameter: a kiln.Tensor that a Module registers as a learnable parameter."""

import kiln
from kiln import _C
from kiln._tensor import Tensor


class Parameter(Tensor):
    """A tensor that is a module parameter: assigning one as a Module attribute registers it.

    `Parameter(data, requires_grad=True)` shares `data`'s storage (as PyTorch's does).
    """

    __module__ = "kiln.nn.parameter"

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = kiln.empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter(): expected a kiln.Tensor as data, got {type(data).__name__}")
        if cls is Parameter and _C._is_fake(data):  # a fake parameter stays a FakeTensor too
            from kiln._subclasses.fake_tensor import _fake_parameter_class

            cls = _fake_parameter_class()
        return _C._make_subclass(cls, data, requires_grad)  # a detached alias of data, of class cls

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        out = type(self)(self.detach().clone(), self.requires_grad)
        memo[id(self)] = out
        return out

    def __reduce_ex__(self, proto):
        return (_rebuild_parameter, (Tensor.__reduce_ex__(self, proto), self.requires_grad))


def _rebuild_parameter(reduced, requires_grad):
    fn, args = reduced
    return Parameter(fn(*args), requires_grad)


def is_lazy(param):
    return False

