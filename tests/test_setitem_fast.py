"""x[key] = value run in C++ for basic keys, integer index tensors and boolean masks with a number
or a tensor value (Note [Item assignment in C++], python/csrc/python_tensor.cc), and x[mask] read
in C++: the same values, dtypes, gradients, version counts and errors as the Python parse
(Tensor._setitem, Tensor._getitem) and as PyTorch."""

import numpy as np
import pytest

import kiln
from conftest import requires_torch, torch

KEYS = [0, -1, (1, 2), slice(None), slice(1, None), slice(0, 4), slice(1, 4, 2), slice(-100, 100), slice(3, 1),
        (slice(None), 1), (Ellipsis, 0), (0, Ellipsis), (None, 0), (slice(1, 3), None, slice(None, None, 2)), (),
        Ellipsis, (1, 2, 3), (slice(0, 5), slice(0, 6))]
NUMBERS = [2.5, -3, True]


def _pair(shape=(4, 5, 6), dtype=np.float32):
    a = (np.arange(int(np.prod(shape))) % 3).astype(dtype).reshape(shape)
    return kiln.tensor(a), torch.tensor(a)


def _both(x, t, key, value, tvalue=None):
    tkey = torch.tensor(key.numpy()) if isinstance(key, kiln.Tensor) else key
    x[key] = value
    t[tkey] = value if tvalue is None else tvalue
    assert x.dtype.itemsize == t.dtype.itemsize
    np.testing.assert_array_equal(x.numpy(), t.numpy())


@requires_torch
@pytest.mark.parametrize("value", NUMBERS, ids=repr)
@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_numbers_into_basic_keys(key, value):
    x, t = _pair()
    _both(x, t, key, value)
    y, _ = _pair()
    y._setitem(key, value)  # the Python parse agrees
    np.testing.assert_array_equal(x.numpy(), y.numpy())


@requires_torch
@pytest.mark.parametrize("shape", [(), (6,), (1, 6), (1, 1, 6), (5, 1), "same"], ids=str)
@pytest.mark.parametrize("key", [(0,), (slice(None), 1), (Ellipsis, slice(1, 3), slice(None)), (0, 2, 5)], ids=repr)
def test_tensor_values_broadcast_as_pytorch(key, shape):
    x, t = _pair()
    dest = tuple(t[key].shape)
    shape = dest if shape == "same" else shape
    v = (np.arange(float(np.prod(shape))).reshape(shape) + 100).astype(np.float32)
    try:
        t[key] = torch.tensor(v)
    except RuntimeError:  # the value does not broadcast to this destination: both refuse it
        with pytest.raises(RuntimeError):
            x[key] = kiln.tensor(v)
        return
    x[key] = kiln.tensor(v)
    np.testing.assert_array_equal(x.numpy(), t.numpy())


@requires_torch
@pytest.mark.parametrize("dst,value", [(np.int64, 2.7), (np.int32, -1.9), (np.uint8, 7), (np.bool_, 0.5),
                                       (np.bool_, 0), (np.float64, 1 / 3), (np.int16, True)])
def test_numbers_take_the_destination_dtype(dst, value):
    x, t = _pair((3, 4), dst)
    _both(x, t, (slice(None), 1), value)
    _both(x, t, 2, value)


@requires_torch
@pytest.mark.parametrize("vdtype", [np.float64, np.int64, np.float16, np.bool_])
def test_tensor_values_of_another_dtype(vdtype):
    x, t = _pair((3, 4))
    v = np.array([1, 0, 3, 1]).astype(vdtype)
    _both(x, t, 1, kiln.tensor(v), torch.tensor(v))
    _both(x, t, (slice(None), 0), kiln.tensor(v[:1].reshape(())), torch.tensor(v[:1].reshape(())))


