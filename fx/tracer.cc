// fx/tracer.cc: the make_fx tracer (Note [make_fx tracing]).
#include "fx/tracer.h"

#include <mutex>

#include "runtime/error.h"

namespace kiln::fx {
namespace {

thread_local Tracer* g_active = nullptr;

bool IsDefault(const kiln::Argument& a, const IValue& v) {
  if (!a.default_value) return false;
  const IValue& d = *a.default_value;
  if (d.is_none() || v.is_none()) return d.is_none() && v.is_none();
  if (v.is_symint() && v.to_symint().is_symbolic()) return false;
  if (d.is_bool() && v.is_bool()) return d.to_bool() == v.to_bool();
  if ((d.is_int() || d.is_symint()) && (v.is_int() || v.is_symint()))
    return d.to_symint().maybe_as_int() == v.to_symint().maybe_as_int();
  if (d.is_double() && (v.is_double() || v.is_int())) return d.to_double() == v.to_double();
  if (std::holds_alternative<std::vector<SymInt>>(d.variant()) &&
      std::holds_alternative<std::vector<SymInt>>(v.variant())) {
    const auto& x = d.to_symint_list();
    const auto& y = v.to_symint_list();
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (y[i].is_symbolic() || x[i].maybe_as_int() != y[i].maybe_as_int()) return false;
    return true;
  }
  if (d.variant().index() != v.variant().index()) return false;
  if (auto* s = std::get_if<std::string>(&d.variant())) return *s == v.to_string();
  if (auto* t = std::get_if<ScalarType>(&d.variant())) return *t == v.to_scalar_type();
  if (auto* m = std::get_if<MemoryFormat>(&d.variant())) return *m == v.to_memory_format();
  if (auto* l = std::get_if<Layout>(&d.variant())) return *l == v.to_layout();
  return false;
}

void RunBelow(const Op& op, Stack& stack) {
  ExcludeDispatchKeyGuard guard(
      DispatchKeySet(DispatchKey::Tracing).add(DispatchKey::Autograd).add(DispatchKey::Functionalize));
  BelowAutogradGuard below;  // views made below are the op's own, not no_grad's (Note [View creation])
  op.Call(stack);
}

void TracingKernel(const Op& op, DispatchKeySet, Stack& stack, void*) {
  Tracer* tracer = g_active;
  if (tracer == nullptr) return RunBelow(op, stack);
  if (tracer->decompose && tracer->decompose(op, stack)) return;
  Stack args = stack;
  RunBelow(op, stack);
  tracer->Record(op, args, stack);
}

}  // namespace

bool IsRecordedComposite(const Op& op) { return op.HasComposite() && op.composite_explicit(); }

Tracer* ActiveTracer() { return g_active; }

TracingGuard::TracingGuard(Tracer* tracer) : saved_(g_active), saved_keys_(TlsLocalDispatchKeySet()) {
  InstallTracer();
  g_active = tracer;
  LocalDispatchKeySet& tls = TlsLocalDispatchKeySet();
  tls.included = tls.included.add(DispatchKey::Tracing);
  tls.excluded = tls.excluded.remove(DispatchKey::Tracing);
}

TracingGuard::~TracingGuard() {
  g_active = saved_;
  TlsLocalDispatchKeySet() = saved_keys_;
}

void InstallTracer() {
  static std::once_flag once;
  std::call_once(once, [] {
    Registry& r = Registry::Get();
    Kernel k{&TracingKernel, nullptr};
    r.SetFallback(DispatchKey::Tracing, k);
    for (Op* op : r.ops())
      if (IsRecordedComposite(*op)) op->SetKernel(DispatchKey::Tracing, k);
  });
}

// ---------------------------------------------------------------------------------------------
// Tracer.

Tracer::Tracer(std::shared_ptr<Graph> graph) : graph_(std::move(graph)) {}
Tracer::~Tracer() = default;

Node* Tracer::Placeholder(const std::string& name, const Tensor& t) {
  Node* n = graph_->Placeholder(name);
  if (t.defined()) {
    Bind(t, n);
    n->SetMeta("val", MetaVal(t));
  }
  return n;
}

void Tracer::Bind(const Tensor& t, Node* n) {
  Entry& e = map_[t.impl()];
  e.keep_alive = t;
  e.node = n;
  e.parent = nullptr;
}

Node* Tracer::Materialize(Entry& e) {
  if (e.node == nullptr && e.parent != nullptr) {
    Target target = getitem_target ? Target::Callable(getitem_target) : Target("getitem");
    e.node = graph_->CallFunction(target, {Argument(e.parent), Argument(IValue(int64_t(e.index)))});
    if (!e.val.is_none()) e.node->SetMeta("val", e.val);
  }
  return e.node;
}

namespace {
bool SameSymInts(const SymDimVector& a, const SymDimVector& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].str() != b[i].str()) return false;
  return true;
}
}  // namespace

