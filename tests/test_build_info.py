"""kiln's build flags, exception classes and the layout / memory_format types (kiln/_build_info.py),
and the deprecated frobenius_norm / nuclear_norm, against PyTorch 2.13: the same answers on a
CPU-only machine, the same types, pickling and errors."""

import pickle
import warnings

import numpy as np
import pytest

import kiln
from conftest import requires_torch, torch

pytestmark = requires_torch


def _both(fn):
    out = []
    for lib in (kiln, torch):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out.append(fn(lib))
        except Exception as e:  # noqa: BLE001 - the class and message are the result
            out.append((type(e).__name__, str(e).replace("torch", "kiln")))
    return out


@pytest.mark.parametrize("query", [
    lambda m: isinstance(m.strided, m.layout) and isinstance(m.channels_last, m.memory_format),
    lambda m: (repr(m.strided).split(".")[1], repr(m.preserve_format).split(".")[1], m.layout.__name__,
               m.memory_format.__name__),
    lambda m: pickle.loads(pickle.dumps(m.strided)) is m.strided,
    lambda m: pickle.loads(pickle.dumps(m.channels_last)) is m.channels_last,
    lambda m: m.layout(),
    lambda m: [c.__name__ for c in m.OutOfMemoryError.__mro__[1:]],
    lambda m: m.cuda.OutOfMemoryError is m.OutOfMemoryError,
    lambda m: [c.__name__ for c in m.AcceleratorError.__mro__[1:]],
    lambda m: [c.__name__ for c in m.FatalError.__mro__[1:]],
    lambda m: m.JITException is m.jit.Error and issubclass(m.JITException, Exception),
    lambda m: (m.has_lapack, m.has_spectral, m.compiled_with_cxx11_abi(), m.init_num_threads()),
    lambda m: (m.get_device_module() is m.cpu, m.get_device_module("cpu") is m.cpu),
    lambda m: m.get_device_module("xla"),
], ids=["isinstance", "repr", "pickle layout", "pickle memory_format", "no instances", "oom", "cuda oom",
        "accelerator error", "fatal error", "jit error", "flags", "device module", "unknown device module"])
def test_build_info_as_torch(query):
    k, t = _both(query)
    assert k == t


X = np.array([[[1.0, 2, 3], [4, 5, 6]], [[0, 1, 0], [2, -2, 1]]])


@pytest.mark.parametrize("call", [
    lambda m, x: m.frobenius_norm(x, [1, 2]), lambda m, x: m.frobenius_norm(x, 1, True),
    lambda m, x: m.frobenius_norm(x, [0, 1, 2]), lambda m, x: m.nuclear_norm(x[0]),
    lambda m, x: m.nuclear_norm(x, [1, 2], keepdim=True), lambda m, x: m.nuclear_norm(x[0], True),
    lambda m, x: m.nuclear_norm(x),
])
def test_deprecated_norms_as_torch(call):
    def run(m):
        x = m.tensor(X.tolist(), dtype=m.float64, requires_grad=True)
        y = call(m, x)
        y.sum().backward()
        return tuple(y.shape), np.array(y.tolist()), np.array(x.grad.tolist())

    k, t = _both(run)
    if isinstance(t[0], str):  # both raised
        assert k == t
        return
    assert k[0] == t[0]
    np.testing.assert_allclose(k[1], t[1], rtol=1e-12)
    np.testing.assert_allclose(k[2], t[2], rtol=1e-10, atol=1e-12)


def test_deprecated_norms_warn_once_as_torch():
    import kiln._matrix_more as mm

    mm._DEPRECATED_WARNED.clear()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        kiln.frobenius_norm(kiln.ones(2, 2), [0, 1])
        kiln.frobenius_norm(kiln.ones(2, 2), [0, 1])
    assert [str(w.message) for w in seen] == [
        "at::frobenius_norm is deprecated and it is just left for JIT compatibility. It will be removed in a future "
        "PyTorch release. Please use `linalg.vector_norm(A, 2., dim, keepdim)` instead"]
