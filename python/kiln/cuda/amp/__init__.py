"""kiln.cuda.amp: PyTorch's deprecated torch.cuda.amp names. GradScaler here is kiln.amp.GradScaler
for device "cuda" (disabled with a warning, since kiln has no CUDA), constructing it warns that the
alias is deprecated, as PyTorch's does; autocast is kiln.amp.autocast("cuda", ...), which warns and
disables itself (there is no CUDA).
"""

import warnings

from kiln.amp import grad_scaler as _grad_scaler


class GradScaler(_grad_scaler.GradScaler):
    """kiln.amp.GradScaler("cuda", ...); use that name instead."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                 enabled=True):
        warnings.warn("`kiln.cuda.amp.GradScaler(args...)` is deprecated. "
                      "Please use `kiln.amp.GradScaler('cuda', args...)` instead.", FutureWarning, stacklevel=2)
        super().__init__("cuda", init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval, enabled=enabled)


class autocast:
    """kiln.amp.autocast("cuda", ...); use that name instead."""

    def __new__(cls, enabled=True, dtype=None, cache_enabled=True):
        warnings.warn("`kiln.cuda.amp.autocast(args...)` is deprecated. Please use `kiln.amp.autocast('cuda', "
                      "args...)` instead.", FutureWarning, stacklevel=2)
        from kiln.amp.autocast_mode import autocast as _autocast
        return _autocast("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)
