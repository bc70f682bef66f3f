// tensor/fake_tensor.cc: FakeTensorMode, the thread's fake-mode state and the Fake-slot kernel.
#include "tensor/fake_tensor.h"

#include <algorithm>
#include <sstream>

#include "tensor/ops/common.h"

namespace kiln {
namespace {

struct FakeTls {
  FakeTensorMode* active = nullptr;
  // Python's __enter__ pushes (mode, whether the Fake key was included before); null = unset.
  std::vector<std::pair<FakeTensorModePtr, bool>> stack;
  const FakeAllocContext* alloc = nullptr;
};
FakeTls& Tls() {
  thread_local FakeTls tls;
  return tls;
}

// "FakeTensor(..., size=(2, 3))" / "tensor(..., device='meta', size=(2,))" / "3" for the error text.
std::string RenderArg(const IValue& v) {
  std::ostringstream os;
  auto tensor = [&](const Tensor& t) {
    if (!t.defined()) { os << "None"; return; }
    os << (IsFake(t) ? "FakeTensor(..." : t.device().is_meta() ? "tensor(..." : "tensor([...]");
    if (!t.device().is_cpu()) os << ", device='" << t.device().str() << "'";
    os << ", size=(";
    for (int64_t d = 0; d < t.dim(); ++d) os << (d ? ", " : "") << t->sym_sizes()[d].str();
    os << (t.dim() == 1 ? ",)" : ")");
    if (t.dtype() != ScalarType::Float32) os << ", dtype=kiln." << ScalarTypeName(t.dtype());
    os << ")";
  };
  if (v.is_tensor()) tensor(v.to_tensor());
  else if (v.is_tensor_list()) {
    os << "[";
    const auto& l = v.to_tensor_list();
    for (size_t i = 0; i < l.size(); ++i) { if (i) os << ", "; tensor(l[i]); }
    os << "]";
  } else if (v.is_none()) os << "None";
  else if (v.is_int()) os << v.to_int();
  else if (v.is_double()) os << v.to_double();
  else if (v.is_bool()) os << (v.to_bool() ? "True" : "False");
  else if (v.is_symint()) os << v.to_symint().str();
  else os << "...";
  return os.str();
}

std::string RenderCall(const Op& op, const Stack& stack) {
  std::ostringstream os;
  os << "aten." << op.base_name() << "." << (op.schema().overload.empty() ? "default" : op.schema().overload) << "(";
  for (size_t i = 0; i < stack.size(); ++i) os << (i ? ", " : "") << RenderArg(stack[i]);
  os << ")";
  return os.str();
}

// PyTorch's common-device rule: the first fake argument's device, except that 0-dim cpu tensors
// defer to any other device; two other devices disagreeing is an error.
struct DeviceMerger {
  const Op& op;
  bool have = false, cpu_scalar = false;
  Device device;
  void Merge(const Tensor& t) {
    bool t_cpu_scalar = t.device().is_cpu() && t.dim() == 0;
    if (!have) { have = true; device = t.device(); cpu_scalar = t_cpu_scalar; return; }
    if (t.device() == device) { if (cpu_scalar) cpu_scalar = t_cpu_scalar; return; }
    if (t_cpu_scalar) return;
    if (cpu_scalar) { device = t.device(); cpu_scalar = false; return; }
    throw Error(StrCat("Unhandled FakeTensor Device Propagation for ", op.name(), ", found two different devices ",
                       device.str(), ", ", t.device().str()));
  }
};

template <typename F>
void ForEachTensor(Stack& stack, const F& fn) {
  for (IValue& v : stack) {
    if (v.is_tensor()) fn(v.to_tensor());
    else if (v.is_tensor_list()) for (Tensor& t : const_cast<std::vector<Tensor>&>(v.to_tensor_list())) fn(t);
    else if (v.is_optional_tensor_list())
      for (auto& t : const_cast<OptionalTensorList&>(v.to_optional_tensor_list())) if (t) fn(*t);
  }
}

}  // namespace

// --- FakeTensorMode -------------------------------------------------------------------------

Tensor FakeTensorMode::Empty(const SymDimVector& sizes, const SymDimVector& strides, const SymInt& storage_offset,
                             ScalarType dtype, Device device) {
  auto impl = std::make_shared<TensorImpl>(nullptr, dtype, device, DispatchKeySet(DispatchKey::Fake));
  impl->set_sizes_and_strides(sizes, strides, storage_offset);
  SymInt nbytes = SymStorageBytesFor(impl->sym_sizes(), impl->sym_strides(), storage_offset, ElementSize(dtype));
  impl->set_storage(std::make_shared<StorageImpl>(std::move(nbytes), device, shared_from_this()));
  return Tensor(std::move(impl));
}

Tensor FakeTensorMode::Memoised(const Tensor& real) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tensor_memo_.find(real.impl());
  if (it == tensor_memo_.end()) return Tensor();
  auto r = it->second.real.lock();
  auto f = it->second.fake.lock();
  if (!r || r.get() != real.impl() || !f) return Tensor();
  return Tensor(std::move(f));
}

