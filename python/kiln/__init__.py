"""kiln: a small PyTorch-2-style framework. `import kiln` gives the eager tensor library; the
names mirror PyTorch's (kiln.tensor, kiln.zeros, kiln.float32, Tensor methods, kiln.ops.aten)."""

import os as _os


def _choose_openblas_kernels():
    """OpenBLAS picks its kernels from the CPU model name; virtual machines that hide the model
    make it fall back to generic x86 code (several times slower GEMMs). Unless the user chose,
    name the kernel family from the CPU's feature flags before OpenBLAS loads with kiln._C."""
    if "OPENBLAS_CORETYPE" in _os.environ:
        return
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return
    flags = set(flags)
    if {"avx512f", "avx512dq", "avx512bw", "avx512vl"} <= flags:
        _os.environ["OPENBLAS_CORETYPE"] = "SkylakeX"
    elif {"avx2", "fma"} <= flags:
        _os.environ["OPENBLAS_CORETYPE"] = "Haswell"


_choose_openblas_kernels()

# KILN_LOGS is read first: a wrong name fails the import at once, naming the valid ones (as
# TORCH_LOGS fails `import torch`), and every logger is set before any module logs.
from kiln import _logging  # noqa: E402
_logging._init_logs()

from kiln import _C  # noqa: E402
from kiln._C import (  # noqa: E402  # noqa: F401  (dtypes and global settings)
    dtype, bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64, complex64, complex128,
    get_default_dtype, set_default_dtype, promote_types, can_cast, result_type, set_num_threads, get_num_threads,
)
from kiln._device import device  # noqa: F401,E402
from kiln._size import Size  # noqa: F401
from kiln._tensor import Tensor
from kiln._tensor_str import set_printoptions  # noqa: F401
from kiln._ops import Tag, ops  # noqa: F401
from kiln import _ops  # noqa: F401

import builtins as _builtins
import sys as _sys

# PyTorch's dtype aliases.
half, float, double = float16, float32, float64
short, int, long = int16, int32, int64
cfloat, cdouble = complex64, complex128
__version__ = "0.1.0"

_C._set_tensor_class(Tensor)


# the build's flags, exception classes and the layout / memory_format types (kiln/_build_info.py)
from kiln._build_info import (  # noqa: E402,F401
    OutOfMemoryError, AcceleratorError, FatalError, layout, memory_format, has_lapack, has_spectral, has_mkl,
    has_openmp, compiled_with_cxx11_abi, init_num_threads, get_device_module,
)

strided = layout._make(0, "strided")
contiguous_format = memory_format._make(0, "contiguous_format")
preserve_format = memory_format._make(1, "preserve_format")
channels_last = memory_format._make(2, "channels_last")


# --- ops from the registry -------------------------------------------------------------------
from kiln._symbolic import SymInt as _SymInt  # noqa: E402


def _arange_to_symbolic_end(args, kwargs):
    """arange(end) or arange(start, end[, step]) whose end is a symbolic size (dynamic shapes),
    with int start and step: kiln's Scalar holds no SymInt, so the op itself would pin end to its
    example value, and nanoGPT's `pos = arange(0, t)` recompiled for every prompt length. Built
    instead from ops over a symbolic size: ones(n).cumsum(0), shifted and scaled (int64, then the
    dtype asked for). None where it does not apply (the op runs as usual)."""
    if not 1 <= len(args) <= 3:
        return None
    start, end, step = (0, args[0], 1) if len(args) == 1 else (tuple(args) + (1,))[:3]
    if not isinstance(end, _SymInt) or type(start) is not _builtins.int or type(step) is not _builtins.int or step <= 0:
        return None
    if _builtins.any(isinstance(v, _SymInt) for v in kwargs.values()):
        return None
    n = (end - start + step - 1) // step
    if n < 0:  # a guard on an inequality, not on the size
        raise RuntimeError("upper bound and larger bound inconsistent with step sign")
    dtype = kwargs.get("dtype")
    rest = {k: v for k, v in kwargs.items() if k not in ("dtype", "layout", "pin_memory")}  # (layout: strided only)
    out = (ones(n, dtype=int64, **rest).cumsum(0) - 1) * step + start
    return out if dtype in (None, int64) else out.to(dtype)


