// fx/graph.h: FX graphs — Node, Graph, and the Argument trees nodes take as args and kwargs.
//
// A Graph is a doubly linked list of Nodes in program order, from placeholders to one output.
// Each Node has an opcode (the six of torch.fx), a target, args/kwargs that may reference earlier
// nodes anywhere inside nested tuples, lists, dicts and slices, a `meta` dict, and a `users` list.
//
// Invariants (checked by Graph::Lint):
//  - every Node referenced from an Argument belongs to the same graph and comes earlier;
//  - n->users() holds exactly the nodes whose args/kwargs reference n, in the order they were
//    first made users (PyTorch keeps the same order), each once;
//  - names are unique within a graph and are valid Python identifiers, not keywords or builtins;
//  - there is at most one output node, and it is last.
// Every edit goes through Node/Graph methods, which keep `users` in sync.
//
// Python objects (callable targets, dtypes given from Python, arbitrary constants, meta entries)
// are held as opaque PyValues; python/ implements them. C++ passes (make_fx, the subgraph matcher,
// AOT, Inductor) see aten targets as Op pointers and constants as IValues.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "tensor/dispatcher.h"
#include "tensor/ivalue.h"

namespace kiln::fx {

enum class Opcode : uint8_t { kPlaceholder, kGetAttr, kCallFunction, kCallMethod, kCallModule, kOutput, kRoot };
const char* OpcodeName(Opcode op);  // "placeholder", "call_function", ...
Opcode OpcodeFromName(const std::string& name);  // ValueError on an unknown name

// A Python object held by a graph; python/ implements it (holding a reference).
class PyValue {
 public:
  virtual ~PyValue() = default;
  virtual std::string repr() const = 0;
  // The object's identity (its PyObject*), for equality of targets and constants.
  virtual const void* identity() const = 0;
  // For callables: the name a node made from it gets ("relu", "add", "my_fn").
  virtual std::string name_hint() const = 0;
  // How graph printing names it as a target: "kiln.relu", "operator.add", "builtins.getattr".
  virtual std::string target_str() const = 0;
};
using PyValuePtr = std::shared_ptr<const PyValue>;

class Node;

// One argument value: a tree of constants, nodes and containers.
struct Argument {
  enum class Kind : uint8_t { kNone, kNode, kConst, kTuple, kList, kDict, kSlice, kPy };
  Kind kind = Kind::kNone;
  Node* node = nullptr;         // kNode
  IValue value;                 // kConst: bool, int, float, str, SymInt, ScalarType, Device, Tensor, ...
  std::vector<Argument> items;  // kTuple, kList; kDict: values; kSlice: start, stop, step
  std::vector<Argument> keys;   // kDict keys
  PyValuePtr py;                // kPy

  Argument() = default;
  Argument(Node* n) : kind(Kind::kNode), node(n) {}  // NOLINT
  Argument(IValue v) : kind(v.is_none() ? Kind::kNone : Kind::kConst), value(std::move(v)) {}  // NOLINT
  static Argument Tuple(std::vector<Argument> xs) { return Seq(Kind::kTuple, std::move(xs)); }
  static Argument List(std::vector<Argument> xs) { return Seq(Kind::kList, std::move(xs)); }
  static Argument Slice(Argument start, Argument stop, Argument step) {
    return Seq(Kind::kSlice, {std::move(start), std::move(stop), std::move(step)});
  }
  static Argument Dict(std::vector<Argument> keys, std::vector<Argument> values);
  static Argument Py(PyValuePtr p);

  bool is_none() const { return kind == Kind::kNone; }
  bool is_node() const { return kind == Kind::kNode; }
  // Calls f on every Node in the tree, in order (duplicates included).
  void ForEachNode(const std::function<void(Node*)>& f) const;
  // A copy with each Node replaced by f(node).
  Argument Map(const std::function<Argument(Node*)>& f) const;
  // Structural equality: same shape, same nodes, equal constants, same Python objects.
  bool operator==(const Argument& o) const;
  // Python's repr, with nodes written as `%name` (FX's graph printing) or bare names (code).
  std::string Format(bool node_percent = true) const;

