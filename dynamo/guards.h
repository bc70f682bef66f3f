// dynamo/guards.h: the guard tree, which decides in C++ whether a cached compiled frame still
// applies to a frame's arguments.
//
// When dynamo compiles a frame it records what the compiled code assumed about its inputs: that
// `x` is a float32 tensor of 3 dims, that `n == 4`, that `self.training` is False, that grad mode is
// on. Those assumptions become a RootGuardManager; the frame hook (eval_frame.h) runs it on every
// later call of the code object, before reusing the cache entry. That check runs on every call of
// a compiled function, so it is C++ end to end: no Python call unless a lambda guard asks for one.
//
// Note [Guard tree]: guards are a tree that mirrors how the values are reached, as in
// torch/csrc/dynamo/guards.cpp.
//   - A GuardManager node stands for one value, named by its source ("L['x']", "L['m'].weight").
//     The RootGuardManager's value is the frame's f_locals dict {argument or free variable: value}.
//   - A child is reached from its parent's value by an accessor: a dict item (PyDict lookup with
//     an interned key), an attribute, a tuple/list index, or the globals dict captured when the
//     root was made (source "G"). Children are memoised per accessor and key, so guards on
//     `L['m'].weight` and `L['m'].bias` share the `L['m']` node and read it once.
//   - Leaf guards test the node's value: type/id/equality/length/dict keys, a tensor's metadata,
//     a Python callable, or (on the root) the global state.
//   - Tensor-match leaves with a symbolic size ("s0") bind that symbol to the actual size during
//     the check; a symbol seen twice must have the same value both times. After the whole tree
//     passed, the root evaluates the ShapeEnv's guards (fx::ShapeEnv::EvaluateGuards) with those
//     bindings: `s0 > 2`, `Eq(Mod(s0, 4), 0)`.
// A check walks the tree depth first: a node's leaves in the order added, then its children in
// the order made; it stops at the first failure. A missing key, attribute or index fails the
// check, as does any Python exception raised inside a guard (it is cleared: a guard that cannot
// be evaluated does not hold). On the success path a check allocates nothing of its own except the
// symbol map that ShapeEnv::EvaluateGuards takes (only when a ShapeEnv is set).
//
// Note [Tensor unwrapper]: dynamo/ sits below python/, which defines kiln._C's tensor type
// (python/csrc/python_tensor.h), so this library cannot read a kiln::Tensor out of a PyObject by
// itself; depending on python/ would make the layering circular and tie the C++ tests to kiln._C.
// The bindings install a function that does it (SetTensorUnwrapper); the C++ test installs its
// own over PyCapsules. Without one, tensor-match guards fail (and cannot be added).
#pragma once

#include <Python.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "fx/symbolic_shapes.h"
#include "tensor/tensor_impl.h"

namespace kiln::dynamo {

// The kiln Tensor behind `obj`, or null when it is not a tensor (borrowed: valid while obj lives).
using TensorUnwrapper = const Tensor* (*)(PyObject* obj);
void SetTensorUnwrapper(TensorUnwrapper fn);  // Note [Tensor unwrapper]
TensorUnwrapper GetTensorUnwrapper();

class RootGuardManager;

// What one check carries through the tree: the values bound to shape symbols so far and, for a
// verbose check, where to write why a guard failed.
struct CheckState {
  absl::InlinedVector<int64_t, 8> symbol_values;  // indexed by RootGuardManager::SymbolIndex
  absl::InlinedVector<bool, 8> symbol_bound;
  std::string* detail = nullptr;  // non-null in verbose checks: a leaf may say why it failed
};

// A test on one value. `text` is how the guard prints ("TENSOR_MATCH: check_tensor(L['x'], ...)");
// `origin` is where dynamo made it ("x.shape[0] (from foo.py:12)"), shown on failure.
class LeafGuard {
 public:
  LeafGuard(std::string text, std::string origin) : text_(std::move(text)), origin_(std::move(origin)) {}
  virtual ~LeafGuard() = default;
  // Whether `value` (borrowed) passes. Never leaves a Python error set.
  virtual bool Check(PyObject* value, CheckState& state) const = 0;
  const std::string& text() const { return text_; }
  const std::string& origin() const { return origin_; }

 private:
  std::string text_, origin_;
};

// How a child's value is read from its parent's.
class GuardAccessor {
 public:
  enum class Kind { kDictGetItem, kGetAttr, kGetItem, kGlobals };
  virtual ~GuardAccessor() = default;
  virtual Kind kind() const = 0;
  // The child value (a new reference), or null when it is missing (no Python error left set).
  virtual PyObject* Access(PyObject* parent_value, CheckState& state) const = 0;
  virtual std::string Repr() const = 0;  // "DictGetItemGuardAccessor('x')"
};

// One node of the tree (Note [Guard tree]). Owned by its parent; the root owns everything.
class GuardManager {
 public:
  virtual ~GuardManager();
  GuardManager(const GuardManager&) = delete;
  GuardManager& operator=(const GuardManager&) = delete;