def _factory(fn, name):
    symbolic_end = _arange_to_symbolic_end if name == "arange" else None

    def factory(*args, requires_grad=False, **kwargs):
        out = symbolic_end(args, kwargs) if symbolic_end is not None else None
        out = fn(*args, **kwargs) if out is None else out
        if _C.is_inference_mode_enabled():  # composite factories fill a fresh tensor in place: mark it here
            _C._mark_inference(out)
        if requires_grad:
            out.requires_grad_(True)
        return out

    factory.__name__ = name
    factory.__qualname__ = name
    return factory


def _install_ops():
    g = globals()
    for qualified, name, variants in _C._packets():
        fn = _C._packet_function(qualified)
        if variants & 1 and name not in g:  # bit 4: a factory, which takes requires_grad= (python/csrc/module.cc)
            g[name] = _factory(fn, name) if variants & 4 else fn
        if variants & 2 and not hasattr(Tensor, name):
            setattr(Tensor, name, fn)


_install_ops()


# --- creation from Python data and numpy -----------------------------------------------------
def tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A new tensor holding a copy of `data` (nested lists/tuples of numbers, a numpy array, a tensor)."""
    if _C._active_fake_mode() is not None:  # under FakeTensorMode: a fake tensor, as in PyTorch
        from kiln._subclasses.fake_tensor import _tensor_under_fake_mode

        out = _tensor_under_fake_mode(lambda: _tensor_of_data(data, dtype, device))
    else:
        out = _tensor_of_data(data, dtype, device)
    if _make_fx_active():  # PyTorch's lift_fresh: a graph constant, then its copy (lift_fresh_copy)
        out = ops.aten.lift_fresh_copy(out)
    if requires_grad:
        out.requires_grad_(True)
    return out


def _make_fx_active():
    proxy_tensor = _sys.modules.get("kiln.fx.experimental.proxy_tensor")
    return proxy_tensor is not None and len(proxy_tensor._TRACERS) > 0


def _tensor_of_data(data, dtype, device):
    if isinstance(data, Tensor):
        out = data.clone().detach()
        if dtype is not None:
            out = out.to(dtype)
    elif _is_buffer(data):
        out = _C._from_buffer(data).clone()
        if dtype is not None:
            out = out.to(dtype)
    else:
        if hasattr(data, "__array_interface__") or type(data).__module__ == "numpy":
            import numpy as np

            data = np.asarray(data)
            # ascontiguousarray makes a 0-d array 1-d: a numpy scalar (np.int64(2)) gave shape [1]
            out = _C._from_buffer(np.ascontiguousarray(data).reshape(data.shape)).clone()
            out = out if dtype is None else out.to(dtype)
        else:
            out = _C._tensor_from_data(data, dtype)
    if device is not None and _builtins.str(device) != "cpu":
        out = out.to(device)
    if _C.is_inference_mode_enabled():
        _C._mark_inference(out)
    return out


def _is_buffer(obj):
    return type(obj).__name__ == "ndarray"


def from_numpy(ndarray):
    """A tensor sharing memory with `ndarray` (writes through both ways)."""
    if type(ndarray).__name__ != "ndarray":
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    return _C._from_buffer(ndarray)


def as_tensor(data, dtype=None, device=None):
    if isinstance(data, Tensor) and (dtype is None or data.dtype == dtype):
        return data if device is None else data.to(device)
    if _is_buffer(data):
        t = from_numpy(data)
        return t if dtype is None else t.to(dtype)
    return tensor(data, dtype=dtype, device=device)


def is_tensor(obj):
    return isinstance(obj, Tensor)


def is_floating_point(input):
    if not isinstance(input, Tensor):
        raise TypeError(f"is_floating_point(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    return input.dtype.is_floating_point


def numel(input):
    if not isinstance(input, Tensor):
        raise TypeError(f"numel(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    return input.numel()


# --- random number generators ----------------------------------------------------------------
class Generator:
    """A random number generator (Philox); pass as generator= to random ops."""

    def __init__(self, device="cpu", *, _cdata=None):
        dev = globals()["device"](device)
        if dev.type == "cuda" and dev.index is None:
            dev = globals()["device"]("cuda", _C._cuda_current_device() if _C._cuda_is_available() else 0)
        self._cdata = _cdata if _cdata is not None else _C._new_generator(str(dev))
        self.device = dev

    def manual_seed(self, seed):
        _C._generator_manual_seed(self._cdata, _builtins.int(seed) & ((1 << 64) - 1))
        return self

    def initial_seed(self):
        return _C._generator_initial_seed(self._cdata)

    def seed(self):
        import random

        s = random.getrandbits(63)
        self.manual_seed(s)
        return s

    def get_state(self):
        seed, offset = _C._generator_get_state(self._cdata)
        return tensor([seed & 0x7FFFFFFFFFFFFFFF, seed >> 63, offset], dtype=int64)

    def set_state(self, state):
        lo, hi, offset = state.tolist()
        _C._generator_set_state(self._cdata, lo | (hi << 63), offset)
        return self


default_generator = Generator(_cdata=_C._default_generator())


def manual_seed(seed):
    """Seeds the default generator of the CPU and of every CUDA device; returns the CPU's."""
    _C._cuda_manual_seed_all(_builtins.int(seed) & ((1 << 64) - 1))
    return default_generator.manual_seed(seed)


