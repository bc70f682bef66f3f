"""kiln.backends.cudnn: PyTorch's cuDNN switches (enabled, benchmark, deterministic, allow_tf32) with
PyTorch's defaults. CUDA convolutions run through cuDNN (libcudnn.so.9, loaded at run time from
PyTorch's wheels or the toolkit; Note [cuDNN convolutions] in tensor/ops/conv_cudnn.cc) while
`enabled` is True and it loads, else through kiln's own im2col kernels. allow_tf32 governs both:
float32 convolutions run in TF32 unless it is False. deterministic picks only the algorithms cuDNN
marks deterministic; benchmark is stored and not acted on (cuDNN's heuristic picks the algorithm).
Setting a switch to anything but a bool raises RuntimeError, as PyTorch's setters do.
"""

import sys
import types

from kiln import _C, _settings

_flags = {"enabled": True, "benchmark": False, "deterministic": False, "allow_tf32": True}


def is_available():
    """Whether cuDNN loads (it needs a CUDA driver): PyTorch's answer for a build with cuDNN."""
    return _C._cudnn_available()


def version():
    """cuDNN's version as an int (91000 for 9.10.0), or None where it does not load."""
    return _C._cudnn_version() if is_available() else None


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
            elif name == "enabled":
                _C._cudnn_set_enabled(value)
            elif name == "deterministic":
                _C._cudnn_set_deterministic(value)
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _CudnnModule