Node* Tracer::NodeFor(const Tensor& t) {
  if (!t.defined()) return nullptr;
  auto it = map_.find(t.impl());
  if (it != map_.end()) return Materialize(it->second);
  // Autograd saves outputs as new handles on the same storage (a SavedVariable unpacks to a
  // shallow alias), so an unknown tensor that aliases a traced one exactly is that value.
  const StorageImpl* storage = t->storage().get();
  if (storage == nullptr) return nullptr;
  for (auto& [impl, entry] : map_) {
    const Tensor& known = entry.keep_alive;
    if (!known.defined() || known->storage().get() != storage || known.dtype() != t.dtype() ||
        !SameSymInts(known->sym_sizes(), t->sym_sizes()) || !SameSymInts(known->sym_strides(), t->sym_strides()) ||
        known->sym_storage_offset().str() != t->sym_storage_offset().str())
      continue;
    Node* n = Materialize(entry);
    if (n == nullptr) return nullptr;
    Entry& alias = map_[t.impl()];
    alias.keep_alive = t;
    alias.node = n;
    alias.parent = nullptr;
    return n;
  }
  return nullptr;
}

Argument Tracer::MetaVal(const Tensor& t) {
  if (!t.defined()) return Argument();
  if (make_val) return make_val(t);
  if (!t->has_storage()) return Argument(IValue(t));
  auto impl = std::make_shared<TensorImpl>(nullptr, t.dtype(), t.device(), DispatchKeySet(DispatchKey::Fake));
  impl->set_sizes_and_strides(t->sym_sizes(), t->sym_strides(), t->sym_storage_offset());
  return Argument(IValue(Tensor(std::move(impl))));
}

Argument Tracer::TensorArg(const Tensor& t) {
  if (!t.defined()) return Argument();
  if (Node* n = NodeFor(t)) return Argument(n);
  if (t->is_wrapped_number() && t->has_storage()) {
    // A Python number the argument parser wrapped: the number itself, as PyTorch records it.
    switch (t.dtype()) {
      case ScalarType::Bool: return Argument(IValue(*t.data_ptr<bool>()));
      case ScalarType::Int64: return Argument(IValue(*t.data_ptr<int64_t>()));
      case ScalarType::Float64: return Argument(IValue(*t.data_ptr<double>()));
      case ScalarType::Float32: return Argument(IValue(static_cast<double>(*t.data_ptr<float>())));
      case ScalarType::ComplexFloat: return Argument(IValue(std::complex<double>(*t.data_ptr<std::complex<float>>())));
      case ScalarType::ComplexDouble: return Argument(IValue(*t.data_ptr<std::complex<double>>()));
      default: break;
    }
  }
  std::string name = "_tensor_constant" + std::to_string(constants_.size());
  constants_.emplace_back(name, t);
  Node* n = graph_->GetAttr(name);
  Bind(t, n);
  n->SetMeta("val", MetaVal(t));
  return Argument(n);
}

