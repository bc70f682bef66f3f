// autograd/engine.cc: dependency counting, the ready queue, gradient buffers and validation.
#include "autograd/engine.h"

#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "autograd/anomaly_mode.h"
#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "runtime/error.h"
#include "tensor/ops.h"
#include "tensor/ops/common.h"

namespace kiln::autograd {
namespace {

struct NodeState {
  int dependencies = 0;
  TensorList buffer;  // one slot per input of the node
  bool needed = true;
  // For autograd.grad: which of this node's input slots to capture, and where.
  std::vector<std::pair<uint32_t, size_t>> captures;
};

// Sums a gradient into a buffer slot (out of place: slots may alias tensors other nodes hold).
// Anomaly mode's NaN check of a node's gradients (PyTorch's words).
void CheckNoNan(const Node& fn, const TensorList& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& g = outputs[i];
    if (!g.defined() || !(IsFloating(g.dtype()) || IsComplex(g.dtype())) || !g->has_storage()) continue;
    Tensor any = CallOp<Tensor>(KILN_OP("aten::any"), CallOp<Tensor>(KILN_OP("aten::isnan"), g));
    if (ItemScalar("detect_anomaly", any).to_bool())  // a CUDA flag is read back (a synchronisation)
      throw Error(StrCat("Function '", fn.name(), "' returned nan values in its ", i, "th output."));
  }
}

void Accumulate(TensorList& buffer, uint32_t slot, Tensor grad) {
  if (buffer.size() <= slot) buffer.resize(slot + 1);
  Tensor& cur = buffer[slot];
  cur = cur.defined() ? ops::add(cur, grad) : std::move(grad);
}

bool Expandable(const SymDimVector& from, const SymDimVector& to) {
  if (from.size() > to.size()) return false;
  size_t off = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (!(from[i] == to[off + i]) && !(from[i] == SymInt(1))) return false;
  return true;
}

// Reduces a broadcast gradient to the input's sizes.
Tensor SumToSize(Tensor grad, const SymDimVector& sizes) {
  const int64_t lead = grad.dim() - static_cast<int64_t>(sizes.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < grad.dim(); ++d) {
    if (d < lead) dims.push_back(d);
    else if (sizes[d - lead] == SymInt(1) && !(grad->sym_sizes()[d] == SymInt(1))) dims.push_back(d);
  }
  if (!dims.empty()) grad = ops::sum(grad, dims, /*keepdim=*/true);
  if (lead > 0) grad = ops::view(grad, std::vector<SymInt>(sizes.begin(), sizes.end()));
  return grad;
}

// PyTorch's validate_outputs: each gradient must fit its input (broadcast ones are reduced, other
// dtypes are cast); anything else is a bug in a backward function, reported with its name.
void Validate(const Node& fn, TensorList& grads) {
  const auto& edges = fn.next_edges();
  if (grads.size() != edges.size())
    throw Error(StrCat("function ", fn.name(), " returned an incorrect number of gradients (expected ",
                       edges.size(), ", got ", grads.size(), ")"));
  for (size_t i = 0; i < grads.size(); ++i) {
    Tensor& g = grads[i];
    if (!edges[i].valid() || !g.defined()) continue;
    const InputMeta& m = edges[i].fn->input_meta().at(edges[i].input_nr);
    if (!(g->sym_sizes() == m.sizes)) {
      if (!Expandable(m.sizes, g->sym_sizes()))
        throw Error(StrCat("Function ", fn.name(), " returned an invalid gradient at index ", i, " - got ",
                           SizesToString(g->sym_sizes()), " but expected shape compatible with ",
                           SizesToString(m.sizes)));
      g = SumToSize(g, m.sizes);
    }
    if (g.dtype() != m.dtype) g = ops::to_dtype(g, m.dtype);
    if (g.device() != m.device) {  // a 0-dim gradient moves; any other is a backward function's bug
      if (g.dim() != 0)
        throw Error(StrCat("Function ", fn.name(), " returned an invalid gradient at index ", i, " - expected device ",
                           m.device.str(), " but got ", g.device().str()));
      g = CopyToDevice(g, m.device);
    }
  }
}

// The node observer (engine.h), and a scope that reports one node's start and end to it.
NodeObserver& Observer() {
  static NodeObserver observer;
  return observer;
}

// The synthetic GraphRoot is not reported (PyTorch's profiler does not show it either).
struct ObservedNode {
  ObservedNode(const Node& n, bool is_root) : node(Observer() && !is_root ? &n : nullptr) {
    if (node) Observer()(*node, true);
  }
  ~ObservedNode() {
    if (node && Observer()) Observer()(*node, false);
  }
  const Node* node;
};

}  // namespace

