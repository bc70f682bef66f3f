// tensor/tensor_impl.cc: layout bookkeeping for TensorImpl.
#include "tensor/tensor_impl.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <sstream>

#include "runtime/error.h"

namespace kiln {

const char* DispatchKeyName(DispatchKey k) {
  static const char* kNames[] = {"Undefined", "CPU", "CUDA", "Meta", "Fake", "Tracing",
                                 "Autograd", "Autocast", "Functionalize"};
  return kNames[static_cast<int>(k)];
}

LocalDispatchKeySet& TlsLocalDispatchKeySet() {
  thread_local LocalDispatchKeySet tls;
  return tls;
}

namespace {
thread_local bool tls_below_autograd = false;
}  // namespace

bool ViewsUnderNoGrad() {
  return !tls_below_autograd && TlsLocalDispatchKeySet().excluded.has(DispatchKey::Autograd);
}
bool SetBelowAutograd(bool below) {
  const bool previous = tls_below_autograd;
  tls_below_autograd = below;
  return previous;
}
BelowAutogradGuard::BelowAutogradGuard() : previous_(SetBelowAutograd(true)) {}
BelowAutogradGuard::~BelowAutogradGuard() { SetBelowAutograd(previous_); }

DispatchKey BackendKey(Device device) {
  switch (device.type) {
    case DeviceType::CPU: return DispatchKey::CPU;
    case DeviceType::CUDA: return DispatchKey::CUDA;
    case DeviceType::Meta: return DispatchKey::Meta;
  }
  return DispatchKey::Undefined;
}

void TensorImpl::set_device(Device d) {
  keys_ = keys_.remove(BackendKey(device_)).add(BackendKey(d));
  device_ = d;
}

// Views register from any thread that makes one (a backward formula's slice), under a spin lock
// (held for a push: a mutex cost a tenth of a view op); expired entries go when the list would
// grow, so a root viewed once per step keeps a short list.
static std::atomic_flag g_views_lock = ATOMIC_FLAG_INIT;

namespace {
struct ViewsLock {
  ViewsLock() { while (g_views_lock.test_and_set(std::memory_order_acquire)) {} }
  ~ViewsLock() { g_views_lock.clear(std::memory_order_release); }
};
}  // namespace

void TensorImpl::AddView(const std::shared_ptr<TensorImpl>& root, const std::shared_ptr<TensorImpl>& view) {
  view->view_root_ = root;
  ViewsLock lock;
  auto& views = root->views_;
  if (views.size() == views.capacity())
    views.erase(std::remove_if(views.begin(), views.end(), [](const auto& w) { return w.expired(); }), views.end());
  views.push_back(view);
}

std::vector<std::shared_ptr<TensorImpl>> TensorImpl::live_views() const {
  ViewsLock lock;
  std::vector<std::shared_ptr<TensorImpl>> out;
  for (const auto& w : views_)
    if (auto v = w.lock()) out.push_back(std::move(v));
  return out;
}

TensorImpl::TensorImpl(Storage storage, ScalarType dtype, Device device, DispatchKeySet keys)
    : storage_(std::move(storage)), dtype_(dtype), device_(device), keys_(keys),
      version_(std::make_shared<VersionCounter>()) {}

DimVector TensorImpl::sizes() const {
  DimVector out(sizes_.size());
  for (size_t i = 0; i < sizes_.size(); ++i) out[i] = sizes_[i].expect_int();
  return out;
}

DimVector TensorImpl::strides() const {
  DimVector out(strides_.size());
  for (size_t i = 0; i < strides_.size(); ++i) out[i] = strides_[i].expect_int();
  return out;
}

int64_t TensorImpl::size(int64_t d) const { return sizes_[WrapDim(d, dim())].expect_int(); }
int64_t TensorImpl::stride(int64_t d) const { return strides_[WrapDim(d, dim())].expect_int(); }

int64_t TensorImpl::numel() const {
  if (numel_ >= 0) return numel_;
  return sym_numel().expect_int();
}

SymInt TensorImpl::sym_numel() const {
  if (numel_ >= 0) return numel_;
  SymInt n = 1;
  for (const auto& s : sizes_) n = n * s;
  return n;
}

// Checks concrete sizes before a TensorImpl takes them, so a throw leaves the impl unchanged.
// As PyTorch's safe_compute_numel: the product in uint64 (a later 0 does not excuse an earlier
// overflow) must fit int64; a negative size is never a tensor.
static void CheckSizes(const SymDimVector& sizes) {
  uint64_t n = 1;
  bool overflow = false;
  for (const SymInt& s : sizes) {
    if (s.is_symbolic()) return;
    const int64_t v = s.expect_int();
    KILN_CHECK(v >= 0, "Trying to create tensor with negative dimension ", v, ": ", SizesToString(sizes));
    overflow |= __builtin_mul_overflow(n, static_cast<uint64_t>(v), &n);
  }
  KILN_CHECK(!overflow && n <= static_cast<uint64_t>(INT64_MAX), "numel: integer multiplication overflow");
}

void TensorImpl::set_sizes_and_strides(SymDimVector sizes, SymDimVector strides, SymInt offset) {
  CheckSizes(sizes);
  KILN_CHECK(offset.is_symbolic() || offset.expect_int() >= 0, "Tensor: invalid storage offset ", offset.str());
  sizes_ = std::move(sizes);
  strides_ = strides.empty() ? ContiguousStrides(sizes_) : std::move(strides);
  KILN_INTERNAL_ASSERT(sizes_.size() == strides_.size());
  offset_ = std::move(offset);
  RefreshCachedLayout();
}

void TensorImpl::RefreshCachedLayout() {
  numel_ = 1;
  for (const auto& s : sizes_) {
    auto v = s.is_symbolic() ? std::nullopt : std::optional<int64_t>(s.expect_int());
    if (!v) { numel_ = -1; break; }
    numel_ *= *v;
  }
  // A symbolic stride with concrete sizes (a view's outer stride under automatic dynamic
  // shapes, idx[:, -16:] of a growing idx) makes the layout symbolic too: code that reads
  // concrete strides asks is_symbolic() first.
  for (const auto& s : strides_)
    if (s.is_symbolic()) numel_ = -1;
  if (numel_ < 0) {
    // Symbolic: contiguous when the strides are exactly the row-major ones (structurally).
    SymDimVector expect = ContiguousStrides(sizes_);
    is_contiguous_ = true;
    for (size_t i = 0; i < sizes_.size(); ++i)
      if (strides_[i].str() != expect[i].str()) is_contiguous_ = false;
    return;
  }
  is_contiguous_ = true;
  if (numel_ == 0) return;
  int64_t expected = 1;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    int64_t size = sizes_[d].expect_int();
    if (size == 1) continue;
    if (strides_[d].expect_int() != expected) { is_contiguous_ = false; return; }
    expected *= size;
  }
}