Tensor FakeTensorMode::FromReal(const Tensor& real, const SymDimVector* sizes, const SymDimVector* strides,
                                const SymInt* offset) {
  KILN_CHECK(real.defined(), "FakeTensorMode.from_tensor: expected a tensor, got None");
  if (FakeModeOf(real) == this) return real;
  if (!sizes) {
    Tensor memo = Memoised(real);
    if (memo.defined()) return memo;
  }
  const SymDimVector& sz = sizes ? *sizes : real->sym_sizes();
  const SymDimVector& st = strides ? *strides : real->sym_strides();
  const SymInt& off = offset ? *offset : real->sym_storage_offset();
  std::lock_guard<std::mutex> lock(mu_);
  // One fake storage per real storage, so aliasing between converted tensors is kept.
  Storage storage;
  const StorageImpl* key = real->storage().get();
  if (key) {
    auto it = storage_memo_.find(key);
    if (it != storage_memo_.end()) {
      auto r = it->second.first.lock();
      auto f = it->second.second.lock();
      if (r && r.get() == key && f) storage = std::move(f);
    }
  }
  if (!storage) {
    SymInt nbytes = sizes || !key ? SymStorageBytesFor(sz, st, off, ElementSize(real.dtype()))
                                  : real->storage()->sym_nbytes();
    storage = std::make_shared<StorageImpl>(std::move(nbytes), real.device(), shared_from_this());
    if (key) storage_memo_[key] = {real->storage(), storage};
  }
  auto impl = std::make_shared<TensorImpl>(storage, real.dtype(), real.device(), DispatchKeySet(DispatchKey::Fake));
  impl->set_sizes_and_strides(sz, st, off);
  impl->set_wrapped_number(real->is_wrapped_number());
  // Drop entries whose tensors died once the maps have grown (amortised O(1) per insertion).
  if (tensor_memo_.size() >= 2 * memo_pruned_size_ + 64) {
    for (auto i = tensor_memo_.begin(); i != tensor_memo_.end();)
      i = i->second.real.expired() || i->second.fake.expired() ? tensor_memo_.erase(i) : std::next(i);
    for (auto i = storage_memo_.begin(); i != storage_memo_.end();)
      i = i->second.first.expired() || i->second.second.expired() ? storage_memo_.erase(i) : std::next(i);
    memo_pruned_size_ = tensor_memo_.size();
  }
  if (!sizes) tensor_memo_[real.impl()] = {real.impl_ptr(), impl};
  return Tensor(std::move(impl));
}

FakeTensorModePtr FakeModePtrOf(const Tensor& t) {
  return IsFake(t) && t->storage() ? t->storage()->fake_mode_ptr() : nullptr;
}

// --- thread state -----------------------------------------------------------------------------

FakeTensorMode* ActiveFakeMode() { return Tls().active; }
const FakeAllocContext*& TlsFakeAllocContext() { return Tls().alloc; }

void PushFakeMode(FakeTensorModePtr mode) {
  FakeTls& tls = Tls();
  LocalDispatchKeySet& keys = TlsLocalDispatchKeySet();
  tls.stack.emplace_back(mode, keys.included.has(DispatchKey::Fake));
  tls.active = mode.get();
  keys.included = mode ? keys.included.add(DispatchKey::Fake) : keys.included.remove(DispatchKey::Fake);
}

