"""Global settings that PyTorch programs set in their first lines and kiln stores without acting on
them on CPU: float32 matmul precision (TF32 on Ampere GPUs in PyTorch; kiln's CPU matmul is always
IEEE float32) and deterministic-algorithm mode (kiln's CPU kernels are deterministic already).
They live here, below kiln/__init__.py and kiln.backends, so that `kiln.set_float32_matmul_precision`
and `kiln.backends.cuda.matmul.allow_tf32` read and write one value, as they do in PyTorch.
"""

import warnings

from kiln import _C

_PRECISIONS = ("highest", "high", "medium")
_state = {"float32_matmul_precision": "highest", "deterministic": False, "deterministic_warn_only": False}


def _check_bool(value, what):
    """PyTorch's C++ setters take only a Python bool (not 0/1) and raise RuntimeError otherwise."""
    if type(value) is not bool:
        raise RuntimeError(f"{what} expects a bool, but got {type(value).__name__}")


def set_float32_matmul_precision(precision):
    """Sets the internal precision of float32 matmuls: "highest" (IEEE), "high" or "medium" (TF32 or
    bfloat16 passes on GPUs). CUDA matmuls use TF32 below "highest"; kiln's CPU matmuls always
    compute in IEEE float32. An
    unknown string warns and changes nothing, as in PyTorch."""
    if not isinstance(precision, str):
        raise RuntimeError(f"set_float32_matmul_precision expects a str, but got {type(precision).__name__}")
    if precision not in _PRECISIONS:
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
                      "set_float32_matmul_precision call has no effect.", UserWarning, stacklevel=2)
        return
    _state["float32_matmul_precision"] = precision
    from kiln import _C

    _C._cuda_set_allow_tf32(precision != "highest")  # cuBLAS float32 GEMMs in TF32 unless "highest"


def get_float32_matmul_precision():
    """The value last set by set_float32_matmul_precision ("highest" by default)."""
    return _state["float32_matmul_precision"]


def use_deterministic_algorithms(mode, *, warn_only=False):
    """Asks for deterministic algorithms (warn_only: warn rather than raise where none exists).
    Every kiln CPU kernel is deterministic; the CUDA kernels that add floats with atomics
    (index_add_, scatter_add, index_put_ with accumulate=True) raise PyTorch's RuntimeError (or
    warn) while the mode is on (tensor/deterministic.h)."""
    if type(mode) is not bool:
        raise TypeError(f"use_deterministic_algorithms(): argument 'mode' (position 1) must be bool, "
                        f"not {type(mode).__name__}")
    if type(warn_only) is not bool:
        raise TypeError(f"use_deterministic_algorithms(): argument 'warn_only' must be bool, "
                        f"not {type(warn_only).__name__}")
    _state["deterministic"] = mode
    _state["deterministic_warn_only"] = warn_only
    _C._set_deterministic_algorithms(mode, warn_only)


def are_deterministic_algorithms_enabled():
    return _state["deterministic"]


def is_deterministic_algorithms_warn_only_enabled():
    return _state["deterministic_warn_only"]


def get_deterministic_debug_mode():
    """0 (off), 1 (warn) or 2 (error), as torch.get_deterministic_debug_mode."""
    if not _state["deterministic"]:
        return 0
    return 1 if _state["deterministic_warn_only"] else 2


# --- issue 17: default device, warn-always, anomaly mode, inter-op threads ---------------------------
# Stored like the settings above. kiln runs on the CPU only: the default device is "cpu" whatever
# is asked, and a CUDA device fails as a CPU-only PyTorch does. The anomaly flags are autograd's
# (kiln/autograd/anomaly_mode.py).
_state.update(warn_always=False, interop_threads=None)


def set_default_device(device):
    """Sets the device factories use by default: None or "cpu" (the only device kiln has)."""
    if device is None:
        return
    from kiln._device import device as as_device

    kind = as_device(device).type
    if kind == "cuda":
        raise AssertionError("Torch not compiled with CUDA enabled")
    if kind != "cpu":
        raise RuntimeError(f"kiln.set_default_device: kiln runs on the cpu only, not {kind}")


def get_default_device():
    from kiln._device import device

    return device("cpu")


def set_warn_always(b):
    """Whether warnings PyTorch gives once per process are given every time."""
    _check_bool(b, "setWarnOnlyOnce")
    _state["warn_always"] = b


def is_warn_always_enabled():
    return _state["warn_always"]


def set_anomaly_enabled(enabled, check_nan=True):
    _C._set_anomaly_enabled(bool(enabled), bool(check_nan))


def is_anomaly_enabled():
    return _C._is_anomaly_enabled()


def is_anomaly_check_nan_enabled():
    return _C._is_anomaly_check_nan_enabled()


def get_num_interop_threads():
    """Inter-op threads (kiln runs graph ops one after another; the value is stored for programs that
    read it): the number of CPUs until set."""
    import os

    value = _state["interop_threads"]
    return value if value is not None else (os.cpu_count() or 1)


def set_num_interop_threads(num):
    """Sets the inter-op thread count, once, before it is first used (as PyTorch)."""
    if not isinstance(num, int) or isinstance(num, bool):
        raise TypeError(f"set_num_interop_threads(): argument 'int' (position 1) must be int, not {type(num).__name__}")
    if num <= 0:
        raise RuntimeError("set_num_interop_threads expects a positive integer")
    if _state["interop_threads"] is not None:
        raise RuntimeError("Error: cannot set number of interop threads after parallel work has started or "
                           "set_num_interop_threads called")
    _state["interop_threads"] = num
