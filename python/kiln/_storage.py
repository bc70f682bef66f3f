"""Tensor.untyped_storage() and Tensor.storage(): PyTorch's storage objects over a kiln tensor's
memory, for the programs that ask a tensor where its bytes live (safetensors finds tensors that
share memory by `t.untyped_storage().data_ptr()` and `.nbytes()`; checkpoint code compares storages).

A storage here is a view of the whole storage's bytes (a uint8 tensor over it), so reading a byte
or tolist() sees the tensor's current memory; one Python object stands for one storage while it
lives, so `x.untyped_storage() is x.untyped_storage()` as in PyTorch. Storages are not resized or
shared across processes here (kiln has no shared-memory storages): `resize_` and `share_memory_`
raise NotImplementedError naming the alternative.
"""

import warnings
import weakref

import kiln

__all__ = ["UntypedStorage", "TypedStorage", "is_storage"]

_by_storage = weakref.WeakValueDictionary()  # storage id -> its UntypedStorage while one is alive


def _bytes_of(tensor):
    """A uint8 tensor over every byte of tensor's storage."""
    nbytes = tensor._storage_nbytes()
    whole = tensor.detach().as_strided((nbytes // tensor.element_size(),), (1,), 0)
    return whole.view(kiln.uint8) if tensor.dtype != kiln.uint8 else whole


class UntypedStorage:
    """The bytes under a tensor (torch.UntypedStorage): `kiln.UntypedStorage(n)` makes n new bytes;
    `t.untyped_storage()` is t's."""

    def __init__(self, size=0, *, device=None):
        self._bytes = kiln.zeros(int(size), dtype=kiln.uint8, device=device)

    @classmethod
    def _of(cls, tensor):
        key = tensor._storage_id()
        found = _by_storage.get(key) if key else None
        if found is None:
            found = object.__new__(cls)
            found._bytes = _bytes_of(tensor)
            if key:
                _by_storage[key] = found
        return found

    def data_ptr(self):
        return self._bytes._storage_data_ptr()

    def nbytes(self):
        return self._bytes._storage_nbytes()

    def size(self):
        return self.nbytes()

    def __len__(self):
        return self.nbytes()

    def element_size(self):
        return 1

    @property
    def device(self):
        return self._bytes.device

    @property
    def is_cuda(self):
        return self._bytes.device.type == "cuda"

    @property
    def is_sparse(self):
        return False

    @property
    def _cdata(self):
        return self._bytes._storage_id()

    def is_shared(self):
        return False

    def share_memory_(self):
        raise NotImplementedError("UntypedStorage.share_memory_: kiln has no shared-memory storages; pass tensors "
                                  "between processes by saving them (kiln.save) instead")

    def resize_(self, size):
        raise NotImplementedError("UntypedStorage.resize_: kiln's storages keep their size; make a new tensor "
                                  "(kiln.empty) instead")

    def cpu(self):
        return self

    def tolist(self):
        return self._bytes.tolist()

    def __getitem__(self, index):
        if isinstance(index, slice):
            return UntypedStorage._of(self._bytes[index].clone())
        return int(self._bytes[index].item())

    def __iter__(self):
        return iter(self.tolist())

    def __repr__(self):
        body = "\n".join(f" {b}" for b in self.tolist())
        return f"{body}\n[kiln.storage.UntypedStorage(device={self.device}) of size {len(self)}]".lstrip("\n")


class TypedStorage:
    """A tensor's storage read as its dtype (torch.TypedStorage, deprecated in PyTorch as here:
    `t.storage()` warns once and t.untyped_storage() is the storage itself)."""

    def __init__(self, *args, **kwargs):
        raise RuntimeError("kiln.TypedStorage is made by Tensor.storage(); use Tensor.untyped_storage() for the "
                           "bytes")

    @classmethod
    def _of(cls, tensor):
        obj = object.__new__(cls)
        obj._untyped_storage = UntypedStorage._of(tensor)
        obj.dtype = tensor.dtype
        return obj

    def _values(self):
        return self._untyped_storage._bytes.view(self.dtype)

    def untyped(self):
        return self._untyped_storage

    def element_size(self):
        return kiln.empty((), dtype=self.dtype).element_size()

    def nbytes(self):
        return self._untyped_storage.nbytes()

    def size(self):
        return self.nbytes() // self.element_size()

    def __len__(self):
        return self.size()

    def data_ptr(self):
        return self._untyped_storage.data_ptr()

    @property
    def device(self):
        return self._untyped_storage.device

    @property
    def is_cuda(self):
        return self._untyped_storage.is_cuda

    def is_shared(self):
        return False

    def tolist(self):
        return self._values().tolist()

    def __getitem__(self, index):
        return self._values()[index].item()

    def __iter__(self):
        return iter(self.tolist())

    def __repr__(self):
        body = "\n".join(f" {v}" for v in self.tolist())
        return f"{body}\n[kiln.storage.TypedStorage(dtype={self.dtype}, device={self.device}) of size {len(self)}]"


_warned_typed = []


def untyped_storage(self):
    """The tensor's storage as bytes (Tensor.untyped_storage)."""
    return UntypedStorage._of(self)


def storage(self):
    """The tensor's storage read as its dtype (Tensor.storage; deprecated, it warns once as PyTorch's)."""
    if not _warned_typed:
        _warned_typed.append(True)
        warnings.warn("TypedStorage is deprecated. It will be removed in the future and UntypedStorage will be the "
                      "only storage class. This should only matter to you if you are using storages directly.  To "
                      "access UntypedStorage directly, use tensor.untyped_storage() instead of tensor.storage()",
                      UserWarning, stacklevel=2)
    return TypedStorage._of(self)


def is_storage(obj):
    """Whether obj is a storage object (torch.is_storage)."""
    return isinstance(obj, (UntypedStorage, TypedStorage))