void PopFakeMode() {
  FakeTls& tls = Tls();
  KILN_CHECK(!tls.stack.empty(), "FakeTensorMode.__exit__ without a matching __enter__");
  bool had_fake = tls.stack.back().second;
  tls.stack.pop_back();
  tls.active = tls.stack.empty() ? nullptr : tls.stack.back().first.get();
  LocalDispatchKeySet& keys = TlsLocalDispatchKeySet();
  keys.included = had_fake ? keys.included.add(DispatchKey::Fake) : keys.included.remove(DispatchKey::Fake);
}

FakeModeGuard::FakeModeGuard(FakeTensorModePtr mode) { PushFakeMode(std::move(mode)); }
FakeModeGuard::~FakeModeGuard() { PopFakeMode(); }

void RunFake(const Op& op, DispatchKeySet keys, Stack& stack, bool allow_crossref);

// --- the Fake slot ----------------------------------------------------------------------------

namespace {

// Sets the allocation context and the active mode for one fake op; restores them on exit.
class FakeCallScope {
 public:
  FakeCallScope(FakeTensorMode* mode, const FakeAllocContext* ctx) : tls_(Tls()) {
    saved_alloc_ = tls_.alloc;
    saved_active_ = tls_.active;
    LocalDispatchKeySet& keys = TlsLocalDispatchKeySet();
    saved_included_ = keys.included;
    tls_.alloc = ctx;
    tls_.active = mode;
    keys.included = keys.included.add(DispatchKey::Fake);
  }
  ~FakeCallScope() {
    tls_.alloc = saved_alloc_;
    tls_.active = saved_active_;
    TlsLocalDispatchKeySet().included = saved_included_;
  }

