// tensor/ops/common.cc: helpers shared by the op families.
#include "tensor/ops/common.h"

#include "tensor/dispatch_key.h"
#include "tensor/fake_tensor.h"

namespace kiln {

SymDimVector BroadcastShapes(const char* op, const SymDimVector& a, const SymDimVector& b) {
  const size_t n = std::max(a.size(), b.size());
  SymDimVector out(n);
  for (size_t i = 0; i < n; ++i) {
    const SymInt* x = i < n - a.size() ? nullptr : &a[i - (n - a.size())];
    const SymInt* y = i < n - b.size() ? nullptr : &b[i - (n - b.size())];
    if (!x) { out[i] = *y; continue; }
    if (!y) { out[i] = *x; continue; }
    if (*x == *y || *y == 1) out[i] = *x;
    else if (*x == 1) out[i] = *y;
    else
      throw Error(StrCat("[", op, "] The size of tensor a (", x->str(), ") must match the size of tensor b (",
                         y->str(), ") at non-singleton dimension ", i, "; shapes ", SizesToString(a), " and ",
                         SizesToString(b)));
  }
  return out;
}

void CheckSameDevice(const char* op, const Tensor& a, const Tensor& b) {
  if (a.device() == b.device()) return;
  // 0-dim CPU tensors may join tensors on other devices, as in PyTorch.
  if (b.dim() == 0 && b.device().is_cpu()) return;
  if (a.dim() == 0 && a.device().is_cpu()) return;
  throw Error(StrCat("[", op, "] Expected all tensors to be on the same device, but found at least two devices, ",
                     a.device().str(), " and ", b.device().str(), "!"));
}

TensorMeta ElementwiseMeta(const char* op, const Tensor& a, const Tensor& b, ScalarType dtype) {
  CheckSameDevice(op, a, b);
  TensorMeta m;
  m.sizes = BroadcastShapes(op, a->sym_sizes(), b->sym_sizes());
  m.dtype = dtype;
  m.device = a.dim() == 0 && a.device().is_cpu() ? b.device() : a.device();
  return m;
}

Tensor CastTo(const Tensor& t, ScalarType dtype) { return ops::to_dtype(t, dtype); }

std::vector<bool> ReduceMask(const char* op, const std::optional<std::vector<int64_t>>& dims, int64_t ndim) {
  std::vector<bool> mask(ndim, false);
  if (!dims || dims->empty()) {
    std::fill(mask.begin(), mask.end(), true);
    return mask;
  }
  for (int64_t d : *dims) {
    int64_t w = WrapDim(d, ndim);
    if (ndim == 0) continue;
    KILN_CHECK(!mask[w], "[", op, "] dim ", w, " appears multiple times in the list of dims");
    mask[w] = true;
  }
  return mask;
}

SymDimVector ReducedSizes(const Tensor& t, const std::vector<bool>& mask, bool keepdim) {
  SymDimVector out;
  const auto& sizes = t->sym_sizes();
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (!mask[d]) out.push_back(sizes[d]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

namespace {
// Clears the fake allocation context for a scope (a composite kernel run inside the Fake slot
// would otherwise allocate a fake tensor, with no memory to write the number to).
class NoFakeAllocation {
 public:
  NoFakeAllocation() : saved_(TlsFakeAllocContext()) { TlsFakeAllocContext() = nullptr; }
  ~NoFakeAllocation() { TlsFakeAllocContext() = saved_; }

 private:
  const FakeAllocContext* saved_;
};
}  // namespace

Tensor WrapScalar(const Scalar& s, Device device) {
  const ScalarType dtype = s.is_floating() ? ScalarType::Float64 : s.dtype();
  if (!device.is_cpu()) {
    Tensor t = ops::scalar_tensor(s, dtype, device);
    t->set_wrapped_number(true);
    return t;
  }
  // A CPU number is made below every mode, as PyTorch's argument parser makes it: a real tensor
  // holding the number, so make_fx records the number itself (fx/tracer.cc, TensorArg). Made
  // through the tracing and functionalization keys, it became a scalar_tensor node whose value
  // had lost the wrapped mark, and promotion then treated -0.5 as a float64 0-dim tensor
  // (`-0.5 * x.sum()` traced to float64; clamp(x0d, -0.5, x0d) compiled to float64).
  NoFakeAllocation no_fake_alloc;
  FakeModeGuard no_fake(nullptr);
  ExcludeDispatchKeyGuard below(DispatchKeySet(DispatchKey::Functionalize).add(DispatchKey::Autograd)
                                    .add(DispatchKey::Tracing).add(DispatchKey::Fake));
  Tensor t = ops::scalar_tensor(s, dtype, device);
  t->set_wrapped_number(true);
  return t;
}

Scalar ItemScalar(const char* op, const Tensor& t) {
  KILN_CHECK(t.numel() == 1, "[", op, "] a Tensor with ", t.numel(), " elements cannot be converted to Scalar");
  KILN_CHECK(t->has_storage(), "[", op, "] needs the value of a ", t->is_fake() ? "fake" : t.device().str(),
             " tensor, which has no data");
  return KILN_DISPATCH_ALL(t.dtype(), op, [&]() -> Scalar {
    scalar_t v;
    std::memcpy(&v, t.raw_data(), sizeof(v));
    if constexpr (std::is_same_v<scalar_t, bool>) return Scalar(v);
    else if constexpr (std::is_integral_v<scalar_t>) return Scalar(static_cast<int64_t>(v));
    else return Scalar(static_cast<double>(static_cast<opmath_t<scalar_t>>(v)));
  });
}

}  // namespace kiln
