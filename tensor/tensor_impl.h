// tensor/tensor_impl.h: TensorImpl (sizes, strides, dtype, device, storage) and the Tensor handle.
//
// A TensorImpl is a strided view of a Storage: element i of the view lives at
// storage + (offset + sum(index[d] * stride[d])) * itemsize. Views share the Storage and the
// version counter, which in-place ops bump so autograd can detect modified saved tensors.
// Meta and fake tensors have a data-less Storage (a byte size, no memory; Note [Data-less
// storages] in storage.h); a fake tensor has the Fake key and pretends to be on device().
// Invariants: sizes_.size() == strides_.size(); numel_ caches the product of concrete sizes
// (-1 when some size or stride is symbolic: is_symbolic()); is_contiguous_ caches the row-major
// contiguity test.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "runtime/device.h"
#include "tensor/dispatch_key.h"
#include "tensor/scalar_type.h"
#include "tensor/storage.h"
#include "tensor/sym_int.h"

struct _object;
typedef _object PyObject;

namespace kiln {

using DimVector = absl::InlinedVector<int64_t, 6>;
using SymDimVector = absl::InlinedVector<SymInt, 6>;

struct VersionCounter {
  std::atomic<uint32_t> version{0};
};

// How a view came to be: PyTorch's CreationMeta, which decides whether autograd may later rebase
// the view's history for an in-place change (Note [View creation] in empty.cc).
enum class ViewCreation : uint8_t {
  kDefault,      // an ordinary view, made with grad mode on
  kMultiOutput,  // one of several views one op returned (split, chunk, unbind)
  kNoGrad,       // made under no_grad (or a view of such a view)
};

// Whether views made now are made under no_grad (kNoGrad): the Autograd key is excluded, and not
// because a kernel runs an op below autograd (BelowAutogradGuard: autograd's and make_fx's own
// re-dispatch), so a view op's output under grad mode is kDefault.
bool ViewsUnderNoGrad();
// Sets whether the thread runs below autograd (as BelowAutogradGuard does for a scope; for a
// compiled function's forward, which Python brackets); returns the previous setting.
bool SetBelowAutograd(bool below);
class BelowAutogradGuard {
 public:
  BelowAutogradGuard();
  ~BelowAutogradGuard();
  BelowAutogradGuard(const BelowAutogradGuard&) = delete;
  BelowAutogradGuard& operator=(const BelowAutogradGuard&) = delete;

 private:
  bool previous_;
};

// What autograd/ attaches to a tensor (grad, grad_fn, hooks); opaque at this layer.
class AutogradMetaInterface {
 public:
  virtual ~AutogradMetaInterface() = default;
  virtual bool requires_grad() const = 0;
};

class TensorImpl {
 public:
  TensorImpl(Storage storage, ScalarType dtype, Device device, DispatchKeySet keys);

  // Metadata.
  ScalarType dtype() const { return dtype_; }
  Device device() const { return device_; }
  int64_t dim() const { return static_cast<int64_t>(sizes_.size()); }
  const SymDimVector& sym_sizes() const { return sizes_; }
  const SymDimVector& sym_strides() const { return strides_; }
  const SymInt& sym_storage_offset() const { return offset_; }
  DimVector sizes() const;    // concrete sizes (raises on symbolic ones)
  DimVector strides() const;  // concrete strides
  int64_t size(int64_t d) const;  // negative d counts from the end; IndexError if out of range
  int64_t stride(int64_t d) const;
  int64_t storage_offset() const { return offset_.expect_int(); }
  int64_t numel() const;
  SymInt sym_numel() const;
  bool is_contiguous() const { return is_contiguous_; }
  bool is_symbolic() const { return numel_ < 0; }
  int64_t itemsize() const { return ElementSize(dtype_); }
  // Only for `t.data = other` (autograd's set_data): the impl takes other's dtype with its storage.
  void set_dtype(ScalarType t) { dtype_ = t; }
  // Only for `t.data = other` across devices (module.to("cuda") moves parameters in place): the
  // impl takes other's device and its backend dispatch key.
  void set_device(Device d);
  DispatchKeySet keys() const { return keys_; }
  void set_keys(DispatchKeySet k) { keys_ = k; }

