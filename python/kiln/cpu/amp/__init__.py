"""kiln.cpu.amp: PyTorch's deprecated torch.cpu.amp.autocast, kiln.amp.autocast("cpu", ...)."""

import warnings


class autocast:
    """kiln.amp.autocast("cpu", ...); use that name instead."""

    def __new__(cls, enabled=True, dtype=None, cache_enabled=True):
        warnings.warn("`kiln.cpu.amp.autocast(args...)` is deprecated. Please use `kiln.amp.autocast('cpu', "
                      "args...)` instead.", FutureWarning, stacklevel=2)
        from kiln.amp.autocast_mode import autocast as _autocast
        import kiln
        return _autocast("cpu", dtype=kiln.bfloat16 if dtype is None else dtype, enabled=enabled,
                         cache_enabled=cache_enabled)
