"""nn.Parameter: a kiln.Tensor that a Module registers as a learnable parameter; nn.Buffer: a marker that
makes a tensor assigned to a Module attribute register as a buffer; UninitializedParameter and
UninitializedBuffer: a parameter or buffer whose shape a lazy module (nn.LazyLinear, nn.LazyConv2d,
nn.LazyBatchNorm2d, ...) decides at its first forward."""

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
        if cls is Parameter and _C._is_fake(data):  # a fake parameter stays a FakeTensor too: the
            cls = type(data)._parameter_class()  # fake class knows its Parameter (no import of it here)
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


class _BufferMeta(type):
    """`isinstance(t, Buffer)` holds for any kiln.Tensor that Buffer() marked (`_is_buffer`)."""

    def __instancecheck__(self, instance):
        if self is Buffer and isinstance(instance, Tensor) and getattr(instance, "_is_buffer", False):
            return True
        return super().__instancecheck__(instance)


class Buffer(Tensor, metaclass=_BufferMeta):
    """A tensor that is module state but not a parameter. As torch's, `Buffer(data, persistent=True)`
    returns a plain kiln.Tensor (a detached alias of data, keeping its requires_grad) marked with
    `_is_buffer` and `persistent`; Module.__setattr__ registers a marked tensor with register_buffer."""

    __module__ = "kiln.nn.parameter"

    def __new__(cls, data=None, *, persistent=True):
        if data is None:
            data = kiln.empty(0)
        t = data.detach().requires_grad_(data.requires_grad)
        t.persistent = persistent
        t._is_buffer = True
        return t


class UninitializedTensorMixin:
    """A tensor without a shape yet: it holds an empty tensor carrying the dtype and device to create
    it with, until `materialize(shape)` gives it data and turns it into `cls_to_become`."""

    def materialize(self, shape, device=None, dtype=None):
        if device is None:
            device = self.data.device
        if dtype is None:
            dtype = self.data.dtype
        self.data = kiln.empty(shape, device=device, dtype=dtype)
        self.__class__ = self.cls_to_become

    @property
    def shape(self):
        raise RuntimeError("Can't access the shape of an uninitialized parameter or buffer. This error usually "
                           "happens in `load_state_dict` when trying to load an uninitialized parameter into an "
                           "initialized one. Call `forward` to initialize the parameters before accessing their "
                           "attributes.")

    def share_memory_(self):
        raise RuntimeError("Can't share memory on an uninitialized parameter or buffer. Call `forward` to "
                           "initialize the parameters before calling `module.share_memory()`.")

    def __repr__(self):
        return f"<{self.__class__.__name__}>"

    def __reduce_ex__(self, proto):
        return (self.__class__, (self.requires_grad,))


def is_lazy(param):
    """Whether `param` is an UninitializedParameter."""
    return isinstance(param, UninitializedTensorMixin)


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A Parameter whose shape is not known yet (see UninitializedTensorMixin)."""

    __module__ = "kiln.nn.parameter"
    cls_to_become = Parameter

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        data = kiln.empty(0, device=device, dtype=dtype)
        return _C._make_subclass(cls, data, requires_grad)

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        result = type(self)(self.requires_grad, self.data.device, self.data.dtype)
        memo[id(self)] = result
        return result



class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """A buffer whose shape is not known yet (see UninitializedTensorMixin); like nn.Buffer it is marked
    `_is_buffer` (with `persistent`), so assigning it to a Module attribute registers a buffer."""

    __module__ = "kiln.nn.parameter"
    cls_to_become = Tensor

    def __new__(cls, requires_grad=False, device=None, dtype=None, persistent=True):
        data = kiln.empty(0, device=device, dtype=dtype)
        ret = _C._make_subclass(cls, data, requires_grad)
        ret.persistent = persistent
        ret._is_buffer = True
        return ret

    def __deepcopy__(self, memo):
        # PyTorch refuses it (every op on an uninitialized buffer raises), so a lazy norm layer
        # cannot be deep-copied before its first forward either
        raise ValueError("Attempted to use an uninitialized parameter in <function Tensor.__deepcopy__>. This error "
                         "happens when you are using a `LazyModule` or explicitly manipulating "
                         "`kiln.nn.parameter.UninitializedBuffer` objects. When using LazyModules Call `forward` "
                         "with a dummy batch to initialize the parameters before calling kiln functions")
