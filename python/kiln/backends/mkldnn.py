"""kiln.backends.mkldnn: oneDNN (MKL-DNN), the library PyTorch runs its CPU convolutions on.

kiln loads Debian's oneDNN (libdnnl.so.2) at run time, when the machine has it, and runs float32
convolutions and their gradients on it (tensor/ops/conv_onednn.cc); elsewhere its own im2col
kernels run. is_available() says whether it is loaded (with KILN_ONEDNN=0 it is not);
`enabled` (default True) switches it off and on, and flags() does so for a block, as PyTorch's.
"""

import contextlib
import sys
import types

from kiln import _C, _settings


def is_available():
    return _C._onednn_available()


def _unavailable_reason():
    """Why is_available() is False ("" when it is True)."""
    return _C._onednn_unavailable_reason()


def _convolution_calls():
    """How many convolutions (forward, or backward) oneDNN has run in this process (for tests)."""
    return _C._onednn_convolution_calls()


def _version():
    """The loaded oneDNN's version as an int (2.6.3 -> 20603), or None."""
    v = _C._onednn_version()
    if not v:
        return None
    major, minor, patch = (int(p) for p in v.split("."))
    return major * 10000 + minor * 100 + patch


@contextlib.contextmanager
def flags(enabled=False, deterministic=False, allow_tf32=True, fp32_precision="none"):
    """Sets `enabled` for the block and restores it after (PyTorch's signature; kiln's oneDNN
    convolutions are deterministic and compute in float32, so the other arguments change nothing)."""
    old = _C._get_mkldnn_enabled()
    _settings._check_bool(enabled, "kiln.backends.mkldnn.enabled")
    _C._set_mkldnn_enabled(enabled)
    try:
        yield
    finally:
        _C._set_mkldnn_enabled(old)


class _MkldnnModule(types.ModuleType):
    """This module's class: `enabled` is a property backed by the C++ switch."""

    def __getattr__(self, name):
        if name == "enabled":
            return _C._get_mkldnn_enabled()
        raise AttributeError(f"module 'kiln.backends.mkldnn' has no attribute '{name}'")

    def __setattr__(self, name, value):
        if name == "enabled":
            _settings._check_bool(value, "kiln.backends.mkldnn.enabled")
            _C._set_mkldnn_enabled(value)
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _MkldnnModule