@requires_torch
@pytest.mark.parametrize("index", [[0, 2], [-1, 0, -1], [[1], [3]]], ids=str)
@pytest.mark.parametrize("value", [5.0, "row", "0d"])
def test_integer_index_tensors(index, value):
    x, t = _pair((4, 3))
    i = np.array(index)
    if value == "row":
        v = np.array([7.0, 8.0, 9.0], dtype=np.float32)
        kv, tv = kiln.tensor(v), torch.tensor(v)
    elif value == "0d":
        kv, tv = kiln.tensor(4.0), torch.tensor(4.0)
    else:
        kv = tv = value
    _both(x, t, kiln.tensor(i), kv, tv)


@requires_torch
@pytest.mark.parametrize("mask_shape", [(4,), (4, 5), (4, 5, 6)], ids=str)
@pytest.mark.parametrize("value", [-1.0, 3, "0d", "0d-int"])
def test_boolean_masks(mask_shape, value):
    rng = np.random.default_rng(0)
    x, t = _pair()
    m = rng.random(mask_shape) > 0.5
    kv = tv = value
    if value == "0d":
        kv, tv = kiln.tensor(-2.0, dtype=kiln.float64), torch.tensor(-2.0, dtype=torch.float64)
    elif value == "0d-int":
        kv, tv = kiln.tensor(9), torch.tensor(9)
    _both(x, t, kiln.tensor(m), kv, tv)


@requires_torch
@pytest.mark.parametrize("mask_shape", [(4,), (4, 5), (4, 5, 6)], ids=str)
def test_boolean_mask_reads(mask_shape):
    rng = np.random.default_rng(1)
    x, t = _pair()
    m = rng.random(mask_shape) > 0.3
    got, want = x[kiln.tensor(m)], t[torch.tensor(m)]
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert got.stride() == want.stride()
    python_parse = x._getitem(kiln.tensor(m))
    assert got.stride() == python_parse.stride()
    # gradients reach the selected elements only
    a = np.random.default_rng(2).standard_normal((4, 5, 6)).astype(np.float32)
    xg, tg = kiln.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    (xg[kiln.tensor(m)] * 3).sum().backward()
    (tg[torch.tensor(m)] * 3).sum().backward()
    np.testing.assert_array_equal(xg.grad.numpy(), tg.grad.numpy())


@requires_torch
def test_boolean_mask_of_the_wrong_shape_raises_as_pytorch():
    x, t = _pair((4, 5))
    with pytest.raises(IndexError) as want:
        t[torch.ones(3, dtype=torch.bool)]
    with pytest.raises(IndexError, match="shape of the mask"):
        x[kiln.ones(3, dtype=kiln.bool)]
    assert "shape of the mask" in str(want.value)


@requires_torch
def test_gradients_of_a_value_written_into_a_tensor():
    for lib in (kiln, torch):
        v = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        s = lib.tensor(4.0, requires_grad=True)
        w = lib.ones(3, requires_grad=True)
        x = lib.zeros(4, 3)
        x[1] = v  # x needs no grad: the write reaches its history (CopySlices)
        x[2:, 1] = s
        x[0] = w * 2
        x[x > 3.5] = 0.5  # masked_fill_ of a tensor needing grad
        (x * lib.arange(12.0).reshape(4, 3)).sum().backward()
        if lib is kiln:
            got = [v.grad.numpy(), s.grad.numpy(), w.grad.numpy(), x.detach().numpy()]
        else:
            want = [v.grad.numpy(), s.grad.numpy(), w.grad.numpy(), x.detach().numpy()]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@requires_torch
def test_writes_into_a_tensor_needing_grad():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    grads = []
    for lib in (kiln, torch):
        leaf = lib.tensor(a, requires_grad=True)
        x = leaf * 1
        x[0] = 7.0
        x[:, 1:3] = lib.tensor([5.0, 6.0])
        x[lib.tensor([2])] = 1.0
        (x * x).sum().backward()
        grads.append(leaf.grad.numpy())
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            leaf[0] = 1.0
    np.testing.assert_array_equal(grads[0], grads[1])


@requires_torch
def test_non_contiguous_destinations_and_version_counts():
    x, t = _pair((4, 6))
    xt, tt = x.t(), t.t()
    for key, value in [(0, 1.5), ((slice(None), 2), -1), (slice(1, 5, 2), 9.0)]:
        v0, w0 = x._version, t._version
        xt[key] = value
        tt[key] = value
        assert x._version - v0 == t._version - w0
        np.testing.assert_array_equal(x.numpy(), t.numpy())


