// tensor/ops/common.cc: helpers shared by the op families.
#include "tensor/ops/common.h"

#include "tensor/dim_order.h"
#include "tensor/dispatch_key.h"
#include "tensor/fake_tensor.h"
#include "tensor/memory_format.h"

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

void CheckOperandOnSelfDevice(const char* op, const Tensor& self, const Tensor& other) {
  if (self.device() == other.device() || (other.dim() == 0 && other.device().is_cpu())) return;
  throw Error(StrCat("[", op, "] Expected all tensors to be on the same device, but found at least two devices, ",
                     self.device().str(), " and ", other.device().str(), "!"));
}

Tensor CopyToDevice(const Tensor& host, Device device) {
  Tensor out = EmptyTensor(host.sizes(), host.dtype(), device);
  return ops::copy_(out, host);
}

SymDimVector PreserveFormatStrides(const Tensor& t) {
  bool dense = false;
  if (!MayOverlapItself(t->sym_sizes(), t->sym_strides(), &dense) && dense) return t->sym_strides();
  return LayoutOfInputs(t->sym_sizes(), {&t});
}

TensorMeta ElementwiseMeta(const char* op, const Tensor& a, const Tensor& b, ScalarType dtype,
                           std::optional<ScalarType> common) {
  CheckSameDevice(op, a, b);
  TensorMeta m;
  m.sizes = BroadcastShapes(op, a->sym_sizes(), b->sym_sizes());
  m.strides = LayoutOfInputs(m.sizes, {&a, &b}, common);
  m.dtype = dtype;
  m.device = a.dim() == 0 && a.device().is_cpu() ? b.device() : a.device();
  return m;
}

SymDimVector BroadcastStrides(const SymDimVector& sizes, const SymDimVector& strides, const SymDimVector& shape) {
  const int64_t ndim = static_cast<int64_t>(shape.size()), lead = ndim - static_cast<int64_t>(sizes.size());
  SymDimVector st(ndim, SymInt(0));
  for (int64_t d = std::max<int64_t>(lead, 0); d < ndim; ++d) {
    const SymInt& n = sizes[d - lead];
    st[d] = n == 1 && shape[d] != 1 ? SymInt(0) : strides[d - lead];
  }
  return st;
}

SymDimVector BroadcastStrides(const Tensor& t, const SymDimVector& shape) {
  return BroadcastStrides(t->sym_sizes(), t->sym_strides(), shape);
}

// PyTorch's TensorIterator::reorder_dimensions over operands that are not resized: the first
// operand whose strides tell two dims apart decides (a broadcast dim, stride 0, tells nothing;
// equal strides put the smaller dim first), by insertion sort so that undecided comparisons
// resolve as PyTorch's do.
std::vector<int64_t> IterationOrder(const SymDimVector& shape, const std::vector<SymDimVector>& strides) {
  const int64_t ndim = static_cast<int64_t>(shape.size());
  // > 0: dim1 goes before (is faster than) dim0; < 0: keep; 0: undecided
  auto should_swap = [&](int64_t dim0, int64_t dim1) {
    for (const SymDimVector& st : strides) {
      const SymInt& s0 = st[dim0];
      const SymInt& s1 = st[dim1];
      if (s0 == 0 || s1 == 0) continue;
      if (s0 < s1) return -1;
      if (s1 < s0) return 1;
      if (shape[dim1] < shape[dim0]) return 1;
    }
    return 0;
  };
  std::vector<int64_t> perm(ndim);  // fastest dimension first
  for (int64_t i = 0; i < ndim; ++i) perm[i] = ndim - 1 - i;
  InsertionSortDims(perm, should_swap);
  return perm;
}

// Note [Elementwise output layout]: PyTorch's TensorIterator lays a new output out in the memory
// order of its inputs: dimensions sorted by the inputs' strides (the first input that tells two
// dimensions apart decides; broadcast dimensions tell nothing; equal strides put the smaller
// dimension first), then dense strides in that order. `x.t() + 1` is transposed like x.t(), so
// `(x.t() + 1).reshape(-1)` copies (a view in kiln before: a later write through the reshaped
// result then changed the sum's result, fuzz seed 51). Insertion sort as PyTorch's, so that
// ambiguous comparisons resolve the same way.
// Over symbolic sizes the comparisons below guard, as PyTorch's compute_strides does: the layout
// is decided at the example sizes and holds while the guards do (answering row-major instead made
// `(x.t() + 1).contiguous()` a no-op after the dynamic recompile, fuzz seed 181). A size with no
// example value (unbacked: nonzero's count) cannot be compared: row-major then.

