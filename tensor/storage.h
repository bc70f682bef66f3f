// tensor/storage.h: the memory block behind one or more tensors (views share one Storage).
#pragma once

#include <cstddef>
#include <memory>

#include "runtime/allocator.h"

namespace kiln {

class StorageImpl {
 public:
  StorageImpl(DataPtr data, size_t nbytes, Allocator* allocator)
      : data_(std::move(data)), nbytes_(nbytes), allocator_(allocator) {}
  void* data() const { return data_.get(); }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return data_.device(); }
  Allocator* allocator() const { return allocator_; }  // null for foreign memory (numpy)
  // Replaces the block (resize_ growing a tensor); the old contents are copied by the caller.
  void set_data(DataPtr data, size_t nbytes) { data_ = std::move(data); nbytes_ = nbytes; }

 private:
  DataPtr data_;
  size_t nbytes_;
  Allocator* allocator_;
};

using Storage = std::shared_ptr<StorageImpl>;

}  // namespace kiln