 private:
  FakeTls& tls_;
  const FakeAllocContext* saved_alloc_;
  FakeTensorMode* saved_active_;
  DispatchKeySet saved_included_;
};

// An out= overload with no meta function of its own (a hand-written CPU `.out` kernel): its
// functional sibling is the overload taking the same arguments minus the written ones.
const Op* FunctionalSibling(const Op& op) {
  static std::mutex mu;
  static std::unordered_map<const Op*, const Op*> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(&op);
  if (it != cache.end()) return it->second;
  const Op* found = nullptr;
  const std::vector<int>& mutated = op.mutated_args();
  OpPacket* packet = Registry::Get().FindPacket(op.schema().name);
  if (!mutated.empty() && packet) {
    std::vector<std::string> names;
    for (size_t i = 0; i < op.schema().arguments.size(); ++i)
      if (std::find(mutated.begin(), mutated.end(), static_cast<int>(i)) == mutated.end())
        names.push_back(op.schema().arguments[i].name);
    for (Op* other : packet->overloads) {
      if (other == &op || !other->mutated_args().empty() || other->schema().returns.size() != mutated.size() ||
          other->schema().arguments.size() != names.size())
        continue;
      bool same = true;
      for (size_t i = 0; i < names.size() && same; ++i) same = other->schema().arguments[i].name == names[i];
      if (same) { found = other; break; }
    }
  }
  cache[&op] = found;
  return found;
}

void RunOutViaFunctional(const Op& op, const Op& functional, DispatchKeySet keys, Stack& stack) {
  const std::vector<int>& mutated = op.mutated_args();
  std::vector<Tensor> outs;
  Stack args;
  for (size_t i = 0; i < stack.size(); ++i) {
    if (std::find(mutated.begin(), mutated.end(), static_cast<int>(i)) != mutated.end())
      outs.push_back(stack[i].to_tensor());
    else
      args.push_back(std::move(stack[i]));
  }
  functional.Redispatch(keys, args);
  stack.clear();
  for (size_t k = 0; k < outs.size(); ++k) {
    const Tensor& r = args.at(k).to_tensor();
    ResizeOut(op.base_name().c_str(), outs[k], TensorMeta{r->sym_sizes(), {}, r.dtype(), r.device()});
    stack.emplace_back(outs[k]);
  }
}

void MetaFallback(const Op& op, DispatchKeySet keys, Stack& stack, void*) {
  const Op* functional = FunctionalSibling(op);
  if (!functional) {
    throw NotImplementedError(StrCat("Could not run '", op.name(), "' with arguments from the 'Meta' backend. '",
                                     op.name(), "' has no meta function (no kernel registered for 'Meta')"));
  }
  RunOutViaFunctional(op, *functional, keys, stack);
}

std::string MetaString(const Tensor& t) {
  if (!t.defined()) return "None";
  std::ostringstream os;
  os << "size=" << SizesToString(t->sym_sizes()) << " stride=" << SizesToString(t->sym_strides())
     << " offset=" << t->sym_storage_offset().str() << " dtype=" << ScalarTypeName(t.dtype())
     << " device=" << t.device().str();
  return os.str();
}

bool SameMeta(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  return a->sym_sizes() == b->sym_sizes() && a->sym_strides() == b->sym_strides() &&
         a->sym_storage_offset() == b->sym_storage_offset() && a.dtype() == b.dtype() && a.device() == b.device();
}

void CrossRef(FakeTensorMode& mode, const Op& op, DispatchKeySet keys, Stack& stack) {
  mode.crossref_seen.insert(op.name());
  // Fake run on converted copies of the arguments.
  Stack fake_stack = stack;
  std::vector<std::pair<Tensor, Tensor>> converted;  // (real, fake) inputs
  ForEachTensor(fake_stack, [&](Tensor& t) {
    if (!t.defined()) return;
    Tensor real = t;
    t = mode.FromReal(t);
    // The memoised fake of a tensor whose geometry an inplace_view op (t_, transpose_) changed
    // since it was converted takes the tensor's current geometry.
    if (!SameMeta(real, t)) t->set_sizes_and_strides(real->sym_sizes(), real->sym_strides(), real->sym_storage_offset());
    converted.emplace_back(real, t);
  });
  std::string fake_error;
  bool fake_ok = true;
  try {
    RunFake(op, keys, fake_stack, /*allow_crossref=*/false);
  } catch (const std::exception& e) {
    fake_ok = false;
    fake_error = e.what();
  }
  // Real run (the Fake key stays included: the ops it calls are checked as well).
  DispatchKeySet below = keys.remove(DispatchKey::Fake);
  if (below.empty()) below = DispatchKeySet(DispatchKey::CPU);
  op.Redispatch(below, stack);
  if (!fake_ok && (op.has_tag(Tag::dynamic_output_shape) || op.has_tag(Tag::data_dependent_output))) return;
  if (!fake_ok) {
    mode.crossref_mismatches.push_back(StrCat(op.name(), ": the fake run raised, the real one did not: ", fake_error));
    return;
  }
  if (fake_stack.size() != stack.size()) {
    mode.crossref_mismatches.push_back(StrCat(op.name(), ": ", fake_stack.size(), " fake outputs, ", stack.size(),
                                              " real ones"));
    return;
  }
  auto input_index = [&](const Tensor& real, bool by_storage) -> int {
    for (size_t i = 0; i < converted.size(); ++i) {
      const Tensor& in = converted[i].first;
      if (by_storage ? (in->storage() && in->storage() == real->storage()) : in.is_same(real)) return static_cast<int>(i);
    }
    return -1;
  };
  for (size_t k = 0; k < stack.size(); ++k) {
    if (!stack[k].is_tensor()) continue;
    const Tensor& r = stack[k].to_tensor();
    const Tensor& f = fake_stack[k].is_tensor() ? fake_stack[k].to_tensor() : Tensor();
    if (!SameMeta(r, f)) {
      mode.crossref_mismatches.push_back(StrCat(op.name(), " output ", k, ": real ", MetaString(r), ", fake ",
                                                MetaString(f)));
      continue;
    }
    if (!r.defined()) continue;
    if (!IsFake(f) || FakeModeOf(f) != &mode) {
      mode.crossref_mismatches.push_back(StrCat(op.name(), " output ", k, ": not a fake tensor of the mode"));
      continue;
    }
    int same = input_index(r, false);
    if (same >= 0 && !converted[same].second.is_same(f)) {
      mode.crossref_mismatches.push_back(StrCat(op.name(), " output ", k, ": the real output is input ", same,
                                                ", the fake one is not"));
      continue;
    }
    int alias = input_index(r, true);
    if (alias >= 0 && converted[alias].second->storage() != f->storage())
      mode.crossref_mismatches.push_back(StrCat(op.name(), " output ", k, ": the real output aliases input ", alias,
                                                ", the fake one does not"));
    if (alias < 0) {
      for (const auto& [real_in, fake_in] : converted)
        if (fake_in->storage() == f->storage())
          mode.crossref_mismatches.push_back(StrCat(op.name(), " output ", k,
                                                    ": the fake output aliases an input, the real one does not"));
    }
  }
}

}  // namespace