  // Layout changes (views, resize_): strides may be empty to mean "contiguous".
  void set_sizes_and_strides(SymDimVector sizes, SymDimVector strides, SymInt offset);
  void set_sizes_contiguous(SymDimVector sizes) { set_sizes_and_strides(std::move(sizes), {}, offset_); }

  // Storage.
  // The StorageImpl shared by all aliases (data-less for meta and fake tensors).
  const Storage& storage() const { return storage_; }
  // Whether there is memory to read: false for meta and fake tensors.
  bool has_storage() const { return storage_ != nullptr && !storage_->data_less(); }
  // A fake tensor (tensor/fake_tensor.h): the Fake key, a data-less storage naming its mode.
  bool is_fake() const { return keys_.has(DispatchKey::Fake); }
  void set_storage(Storage s) { storage_ = std::move(s); }
  // Address of element 0 (storage base + offset); null for meta and fake tensors.
  void* data() const {
    return has_storage() ? static_cast<char*>(storage_->data()) + offset_.expect_int() * itemsize() : nullptr;
  }
  template <typename T> T* data_as() const { return static_cast<T*>(data()); }

  // Versions and aliasing.
  const std::shared_ptr<VersionCounter>& version_counter() const { return version_; }
  void share_version_counter(const std::shared_ptr<VersionCounter>& v) { version_ = v; }
  uint32_t version() const { return version_->version.load(std::memory_order_relaxed); }
  void bump_version() { version_->version.fetch_add(1, std::memory_order_relaxed); }

  // Autograd's per-tensor state (grad, grad_fn); null when the tensor never took part.
  AutogradMetaInterface* autograd_meta() const { return autograd_meta_.get(); }
  void set_autograd_meta(std::unique_ptr<AutogradMetaInterface> m) { autograd_meta_ = std::move(m); }
  // A view marked at creation (Note [View creation]) that autograd never recorded requires grad
  // when its root does, as PyTorch's views read their base's flag (`with no_grad(): v = b[:2]`
  // gives a v that requires grad, with no grad_fn).
  bool requires_grad() const {
    if (autograd_meta_ && autograd_meta_->requires_grad()) return true;
    return view_creation_ != ViewCreation::kDefault && view_root_ && view_root_->requires_grad() &&
           (IsFloating(dtype_) || IsComplex(dtype_));
  }

  // Views (MakeView): the tensor a view's layout was first taken from (never a view itself), and
  // on that root its views still alive, so that autograd can give them a history when an
  // in-place op makes the root require grad (PyTorch's views always know their base: a view of a
  // tensor that required no grad yet missed the gradient of `base.copy_(x)`).
  const std::shared_ptr<TensorImpl>& view_root() const { return view_root_; }
  // How this view came to be (Note [View creation] in empty.cc); kDefault for tensors that are no view.
  ViewCreation view_creation() const { return view_creation_; }
  void set_view_creation(ViewCreation c) { view_creation_ = c; }
  // Makes `view` a view of `root` (root: a tensor that is no view), remembered weakly by root.
  static void AddView(const std::shared_ptr<TensorImpl>& root, const std::shared_ptr<TensorImpl>& view);
  std::vector<std::shared_ptr<TensorImpl>> live_views() const;

  // A Python number turned into a 0-dim tensor for an op (weak type in promotion).
  bool is_wrapped_number() const { return wrapped_number_; }
  void set_wrapped_number(bool v) { wrapped_number_ = v; }

  // Borrowed pointer to the Python object wrapping this impl (python/ sets and clears it), so
  // the same impl returns the same Python object (`x.add_(1) is x`).
  PyObject* pyobj() const { return pyobj_; }
  void set_pyobj(PyObject* o) { pyobj_ = o; }

 private:
  void RefreshCachedLayout();