Argument Tracer::ArgFor(const IValue& v) {
  if (v.is_tensor()) return TensorArg(v.to_tensor());
  if (v.is_tensor_list()) {
    std::vector<Argument> items;
    for (const Tensor& t : v.to_tensor_list()) items.push_back(TensorArg(t));
    return Argument::List(std::move(items));
  }
  if (v.is_optional_tensor_list()) {
    std::vector<Argument> items;
    for (const auto& t : v.to_optional_tensor_list()) items.push_back(t ? TensorArg(*t) : Argument());
    return Argument::List(std::move(items));
  }
  if (v.is_symint()) {
    const SymInt& s = v.to_symint();
    if (s.is_symbolic() && sym_arg)
      if (auto a = sym_arg(s)) return *a;
    if (auto c = s.maybe_as_int()) return Argument(IValue(*c));
    return Argument(v);
  }
  if (std::holds_alternative<std::vector<SymInt>>(v.variant())) {
    std::vector<Argument> items;
    for (const SymInt& s : v.to_symint_list()) items.push_back(ArgFor(IValue(s)));
    return Argument::List(std::move(items));
  }
  if (std::holds_alternative<std::vector<double>>(v.variant())) {
    std::vector<Argument> items;
    for (double d : v.to_double_list()) items.push_back(Argument(IValue(d)));
    return Argument::List(std::move(items));
  }
  if (std::holds_alternative<std::vector<bool>>(v.variant())) {
    std::vector<Argument> items;
    for (bool b : v.to_bool_list()) items.push_back(Argument(IValue(b)));
    return Argument::List(std::move(items));
  }
  return Argument(v);
}

void Tracer::Record(const Op& op, const Stack& args, const Stack& results) {
  const FunctionSchema& s = op.schema();
  // Positional arguments up to the last one that differs from its default; kwarg-only ones that
  // differ from their defaults.
  size_t n_pos = 0;
  for (size_t i = 0; i < s.arguments.size() && i < args.size(); ++i)
    if (!s.arguments[i].kwarg_only && !IsDefault(s.arguments[i], args[i])) n_pos = i + 1;
  std::vector<Argument> node_args;
  Kwargs kwargs;
  for (size_t i = 0; i < s.arguments.size() && i < args.size(); ++i) {
    const kiln::Argument& a = s.arguments[i];
    if (a.kwarg_only) {
      if (!IsDefault(a, args[i])) kwargs.emplace_back(a.name, ArgFor(args[i]));
    } else if (i < n_pos) {
      node_args.push_back(ArgFor(args[i]));
    }
  }
  Node* node = graph_->CallFunction(Target(&op), std::move(node_args), std::move(kwargs));
  ++ops_recorded_;

  // Outputs: one tensor maps to the node; several to a getitem node each, made at once in output
  // order as PyTorch's tracer does (also for outputs nothing reads: `getitem_1 = max_1[1]`).
  std::vector<Tensor> outs;
  bool single = false;
  if (results.size() == 1 && results[0].is_tensor() && !s.returns_tuple) {
    outs.push_back(results[0].to_tensor());
    single = true;
  } else if (results.size() == 1 && results[0].is_tensor_list()) {
    outs = results[0].to_tensor_list();
  } else {
    for (const IValue& v : results) outs.push_back(v.is_tensor() ? v.to_tensor() : Tensor());
  }
  if (single) {
    if (outs[0].defined()) Bind(outs[0], node);
    node->SetMeta("val", MetaVal(outs[0]));
    return;
  }
  std::vector<Argument> vals;
  for (const Tensor& out : outs) vals.push_back(MetaVal(out));
  node->SetMeta("val", results.size() == 1 && results[0].is_tensor_list() ? Argument::List(vals)
                                                                          : Argument::Tuple(vals));
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].defined()) continue;
    Entry& e = map_[outs[i].impl()];
    e.keep_alive = outs[i];
    e.node = nullptr;
    e.parent = node;
    e.index = static_cast<int>(i);
    e.val = vals[i];
    Materialize(e);
  }
}

}  // namespace kiln::fx
