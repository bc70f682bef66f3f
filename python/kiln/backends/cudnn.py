"""kiln.backends.cudnn: PyTorch's cuDNN switches (enabled, benchmark, deterministic, allow_tf32) with
PyTorch's defaults, stored and read back; is_available() is False (kiln has no cuDNN). allow_tf32
governs kiln's own CUDA convolutions as it governs cuDNN's in PyTorch: their float32 GEMMs run in TF32
unless it is False. Setting a switch to anything but a bool raises RuntimeError, as PyTorch's setters do.
"""

import sys
import types

from kiln import _C, _settings

_flags = {"enabled": True, "benchmark": False, "deterministic": False, "allow_tf32": True}


def is_available():
    return False


def version():
    return None


class _CudnnModule(types.ModuleType):
    """This module's class: its switches are properties that check their values."""

    def __getattr__(self, name):
        if name in _flags:
            return _flags[name]
        raise AttributeError(f"module 'kiln.backends.cudnn' has no attribute '{name}'")

    def __setattr__(self, name, value):
        if name in _flags:
            _settings._check_bool(value, f"kiln.backends.cudnn.{name}")
            _flags[name] = value
            if name == "allow_tf32":
                _C._cuda_set_conv_allow_tf32(value)
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _CudnnModule
