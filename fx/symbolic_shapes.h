// fx/symbolic_shapes.h: ShapeEnv, the owner of shape symbols, their ranges and the guards on them,
// and SymExprNode, its implementation of tensor/sym_int.h's SymNode.
//
// Data flow: fake tensor mode asks the ShapeEnv for symbolic sizes of each input
// (CreateSymbolicSizesStridesOffset: one symbol s0, s1, ... per distinct size >= 2, sizes 0 and 1
// stay constants); meta functions compute output sizes over SymInt, which builds expressions
// (fx/sym_expr.h); whenever C++ or Python branches on one (`if (a == b)`, `bool(x.size(0) > 2)`),
// EvaluateExpr decides it statically from ranges, replacements and known facts, or records a
// guard with the example value's answer. Ops whose sizes depend on data mint unbacked symbols
// (u0, u1, ...: no example value); guarding on those raises GuardOnDataDependentSymNode unless
// facts from kiln._check decide it.
//
// Note [Guard simplification]: guards() is the recorded list rewritten by the replacements
// (Eq(s0, 3) specialises s0; Eq(s0, s1) unifies s1 into s0), with guards that became True
// dropped, duplicates removed, bound guards on one symbol reduced to the tightest lower and upper
// bound, and any other guard dropped when the ranges implied by the kept ones decide it.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fx/sym_expr.h"
#include "fx/symbolic_context.h"
#include "tensor/tensor_impl.h"

namespace kiln::fx {

class ShapeEnv;

// Branching on a value that depends on data (an unbacked symbol) with no fact deciding it.
class GuardOnDataDependentSymNode : public NamedError {
 public:
  explicit GuardOnDataDependentSymNode(const std::string& msg)
      : NamedError("kiln.fx.experimental.symbolic_shapes", "GuardOnDataDependentSymNode", msg) {}
};

struct Guard {
  Expr expr;             // the fact that must hold (already negated for a False branch)
  std::string location;  // who branched: a Python user frame or C++ file:line
};

// A symbolic value of one ShapeEnv. The expression it holds is re-simplified by the env's
// replacements on each read, so nodes made before a specialisation see it.
class SymExprNode : public SymNode {
 public:
  SymExprNode(std::shared_ptr<ShapeEnv> env, Expr expr) : env_(std::move(env)), expr_(expr) {}
  Expr expr() const;      // simplified by the current replacements
  Expr raw_expr() const { return expr_; }
  const std::shared_ptr<ShapeEnv>& env() const { return env_; }

  SymNodePtr wrap_int(int64_t v) override;
  SymNodePtr add(const SymNodePtr& o) override;
  SymNodePtr sub(const SymNodePtr& o) override;
  SymNodePtr mul(const SymNodePtr& o) override;
  SymNodePtr floordiv(const SymNodePtr& o) override;
  SymNodePtr mod(const SymNodePtr& o) override;
  SymNodePtr min(const SymNodePtr& o) override;
  SymNodePtr max(const SymNodePtr& o) override;
  SymNodePtr eq(const SymNodePtr& o) override;
  SymNodePtr ne(const SymNodePtr& o) override;
  SymNodePtr lt(const SymNodePtr& o) override;
  SymNodePtr le(const SymNodePtr& o) override;
  SymNodePtr gt(const SymNodePtr& o) override;
  SymNodePtr ge(const SymNodePtr& o) override;
  int64_t guard_int(const char* file, int line) override;
  bool guard_bool(const char* file, int line) override;
  std::optional<int64_t> maybe_as_int() override;
  bool is_bool() const override { return expr()->is_boolean() || expr()->kind == ExprKind::kNot ||
                                         expr()->kind == ExprKind::kAnd || expr()->kind == ExprKind::kOr; }
  bool is_float() const { return expr()->is_float; }
  bool has_hint() const;  // false when an unbacked symbol is involved
  std::string str() const override { return Str(expr()); }

  // Beyond the SymNode interface (Python's SymFloat/SymBool use these).
  SymNodePtr wrap_float(double v);
  SymNodePtr wrap_bool(bool v);
  SymNodePtr truediv(const SymNodePtr& o);
  SymNodePtr neg();
  SymNodePtr sym_float();
  SymNodePtr sym_int();  // trunc of a float
  SymNodePtr sym_not();
  SymNodePtr sym_and(const SymNodePtr& o);
  SymNodePtr sym_or(const SymNodePtr& o);
  SymNodePtr pow(int64_t n);
  double guard_float(const char* file, int line);
  std::optional<Value> hint() const;

 private:
  SymNodePtr Make(Expr e) const;
  Expr Other(const SymNodePtr& o) const;
  std::shared_ptr<ShapeEnv> env_;
  Expr expr_;
};

class ShapeEnv : public SymbolicContext, public std::enable_shared_from_this<ShapeEnv> {
 public:
  struct Options {
    bool duck_shape = true;           // equal input sizes share one symbol
    bool specialize_zero_one = true;  // sizes 0 and 1 stay constants
  };
  static std::shared_ptr<ShapeEnv> Create() { return Create(Options{}); }
  static std::shared_ptr<ShapeEnv> Create(Options options);

