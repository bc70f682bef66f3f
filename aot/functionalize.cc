// aot/functionalize.cc: functional tensors and the Functionalize kernel (Note [Functionalization]).
#include "aot/functionalize.h"

#include <mutex>
#include <unordered_map>

#include "fx/tracer.h"
#include "runtime/error.h"
#include "tensor/ops.h"

namespace kiln::aot {
namespace {

DispatchKeySet WrapperKeys(const Tensor& value) {
  return value->keys().remove(DispatchKey::Autograd).remove(DispatchKey::Tracing).add(DispatchKey::Functionalize);
}

// Runs `op` on `stack` below this layer.
void CallBelow(const Op& op, Stack& stack) {
  ExcludeDispatchKeyGuard guard(DispatchKeySet(DispatchKey::Functionalize));
  op.Call(stack);
}

Tensor OutputAt(Stack& stack, int index) {
  if (stack.size() == 1 && stack[0].is_tensor_list()) return stack[0].to_tensor_list().at(index);
  return stack.at(index).to_tensor();
}

// The view op `m` applied to `t`.
Tensor ApplyView(const ViewMeta& m, const Tensor& t) {
  Stack s;
  s.reserve(m.args.size() + 1);
  s.emplace_back(t);
  for (const IValue& v : m.args) s.push_back(v);
  CallBelow(*m.op, s);
  return OutputAt(s, m.index);
}

std::optional<SymInt> OptSymInt(const IValue& v) {
  if (v.is_none()) return std::nullopt;
  return v.to_symint();
}

// The tensor whose storage positions as_strided_scatter(base, ...) addresses: base itself when the
// result keeps base's layout (a dense or gapped base: a strided slice `x[::2]` of an input), else
// a contiguous copy (an overlapping base). Views for its size/stride/offset arguments are taken
// of this; a contiguous stand-in for a gapped base addressed the wrong elements (a write through
// `x[::2].split(1)[-1]` landed two rows early).
Tensor ScatterLayout(const Tensor& base) {
  Stack laid{base, base, false};
  CallBelow(Registry::Get().FindOrThrow("aten::copy"), laid);  // as_strided_scatter's layout rule
  if (laid.at(0).to_tensor()->sym_strides() == base->sym_strides()) return base;
  Stack contiguous{base, MemoryFormat::Contiguous};
  CallBelow(Registry::Get().FindOrThrow("aten::contiguous"), contiguous);
  return contiguous.at(0).to_tensor();
}

// `base` with the region that `m` views replaced by `src`: the scatter inverse of the view.
Tensor ScatterView(const ViewMeta& m, const Tensor& base, const Tensor& src) {
  const std::string& name = m.op->base_name();
  const Stack& a = m.args;
  auto call = [&](const char* op, Stack s) {
    CallBelow(Registry::Get().FindOrThrow(op), s);
    return s.at(0).to_tensor();
  };
  if (name == "slice")
    return call("aten::slice_scatter", {base, src, a[0], a[1], a[2], a[3]});
  if (name == "select") return call("aten::select_scatter", {base, src, a[0], a[1]});
  if (name == "diagonal") return call("aten::diagonal_scatter", {base, src, a[0], a[1], a[2]});
  if (name == "as_strided") return call("aten::as_strided_scatter", {base, src, a[0], a[1], a[2]});
  if (name == "transpose") return call("aten::transpose.int", {src, a[0], a[1]});
  if (name == "t") return call("aten::t", {src});
  if (name == "permute") {
    std::vector<int64_t> dims = a[0].to_int_list(), inverse(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) inverse[WrapDim(dims[i], dims.size())] = static_cast<int64_t>(i);
    return call("aten::permute", {src, IValue(inverse)});
  }
  if (name == "alias" || name == "detach") return src;
  if (name == "view" && m.op->schema().overload == "dtype")  // the same bytes read back as base's dtype
    return call("aten::view.dtype", {src, IValue(base.dtype())});
  // the pairs read back as complex numbers and back (view_as_complex wants adjacent pairs)
  if (name == "view_as_real")
    return call("aten::view_as_complex", {call("aten::contiguous", {src, IValue(MemoryFormat::Contiguous)})});
  if (name == "view_as_complex") return call("aten::view_as_real", {src});
  // an expand reaches here only when it repeats nothing (sizes of 1 kept or prepended): writes
  // through views that overlap themselves take ScatterIntoOverlappingView or ScatterThroughLayout
  if (name == "view" || name == "squeeze" || name == "unsqueeze" || name == "_unsafe_view" || name == "expand") {
    const SymDimVector& s = base->sym_sizes();
    return call("aten::reshape", {src, IValue(std::vector<SymInt>(s.begin(), s.end()))});
  }
  // Any other view (split's pieces): its layout within the base as as_strided_scatter lays it out.
  Tensor view = ApplyView(m, ScatterLayout(base));
  const SymDimVector& sz = view->sym_sizes();
  const SymDimVector& st = view->sym_strides();
  return call("aten::as_strided_scatter", {base, src, IValue(std::vector<SymInt>(sz.begin(), sz.end())),
                                           IValue(std::vector<SymInt>(st.begin(), st.end())),
                                           IValue(view->sym_storage_offset())});
}

// Whether some element of `t` is reached by more than one index (a dimension of stride 0 and
// size > 1, as expand makes); symbolic sizes count as > 1.
bool OverlapsItself(const Tensor& t) {
  const SymDimVector& sz = t->sym_sizes();
  const SymDimVector& st = t->sym_strides();
  for (size_t d = 0; d < sz.size(); ++d) {
    const std::optional<int64_t> stride = st[d].maybe_as_int(), size = sz[d].maybe_as_int();
    if (stride == 0 && size != 1) return true;
  }
  return false;
}

// Note [Writes through overlapping views]: scattering a write back view by view breaks when an
// intermediate view overlaps itself: in `base.expand(5, 2).diagonal().abs_()` the expanded
// view's rows are one row, but diagonal_scatter updates one element per row and the expand's
// scatter keeps only the last row. Eager writes memory, so the write lands on the base's
// elements that the whole chain reaches: one as_strided_scatter with the chain's layout
// within the base as the scatter lays it out (ScatterLayout).
Tensor ScatterThroughLayout(const std::vector<ViewMeta>& chain, const Tensor& base, const Tensor& src) {
  Tensor view = ScatterLayout(base);
  for (const ViewMeta& m : chain) view = ApplyView(m, view);
  const SymDimVector& sz = view->sym_sizes();
  const SymDimVector& st = view->sym_strides();
  Stack s{base, src, IValue(std::vector<SymInt>(sz.begin(), sz.end())),
          IValue(std::vector<SymInt>(st.begin(), st.end())), IValue(view->sym_storage_offset())};
  CallBelow(Registry::Get().FindOrThrow("aten::as_strided_scatter"), s);
  return s.at(0).to_tensor();
}

// Note [Writes into an overlapping view]: a write into a view whose elements share memory (an
// expanded one: `x.expand(2, 3).zero_()`, `v[v > 0] = 1`, which PyTorch allows with a
// deprecation warning) changes a memory location when any element reaching it changes. The
// functional new value holds each element's value, so a plain scatter would keep whichever
// element it visits last, written or not. Along each repeated dimension the last changed
// element is taken instead (its value, as eager's row-major writes leave it; the location's old
// value if none changed; a write of the value already there changes nothing either way), then the
// view narrowed to one element there, which no longer overlaps, is scattered with the
// chain's layout within the base.
Tensor ScatterIntoOverlappingView(const std::vector<ViewMeta>& chain, const Tensor& base, const Tensor& old_view,
                                  const Tensor& new_value) {
  Tensor layout = ScatterLayout(base);
  for (const ViewMeta& m : chain) layout = ApplyView(m, layout);
  Tensor value = new_value, old = old_view;
  Tensor changed = CallOp<Tensor>(KILN_OP("aten::ne.Tensor"), new_value, old_view);
  for (int64_t d = 0; d < old_view.dim(); ++d) {
    // a dimension of size 0 repeats nothing (and argmax over it would raise: an expanded empty
    // input written in place, fuzz seed 871, program 444)
    const std::optional<int64_t> size = old_view->sym_sizes()[d].maybe_as_int();
    if (old_view->sym_strides()[d].maybe_as_int() != 0 || size == 1 || size == 0) continue;
    // the running count of changed elements peaks first at the last one
    Tensor count = CallOp<Tensor>(KILN_OP("aten::cumsum"), ops::to_dtype(changed, ScalarType::Int64), d,
                                  std::optional<ScalarType>());
    Tensor last = CallOp<Tensor>(KILN_OP("aten::argmax"), count, std::optional<int64_t>(d), true);
    value = ops::gather(value, d, last);
    changed = CallOp<Tensor>(KILN_OP("aten::any.dim"), changed, d, true);
    old = CallOp<Tensor>(KILN_OP("aten::narrow"), old, d, SymInt(0), SymInt(1));
    layout = CallOp<Tensor>(KILN_OP("aten::narrow"), layout, d, SymInt(0), SymInt(1));
  }
  value = ops::where(changed, value, old);
  const SymDimVector& sz = layout->sym_sizes();
  const SymDimVector& st = layout->sym_strides();
  Stack s{base, value, IValue(std::vector<SymInt>(sz.begin(), sz.end())),
          IValue(std::vector<SymInt>(st.begin(), st.end())), IValue(layout->sym_storage_offset())};
  CallBelow(Registry::Get().FindOrThrow("aten::as_strided_scatter"), s);
  return s.at(0).to_tensor();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// FunctionalTensorImpl.

FunctionalTensorImpl::FunctionalTensorImpl(Tensor value)
    : TensorImpl(nullptr, value.dtype(), value.device(), WrapperKeys(value)),
      storage_(std::make_shared<FunctionalStorage>()) {
  storage_->base = value;
  SetValue(std::move(value));
}

FunctionalTensorImpl::FunctionalTensorImpl(Tensor value, const FunctionalTensorImpl& of, ViewMeta meta)
    : TensorImpl(nullptr, value.dtype(), value.device(), WrapperKeys(value)),
      storage_(of.storage_),
      chain_(of.chain_),
      generation_(of.storage_->generation) {
  chain_.push_back(std::move(meta));
  SetValue(std::move(value));
}

void FunctionalTensorImpl::SetValue(Tensor v) {
  set_sizes_and_strides(v->sym_sizes(), v->sym_strides(), v->sym_storage_offset());
  set_dtype(v.dtype());
  if (is_view()) value_ = std::move(v);
}

const Tensor& FunctionalTensorImpl::value() {
  if (!is_view()) return storage_->base;
  if (generation_ != storage_->generation) {
    Tensor v = storage_->base;
    for (const ViewMeta& m : chain_) v = ApplyView(m, v);
    value_ = std::move(v);
    generation_ = storage_->generation;
  }
  return value_;
}

void FunctionalTensorImpl::Commit(Tensor new_value) {
  if (!is_view()) {
    storage_->base = new_value;
    ++storage_->generation;
    SetValue(std::move(new_value));
    return;
  }
  // The base's value and each intermediate view's, then scatter back from the innermost.
  std::vector<Tensor> along(chain_.size());
  along[0] = storage_->base;
  for (size_t i = 0; i + 1 < chain_.size(); ++i) along[i + 1] = ApplyView(chain_[i], along[i]);
  bool through_overlap = false;
  for (size_t i = 1; i < along.size(); ++i) through_overlap = through_overlap || OverlapsItself(along[i]);
  Tensor updated;
  Tensor old_view = ApplyView(chain_.back(), along.back());
  if (OverlapsItself(old_view)) {
    ExcludeDispatchKeyGuard guard(DispatchKeySet(DispatchKey::Functionalize));
    updated = ScatterIntoOverlappingView(chain_, storage_->base, old_view, new_value);
  } else if (through_overlap) {
    updated = ScatterThroughLayout(chain_, storage_->base, new_value);
  } else {
    updated = new_value;
    for (size_t i = chain_.size(); i-- > 0;) updated = ScatterView(chain_[i], along[i], updated);
  }
  storage_->base = std::move(updated);
  generation_ = ++storage_->generation;
  SetValue(std::move(new_value));
}

void FunctionalTensorImpl::ApplyInplaceView(const Op& view_op, const Op& inplace_op, const Stack& args,
                                            Tensor view_value) {
  chain_.push_back(ViewMeta{&view_op, args, 0});
  generation_ = storage_->generation;  // view_value was computed from the current value
  value_ = view_value;
  SetValue(std::move(view_value));
  metadata_mutations_.push_back(ViewMeta{&inplace_op, args, 0});
}

bool IsFunctional(const Tensor& t) { return t.defined() && t->keys().has(DispatchKey::Functionalize); }

FunctionalTensorImpl* AsFunctional(const Tensor& t) {
  return IsFunctional(t) ? static_cast<FunctionalTensorImpl*>(t.impl()) : nullptr;
}

Tensor ToFunctional(const Tensor& t) {
  if (!t.defined() || IsFunctional(t)) return t;
  return Tensor(std::make_shared<FunctionalTensorImpl>(t));
}

Tensor FromFunctional(const Tensor& t) {
  FunctionalTensorImpl* f = AsFunctional(t);
  return f ? f->value() : t;
}

Tensor FromFunctionalOutput(const Tensor& t) {
  FunctionalTensorImpl* f = AsFunctional(t);
  if (!f || !f->is_view() || !f->has_data_mutation()) return FromFunctional(t);
  Tensor v = f->functional_storage()->base;
  for (const ViewMeta& m : f->chain()) v = ApplyView(m, v);
  return v;
}

// ---------------------------------------------------------------------------------------------
// The kernel.

const Op* FunctionalVariant(const Op& op) {
  static std::mutex mu;
  static std::unordered_map<const Op*, const Op*> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(&op);
  if (it != cache.end()) return it->second;
  const Registry& r = Registry::Get();
  const FunctionSchema& s = op.schema();
  const Op* found = nullptr;
  if (op.has_tag(Tag::inplace)) {
    std::string base = op.base_name();
    base.pop_back();
    // Usually the overload of the same name (`add_.Tensor` -> `add.Tensor`), but not always:
    // `pow_.Scalar(Tensor self, Scalar exponent)` pairs with `pow.Tensor_Scalar`, while
    // `pow.Scalar` is `(Scalar self, Tensor exponent)`. So the arguments must match kind for kind,
    // and any overload of the base op that does is taken.
    auto same_arguments = [&](const Op* cand) {
      const auto& a = cand->schema().arguments;
      if (cand->schema().is_mutable() || a.size() != s.arguments.size()) return false;
      for (size_t i = 0; i < a.size(); ++i)
        if (a[i].kind != s.arguments[i].kind || a[i].name != s.arguments[i].name) return false;
      return true;
    };
    found = r.Find("aten::" + base + (s.overload.empty() ? "" : "." + s.overload));
    if (found && !same_arguments(found)) found = nullptr;
    if (!found)
      if (OpPacket* p = r.FindPacket("aten::" + base))
        for (Op* cand : p->overloads)
          if (same_arguments(cand)) { found = cand; break; }
  } else if (op.is_out_overload()) {
    std::string ov = s.overload == "out" || s.overload == "grad_input" ? "" : s.overload.substr(0, s.overload.size() - 4);
    found = r.Find("aten::" + op.base_name() + (ov.empty() ? "" : "." + ov));
    if (!found) {
      // `foo.out` may pair with any overload of foo taking the arguments before out.
      if (OpPacket* p = r.FindPacket(s.name))
        for (Op* cand : p->overloads)
          if (!cand->schema().is_mutable() && cand->schema().arguments.size() + op.mutated_args().size() ==
                                                  s.arguments.size()) {
            bool same = true;
            for (size_t i = 0; i < cand->schema().arguments.size() && same; ++i)
              same = cand->schema().arguments[i].name == s.arguments[i].name;
            if (same) { found = cand; break; }
          }
    }
    if (found && found->schema().arguments.size() + op.mutated_args().size() != s.arguments.size()) found = nullptr;
  }
  cache[&op] = found;
  return found;
}

namespace {


void UnwrapStack(Stack& stack) {
  for (IValue& v : stack) {
    if (v.is_tensor()) {
      if (IsFunctional(v.to_tensor())) v = IValue(FromFunctional(v.to_tensor()));
    } else if (v.is_tensor_list()) {
      bool any = false;
      for (const Tensor& t : v.to_tensor_list()) any = any || IsFunctional(t);
      if (!any) continue;
      std::vector<Tensor> l;
      for (const Tensor& t : v.to_tensor_list()) l.push_back(FromFunctional(t));
      v = IValue(std::move(l));
    } else if (v.is_optional_tensor_list()) {
      OptionalTensorList l = v.to_optional_tensor_list();
      for (auto& t : l) if (t && IsFunctional(*t)) t = FromFunctional(*t);
      v = IValue(std::move(l));
    }
  }
}

void WrapOutputs(Stack& stack) {
  for (IValue& v : stack) {
    if (v.is_tensor()) {
      if (v.to_tensor().defined()) v = IValue(ToFunctional(v.to_tensor()));
    } else if (v.is_tensor_list()) {
      std::vector<Tensor> l;
      for (const Tensor& t : v.to_tensor_list()) l.push_back(ToFunctional(t));
      v = IValue(std::move(l));
    }
  }
}

bool HasFunctional(const IValue& v) {
  if (v.is_tensor()) return IsFunctional(v.to_tensor());
  if (v.is_tensor_list())
    for (const Tensor& t : v.to_tensor_list()) if (IsFunctional(t)) return true;
  return false;
}

bool IsViewOp(const Op& op) {
  const FunctionSchema& s = op.schema();
  return !s.returns.empty() && !s.returns[0].alias.set.empty() && !s.returns[0].alias.is_write &&
         !s.arguments.empty() && s.arguments[0].kind == TypeKind::Tensor;
}

// Makes `result` the new value of the mutated functional tensor `target`, as an in-place op
// writing it into `target` would: cast to target's dtype, same shape.
void CommitResult(const Op& op, const Tensor& target, Tensor result) {
  FunctionalTensorImpl* f = AsFunctional(target);
  if (result->sym_sizes() != f->sym_sizes())
    throw Error(StrCat("output with shape ", SizesToString(f->sym_sizes()), " doesn't match the broadcast shape ",
                       SizesToString(result->sym_sizes())));
  if (result.dtype() != f->dtype()) {
    if (!CanCast(result.dtype(), f->dtype()))
      throw Error(StrCat("result type ", ScalarTypeDisplayName(result.dtype()), " can't be cast to the desired output "
                         "type ", ScalarTypeDisplayName(f->dtype())));
    ExcludeDispatchKeyGuard guard(DispatchKeySet(DispatchKey::Functionalize));
    result = ops::to_dtype(result, f->dtype());
  }
  (void)op;
  f->Commit(std::move(result));
}

// In-place and out= ops on functional tensors.
void FunctionalizeMutation(const Op& op, Stack& stack) {
  const std::vector<int>& mutated = op.mutated_args();
  std::vector<Tensor> targets;
  for (int i : mutated) {
    const IValue& v = stack[i];
    KILN_CHECK_NOT_IMPLEMENTED(v.is_tensor() || v.is_none(), "functionalize: ", op.name(),
                               " mutates a list of tensors, which functionalization does not support yet");
    targets.push_back(v.is_tensor() ? v.to_tensor() : Tensor());
  }
  for (const Tensor& t : targets)
    KILN_CHECK_NOT_IMPLEMENTED(!t.defined() || IsFunctional(t), "functionalize: ", op.name(),
                               " mutates both a functional and a non-functional tensor");
  const Op* functional = FunctionalVariant(op);
  UnwrapStack(stack);
  if (functional != nullptr) {
    if (op.is_out_overload()) stack.resize(stack.size() - mutated.size());  // out arguments are last
    CallBelow(*functional, stack);
    for (size_t k = 0; k < targets.size(); ++k) CommitResult(op, targets[k], OutputAt(stack, k));
  } else {
    // No functional form: the op mutates fresh clones, which become the new values.
    for (size_t k = 0; k < targets.size(); ++k) {
      if (!targets[k].defined()) continue;
      ExcludeDispatchKeyGuard guard(DispatchKeySet(DispatchKey::Functionalize));
      stack[mutated[k]] = IValue(ops::clone(stack[mutated[k]].to_tensor()));
    }
    Stack copies;
    for (int i : mutated) copies.push_back(stack[i]);
    CallBelow(op, stack);
    for (size_t k = 0; k < targets.size(); ++k)
      if (targets[k].defined()) CommitResult(op, targets[k], copies[k].to_tensor());
    // Results that alias a mutated argument are that (functional) argument; others are new.
    const FunctionSchema& s = op.schema();
    Stack out;
    for (size_t j = 0; j < stack.size(); ++j) {
      const AliasInfo* alias = j < s.returns.size() ? &s.returns[j].alias : nullptr;
      int from = -1;
      if (alias && alias->is_write)
        for (size_t k = 0; k < mutated.size(); ++k)
          if (s.arguments[mutated[k]].alias.set == alias->set) from = static_cast<int>(k);
      if (from >= 0) out.emplace_back(targets[from]);
      else {
        Stack one{stack[j]};
        WrapOutputs(one);
        out.push_back(std::move(one[0]));
      }
    }
    stack = std::move(out);
    return;
  }
  // Functional form: the op's results are its mutated arguments.
  stack.clear();
  const FunctionSchema& s = op.schema();
  for (size_t j = 0; j < s.returns.size(); ++j) stack.emplace_back(targets.at(std::min(j, targets.size() - 1)));
}

// Views of functional tensors: a functional view sharing the base's storage.
void FunctionalizeView(const Op& op, Stack& stack) {
  Tensor self = stack[0].to_tensor();
  FunctionalTensorImpl* f = AsFunctional(self);
  Stack args(stack.begin() + 1, stack.end());
  UnwrapStack(args);
  stack[0] = IValue(f->value());
  for (size_t i = 1; i < stack.size(); ++i) stack[i] = args[i - 1];
  CallBelow(op, stack);
  auto wrap = [&](const Tensor& v, int index) {
    return Tensor(std::make_shared<FunctionalTensorImpl>(v, *f, ViewMeta{&op, args, index}));
  };
  if (stack.size() == 1 && stack[0].is_tensor_list()) {
    std::vector<Tensor> l;
    int i = 0;
    for (const Tensor& t : stack[0].to_tensor_list()) l.push_back(wrap(t, i++));
    stack[0] = IValue(std::move(l));
    return;
  }
  for (size_t i = 0; i < stack.size(); ++i)
    if (stack[i].is_tensor() && stack[i].to_tensor().defined()) stack[i] = IValue(wrap(stack[i].to_tensor(), i));
}

// In-place view ops (t_, transpose_, as_strided_) on a functional tensor change its metadata, not
// its data: it becomes the out-of-place view of itself, sharing its storage, and remembers the op
// (functionalize's epilogue replays it on the real input). Committing the view's value as a data
// mutation failed: the value's shape is not self's ("output with shape [2, 3] doesn't match").
void FunctionalizeInplaceView(const Op& op, Stack& stack) {
  const Op* view = FunctionalVariant(op);
  KILN_CHECK_NOT_IMPLEMENTED(view != nullptr && IsViewOp(*view), "functionalize: ", op.name(),
                             " has no out-of-place view op to replace it");
  Tensor self = stack[0].to_tensor();
  FunctionalTensorImpl* f = AsFunctional(self);
  Stack args(stack.begin() + 1, stack.end());
  UnwrapStack(args);
  Stack call{IValue(f->value())};
  call.insert(call.end(), args.begin(), args.end());
  CallBelow(*view, call);
  f->ApplyInplaceView(*view, op, args, call[0].to_tensor());
  stack.clear();
  stack.emplace_back(self);
}

// native_batch_norm / _native_batch_norm_legit update the running statistics in place when
// training: functionally, _native_batch_norm_legit_functional returns the new statistics.
bool FunctionalizeBatchNorm(const Op& op, Stack& stack) {
  const std::string& n = op.name();
  if (n != "aten::native_batch_norm" && n != "aten::_native_batch_norm_legit") return false;
  if (!stack[5].to_bool() || !HasFunctional(stack[3]) || !HasFunctional(stack[4])) return false;
  Tensor running_mean = stack[3].to_tensor(), running_var = stack[4].to_tensor();
  UnwrapStack(stack);
  CallBelow(KILN_OP("aten::_native_batch_norm_legit_functional"), stack);
  CommitResult(op, running_mean, stack[3].to_tensor());
  CommitResult(op, running_var, stack[4].to_tensor());
  stack.resize(3);
  WrapOutputs(stack);
  return true;
}

void FunctionalizeKernel(const Op& op, DispatchKeySet, Stack& stack, void*) {
  if (FunctionalizeBatchNorm(op, stack)) return;
  if (op.has_tag(Tag::inplace_view) && HasFunctional(stack[0])) return FunctionalizeInplaceView(op, stack);
  bool mutates_functional = false;
  for (int i : op.mutated_args()) mutates_functional = mutates_functional || HasFunctional(stack[i]);
  if (mutates_functional) return FunctionalizeMutation(op, stack);
  if (IsViewOp(op) && HasFunctional(stack[0])) return FunctionalizeView(op, stack);
  // A functional op (or one mutating only non-functional tensors): results are new tensors,
  // except those returning a (non-functional) mutated argument.
  std::vector<Tensor> mutated;
  for (int i : op.mutated_args())
    if (stack[i].is_tensor()) mutated.push_back(stack[i].to_tensor());
  UnwrapStack(stack);
  CallBelow(op, stack);
  for (IValue& v : stack) {
    if (v.is_tensor()) {
      const Tensor& t = v.to_tensor();
      bool is_mutated = false;
      for (const Tensor& m : mutated) is_mutated = is_mutated || m.is_same(t);
      if (t.defined() && !is_mutated) v = IValue(ToFunctional(t));
    } else if (v.is_tensor_list()) {
      Stack one{v};
      WrapOutputs(one);
      v = std::move(one[0]);
    }
  }
}

}  // namespace

void InstallFunctionalize() {
  static std::once_flag once;
  std::call_once(once, [] {
    Registry& r = Registry::Get();
    Kernel k{&FunctionalizeKernel, nullptr};
    r.SetFallback(DispatchKey::Functionalize, k);
    // Composites PyTorch treats as one op run here as one op, below this layer.
    for (Op* op : r.ops())
      if (fx::IsRecordedComposite(*op)) op->SetKernel(DispatchKey::Functionalize, k);
  });
}

}  // namespace kiln::aot
