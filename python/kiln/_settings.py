"""Global settings that PyTorch programs set in their first lines and kiln stores without acting on
them on CPU: float32 matmul precision (TF32 on Ampere GPUs in PyTorch; kiln's CPU matmul is always
IEEE float32) and deterministic-algorithm mode (kiln's CPU kernels are deterministic already).
They live here, below kiln/__init__.py and kiln.backends, so that `kiln.set_float32_matmul_precision`
and `kiln.backends.cuda.matmul.allow_tf32` read and write one value, as they do in PyTorch.
"""

import warnings

_PRECISIONS = ("highest", "high", "medium")
_state = {"float32_matmul_precision": "highest", "deterministic": False, "deterministic_warn_only": False}


def _check_bool(value, what):
    """PyTorch's C++ setters take only a Python bool (not 0/1) and raise RuntimeError otherwise."""
    if type(value) is not bool:
        raise RuntimeError(f"{what} expects a bool, but got {type(value).__name__}")


def set_float32_matmul_precision(precision):
    """Sets the internal precision of float32 matmuls: "highest" (IEEE), "high" or "medium" (TF32 or
    bfloat16 passes on GPUs). Stored only: kiln's CPU matmuls always compute in IEEE float32. An
    unknown string warns and changes nothing, as in PyTorch."""
    if not isinstance(precision, str):
        raise RuntimeError(f"set_float32_matmul_precision expects a str, but got {type(precision).__name__}")
    if precision not in _PRECISIONS:
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
                      "set_float32_matmul_precision call has no effect.", UserWarning, stacklevel=2)
        return
    _state["float32_matmul_precision"] = precision


def get_float32_matmul_precision():
    """The value last set by set_float32_matmul_precision ("highest" by default)."""
    return _state["float32_matmul_precision"]


def use_deterministic_algorithms(mode, *, warn_only=False):
    """Asks for deterministic algorithms (warn_only: warn rather than raise where none exists).
    Stored only: every kiln CPU kernel is deterministic."""
    if type(mode) is not bool:
        raise TypeError(f"use_deterministic_algorithms(): argument 'mode' (position 1) must be bool, "
                        f"not {type(mode).__name__}")
    if type(warn_only) is not bool:
        raise TypeError(f"use_deterministic_algorithms(): argument 'warn_only' must be bool, "
                        f"not {type(warn_only).__name__}")
    _state["deterministic"] = mode
    _state["deterministic_warn_only"] = warn_only


def are_deterministic_algorithms_enabled():
    return _state["deterministic"]


def is_deterministic_algorithms_warn_only_enabled():
    return _state["deterministic_warn_only"]


def get_deterministic_debug_mode():
    """0 (off), 1 (warn) or 2 (error), as torch.get_deterministic_debug_mode."""
    if not _state["deterministic"]:
        return 0
    return 1 if _state["deterministic_warn_only"] else 2