// Dense strides over `shape` in the iteration order of operands with these strides; {} when that
// is row-major.
static SymDimVector DenseInIterationOrder(const SymDimVector& shape, const std::vector<SymDimVector>& strides) {
  const int64_t ndim = static_cast<int64_t>(shape.size());
  if (ndim < 2 || strides.empty()) return {};
  std::vector<int64_t> perm = IterationOrder(shape, strides);
  bool row_major = true;
  for (int64_t i = 0; i < ndim; ++i) row_major = row_major && perm[i] == ndim - 1 - i;
  if (row_major) return {};
  SymDimVector out(ndim);
  SymInt stride(1);
  for (int64_t d : perm) {
    out[d] = stride;
    stride = stride * shape[d];
  }
  return out;
}

SymDimVector LayoutOfOperands(const SymDimVector& shape, const std::vector<SymDimVector>& strides) {
  try {
    return DenseInIterationOrder(shape, strides);
  } catch (const NamedError& e) {
    if (e.python_class() != "GuardOnDataDependentSymNode") throw;
    return {};
  }
}

// Note [Fast setup]: before sorting, PyTorch's TensorIterator takes a shortcut where every input
// has the result's shape (no broadcast, no 0-dim operand such as a wrapped Python number): all
// row-major -> row-major, all channels-last -> channels-last, all dense with equal strides -> those
// very strides. Each ignores size-1 dimensions, so it can disagree with the sort on their strides:
// logical_not of a (1, 1, 2) tensor with strides (2, 1, 1) is (2, 2, 1) in PyTorch, and kiln's
// sorted (2, 1, 1) made `v[0] = v` expand the value to strides other than v[0]'s, a partial overlap
// PyTorch does not see (fuzz seed 1631, program 2476).

// The fast setup's layout of inputs with these strides over `shape` (empty: row-major), or
// nullopt: no shortcut, sort.
static std::optional<SymDimVector> FastSetupLayout(const SymDimVector& shape, const std::vector<SymDimVector>& strides) {
  const int64_t ndim = static_cast<int64_t>(shape.size());
  for (const SymInt& n : shape)
    if (n == 0) return SymDimVector{};  // every empty tensor is contiguous
  std::vector<int64_t> row_major(ndim);
  for (int64_t d = 0; d < ndim; ++d) row_major[d] = ndim - 1 - d;
  bool contiguous = true, channels_last = ndim == 4, same = true;
  for (const SymDimVector& st : strides) {
    contiguous = contiguous && DenseInOrder(shape, st, row_major);
    channels_last = channels_last && DenseInOrder(shape, st, {1, 3, 2, 0});
    same = same && st == strides.front();
  }
  if (contiguous) return SymDimVector{};
  if (channels_last) return ChannelsLastStrides(shape);
  bool dense = false;
  if (same && !MayOverlapItself(shape, strides.front(), &dense) && dense) return strides.front();
  return std::nullopt;
}

SymDimVector LayoutOfInputs(const SymDimVector& shape, std::initializer_list<const Tensor*> inputs,
                            std::optional<ScalarType> cast_to, bool scalar_operand) {
  std::vector<SymDimVector> strides;  // each input's strides over `shape`, 0 where it broadcasts
  bool same_shape = !scalar_operand;  // Note [Fast setup]
  try {  // (whether a dim broadcasts is a comparison of sizes too)
    for (const Tensor* t : inputs) {
      if (!t->defined()) continue;
      same_shape = same_shape && (*t)->sym_sizes() == shape;
      if (t->dim() == 0) continue;
      // an input of another dtype is cast first, and its cast's layout counts (x1 + x3 with an
      // expanded int64 x1 and a transposed float32 x3 is row-major: fuzz seed 291, program 16413)
      const bool cast = cast_to && t->dtype() != *cast_to;
      SymDimVector own = cast ? PreserveFormatStrides(*t) : (*t)->sym_strides();
      if (own.empty()) own = ContiguousStrides((*t)->sym_sizes());
      strides.push_back(BroadcastStrides((*t)->sym_sizes(), own, shape));
    }
    if (same_shape && shape.size() >= 2 && !strides.empty()) {
      if (std::optional<SymDimVector> fast = FastSetupLayout(shape, strides)) return *fast;
    }
  } catch (const NamedError& e) {
    if (e.python_class() != "GuardOnDataDependentSymNode") throw;
    return {};
  }
  return LayoutOfOperands(shape, strides);
}

// t itself without a dispatch when it has the dtype already (what to.dtype would return).
Tensor CastTo(const Tensor& t, ScalarType dtype) { return t.dtype() == dtype ? t : ops::to_dtype(t, dtype); }

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
  if (t.device().is_cuda()) return ItemScalar(op, CopyToDevice(t, Device(DeviceType::CPU)));  // read on the host
  return KILN_DISPATCH_ALL_AND_COMPLEX(t.dtype(), op, [&]() -> Scalar {
    scalar_t v;
    std::memcpy(&v, t.raw_data(), sizeof(v));
    return ScalarFromElement(v);
  });
}

}  // namespace kiln
