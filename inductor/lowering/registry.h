// inductor/lowering/registry.h: which aten ops Inductor lowers and how -- one table keyed by the
// registry's Op, read by GraphLowering for every node (python/kiln/_inductor/graph.py).
//
// Note [The lowering table]: a node is lowered by its op's entry. Every op with an element function
// (tensor/ops/pointwise_ir.h) has one that builds it (LowerElementwise, LowerWithParams); the ops
// this file's .cc lists have their own (pow, where, gelu, the activations' backwards, clamp, fills
// and copies, the views, the reductions, max pooling), which take the element function's place
// where an op has both. A lowering gets the node's arguments in its schema's order with the
// defaults filled in (LoweringCall), each a value of the graph or a constant, and reads them by
// name; what it cannot lower (a symbolic size, a tensor where it needs a number, a complex dtype)
// throws Fallback, and the node runs its eager kernel, as does a node whose op has no entry.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "inductor/ir/values.h"
#include "inductor/lowering/pointwise.h"
#include "inductor/lowering/reductions.h"
#include "tensor/dispatcher.h"
#include "tensor/ivalue.h"
#include "tensor/scalar.h"

namespace kiln::inductor::lowering {

// One argument of the node: a value of the graph, or a constant.
struct LoweringArg {
  enum class Kind { kNone, kValue, kNumber, kInts, kString, kOther };
  Kind kind = Kind::kNone;
  std::shared_ptr<ir::Value> value;  // kValue
  Scalar number;                     // kNumber: a bool, an int or a float
  std::vector<int64_t> ints;         // kInts
  std::string text;                  // kString; kOther: what it was (a symbolic size, a dtype, ...)

  static LoweringArg None() { return {}; }
  static LoweringArg Of(std::shared_ptr<ir::Value> v);
  static LoweringArg Number(const Scalar& s);
  static LoweringArg Ints(std::vector<int64_t> v);
  static LoweringArg String(std::string s);
  static LoweringArg Other(std::string what);
  // A constant argument or a schema default (None, a number or a concrete SymInt, a string, an int
  // list; Other for the rest).
  static LoweringArg Constant(const IValue& v);
};

// The dtype and shape of one of the node's results (its meta value).
struct LoweringOutput {
  ScalarType dtype;
  std::vector<int64_t> shape;
};

// A node to lower: its op, its results' metas, its arguments (one per schema argument, in order)
// and the graph's context (nullptr outside a graph). The accessors name an argument of the schema
// (an unknown name is an internal error) and throw Fallback where its kind does not fit.
class LoweringCall {
 public:
  LoweringCall(const Op& op, std::vector<LoweringOutput> outs, std::vector<LoweringArg> args, GraphContext* graph);

  const Op& op() const { return op_; }
  GraphContext* graph() const { return graph_; }
  const std::vector<LoweringOutput>& outs() const { return outs_; }
  const LoweringOutput& out() const { return outs_.at(0); }
  const std::vector<LoweringArg>& args() const { return args_; }

  bool Has(const char* name) const;     // the schema has this argument
  bool IsNone(const char* name) const;  // absent from the schema, or None
  ValuePtr Value(const char* name) const;
  Operand OperandOf(const char* name) const;  // a value or a number
  Operand OperandAt(size_t i) const;
  Scalar Number(const char* name) const;
  std::optional<Scalar> OptionalNumber(const char* name) const;
  int64_t Int(const char* name) const;
  std::optional<int64_t> OptionalInt(const char* name) const;
  std::vector<int64_t> Ints(const char* name) const;  // an int alone is a list of one
  Dims OptionalInts(const char* name) const;          // absent or None: unset
  std::string Str(const char* name) const;
  std::optional<std::string> OptionalStr(const char* name) const;
  bool Bool(const char* name) const;
  bool Flag(const char* name) const;  // a bool argument; false where the schema has none (sum.default's keepdim)

 private:
  const LoweringArg& Get(const char* name) const;
  [[noreturn]] void Unfit(const char* name, const char* expected) const;

  const Op& op_;
  std::vector<LoweringOutput> outs_;
  std::vector<LoweringArg> args_;
  GraphContext* graph_;
};

// A lowering: the node's values (one per tensor result).
using LoweringFn = std::function<std::vector<ValuePtr>(const LoweringCall&)>;

// The op's lowering, or nullptr.
const LoweringFn* FindLowering(const Op& op);
// The ops with a lowering.
std::vector<const Op*> LoweredOps();
// The node lowered (Fallback where its op has no lowering, or it reads or makes a complex value:
// the kernels know real numbers only).
std::vector<ValuePtr> Lower(const LoweringCall& call);

}  // namespace kiln::inductor::lowering