int64_t WrapDim(int64_t dim, int64_t ndim) {
  int64_t lo = ndim > 0 ? -ndim : -1, hi = ndim > 0 ? ndim - 1 : 0;
  KILN_CHECK_INDEX(dim >= lo && dim <= hi, "Dimension out of range (expected to be in range of [",
                   lo, ", ", hi, "], but got ", dim, ")");
  return dim < 0 ? dim + std::max<int64_t>(ndim, 1) : dim;
}

bool MayOverlapItself(const SymDimVector& sizes, const SymDimVector& strides, bool* dense) {
  if (dense) *dense = false;
  std::vector<std::pair<int64_t, int64_t>> dims;  // (|stride|, size) of dims longer than 1
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::optional<int64_t> n = sizes[i].maybe_as_int(), st = strides[i].maybe_as_int();
    if (!n || !st) return true;
    if (*n == 0) return false;
    if (*n > 1) dims.emplace_back(*st < 0 ? -*st : *st, *n);
  }
  std::sort(dims.begin(), dims.end());
  int64_t span = 0, numel = 1;
  for (auto [st, n] : dims) {
    if (st <= span) return true;
    span += (n - 1) * st;
    numel *= n;
  }
  if (dense) *dense = span + 1 == numel;
  return false;
}

bool HasInternalOverlap(const SymDimVector& sizes, const SymDimVector& strides) {
  bool repeats = false;
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::optional<int64_t> n = sizes[i].maybe_as_int(), st = strides[i].maybe_as_int();
    if (n == 0) return false;
    repeats = repeats || (st == 0 && n && *n > 1);
  }
  return repeats;
}

