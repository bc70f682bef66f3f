// autograd/variable.h: autograd's per-tensor state (AutogradMeta) and the functions that read
// and change it: requires_grad, .grad, grad_fn, leaves, views, hooks.
//
// A tensor takes part in autograd when it has an AutogradMeta. Leaves (made by the user) have
// requires_grad set and no grad_fn; outputs of recorded ops have a grad_fn and `output_nr`, the
// index of the output they are. Every tensor that requires grad carries the Autograd dispatch
// key, so ops on tensors that do not pay nothing for autograd.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "autograd/node.h"

namespace kiln::autograd {

struct AutogradMeta : public AutogradMetaInterface {
  bool requires_grad_ = false;          // leaves only; non-leaves require grad through grad_fn
  Tensor grad_;
  std::shared_ptr<Node> grad_fn_;
  std::weak_ptr<Node> grad_accumulator_;  // leaves: the AccumulateGrad shared by all uses
  uint32_t output_nr_ = 0;
  bool retains_grad_ = false;
  // Views recorded under autograd: the tensor whose storage this one views (never a view itself).
  Tensor base_;
  bool is_view_ = false;
  // The version when grad_fn_ was set: a view whose version moved on (an in-place op on its base
  // or another view) gets a fresh grad_fn on next use (RefreshViewGradFn in variable.cc).
  uint32_t attr_version_ = 0;
  // Leaf hooks (run before accumulation), with ids for removal.
  std::vector<std::pair<int, GradHook>> leaf_hooks_;
  // Hooks run with the leaf once its `.grad` took a gradient (register_post_accumulate_grad_hook).
  std::vector<std::pair<int, std::function<void(const Tensor&)>>> post_accumulate_hooks_;
  bool is_inference_ = false;

  // A view requires grad when its base does (PyTorch's DifferentiableViewMeta), also before its
  // stale history is regenerated (RefreshViewGradFn).
  bool requires_grad() const override {
    return requires_grad_ || grad_fn_ != nullptr || (is_view_ && base_.defined() && base_->requires_grad());
  }
};

AutogradMeta* GetMeta(const Tensor& t);           // null when the tensor has none
AutogradMeta& MaterializeMeta(const Tensor& t);   // creates it on first use
// Makes t an inference tensor (Note [Inference tensors] in grad_mode.cc): marked, and given the
// Autograd key so that an in-place op on it outside inference mode is caught.
void MarkInference(const Tensor& t);

inline bool RequiresGrad(const Tensor& t) { return t.defined() && t->requires_grad(); }
// Sets requires_grad on a leaf; errors as PyTorch for non-leaves and non-float dtypes.
void SetRequiresGrad(const Tensor& t, bool requires_grad);
bool IsLeaf(const Tensor& t);
std::shared_ptr<Node> GradFn(const Tensor& t);
Tensor Grad(const Tensor& t);
void SetGrad(const Tensor& t, const Tensor& grad);  // checks sizes/dtype like PyTorch's setter

// Where gradients for `t` go: its grad_fn's output slot, or its leaf's AccumulateGrad.
Edge GradientEdge(const Tensor& t);
// Makes `t` output `output_nr` of `fn` (and gives it the Autograd key).
void SetHistory(const Tensor& t, const std::shared_ptr<Node>& fn, uint32_t output_nr);

// A new tensor sharing t's storage, layout and version counter, without autograd state.
Tensor ShallowAlias(const Tensor& t);
// detach(): a view of the same data that does not require grad.
Tensor Detach(const Tensor& t);

// Tensor hooks and retain_grad.
int RegisterHook(const Tensor& t, GradHook hook);
void RemoveHook(const Tensor& t, int id);
// hook(t) after each accumulation into a leaf's `.grad` (PyTorch's post-accumulate-grad hooks,
// which an optimizer step inside backward uses); errors as PyTorch for non-leaves.
int RegisterPostAccumulateGradHook(const Tensor& t, std::function<void(const Tensor&)> hook);
void RemovePostAccumulateGradHook(const Tensor& t, int id);
void RetainGrad(const Tensor& t);

}  // namespace kiln::autograd
