"""kiln.cuda: PyTorch's torch.cuda as it behaves where no CUDA exists. kiln is built without CUDA
(tensors live on "cpu" or "meta"), so these are the answers of a CPU-only PyTorch build: queries
return False/0, seeding and cache calls are no-ops that succeed (PyTorch queues them lazily), and
calls that need a device raise the exception class PyTorch raises, naming the call. Training
scripts that guard GPU code with `kiln.cuda.is_available()` run unchanged.
"""

from kiln._build_info import OutOfMemoryError  # noqa: F401  (torch.cuda.OutOfMemoryError is torch's)
from kiln.cuda import amp  # noqa: F401


def _no_cuda(call, exc=AssertionError):
    return exc(f"kiln.cuda.{call}: kiln was built without CUDA")


def _check_device(device, call, optional=True):
    """The argument checks PyTorch makes before it reaches CUDA (torch.cuda._utils._get_device_index)."""
    import kiln

    if isinstance(device, str):
        device = kiln.device(device)
    if isinstance(device, kiln.device):
        if device.type != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {device}")
        return device.index if device.index is not None else (None if optional else 0)
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    if device is None and optional:
        return None
    raise ValueError(f"Expected a kiln.device with a specified index or an integer, but got:{device}")


def is_available():
    return False


def is_initialized():
    return False


def device_count():
    return 0


def is_bf16_supported(including_emulation=True):
    return False


def get_arch_list():
    return []


def manual_seed(seed):
    """No-op (PyTorch queues the seed until CUDA initializes, which never happens here)."""
    int(seed)


def manual_seed_all(seed):
    int(seed)


def seed():
    pass


def seed_all():
    pass


def initial_seed():
    raise _no_cuda("initial_seed()")


def synchronize(device=None):
    raise _no_cuda("synchronize()")


def current_device():
    raise _no_cuda("current_device()")


def set_device(device):
    """A negative index is a no-op, as in PyTorch; a real one needs CUDA. PyTorch raises
    AttributeError there (its CPU build lacks the binding); kiln raises the same class."""
    index = _check_device(device, "set_device()", optional=False)
    if index >= 0:
        raise _no_cuda("set_device()", AttributeError)


def get_device_name(device=None):
    raise _no_cuda("get_device_name()")


def get_device_capability(device=None):
    raise _no_cuda("get_device_capability()")


def get_device_properties(device=None):
    raise _no_cuda("get_device_properties()")


def mem_get_info(device=None):
    raise _no_cuda("mem_get_info()")


def empty_cache():
    pass


def memory_allocated(device=None):
    return 0


def max_memory_allocated(device=None):
    return 0


def memory_reserved(device=None):
    return 0


def max_memory_reserved(device=None):
    return 0


def reset_peak_memory_stats(device=None):
    """PyTorch's CPU build raises AttributeError here (no binding); kiln raises the same class."""
    raise _no_cuda("reset_peak_memory_stats()", AttributeError)
