// autograd/derivatives.cc: the formula table, the backward node of an op call, and the
// Autograd-key kernel that records it (Note [Recording an op]).
#include "autograd/derivatives.h"

#include <algorithm>
#include <cstring>
#include <mutex>

#include "autograd/below_autograd.h"
#include "autograd/grad_mode.h"
#include "autograd/node_names.h"
#include "autograd/variable.h"
#include "autograd/view_tracking.h"
#include "runtime/error.h"
#include "tensor/ops.h"

namespace kiln::autograd {
namespace {
// The dtypes whose tensors take part in autograd: floating and complex (PyTorch's isDifferentiableType).
bool Differentiable(ScalarType t) { return IsFloating(t) || IsComplex(t); }
}  // namespace

namespace {

int ArgIndex(const FunctionSchema& schema, const char* name) {
  for (size_t i = 0; i < schema.arguments.size(); ++i)
    if (schema.arguments[i].name == name) return static_cast<int>(i);
  KILN_INTERNAL_ASSERT(false, "derivative of ", schema.full_name(), " names no argument '", name, "'");
  return -1;
}

bool IsTensorListKind(TypeKind k) { return k == TypeKind::TensorList || k == TypeKind::OptionalTensorList; }

// Whether argument i's gradient is wanted: one of its edges leads somewhere.
bool NeedsArgGrad(const OpBackward& node, int i) {
  auto [first, count] = node.arg_edges[i];
  for (uint32_t e = first; e < first + count; ++e)
    if (node.next_edges()[e].valid()) return true;
  return false;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Ctx and Grads.

const Tensor& Ctx::grad(size_t i) {
  if (grads_.size() <= i) grads_.resize(i + 1);
  if (!grads_[i].defined()) {
    const InputMeta& m = node_.input_meta().at(i);
    grads_[i] = ops::full(std::vector<SymInt>(m.sizes.begin(), m.sizes.end()), 0, m.dtype, m.device);
  }
  return grads_[i];
}

namespace {
thread_local SavedInputObserver t_saved_input_observer;
}  // namespace

SavedInputObserver SetSavedInputObserver(SavedInputObserver observer) {
  std::swap(observer, t_saved_input_observer);
  return observer;
}

Tensor Ctx::input(const char* name) const {
  int i = ArgIndex(node_.derivative().op->schema(), name);
  const SavedVariable& v = node_.saved_inputs().at(i);
  KILN_INTERNAL_ASSERT(v.defined() || node_.args()[i].is_none(), node_.name(), " reads input '", name,
                       "' it did not save");
  Tensor t = v.Unpack(nullptr);
  if (t_saved_input_observer && t.defined()) t_saved_input_observer(t, grads_);
  return t;
}

OptionalTensorList Ctx::input_list(const char* name) const {
  int i = ArgIndex(node_.derivative().op->schema(), name);
  KILN_INTERNAL_ASSERT(static_cast<size_t>(i) < node_.saved_lists().size(), node_.name(), " reads list '", name,
                       "' it did not save");
  OptionalTensorList out;
  for (const SavedVariable& v : node_.saved_lists()[i]) {
    if (v.defined()) out.push_back(v.Unpack(nullptr));
    else out.push_back(std::nullopt);
  }
  return out;
}

Tensor Ctx::result(size_t i) const {
  const SavedVariable& v = node_.saved_outputs().at(i);
  Tensor t = v.Unpack(std::const_pointer_cast<Node>(node_.shared_from_this()));
  // a saved result is watched as a saved input is: prod's formula unpacks it even where its
  // graph reads none of it (a 0-d input)
  if (t_saved_input_observer && t.defined()) t_saved_input_observer(t, grads_);
  return t;
}

const IValue& Ctx::arg(const char* name) const {
  return node_.args()[ArgIndex(node_.derivative().op->schema(), name)];
}

Scalar Ctx::scalar(const char* name) const { return arg(name).to_scalar(); }

const SymDimVector& Ctx::sizes(const char* name) const {
  auto [first, count] = node_.arg_edges[ArgIndex(node_.derivative().op->schema(), name)];
  KILN_INTERNAL_ASSERT(count == 1, node_.name(), ": '", name, "' is not a tensor input");
  return node_.arg_meta[first].sizes;
}

ScalarType Ctx::dtype(const char* name) const {
  auto [first, count] = node_.arg_edges[ArgIndex(node_.derivative().op->schema(), name)];
  KILN_INTERNAL_ASSERT(count == 1, node_.name(), ": '", name, "' is not a tensor input");
  return node_.arg_meta[first].dtype;
}

Device Ctx::device(const char* name) const {
  auto [first, count] = node_.arg_edges[ArgIndex(node_.derivative().op->schema(), name)];
  KILN_INTERNAL_ASSERT(count == 1, node_.name(), ": '", name, "' is not a tensor input");
  return node_.arg_meta[first].device;
}

const SymDimVector& Ctx::self_strides() const {
  KILN_INTERNAL_ASSERT(node_.derivative().saves_self_geometry, node_.name(), ": self.geometry not saved");
  return node_.self_strides;
}

SymInt Ctx::self_storage_offset() const {
  KILN_INTERNAL_ASSERT(node_.derivative().saves_self_geometry, node_.name(), ": self.geometry not saved");
  return node_.self_storage_offset;
}

const SymDimVector& Ctx::strides(const char* name) const {
  const int i = ArgIndex(node_.derivative().op->schema(), name);
  KILN_INTERNAL_ASSERT(static_cast<size_t>(i) < node_.arg_strides.size(), node_.name(), ": '", name,
                       ".strides' not saved");
  return node_.arg_strides[i];
}

bool Ctx::needs(const char* name) const {
  return NeedsArgGrad(node_, ArgIndex(node_.derivative().op->schema(), name));
}

size_t Ctx::list_size(const char* name) const {
  return node_.arg_edges[ArgIndex(node_.derivative().op->schema(), name)].second;
}

size_t Grads::Index(const char* name) const { return ArgIndex(schema_, name); }

// ---------------------------------------------------------------------------------------------
// OpBackward.

OpBackward::OpBackward(const Derivative* d, Stack args) : derivative_(d), args_(std::move(args)) {}

TensorList OpBackward::Apply(TensorList&& grads) {
  Ctx ctx(*this, grads);
  // PyTorch's generated nodes save their outputs unconditionally and unpack every saved value
  // first, so an output changed in place raises even where the formula would not read it (pow
  // with an integer exponent tensor, then abs_ of its result). Inputs are read on demand, as
  // PyTorch saves them only for the gradients that will be computed.
  for (size_t i = 0; i < saved_outputs_.size(); ++i)
    if (saved_outputs_[i].defined()) (void)ctx.result(i);
  const FunctionSchema& schema = derivative_->op->schema();
  Grads g(schema);
  derivative_->fn(ctx, g);
  TensorList out(next_edges_.size());
  for (size_t i = 0; i < arg_edges.size(); ++i) {
    auto [first, count] = arg_edges[i];
    if (count == 0) continue;
    if (schema.arguments[i].kind == TypeKind::TensorList) {
      const TensorList& l = g.list_at(i);
      for (uint32_t k = 0; k < count && k < l.size(); ++k) out[first + k] = l[k];
    } else {
      out[first] = g.at(i);
    }
  }
  for (size_t e = 0; e < out.size(); ++e)
    if (!next_edges_[e].valid()) out[e] = Tensor();
  return out;
}

void OpBackward::ReleaseVariables() {
  for (SavedVariable& v : saved_inputs_) if (v.defined()) v.Reset();
  for (SavedVariable& v : saved_outputs_) if (v.defined()) v.Reset();
  for (auto& list : saved_lists_)
    for (SavedVariable& v : list) if (v.defined()) v.Reset();
  released_ = true;
}

// ---------------------------------------------------------------------------------------------
// Note [Recording an op]: the Autograd-key kernel. When no input requires grad it only calls
// the layer below. Otherwise it builds the op's backward node (edges to the inputs' grad_fns,
// the inputs the formula reads saved before the call, so that an in-place op saves the value it
// overwrites), runs the op below autograd, and makes each floating-point output an output of
// the node. In-place ops rebase their input's history onto the new node; in-place ops on views
// rebase the view's base too (view_tracking.h).

bool AnyRequiresGrad(const Stack& stack) {
  for (const IValue& v : stack) {
    if (v.is_tensor()) {
      if (RequiresGrad(v.to_tensor())) return true;
    } else if (v.is_tensor_list()) {
      for (const Tensor& t : v.to_tensor_list()) if (RequiresGrad(t)) return true;
    }
  }
  return false;
}

void RunBelow(const Op& op, DispatchKeySet keys, Stack& stack) {
  ExcludeDispatchKeyGuard guard(DispatchKeySet(DispatchKey::Autograd));
  BelowAutogradGuard below;  // not no_grad: views made below are the op's own (Note [View creation])
  op.Redispatch(keys & DispatchKeySet::Below(DispatchKey::Autograd), stack);
}

namespace {

void ForEachOutput(Stack& stack, const std::function<void(const Tensor&)>& fn) {
  for (IValue& v : stack) {
    if (v.is_tensor()) fn(v.to_tensor());
    else if (v.is_tensor_list()) for (const Tensor& t : v.to_tensor_list()) fn(t);
  }
}

// `op`: the in-place op. copy_ into an integer tensor records no gradient (PyTorch's hand-written
// copy_ checks the dtype first); the generated in-place ops do not check it, so fill_ of an integer
// split piece with a value requiring grad is refused, as in PyTorch (fuzz seed 321, program 19750).
void CheckInplace(const Op& op, const Tensor& self) {
  if (self->view_creation() != ViewCreation::kDefault &&
      (Differentiable(self.dtype()) || op.base_name() != "copy_"))
    throw Error(ViewRebaseMessage(self, /*indirect=*/false));
  AutogradMeta* meta = GetMeta(self);
  if (!meta) return;
  // PyTorch's order; a view whose stale history was not yet regenerated is a leaf here (its
  // check_inplace reads the raw grad_fn field, not the regenerating accessor)
  if (meta->is_view_ && IsLeaf(meta->base_) && RequiresGrad(meta->base_))
    throw Error("a view of a leaf Variable that requires grad is being used in an in-place operation.");
  if (meta->requires_grad() && !meta->grad_fn_)
    throw Error("a leaf Variable that requires grad is being used in an in-place operation.");
}

// Note [Inference tensors] (grad_mode.cc): under inference mode every op comes here; new outputs
// (not views, not written arguments) become inference tensors. They carry the Autograd key so
// that an in-place op on one outside inference mode is caught below.
void RunInferenceMode(const Op& op, DispatchKeySet keys, Stack& stack, bool views_too = false) {
  // A factory without a device argument got only the included Autograd key: default to CPU, as
  // the dispatcher does for an empty key set.
  if ((keys & DispatchKeySet::Below(DispatchKey::Autograd)).empty()) keys = keys.add(DispatchKey::CPU);
  RunBelow(op, keys, stack);
  if (!op.mutated_args().empty() || (op.has_tag(Tag::view) && !views_too)) return;
  ForEachOutput(stack, [](const Tensor& t) {
    if (t.defined()) MarkInference(t);
  });
}

void CheckNotInference(const Op& op, const Stack& stack) {
  for (int i : op.mutated_args()) {
    const IValue& v = stack[i];
    AutogradMeta* m = v.is_tensor() && v.to_tensor().defined() ? GetMeta(v.to_tensor()) : nullptr;
    if (m && m->is_inference_)
      throw Error("Inplace update to inference tensor outside InferenceMode is not allowed.You can make a clone "
                  "to get a normal tensor before doing inplace update.See https://github.com/pytorch/rfcs/pull/17 "
                  "for more details.");
  }
}

void AutogradKernel(const Op& op, DispatchKeySet keys, Stack& stack, void*) {
  if (InferenceMode::is_enabled()) return RunInferenceMode(op, keys, stack);
  if (!op.mutated_args().empty()) CheckNotInference(op, stack);
  if (op.has_tag(Tag::view) && stack[0].is_tensor() && stack[0].to_tensor().defined()) {
    AutogradMeta* m = GetMeta(stack[0].to_tensor());
    if (m && m->is_inference_) return RunInferenceMode(op, keys, stack, /*views_too=*/true);  // a view of one is one
  }
  if (!AnyRequiresGrad(stack) || !GradMode::is_enabled()) return RunBelow(op, keys, stack);
  const auto* d = static_cast<const Derivative*>(op.autograd_info.get());
  const bool inplace = op.has_tag(Tag::inplace);
  if (!op.mutated_args().empty() && (op.is_out_overload() || (!inplace && !d)))
    throw Error(StrCat(op.base_name(), "(): functions with out=... arguments don't support automatic "
                       "differentiation, but one of the arguments requires grad."));
  if (d && d->non_differentiable) return RunBelow(op, keys, stack);
  // A copy to an integer or bool dtype has no gradient: PyTorch's _to_copy records nothing then,
  // so it reads no grad_fn of its input (a split piece whose base changed in place converts to
  // int without the error a differentiable use raises: fuzz seed 241, program 4345).
  if (&op == &KILN_OP("aten::_to_copy")) {
    const IValue& dtype = stack[ArgIndex(op.schema(), "dtype")];
    if (!dtype.is_none() && !Differentiable(dtype.to_scalar_type())) return RunBelow(op, keys, stack);
  }
  if (!d) {
    if (inplace)
      throw NotImplementedError(StrCat("the derivative for '", op.name(), "' is not implemented."));
    RunBelow(op, keys, stack);
    ForEachOutput(stack, [&](const Tensor& t) {
      if (t.defined() && Differentiable(t.dtype()))
        throw NotImplementedError(StrCat("the derivative for '", op.name(), "' is not implemented."));
    });
    return;
  }

  const FunctionSchema& schema = op.schema();
  for (int i : d->not_differentiable_args)
    if (stack[i].is_tensor() && RequiresGrad(stack[i].to_tensor()))
      throw Error(StrCat("The function '", op.base_name(), "' is not differentiable with respect to argument '",
                         schema.arguments[i].name, "'. This input cannot have requires_grad True."));
  Tensor self = inplace ? stack[0].to_tensor() : Tensor();
  if (inplace) CheckInplace(op, self);
  // An inplace_view op (t_, transpose_, as_strided_) on a view changes which elements of its base
  // it is, not any data: it records no node of its own (a CopySlices would assume the view kept
  // its geometry). Its version bump makes the view's grad_fn be rebuilt from the base with the
  // new geometry on next use (RefreshViewGradFn in variable.cc), which is that view's history.
  if (inplace && op.has_tag(Tag::inplace_view) && GetMeta(self) && GetMeta(self)->is_view_) return RunBelow(op, keys, stack);

  // The node: argument copies without tensors, an edge and metadata per tensor input.
  Stack args;
  args.reserve(stack.size());
  for (const IValue& v : stack) args.push_back(v.is_tensor() || v.is_tensor_list() ? IValue() : v);
  auto node = std::make_shared<OpBackward>(d, std::move(args));
  node->arg_edges.resize(stack.size());
  auto add_edge = [&](const Tensor& t) {
    node->add_next_edge(t.defined() ? GradientEdge(t) : Edge{});
    node->arg_meta.push_back(t.defined() ? InputMeta::Of(t) : InputMeta{});
  };
  for (size_t i = 0; i < stack.size(); ++i) {
    const IValue& v = stack[i];
    uint32_t first = static_cast<uint32_t>(node->next_edges().size());
    if (v.is_tensor()) {
      add_edge(v.to_tensor());
    } else if (v.is_tensor_list()) {
      for (const Tensor& t : v.to_tensor_list()) add_edge(t);
    } else if (i < schema.arguments.size() && schema.arguments[i].kind == TypeKind::Tensor) {
      add_edge(Tensor());  // Tensor? given None
    }
    node->arg_edges[i] = {first, static_cast<uint32_t>(node->next_edges().size()) - first};
  }
  if (d->saves_self_geometry) {
    const Tensor& t = stack[0].to_tensor();
    node->self_strides = t->sym_strides();
    node->self_storage_offset = t->sym_storage_offset();
  }
  if (!d->saved_strides.empty()) {
    node->arg_strides.resize(stack.size());
    for (int i : d->saved_strides) {
      const IValue& v = stack[i];
      if (v.is_tensor() && v.to_tensor().defined()) node->arg_strides[i] = v.to_tensor()->sym_strides();
    }
  }
  node->saved_inputs().resize(stack.size());
  // Arguments the op writes besides self (batch norm's running statistics) are saved after the
  // call, at their new version; everything else before it.
  std::vector<std::pair<int, Tensor>> save_after;
  for (size_t k = 0; k < d->saved_inputs.size(); ++k) {
    const int i = d->saved_inputs[k];
    const IValue& v = stack[i];
    if (!v.is_tensor() || !v.to_tensor().defined()) continue;
    if (const int reader = d->saved_input_for[k]; reader >= 0 && !NeedsArgGrad(*node, reader)) continue;
    Tensor t = v.to_tensor();
    if (inplace && i == 0) {  // the value the op overwrites
      // Cloned with autograd on: the copy keeps self's history, so double backward through the
      // in-place op sees how the overwritten value depended on the inputs (it was lost before).
      t = ops::clone(t);
    } else if (std::find(op.mutated_args().begin(), op.mutated_args().end(), i) != op.mutated_args().end()) {
      save_after.emplace_back(i, t);
      continue;
    }
    node->saved_inputs()[i] = SavedVariable(t, /*is_output=*/false);
  }

  // Ops returning a list of views of their input (split, chunk: "-> Tensor(a)[]") carry no view
  // tag; without this their outputs were not views, and an in-place op on one silently gave a
  // wrong gradient for the input.
  const bool multi_view_op = schema.returns.size() == 1 && schema.returns[0].kind == TypeKind::TensorList &&
                             !schema.returns[0].alias.set.empty();
  // Composite views (t, view_as, ...) with a formula of their own say so only in their schema.
  const bool alias_return = schema.returns.size() == 1 && schema.returns[0].kind == TypeKind::Tensor &&
                            !schema.returns[0].alias.set.empty() && !schema.returns[0].alias.is_write;
  const bool is_view_op = op.has_tag(Tag::view) || multi_view_op || alias_return;
  const Tensor view_source = is_view_op && stack[0].is_tensor() ? stack[0].to_tensor() : Tensor();

  // saved lists (index's indices), element by element, before the call as inputs are
  if (!d->saved_lists.empty()) node->saved_lists().resize(stack.size());
  for (int i : d->saved_lists) {
    const IValue& v = stack[i];
    if (v.is_none()) continue;
    std::vector<SavedVariable>& list = node->saved_lists()[i];
    for (const std::optional<Tensor>& t : v.to_optional_tensor_list())
      list.push_back(t && t->defined() ? SavedVariable(*t, /*is_output=*/false) : SavedVariable());
  }

  RunBelow(op, keys, stack);
  for (auto& [i, t] : save_after) node->saved_inputs()[i] = SavedVariable(t, /*is_output=*/false);

  // Outputs become the node's inputs; floating-point ones get it as their grad_fn.
  std::vector<Tensor> outputs;
  ForEachOutput(stack, [&](const Tensor& t) {
    outputs.push_back(t);
    if (t.defined()) node->add_input_meta(t);
    else node->mutable_input_meta().push_back(InputMeta{});
  });
  if (inplace) {
    // An integer tensor written from one that requires grad does not require grad (torch).
    if (Differentiable(self.dtype())) RebaseHistory(self, node);
  } else {
    for (uint32_t i = 0; i < outputs.size(); ++i) {
      const Tensor& t = outputs[i];
      if (!t.defined() || !Differentiable(t.dtype())) continue;
      const auto& fixed = d->not_differentiable_outputs;
      if (std::find(fixed.begin(), fixed.end(), static_cast<int>(i)) != fixed.end()) continue;
      SetHistory(t, node, i);
      if (view_source.defined()) MarkView(t, view_source);
    }
  }
  node->saved_outputs().resize(outputs.size());
  for (int i : d->saved_outputs)
    if (i < static_cast<int>(outputs.size())) node->saved_outputs()[i] = SavedVariable(outputs[i], /*is_output=*/true);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The table.

void DerivativeTable::Def(const std::string& op_name, std::initializer_list<const char*> saves, FormulaFn fn) {
  Op* op = registry_.Find("aten::" + op_name);
  KILN_INTERNAL_ASSERT(op != nullptr, "derivative declared for unknown op aten::", op_name);
  auto d = std::make_shared<Derivative>();
  d->op = op;
  d->fn = fn;
  d->node_name = BackwardNodeName(*op);
  for (const char* spec : saves) {
    std::string s = spec;
    int reader = -1;  // "self for mat2"
    if (size_t at = s.find(" for "); at != std::string::npos) {
      reader = ArgIndex(op->schema(), s.substr(at + 5).c_str());
      s.resize(at);
    }
    const size_t dot = s.find(".strides");
    KILN_INTERNAL_ASSERT(reader < 0 || (dot == std::string::npos && s.compare(0, 6, "result") != 0), op_name,
                         ": only an input is saved for another's gradient ('", spec, "')");
    if (s == "self.geometry") {
      d->saves_self_geometry = true;
    } else if (dot != std::string::npos && dot + 8 == s.size()) {
      d->saved_strides.push_back(ArgIndex(op->schema(), s.substr(0, dot).c_str()));
    } else if (s.compare(0, 6, "result") == 0) {
      d->saved_outputs.push_back(s.size() > 6 ? std::atoi(s.c_str() + 6) : 0);
    } else if (int i = ArgIndex(op->schema(), s.c_str()); IsTensorListKind(op->schema().arguments[i].kind)) {
      KILN_INTERNAL_ASSERT(reader < 0, op_name, ": a saved list is read for every gradient ('", spec, "')");
      d->saved_lists.push_back(i);
    } else {
      d->saved_inputs.push_back(i);
      d->saved_input_for.push_back(reader);
    }
  }
  Attach(op, d);
  // The in-place variant (same overload, name + "_") reads the same formula.
  Op* inplace = registry_.Find("aten::" + op->base_name() + "_" +
                               (op->schema().overload.empty() ? "" : "." + op->schema().overload));
  if (inplace && !inplace->autograd_info) {
    auto di = std::make_shared<Derivative>(*d);
    di->op = inplace;
    di->node_name = BackwardNodeName(*inplace, op);
    Attach(inplace, di);
  }
}

void DerivativeTable::NonDifferentiable(std::initializer_list<const char*> op_names) {
  for (const char* name : op_names) {
    Op* op = registry_.Find(std::string("aten::") + name);
    KILN_INTERNAL_ASSERT(op != nullptr, "unknown op aten::", name);
    auto d = std::make_shared<Derivative>();
    d->op = op;
    d->non_differentiable = true;
    d->node_name = BackwardNodeName(*op);
    Attach(op, d);
  }
}

void DerivativeTable::InplaceOf(const std::string& inplace_name, const std::string& functional_name) {
  Op* inplace = registry_.Find("aten::" + inplace_name);
  Op* functional = registry_.Find("aten::" + functional_name);
  KILN_INTERNAL_ASSERT(inplace && functional && functional->autograd_info, "InplaceOf(", inplace_name, ", ",
                       functional_name, ")");
  auto d = std::make_shared<Derivative>(*static_cast<const Derivative*>(functional->autograd_info.get()));
  d->op = inplace;
  d->node_name = BackwardNodeName(*inplace, functional);
  Attach(inplace, d);
}

void DerivativeTable::NotDifferentiableIn(const std::string& op_name, std::initializer_list<const char*> args) {
  Op* op = registry_.Find("aten::" + op_name);
  KILN_INTERNAL_ASSERT(op && op->autograd_info, "no derivative declared for aten::", op_name);
  auto* d = static_cast<Derivative*>(op->autograd_info.get());
  for (const char* a : args) d->not_differentiable_args.push_back(ArgIndex(op->schema(), a));
}

void DerivativeTable::NotDifferentiableOutputs(const std::string& op_name, std::initializer_list<int> outputs) {
  Op* op = registry_.Find("aten::" + op_name);
  KILN_INTERNAL_ASSERT(op && op->autograd_info, "no derivative declared for aten::", op_name);
  auto* d = static_cast<Derivative*>(op->autograd_info.get());
  d->not_differentiable_outputs.insert(d->not_differentiable_outputs.end(), outputs);
}

void DerivativeTable::Attach(Op* op, std::shared_ptr<Derivative> d) {
  op->autograd_info = std::move(d);
  // A composite kernel fills every key without one, the Autograd key included, so a formula
  // declared for a composite op (clone, _to_copy, stack, t, ...) was never used: its parts were
  // differentiated instead. Registering the autograd kernel for the key makes the formula win.
  if (op->HasComposite()) op->SetKernel(DispatchKey::Autograd, Kernel{&AutogradKernel, nullptr});
}

void InstallAutograd() {
  static std::once_flag once;
  std::call_once(once, [] {
    Registry& r = Registry::Get();
    DerivativeTable table(r);
    DefinePointwiseFormulas(table);
    DefineReductionFormulas(table);
    DefineViewFormulas(table);
    DefineLinalgFormulas(table);
    DefineLapackFormulas(table);
    DefineNNFormulas(table);
    DefineIndexFormulas(table);
    DefineBackwardOpFormulas(table);
    DefineSpectralFormulas(table);
    r.SetFallback(DispatchKey::Autograd, Kernel{&AutogradKernel, nullptr});
  });
}

}  // namespace kiln::autograd