  Storage storage_;
  SymDimVector sizes_;
  SymDimVector strides_;
  SymInt offset_ = 0;
  int64_t numel_ = 1;
  ScalarType dtype_;
  Device device_;
  DispatchKeySet keys_;
  bool is_contiguous_ = true;
  bool wrapped_number_ = false;
  ViewCreation view_creation_ = ViewCreation::kDefault;
  std::shared_ptr<VersionCounter> version_;
  std::shared_ptr<TensorImpl> view_root_;
  std::vector<std::weak_ptr<TensorImpl>> views_;
  std::unique_ptr<AutogradMetaInterface> autograd_meta_;
  PyObject* pyobj_ = nullptr;
};

// A reference-counted handle to a TensorImpl; the undefined Tensor holds none.
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  TensorImpl* operator->() const { return impl_.get(); }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

  ScalarType dtype() const { return impl_->dtype(); }
  Device device() const { return impl_->device(); }
  int64_t dim() const { return impl_->dim(); }
  DimVector sizes() const { return impl_->sizes(); }
  DimVector strides() const { return impl_->strides(); }
  int64_t size(int64_t d) const { return impl_->size(d); }
  int64_t stride(int64_t d) const { return impl_->stride(d); }
  int64_t numel() const { return impl_->numel(); }
  bool is_contiguous() const { return impl_->is_contiguous(); }
  template <typename T> T* data_ptr() const { return impl_->data_as<T>(); }
  void* raw_data() const { return impl_->data(); }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// Wraps a negative dimension and checks it against `ndim` (scalars accept -1 and 0), raising
// IndexError "Dimension out of range (expected to be in range of [-2, 1], but got 2)".
int64_t WrapDim(int64_t dim, int64_t ndim);
// Whether a layout may reach one storage element through two of its elements (an expanded view,
// overlapping windows): exact for concrete sizes and strides (the dims, sorted by stride, must
// each step past the span of the smaller ones); a symbolic size or stride counts as "may".
// *dense (when given) says whether the elements also leave no gap (numel == span).
bool MayOverlapItself(const SymDimVector& sizes, const SymDimVector& strides, bool* dense = nullptr);
// PyTorch's has_internal_overlap() == YES: a non-empty tensor with a stride-0 dimension of size
// above 1 (x.expand(...)), the one case it proves. Other self-overlapping layouts (as_strided
// windows) are "too hard" there and written without complaint, so they are here too.
bool HasInternalOverlap(const SymDimVector& sizes, const SymDimVector& strides);
// Raises PyTorch's RuntimeError when an op would write a tensor of this layout and it has internal
// overlap: the result of writing several values to one element depends on their order.
void CheckNoInternalOverlap(const SymDimVector& sizes, const SymDimVector& strides);
inline void CheckNoInternalOverlap(const Tensor& t) { CheckNoInternalOverlap(t->sym_sizes(), t->sym_strides()); }
// How the memory of two tensors overlaps, as PyTorch's get_overlap_status: kFull when both reach
// the same elements in the same layout (or are one tensor), kPartial when their ranges intersect
// otherwise, kTooHard when either layout is not dense and free of overlap (or is symbolic), so
// no range test is exact.
enum class MemOverlap { kNo, kFull, kPartial, kTooHard };
MemOverlap OverlapStatus(const Tensor& a, const Tensor& b);
// PyTorch's assert_no_partial_overlap (elementwise ops: x.add_(x) reads each element before it
// writes it, x[1:].add_(x[:-1]) would read values it has already written) and assert_no_overlap
// (gathers and scatters, which read and write in different orders: full overlap is refused too).
void CheckNoPartialOverlap(const Tensor& written, const Tensor& read);
void CheckNoOverlap(const Tensor& written, const Tensor& read);
// Row-major strides for `sizes`.
SymDimVector ContiguousStrides(const SymDimVector& sizes);
DimVector ContiguousStrides(const DimVector& sizes);
std::string SizesToString(const SymDimVector& s);  // "[2, 3]"
std::string SizesToString(const DimVector& s);

// The dispatch key of tensors on `device`.
DispatchKey BackendKey(Device device);

}  // namespace kiln
