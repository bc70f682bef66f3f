// autograd/node.h: the backward graph. A Node is one recorded op's backward function; its
// edges point at the nodes that produced its forward inputs.
//
// Forward:  y = mul(a, b)        Backward graph:  MulBackward0 --edge 0--> a's grad_fn (or AccumulateGrad)
//                                                              \--edge 1--> b's grad_fn
// Node::Apply takes one gradient per forward output and returns one per edge (undefined where an
// input needs none). Leaves that require grad end in an AccumulateGrad node, which adds into
// `.grad`. Nodes are owned by shared_ptrs: a tensor owns its grad_fn, a node owns its edges'
// targets, so the graph lives exactly as long as some output that can reach it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor_impl.h"

namespace kiln::autograd {

class Node;
using TensorList = std::vector<Tensor>;

// Where a gradient goes: input `input_nr` of `fn`. A null fn means "no gradient needed".
struct Edge {
  std::shared_ptr<Node> fn;
  uint32_t input_nr = 0;
  bool valid() const { return fn != nullptr; }
};

// What a gradient flowing into a node's input must look like (the forward tensor's metadata).
struct InputMeta {
  SymDimVector sizes;
  ScalarType dtype = ScalarType::Float32;
  Device device;
  static InputMeta Of(const Tensor& t) { return {t->sym_sizes(), t.dtype(), t.device()}; }
};

// A hook on a node's incoming gradient (tensor hooks, retain_grad): returns a replacement or an
// undefined tensor to keep the gradient.
using GradHook = std::function<Tensor(const Tensor&)>;

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  virtual ~Node();  // frees long chains without recursion (Note [Freeing long graphs])
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Gradients of the forward outputs in, gradients for the edges out.
  virtual TensorList Apply(TensorList&& grads) = 0;
  virtual std::string name() const = 0;
  // Frees saved tensors after a backward pass without retain_graph.
  virtual void ReleaseVariables() {}

  const std::vector<Edge>& next_edges() const { return next_edges_; }
  std::vector<Edge>& mutable_next_edges() { return next_edges_; }
  void add_next_edge(Edge e) { next_edges_.push_back(std::move(e)); }
  // Metadata of this node's inputs (the forward op's outputs), for zero-filling and checking.
  const std::vector<InputMeta>& input_meta() const { return input_meta_; }
  uint32_t add_input_meta(const Tensor& t) {
    input_meta_.push_back(InputMeta::Of(t));
    return static_cast<uint32_t>(input_meta_.size() - 1);
  }
  std::vector<InputMeta>& mutable_input_meta() { return input_meta_; }
  uint64_t sequence_nr() const { return sequence_nr_; }

  // Hooks on the gradient arriving at input `i` (tensor.register_hook on a non-leaf output).
  int AddPreHook(uint32_t input_nr, GradHook hook);
  bool RemovePreHook(int id);
  void SetRetainsGradHook(uint32_t input_nr, GradHook hook) { retains_grad_hooks_[input_nr] = std::move(hook); }
  void ClearRetainsGradHook(uint32_t input_nr) { retains_grad_hooks_.erase(input_nr); }
  // Runs the pre-hooks, then the retain_grad hooks, on one input's gradient.
  Tensor RunPreHooks(uint32_t input_nr, Tensor grad) const;
  bool has_pre_hooks() const { return !pre_hooks_.empty() || !retains_grad_hooks_.empty(); }

  // Hooks run after Apply with (grad_inputs, grad_outputs) (Node.register_hook in Python); a hook
  // may replace entries of grad_inputs, as a PyTorch hook's return value does.
  using PostHook = std::function<void(TensorList& grad_inputs, const TensorList& grad_outputs)>;
  int AddPostHook(PostHook hook);
  bool RemovePostHook(int id);
  void RunPostHooks(TensorList& grad_inputs, const TensorList& grad_outputs) const;
  bool has_post_hooks() const { return !post_hooks_.empty(); }

  // Python-side attributes (`grad_fn.metadata`); owned by python/.
  std::shared_ptr<void> py_metadata;

 protected:
  std::vector<Edge> next_edges_;
  std::vector<InputMeta> input_meta_;

 private:
  uint64_t sequence_nr_;
  struct PreHook { int id; uint32_t input_nr; GradHook fn; };
  std::vector<PreHook> pre_hooks_;
  std::map<uint32_t, GradHook> retains_grad_hooks_;
  std::vector<std::pair<int, PostHook>> post_hooks_;
};

// The sink of a leaf: adds the incoming gradient into the leaf's `.grad`.
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(Tensor variable);
  TensorList Apply(TensorList&& grads) override;
  std::string name() const override { return "torch::autograd::AccumulateGrad"; }
  const Tensor& variable() const { return variable_; }
  // The leaf's tensor hooks on an incoming gradient (also for gradients autograd.grad captures).
  Tensor RunLeafHooks(Tensor grad) const;

 private:
  Tensor variable_;
};

// The start of a backward pass: hands the given root gradients to the roots' edges.
class GraphRoot : public Node {
 public:
  GraphRoot(std::vector<Edge> roots, TensorList grads);
  TensorList Apply(TensorList&&) override { return grads_; }
  std::string name() const override { return "GraphRoot"; }

 private:
  TensorList grads_;
};

// A node for an op whose gradient is not defined: raises if a gradient reaches it.
class NotImplementedNode : public Node {
 public:
  explicit NotImplementedNode(std::string op) : op_(std::move(op)) {}
  TensorList Apply(TensorList&&) override;
  std::string name() const override { return "NotImplemented"; }

 private:
  std::string op_;
};

// Next sequence number (nodes made later run earlier in a backward pass, as in PyTorch).
uint64_t NextSequenceNr();

}  // namespace kiln::autograd
