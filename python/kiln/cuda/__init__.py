"""kiln.cuda: PyTorch's torch.cuda over kiln's CUDA runtime (runtime/cuda/). The driver, cuBLAS and
nvJitLink are loaded at run time (DESIGN.md §3), so the same build runs with or without a GPU.

Where CUDA is not usable (no driver, no device) the answers are those of a PyTorch without CUDA:
queries return False/0, seeding and cache calls are no-ops that succeed, and calls that need a
device raise the exception class PyTorch raises, naming the call and why CUDA is unavailable.
Training scripts that guard GPU code with `kiln.cuda.is_available()` run unchanged.
"""

import contextlib
import os
import sys

from kiln import _C
from kiln._build_info import OutOfMemoryError  # noqa: F401  (torch.cuda.OutOfMemoryError is torch's)
from kiln.cuda import amp  # noqa: F401


def _add_wheel_library_dirs():
    """PyTorch's CUDA wheels keep cuBLAS and nvJitLink in site-packages/nvidia/cu13/lib, and cuDNN in
    nvidia/cudnn/lib: search there."""
    for root in sys.path:
        for sub in (("cu13", "lib"), ("cudnn", "lib")):
            folder = os.path.join(root, "nvidia", *sub) if root else ""
            if folder and os.path.isdir(folder):
                _C._cuda_add_library_dir(folder)


_add_wheel_library_dirs()


def _no_cuda(call, exc=AssertionError):
    return exc(f"kiln.cuda.{call}: CUDA is not available: {_C._cuda_unavailable_reason().splitlines()[0]}")


def _lazy_init(call):
    """Raises as PyTorch without CUDA does where no device is usable; creates the current device's
    context once."""
    if not _C._cuda_is_available():
        raise _no_cuda(call)
    if not _C._cuda_is_initialized():
        _C._cuda_init(_C._cuda_current_device())


def _index(device, call, optional=True):
    """The device index `device` names, the current device for None."""
    index = _check_device(device, call, optional)
    return _C._cuda_current_device() if index is None or index < 0 else index


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
    return _C._cuda_is_available()


def is_initialized():
    """True once CUDA has been initialized, by any call or tensor (as PyTorch's)."""
    return _C._cuda_is_initialized()


def device_count():
    return _C._cuda_device_count()


def is_bf16_supported(including_emulation=True):
    if not is_available():
        return False
    return get_device_capability()[0] >= 8


def get_arch_list():
    """The architectures kiln generates code for: PTX for sm_80 (LLVM 14's NVPTX), which the driver's
    nvJitLink compiles for the device, and sm_90 machine code for the kernels built ahead."""
    return ["sm_80", "sm_90"] if is_available() else []


# --- random number generators: one per device (kiln.Generator over tensor/generator.h), made on first
# use without touching the driver, so seeding before CUDA starts works as PyTorch's queued seeds do.
_SEED_MASK = (1 << 64) - 1


def _default_generator(index):
    import kiln

    return kiln.Generator(f"cuda:{index}", _cdata=_C._default_cuda_generator(index))


def _rng_index(device):
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    if isinstance(device, str):
        import kiln

        device = kiln.device(device)
    index = getattr(device, "index", None)
    if index is None:
        return _C._cuda_current_device() if is_available() else 0
    return index


def manual_seed(seed):
    """Seeds the current device's default generator."""
    _default_generator(_rng_index(None)).manual_seed(int(seed) & _SEED_MASK)


def manual_seed_all(seed):
    """Seeds every device's default generator (kiln.manual_seed calls it too)."""
    _C._cuda_manual_seed_all(int(seed) & _SEED_MASK)


def seed():
    """Seeds the current device's generator with a random number."""
    _default_generator(_rng_index(None)).seed()


def seed_all():
    import random

    manual_seed_all(random.getrandbits(63))


def initial_seed():
    _lazy_init("initial_seed()")
    return _default_generator(_rng_index(None)).initial_seed()


def get_rng_state(device="cuda"):
    """The generator state of `device`, in kiln.get_rng_state's form (seed and Philox offset)."""
    return _default_generator(_rng_index(device)).get_state()


