// fx/sym_expr.h: the expression algebra behind symbolic shapes (kiln's own small sympy).
//
// An Expr is a pointer to an immutable, hash-consed ExprNode: structurally equal expressions are
// the same pointer, so `a == b` compares expressions and Exprs key maps directly. Nodes are
// interned for the life of the process (they are tiny, and shape expressions are few).
//
// Note [Canonical integer expressions]: every integer-valued expression built through the
// factories below is kept as a sum of products with integer coefficients (a polynomial over
// "atoms": symbols, FloorDiv, Mod, Min, Max). Add/Sub/Mul expand and collect terms, fold
// constants and drop x*1 and x+0, so `s0*2 - s0` and `s0` are the same node. FloorDiv and Mod
// divide out constant factors (FloorDiv(4*s0 + 8, 4) -> s0 + 2, Mod(4*s0 + s1, 4) -> Mod(s1, 4)).
// Relations fold when the difference of their sides is a constant. Float expressions (SymFloat)
// only fold constants. Printing follows sympy's str() as PyTorch shows guards: `2*s0 + 1`,
// `(s0//2)`, `Mod(s0, 4)`, `Eq(s0, 3)`, `Ne(s0, 1)`, `s0 > 2`, `Max(1, u0)`.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kiln::fx {

enum class ExprKind : uint8_t {
  // Leaves.
  kInteger,  // ival
  kFloat,    // fval
  kBool,     // ival: 0 or 1 (sympy's true/false)
  kSymbol,   // name; integer unless is_float
  // Integer (or float, when is_float) arithmetic.
  kAdd,       // args: terms (canonical order)
  kMul,       // args: [Integer coefficient,] factors
  kPow,       // args[0] ** ival
  kFloorDiv,  // args[0] // args[1]
  kMod,       // Python's %: args[0] % args[1]
  kMin,
  kMax,
  kTrueDiv,  // float args[0] / args[1]
  kToFloat,  // float(args[0])
  kTrunc,    // int(args[0]) of a float
  // Relations (bool).
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
  // Boolean connectives.
  kNot,
  kAnd,
  kOr,
};

struct ExprNode;
using Expr = const ExprNode*;

struct ExprNode {
  ExprKind kind;
  bool is_float = false;  // value type float (SymFloat)
  int64_t ival = 0;
  double fval = 0;
  std::string name;
  std::vector<Expr> args;
  size_t hash = 0;

  bool is_integer() const { return kind == ExprKind::kInteger; }
  bool is_number() const { return kind == ExprKind::kInteger || kind == ExprKind::kFloat; }
  bool is_symbol() const { return kind == ExprKind::kSymbol; }
  bool is_bool_const() const { return kind == ExprKind::kBool; }
  bool is_relation() const { return kind >= ExprKind::kEq && kind <= ExprKind::kGe; }
  bool is_boolean() const { return kind >= ExprKind::kEq || kind == ExprKind::kBool; }
};

// --- factories (canonicalising) ---------------------------------------------------------------
Expr Int(int64_t v);
Expr Float(double v);
Expr Bool(bool v);
Expr True();
Expr False();
Expr Symbol(const std::string& name, bool is_float = false);

Expr Add(Expr a, Expr b);
Expr Sub(Expr a, Expr b);
Expr Mul(Expr a, Expr b);
Expr Neg(Expr a);
Expr FloorDiv(Expr a, Expr b);  // raises on a constant zero divisor
Expr Mod(Expr a, Expr b);
Expr Min(Expr a, Expr b);
Expr Max(Expr a, Expr b);
Expr TrueDiv(Expr a, Expr b);
Expr ToFloat(Expr a);
Expr Trunc(Expr a);
Expr Pow(Expr a, int64_t n);

Expr Rel(ExprKind kind, Expr a, Expr b);  // kind in kEq..kGe
Expr Eq(Expr a, Expr b);
Expr Ne(Expr a, Expr b);
Expr Lt(Expr a, Expr b);
Expr Le(Expr a, Expr b);
Expr Gt(Expr a, Expr b);
Expr Ge(Expr a, Expr b);
Expr Not(Expr a);  // relations flip (Not(Lt) = Ge); double negation cancels
Expr And(Expr a, Expr b);
Expr Or(Expr a, Expr b);

// The same node kind rebuilt over new arguments, through the canonicalising factories.
Expr Rebuild(Expr e, const std::vector<Expr>& args);

// --- queries ----------------------------------------------------------------------------------
std::string Str(Expr e);  // sympy-style text
// Python source computing e's value (Eq(a, b) as `a == b`, Mod as `%`, Max as `max`, And as
// `and`), each symbol printed as its text in `symbols` (or its name): how produce_guards turns a
// guard into a check over the sources of the sizes, without parsing Str's text.
std::string PythonStr(Expr e, const std::map<std::string, std::string>& symbols);
// Deterministic total order (sympy's sort order for atoms: symbols by name first).
bool ExprLess(Expr a, Expr b);
struct ExprLessFn {
  bool operator()(Expr a, Expr b) const { return ExprLess(a, b); }
};
using ExprSet = std::set<Expr, ExprLessFn>;
void FreeSymbols(Expr e, ExprSet* out);
ExprSet FreeSymbols(Expr e);
bool HasSymbols(Expr e);

// Replaces symbols (or any subexpression) by the map, re-canonicalising bottom up.
Expr Substitute(Expr e, const std::map<Expr, Expr>& subs);
// Rewrites every node bottom-up with `fn` (which gets the node rebuilt over rewritten args).
Expr Transform(Expr e, const std::function<Expr(Expr)>& fn);

// A concrete value: int (also bools, 0/1) or float.
struct Value {
  bool is_float = false;
  int64_t i = 0;
  double f = 0;
  double as_double() const { return is_float ? f : static_cast<double>(i); }
};
// Evaluates with values for the symbols; nullopt when a symbol has no value.
std::optional<Value> Evaluate(Expr e, const std::map<Expr, Value>& values);

// --- value ranges -------------------------------------------------------------------------------
// Note [Value ranges]: an integer interval [lo, hi]; kNegInf/kPosInf stand for unbounded ends and
// arithmetic on them saturates. Bounds of an expression are computed from its symbols' ranges by
// interval arithmetic; a relation is decided statically when the range of (lhs - rhs) decides it.
constexpr int64_t kNegInf = INT64_MIN;
constexpr int64_t kPosInf = INT64_MAX;
struct ValueRange {
  int64_t lo = kNegInf, hi = kPosInf;
  bool is_singleton() const { return lo == hi && lo != kNegInf && lo != kPosInf; }
  bool contains(int64_t v) const { return lo <= v && v <= hi; }
  std::string str() const;
};
using RangeMap = std::map<Expr, ValueRange>;
ValueRange Bound(Expr e, const RangeMap& ranges);
// True/false when the ranges decide a boolean expression, nullopt otherwise.
std::optional<bool> StaticEval(Expr e, const RangeMap& ranges);

// Integer floor division and modulo with Python's semantics.
int64_t PyFloorDiv(int64_t a, int64_t b);
int64_t PyMod(int64_t a, int64_t b);

}  // namespace kiln::fx
