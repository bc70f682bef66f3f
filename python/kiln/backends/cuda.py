"""kiln.backends.cuda: the cuBLAS matmul switches (`matmul.allow_tf32`, shared with
kiln.set_float32_matmul_precision as in PyTorch) and the scaled-dot-product-attention kernel switches
(enable_flash_sdp, ..., and the deprecated sdp_kernel context manager; on the CPU the flash switch
decides whether F.scaled_dot_product_attention may run the fused kernel, the math switch the
composition).
"""

import contextlib
import warnings

from kiln import _settings


def is_built():
    """Whether kiln was built with CUDA support: always (runtime/cuda/ loads the driver and the CUDA
    libraries at run time; kiln.cuda.is_available() says whether a GPU can be used)."""
    return True


class cuBLASModule:
    """kiln.backends.cuda.matmul: allow_tf32 mirrors float32 matmul precision ("highest" <-> False);
    unknown attributes raise AttributeError on get and set, as PyTorch's do."""

    _reduced = {"allow_fp16_reduced_precision_reduction": True, "allow_bf16_reduced_precision_reduction": True}

    def __getattr__(self, name):
        if name == "allow_tf32":
            return _settings.get_float32_matmul_precision() != "highest"
        if name in self._reduced:
            return type(self)._reduced[name]
        raise AttributeError("Unknown attribute " + name)

    def __setattr__(self, name, value):
        if name == "allow_tf32":
            _settings._check_bool(value, "kiln.backends.cuda.matmul.allow_tf32")
            _settings.set_float32_matmul_precision("high" if value else "highest")
            return
        if name in self._reduced:  # a bool, or PyTorch's (allow, allow_splitk) pair
            flags = value if isinstance(value, (tuple, list)) else (value,)
            if not flags or not all(type(f) is bool for f in flags):
                raise TypeError(f"{name} expects a bool or a tuple/list of bools, but got {type(value)}")
            type(self)._reduced[name] = flags[0]
            return
        raise AttributeError("Unknown attribute " + name)


matmul = cuBLASModule()

_sdp = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}


def _enable(kind, enabled):
    _settings._check_bool(enabled, f"kiln.backends.cuda.enable_{kind}_sdp")
    _sdp[kind] = enabled


def enable_flash_sdp(enabled):
    _enable("flash", enabled)


def enable_mem_efficient_sdp(enabled):
    _enable("mem_efficient", enabled)


def enable_math_sdp(enabled):
    _enable("math", enabled)


def enable_cudnn_sdp(enabled):
    _enable("cudnn", enabled)


def flash_sdp_enabled():
    return _sdp["flash"]


def mem_efficient_sdp_enabled():
    return _sdp["mem_efficient"]


def math_sdp_enabled():
    return _sdp["math"]


def cudnn_sdp_enabled():
    return _sdp["cudnn"]


def sdp_kernel(enable_flash=True, enable_math=True, enable_mem_efficient=True, enable_cudnn=True):
    """Deprecated in PyTorch (FutureWarning at the call): a context manager that enables exactly the
    named attention kernels and restores the previous switches on exit."""
    warnings.warn("`kiln.backends.cuda.sdp_kernel()` is deprecated. In the future, this context manager will be "
                  "removed. Please see `kiln.nn.attention.sdpa_kernel()` for the new context manager, with "
                  "updated signature.", FutureWarning, stacklevel=2)
    return _sdp_kernel({"flash": bool(enable_flash), "math": bool(enable_math),
                        "mem_efficient": bool(enable_mem_efficient), "cudnn": bool(enable_cudnn)})


@contextlib.contextmanager
def _sdp_kernel(flags):
    previous = dict(_sdp)
    _sdp.update(flags)
    try:
        yield
    finally:
        _sdp.update(previous)
