// fx/tracer.h: the make_fx tracer, the Tracing dispatch key's layer.
//
// Note [make_fx tracing]: while a Tracer is active on a thread (TracingGuard), the thread's
// included keys hold Tracing, so every op call that gets past the layers above (Functionalize,
// Autograd — backward formulas included) reaches TracingKernel. It runs the op below Tracing
// (on real or fake tensors), then appends one call_function node whose target is the op:
//  - tensor arguments become the nodes that produced them (a TensorImpl* -> Node map filled by
//    placeholders and earlier outputs; an in-place op's result re-points its argument at the new
//    node); a tensor never seen becomes a get_attr constant `_tensor_constantN`; a wrapped
//    Python number becomes the number; symbolic sizes become the nodes of their expressions
//    (SymIntRecorder); everything else is a constant;
//  - kwarg-only arguments become kwargs and arguments equal to their defaults are left out, as
//    PyTorch's dispatcher hands them to Python;
//  - node.meta["val"] is the output (a fake tensor, or for real tensors a storage-less tensor of
//    the same layout); several outputs become getitem nodes made when first used.
// Composites PyTorch records as one op (IsRecordedComposite) get the tracing kernel directly, so
// they are recorded instead of decomposed. A decomposition hook, when set, may run its own
// replacement for an op instead (its pieces are recorded in turn).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "fx/graph.h"

namespace kiln::fx {

class Tracer {
 public:
  explicit Tracer(std::shared_ptr<Graph> graph = std::make_shared<Graph>());
  ~Tracer();

  Graph& graph() { return *graph_; }
  const std::shared_ptr<Graph>& graph_ptr() const { return graph_; }

  // A placeholder named `name` standing for `t` (when defined).
  Node* Placeholder(const std::string& name, const Tensor& t);
  // The node that produced `t`, or null.
  Node* NodeFor(const Tensor& t);
  void Bind(const Tensor& t, Node* n);
  // An argument for a value: tensors as their nodes (or new constants), the rest as constants.
  Argument ArgFor(const IValue& v);
  Argument TensorArg(const Tensor& t);

  // Records `op` called with `args` (its full boxed arguments) that returned `results`.
  void Record(const Op& op, const Stack& args, const Stack& results);

  // Tensors captured as graph constants, by attribute name, in order of first use.
  const std::vector<std::pair<std::string, Tensor>>& constants() const { return constants_; }

  // Python callables the graph needs as targets (operator.getitem; operator.add/mul/... for
  // symbolic arithmetic), set by python/; without them getitem nodes use the name "getitem".
  PyValuePtr getitem_target;
  // Turns an output into node.meta["val"] (python/ may make fake tensors); default: a
  // storage-less tensor with the output's sizes, strides, dtype and device.
  std::function<Argument(const Tensor&)> make_val;
  // Ops with a decomposition: called instead of the op (returns false to record the op).
  std::function<bool(const Op&, Stack&)> decompose;
  // Symbolic sizes: a node for a SymInt (set by python/ when tracing symbolically).
  std::function<std::optional<Argument>(const SymInt&)> sym_arg;

  size_t ops_recorded() const { return ops_recorded_; }

 private:
  struct Entry {
    Tensor keep_alive;  // so the impl's address is not reused while mapped
    Node* node = nullptr;
    // A lazily made getitem: output `index` of `parent`.
    Node* parent = nullptr;
    int index = -1;
    Argument val;
  };
  Node* Materialize(Entry& e);
  Argument MetaVal(const Tensor& t);

  std::shared_ptr<Graph> graph_;
  std::unordered_map<const TensorImpl*, Entry> map_;
  std::vector<std::pair<std::string, Tensor>> constants_;
  size_t ops_recorded_ = 0;
};

// The thread's active tracer (null when not tracing).
Tracer* ActiveTracer();

// Makes `tracer` active on this thread while alive: includes the Tracing key.
class TracingGuard {
 public:
  explicit TracingGuard(Tracer* tracer);
  ~TracingGuard();
  TracingGuard(const TracingGuard&) = delete;
  TracingGuard& operator=(const TracingGuard&) = delete;

 private:
  Tracer* saved_;
  LocalDispatchKeySet saved_keys_;
};

// Installs the Tracing kernels (idempotent).
void InstallTracer();

// Ops that are composites in kiln but that PyTorch's tracers record as one op (factories,
// clone, _to_copy, the functional scatters and fills, split, t, ...): registered with
// CompositeExplicit<> (tensor/dispatcher.h), PyTorch's CompositeExplicitAutograd.
bool IsRecordedComposite(const Op& op);

}  // namespace kiln::fx
