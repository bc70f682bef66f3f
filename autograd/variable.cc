// autograd/variable.cc: reading and changing a tensor's autograd state.
#include "autograd/variable.h"

#include "autograd/anomaly_mode.h"
#include "autograd/grad_mode.h"
#include "autograd/view_tracking.h"

#include <atomic>

#include "runtime/error.h"
#include "tensor/dispatcher.h"
#include "tensor/empty.h"

namespace kiln::autograd {
namespace {
std::atomic<int> next_leaf_hook_id{1 << 30};  // disjoint from node hook ids
}  // namespace

AutogradMeta* GetMeta(const Tensor& t) { return static_cast<AutogradMeta*>(t->autograd_meta()); }

AutogradMeta& MaterializeMeta(const Tensor& t) {
  if (!t->autograd_meta()) t->set_autograd_meta(std::make_unique<AutogradMeta>());
  return *GetMeta(t);
}

void MarkInference(const Tensor& t) {
  MaterializeMeta(t).is_inference_ = true;
  t->set_keys(t->keys().add(DispatchKey::Autograd));
}

static void UpdateKey(const Tensor& t) {
  DispatchKeySet keys = t->keys();
  t->set_keys(t->requires_grad() ? keys.add(DispatchKey::Autograd) : keys.remove(DispatchKey::Autograd));
}

void SetRequiresGrad(const Tensor& t, bool requires_grad) {
  AutogradMeta* meta = GetMeta(t);
  if (meta && meta->grad_fn_) {
    if (!requires_grad)
      throw Error(
          "you can only change requires_grad flags of leaf variables. If you want to use a computed "
          "variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach().");
    return;
  }
  if (requires_grad && meta && meta->is_inference_ && !InferenceMode::is_enabled())
    throw Error("Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.");
  if (requires_grad && !IsFloating(t.dtype()) && !IsComplex(t.dtype()))
    throw Error("only Tensors of floating point and complex dtype can require gradients");
  if (!meta && !requires_grad) return;
  MaterializeMeta(t).requires_grad_ = requires_grad;
  UpdateKey(t);
}

// A view's grad_fn describes the view op applied to its base's history when the view was made.
// After an in-place op on the base (or on another view of it) that history is stale: as PyTorch
// does, the view's grad_fn is regenerated as a strided view of the base's current history. A view
// marked at creation (split's outputs, views made under no_grad) cannot be: its use is an error
// (Note [View creation] in tensor/empty.cc).
static void RefreshViewGradFn(const Tensor& t, AutogradMeta* meta) {
  if (!meta || !meta->is_view_ || t->version() == meta->attr_version_) return;
  if (!meta->grad_fn_ && !RequiresGrad(meta->base_)) return;
  if (t->view_creation() != ViewCreation::kDefault) throw Error(ViewRebaseMessage(t, /*indirect=*/true));
  if (!RequiresGrad(meta->base_)) return;
  meta->grad_fn_ = MakeViewOfBaseFn(meta->base_, t);
  meta->output_nr_ = 0;
  meta->attr_version_ = t->version();
}

bool IsLeaf(const Tensor& t) {
  AutogradMeta* meta = GetMeta(t);
  return !meta || !meta->grad_fn_;
}

std::shared_ptr<Node> GradFn(const Tensor& t) {
  AutogradMeta* meta = GetMeta(t);
  RefreshViewGradFn(t, meta);
  return meta ? meta->grad_fn_ : nullptr;
}

Tensor Grad(const Tensor& t) {
  AutogradMeta* meta = GetMeta(t);
  return meta ? meta->grad_ : Tensor();
}

void SetGrad(const Tensor& t, const Tensor& grad) {
  if (grad.defined()) {
    // PyTorch checks (and words) size before dtype.
    if (grad->sym_sizes() != t->sym_sizes())
      throw Error(StrCat("attempting to assign a gradient of size '", SizesToString(grad->sym_sizes()),
                         "' to a tensor of size '", SizesToString(t->sym_sizes()),
                         "'. Please ensure that the gradient and the tensor are the same size"));
    if (grad.dtype() != t.dtype())
      throw Error(StrCat("attempting to assign a gradient with dtype '", ScalarTypeName(grad.dtype()),
                         "' to a tensor with grad_dtype '", ScalarTypeName(t.dtype()),
                         "'. The gradient must match the tensor's grad_dtype (defaults to the tensor's dtype)."));
    if (grad.device() != t.device())
      throw Error(StrCat("assigned grad has data located on a different device"));
  }
  if (!grad.defined() && !GetMeta(t)) return;
  MaterializeMeta(t).grad_ = grad;
}

Edge GradientEdge(const Tensor& t) {
  AutogradMeta* meta = GetMeta(t);
  if (!meta) return {};
  RefreshViewGradFn(t, meta);
  if (meta->grad_fn_) return {meta->grad_fn_, meta->output_nr_};
  if (!meta->requires_grad_) return {};
  std::shared_ptr<Node> acc = meta->grad_accumulator_.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t);
    meta->grad_accumulator_ = acc;
  }
  return {acc, 0};
}