void CheckNoInternalOverlap(const SymDimVector& sizes, const SymDimVector& strides) {
  KILN_CHECK(!HasInternalOverlap(sizes, strides), "unsupported operation: more than one element of the written-to tensor refers "
             "to a single memory location. Please clone() the tensor before performing the operation.");
}

// Equal strides, size-1 dims included, as PyTorch compares two views with the same begin and end:
// `y[0] = y[0:1]` for y of shape [3, 1] writes y[0] (stride [1]) from a 0-d view expanded to [1]
// (stride [0]) and is refused, while `x[0] = x` for x of shape [1, 1, 3] passes, because expand
// gives a new dim of size 1 the stride PyTorch gives it.
static bool SameLayout(const Tensor& a, const Tensor& b) {
  return a->sym_strides() == b->sym_strides();
}

MemOverlap OverlapStatus(const Tensor& a, const Tensor& b) {
  if (a.is_same(b)) return MemOverlap::kFull;
  if (!a->storage() || a->storage() != b->storage()) return MemOverlap::kNo;
  if (a->is_symbolic() || b->is_symbolic()) return MemOverlap::kTooHard;
  if (a.numel() == 0 || b.numel() == 0) return MemOverlap::kNo;
  bool a_dense = false, b_dense = false;
  if (MayOverlapItself(a->sym_sizes(), a->sym_strides(), &a_dense) || !a_dense ||
      MayOverlapItself(b->sym_sizes(), b->sym_strides(), &b_dense) || !b_dense)
    return MemOverlap::kTooHard;
  const int64_t a_begin = a->storage_offset() * a->itemsize(), a_end = a_begin + a.numel() * a->itemsize();
  const int64_t b_begin = b->storage_offset() * b->itemsize(), b_end = b_begin + b.numel() * b->itemsize();
  if (a_begin == b_begin && a_end == b_end) return SameLayout(a, b) ? MemOverlap::kFull : MemOverlap::kPartial;
  return a_begin < b_end && b_begin < a_end ? MemOverlap::kPartial : MemOverlap::kNo;
}

constexpr const char* kReadWriteOverlap =
    "unsupported operation: some elements of the input tensor and the written-to tensor refer to a single memory "
    "location. Please clone() the tensor before performing the operation.";

void CheckNoPartialOverlap(const Tensor& written, const Tensor& read) {
  KILN_CHECK(OverlapStatus(written, read) != MemOverlap::kPartial, kReadWriteOverlap);
}

void CheckNoOverlap(const Tensor& written, const Tensor& read) {
  const MemOverlap s = OverlapStatus(written, read);
  KILN_CHECK(s != MemOverlap::kPartial && s != MemOverlap::kFull, kReadWriteOverlap);
}

SymDimVector ContiguousStrides(const SymDimVector& sizes) {
  SymDimVector strides(sizes.size());
  SymInt running = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    strides[d] = running;
    if (d == 0) break;  // the full product is no stride (and may not fit: [2**62, 0, 4])
    const SymInt& s = sizes[d];
    if (s.is_symbolic()) running = running * sym_max(s, SymInt(1));
    else running = running * std::max<int64_t>(s.expect_int(), 1);
  }
  return strides;
}

DimVector ContiguousStrides(const DimVector& sizes) {
  DimVector strides(sizes.size());
  int64_t running = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    strides[d] = running;
    if (d == 0) break;
    KILN_CHECK(!__builtin_mul_overflow(running, std::max<int64_t>(sizes[d], 1), &running),
               "Stride calculation overflowed with sizes=", SizesToString(sizes));
  }
  return strides;
}

template <typename V>
static std::string JoinSizes(const V& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << "]";
  return os.str();
}
std::string SizesToString(const SymDimVector& s) { return JoinSizes(s); }
std::string SizesToString(const DimVector& s) { return JoinSizes(s); }

}  // namespace kiln