  // --- children: memoised per accessor and key; `source` names the child's value ---
  GuardManager* DictGetItemManager(PyObject* key, const std::string& source);  // key: hashable
  GuardManager* GetAttrManager(PyObject* name, const std::string& source);     // name: str
  GuardManager* GetItemManager(Py_ssize_t index, const std::string& source);   // index >= 0

  // --- leaves (bad arguments throw kiln's TypeError / ValueError) ---
  void AddTypeMatchGuard(PyObject* type, const std::string& origin);   // type(v) is type
  void AddIdMatchGuard(PyObject* obj, const std::string& origin);      // v is obj (held strongly)
  void AddEqualsMatchGuard(PyObject* value, const std::string& origin);  // same type and ==
  void AddLengthCheckGuard(Py_ssize_t n, const std::string& origin);   // len(v) == n
  void AddDictKeysGuard(PyObject* keys, const std::string& origin);    // v is a dict; same keys, same order
  // A size is exact (int) or a symbol name (binds that symbol, or compares with its binding). A
  // stride is exact, a symbol name (as a size), ContiguousStride (the contiguous stride of the
  // actual sizes), or StrideTimesSize{j} (dim j's actual stride times its size: how a symbolic
  // layout writes a dense permuted tensor's strides). Also checks: type identical to example's,
  // dtype, device, requires_grad, dispatch key set, dim.
  using SizeSpec = std::variant<int64_t, std::string>;
  struct ContiguousStride {};
  struct StrideTimesSize {
    int dim;
  };
  using StrideSpec = std::variant<int64_t, std::string, ContiguousStride, StrideTimesSize>;
  void AddTensorMatchGuard(PyObject* example, const std::vector<SizeSpec>& sizes,
                           const std::vector<StrideSpec>& strides, const std::string& origin);
  void AddLambdaGuard(PyObject* fn, const std::string& origin);  // bool(fn(v))

  const std::string& source() const { return source_; }
  const GuardAccessor* accessor() const { return accessor_.get(); }  // null for the root
  size_t num_leaf_guards() const { return leaves_.size(); }
  const std::vector<std::unique_ptr<GuardManager>>& children() const { return children_; }

 protected:
  GuardManager(RootGuardManager* root, std::string source, std::unique_ptr<GuardAccessor> accessor);
  // Checks this subtree against `value` (borrowed). On failure with state.detail set, *failed is
  // the failing guard's description.
  bool CheckNode(PyObject* value, CheckState& state, std::string* failed) const;
  void Print(int depth, std::string* out) const;
  void AddLeaf(std::unique_ptr<LeafGuard> leaf) { leaves_.push_back(std::move(leaf)); }
  GuardManager* Child(std::unique_ptr<GuardAccessor> accessor, const std::string& source);

  RootGuardManager* root_;

 private:
  std::string source_;
  std::unique_ptr<GuardAccessor> accessor_;
  std::vector<std::unique_ptr<LeafGuard>> leaves_;
  std::vector<std::unique_ptr<GuardManager>> children_;
};

// The root: its value is f_locals. Owns the tree, the captured globals, the shape symbols named by
// tensor-match leaves and the ShapeEnv whose guards run last. Needs the GIL throughout.
class RootGuardManager : public GuardManager {
 public:
  explicit RootGuardManager(PyObject* f_globals);  // a dict, held strongly
  ~RootGuardManager() override;

  // Grad mode and the default dtype, as they are now, must hold at check time.
  void AddGlobalStateGuard(const std::string& origin);
  // The ShapeEnv whose guards are evaluated after the tree (null: none).
  void SetShapeEnv(std::shared_ptr<fx::ShapeEnv> env, const std::string& origin);
  // The captured f_globals dict, source "G".
  GuardManager* GlobalsDictManager();

  // Whether every guard holds for `f_locals` (borrowed). Never raises, never leaves an error set.
  bool Check(PyObject* f_locals) const;
  // (true, "") or (false, the failed guard's text, why, and its origin).
  std::pair<bool, std::string> CheckVerbose(PyObject* f_locals) const;
  // The tree, torch-style: "TREE_GUARD_MANAGER:\n+- RootGuardManager\n| +- ...".
  std::string Str() const;

  // The index of shape symbol `name` in CheckState (made on first use).
  int SymbolIndex(const std::string& name);
  const std::vector<std::string>& symbols() const { return symbols_; }
  PyObject* f_globals() const { return f_globals_; }

 private:
  bool Run(PyObject* f_locals, CheckState& state, std::string* failed) const;
  bool CheckShapeEnv(const CheckState& state, std::string* failed) const;

  PyObject* f_globals_;
  std::vector<std::string> symbols_;
  std::shared_ptr<fx::ShapeEnv> shape_env_;
  std::string shape_env_origin_;
};

// The frame hook asks this whether a cache entry's guard is a RootGuardManager, to run it without
// a Python call. The bindings install the function that recognises their Python objects.
using GuardManagerUnwrapper = RootGuardManager* (*)(PyObject* guard);
void SetGuardManagerUnwrapper(GuardManagerUnwrapper fn);
RootGuardManager* AsRootGuardManager(PyObject* guard);  // null when not one

}  // namespace kiln::dynamo