def set_rng_state(new_state, device="cuda"):
    _default_generator(_rng_index(device)).set_state(new_state)


def get_rng_state_all():
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states):
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def synchronize(device=None):
    _lazy_init("synchronize()")
    _C._cuda_synchronize(_index(device, "synchronize()"))


def current_device():
    _lazy_init("current_device()")
    return _C._cuda_current_device()


def set_device(device):
    """A negative index is a no-op, as in PyTorch."""
    index = _check_device(device, "set_device()", optional=False)
    if index >= 0:
        if not is_available():
            raise _no_cuda("set_device()", AttributeError)
        _C._cuda_set_device(index)


def get_device_name(device=None):
    _lazy_init("get_device_name()")
    return get_device_properties(device).name


def get_device_capability(device=None):
    _lazy_init("get_device_capability()")
    p = get_device_properties(device)
    return (p.major, p.minor)


class _CudaDeviceProperties:
    """torch.cuda.get_device_properties' record (the attributes kiln's driver query fills)."""

    def __init__(self, d):
        for k, v in d.items():
            setattr(self, k, v)

    def __repr__(self):
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory // (1024 * 1024)}MB, "
                f"multi_processor_count={self.multi_processor_count}, "
                f"L2_cache_size={self.L2_cache_size // (1024 * 1024)}MB)")


def get_device_properties(device=None):
    _lazy_init("get_device_properties()")
    index = _index(device, "get_device_properties()")
    if not 0 <= index < device_count():
        raise AssertionError("Invalid device id")
    return _CudaDeviceProperties(_C._cuda_get_device_properties(index))


def mem_get_info(device=None):
    _lazy_init("mem_get_info()")
    return tuple(_C._cuda_mem_get_info(_index(device, "mem_get_info()")))


def empty_cache():
    if is_initialized():
        _C._cuda_empty_cache()


def memory_allocated(device=None):
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device=None):
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device=None):
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device=None):
    return memory_stats(device).get("reserved_bytes.all.peak", 0)


def reset_peak_memory_stats(device=None):
    if not is_available():
        raise _no_cuda("reset_peak_memory_stats()", AttributeError)
    _C._cuda_reset_peak_memory_stats(_index(device, "reset_peak_memory_stats()"))


def reset_accumulated_memory_stats(device=None):
    if not is_available():
        raise _no_cuda("reset_accumulated_memory_stats()", AttributeError)
    _C._cuda_reset_accumulated_memory_stats(_index(device, "reset_accumulated_memory_stats()"))


def memory_stats(device=None):
    """torch.cuda.memory_stats' keys that kiln's caching allocator keeps ("all" aggregates); {} before
    CUDA is initialized, as PyTorch's."""
    if not is_initialized():
        return {}
    return dict(sorted(_C._cuda_memory_stats(_index(device, "memory_stats()")).items()))


def memory_snapshot():
    """The caching allocator's segments and blocks of every device (torch.cuda.memory_snapshot)."""
    if not is_initialized():
        return []
    return [seg for d in range(device_count()) for seg in _C._cuda_memory_snapshot(d)]


def memory_summary(device=None, abbreviated=False):
    """A table of the allocator's statistics, as torch.cuda.memory_summary's first rows."""
    stats = memory_stats(device)

    def fmt(n):
        for unit in ("B", "KiB", "MiB", "GiB"):
            if abs(n) < 1024 or unit == "GiB":
                return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
            n /= 1024

    rows = [("Allocated memory", "allocated_bytes.all"), ("GPU reserved memory", "reserved_bytes.all")]
    lines = ["|" + "=" * 60 + "|",
             f"|{'kiln CUDA memory summary, device ID ' + str(_index(device, 'memory_summary()') if is_initialized() else 0):^60}|",
             "|" + "-" * 60 + "|", f"| {'Metric':<28}| {'Cur Usage':>13} | {'Peak Usage':>13} |"]
    for label, key in rows:
        lines.append(f"| {label:<28}| {fmt(stats.get(key + '.current', 0)):>13} | {fmt(stats.get(key + '.peak', 0)):>13} |")
    lines.append(f"| {'Allocations':<28}| {stats.get('allocation.all.allocated', 0):>13} | {'':>13} |")
    lines.append(f"| {'Frees':<28}| {stats.get('allocation.all.freed', 0):>13} | {'':>13} |")
    lines.append(f"| {'OOMs':<28}| {stats.get('num_ooms', 0):>13} | {'':>13} |")
    lines.append("|" + "=" * 60 + "|")
    return "\n".join(lines) + "\n"