void InstallFakeAndMetaFallbacks(Registry& r) { r.SetFallback(DispatchKey::Meta, Kernel{&MetaFallback, nullptr}); }

void FakeKernel(const Op& op, DispatchKeySet keys, Stack& stack, void*) { RunFake(op, keys, stack, true); }

void RunFake(const Op& op, DispatchKeySet keys, Stack& stack, bool allow_crossref) {
  FakeTensorMode* mode = ActiveFakeMode();
  bool needs_conversion = false, any_fake = false;
  ForEachTensor(stack, [&](Tensor& t) {
    if (!t.defined()) return;
    FakeTensorMode* m = FakeModeOf(t);
    any_fake = any_fake || m != nullptr;
    if (m == nullptr || (mode != nullptr && m != mode)) needs_conversion = true;
    else if (mode == nullptr) mode = m;
  });
  if (allow_crossref && mode != nullptr && mode->crossref && !any_fake && TlsFakeAllocContext() == nullptr) {
    CrossRef(*mode, op, keys, stack);
    return;
  }
  if (mode == nullptr) {
    throw Error(StrCat(op.name(), ": the Fake dispatch key is set but there is no FakeTensorMode (no fake "
                                  "arguments and none active)"));
  }
  if (needs_conversion) {
    ForEachTensor(stack, [&](Tensor& t) {
      if (!t.defined() || FakeModeOf(t) == mode) return;
      if (!t->is_wrapped_number() && !mode->allow_non_fake_inputs()) {
        if (IsFake(t)) throw FakeAssertionError("Mixing fake modes NYI");
        throw FakeAssertionError(StrCat("Please convert all Tensors to FakeTensors first or instantiate "
                                        "FakeTensorMode with 'allow_non_fake_inputs'. Found in ",
                                        RenderCall(op, stack)));
      }
      t = mode->FromReal(t);
    });
  }
  // The device meta functions' outputs land on.
  FakeAllocContext ctx{mode, Device(DeviceType::CPU)};
  const std::vector<int>& mutated = op.mutated_args();
  if (!mutated.empty() && stack[mutated[0]].is_tensor() && stack[mutated[0]].to_tensor().defined()) {
    ctx.device = stack[mutated[0]].to_tensor().device();  // in-place / out=: the written tensor's
  } else {
    DeviceMerger merger{op};
    ForEachTensor(stack, [&](Tensor& t) { if (t.defined()) merger.Merge(t); });
    if (merger.have) {
      ctx.device = merger.device;
    } else {
      for (const IValue& v : stack)
        if (auto* d = std::get_if<Device>(&v.variant())) { ctx.device = *d; break; }
    }
  }
  const Kernel& inner = op.fake_inner();
  const Op* functional = inner ? nullptr : FunctionalSibling(op);
  if (functional) {
    FakeCallScope scope(mode, &ctx);
    RunOutViaFunctional(op, *functional, keys, stack);
    return;
  }
  if (!inner) {
    throw NotImplementedError(StrCat("Could not run '", op.name(), "' with fake or meta tensors: '", op.name(),
                                     "' has no meta function (no kernel registered for 'Meta')"));
  }
  {
    FakeCallScope scope(mode, &ctx);
    inner.fn(op, keys, stack, inner.ctx);
  }
  // Kernels allocate through EmptyTensor (fake here) or alias inputs; anything else is converted.
  for (IValue& v : stack) {
    if (v.is_tensor()) {
      Tensor& t = v.to_tensor();
      if (t.defined() && FakeModeOf(t) != mode) t = mode->FromReal(t);
    }
  }
}

}  // namespace kiln
