// autograd/node.cc: nodes, hooks, and the leaf accumulator.
#include "autograd/node.h"

#include <atomic>

#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "runtime/error.h"
#include "tensor/ops.h"

namespace kiln::autograd {
namespace {
std::atomic<int> next_hook_id{1};
}  // namespace

uint64_t NextSequenceNr() {
  thread_local uint64_t next = 0;
  return next++;
}

Node::Node() : sequence_nr_(NextSequenceNr()) {}

// Note [Freeing long graphs]: a node owns its edges' nodes, so dropping the last output of a
// 100,000-op chain would destroy 100,000 nodes recursively and overflow the C++ stack. Instead
// each destructor hands its edges to a thread-local queue, and only the outermost one drains it.
Node::~Node() {
  thread_local std::vector<std::shared_ptr<Node>> pending;
  thread_local bool draining = false;
  for (Edge& e : next_edges_)
    if (e.fn) pending.push_back(std::move(e.fn));
  if (draining) return;
  draining = true;
  while (!pending.empty()) {
    std::shared_ptr<Node> n = std::move(pending.back());
    pending.pop_back();
    n.reset();  // may push n's edges
  }
  draining = false;
}

int Node::AddPreHook(uint32_t input_nr, GradHook hook) {
  int id = next_hook_id++;
  pre_hooks_.push_back({id, input_nr, std::move(hook)});
  return id;
}

bool Node::RemovePreHook(int id) {
  for (auto it = pre_hooks_.begin(); it != pre_hooks_.end(); ++it)
    if (it->id == id) { pre_hooks_.erase(it); return true; }
  return false;
}

Tensor Node::RunPreHooks(uint32_t input_nr, Tensor grad) const {
  for (const PreHook& h : pre_hooks_) {
    if (h.input_nr != input_nr) continue;
    Tensor replaced = h.fn(grad);
    if (replaced.defined()) grad = std::move(replaced);
  }
  auto it = retains_grad_hooks_.find(input_nr);
  if (it != retains_grad_hooks_.end()) it->second(grad);
  return grad;
}

int Node::AddPostHook(PostHook hook) {
  int id = next_hook_id++;
  post_hooks_.emplace_back(id, std::move(hook));
  return id;
}

bool Node::RemovePostHook(int id) {
  for (auto it = post_hooks_.begin(); it != post_hooks_.end(); ++it)
    if (it->first == id) { post_hooks_.erase(it); return true; }
  return false;
}

void Node::RunPostHooks(TensorList& grad_inputs, const TensorList& grad_outputs) const {
  for (const auto& [id, fn] : post_hooks_) fn(grad_inputs, grad_outputs);
}

AccumulateGrad::AccumulateGrad(Tensor variable) : variable_(std::move(variable)) {
  add_input_meta(variable_);
}

// Note [Stealing gradients]: when nothing else holds the incoming gradient (a fresh tensor made
// by the backward pass), it becomes `.grad` without a copy; otherwise it is cloned, so that
// `.grad` never aliases a user's tensor or another leaf's gradient.
// Note [Gradient layout contract]: as PyTorch's AccumulateGrad, a leaf's .grad has the leaf's
// strides when the leaf is dense and free of overlap (a transposed parameter gets a transposed
// gradient), else it is contiguous; an incoming gradient in that layout is kept (stolen when
// nothing else holds it), any other is copied into it.
static bool DenseWithoutOverlap(const Tensor& t) {
  bool dense = false;
  return !MayOverlapItself(t->sym_sizes(), t->sym_strides(), &dense) && dense;
}

static bool ObeysLayoutContract(const Tensor& grad, const Tensor& variable) {
  if (!DenseWithoutOverlap(variable)) return grad->is_contiguous();
  const SymDimVector &sizes = grad->sym_sizes(), &gs = grad->sym_strides(), &vs = variable->sym_strides();
  if (sizes != variable->sym_sizes()) return false;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] != 1 && gs[d] != vs[d]) return false;
    // a size-1 dim's stride is free, but a 0 there marks a view (cat's pieces), as in PyTorch
    if (sizes[d] == 1 && sizes.size() > 1 && gs[d] == 0) return false;
  }
  return DenseWithoutOverlap(grad);
}

static Tensor CloneObeyingContract(const Tensor& grad, const Tensor& variable) {
  if (!DenseWithoutOverlap(variable)) return ops::clone(grad, MemoryFormat::Contiguous);
  // empty_like keeps a dense variable's strides; dispatched, so a fake variable gets a fake .grad
  Tensor out = CallOp<Tensor>(KILN_OP("aten::empty_like"), variable, std::optional<ScalarType>(grad.dtype()),
                              std::optional<Layout>(), std::optional<Device>(grad.device()), std::optional<bool>(),
                              std::optional<MemoryFormat>());
  ops::copy_(out, grad);
  return out;
}

// A view the backward made of a tensor only that view still holds (Linear's weight gradient:
// TBackward0's t() of the transposed product mm_mat2_backward returns) shares its storage with
// nothing a user can reach: PyTorch's AccumulateGrad steals it too (it counts references to the
// gradient, not to its storage). It was copied, 30 us per MB a step.
static bool IsSoleViewOfUnheldRoot(const Tensor& g) {
  const std::shared_ptr<TensorImpl>& root = g->view_root();
  return root != nullptr && root.use_count() == 1 && !root->requires_grad() && g->storage().use_count() == 2;
}

static bool CanSteal(const Tensor& g, const Tensor& variable) {
  return ObeysLayoutContract(g, variable) && g.impl_ptr().use_count() == 1 && !RequiresGrad(g) &&
         (g->storage().use_count() == 1 || IsSoleViewOfUnheldRoot(g));
}

Tensor AccumulateGrad::RunLeafHooks(Tensor grad) const {
  AutogradMeta* meta = GetMeta(variable_);
  if (!meta || !grad.defined()) return grad;
  for (const auto& [id, hook] : meta->leaf_hooks_) {
    Tensor replaced = hook(grad);
    if (replaced.defined()) grad = std::move(replaced);
  }
  return grad;
}

TensorList AccumulateGrad::Apply(TensorList&& grads) {
  Tensor incoming = RunLeafHooks(std::move(grads[0]));
  if (!incoming.defined()) return {};
  AutogradMeta& meta = MaterializeMeta(variable_);
  const bool create_graph = GradMode::is_enabled();
  if (!meta.grad_.defined()) {
    if (create_graph) meta.grad_ = incoming;
    // stolen (a view as an alias of its storage that is no view: its root is then freed)
    else if (CanSteal(incoming, variable_)) meta.grad_ = incoming->view_root() ? ShallowAlias(incoming) : std::move(incoming);
    else meta.grad_ = CloneObeyingContract(Detach(incoming), variable_);
  } else if (create_graph || RequiresGrad(meta.grad_)) {
    meta.grad_ = ops::add(meta.grad_, incoming);  // keeps the graph of a double-backward grad
  } else {
    ops::add_(meta.grad_, incoming);
  }
  // a copy: a hook may register or remove hooks
  const auto hooks = meta.post_accumulate_hooks_;
  for (const auto& [id, hook] : hooks) hook(variable_);
  return {};
}

GraphRoot::GraphRoot(std::vector<Edge> roots, TensorList grads) : grads_(std::move(grads)) {
  next_edges_ = std::move(roots);
}

TensorList NotImplementedNode::Apply(TensorList&&) {
  throw NotImplementedError(StrCat("the derivative for '", op_, "' is not implemented."));
}

}  // namespace kiln::autograd