 private:
  static Argument Seq(Kind k, std::vector<Argument> xs) {
    Argument a;
    a.kind = k;
    a.items = std::move(xs);
    return a;
  }
};
using Kwargs = std::vector<std::pair<std::string, Argument>>;

// What a node calls: an aten op, a Python callable, or a name (method, module path, attribute
// path, placeholder name, "output").
struct Target {
  const Op* op = nullptr;  // call_function of an aten OpOverload
  PyValuePtr py;           // call_function of a Python callable (also set for ops made in Python)
  std::string name;        // the other opcodes

  Target() = default;
  Target(const Op* o) : op(o) {}                            // NOLINT
  Target(std::string n) : name(std::move(n)) {}            // NOLINT
  Target(const char* n) : name(n) {}                        // NOLINT
  static Target Callable(PyValuePtr p, const Op* op = nullptr);
  bool operator==(const Target& o) const;
  std::string str() const;  // "aten.add.Tensor", "relu", "lin.weight"
};

class Graph;

class Node : public std::enable_shared_from_this<Node> {
 public:
  // The owning graph; null once the node is erased or its graph is gone.
  Graph* graph() const { return graph_; }
  bool erased() const { return erased_; }
  const std::string& name() const { return name_; }
  // Renames the node (to a fresh legal name derived from `name`).
  void SetName(const std::string& name);
  Opcode op() const { return op_; }
  const Target& target() const { return target_; }
  void set_target(Target t) { target_ = std::move(t); }
  const std::vector<Argument>& args() const { return args_; }
  const Kwargs& kwargs() const { return kwargs_; }
  const std::vector<Node*>& users() const { return users_; }
  // Nodes this node reads, each once, in order of first appearance.
  std::vector<Node*> AllInputNodes() const;

  // Edits that keep every node's users in sync.
  void SetArgs(std::vector<Argument> args);
  void SetKwargs(Kwargs kwargs);
  void UpdateArg(size_t index, Argument arg);
  void UpdateKwarg(const std::string& key, Argument arg);
  void ReplaceInputWith(Node* old_input, Node* new_input);
  // Points every user (for which `filter` holds) at `replacement`; returns the users changed.
  std::vector<Node*> ReplaceAllUsesWith(Node* replacement,
                                        const std::function<bool(Node*)>& filter = nullptr);

  // Position in the graph; the root sentinel ends both directions.
  Node* next() const { return next_; }
  Node* prev() const { return prev_; }
  // Moves `n` (already in this graph) to just before / after this node.
  void Prepend(Node* n);
  void Append(Node* n);

  // Side effects keep a node alive under dead-code elimination: placeholders, outputs, ops that
  // mutate an argument, and Python callables the caller marks impure.
  bool IsImpure() const;

  // FX's one-line form: `%add : [num_users=1] = call_function[target=aten.add.Tensor](args = (%x, 1), kwargs = {})`.
  std::string Format() const;

  // The meta dict ("val", "tensor_meta", "stack_trace", ...), in insertion order.
  Kwargs& meta() { return meta_; }
  const Argument* FindMeta(const std::string& key) const;
  void SetMeta(const std::string& key, Argument value);

  // Python's type annotation of a placeholder (`x: torch.Tensor`), when given.
  PyValuePtr type;

 private:
  friend class Graph;
  Node(Graph* g, std::string name, Opcode op, Target target)
      : graph_(g), name_(std::move(name)), op_(op), target_(std::move(target)) {}
  void RemoveFromList();
  void InsertBefore(Node* where);  // links this node before `where`
  void AddUser(Node* user);
  void RemoveUser(Node* user);
  void DetachInputs();  // drops this node from its inputs' users
  void AttachInputs();  // adds this node to its inputs' users

