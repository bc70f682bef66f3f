// inductor/graph/graph_lowering.h: an aten FX graph lowered to the wrapper's steps -- the walk
// that gives each node a value of the loop IR (the lowering table), decides what to realize and
// in which layout, and records the eager ops that run between the kernels (Note [Lowering a graph]).
//
// Note [Lowering a graph]: the nodes are lowered in order (inductor/lowering/registry.h, Note [The
// lowering table]) to lazy values; a value becomes a kernel (the Scheduler's, Note [Kernels formed
// at realization]) only when realized:
//  - a graph output, in the layout its node's meta value promises (Note [Output strides]): a lazy
//    value is computed straight into it, a kernel output laid out otherwise is copied into it, an
//    expanded layout keeps its distinct elements only (Note [Expanded layouts]), and a strided view
//    of an intermediate is that view of the intermediate computed in its own layout;
//  - a value several nodes read, unless cheap to recompute (Note [Recompute or realize]); a
//    reduction several nodes read is deferred to its first use (Note [Sibling reductions]);
//  - an argument of an op that runs eagerly (it has no lowering, or its lowering declined the
//    case: Fallback), in the layout of its own meta value, since the op's results follow its
//    inputs' layouts and are declared with the node's meta layout;
//  - the memory several outputs view (Note [Outputs sharing a storage]).
// The walk's records -- allocations, kernels and views the Scheduler made, extern calls and the
// return -- are the wrapper's steps in program order (python/kiln/_inductor/wrapper.py plans their
// memory and runs them). Python keeps what must touch Python objects (Hooks): a lowering put in an
// op's place (tests, seeded bugs), max-autotune's choice, and the bisector's switches.
//
// Note [Output strides]: a graph output leaves with the strides its node's meta value states
// (eager's strides, as PyTorch's Inductor keeps them), not in whatever layout its kernel found
// convenient. The forward graph's saved activations are the backward graph's inputs, and the
// backward is lowered against the strides the joint graph recorded for them: a saved `z.t()`
// computed into a contiguous buffer was read by the backward as if it were `z`'s transposed view,
// so a weight gradient came out as z's elements in the wrong order (issue 16's VAE). User-visible
// outputs keep eager's strides too (`x.t() + 1` is column-major in eager). The layout questions
// (DenseOrder, GappedOrder, SameLayout, ...) are inductor/ir/strides.h's.
//
// Note [Expanded layouts]: a value whose meta layout repeats elements (`(w * 2).expand(2, 4, 4)`,
// eager's stride-0 view of a 4x4 result) is realized as eager holds it: the distinct elements in a
// dense buffer, viewed with stride 0 along the expanded dimensions. Realized in full, a saved
// `expanded.transpose(1, 2)` reached the backward laid out (16, 1, 4) where the joint graph
// recorded (0, 1, 4), and re-laying it there (compile_fx's Note [Input layouts]) wrote one element
// twice ("more than one element of the written-to tensor refers to a single memory location").
//
// Note [Outputs sharing a storage]: outputs that eager returns as views of one tensor (`v[:1],
// v[1:]`, `v, v[1:]` of `v = (x * 3)[::2]`, a split piece of a returned slice) are views of one
// buffer here too, with eager's strides and offsets: each was computed into a buffer of its own
// (the views lower to index maps of a lazy value), and a write through one did not show in the
// other. The value whose memory they view (found through the graph's view ops: aliasing returns in
// their schema) is realized when lowered, in its meta layout; the view nodes after it then lower to
// strided views of its buffer, as PyTorch's AOTAutograd regenerates them from one intermediate.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fx/graph.h"
#include "inductor/ir/values.h"
#include "inductor/lowering/reductions.h"
#include "inductor/scheduler/scheduler.h"

namespace kiln::inductor::graph {

using ir::Buffer;
using ir::Value;
using BufferPtr = std::shared_ptr<Buffer>;
using ValuePtr = std::shared_ptr<Value>;

// What the walk holds for a node, or passes an extern op: a value of the loop IR, a sequence (the
// results of a node with several, an extern op's tuple, a list argument), or a constant (an fx
// argument: a number, a string, a dtype, a SymInt, a Python object, None).
struct GraphValue {
  enum class Kind : uint8_t { kConst, kValue, kTuple, kList };
  Kind kind = Kind::kConst;
  ValuePtr value;                // kValue
  std::vector<GraphValue> items;  // kTuple, kList
  fx::Argument constant;         // kConst