def initial_seed():
    return default_generator.initial_seed()


def seed():
    s = default_generator.seed()
    _C._cuda_manual_seed_all(s)
    return s


def get_rng_state():
    return default_generator.get_state()


def set_rng_state(state):
    default_generator.set_state(state)


del _install_ops


# --- autograd --------------------------------------------------------------------------------
from kiln import autograd  # noqa: E402
from kiln.autograd.grad_mode import (  # noqa: E402,F401
    no_grad, enable_grad, set_grad_enabled, inference_mode, is_grad_enabled, is_inference_mode_enabled,
)

from kiln import optim, utils  # noqa: E402,F401
from kiln.serialization import save, load  # noqa: E402,F401
from kiln import nn  # noqa: E402,F401
from kiln import _subclasses  # noqa: E402,F401  (fake tensors get their Python class)
from kiln import fx  # noqa: E402,F401

# --- symbolic shapes (kiln.SymInt, kiln._check; ShapeEnv in kiln.fx.experimental.symbolic_shapes) ---
from kiln._symbolic import (  # noqa: E402,F401
    SymInt, SymFloat, SymBool, sym_int, sym_float, sym_max, sym_min, sym_not, _check, _check_is_size,
)


# --- PyTorch's setup names (issue 17): CUDA queries, backend switches, TorchScript, legacy tensor
# types. kiln has no CUDA or TorchScript; these answer as a CPU-only PyTorch build does, so that
# programs run unchanged. kiln._dynamo stays lazy (module __getattr__ below): it costs ~100 ms.
from kiln import accelerator, amp, backends, compiler, cpu, cuda, jit, onnx  # noqa: E402,F401
JITException = jit.Error
from kiln.amp.autocast_mode import (  # noqa: E402,F401
    autocast, is_autocast_enabled, set_autocast_enabled, get_autocast_dtype, set_autocast_dtype,
    get_autocast_cpu_dtype, is_autocast_cpu_enabled,
)
from kiln._dtype_info import finfo, iinfo  # noqa: E402,F401
from kiln._settings import (  # noqa: E402,F401
    set_float32_matmul_precision, get_float32_matmul_precision, use_deterministic_algorithms,
    are_deterministic_algorithms_enabled, is_deterministic_algorithms_warn_only_enabled, get_deterministic_debug_mode,
)
from kiln._tensor_types import LEGACY_TYPES as _LEGACY_TYPES, set_default_tensor_type  # noqa: E402,F401