  // --- symbols ---
  // A backed size symbol with example value `hint` (or the constant, for 0/1 or duck sizing's
  // existing symbol). `source` names it for produce_guards ("x.size()[0]").
  SymInt CreateSymbol(int64_t hint, const std::string& source = "");
  Expr CreateSymbolExpr(int64_t hint, const std::string& source = "");
  SymInt CreateUnbackedSymInt(ValueRange range = {}, bool size_like = false);
  SymInt CreateUnbackedSymFloat();  // Note [SymFloat through SymInt slots]
  struct SymbolicLayout {
    SymDimVector sizes, strides;
    SymInt storage_offset;
  };
  // Symbolic sizes for `sizes`; strides expressed through them where they are products of
  // inner sizes (contiguous and permuted layouts), new symbols otherwise.
  SymbolicLayout CreateSymbolicSizesStridesOffset(const DimVector& sizes, const DimVector& strides, int64_t offset,
                                                  const std::string& source = "");
  SymbolicLayout CreateSymbolicSizesStridesOffset(const Tensor& t, const std::string& source = "");

  // SymbolicContext.
  SymNodePtr NewUnbackedSymInt(int64_t min, std::optional<int64_t> max, bool size_like) override;
  SymNodePtr NewUnbackedSymFloat() override;

  SymNodePtr Wrap(Expr e);
  SymInt ToSymInt(Expr e);

  // --- reasoning ---
  // Replacements applied, then Min/Max/Mod/FloorDiv simplified with the symbols' ranges.
  Expr Simplify(Expr e) const;
  // Example value (nullopt when an unbacked symbol is involved).
  std::optional<Value> Hint(Expr e) const;
  // Decided from replacements, ranges and known facts, without guarding.
  std::optional<bool> StaticallyKnown(Expr cond) const;
  ValueRange BoundOf(Expr e) const { return Bound(Simplify(e), ranges_); }
  // Branches on `cond`: the static answer, or the example value's answer under a new guard.
  bool EvaluateExpr(Expr cond, const std::string& location);
  int64_t GuardInt(Expr e, const std::string& location);
  double GuardFloat(Expr e, const std::string& location);
  // kiln._check(cond): asserts `cond`; on unbacked values it becomes a known fact.
  void Check(Expr cond, const std::string& location, const std::string& message = "");
  // kiln._check_is_size(u): u >= 0, and u is size-like.
  void CheckIsSize(Expr e, const std::string& location);

  // --- guards ---
  std::vector<Guard> guards() const;  // Note [Guard simplification]
  const std::vector<Guard>& raw_guards() const { return guards_; }
  std::vector<std::string> FormatGuards(bool with_locations = false) const;
  // Whether every guard holds when the backed symbols take `values` (by symbol name).
  bool EvaluateGuards(const std::map<std::string, int64_t>& values) const;

  // --- state ---
  const std::map<Expr, int64_t>& var_to_val() const { return var_to_val_; }
  const RangeMap& var_to_range() const { return ranges_; }
  const std::map<Expr, Expr>& replacements() const { return replacements_; }
  const std::map<Expr, std::string>& var_to_sources() const { return sources_; }
  const ExprSet& size_like() const { return size_like_; }
  bool IsUnbacked(Expr sym) const { return sym->is_symbol() && !var_to_val_.count(sym); }
  const Options& options() const { return options_; }

  // Where a guard comes from: set by the Python bindings to name the user's frame.
  std::function<std::string()> location_provider;
  std::string Location(const char* file, int line) const;

 private:
  explicit ShapeEnv(Options o) : options_(o) {}
  void RecordGuard(Expr fact, const std::string& location);
  void AddFact(Expr fact);
  bool TryReplace(Expr eq);
  void Replace(Expr sym, Expr value);
  void Refine(Expr sym, ValueRange r);
  [[noreturn]] void DataDependentError(Expr e, Expr unhinted, const std::string& location, bool is_int) const;

  Options options_;
  int next_backed_ = 0, next_unbacked_ = 0, next_unbacked_float_ = 0;
  std::map<Expr, int64_t> var_to_val_;
  std::map<Expr, Value> hints_;  // var_to_val_ as evaluation values
  std::map<int64_t, Expr> val_to_var_;
  RangeMap ranges_;       // current (refined by guards and checks)
  RangeMap base_ranges_;  // as created
  std::map<Expr, Expr> replacements_;
  std::map<Expr, std::string> sources_;
  ExprSet size_like_;
  std::vector<Expr> facts_;
  std::vector<Guard> guards_;
  std::map<Expr, size_t> replacement_guard_;  // symbol -> index of the guard that replaced it
};

}  // namespace kiln::fx
