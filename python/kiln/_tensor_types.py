"""PyTorch's legacy tensor types (kiln.FloatTensor, kiln.LongTensor, ...), the legacy constructor
they share with Tensor.new, and set_default_tensor_type.

A legacy type is not a subclass of kiln.Tensor (in PyTorch neither): it is a class whose metaclass
makes `kiln.FloatTensor(...)` build a float32 kiln.Tensor and `isinstance(t, kiln.FloatTensor)`
true exactly when t is a kiln.Tensor of dtype float32 on the CPU. Its printed name follows
Tensor.type(): "kiln.FloatTensor". Strings naming a type are accepted with either the "kiln." or the
"torch." prefix, so code written for PyTorch (`x.type("torch.LongTensor")`) runs unchanged.

The legacy constructor (PyTorch's `new`): no argument -> an empty 1-d tensor; integers or a
kiln.Size -> an uninitialized tensor of that shape; a tensor of the same dtype -> an alias of it;
any other sequence (a list, a tuple, a numpy array) -> a tensor holding that data.
"""

import numbers
import warnings

from kiln import _C

_NAMES = {"FloatTensor": _C.float32, "DoubleTensor": _C.float64, "HalfTensor": _C.float16,
          "BFloat16Tensor": _C.bfloat16, "LongTensor": _C.int64, "IntTensor": _C.int32, "ShortTensor": _C.int16,
          "CharTensor": _C.int8, "ByteTensor": _C.uint8, "BoolTensor": _C.bool}
_BY_DTYPE = {dtype: name for name, dtype in _NAMES.items()}


def type_name(dtype):
    """'kiln.FloatTensor' for float32 (what Tensor.type() returns)."""
    return "kiln." + _BY_DTYPE[dtype]


class tensortype(type):
    """The metaclass of legacy tensor types (torch.tensortype)."""

    def __instancecheck__(cls, obj):
        import kiln

        return isinstance(obj, kiln.Tensor) and obj.dtype == cls.dtype and obj.device.type == "cpu"

    def __call__(cls, *args, device=None, **kwargs):
        return legacy_new(cls.dtype, device, args, kwargs)


def _make(name, dtype):
    return tensortype(name, (), {"__module__": "kiln", "dtype": dtype, "is_cuda": False, "is_sparse": False,
                                 "__doc__": f"Legacy constructor and isinstance check for {dtype} tensors."})


LEGACY_TYPES = {name: _make(name, dtype) for name, dtype in _NAMES.items()}


def legacy_new(dtype, device, args, kwargs):
    """PyTorch's legacy constructor (kiln.FloatTensor(...), x.new(...)); see the module docstring."""
    import kiln

    if kwargs:
        raise TypeError(f"new() got an unexpected keyword argument '{next(iter(kwargs))}' "
                        "(the legacy constructor takes only device=)")
    if not args:
        return kiln.empty(0, dtype=dtype, device=device)
    if len(args) == 1:
        data = args[0]
        if isinstance(data, kiln.Size):
            return kiln.empty(data, dtype=dtype, device=device)
        if isinstance(data, kiln.Tensor):
            if data.dtype != dtype:
                raise TypeError(f"expected {dtype} (got {data.dtype})")
            return kiln.ops.aten.alias(data)
        if isinstance(data, numbers.Integral) and not isinstance(data, bool):
            return kiln.empty((data,), dtype=dtype, device=device)
        if isinstance(data, str):
            raise TypeError(f"new(): invalid data type '{type(data).__name__}'")
        if isinstance(data, numbers.Number):
            raise TypeError(f"new(): data must be a sequence (got {type(data).__name__})")
        return kiln.tensor(data, dtype=dtype, device=device)
    for i, size in enumerate(args):
        if not isinstance(size, numbers.Integral) or isinstance(size, bool):
            raise TypeError(f"new(): argument 'size' must be a tuple of ints, but got {type(size).__name__} "
                            f"at pos {i + 1}")
    return kiln.empty(args, dtype=dtype, device=device)


def _strip_prefix(name):
    for prefix in ("kiln.", "torch."):
        if name.startswith(prefix):
            return name[len(prefix):]
    return None


def convert(tensor, dtype, non_blocking=False):
    """Tensor.type(dtype): dtype is a kiln.dtype, a legacy type or its name ('kiln.FloatTensor')."""
    if isinstance(dtype, str):
        name = _strip_prefix(dtype)
        if name is not None and name.startswith("cuda.") and name[5:] in _NAMES:
            if not _C._cuda_is_available():
                raise RuntimeError(f"Tensor.type({dtype!r}): CUDA is not available: "
                                   + _C._cuda_unavailable_reason())
            return tensor.to("cuda", _NAMES[name[5:]], non_blocking=non_blocking)
        if name not in _NAMES:
            raise ValueError(f"invalid type: {dtype!r}")
        dtype = _NAMES[name]
    elif isinstance(dtype, tensortype):
        dtype = dtype.dtype
    elif not isinstance(dtype, _C.dtype):
        raise TypeError(f"Tensor.type(): expected a kiln.dtype, a legacy tensor type or its name, "
                        f"got {type(dtype).__name__}")
    return tensor.to(dtype, non_blocking=non_blocking)


def set_default_tensor_type(t):
    """Deprecated (as in PyTorch): sets the default dtype from a floating-point legacy type or its name
    (kiln.DoubleTensor, "torch.DoubleTensor"); use kiln.set_default_dtype instead."""
    warnings.warn("kiln.set_default_tensor_type() is deprecated as of PyTorch 2.1, please use "
                  "kiln.set_default_dtype() instead.", UserWarning,
                  stacklevel=2)
    if isinstance(t, str):
        name = _strip_prefix(t)
        if name is None:  # PyTorch imports the dotted name: a bare word is a missing module
            raise ModuleNotFoundError(f"No module named '{t.split('.')[0]}'")
        if name.startswith("cuda."):
            raise TypeError(f"type {t} not available. kiln has no CUDA default tensor types.")
        if name not in LEGACY_TYPES:
            raise AttributeError(f"module 'kiln' has no attribute '{name}'")
        t = LEGACY_TYPES[name]
    if not isinstance(t, tensortype):
        raise TypeError("invalid type object: only floating-point types are supported as the default type")
    if not t.dtype.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    _C.set_default_dtype(t.dtype)