# --- streams and events -------------------------------------------------------------------------


class Stream:
    """A CUDA stream (torch.cuda.Stream): kiln's own non-blocking streams from a per-device pool;
    priority -1 (or lower) takes the high-priority pool."""

    def __new__(cls, device=None, priority=0, **kwargs):
        self = super().__new__(cls)
        if "_triple" in kwargs:
            self._triple = tuple(kwargs["_triple"])
        else:
            _lazy_init("Stream()")
            index = _index(device, "Stream()")
            self._triple = tuple(_C._cuda_stream_from_pool(index, -1 if priority < 0 else 0))
        return self

    def __init__(self, device=None, priority=0, **kwargs):
        pass

    @property
    def device(self):
        import kiln

        return kiln.device("cuda", self._triple[0])

    @property
    def cuda_stream(self):
        return self._triple[1]

    @property
    def priority(self):
        return self._triple[2]

    def synchronize(self):
        _C._cuda_stream_synchronize(self._triple)

    def query(self):
        return _C._cuda_stream_query(self._triple)

    def wait_event(self, event):
        event.wait(self)

    def wait_stream(self, stream):
        self.wait_event(stream.record_event())

    def record_event(self, event=None):
        event = Event() if event is None else event
        event.record(self)
        return event

    def __eq__(self, other):
        return isinstance(other, Stream) and self._triple[:2] == other._triple[:2]

    def __hash__(self):
        return hash(self._triple[:2])

    def __repr__(self):
        return f"<kiln.cuda.Stream device={self.device} cuda_stream={self.cuda_stream:#x}>"


class Event:
    """A CUDA event (torch.cuda.Event), created on its first record."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        self._event = _C._CudaEvent(enable_timing, blocking)

    def record(self, stream=None):
        self._event.record((current_stream() if stream is None else stream)._triple)

    def wait(self, stream=None):
        self._event.wait((current_stream() if stream is None else stream)._triple)

    def query(self):
        return self._event.query()

    def synchronize(self):
        self._event.synchronize()

    def elapsed_time(self, end_event):
        return self._event.elapsed_time(end_event._event)

    def __repr__(self):
        return f"<kiln.cuda.Event {'recorded' if self._event.recorded else 'uninitialized'}>"


def current_stream(device=None):
    _lazy_init("current_stream()")
    return Stream(_triple=_C._cuda_current_stream(_index(device, "current_stream()")))


def default_stream(device=None):
    _lazy_init("default_stream()")
    return Stream(_triple=_C._cuda_default_stream(_index(device, "default_stream()")))


def set_stream(stream):
    if stream is not None:
        _C._cuda_set_stream(stream._triple)


@contextlib.contextmanager
def stream(stream):
    """Makes `stream` current on its device for the block (None: no change), as torch.cuda.stream."""
    if stream is None:
        yield
        return
    previous = current_stream(stream.device.index)
    set_stream(stream)
    try:
        yield
    finally:
        set_stream(previous)


class device:
    """Context manager that changes the current device (torch.cuda.device)."""

    def __init__(self, device):
        self.idx = _check_device(device, "device()", optional=True)
        self.idx = -1 if self.idx is None else self.idx
        self.prev_idx = -1

    def __enter__(self):
        if self.idx >= 0:
            self.prev_idx = current_device()
            if self.prev_idx != self.idx:
                set_device(self.idx)

    def __exit__(self, *exc):
        if self.idx >= 0 and self.prev_idx != self.idx:
            set_device(self.prev_idx)
        return False