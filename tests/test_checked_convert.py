"""A Python number stored into an integer dtype is refused when the dtype cannot hold it, as
PyTorch's checked_convert refuses it (tensor/ops/checked_convert.h): fill_, full, kiln.tensor and
x[k] = v raise where they wrapped (int8 300 gave 44); fill_ with a tensor value and arithmetic still
wrap, as PyTorch's do. An unsigned dtype takes negatives down to -max (uint8 -1 is 255). Floating
dtypes refuse finite values past their range where PyTorch's c10::overflows does (float32.fill_(1e39);
x[k] = v only for float32, torch.tensor never), and a Python int past uint64 is Python's OverflowError."""

import math

import numpy as np
import pytest

import kiln
from conftest import requires_torch, torch

CASES = [("int8", 300), ("int8", -129), ("int8", 127), ("int8", -128), ("int8", 2.5), ("int8", 127.5),
         ("int8", -128.5), ("int8", math.nan), ("int8", math.inf), ("uint8", -1), ("uint8", -255), ("uint8", -256),
         ("uint8", 255.5), ("uint8", -1.0), ("uint8", 256), ("int16", 40000), ("int32", 2**31), ("int32", -2**31),
         ("int64", 2**63 - 1), ("int64", 9.3e18), ("int64", 2**63), ("int64", 2**70), ("float32", 2**70),
         ("bool", 2), ("bool", -1.5), ("float64", 1e300),
         # floating dtypes: finite values past the dtype's range (c10::overflows), ints past uint64
         ("float32", 1e39), ("float32", -1e39), ("float32", 3.5e38), ("float32", math.inf), ("float16", 70000),
         ("float16", 65504), ("float16", math.nan), ("bfloat16", 3.39e38), ("float64", 1e308), ("float32", 2**64 - 1),
         ("float32", -2**70), ("int64", 2**64)]


def _outcome(fn):
    try:
        out = fn()
    except (RuntimeError, ValueError, OverflowError) as e:
        return type(e).__name__
    return out.tolist() if hasattr(out, "tolist") else out


def _run(lib, dtype, value, how):
    dt = getattr(lib, dtype)

    def go():
        x = lib.zeros(4, dtype=dt)
        if how == "fill_":
            return x.fill_(value)
        if how == "full":
            return lib.full((2,), value, dtype=dt)
        if how == "tensor":
            return lib.tensor(value, dtype=dt)
        if how == "x[1] = v":
            x[1] = value
        elif how == "x[1:3] = v":
            x[1:3] = value
        elif how == "x[i] = v":
            x[lib.tensor([0, 2])] = value
        elif how == "x[mask] = v":
            x[lib.tensor([True, False, True, False])] = value
        elif how == "x[[0, 1]] = v":  # a key the Python parse takes
            x[[0, 1]] = value
        return x

    return _outcome(go)


@requires_torch
@pytest.mark.parametrize("how", ["fill_", "full", "tensor", "x[1] = v", "x[1:3] = v", "x[i] = v", "x[mask] = v",
                                 "x[[0, 1]] = v"])
@pytest.mark.parametrize("dtype,value", CASES, ids=lambda c: repr(c))
def test_numbers_into_integer_dtypes_as_pytorch(dtype, value, how):
    got, want = _run(kiln, dtype, value, how), _run(torch, dtype, value, how)
    if isinstance(want, str) and want in ("ValueError", "OverflowError"):
        assert got in ("ValueError", "OverflowError"), (got, want)
    elif isinstance(want, str):
        assert got == want, (got, want)
    else:
        assert not isinstance(got, str), got
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@requires_torch
def test_tensor_values_and_arithmetic_still_wrap():
    for lib in (kiln, torch):
        x = lib.zeros(2, dtype=lib.int8)
        x.fill_(lib.tensor(300))
        assert x.tolist() == [44, 44]
        y = lib.zeros(2, dtype=lib.int8)
        y[0] = lib.tensor(300)
        assert y.tolist() == [44, 0]


def test_nothing_is_written_when_refused():
    x = kiln.arange(4, dtype=kiln.int8)
    for write in (lambda: x.__setitem__(1, 300), lambda: x.__setitem__(slice(0, 2), -200),
                  lambda: x.fill_(1000), lambda: x.__setitem__(kiln.tensor([0]), 2**70)):
        with pytest.raises((RuntimeError, ValueError)):
            write()
    assert x.tolist() == [0, 1, 2, 3]