(FloatTensor, DoubleTensor, HalfTensor, BFloat16Tensor, LongTensor, IntTensor, ShortTensor, CharTensor,
 ByteTensor, BoolTensor) = _LEGACY_TYPES.values()


# --- PyTorch's composite functions (issue 17): compositions of the ops above, so autograd, fake
# tensors and kiln.compile work through them (kiln/_composites.py, kiln/_einsum.py); kiln.testing
# holds assert_close. movedim replaces the registry's int-only op: it also takes sequences.
from kiln._composites import (  # noqa: E402,F401
    unbind, outer, ger, broadcast_to, broadcast_shapes, broadcast_tensors, swapaxes, swapdims, moveaxis, movedim, clip, clip_, concat, concatenate,
    hstack, vstack, dstack, column_stack, atleast_1d, atleast_2d, atleast_3d, tile, trace, diag, diag_embed,
    tril_indices, triu_indices, meshgrid, rot90, diff, logaddexp, logaddexp2, nanmean, allclose, isclose, equal,
    cross, kron, tensordot, take, repeat_interleave, cdist, nonzero, normal, norm_except_dim, _weight_norm,
)
from kiln._einsum import einsum  # noqa: E402,F401
# order statistics and set operations (issue 17): kiln/_order_stats.py (their named results in
# kiln.return_types), kiln/_set_ops.py
from kiln import return_types  # noqa: E402,F401
from kiln._order_stats import median, nanmedian, quantile, nanquantile, mode, cummax, cummin  # noqa: E402,F401
from kiln._set_ops import unique, unique_consecutive, bucketize, searchsorted  # noqa: E402,F401
# window functions and i0, the Bessel function Kaiser's window is built from (kiln/_windows.py)
from kiln._windows import (  # noqa: E402,F401
    i0, i0_, hann_window, hamming_window, blackman_window, bartlett_window, kaiser_window,
)
from kiln import linalg, testing  # noqa: E402,F401
# discrete Fourier transforms (kiln/fft over the _fft_* ops) and the short-time transform (kiln/_stft.py)
from kiln import fft  # noqa: E402,F401
from kiln import special  # noqa: E402,F401  (torch.special's functions: kiln/special)
from kiln._stft import stft, istft  # noqa: E402,F401
Tensor.stft = stft
Tensor.istft = istft
# torch's second names for ops (arccos, greater, divide, fix, ...), the metadata predicates
# (is_signed, is_nonzero, ...) and more composites: pointwise (deg2rad, sinc, gcd, frexp, ...),
# matrix products and statistics (addmv, addr, cov, cholesky_solve, ...), indexing and counting
# (index_copy, scatter_reduce, tensor_split, histc, kthvalue, ...) in kiln/_aliases.py,
# _pointwise_more.py, _matrix_more.py and _index_ops_more.py; their Tensor methods are bound there
from kiln import _aliases  # noqa: E402
from kiln._aliases import (  # noqa: E402,F401
    true_divide, sgn, ravel, msort, argwhere, adjoint, fliplr, flipud, nansum, is_signed, is_complex, is_conj, is_neg,
    is_nonzero, is_same_size, matrix_power, get_device,
)
_aliases.bind_functions(globals())  # arccos, greater, divide, fix, ...: the registry's (Note [Op aliases])
from kiln._pointwise_more import (  # noqa: E402,F401
    deg2rad, deg2rad_, rad2deg, rad2deg_, sinc, sinc_, float_power, heaviside, gcd, gcd_, lcm, lcm_, ldexp, ldexp_,
    frexp, isposinf, isneginf, isreal, logcumsumexp,
)
from kiln._matrix_more import (  # noqa: E402,F401
    addmv, addmv_, addr, addbmm, inner, vdot, diagflat, cov, corrcoef, dist, renorm, cholesky_solve, cholesky_inverse,
    frobenius_norm, nuclear_norm,
)
from kiln._index_ops_more import (  # noqa: E402,F401
    take_along_dim, index_copy, index_fill, masked_scatter, put, scatter_reduce, tensor_split, hsplit, vsplit, dsplit,
    histc, bincount, kthvalue, aminmax,
)
# torch-level forms of nn.functional ops with aten's signatures (torch.celu, torch.max_pool1d, torch.kl_div
# with an int reduction, ...: kiln/_nn_toplevel.py) and special functions (polygamma, mvlgamma, igamma,
# igammac, nextafter: kiln/_special_more.py)
from kiln._nn_toplevel import (  # noqa: E402,F401
    celu, celu_, selu, selu_, prelu, rrelu, rrelu_, hardshrink, conv1d, conv3d, conv_transpose1d, conv_transpose2d,
    conv_transpose3d, avg_pool1d, max_pool1d, max_pool1d_with_indices, max_pool3d, adaptive_avg_pool1d,
    adaptive_max_pool1d, pdist, pixel_shuffle, pixel_unshuffle, channel_shuffle, native_channel_shuffle,
    cosine_similarity, pairwise_distance, bilinear, embedding_bag, instance_norm, rms_norm, kl_div,
    margin_ranking_loss, hinge_embedding_loss, cosine_embedding_loss, poisson_nll_loss, triplet_margin_loss,
    alpha_dropout, alpha_dropout_, feature_alpha_dropout, feature_alpha_dropout_, feature_dropout, feature_dropout_,
    grid_sampler, grid_sampler_2d, grid_sampler_3d, affine_grid_generator,
)
from kiln._special_more import (  # noqa: E402,F401
    polygamma, mvlgamma, igamma, igammac, nextafter,
)
# creation and numeric utilities (logspace, isin, histogram, trapezoid, combinations, ...: kiln/_utilities_more.py),
# index_reduce (kiln/_tensor_methods_extra.py), the global switches (kiln/_settings.py) and the constants
from kiln._utilities_more import (  # noqa: E402,F401
    logspace, range, asarray, frombuffer, cartesian_prod, combinations, block_diag, vander, row_stack, unravel_index,
    trapezoid, trapz, cumulative_trapezoid, histogram, isin, chain_matmul, lu, lu_unpack, triangular_solve, detach,
    detach_, is_inference, unsafe_chunk, unsafe_split, unsafe_split_with_sizes, empty_permuted, nonzero_static,
    typename,
)
Tensor.nonzero_static = lambda self, *, size, fill_value=-1: nonzero_static(self, size=size, fill_value=fill_value)
from kiln.amp import GradScaler  # noqa: E402,F401  (torch.GradScaler is torch.amp.GradScaler)
from kiln._tensor_methods_extra import index_reduce  # noqa: E402,F401
from kiln._settings import (  # noqa: E402,F401
    set_default_device, get_default_device, set_warn_always, is_warn_always_enabled, set_anomaly_enabled,
    is_anomaly_enabled, is_anomaly_check_nan_enabled, get_num_interop_threads, set_num_interop_threads,
)
import math as _math  # noqa: E402