  Graph* graph_;
  std::string name_;
  Opcode op_;
  Target target_;
  std::vector<Argument> args_;
  Kwargs kwargs_;
  std::vector<Node*> users_;
  Kwargs meta_;
  Node* prev_ = nullptr;
  Node* next_ = nullptr;
  bool erased_ = false;
};

// Where Graph::CreateNode inserts: before `node` (the root sentinel: at the end).
struct InsertPoint {
  Node* node = nullptr;
};

class Graph {
 public:
  Graph();
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Nodes in order (a snapshot, so callers may edit while iterating).
  std::vector<Node*> nodes() const;
  size_t size() const { return size_; }
  // Changes with every insertion, removal or move of a node, so a snapshot of nodes() taken at
  // one version is the list as long as the version stays (Python's graph.nodes keeps one).
  uint64_t order_version() const { return order_version_; }
  Node* root() const { return root_.get(); }
  std::shared_ptr<Node> shared(const Node* n) const;  // the owning pointer of one of our nodes
  Node* FindNode(const std::string& name) const;
  Node* output_node() const;

  // The node creation primitive: a unique name from `name` (or from the target), inserted at the
  // current insert point.
  Node* CreateNode(Opcode op, Target target, std::vector<Argument> args = {}, Kwargs kwargs = {},
                   const std::string& name = "");
  Node* Placeholder(const std::string& name, std::optional<Argument> default_value = std::nullopt);
  Node* GetAttr(const std::string& qualified_name);
  Node* CallFunction(Target target, std::vector<Argument> args = {}, Kwargs kwargs = {});
  Node* CallMethod(const std::string& method, std::vector<Argument> args = {}, Kwargs kwargs = {});
  Node* CallModule(const std::string& module_path, std::vector<Argument> args = {}, Kwargs kwargs = {});
  Node* Output(Argument result);

  // Insertion point: new nodes go before `n` (InsertingBefore) or after it; nullptr = at the end.
  InsertPoint insert_point() const { return insert_point_; }
  void set_insert_point(InsertPoint p) { insert_point_ = p; }
  void InsertingBefore(Node* n);
  void InsertingAfter(Node* n);

  // Removes a node that nobody uses (RuntimeError naming the users otherwise).
  void EraseNode(Node* n);
  // Erases nodes without users and without side effects, last to first; returns whether any went.
  bool EliminateDeadCode(const std::function<bool(const Node*)>& is_impure = nullptr);
  // Checks the invariants above; RuntimeError naming the node that breaks one.
  void Lint() const;

  // Copies `n` (from any graph) into this one, mapping its inputs through `arg_transform`.
  Node* NodeCopy(const Node* n, const std::function<Argument(Node*)>& arg_transform);
  // Copies every node of `g` except its output into this graph; `value_map` maps g's nodes to
  // this graph's (pre-filled entries are used for g's placeholders). Returns the output's
  // argument mapped into this graph (None if g has no output).
  Argument GraphCopy(const Graph& g, std::unordered_map<const Node*, Node*>& value_map);

  // FX's printing: "graph():\n    %x : [num_users=1] = placeholder[target=x]\n ...".
  std::string str() const;

  // Makes `candidate` a fresh legal name (sanitised, deduplicated as `sum_1`, `add_2`).
  std::string CreateName(const std::string& candidate);
  // Frees a name (its node was erased).
  void ReleaseName(const std::string& name);
  // Names that must not be used for nodes: keywords, builtins (python/ passes Python's own set).
  static void SetReservedNames(std::vector<std::string> names);

 private:
  friend class Node;  // its list links bump order_version_

  // Nodes are shared so Python handles outlive erasure safely (an erased node is detached).
  std::shared_ptr<Node> root_;
  std::unordered_map<const Node*, std::shared_ptr<Node>> owned_;
  size_t size_ = 0;
  uint64_t order_version_ = 0;
  InsertPoint insert_point_;
  std::unordered_set<std::string> used_names_;
  std::unordered_map<std::string, int64_t> base_count_;
};

}  // namespace kiln::fx
