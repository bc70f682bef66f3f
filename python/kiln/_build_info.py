"""What this build of kiln has, under PyTorch's names: the exception classes programs catch
(`except torch.OutOfMemoryError`), the `layout` and `memory_format` types of kiln.strided and
kiln.contiguous_format (for annotations and isinstance), the build flags (`torch.has_lapack`,
...) and small runtime queries. The flags describe kiln, not PyTorch: LAPACK and the FFTs are
built in; kiln links no MKL and runs its kernels on its own thread pool, not OpenMP's.
"""


class OutOfMemoryError(RuntimeError):
    """An allocation on an accelerator failed (torch.OutOfMemoryError; kiln.cuda.OutOfMemoryError).
    Host allocations raise RuntimeError, as PyTorch's CPU allocator does."""


class AcceleratorError(RuntimeError):
    """An accelerator reported an error (torch.AcceleratorError)."""


class FatalError(Exception):
    """An unrecoverable internal error (torch.FatalError)."""


class _Constant:
    """A named constant of one kind (PyTorch's layout and memory_format objects): compared by
    identity, not constructible by users."""

    def __new__(cls, *args, **kwargs):
        raise TypeError(f"cannot create 'kiln.{cls.__name__}' instances")

    @classmethod
    def _make(cls, value, name):
        obj = object.__new__(cls)
        obj._kiln_enum_kind, obj._kiln_enum, obj._name = cls.__name__, value, name
        return obj

    def __repr__(self):
        return "kiln." + self._name

    def __reduce__(self):
        return self._name


class layout(_Constant):
    """The type of kiln.strided (torch.layout)."""


class memory_format(_Constant):
    """The type of kiln.contiguous_format, preserve_format and channels_last (torch.memory_format)."""


# pickled and printed as kiln.layout / kiln.strided, which is where they live for users
layout.__module__ = memory_format.__module__ = "kiln"

has_lapack = True
has_spectral = True
has_mkl = False
has_openmp = False


def compiled_with_cxx11_abi():
    """True: kiln's C++ is built with the C++11 ABI of libstdc++ (torch.compiled_with_cxx11_abi)."""
    return True


def init_num_threads():
    """Nothing to do: kiln's thread pool starts with the module (torch.init_num_threads)."""


def get_device_module(device=None):
    """The module of a device type: kiln.cuda for "cuda", kiln.cpu for "cpu" and, with no device, the
    current accelerator's (kiln.cpu on a machine without one), as torch.get_device_module."""
    import kiln

    if device is None:
        return kiln.cuda if kiln.cuda.is_available() else kiln.cpu
    kind = device.split(":")[0] if isinstance(device, str) else kiln.device(device).type
    modules = {"cpu": kiln.cpu, "cuda": kiln.cuda}
    if kind not in modules:
        raise RuntimeError(f"Device '{kind}' does not have a corresponding module registered as 'kiln.{kind}'.")
    return modules[kind]
