"""x[key] parsed in C++ for ints, slices, None, Ellipsis, tuples of them and integer index
tensors (Note [Basic indexing in C++], python/csrc/python_tensor.cc): the same values, views,
strides, gradients and errors as the Python parse (Tensor._getitem) and as PyTorch."""

import numpy as np
import pytest

import kiln
from conftest import requires_torch, torch

KEYS = [0, -1, 3, (1, 2), (-2, -3), slice(None), slice(1, None), slice(None, -1), slice(1, 4, 2),
        slice(-100, 100), slice(5, 2), slice(None, None, 3), (slice(None), 1), (Ellipsis, 0), (0, Ellipsis),
        (None, 0), (None, Ellipsis, None), (slice(1, 3), None, slice(None, None, 2)), (), Ellipsis, None,
        (Ellipsis, None, slice(1, 2)), (1, 2, 3), (slice(2, 2),)]


def _same_view(a, b):
    assert tuple(a.shape) == tuple(b.shape) and a.stride() == b.stride()
    assert a.storage_offset() == b.storage_offset()


@requires_torch
@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_basic_keys_match_the_python_parse_and_pytorch(key):
    a = np.arange(4 * 5 * 6, dtype=np.float32).reshape(4, 5, 6)
    x, t = kiln.tensor(a), torch.tensor(a)
    got = x[key]
    _same_view(got, x._getitem(key))
    want = t[key]
    assert tuple(got.shape) == tuple(want.shape) and got.stride() == want.stride()
    assert got.storage_offset() == want.storage_offset()
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert got._storage_data_ptr() == x._storage_data_ptr()  # a view
    assert got is not x


@requires_torch
@pytest.mark.parametrize("dtype", ["int64", "int32"])
@pytest.mark.parametrize("index", [[0, 2, -1, 2], [[1, 0], [3, 3]]], ids=["1d", "2d"])
def test_integer_tensor_keys(dtype, index):
    a = np.arange(20, dtype=np.float32).reshape(4, 5)
    x, t = kiln.tensor(a), torch.tensor(a)
    i = np.array(index, dtype=dtype)
    got, want = x[kiln.tensor(i)], t[torch.tensor(i)]
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert got._storage_data_ptr() != x._storage_data_ptr()


@requires_torch
@pytest.mark.parametrize("key", [4, -5, (0, 0, 0), slice(None, None, 0), slice(None, None, -1), 2**70, -2**63 - 1,
                                 (0, 7)], ids=repr)
def test_bad_keys_raise_as_pytorch(key):
    a = np.zeros((4, 5), dtype=np.float32)
    with pytest.raises(Exception) as want:
        torch.tensor(a)[key]
    with pytest.raises(type(want.value)):
        kiln.tensor(a)[key]


def test_gradients_flow_through_views():
    x = kiln.randn(4, 5, requires_grad=True)
    y = x[1:3, None, ::2] * 2 + x[kiln.tensor([0, 0])].sum()
    y.sum().backward()
    want = np.zeros((4, 5), dtype=np.float32)
    want[1:3, ::2] += 2
    want[0] += 2 * y.shape[0] * y.shape[1] * y.shape[2]
    np.testing.assert_allclose(x.grad.numpy(), want)


def test_other_keys_take_the_python_parse():
    x = kiln.arange(12.0).reshape(3, 4)
    assert x[True].shape == (1, 3, 4)  # a bool: unsqueeze and an advanced index
    assert x[x > 5].tolist() == [6.0, 7.0, 8.0, 9.0, 10.0, 11.0]
    assert x[[0, 2]].tolist() == [[0.0, 1.0, 2.0, 3.0], [8.0, 9.0, 10.0, 11.0]]
    assert x[np.int64(1), 2].item() == 6.0
    assert x[kiln.tensor(2)].tolist() == [8.0, 9.0, 10.0, 11.0]  # a 0-d integer tensor: a view
    assert x[kiln.tensor(2)]._storage_data_ptr() == x._storage_data_ptr()


def test_compiled_indexing_matches_eager():
    def f(x, i):
        return x[1:, None, 0] + x[..., -1:].sum() + x[i].sum(0)

    x = kiln.randn(5, 6, requires_grad=True)
    i = kiln.tensor([4, 0])
    eager = f(x, i)
    compiled = kiln.compile(f, fullgraph=True)(x, i)
    np.testing.assert_allclose(compiled.detach().numpy(), eager.detach().numpy(), rtol=1e-6)
    g_eager, = kiln.autograd.grad(eager.sum(), x)
    g_compiled, = kiln.autograd.grad(kiln.compile(f)(x, i).sum(), x)
    np.testing.assert_allclose(g_compiled.numpy(), g_eager.numpy(), rtol=1e-6)
