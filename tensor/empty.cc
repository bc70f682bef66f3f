// tensor/empty.cc: tensor allocation.
#include "tensor/empty.h"

#include <algorithm>
#include <cstdint>

#include "runtime/cuda/cuda_allocator.h"
#include "runtime/cuda/driver.h"
#include "tensor/fake_tensor.h"

namespace kiln {

// Note [Storage size overflow]: as PyTorch's computeStorageNbytes, the byte count is computed in
// uint64 with every step checked, and must fit int64. A wrapped count would allocate a small block
// that kernels then index as if it were huge (kiln.empty(2**62) used to "succeed"). A negative
// stride over a dim of size > 1 reaches below the offset, which is an overflow too (as in PyTorch).
int64_t StorageBytesFor(const DimVector& sizes, const DimVector& strides, int64_t offset, int64_t itemsize) {
  for (int64_t s : sizes)
    if (s == 0) return 0;
  KILN_CHECK(offset >= 0, "Tensor: invalid storage offset ", offset);
  uint64_t n = static_cast<uint64_t>(offset) + 1;
  bool overflow = false;
  for (size_t d = 0; d < sizes.size(); ++d) {
    uint64_t span = 0;
    overflow |= __builtin_mul_overflow(static_cast<uint64_t>(strides[d]), static_cast<uint64_t>(sizes[d] - 1), &span);
    overflow |= __builtin_add_overflow(n, span, &n);
  }
  overflow |= __builtin_mul_overflow(n, static_cast<uint64_t>(itemsize), &n);
  KILN_CHECK(!overflow && n <= static_cast<uint64_t>(INT64_MAX), "Storage size calculation overflowed with sizes=",
             SizesToString(sizes), " and strides=", SizesToString(strides));
  return static_cast<int64_t>(n);
}

int64_t ContiguousStorageBytesFor(const DimVector& sizes, int64_t itemsize) {
  uint64_t n = 1;
  bool overflow = false;
  for (int64_t s : sizes) overflow |= __builtin_mul_overflow(n, static_cast<uint64_t>(s), &n);
  overflow |= __builtin_mul_overflow(n, static_cast<uint64_t>(itemsize), &n);
  KILN_CHECK(!overflow && n <= static_cast<uint64_t>(INT64_MAX), "Storage size calculation overflowed with sizes=",
             SizesToString(sizes));
  return static_cast<int64_t>(n);
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

// Whether `strides` are the row-major strides of `sizes` (computed without overflowing), so that
// an explicitly contiguous layout (clone, a meta function's strides) gets PyTorch's contiguous
// overflow message.
static bool IsRowMajor(const DimVector& sizes, const DimVector& strides) {
  int64_t running = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    if (strides[d] != running) return false;
    if (d > 0 && __builtin_mul_overflow(running, std::max<int64_t>(sizes[d], 1), &running)) return false;
  }
  return true;
}

Tensor EmptyTensor(const SymDimVector& sizes, ScalarType dtype, Device device, const SymDimVector& strides) {
  bool concrete = true;
  for (const SymInt& s : sizes) {
    if (s.is_symbolic()) { concrete = false; continue; }
    KILN_CHECK(s.expect_int() >= 0, "Trying to create tensor with negative dimension ", s.expect_int(), ": ",
               SizesToString(sizes));
  }
  for (const SymInt& s : strides) concrete = concrete && !s.is_symbolic();
  // Concrete layouts are checked before anything is made, on every device (meta and fake
  // included), so each raises PyTorch's overflow error (Note [Storage size overflow]).
  DimVector concrete_sizes, concrete_strides;
  int64_t nbytes = 0;
  if (concrete) {
    for (const SymInt& s : sizes) concrete_sizes.push_back(s.expect_int());
    if (strides.empty()) {
      nbytes = ContiguousStorageBytesFor(concrete_sizes, ElementSize(dtype));
      concrete_strides = ContiguousStrides(concrete_sizes);
    } else {
      KILN_CHECK(strides.size() == sizes.size(), "empty_strided: ", sizes.size(), " sizes but ", strides.size(),
                 " strides");
      for (const SymInt& s : strides) concrete_strides.push_back(s.expect_int());
      nbytes = IsRowMajor(concrete_sizes, concrete_strides)
                   ? ContiguousStorageBytesFor(concrete_sizes, ElementSize(dtype))
                   : StorageBytesFor(concrete_sizes, concrete_strides, 0, ElementSize(dtype));
    }
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
    if (!concrete) {  // raises expect_int's "expected a concrete size" error
      for (const SymInt& s : sizes) s.expect_int();
      for (const SymInt& s : strides) s.expect_int();
    }
    Allocator* alloc = GetCPUAllocator();
    storage = std::make_shared<StorageImpl>(alloc->Allocate(nbytes), nbytes, alloc);
  } else if (device.is_cuda()) {
    for (const SymInt& s : sizes) s.expect_int();
    if (device.index < 0) device.index = static_cast<int16_t>(cuda::CurrentDevice());
    Allocator* alloc = cuda::GetCUDAAllocator(device.index);
    storage = std::make_shared<StorageImpl>(alloc->Allocate(nbytes), nbytes, alloc);
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

// Note [View creation]: as PyTorch's CreationMeta, every view records how it was made, and a view
// of a view inherits a non-default mark (the new one wins where both are set). autograd refuses
// to rebase the history of a marked view, both for an in-place op on the view itself and for a
// use of it after its base or a sibling changed in place (autograd/view_tracking.cc,
// ViewRebaseError): one node cannot be rebased for a single output of split, and a view made
// under no_grad has no history to say whether the change should be tracked.
static ViewCreation Propagate(ViewCreation previous, ViewCreation now) {
  return now == ViewCreation::kDefault ? previous : now;
}

Tensor MakeView(const Tensor& base, SymDimVector sizes, SymDimVector strides, SymInt offset) {
  auto impl = std::make_shared<TensorImpl>(base->storage(), base.dtype(), base.device(), base->keys());
  impl->set_sizes_and_strides(std::move(sizes), std::move(strides), std::move(offset));
  impl->share_version_counter(base->version_counter());
  const bool under_no_grad = ViewsUnderNoGrad();
  impl->set_view_creation(
      Propagate(base->view_creation(), under_no_grad ? ViewCreation::kNoGrad : ViewCreation::kDefault));
  // a root that requires grad has its views recorded by autograd (with their own history), but
  // for those made under no_grad, which autograd never sees
  const std::shared_ptr<TensorImpl>& root = base->view_root() ? base->view_root() : base.impl_ptr();
  if (!root->requires_grad() || under_no_grad) TensorImpl::AddView(root, impl);
  return Tensor(std::move(impl));
}

void MarkMultiOutputViews(const std::vector<Tensor>& views) {
  if (ViewsUnderNoGrad()) return;
  for (const Tensor& v : views) v->set_view_creation(ViewCreation::kMultiOutput);
}

}  // namespace kiln
