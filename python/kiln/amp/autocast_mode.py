"""kiln.amp.autocast: automatic mixed precision, as torch.amp.autocast.

Inside `with kiln.autocast("cpu")` (bfloat16 by default), matrix products and convolutions run in
the low-precision dtype and losses, reductions like prod and the linear-algebra factorizations in
float32, by PyTorch's CPU policy. The casting itself is a dispatch layer in C++ (tensor/autocast.h,
Note [Autocast]), so autograd records the casts and compiled code (kiln._dynamo traces the context
manager as grad modes are traced) casts where eager does. This module holds the context manager and
decorator, the state functions (is_autocast_enabled, get_autocast_dtype, ...), custom_fwd /
custom_bwd, and the float32 policy for the functions PyTorch lists that kiln composes in Python
(`float32_under_autocast`: their parts would otherwise be autocast one by one).

kiln runs on the CPU only: autocast("cuda") warns and disables itself, as CPU-only PyTorch does.
"""

import functools
import warnings

import kiln
from kiln import _C

__all__ = ["autocast", "is_autocast_available", "custom_fwd", "custom_bwd"]

_DEVICE_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve", "fpga", "maia",
                 "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone")
_CUDA_DTYPE = [None]  # the cuda autocast dtype (kept for get/set_autocast_dtype; there is no cuda autocast)


def is_autocast_available(device_type):
    return device_type == "cpu"


class autocast:
    """Context manager and decorator: ops in its region run in mixed precision (see the module)."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        if device_type not in _DEVICE_TYPES:
            raise RuntimeError(f"Expected one of {', '.join(_DEVICE_TYPES)} device type at start of device string: "
                               f"{device_type}")
        self.device = device_type
        self.fast_dtype = get_autocast_dtype(device_type) if dtype is None else dtype
        self._enabled = enabled
        self._cache_enabled = cache_enabled  # accepted: kiln does not cache casts of leaf tensors
        if device_type == "cpu" and enabled and self.fast_dtype not in (kiln.bfloat16, kiln.float16, kiln.float32):
            warnings.warn("In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
                          "CPU Autocast only supports dtype of torch.bfloat16, torch.float16 currently.")
            self._enabled = False
        elif device_type != "cpu" and enabled:
            warnings.warn(f"User provided device_type of '{device_type}', but CUDA is not available or torch_xla is "
                          "imported. Disabling autocast." if device_type == "cuda" else
                          f"User provided device_type of '{device_type}', but it is not available. Disabling autocast.")
            self._enabled = False

    def __enter__(self):
        self._prev = _C._get_autocast_state()
        if self.device == "cpu":
            _C._set_autocast_state(self._enabled, self.fast_dtype)
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        _C._set_autocast_state(*self._prev)
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def decorate_autocast(*args, **kwargs):
            with autocast(self.device, self.fast_dtype, self._enabled, self._cache_enabled):
                return func(*args, **kwargs)
        return decorate_autocast

    def __repr__(self):
        return f"<kiln.autocast device_type={self.device!r} dtype={self.fast_dtype} enabled={self._enabled}>"


def is_autocast_enabled(device_type=None):
    """Whether autocast is on for `device_type` (cuda when not given, as torch: always False here)."""
    if device_type in (None, "cuda"):
        return False
    return device_type == "cpu" and _C._get_autocast_state()[0]


def set_autocast_enabled(device_type, enabled):
    if device_type == "cpu":
        _C._set_autocast_state(bool(enabled), _C._get_autocast_state()[1])


def get_autocast_dtype(device_type):
    if device_type == "cpu":
        return _C._get_autocast_state()[1]
    return _CUDA_DTYPE[0] or kiln.float16


def set_autocast_dtype(device_type, dtype):
    if device_type == "cpu":
        _C._set_autocast_state(_C._get_autocast_state()[0], dtype)
    else:
        _CUDA_DTYPE[0] = dtype


def get_autocast_cpu_dtype():
    warnings.warn("torch.get_autocast_cpu_dtype() is deprecated. Please use torch.get_autocast_dtype('cpu') instead.",
                  DeprecationWarning, stacklevel=2)
    return get_autocast_dtype("cpu")


def is_autocast_cpu_enabled():
    warnings.warn("torch.is_autocast_cpu_enabled() is deprecated. Please use torch.is_autocast_enabled('cpu') "
                  "instead.", DeprecationWarning, stacklevel=2)
    return is_autocast_enabled("cpu")


def float32_under_autocast(fn):
    """fn with PyTorch's float32 autocast policy: under autocast, its 16-bit float tensor arguments are
    cast to float32 and it runs with autocast off (for functions kiln composes in Python)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        enabled, dtype = _C._get_autocast_state()
        if not enabled:
            return fn(*args, **kwargs)

        def cast(a):
            return a.float() if isinstance(a, kiln.Tensor) and a.dtype in (kiln.float16, kiln.bfloat16) else a
        _C._set_autocast_state(False, dtype)
        try:
            return fn(*[cast(a) for a in args], **{k: cast(v) for k, v in kwargs.items()})
        finally:
            _C._set_autocast_state(True, dtype)
    return wrapper


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """For a custom autograd Function's forward: with cast_inputs, run it in that dtype with autocast
    off when autocast is on; records the state for custom_bwd."""
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        args[0]._dtype = get_autocast_dtype(device_type)
        args[0]._fwd_used_autocast = is_autocast_enabled(device_type)
        if cast_inputs is None or not args[0]._fwd_used_autocast:
            return fwd(*args, **kwargs)

        def cast(a):
            return a.to(cast_inputs) if isinstance(a, kiln.Tensor) and a.is_floating_point() else a
        with autocast(device_type, enabled=False):
            return fwd(*[cast(a) for a in args], **{k: cast(v) for k, v in kwargs.items()})
    return decorate_fwd


def custom_bwd(bwd=None, *, device_type):
    """For a custom autograd Function's backward: runs it in the autocast state its forward saw."""
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        with autocast(device_type, enabled=args[0]._fwd_used_autocast, dtype=args[0]._dtype):
            return bwd(*args, **kwargs)
    return decorate_bwd
