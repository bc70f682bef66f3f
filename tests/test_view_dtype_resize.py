"""Tensor.view(dtype) and Tensor.resize_ / resize_as_ against PyTorch 2.13: the bytes read as another
dtype (equal and different element sizes, strided and offset views, results' shapes, strides and
offsets, sharing memory and version counters, no gradient), PyTorch's errors; view(dtype) under
kiln.compile (read and written through) against eager; resize_ keeping the elements it had."""

import numpy as np
import pytest

import kiln
from conftest import requires_torch, torch

pytestmark = requires_torch

DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"]


def pair(make):
    return make(kiln), make(torch)


def bits(t):
    """The raw bytes of t's elements (bool/bfloat16 as their bit patterns)."""
    if isinstance(t, torch.Tensor):
        return t.contiguous().view(torch.uint8).numpy().tobytes() if t.numel() else b""
    return bytes(t.contiguous().view(kiln.uint8).flatten().tolist()) if t.numel() else b""


SOURCES = {
    "contiguous": lambda lib: lib.arange(24, dtype=lib.int64).to(lib.float32).reshape(3, 8) * 1.5,
    "row_slice": lambda lib: (lib.arange(32, dtype=lib.float32).reshape(4, 8) - 7)[1:3],
    "column_block": lambda lib: (lib.arange(32, dtype=lib.float32).reshape(4, 8) + 0.25)[:, 2:6],
    "bytes": lambda lib: lib.arange(48, dtype=lib.int64).to(lib.uint8).reshape(2, 3, 8),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("source", list(SOURCES))
def test_view_dtype_as_torch(source, dtype):
    k, t = pair(SOURCES[source])
    try:
        want = t.view(getattr(torch, dtype))
    except RuntimeError as e:
        with pytest.raises(RuntimeError) as got:
            k.view(getattr(kiln, dtype))
        assert str(got.value) == str(e)
        return
    got = k.view(getattr(kiln, dtype))
    assert str(got.dtype)[5:] == dtype
    assert (tuple(got.shape), got.stride(), got.storage_offset()) == (tuple(want.shape), want.stride(),
                                                                       want.storage_offset())
    if dtype == "bool":  # a copy (bits() makes one of a strided view) turns torch's nonzero bytes into 1
        assert got.tolist() == want.tolist()
    else:
        assert bits(got) == bits(want)
    assert got.data_ptr() == k.data_ptr()


def test_view_dtype_shares_memory_and_has_no_gradient():
    x = kiln.zeros(2, 4, requires_grad=True)
    y = x.detach().view(kiln.int32)
    assert not x.view(kiln.int32).requires_grad and not x.view(kiln.float32).requires_grad
    y[0, 0] = 1065353216  # the bits of 1.0f
    assert x[0, 0].item() == 1.0 and x.detach()._version == y._version


@pytest.mark.parametrize("call", [
    lambda lib: lib.tensor(1.0).view(lib.float16),
    lambda lib: lib.ones(3, 4).t().view(lib.float16),
    lambda lib: lib.ones(3, 3).view(lib.float64),
    lambda lib: lib.ones(3, 5)[:, 1:].view(lib.float64),
    lambda lib: lib.ones(5, 4)[:, ::2].view(lib.float16),
])
def test_view_dtype_errors_as_torch(call):
    with pytest.raises(RuntimeError) as want:
        call(torch)
    with pytest.raises(RuntimeError) as got:
        call(kiln)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_view_dtype_compiled_matches_eager(backend):
    def f(x):
        raw = x.view(kiln.int32)
        sign = (raw < 0).to(kiln.float32)          # the sign bit, read through the int view
        y = x.clone()
        y.view(kiln.int32).bitwise_and_(0x7FFFFFFF)  # |y|, written through the int view
        return sign, y, raw.view(kiln.float32) * 2

    x = kiln.tensor([[1.5, -2.0, 0.0], [-0.5, 3.0, -7.25]])
    want = f(x)
    kiln._dynamo.reset()
    got = kiln.compile(f, backend=backend)(x)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.tolist() == w.tolist()
    assert want[1].tolist() == x.abs().tolist()


def test_resize_keeps_elements_and_grows_as_torch():
    for lib in (kiln, torch):
        x = lib.arange(6, dtype=lib.float32)
        same = x.resize_(2, 3)
        assert same is x and tuple(x.shape) == (2, 3) and x.stride() == (3, 1)
        assert x.flatten().tolist() == [0, 1, 2, 3, 4, 5]
        x.resize_(4, 4)
        assert tuple(x.shape) == (4, 4) and x.flatten()[:6].tolist() == [0, 1, 2, 3, 4, 5]
        x.resize_(2)
        assert x.tolist() == [0, 1]
        y = lib.empty(0)
        y.resize_as_(lib.ones(3, 2))
        assert tuple(y.shape) == (3, 2)
    with pytest.raises(RuntimeError, match="cannot resize variables that require grad"):
        kiln.ones(2, requires_grad=True).resize_(3)
    with pytest.raises(RuntimeError, match="negative dimension"):
        kiln.ones(2).resize_(-1)
    assert np.array_equal(kiln.zeros(2).resize_(0).numpy(), np.zeros(0))


# A transposed 2-D source copied into a contiguous tensor goes by 8 x 8 tiles (Note [Tiled
# transpose copy] in tensor/ops/copy.cc): sizes off the tile, a leading dimension wider than the
# rows (a column slice), every element size, and a copy into an existing tensor. 4-byte tiles
# transpose in AVX2 registers: float32 with NaN and infinities, and int32.
COPY_DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64", "bool", "complex64",
               "complex128"]


