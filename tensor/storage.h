// tensor/storage.h: the memory block behind one or more tensors (views share one Storage).
//
// Note [Data-less storages]: meta and fake tensors have a Storage too, with a byte size and no
// memory (`data_less()`), so that aliasing is observable on them exactly as on real tensors: a
// view shares its base's StorageImpl, an in-place op returns its input's, and tracers compare
// StorageImpl identity to find outputs that alias inputs. A fake tensor's storage also names the
// FakeTensorMode it belongs to (every view of it then belongs to the same mode for free).
// TensorImpl::has_storage() stays "has memory to read": it is false for data-less storages.
#pragma once

#include <cstddef>
#include <memory>

#include "runtime/allocator.h"
#include "tensor/sym_int.h"

namespace kiln {

class FakeTensorMode;

class StorageImpl {
 public:
  StorageImpl(DataPtr data, size_t nbytes, Allocator* allocator)
      : data_(std::move(data)), nbytes_(nbytes), allocator_(allocator) {}
  // A data-less storage of `nbytes` (symbolic for fake tensors with symbolic sizes) on `device`,
  // owned by `fake_mode` (null for meta tensors).
  StorageImpl(SymInt nbytes, Device device, std::shared_ptr<FakeTensorMode> fake_mode)
      : data_(nullptr, [](void*) {}, device), nbytes_(nbytes.maybe_as_int().value_or(0)), allocator_(nullptr),
        sym_nbytes_(std::move(nbytes)), data_less_(true), fake_mode_(std::move(fake_mode)) {}
  void* data() const { return data_.get(); }
  size_t nbytes() const { return nbytes_; }
  const SymInt& sym_nbytes() const { return data_less_ ? sym_nbytes_ : (sym_nbytes_ = SymInt(int64_t(nbytes_))); }
  Device device() const { return data_.device(); }
  Allocator* allocator() const { return allocator_; }  // null for foreign memory (numpy)
  // Replaces the block (resize_ growing a tensor); the old contents are copied by the caller.
  void set_data(DataPtr data, size_t nbytes) { data_ = std::move(data); nbytes_ = nbytes; }
  // Data-less storages only (resize_ of a meta/fake tensor).
  void set_sym_nbytes(SymInt n) { nbytes_ = n.maybe_as_int().value_or(0); sym_nbytes_ = std::move(n); }

  bool data_less() const { return data_less_; }
  FakeTensorMode* fake_mode() const { return fake_mode_.get(); }
  const std::shared_ptr<FakeTensorMode>& fake_mode_ptr() const { return fake_mode_; }

 private:
  DataPtr data_;
  size_t nbytes_;
  Allocator* allocator_;
  mutable SymInt sym_nbytes_;
  bool data_less_ = false;
  std::shared_ptr<FakeTensorMode> fake_mode_;
};

using Storage = std::shared_ptr<StorageImpl>;

}  // namespace kiln
