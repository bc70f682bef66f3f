"""Tensor.untyped_storage() / Tensor.storage() (kiln/_storage.py) against PyTorch 2.13: the bytes,
their address and size, the typed view, identity of one storage's object, is_storage, and the
deprecation warning of TypedStorage; safetensors' shared-tensor check works on kiln tensors."""

import warnings

import pytest

import kiln
from conftest import requires_torch, torch

pytestmark = requires_torch


def _answers(m):
    x = m.arange(6.0).view(2, 3)[1]
    s = x.untyped_storage()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        t = x.storage()
    return [s.data_ptr() == x.data_ptr() - x.storage_offset() * 4, s.nbytes(), s.size(), len(s), s.element_size(),
            str(s.device), s.is_shared(), s[6], s[7], s.tolist()[:8], type(s[4:8]).__name__, s[4:8].tolist(),
            t.size(), str(t.dtype).split(".")[1], t.element_size(), t.nbytes(), len(t), t.data_ptr() == s.data_ptr(),
            t.tolist(), t[1], m.is_storage(s), m.is_storage(t), m.is_storage(x),
            x.untyped_storage() is x.untyped_storage(), x.view(3, 1).untyped_storage().data_ptr() == s.data_ptr(),
            isinstance(s, m.UntypedStorage), isinstance(t, m.TypedStorage), [str(w.message)[:30] for w in seen],
            m.ones(3, requires_grad=True).untyped_storage().nbytes(),
            m.tensor([1, 2], dtype=m.int16).untyped_storage().tolist(), len(m.UntypedStorage(5))]


def test_storages_answer_as_torch():
    assert _answers(kiln) == _answers(torch)


def test_storage_sees_the_tensors_current_bytes():
    x = kiln.zeros(2, dtype=kiln.int32)
    s = x.untyped_storage()
    x[1] = 258
    assert s.tolist() == [0, 0, 0, 0, 2, 1, 0, 0]


def test_shared_tensors_found_by_storage_as_safetensors_does():
    # safetensors' _find_shared_tensors groups tensors by (device, untyped_storage().data_ptr(),
    # nbytes()): tied weights share one group
    w = kiln.nn.Linear(3, 4)
    tied = w.weight
    other = kiln.randn(4, 3)

    def key(t):
        s = t.untyped_storage()
        return (str(t.device), s.data_ptr(), s.nbytes())

    assert key(w.weight) == key(tied) != key(other)


def test_unsupported_storage_calls_name_the_alternative():
    s = kiln.ones(2).untyped_storage()
    with pytest.raises(NotImplementedError, match="kiln.save"):
        s.share_memory_()
    with pytest.raises(NotImplementedError, match="kiln.empty"):
        s.resize_(0)