TensorList RunBackward(const std::vector<Edge>& roots, const TensorList& grads, const std::vector<Edge>& inputs,
                       const BackwardOptions& options) {
  AutoGradMode grad_mode(options.create_graph);
  auto root = std::make_shared<GraphRoot>(roots, grads);

  // 1. Count dependencies over every node reachable from the root.
  std::unordered_map<Node*, NodeState> state;
  {
    std::vector<Node*> stack{root.get()};
    state[root.get()];
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      for (const Edge& e : n->next_edges()) {
        if (!e.valid()) continue;
        auto [it, inserted] = state.try_emplace(e.fn.get());
        it->second.dependencies++;
        if (inserted) stack.push_back(e.fn.get());
      }
    }
  }

  // 2. With inputs given, capture their gradients and run only the nodes leading to them: a node
  // runs when one of its edges reaches a target or a node that runs. Targets themselves run in
  // backward(inputs=...) (they accumulate) and otherwise only to reach further targets.
  TensorList captured(inputs.size());
  if (!inputs.empty()) {
    std::unordered_set<Node*> targets;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Edge& e = inputs[i];
      auto it = e.valid() ? state.find(e.fn.get()) : state.end();
      if (it == state.end()) continue;  // not reachable: an unused input
      it->second.captures.emplace_back(e.input_nr, i);
      targets.insert(e.fn.get());
    }
    // Topological order (parents first) from the dependency counts, then settle children first.
    std::unordered_map<Node*, int> remaining;
    for (auto& [n, st] : state) remaining[n] = st.dependencies;
    std::vector<Node*> topo{root.get()};
    for (size_t i = 0; i < topo.size(); ++i)
      for (const Edge& e : topo[i]->next_edges())
        if (e.valid() && --remaining[e.fn.get()] == 0) topo.push_back(e.fn.get());
    for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
      Node* n = *it;
      bool reaches = false;
      for (const Edge& e : n->next_edges())
        if (e.valid() && (targets.count(e.fn.get()) || state[e.fn.get()].needed)) { reaches = true; break; }
      state[n].needed = reaches || (targets.count(n) && options.accumulate_grad);
    }
  }

  // 3. Run nodes in dependency order.
  auto cmp = [](Node* a, Node* b) { return a->sequence_nr() < b->sequence_nr(); };
  std::priority_queue<Node*, std::vector<Node*>, decltype(cmp)> ready(cmp);
  ready.push(root.get());
  while (!ready.empty()) {
    Node* fn = ready.top();
    ready.pop();
    NodeState& s = state[fn];
    TensorList inputs_of_fn = std::move(s.buffer);
    inputs_of_fn.resize(std::max(inputs_of_fn.size(), fn->input_meta().size()));
    if (fn->has_pre_hooks())
      for (uint32_t i = 0; i < inputs_of_fn.size(); ++i)
        if (inputs_of_fn[i].defined()) inputs_of_fn[i] = fn->RunPreHooks(i, std::move(inputs_of_fn[i]));
    for (auto [slot, index] : s.captures) {
      if (slot >= inputs_of_fn.size()) continue;
      captured[index] = inputs_of_fn[slot];
      // autograd.grad does not run a leaf's AccumulateGrad, but the leaf's hooks still apply to
      // the gradient it returns (as in PyTorch).
      if (!options.accumulate_grad)
        if (auto* acc = dynamic_cast<AccumulateGrad*>(fn)) captured[index] = acc->RunLeafHooks(captured[index]);
    }
    bool any_grad = fn == root.get();
    for (const Tensor& g : inputs_of_fn) any_grad = any_grad || g.defined();
    const bool run = s.needed && any_grad;
    TensorList outputs;
    if (run) {
      // Only a node with post hooks keeps its incoming gradients: a second reference would stop
      // AccumulateGrad from stealing a fresh gradient (Note [Stealing gradients]), and every
      // leaf's .grad was copied, 4.8% of a GELU forward+backward.
      TensorList grads_in;
      if (fn->has_post_hooks()) grads_in = inputs_of_fn;
      ObservedNode observed(*fn, fn == root.get());
      try {
        outputs = fn->Apply(std::move(inputs_of_fn));
        if (AnomalyMode::is_enabled() && AnomalyMode::should_check_nan()) CheckNoNan(*fn, outputs);
      } catch (...) {
        ReportBackwardError(*fn);
        throw;
      }
      if (!options.keep_graph) fn->ReleaseVariables();
      if (!outputs.empty() || !fn->next_edges().empty()) Validate(*fn, outputs);
      fn->RunPostHooks(outputs, grads_in);
    }
    const auto& edges = fn->next_edges();
    for (size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.valid()) continue;
      NodeState& next = state[e.fn.get()];
      if (run && i < outputs.size() && outputs[i].defined()) Accumulate(next.buffer, e.input_nr, std::move(outputs[i]));
      if (--next.dependencies == 0) ready.push(e.fn.get());
    }
  }

  if (!options.allow_unused && !options.accumulate_grad)
    for (size_t i = 0; i < inputs.size(); ++i)
      if (!captured[i].defined())
        throw Error("One of the differentiated Tensors appears to not have been used in the graph. "
                    "Set allow_unused=True if this is the desired behavior.");
  return captured;
}

NodeObserver SetNodeObserver(NodeObserver observer) {
  NodeObserver previous = std::move(Observer());
  Observer() = std::move(observer);
  return previous;
}

}  // namespace kiln::autograd
