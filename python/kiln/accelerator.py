"""kiln.accelerator: PyTorch's device-agnostic accelerator queries (torch.accelerator). kiln is built
without CUDA or any other accelerator, so there is none: is_available() is False, device_count() 0
and current_accelerator() None, as on a CPU-only PyTorch build.
"""


def is_available():
    return False


def device_count():
    return 0


def current_accelerator(check_available=False):
    """The accelerator's kiln.device type, or None: kiln has none."""
    return None