@requires_torch
@pytest.mark.parametrize("key", [4, -5, (0, 0, 0), slice(None, None, 0), slice(None, None, -1), (0, 7)], ids=repr)
def test_bad_keys_raise_as_pytorch(key):
    with pytest.raises(Exception) as want:
        _pair((4, 5))[1][key] = 1.0
    x = _pair((4, 5))[0]
    before = x.numpy().copy()
    with pytest.raises(type(want.value)):
        x[key] = 1.0
    np.testing.assert_array_equal(x.numpy(), before)  # nothing was written


@requires_torch
def test_bad_values_raise_as_pytorch():
    x, t = _pair((4, 5))
    for key, value in [(0, np.zeros(3, np.float32)), ((slice(None), 0), np.zeros((2, 4), np.float32))]:
        with pytest.raises(RuntimeError):
            t[key] = torch.tensor(value)
        with pytest.raises(RuntimeError):
            x[key] = kiln.tensor(value)
    with pytest.raises(TypeError, match="Tensor does not support deleting items"):
        del t[0]
    with pytest.raises(TypeError, match="Tensor does not support deleting items"):
        del x[0]


def test_other_values_take_the_python_parse():
    x = kiln.zeros(3, 4)
    x[0] = [1, 2, 3, 4]  # a list
    x[1] = np.arange(4.0)  # an array
    x[2, np.int64(1)] = np.float32(5.0)  # numpy scalars
    np.testing.assert_array_equal(x.numpy(), [[1, 2, 3, 4], [0, 1, 2, 3], [0, 5, 0, 0]])


def test_inference_mode_and_no_grad():
    x = kiln.zeros(3)
    with kiln.no_grad():
        x[0] = 1.0
    with kiln.inference_mode():
        y = kiln.zeros(3)
        y[1] = 2.0
        y[kiln.tensor([2])] = 3.0
    np.testing.assert_array_equal(x.numpy(), [1, 0, 0])
    np.testing.assert_array_equal(y.numpy(), [0, 2, 3])


def test_compiled_writes_equal_eager():
    def f(x, m, i):
        y = x * 2
        y[0] = 1.5
        y[:, 1:3] = x[:, :2]
        y[m] = -1.0
        y[i] = 0.25
        return y[y > 0].sum() + y.sum()

    rng = np.random.default_rng(3)
    a = rng.standard_normal((5, 4)).astype(np.float32)
    m = kiln.tensor(rng.random((5, 4)) > 0.7)
    i = kiln.tensor([3, 1])
    want = f(kiln.tensor(a), m, i)
    got = kiln.compile(f, backend="aot_eager")(kiln.tensor(a), m, i)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    from kiln.fx.experimental.proxy_tensor import make_fx

    gm = make_fx(f)(kiln.tensor(a), m, i)
    np.testing.assert_allclose(gm(kiln.tensor(a), m, i).numpy(), want.numpy(), rtol=1e-6)


def test_the_common_cases_never_reach_the_python_parse(monkeypatch):
    def refuse(self, key, value=None):
        raise AssertionError(f"the Python parse ran for {key!r}")

    x = kiln.zeros(4, 5)
    m, i = x > 0, kiln.tensor([1, 2])
    monkeypatch.setattr(kiln.Tensor, "_setitem", refuse)
    monkeypatch.setattr(kiln.Tensor, "_getitem", refuse)
    x[0] = 1.0
    x[1:3, ::2] = kiln.tensor(2.0)
    x[..., 1] = kiln.arange(4.0)
    x[m] = 0.5
    x[i] = kiln.ones(5)
    x[None, 3] = 7
    m = x > 1
    np.testing.assert_array_equal(x[m].numpy(), np.full(5, 7.0))
    np.testing.assert_array_equal(x[i].numpy(), np.ones((2, 5)))
    with pytest.raises(AssertionError, match="Python parse"):
        x[[0, 1]] = 1.0  # a list key is the Python parse's