e, pi, inf, nan, newaxis = _math.e, _math.pi, _math.inf, _math.nan, None
from kiln._storage import UntypedStorage, TypedStorage, is_storage, storage as _storage, \
    untyped_storage as _untyped_storage  # noqa: E402

Tensor.untyped_storage, Tensor.storage = _untyped_storage, _storage
from kiln._tensor import _install_more_methods  # noqa: E402

_install_more_methods()


def pinverse(input, rcond=1e-15):
    """The pseudo-inverse, singular values below rcond times the largest treated as 0 (linalg.pinv)."""
    return linalg.pinv(input, rtol=rcond)


Tensor.pinverse = pinverse


def matrix_exp(A):
    """exp of each square matrix in A (torch.matrix_exp, Tensor.matrix_exp: linalg.matrix_exp)."""
    return linalg.matrix_exp(A)


_lu_solve_warned = False


def lu_solve(b, LU_data, LU_pivots, *, out=None):
    """The deprecated torch.lu_solve: linalg.lu_solve with its arguments reversed (warns once, as torch)."""
    global _lu_solve_warned
    if not _lu_solve_warned:
        _lu_solve_warned = True
        import warnings

        warnings.warn("torch.lu_solve is deprecated in favor of torch.linalg.lu_solveand will be removed in a future "
                      "PyTorch release.\nNote that torch.linalg.lu_solve has its arguments reversed.\nX = "
                      "torch.lu_solve(B, LU, pivots)\nshould be replaced with\nX = torch.linalg.lu_solve(LU, pivots, B)",
                      UserWarning, stacklevel=2)
    return linalg.lu_solve(LU_data, LU_pivots, b, out=out)


