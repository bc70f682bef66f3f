// tensor/empty.cc: tensor allocation.
#include "tensor/empty.h"

#include "tensor/fake_tensor.h"

namespace kiln {

int64_t StorageBytesFor(const DimVector& sizes, const DimVector& strides, int64_t offset, int64_t itemsize) {
  int64_t last = 0;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return 0;
    last += (sizes[d] - 1) * strides[d];
  }
  return (offset + last + 1) * itemsize;
}

SymInt SymStorageBytesFor(const SymDimVector& sizes, const SymDimVector& strides, const SymInt& offset,
                          int64_t itemsize) {
  bool concrete = !offset.is_symbolic();
  for (size_t d = 0; d < sizes.size() && concrete; ++d)
    concrete = !sizes[d].is_symbolic() && !strides[d].is_symbolic();
  if (concrete) {
    DimVector s(sizes.size()), st(sizes.size());
    for (size_t d = 0; d < sizes.size(); ++d) s[d] = sizes[d].expect_int(), st[d] = strides[d].expect_int();
    return StorageBytesFor(s, st, offset.expect_int(), itemsize);
  }
  SymInt last = offset;
  for (size_t d = 0; d < sizes.size(); ++d) last = last + (sizes[d] - 1) * strides[d];
  return (last + 1) * itemsize;
}

Tensor EmptyTensor(const SymDimVector& sizes, ScalarType dtype, Device device, const SymDimVector& strides) {
  for (const SymInt& s : sizes) {
    if (!s.is_symbolic())
      KILN_CHECK(s.expect_int() >= 0, "Trying to create tensor with negative dimension ", s.expect_int(),
                 ": ", SizesToString(sizes));
  }
  if (const FakeAllocContext* fake = TlsFakeAllocContext())
    return fake->mode->Empty(sizes, strides, 0, dtype, device.is_meta() ? fake->device : device);
  Storage storage;
  if (device.is_meta()) {
    auto impl = std::make_shared<TensorImpl>(nullptr, dtype, device, DispatchKeySet(DispatchKey::Meta));
    impl->set_sizes_and_strides(sizes, strides, 0);
    impl->set_storage(std::make_shared<StorageImpl>(
        SymStorageBytesFor(impl->sym_sizes(), impl->sym_strides(), 0, ElementSize(dtype)), device, nullptr));
    return Tensor(std::move(impl));
  }
  if (device.is_cpu()) {
    DimVector concrete_sizes(sizes.size()), concrete_strides;
    for (size_t i = 0; i < sizes.size(); ++i) concrete_sizes[i] = sizes[i].expect_int();
    if (strides.empty()) concrete_strides = ContiguousStrides(concrete_sizes);
    else for (const SymInt& s : strides) concrete_strides.push_back(s.expect_int());
    int64_t nbytes = StorageBytesFor(concrete_sizes, concrete_strides, 0, ElementSize(dtype));
    Allocator* alloc = GetCPUAllocator();
    storage = std::make_shared<StorageImpl>(alloc->Allocate(nbytes), nbytes, alloc);
  } else if (device.is_cuda()) {
    throw NotImplementedError(
        "Could not allocate a tensor on '" + device.str() +
        "': CUDA kernels are not built into this version of kiln (CPU and meta only)");
  }
  auto impl = std::make_shared<TensorImpl>(std::move(storage), dtype, device,
                                           DispatchKeySet(BackendKey(device)));
  impl->set_sizes_and_strides(sizes, strides, 0);
  return Tensor(std::move(impl));
}

Tensor EmptyTensor(const DimVector& sizes, ScalarType dtype, Device device) {
  return EmptyTensor(SymDimVector(sizes.begin(), sizes.end()), dtype, device);
}

Tensor EmptyFromMeta(const TensorMeta& m) { return EmptyTensor(m.sizes, m.dtype, m.device, m.strides); }

Tensor EmptyLike(const Tensor& like) { return EmptyTensor(like->sym_sizes(), like.dtype(), like.device()); }
Tensor EmptyLike(const Tensor& like, ScalarType dtype) {
  return EmptyTensor(like->sym_sizes(), dtype, like.device());
}

Tensor MakeView(const Tensor& base, SymDimVector sizes, SymDimVector strides, SymInt offset) {
  auto impl = std::make_shared<TensorImpl>(base->storage(), base.dtype(), base.device(), base->keys());
  impl->set_sizes_and_strides(std::move(sizes), std::move(strides), std::move(offset));
  impl->share_version_counter(base->version_counter());
  return Tensor(std::move(impl));
}

}  // namespace kiln