  static GraphValue Of(ValuePtr v);
  static GraphValue Const(fx::Argument a);
  static GraphValue Seq(Kind kind, std::vector<GraphValue> items);
  bool is_value() const { return kind == Kind::kValue; }
  bool is_seq() const { return kind == Kind::kTuple || kind == Kind::kList; }
};
using GraphKwargs = std::vector<std::pair<std::string, GraphValue>>;

// An op the wrapper runs eagerly: `target(*args, **kwargs)`, its tensor results bound to
// `results` (nullptr for a non-tensor result), unpacked where it returns several.
struct ExternCall {
  fx::Target target;
  std::vector<GraphValue> args;
  GraphKwargs kwargs;
  std::vector<BufferPtr> results;
  bool unpack = false;
  std::vector<std::string> stack_traces;  // its node's (the user's line)
};

// One of the wrapper's steps, in program order.
struct Record {
  enum class Kind : uint8_t { kAlloc, kKernel, kView, kExtern, kReturn };
  Kind kind = Kind::kAlloc;
  BufferPtr buf;                                     // kAlloc: the output; kView: the view
  BufferPtr base;                                    // kView: what it views
  std::shared_ptr<scheduler::FormedKernel> kernel;   // kKernel
  std::shared_ptr<ExternCall> call;                  // kExtern
  std::vector<GraphValue> values;                    // kReturn: the graph's outputs
};

// A node that runs eagerly, and why (the debug log's and the tests' list).
struct FallbackRecord {
  fx::Target target;
  std::string why;
};

// What a hook decided for a node: lower it by the table, take this value, or run `target` (the
// node's own when unset) eagerly.
struct HookChoice {
  enum class Kind : uint8_t { kTable, kValue, kExtern };
  Kind kind = Kind::kTable;
  GraphValue value;
  std::string why;
  std::optional<fx::Target> target;
};

// The Python-owned decisions (unset: none; the walk calls no Python then).
struct Hooks {
  // Asked for each call of an op (getitem aside) with its arguments as the walk holds them.
  std::function<HookChoice(const fx::Node&, const std::vector<GraphValue>&, const GraphKwargs&)> lower;
  // Whether a node's lazy value may be left for its readers to fuse (else it is realized now).
  std::function<bool(const fx::Node&)> allow_fusion;
};

// A graph input's name in the wrapper: one the wrapper's own code uses (`empty_strided`, a
// backward's saved activation named after the op that made it) gets underscores until it is free.
std::string InputName(const std::string& name, const std::set<std::string>& taken);

// The nodes whose memory two or more graph outputs are or view (Note [Outputs sharing a storage];
// graph inputs left out: the runtime rebuilds views of inputs itself).
std::set<const fx::Node*> StoragesOutputsShare(const fx::Graph& graph);

// Whether an op's schema returns a view of an argument (`Tensor(a)`, not in place: `Tensor(a!)`).
bool ReturnsAlias(const fx::Target& target);

class GraphLowering {
 public:
  // `output_strides`: output position -> the strides it leaves with, where layout optimization
  // laid its node out otherwise (python/kiln/_inductor/layout.py, Note [Layout optimization]).
  GraphLowering(std::shared_ptr<fx::Graph> graph, std::optional<std::map<int64_t, std::vector<int64_t>>> output_strides);
  GraphLowering(const GraphLowering&) = delete;
  GraphLowering& operator=(const GraphLowering&) = delete;

  // Lowers the graph once; the hooks are read during the call only.
  void Run(const Hooks& hooks = {});

  const std::vector<Record>& records() const { return records_; }
  const std::vector<std::string>& inputs() const { return inputs_; }
  const std::vector<FallbackRecord>& fallbacks() const { return fallbacks_; }
  // Each call node's value before kernels were formed, in order (the pre-fusion listing).
  const std::vector<std::pair<const fx::Node*, GraphValue>>& lowered() const { return lowered_; }
  scheduler::Scheduler& scheduler() { return scheduler_; }

 private:
  GraphValue Call(const fx::Node& node);
  GraphValue LowerByTable(const fx::Node& node, std::vector<GraphValue> args, const GraphKwargs& kwargs);
  GraphValue Fallback(const fx::Node& node, std::vector<GraphValue> args, GraphKwargs kwargs, const std::string& why,
                      const std::optional<fx::Target>& target = std::nullopt);
  GraphValue Arg(const fx::Argument& a) const;
  GraphValue ExternArg(const GraphValue& v, const fx::Argument* src);
  fx::Argument ViewResultsOf(const fx::Node& node, const fx::Target& target, const std::vector<GraphValue>& args,
                             const GraphKwargs& kwargs, fx::Argument val) const;
  void Output(const fx::Node& node);

  // realization (Note [Output strides])
  BufferPtr Formed(BufferPtr result);
  BufferPtr Define(const BufferPtr& buf) { return Formed(scheduler_.Define(buf)); }
  BufferPtr Realize(const GraphValue& v);
  BufferPtr RealizeOutput(const ValuePtr& value, const std::optional<std::vector<int64_t>>& stride);
  BufferPtr InUserLayout(const ValuePtr& value, const std::vector<int64_t>& stride);
  BufferPtr RealizeExpanded(const std::shared_ptr<ir::Pointwise>& value, const std::vector<int64_t>& stride);
  BufferPtr OutputView(const fx::Node& node, const Tensor& meta);
  BufferPtr LowerViews(const std::vector<const fx::Node*>& chain, BufferPtr buf);
  GraphValue RealizeInMetaLayout(const fx::Node& node);
  BufferPtr KernelForPointwise(const std::shared_ptr<ir::Pointwise>& value,
                               const std::optional<std::vector<int64_t>>& stride = std::nullopt) {
    return Formed(scheduler_.KernelForPointwise(value, stride));
  }

  std::shared_ptr<fx::Graph> graph_;
  std::optional<std::map<int64_t, std::vector<int64_t>>> output_strides_;
  const Hooks* hooks_ = nullptr;
  scheduler::Scheduler scheduler_;
  lowering::GraphContext context_;
  std::unordered_map<const fx::Node*, GraphValue> env_;
  std::vector<Record> records_;
  std::vector<std::string> inputs_;
  std::vector<FallbackRecord> fallbacks_;
  std::vector<std::pair<const fx::Node*, GraphValue>> lowered_;
  bool ran_ = false;
};

}  // namespace kiln::inductor::graph