Tensor.matrix_exp = matrix_exp
Tensor.lu_solve = lu_solve


def _assert(condition, message):
    """assert condition, message — as a function call (torch._assert), so it also runs under -O."""
    if not condition:
        raise AssertionError(message)


def __getattr__(name):
    if name in ("_dynamo", "distributions", "profiler", "library"):  # reachable after a bare `import kiln`, as torch's are
        import importlib

        return importlib.import_module("kiln." + name)
    raise AttributeError(f"module 'kiln' has no attribute '{name}'")


# --- compilation (kiln._dynamo; imported on first use) -------------------------------------------
_COMPILE_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None,
            disable=False):
    """Compiles `model` (a function or an nn.Module; as a decorator when omitted): its Python bytecode
    is captured into graphs on first call (kiln._dynamo) and run by `backend`.

    fullgraph=True raises at the first graph break; dynamic=True/False forces symbolic/static sizes
    (None: static first, symbolic for sizes that change). For Inductor, mode="max-autotune" times the
    alternatives for matmul and convolution and keeps the fastest; mode="reduce-overhead" keeps
    intermediate buffers allocated between calls; options={"max_autotune": True, ...} sets them
    one by one (kiln._inductor.compile_fx.OPTIONS)."""
    if model is None:
        return lambda m: compile(m, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                                 options=options, disable=disable)
    if mode not in _COMPILE_MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: {', '.join(m for m in _COMPILE_MODES if m)}")
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be specified at the same time.")
    if dynamic not in (None, True, False):
        raise TypeError(f"kiln.compile(): dynamic must be None, True or False, got {dynamic!r}")
    if disable:
        return model
    from kiln import _dynamo

    compiler = _dynamo.backends.registry.lookup_backend(backend)
    if backend == "inductor" and (mode is not None or options is not None) and hasattr(compiler, "with_config"):
        compiler = compiler.with_config(mode, options)  # raises on an unknown option
    compiler = _debugging_backend(compiler, backend)
    if compiler is None:  # tools/compile_bisect.py's eager reference run
        return model
    return _dynamo.optimize(compiler, fullgraph=fullgraph, dynamic=dynamic)(model)


def _debugging_backend(compiler, backend):
    """kiln.compile's backend as the debugging variables change it: KILN_COMPILE_DEBUG=1 makes its
    folder now (so graph breaks are logged there), KILN_REPRO_AFTER=dynamo writes a repro of a
    crashing backend, tools/compile_bisect.py picks the backend (None: run eagerly)."""
    import os

    if os.environ.get("KILN_COMPILE_DEBUG") == "1":
        from kiln._inductor import debug

        debug.run_dir()
    if os.environ.get("KILN_REPRO_AFTER"):
        from kiln._dynamo.repro.after_dynamo import wrap_backend_debug

        compiler = wrap_backend_debug(compiler, backend if isinstance(backend, str) else None)
    if os.environ.get("KILN_BISECT_BACKEND"):
        from kiln._dynamo.compiler_bisector import backend_from_environment

        compiler = backend_from_environment(compiler)
    return compiler
