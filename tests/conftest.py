"""Shared helpers for kiln's end-to-end tests: dtype mapping and comparison against PyTorch/numpy."""

import os

import numpy as np
import pytest

# The thread-oversubscription warning (kiln/_inductor/oversubscription.py) depends on what else the
# machine runs; tests that check for no warnings would fail by chance. Its own tests turn it on.
os.environ.setdefault("KILN_CHECK_THREADS", "0")
import kiln  # noqa: E402
import oracle_settings

oracle_settings.pin()  # oneDNN's AVX2 code on every machine (PyTorch's gelu)
try:
    import torch
except ImportError:  # the 3.12 environment has no torch; oracle tests fall back to numpy
    torch = None

DTYPE_NAMES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"]
FLOAT_NAMES = ["float32", "float64", "float16", "bfloat16"]
INT_NAMES = ["int64", "int32", "int16", "int8", "uint8"]

requires_torch = pytest.mark.skipif(torch is None, reason="PyTorch is the oracle and is only installed for 3.11")


def kdtype(name):
    return getattr(kiln, name)


def tdtype(name):
    return getattr(torch, name)


def random_array(shape, name, rng, low=-3.0, high=3.0):
    """Random data of dtype `name` as a float64/int64/bool numpy array (bfloat16-safe values)."""
    if name == "bool":
        return rng.random(shape) > 0.5
    if name in INT_NAMES:
        lo = 0 if name == "uint8" else int(low) * 3
        return rng.integers(lo, int(high) * 3 + 1, size=shape).astype(np.int64)
    data = rng.uniform(low, high, size=shape)
    if name in ("float16", "bfloat16"):
        data = np.round(data * 8) / 8  # exactly representable
    return data


def to_kiln(array, name):
    if array.size == 0:  # tolist() drops the shape of empty arrays ([] for (0, 3))
        return kiln.zeros(array.shape, dtype=kdtype(name))
    return kiln.tensor(array.tolist() if array.ndim else array.item(), dtype=kdtype(name))


def to_torch(array, name):
    if array.size == 0:
        return torch.zeros(array.shape, dtype=tdtype(name))
    return torch.tensor(array.tolist() if array.ndim else array.item(), dtype=tdtype(name))


def as_numpy(t):
    """kiln or torch tensor -> float64/int64/bool numpy array (via tolist: works for bfloat16)."""
    return np.array(t.tolist())


def assert_same(k, t, rtol=None, atol=None):
    """kiln result equals torch result: dtype, shape and values (NaN-aware)."""
    if isinstance(t, (tuple, list)):
        assert isinstance(k, (tuple, list)) and len(k) == len(t)
        for a, b in zip(k, t):
            assert_same(a, b, rtol, atol)
        return
    if not hasattr(t, "dtype"):
        assert k == pytest.approx(t, nan_ok=True)
        return
    assert str(k.dtype).split(".")[1] == str(t.dtype).split(".")[1], f"dtype {k.dtype} != {t.dtype}"
    assert tuple(k.shape) == tuple(t.shape), f"shape {tuple(k.shape)} != {tuple(t.shape)}"
    name = str(t.dtype).split(".")[1]
    if rtol is None:
        rtol = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 1.3e-5}.get(name, 1e-7)
    if atol is None:
        atol = {"float16": 1e-3, "bfloat16": 1e-2, "float32": 1e-5}.get(name, 1e-7)
    np.testing.assert_allclose(as_numpy(k), as_numpy(t), rtol=rtol, atol=atol, equal_nan=True)


def _builtin_exception(cls):
    """The builtin exception class an exception maps to (torch raises e.g. torch.OutOfMemoryError)."""
    return next(c for c in cls.__mro__ if c.__module__ == "builtins")


def assert_raises_like_torch(desc, call, inputs):
    """`call(lib, inputs(lib))` fails in torch; kiln must raise the same builtin exception class with
    a message, leave its inputs unchanged, and keep working."""
    with pytest.raises(Exception) as expected:
        call(torch, inputs(torch))
    k_in = inputs(kiln)
    before = {k: v.tolist() for k, v in k_in.items()}
    with pytest.raises(Exception) as got:
        call(kiln, k_in)
    want, have = _builtin_exception(type(expected.value)), _builtin_exception(type(got.value))
    assert have is want, f"{desc}: kiln raised {type(got.value).__name__}: {got.value}; torch raised " \
                         f"{type(expected.value).__name__}: {expected.value}"
    assert str(got.value), "the message must say what went wrong"
    assert {k: v.tolist() for k, v in k_in.items()} == before, "inputs must be unchanged"
    assert (kiln.ones(2) + 1).tolist() == [2.0, 2.0]  # still alive and working