void SetHistory(const Tensor& t, const std::shared_ptr<Node>& fn, uint32_t output_nr) {
  if (fn && AnomalyMode::is_enabled()) CaptureForwardStack(*fn);
  AutogradMeta& meta = MaterializeMeta(t);
  meta.grad_fn_ = fn;
  meta.output_nr_ = output_nr;
  meta.attr_version_ = t->version();
  meta.requires_grad_ = false;
  t->set_keys(t->keys().add(DispatchKey::Autograd));
}

Tensor ShallowAlias(const Tensor& t) {
  auto impl = std::make_shared<TensorImpl>(t->storage(), t.dtype(), t.device(),
                                           t->keys().remove(DispatchKey::Autograd));
  impl->set_sizes_and_strides(t->sym_sizes(), t->sym_strides(), t->sym_storage_offset());
  impl->share_version_counter(t->version_counter());
  impl->set_wrapped_number(t->is_wrapped_number());
  return Tensor(std::move(impl));
}

Tensor Detach(const Tensor& t) { return ShallowAlias(t); }

int RegisterHook(const Tensor& t, GradHook hook) {
  if (!RequiresGrad(t))
    throw Error("cannot register a hook on a tensor that doesn't require gradient");
  AutogradMeta& meta = MaterializeMeta(t);
  RefreshViewGradFn(t, &meta);
  if (meta.grad_fn_) return meta.grad_fn_->AddPreHook(meta.output_nr_, std::move(hook));
  int id = next_leaf_hook_id++;
  meta.leaf_hooks_.emplace_back(id, std::move(hook));
  return id;
}

void RemoveHook(const Tensor& t, int id) {
  AutogradMeta* meta = GetMeta(t);
  if (!meta) return;
  if (meta->grad_fn_ && meta->grad_fn_->RemovePreHook(id)) return;
  for (auto it = meta->leaf_hooks_.begin(); it != meta->leaf_hooks_.end(); ++it)
    if (it->first == id) { meta->leaf_hooks_.erase(it); return; }
}

int RegisterPostAccumulateGradHook(const Tensor& t, std::function<void(const Tensor&)> hook) {
  if (!RequiresGrad(t)) throw Error("cannot register a hook on a tensor that doesn't require gradient");
  if (!IsLeaf(t)) throw Error("post accumulate grad hooks cannot be registered on non-leaf tensors");
  int id = next_leaf_hook_id++;
  MaterializeMeta(t).post_accumulate_hooks_.emplace_back(id, std::move(hook));
  return id;
}

void RemovePostAccumulateGradHook(const Tensor& t, int id) {
  AutogradMeta* meta = GetMeta(t);
  if (!meta) return;
  auto& hooks = meta->post_accumulate_hooks_;
  for (auto it = hooks.begin(); it != hooks.end(); ++it)
    if (it->first == id) { hooks.erase(it); return; }
}

void RetainGrad(const Tensor& t) {
  if (!RequiresGrad(t)) throw Error("can't retain_grad on Tensor that has requires_grad=False");
  AutogradMeta& meta = MaterializeMeta(t);
  RefreshViewGradFn(t, &meta);
  if (!meta.grad_fn_ || meta.retains_grad_) return;  // leaves always keep .grad
  meta.retains_grad_ = true;
  // The hook holds the tensor weakly: a tensor must not keep itself alive through its grad_fn.
  std::weak_ptr<TensorImpl> weak = t.impl_ptr();
  meta.grad_fn_->SetRetainsGradHook(meta.output_nr_, [weak](const Tensor& grad) -> Tensor {
    std::shared_ptr<TensorImpl> impl = weak.lock();
    if (!impl || !grad.defined()) return Tensor();
    Tensor self(impl);
    AutogradMeta& m = MaterializeMeta(self);
    // Under create_graph (grad mode on in backward) the retained grad keeps its graph, as in torch.
    const Tensor g = GradMode::is_enabled() ? grad : Detach(grad);
    if (!m.grad_.defined()) m.grad_ = CallOp<Tensor>(KILN_OP("aten::clone"), g, std::optional<MemoryFormat>());
    else m.grad_ = CallOp<Tensor>(KILN_OP("aten::add.Tensor"), m.grad_, g, Scalar(1));
    return Tensor();
  });
}

}  // namespace kiln::autograd
