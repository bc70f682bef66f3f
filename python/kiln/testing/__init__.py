"""kiln.testing: assert_close, as torch.testing.assert_close.

    kiln.testing.assert_close(actual, expected)            # tolerances from the dtype
    kiln.testing.assert_close(out, ref, rtol=0, atol=0)     # exact
    kiln.testing.assert_close({"w": g1}, {"w": g2})         # nested sequences and mappings

Tensors must agree in shape, device, dtype (check_dtype) and strides (check_stride=False by
default), then |actual - expected| <= atol + rtol * |expected| elementwise. The default tolerances
depend on the dtype, as PyTorch's: float16 (1e-3, 1e-5), bfloat16 (1.6e-2, 1e-5), float32 (1.3e-6,
1e-5), float64 (1e-7, 1e-7), integers and bool exact; Python floats compare as float64, ints
exactly. A failure raises AssertionError with PyTorch's message ("Tensor-likes are not close!",
the mismatched count, the greatest absolute and relative difference and their index, and for
nested inputs "The failure occurred for item [...]"); inputs no pair handles raise TypeError.
"""

import collections.abc
import math

__all__ = ["assert_close"]

# (rtol, atol) by dtype name; every other dtype compares exactly
_TOLERANCES = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
               "float64": (1e-7, 1e-7)}


class _Failure(Exception):
    def __init__(self, cls, message):
        super().__init__(message)
        self.cls, self.message = cls, message


def _tolerances(*dtypes, rtol, atol):
    if (rtol is None) != (atol is None):
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but got no "
                         f"{'rtol' if rtol is None else 'atol'}.")
    if rtol is not None:
        return rtol, atol
    pairs = [_TOLERANCES.get(str(d).split(".")[-1], (0.0, 0.0)) for d in dtypes]
    return max(p[0] for p in pairs), max(p[1] for p in pairs)


def _mismatch_msg(identifier, extra, abs_diff, abs_idx, atol, rel_diff, rel_idx, rtol):
    equality = rtol == 0 and atol == 0

    def diff_msg(kind, diff, idx, tol):
        msg = f"{kind.title()} difference: {diff}" if idx is None else \
            f"Greatest {kind} difference: {diff} at index {idx}"
        if not equality:
            msg += f" (up to {tol} allowed)"
        return msg + "\n"

    msg = f"{identifier} are not {'equal' if equality else 'close'}!\n\n"
    if extra:
        msg += f"{extra.strip()}\n"
    msg += diff_msg("absolute", abs_diff, abs_idx, atol)
    msg += diff_msg("relative", rel_diff, rel_idx, rtol)
    return msg.strip()


def _scalar_msg(actual, expected, rtol, atol):
    abs_diff = abs(actual - expected)
    rel_diff = float("inf") if expected == 0 else abs_diff / abs(expected)
    return _mismatch_msg("Scalars", f"Expected {expected} but got {actual}.", abs_diff, None, atol, rel_diff, None,
                         rtol)


def _unravel(flat, shape):
    idx = []
    for size in reversed(shape):
        idx.append(flat % size)
        flat //= size
    return tuple(reversed(idx))


def _compare_tensors(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, check_stride):
    import kiln

    for attr, get in (("shape", lambda t: t.shape), ("device", lambda t: t.device),
                      ("dtype", lambda t: t.dtype), ("stride()", lambda t: t.stride())):
        if (attr == "device" and not check_device) or (attr == "dtype" and not check_dtype) or \
                (attr == "stride()" and not check_stride):
            continue
        if get(actual) != get(expected):
            raise _Failure(AssertionError, f"The values for attribute '{attr}' do not match: {get(actual)} != "
                                           f"{get(expected)}.")
    rtol, atol = _tolerances(actual.dtype, expected.dtype, rtol=rtol, atol=atol)
    actual, expected = actual.detach(), expected.detach()
    if actual.dtype != expected.dtype:
        common = kiln.promote_types(actual.dtype, expected.dtype)
        actual, expected = actual.to(common), expected.to(common)
    if actual.numel() == 0:
        return
    matches = kiln.isclose(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan)
    if bool(matches.all().item()):
        return
    if actual.ndim == 0:
        raise _Failure(AssertionError, _scalar_msg(actual.item(), expected.item(), rtol, atol))
    n = matches.numel()
    mismatches = n - int(matches.sum().item())
    extra = f"Mismatched elements: {mismatches} / {n} ({mismatches / n:.1%})"
    a, e, m = actual.reshape(-1), expected.reshape(-1), matches.reshape(-1)
    if not a.dtype.is_floating_point:
        a, e = a.to(kiln.int64), e.to(kiln.int64)
    abs_diff = (a - e).abs().masked_fill(m, 0)
    max_abs, abs_idx = abs_diff.max(0)
    rel_diff = (abs_diff / e.abs()).masked_fill(m, 0)
    max_rel, rel_idx = rel_diff.max(0)
    shape = tuple(actual.shape)
    raise _Failure(AssertionError, _mismatch_msg("Tensor-likes", extra, max_abs.item(),
                                                 _unravel(int(abs_idx.item()), shape), atol, max_rel.item(),
                                                 _unravel(int(rel_idx.item()), shape), rtol))


