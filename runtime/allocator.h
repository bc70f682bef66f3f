// runtime/allocator.h: the allocator interface behind every Storage, and the CPU allocator.
//
// An allocation is a DataPtr: the address plus the deleter that gives it back, so memory from
// numpy (from_numpy), from a caching allocator or from CUDA is freed by whoever made it.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "runtime/device.h"

namespace kiln {

class DataPtr {
 public:
  using Deleter = std::function<void(void*)>;
  DataPtr() = default;
  DataPtr(void* data, Deleter deleter, Device device)
      : data_(data, std::move(deleter)), device_(device) {}
  void* get() const { return data_.get(); }
  Device device() const { return device_; }

 private:
  std::unique_ptr<void, Deleter> data_{nullptr, [](void*) {}};
  Device device_;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual DataPtr Allocate(size_t nbytes) = 0;
};

// 64-byte aligned host memory; large blocks are recycled through a small free list so that
// eager loops over big tensors do not pay the kernel's page faults on every op.
Allocator* GetCPUAllocator();

}  // namespace kiln