def _copy_sources(name, shape, seed, specials=False):
    """The same random values as a kiln and a torch tensor of dtype `name` (complex for complex
    dtypes; NaN and infinities in floating ones when `specials`)."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape) * 5
    if specials and name.startswith("float"):
        a[0, 1], a[9, 17], a[40, 8] = np.nan, np.inf, -np.inf
    if name.startswith("complex"):
        a = a + 1j * rng.standard_normal(shape)
    return kiln.tensor(a).to(getattr(kiln, name)), torch.tensor(a).to(getattr(torch, name))


def _values(x):
    """x as numpy; bfloat16 has no numpy dtype, and its float32 values are exact."""
    return (x.float() if x.dtype in (kiln.bfloat16, torch.bfloat16) else x).numpy()


@requires_torch
@pytest.mark.parametrize("name", COPY_DTYPES)
def test_transposed_copies_against_torch(name):
    k, t = _copy_sources(name, (77, 130), seed=0, specials=True)
    for kv, tv in ((k.t(), t.t()), (k[:, 3:100].t(), t[:, 3:100].t()), (k[5:70].t(), t[5:70].t())):
        got, want = kv.contiguous(), tv.contiguous()
        assert got.is_contiguous() and tuple(got.shape) == tuple(want.shape)
        np.testing.assert_array_equal(_values(got), _values(want))
        dst = kiln.zeros(tuple(kv.shape), dtype=kv.dtype)
        dst.copy_(kv)
        np.testing.assert_array_equal(_values(dst), _values(want))


# A same-dtype copy of an element-strided source goes by a typed loop (tensor/ops/copy.cc):
# every dtype, column and row steps, into new and existing tensors, against PyTorch.
@requires_torch
@pytest.mark.parametrize("name", COPY_DTYPES)
def test_strided_copies_against_torch(name):
    k, t = _copy_sources(name, (37, 90), seed=1)
    for view in (lambda x: x[:, 1::2], lambda x: x[::3, 2::5], lambda x: x[1:, 7], lambda x: x.t()[::2]):
        got, want = view(k).contiguous(), view(t).contiguous()
        np.testing.assert_array_equal(_values(got), _values(want))
        dst = kiln.zeros(tuple(view(k).shape), dtype=k.dtype).t().contiguous().t() if view(k).dim() == 2 else \
            kiln.zeros(tuple(view(k).shape), dtype=k.dtype)
        dst.copy_(view(k))  # a strided destination too
        np.testing.assert_array_equal(_values(dst), _values(want))
