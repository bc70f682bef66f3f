"""kiln.nn.attention: which scaled_dot_product_attention kernels may run (PyTorch's module of the
same name). The switches are kiln.backends.cuda's (enable_flash_sdp, ...); on the CPU the flash
kernel is the fused one of tensor/ops/attention.cc and MATH the composition of matmuls and softmax.
"""

import contextlib
import enum

from kiln.backends import cuda as _cuda

__all__ = ["SDPBackend", "sdpa_kernel"]


class SDPBackend(enum.IntEnum):
    """The attention kernels, with PyTorch's values."""

    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


_SWITCHES = {SDPBackend.MATH: "math", SDPBackend.FLASH_ATTENTION: "flash",
             SDPBackend.EFFICIENT_ATTENTION: "mem_efficient", SDPBackend.CUDNN_ATTENTION: "cudnn"}


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority=False):
    """Within the block, only the given backend(s) may run scaled_dot_product_attention; the
    previous switches come back on exit. `set_priority` is accepted (kiln tries flash, then math)."""
    if isinstance(backends, SDPBackend):
        backends = [backends]
    backends = list(backends)
    for b in backends:
        if not isinstance(b, SDPBackend):
            raise AssertionError("Backend must be an instance of SDPBackend")
    enabled = {name: backend in backends for backend, name in _SWITCHES.items()}
    with _cuda._sdp_kernel(enabled):
        yield
