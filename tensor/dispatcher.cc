// tensor/dispatcher.cc: registration, dispatch tables and the dispatch loop.
#include "tensor/dispatcher.h"

#include "tensor/autocast.h"
#include "tensor/fake_tensor.h"

#include <algorithm>
#include <mutex>

#include "tensor/ops/core_ops.h"

namespace kiln {

const char* TagName(Tag t) {
  switch (t) {
    case Tag::pointwise: return "pointwise";
    case Tag::reduction: return "reduction";
    case Tag::view: return "view";
    case Tag::inplace: return "inplace";
    case Tag::nondeterministic_seeded: return "nondeterministic_seeded";
    case Tag::core: return "core";
    case Tag::data_dependent_output: return "data_dependent_output";
    case Tag::dynamic_output_shape: return "dynamic_output_shape";
    case Tag::inplace_view: return "inplace_view";
    case Tag::compute_intensive: return "compute_intensive";
  }
  return "?";
}

const char* CostClassName(CostClass c) {
  switch (c) {
    case CostClass::kFree: return "free";
    case CostClass::kMemoryBound: return "memory_bound";
    case CostClass::kComputeIntensive: return "compute_intensive";
    case CostClass::kOpaque: return "opaque";
  }
  return "?";
}

namespace {
CostClass CostClassOfTags(uint32_t tags) {
  auto has = [&](Tag t) { return (tags & static_cast<uint32_t>(t)) != 0; };
  if (has(Tag::compute_intensive)) return CostClass::kComputeIntensive;
  if (has(Tag::nondeterministic_seeded) || has(Tag::dynamic_output_shape) || has(Tag::data_dependent_output))
    return CostClass::kOpaque;
  if (has(Tag::view) || has(Tag::inplace_view)) return CostClass::kFree;
  if (has(Tag::pointwise) || has(Tag::reduction)) return CostClass::kMemoryBound;
  return CostClass::kOpaque;
}
}  // namespace

Op::Op(const Registry* registry, FunctionSchema schema, uint32_t tags, Variants variants)
    : registry_(registry), schema_(std::move(schema)), tags_(tags), cost_class_(CostClassOfTags(tags)),
      variants_(variants) {
  full_name_ = schema_.full_name();
  base_name_ = schema_.name.substr(schema_.name.find("::") + 2);
  for (size_t i = 0; i < schema_.arguments.size(); ++i)
    if (schema_.arguments[i].alias.is_write) mutated_args_.push_back(static_cast<int>(i));
  checks_overlap_ = (has_tag(Tag::inplace) && !has_tag(Tag::inplace_view)) || is_out_overload();
}

void Op::SetKernel(DispatchKey k, Kernel kernel) {
  kernels_[static_cast<int>(k)] = kernel;
  RebuildTable();
}

void Op::SetComposite(Kernel kernel) {
  composite_ = kernel;
  RebuildTable();
}

void Op::RebuildTable() {
  const Registry& r = *registry_;
  for (int i = 0; i < kNumDispatchKeys; ++i) {
    auto k = static_cast<DispatchKey>(i);
    if (kernels_[i]) table_[i] = kernels_[i];
    // autocast casts a composite in its lists as a whole (Note [Autocast] in autocast.h)
    else if (k == DispatchKey::Autocast && r.fallback(k)) table_[i] = r.fallback(k);
    else if (composite_) table_[i] = composite_;
    else if (r.fallback(k)) table_[i] = r.fallback(k);
    else table_[i] = Kernel{};
  }
  // Every op's Fake slot checks and converts its arguments first (fake_tensor.h).
  constexpr int kFake = static_cast<int>(DispatchKey::Fake);
  constexpr int kMeta = static_cast<int>(DispatchKey::Meta);
  fake_inner_ = kernels_[kFake] ? kernels_[kFake] : kernels_[kMeta] ? kernels_[kMeta] : table_[kFake];
  table_[kFake] = Kernel{&FakeKernel, nullptr};
}

bool Op::is_out_overload() const {
  const std::string& ov = schema_.overload;
  return ov == "out" || ov == "grad_input" || (ov.size() > 4 && ov.compare(ov.size() - 4, 4, "_out") == 0);
}

DispatchKeySet Op::ComputeKeys(const Stack& stack) const {
  DispatchKeySet ks;
  for (const IValue& v : stack) {
    if (v.is_tensor()) {
      const Tensor& t = v.to_tensor();
      if (t.defined()) ks = ks | t->keys();
    } else if (v.is_tensor_list()) {
      for (const Tensor& t : v.to_tensor_list()) if (t.defined()) ks = ks | t->keys();
    } else if (v.is_optional_tensor_list()) {
      for (const auto& t : v.to_optional_tensor_list()) if (t && t->defined()) ks = ks | (*t)->keys();
    }
  }
  if (ks.empty()) {
    // Factory functions: the device argument picks the backend.
    for (const IValue& v : stack)
      if (auto* d = std::get_if<Device>(&v.variant())) { ks = DispatchKeySet(BackendKey(*d)); break; }
  }
  const LocalDispatchKeySet& tls = TlsLocalDispatchKeySet();
  ks = (ks | tls.included) - tls.excluded;
  if (ks.empty()) ks = DispatchKeySet(DispatchKey::CPU);  // factory functions default to CPU
  return ks;
}

// Note [Overlapping writes]: before an in-place or out= kernel writes anything, PyTorch's
// TensorIterator refuses a written tensor that repeats an element (x.expand(3, 4).add_(1)) or
// that partially overlaps a tensor the op reads (x[1:].add_(x[:-1]) would read sums it already
// wrote); reading exactly the written elements (x.add_(x)) is fine. Every in-place and out= op
// checks here, whatever its kernel; the few PyTorch lets through opt out where they are defined
// (OpDef::AllowsOverlappingWrites), and gathers and scatters refuse full overlap themselves.
void Op::CheckOverlappingWrites(const Stack& stack) const {
  for (int w : mutated_args_) {
    if (!stack[w].is_tensor() || !stack[w].to_tensor().defined()) continue;
    const Tensor& written = stack[w].to_tensor();
    CheckNoInternalOverlap(written);
    for (size_t i = 0; i < stack.size(); ++i) {
      if (std::find(mutated_args_.begin(), mutated_args_.end(), static_cast<int>(i)) != mutated_args_.end()) continue;
      if (stack[i].is_tensor() && stack[i].to_tensor().defined()) CheckNoPartialOverlap(written, stack[i].to_tensor());
    }
  }
}

void Op::Redispatch(DispatchKeySet keys, Stack& stack) const {
  const Registry& registry = *registry_;
  while (true) {
    DispatchKey k = keys.highest();
    const Kernel& kernel = table_[static_cast<int>(k)];
    if (kernel) {
      if (mutated_args_.empty() || k > DispatchKey::Fake) {
        kernel.fn(*this, keys, stack, kernel.ctx);
        return;
      }
      // A backend kernel writes these arguments: bump their version counters (autograd checks
      // saved tensors against them). Collected first because the kernel consumes the stack.
      if (checks_overlap_) CheckOverlappingWrites(stack);
      absl::InlinedVector<Tensor, 2> written;
      for (int i : mutated_args_) {
        const IValue& v = stack[i];
        if (v.is_tensor() && v.to_tensor().defined()) written.push_back(v.to_tensor());
        else if (v.is_tensor_list()) for (const Tensor& t : v.to_tensor_list()) written.push_back(t);
      }
      kernel.fn(*this, keys, stack, kernel.ctx);
      for (const Tensor& t : written) t->bump_version();
      return;
    }
    if (k != DispatchKey::Undefined && registry.is_fallthrough(k)) {
      keys = keys.remove(k);
      continue;
    }
    std::string backend = DispatchKeyName(k);
    throw NotImplementedError(StrCat(
        "Could not run '", full_name_, "' with arguments from the '", backend,
        "' backend. '", full_name_, "' has no kernel registered for '", backend, "'",
        k == DispatchKey::CUDA ? " (kiln has no CUDA kernel for this op yet; copy the tensors to the CPU with .cpu())" : ""));
  }
}

Registry::Registry() {
  fallthrough_[static_cast<int>(DispatchKey::Functionalize)] = true;
  fallthrough_[static_cast<int>(DispatchKey::Autograd)] = true;
  fallthrough_[static_cast<int>(DispatchKey::Tracing)] = true;
}

Registry& Registry::Get() {
  static Registry* registry = [] {
    auto* r = new Registry();
    return r;
  }();
  static std::once_flag once;
  std::call_once(once, [] {
    RegisterBuiltinOps(*registry);
    InstallFakeAndMetaFallbacks(*registry);
    InstallAutocast(*registry);
  });
  return *registry;
}

OpDef Registry::Def(const std::string& schema_text, std::initializer_list<Tag> tags, Variants variants) {
  FunctionSchema schema = ParseSchema(schema_text);
  uint32_t bits = 0;
  for (Tag t : tags) bits |= static_cast<uint32_t>(t);
  if (schema.is_mutable() && !schema.returns.empty() && schema.returns[0].alias.is_write &&
      schema.overload != "out" && schema.name.back() == '_')
    bits |= static_cast<uint32_t>(Tag::inplace);
  std::string full = schema.full_name();
  // The core bit comes from the one list of core ops (tensor/ops/core_ops.cc), not the Def site.
  bits &= ~static_cast<uint32_t>(Tag::core);
  if (IsCoreAtenOp(full)) bits |= static_cast<uint32_t>(Tag::core);
  KILN_INTERNAL_ASSERT(ops_.count(full) == 0, "op registered twice: ", full);
  auto op = std::make_unique<Op>(this, std::move(schema), bits, variants);
  Op* raw = op.get();
  ops_[full] = std::move(op);
  OpPacket*& packet = packet_index_[raw->schema().name];
  if (packet == nullptr) {
    packets_.push_back(std::make_unique<OpPacket>());
    packet = packets_.back().get();
    packet->qualified_name = raw->schema().name;
    packet->name = raw->base_name();
  }
  packet->overloads.push_back(raw);
  packet->variants = static_cast<Variants>(packet->variants | variants);
  return OpDef(raw);
}

void Registry::Alias(const std::string& alias, const std::string& name, Variants variants) {
  OpPacket* packet = FindPacket("aten::" + name);
  KILN_INTERNAL_ASSERT(packet != nullptr, "alias ", alias, " of an op not defined (yet): ", name);
  KILN_INTERNAL_ASSERT(FindPacket("aten::" + alias) == nullptr, "alias ", alias, " is an op's own name");
  for (const auto& p : packets_)
    for (const OpAlias& a : p->aliases)
      KILN_INTERNAL_ASSERT(a.name != alias, "alias ", alias, " declared twice (", p->name, ", ", name, ")");
  packet->aliases.push_back({alias, variants});
}

Op* Registry::Find(const std::string& full_name) const {
  auto it = ops_.find(full_name);
  return it == ops_.end() ? nullptr : it->second.get();
}

const Op& Registry::FindOrThrow(const std::string& full_name) const {
  Op* op = Find(full_name);
  KILN_INTERNAL_ASSERT(op != nullptr, "no op named ", full_name);
  return *op;
}

OpPacket* Registry::FindPacket(const std::string& qualified_name) const {
  auto it = packet_index_.find(qualified_name);
  return it == packet_index_.end() ? nullptr : it->second;
}

std::vector<Op*> Registry::ops() const {
  std::vector<Op*> out;
  for (auto& [name, op] : ops_) out.push_back(op.get());
  return out;
}

void Registry::SetFallback(DispatchKey k, Kernel kernel) {
  fallbacks_[static_cast<int>(k)] = kernel;
  RebuildAll();
}

void Registry::SetFallthrough(DispatchKey k, bool fallthrough) {
  fallthrough_[static_cast<int>(k)] = fallthrough;
}

void Registry::RebuildAll() {
  for (auto& [name, op] : ops_) op->RebuildTable();
}

}  // namespace kiln