def _is_number(x):
    return isinstance(x, (int, float, complex)) and not isinstance(x, bool)


def _compare(actual, expected, options):
    import kiln

    rtol, atol, equal_nan, check_device, check_dtype, check_stride = options
    if actual is None or expected is None:
        if actual is not expected:
            raise _Failure(AssertionError, f"None mismatch: {actual} is not {expected}")
        return
    if isinstance(actual, kiln.Tensor) and isinstance(expected, kiln.Tensor):
        return _compare_tensors(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, check_stride)
    if isinstance(actual, bool) and isinstance(expected, bool):
        if actual is not expected:
            raise _Failure(AssertionError, f"Booleans mismatch: {actual} is not {expected}")
        return
    if _is_number(actual) and _is_number(expected):
        if check_dtype and type(actual) is not type(expected):
            raise _Failure(AssertionError, f"The (d)types do not match: {type(actual)} != {type(expected)}.")
        kinds = [kiln.float64 if isinstance(x, (float, complex)) else kiln.int64 for x in (actual, expected)]
        r, a = _tolerances(*kinds, rtol=rtol, atol=atol)
        if equal_nan and math.isnan(abs(actual)) and math.isnan(abs(expected)):
            return
        diff = abs(actual - expected)
        if math.isfinite(diff) and diff <= a + r * abs(expected):
            return
        raise _Failure(AssertionError, _scalar_msg(actual, expected, r, a))
    seq = (collections.abc.Sequence,)
    if isinstance(actual, seq) and isinstance(expected, seq) and not isinstance(actual, str) and \
            not isinstance(expected, str):
        if len(actual) != len(expected):
            raise _Failure(AssertionError, f"The length of the sequences mismatch: {len(actual)} != {len(expected)}")
        for i, (x, y) in enumerate(zip(actual, expected)):
            _nested(x, y, options, i)
        return
    if isinstance(actual, collections.abc.Mapping) and isinstance(expected, collections.abc.Mapping):
        keys_a, keys_e = set(actual), set(expected)
        if keys_a != keys_e:
            missing = sorted(keys_e - keys_a, key=repr)
            extra = sorted(keys_a - keys_e, key=repr)
            raise _Failure(AssertionError, f"The keys of the mappings do not match:\nMissing keys in the actual "
                                           f"mapping: {missing}\nAdditional keys in the actual mapping: {extra}")
        for k in expected:
            _nested(actual[k], expected[k], options, k)
        return
    raise _Failure(TypeError, f"No comparison pair was able to handle inputs of type {type(actual)} and "
                              f"{type(expected)}.")


def _nested(actual, expected, options, key):
    try:
        _compare(actual, expected, options)
    except _Failure as f:
        path = f"[{key!r}]"
        if not getattr(f, "path", None):
            f.path = ""
        f.path = path + f.path
        raise


def assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None, equal_nan=False,
                 check_device=True, check_dtype=True, check_layout=True, check_stride=False, msg=None):
    """Raises AssertionError unless `actual` and `expected` are close (see the module docstring)."""
    __tracebackhide__ = True
    if (rtol is None) != (atol is None):
        _tolerances(rtol=rtol, atol=atol)
    try:
        _compare(actual, expected, (rtol, atol, equal_nan, check_device, check_dtype, check_stride))
    except _Failure as f:
        message = f.message
        if f.cls is AssertionError:
            if callable(msg):
                message = msg(message)
            elif msg is not None:
                message = msg
            if getattr(f, "path", None) and not (msg is not None and not callable(msg)):
                message += f"\n\nThe failure occurred for item {f.path}"
        raise f.cls(message) from None
