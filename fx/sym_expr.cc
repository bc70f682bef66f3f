// fx/sym_expr.cc: hash-consed expression nodes, canonical polynomials, evaluation, value ranges
// (printing: sym_expr_print.cc).
#include "fx/sym_expr.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <mutex>
#include <numeric>
#include <unordered_set>

#include "runtime/error.h"

namespace kiln::fx {

int64_t PyFloorDiv(int64_t a, int64_t b) {
  KILN_CHECK(b != 0, "ZeroDivisionError: integer division or modulo by zero in a symbolic expression");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t PyMod(int64_t a, int64_t b) { return a - PyFloorDiv(a, b) * b; }

// --- interning ---------------------------------------------------------------------------------
namespace {

size_t HashNode(const ExprNode& n) {
  size_t h = static_cast<size_t>(n.kind) * 0x9e3779b97f4a7c15ull + n.is_float;
  auto mix = [&](size_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
  mix(std::hash<int64_t>()(n.ival));
  uint64_t fb;
  std::memcpy(&fb, &n.fval, sizeof(fb));
  mix(fb);
  mix(std::hash<std::string>()(n.name));
  for (Expr a : n.args) mix(std::hash<const void*>()(a));
  return h;
}
struct NodeHash {
  size_t operator()(const ExprNode* n) const { return n->hash; }
};
struct NodeEq {
  bool operator()(const ExprNode* a, const ExprNode* b) const {
    return a->kind == b->kind && a->is_float == b->is_float && a->ival == b->ival &&
           std::memcmp(&a->fval, &b->fval, sizeof(double)) == 0 && a->name == b->name && a->args == b->args;
  }
};

Expr Intern(ExprNode n) {
  static std::mutex mu;
  static auto* table = new std::unordered_set<const ExprNode*, NodeHash, NodeEq>();
  n.hash = HashNode(n);
  std::lock_guard<std::mutex> lock(mu);
  auto it = table->find(&n);
  if (it != table->end()) return *it;
  auto* node = new ExprNode(std::move(n));
  table->insert(node);
  return node;
}

Expr Raw(ExprKind kind, std::vector<Expr> args, bool is_float = false, int64_t ival = 0) {
  ExprNode n;
  n.kind = kind;
  n.args = std::move(args);
  n.is_float = is_float;
  n.ival = ival;
  return Intern(std::move(n));
}

int KindRank(ExprKind k) {
  switch (k) {
    case ExprKind::kInteger: case ExprKind::kFloat: case ExprKind::kBool: return 0;
    case ExprKind::kSymbol: return 1;
    default: return 2 + static_cast<int>(k);
  }
}

}  // namespace

bool ExprLess(Expr a, Expr b) {
  if (a == b) return false;
  int ra = KindRank(a->kind), rb = KindRank(b->kind);
  if (ra != rb) return ra < rb;
  if (ra == 0) {
    double x = a->kind == ExprKind::kFloat ? a->fval : static_cast<double>(a->ival);
    double y = b->kind == ExprKind::kFloat ? b->fval : static_cast<double>(b->ival);
    if (x != y) return x < y;
    return a->kind < b->kind;
  }
  if (ra == 1) {
    if (a->name != b->name) return a->name < b->name;
    return a->is_float < b->is_float;
  }
  if (a->ival != b->ival) return a->ival < b->ival;
  size_t n = std::min(a->args.size(), b->args.size());
  for (size_t i = 0; i < n; ++i)
    if (a->args[i] != b->args[i]) return ExprLess(a->args[i], b->args[i]);
  return a->args.size() < b->args.size();
}

Expr Int(int64_t v) {
  ExprNode n;
  n.kind = ExprKind::kInteger;
  n.ival = v;
  return Intern(std::move(n));
}
Expr Float(double v) {
  ExprNode n;
  n.kind = ExprKind::kFloat;
  n.is_float = true;
  n.fval = v;
  return Intern(std::move(n));
}
Expr Bool(bool v) {
  ExprNode n;
  n.kind = ExprKind::kBool;
  n.ival = v;
  return Intern(std::move(n));
}
Expr True() { return Bool(true); }
Expr False() { return Bool(false); }
Expr Symbol(const std::string& name, bool is_float) {
  ExprNode n;
  n.kind = ExprKind::kSymbol;
  n.name = name;
  n.is_float = is_float;
  return Intern(std::move(n));
}

// --- polynomials (Note [Canonical integer expressions]) ----------------------------------------
namespace {

using Monomial = std::vector<Expr>;  // atoms, sorted by ExprLess, repeated for powers
struct MonoLess {
  bool operator()(const Monomial& a, const Monomial& b) const {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), ExprLess);
  }
};
using Poly = std::map<Monomial, int64_t, MonoLess>;

Poly PolyMul(const Poly& a, const Poly& b) {
  Poly out;
  for (const auto& [ma, ca] : a)
    for (const auto& [mb, cb] : b) {
      Monomial m;
      std::merge(ma.begin(), ma.end(), mb.begin(), mb.end(), std::back_inserter(m), ExprLess);
      out[m] += ca * cb;
    }
  return out;
}

Poly ToPoly(Expr e) {
  switch (e->kind) {
    case ExprKind::kInteger: return e->ival == 0 ? Poly{} : Poly{{Monomial{}, e->ival}};
    case ExprKind::kAdd: {
      Poly out;
      for (Expr a : e->args)
        for (const auto& [m, c] : ToPoly(a)) out[m] += c;
      return out;
    }
    case ExprKind::kMul: {
      Poly out{{Monomial{}, 1}};
      for (Expr a : e->args) out = PolyMul(out, ToPoly(a));
      return out;
    }
    case ExprKind::kPow: {
      Poly base = ToPoly(e->args[0]), out{{Monomial{}, 1}};
      for (int64_t i = 0; i < e->ival; ++i) out = PolyMul(out, base);
      return out;
    }
    default: return Poly{{Monomial{e}, 1}};
  }
}

// Sympy's lex order of terms: the first atom (in atom order) whose exponents differ decides,
// higher exponent first; constants come last.
bool TermBefore(const Monomial& a, const Monomial& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    Expr x = a[i], y = b[j];
    if (x == y) {
      size_t ei = 0, ej = 0;
      while (i < a.size() && a[i] == x) ++i, ++ei;
      while (j < b.size() && b[j] == y) ++j, ++ej;
      if (ei != ej) return ei > ej;
      continue;
    }
    return ExprLess(x, y);
  }
  return i < a.size();
}

Expr MonoTerm(int64_t coeff, const Monomial& m) {
  if (m.empty()) return Int(coeff);
  std::vector<Expr> factors;
  for (size_t i = 0; i < m.size();) {
    size_t j = i;
    while (j < m.size() && m[j] == m[i]) ++j;
    factors.push_back(j - i == 1 ? m[i] : Raw(ExprKind::kPow, {m[i]}, false, static_cast<int64_t>(j - i)));
    i = j;
  }
  if (coeff == 1 && factors.size() == 1) return factors[0];
  if (coeff != 1) factors.insert(factors.begin(), Int(coeff));
  return Raw(ExprKind::kMul, std::move(factors));
}

Expr FromPoly(const Poly& p) {
  std::vector<std::pair<Monomial, int64_t>> terms;
  for (const auto& [m, c] : p)
    if (c != 0) terms.emplace_back(m, c);
  if (terms.empty()) return Int(0);
  std::stable_sort(terms.begin(), terms.end(), [](const auto& x, const auto& y) { return TermBefore(x.first, y.first); });
  if (terms.size() == 1) return MonoTerm(terms[0].second, terms[0].first);
  std::vector<Expr> args;
  for (const auto& [m, c] : terms) args.push_back(MonoTerm(c, m));
  return Raw(ExprKind::kAdd, std::move(args));
}

bool EitherFloat(Expr a, Expr b) { return a->is_float || b->is_float; }
double NumOf(Expr e) { return e->kind == ExprKind::kFloat ? e->fval : static_cast<double>(e->ival); }

void CheckArith(Expr a, const char* op) {
  KILN_CHECK(!a->is_boolean(), "unsupported operand for ", op, ": a symbolic bool (", Str(a), ")");
}

// m / d for monomials (multisets of atoms), if d divides m.
bool DivideMono(const Monomial& m, const Monomial& d, Monomial* out) {
  *out = m;
  for (Expr x : d) {
    auto it = std::find(out->begin(), out->end(), x);
    if (it == out->end()) return false;
    out->erase(it);
  }
  return true;
}

// For a divisor b = c*m (one term, c > 0, m not empty) dividing every term of a by m: q = a / m.
bool DivideOut(Expr a, Expr b, Poly* q, Monomial* m, int64_t* c) {
  Poly pb = ToPoly(b);
  if (pb.size() != 1 || pb.begin()->first.empty() || pb.begin()->second <= 0) return false;
  *m = pb.begin()->first;
  *c = pb.begin()->second;
  q->clear();
  for (const auto& [ma, ca] : ToPoly(a)) {
    Monomial r;
    if (!DivideMono(ma, *m, &r)) return false;
    (*q)[r] += ca;
  }
  return true;
}

}  // namespace

Expr Add(Expr a, Expr b) {
  CheckArith(a, "+");
  CheckArith(b, "+");
  if (EitherFloat(a, b)) {
    if (a->is_number() && b->is_number()) return Float(NumOf(a) + NumOf(b));
    if (a->is_number() && NumOf(a) == 0) return ToFloat(b);
    if (b->is_number() && NumOf(b) == 0) return ToFloat(a);
    return Raw(ExprKind::kAdd, {ToFloat(a), ToFloat(b)}, true);
  }
  if (a->is_integer() && b->is_integer()) return Int(a->ival + b->ival);
  Poly p = ToPoly(a);
  for (const auto& [m, c] : ToPoly(b)) p[m] += c;
  return FromPoly(p);
}

Expr Neg(Expr a) { return Mul(Int(-1), a); }
Expr Sub(Expr a, Expr b) {
  if (EitherFloat(a, b)) {
    if (a->is_number() && b->is_number()) return Float(NumOf(a) - NumOf(b));
    return Add(a, Mul(Float(-1.0), b));
  }
  return Add(a, Neg(b));
}

Expr Mul(Expr a, Expr b) {
  CheckArith(a, "*");
  CheckArith(b, "*");
  if (EitherFloat(a, b)) {
    if (a->is_number() && b->is_number()) return Float(NumOf(a) * NumOf(b));
    if (a->is_number() && NumOf(a) == 1) return ToFloat(b);
    if (b->is_number() && NumOf(b) == 1) return ToFloat(a);
    return Raw(ExprKind::kMul, {ToFloat(a), ToFloat(b)}, true);
  }
  if (a->is_integer() && b->is_integer()) return Int(a->ival * b->ival);
  return FromPoly(PolyMul(ToPoly(a), ToPoly(b)));
}

Expr Pow(Expr a, int64_t n) {
  KILN_CHECK(n >= 0, "negative powers of symbolic integers are not supported");
  Expr out = Int(1);
  for (int64_t i = 0; i < n; ++i) out = Mul(out, a);
  return out;
}

Expr FloorDiv(Expr a, Expr b) {
  CheckArith(a, "//");
  CheckArith(b, "//");
  if (EitherFloat(a, b)) {
    if (a->is_number() && b->is_number()) {
      KILN_CHECK(NumOf(b) != 0, "ZeroDivisionError: float floor division by zero");
      return Float(std::floor(NumOf(a) / NumOf(b)));
    }
    return Raw(ExprKind::kFloorDiv, {ToFloat(a), ToFloat(b)}, true);
  }
  if (b->is_integer()) {
    const int64_t c = b->ival;
    KILN_CHECK(c != 0, "ZeroDivisionError: integer division or modulo by zero in a symbolic expression");
    if (a->is_integer()) return Int(PyFloorDiv(a->ival, c));
    if (c == 1) return a;
    if (c > 0) {
      // a = c*q + rest  =>  a // c = q + rest // c  (q collects the terms c divides).
      Poly q, rest;
      for (const auto& [m, coeff] : ToPoly(a)) {
        if (m.empty()) {
          q[m] += PyFloorDiv(coeff, c);
          if (PyMod(coeff, c) != 0) rest[m] += PyMod(coeff, c);
        } else if (coeff % c == 0) {
          q[m] += coeff / c;
        } else {
          rest[m] += coeff;
        }
      }
      Expr qe = FromPoly(q);
      if (rest.empty()) return qe;
      int64_t g = c;
      for (const auto& [m, coeff] : rest) g = std::gcd(g, coeff);
      if (g > 1)
        for (auto& [m, coeff] : rest) coeff /= g;
      Expr re = FromPoly(rest);
      int64_t d = c / g;
      Expr tail;
      if (d == 1) tail = re;
      // (x // e) // d -> x // (e*d) for positive constants.
      else if (re->kind == ExprKind::kFloorDiv && re->args[1]->is_integer() && re->args[1]->ival > 0)
        tail = FloorDiv(re->args[0], Int(re->args[1]->ival * d));
      else tail = Raw(ExprKind::kFloorDiv, {re, Int(d)});
      return Add(qe, tail);
    }
    return Raw(ExprKind::kFloorDiv, {a, b});
  }
  if (a == b) return Int(1);
  // b = c*m (one term): (m*q) // (c*m) -> q // c when m divides every term of a.
  Poly q;
  int64_t cb;
  Monomial mb;
  if (DivideOut(a, b, &q, &mb, &cb)) return FloorDiv(FromPoly(q), Int(cb));
  return Raw(ExprKind::kFloorDiv, {a, b});
}

Expr Mod(Expr a, Expr b) {
  CheckArith(a, "%");
  CheckArith(b, "%");
  if (EitherFloat(a, b)) {
    if (a->is_number() && b->is_number()) {
      double x = NumOf(a), y = NumOf(b);
      KILN_CHECK(y != 0, "ZeroDivisionError: float modulo");
      return Float(x - std::floor(x / y) * y);
    }
    return Raw(ExprKind::kMod, {ToFloat(a), ToFloat(b)}, true);
  }
  if (b->is_integer()) {
    const int64_t c = b->ival;
    KILN_CHECK(c != 0, "ZeroDivisionError: integer division or modulo by zero in a symbolic expression");
    if (a->is_integer()) return Int(PyMod(a->ival, c));
    if (c == 1 || c == -1) return Int(0);
    if (c > 0) {
      Poly rest;
      for (const auto& [m, coeff] : ToPoly(a)) {
        int64_t r = PyMod(coeff, c);
        if (r != 0) rest[m] += r;
      }
      if (rest.empty()) return Int(0);
      if (rest.size() == 1 && rest.begin()->first.empty()) return Int(PyMod(rest.begin()->second, c));
      int64_t g = c;
      for (const auto& [m, coeff] : rest) g = std::gcd(g, coeff);
      if (g > 1) {
        for (auto& [m, coeff] : rest) coeff /= g;
        return Mul(Int(g), Mod(FromPoly(rest), Int(c / g)));
      }
      Expr re = FromPoly(rest);
      // Mod(Mod(x, d), c) -> Mod(x, c) when c divides d.
      if (re->kind == ExprKind::kMod && re->args[1]->is_integer() && re->args[1]->ival % c == 0)
        return Mod(re->args[0], b);
      return Raw(ExprKind::kMod, {re, b});
    }
    return Raw(ExprKind::kMod, {a, b});
  }
  if (a == b || (a->is_integer() && a->ival == 0)) return Int(0);
  // (m*q) % (c*m) -> m * (q % c).
  Poly q;
  int64_t cb;
  Monomial mb;
  if (DivideOut(a, b, &q, &mb, &cb)) return Mul(MonoTerm(1, mb), Mod(FromPoly(q), Int(cb)));
  return Raw(ExprKind::kMod, {a, b});
}

namespace {
Expr MinMax(ExprKind kind, Expr a, Expr b) {
  CheckArith(a, kind == ExprKind::kMin ? "min" : "max");
  CheckArith(b, kind == ExprKind::kMin ? "min" : "max");
  const bool is_min = kind == ExprKind::kMin;
  if (a->is_number() && b->is_number()) {
    if (EitherFloat(a, b)) return Float(is_min ? std::min(NumOf(a), NumOf(b)) : std::max(NumOf(a), NumOf(b)));
    return Int(is_min ? std::min(a->ival, b->ival) : std::max(a->ival, b->ival));
  }
  if (a == b) return a;
  // The constant difference decides: Max(s0 + 1, s0) -> s0 + 1.
  if (!EitherFloat(a, b)) {
    Expr d = Sub(a, b);
    if (d->is_integer()) return (d->ival >= 0) != is_min ? a : b;
  }
  bool fl = EitherFloat(a, b);
  if (fl) a = ToFloat(a), b = ToFloat(b);
  if (ExprLess(b, a)) std::swap(a, b);
  return Raw(kind, {a, b}, fl);
}
}  // namespace

Expr Min(Expr a, Expr b) { return MinMax(ExprKind::kMin, a, b); }
Expr Max(Expr a, Expr b) { return MinMax(ExprKind::kMax, a, b); }

Expr ToFloat(Expr a) {
  if (a->is_float) return a;
  if (a->is_integer()) return Float(static_cast<double>(a->ival));
  KILN_CHECK(!a->is_boolean(), "cannot convert the symbolic bool ", Str(a), " to float");
  return Raw(ExprKind::kToFloat, {a}, true);
}

Expr Trunc(Expr a) {
  if (!a->is_float) return a;
  if (a->kind == ExprKind::kFloat) return Int(static_cast<int64_t>(std::trunc(a->fval)));
  if (a->kind == ExprKind::kToFloat) return a->args[0];
  return Raw(ExprKind::kTrunc, {a});
}

Expr TrueDiv(Expr a, Expr b) {
  CheckArith(a, "/");
  CheckArith(b, "/");
  if (a->is_number() && b->is_number()) {
    KILN_CHECK(NumOf(b) != 0, "ZeroDivisionError: division by zero");
    return Float(NumOf(a) / NumOf(b));
  }
  if (b->is_number() && NumOf(b) == 1) return ToFloat(a);
  return Raw(ExprKind::kTrueDiv, {a, b}, true);
}

// --- relations and connectives --------------------------------------------------------------------
namespace {
bool Compare(ExprKind kind, double d) {  // d = lhs - rhs
  switch (kind) {
    case ExprKind::kEq: return d == 0;
    case ExprKind::kNe: return d != 0;
    case ExprKind::kLt: return d < 0;
    case ExprKind::kLe: return d <= 0;
    case ExprKind::kGt: return d > 0;
    case ExprKind::kGe: return d >= 0;
    default: KILN_INTERNAL_ASSERT(false, "not a relation");
  }
  return false;
}
}  // namespace

Expr Rel(ExprKind kind, Expr a, Expr b) {
  KILN_INTERNAL_ASSERT(kind >= ExprKind::kEq && kind <= ExprKind::kGe);
  if (a->is_boolean() || b->is_boolean()) {
    KILN_CHECK(kind == ExprKind::kEq || kind == ExprKind::kNe, "cannot order symbolic bools");
    if (a->is_bool_const()) std::swap(a, b);
    if (b->is_bool_const()) {
      if (a->is_bool_const()) return Bool((a == b) == (kind == ExprKind::kEq));
      return (b->ival != 0) == (kind == ExprKind::kEq) ? a : Not(a);
    }
    return Raw(kind, {a, b});
  }
  if (EitherFloat(a, b)) {
    if (a->is_number() && b->is_number()) return Bool(Compare(kind, NumOf(a) - NumOf(b)));
    return Raw(kind, {a, b});
  }
  if (a->is_integer() && b->is_integer()) return Bool(Compare(kind, static_cast<double>(a->ival - b->ival)));
  Expr d = Sub(a, b);
  if (d->is_integer()) return Bool(Compare(kind, static_cast<double>(d->ival)));
  return Raw(kind, {a, b});
}
Expr Eq(Expr a, Expr b) { return Rel(ExprKind::kEq, a, b); }
Expr Ne(Expr a, Expr b) { return Rel(ExprKind::kNe, a, b); }
Expr Lt(Expr a, Expr b) { return Rel(ExprKind::kLt, a, b); }
Expr Le(Expr a, Expr b) { return Rel(ExprKind::kLe, a, b); }
Expr Gt(Expr a, Expr b) { return Rel(ExprKind::kGt, a, b); }
Expr Ge(Expr a, Expr b) { return Rel(ExprKind::kGe, a, b); }

Expr Not(Expr a) {
  switch (a->kind) {
    case ExprKind::kBool: return Bool(!a->ival);
    case ExprKind::kNot: return a->args[0];
    case ExprKind::kEq: return Raw(ExprKind::kNe, a->args);
    case ExprKind::kNe: return Raw(ExprKind::kEq, a->args);
    case ExprKind::kLt: return Raw(ExprKind::kGe, a->args);
    case ExprKind::kGe: return Raw(ExprKind::kLt, a->args);
    case ExprKind::kLe: return Raw(ExprKind::kGt, a->args);
    case ExprKind::kGt: return Raw(ExprKind::kLe, a->args);
    default:
      KILN_CHECK(a->is_boolean() || a->kind == ExprKind::kAnd || a->kind == ExprKind::kOr,
                 "sym_not expects a symbolic bool, got ", Str(a));
      return Raw(ExprKind::kNot, {a});
  }
}

namespace {
Expr Connective(ExprKind kind, Expr a, Expr b) {
  const bool is_and = kind == ExprKind::kAnd;
  if (a->is_bool_const()) std::swap(a, b);
  if (b->is_bool_const()) {
    if (a->is_bool_const()) return Bool(is_and ? (a->ival && b->ival) : (a->ival || b->ival));
    return (b->ival != 0) == is_and ? a : b;
  }
  if (a == b) return a;
  if (Not(a) == b) return Bool(!is_and);
  if (ExprLess(b, a)) std::swap(a, b);
  return Raw(kind, {a, b});
}
}  // namespace
Expr And(Expr a, Expr b) { return Connective(ExprKind::kAnd, a, b); }
Expr Or(Expr a, Expr b) { return Connective(ExprKind::kOr, a, b); }

Expr Rebuild(Expr e, const std::vector<Expr>& args) {
  if (args == e->args) return e;
  switch (e->kind) {
    case ExprKind::kAdd: {
      Expr out = args[0];
      for (size_t i = 1; i < args.size(); ++i) out = Add(out, args[i]);
      return out;
    }
    case ExprKind::kMul: {
      Expr out = args[0];
      for (size_t i = 1; i < args.size(); ++i) out = Mul(out, args[i]);
      return out;
    }
    case ExprKind::kPow: return e->is_float ? Raw(ExprKind::kPow, args, true, e->ival) : Pow(args[0], e->ival);
    case ExprKind::kFloorDiv: return FloorDiv(args[0], args[1]);
    case ExprKind::kMod: return Mod(args[0], args[1]);
    case ExprKind::kMin: return Min(args[0], args[1]);
    case ExprKind::kMax: return Max(args[0], args[1]);
    case ExprKind::kTrueDiv: return TrueDiv(args[0], args[1]);
    case ExprKind::kToFloat: return ToFloat(args[0]);
    case ExprKind::kTrunc: return Trunc(args[0]);
    case ExprKind::kNot: return Not(args[0]);
    case ExprKind::kAnd: return And(args[0], args[1]);
    case ExprKind::kOr: return Or(args[0], args[1]);
    default:
      if (e->is_relation()) return Rel(e->kind, args[0], args[1]);
      return e;
  }
}

Expr Transform(Expr e, const std::function<Expr(Expr)>& fn) {
  if (e->args.empty()) return fn(e);
  std::vector<Expr> args;
  args.reserve(e->args.size());
  for (Expr a : e->args) args.push_back(Transform(a, fn));
  return fn(Rebuild(e, args));
}

Expr Substitute(Expr e, const std::map<Expr, Expr>& subs) {
  if (subs.empty()) return e;
  auto it = subs.find(e);
  if (it != subs.end()) return it->second;
  if (e->args.empty()) return e;
  std::vector<Expr> args;
  args.reserve(e->args.size());
  for (Expr a : e->args) args.push_back(Substitute(a, subs));
  Expr out = Rebuild(e, args);
  auto again = subs.find(out);
  return again != subs.end() ? again->second : out;
}

void FreeSymbols(Expr e, ExprSet* out) {
  if (e->is_symbol()) out->insert(e);
  for (Expr a : e->args) FreeSymbols(a, out);
}
ExprSet FreeSymbols(Expr e) {
  ExprSet s;
  FreeSymbols(e, &s);
  return s;
}
bool HasSymbols(Expr e) {
  if (e->is_symbol()) return true;
  for (Expr a : e->args)
    if (HasSymbols(a)) return true;
  return false;
}

// --- evaluation ------------------------------------------------------------------------------------
std::optional<Value> Evaluate(Expr e, const std::map<Expr, Value>& values) {
  auto I = [](int64_t v) { Value x; x.i = v; return x; };
  auto F = [](double v) { Value x; x.is_float = true; x.f = v; return x; };
  switch (e->kind) {
    case ExprKind::kInteger: case ExprKind::kBool: return I(e->ival);
    case ExprKind::kFloat: return F(e->fval);
    case ExprKind::kSymbol: {
      auto it = values.find(e);
      if (it == values.end()) return std::nullopt;
      return it->second;
    }
    default: break;
  }
  std::vector<Value> a;
  for (Expr x : e->args) {
    auto v = Evaluate(x, values);
    if (!v) return std::nullopt;
    a.push_back(*v);
  }
  bool fl = false;
  for (const auto& v : a) fl = fl || v.is_float;
  switch (e->kind) {
    case ExprKind::kAdd: {
      if (fl) { double s = 0; for (auto& v : a) s += v.as_double(); return F(s); }
      int64_t s = 0; for (auto& v : a) s += v.i; return I(s);
    }
    case ExprKind::kMul: {
      if (fl) { double s = 1; for (auto& v : a) s *= v.as_double(); return F(s); }
      int64_t s = 1; for (auto& v : a) s *= v.i; return I(s);
    }
    case ExprKind::kPow: {
      if (fl) return F(std::pow(a[0].as_double(), static_cast<double>(e->ival)));
      int64_t s = 1; for (int64_t i = 0; i < e->ival; ++i) s *= a[0].i; return I(s);
    }
    case ExprKind::kFloorDiv:
      if (fl) return F(std::floor(a[0].as_double() / a[1].as_double()));
      if (a[1].i == 0) return std::nullopt;
      return I(PyFloorDiv(a[0].i, a[1].i));
    case ExprKind::kMod:
      if (fl) { double x = a[0].as_double(), y = a[1].as_double(); return F(x - std::floor(x / y) * y); }
      if (a[1].i == 0) return std::nullopt;
      return I(PyMod(a[0].i, a[1].i));
    case ExprKind::kMin:
      if (fl) return F(std::min(a[0].as_double(), a[1].as_double()));
      return I(std::min(a[0].i, a[1].i));
    case ExprKind::kMax:
      if (fl) return F(std::max(a[0].as_double(), a[1].as_double()));
      return I(std::max(a[0].i, a[1].i));
    case ExprKind::kTrueDiv: return F(a[0].as_double() / a[1].as_double());
    case ExprKind::kToFloat: return F(a[0].as_double());
    case ExprKind::kTrunc: return I(static_cast<int64_t>(std::trunc(a[0].as_double())));
    case ExprKind::kNot: return I(!a[0].i);
    case ExprKind::kAnd: return I(a[0].i && a[1].i);
    case ExprKind::kOr: return I(a[0].i || a[1].i);
    default: break;
  }
  if (e->is_relation()) {
    if (fl) return I(Compare(e->kind, a[0].as_double() - a[1].as_double()));
    int64_t x = a[0].i, y = a[1].i;
    return I(Compare(e->kind, x < y ? -1.0 : x > y ? 1.0 : 0.0));
  }
  return std::nullopt;
}

// --- value ranges (Note [Value ranges]) --------------------------------------------------------------
namespace {

int64_t SatAdd(int64_t a, int64_t b) {
  if (a == kNegInf || b == kNegInf) return (a == kPosInf || b == kPosInf) ? 0 : kNegInf;
  if (a == kPosInf || b == kPosInf) return kPosInf;
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return a > 0 ? kPosInf : kNegInf;
  return r;
}
int64_t SatMul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  bool neg = (a < 0) != (b < 0);
  if (a == kNegInf || a == kPosInf || b == kNegInf || b == kPosInf) return neg ? kNegInf : kPosInf;
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return neg ? kNegInf : kPosInf;
  return r;
}
ValueRange RAdd(ValueRange a, ValueRange b) {
  ValueRange r{SatAdd(a.lo, b.lo), SatAdd(a.hi, b.hi)};
  if (a.lo == kNegInf || b.lo == kNegInf) r.lo = kNegInf;
  if (a.hi == kPosInf || b.hi == kPosInf) r.hi = kPosInf;
  return r;
}
ValueRange RMul(ValueRange a, ValueRange b) {
  int64_t c[4] = {SatMul(a.lo, b.lo), SatMul(a.lo, b.hi), SatMul(a.hi, b.lo), SatMul(a.hi, b.hi)};
  return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
}
const ValueRange kUnknown{};

}  // namespace

std::string ValueRange::str() const {
  auto s = [](int64_t v) { return v == kNegInf ? std::string("-oo") : v == kPosInf ? std::string("oo") : std::to_string(v); };
  return "[" + s(lo) + ", " + s(hi) + "]";
}

ValueRange Bound(Expr e, const RangeMap& ranges) {
  if (e->is_float) return kUnknown;
  switch (e->kind) {
    case ExprKind::kInteger: case ExprKind::kBool: return {e->ival, e->ival};
    case ExprKind::kSymbol: {
      auto it = ranges.find(e);
      return it == ranges.end() ? kUnknown : it->second;
    }
    case ExprKind::kAdd: {
      ValueRange r{0, 0};
      for (Expr a : e->args) r = RAdd(r, Bound(a, ranges));
      // A factor common to every term bounds the sum better: s0*s1 - s1 = s1*(s0 - 1).
      Poly p = ToPoly(e);
      Monomial common = p.begin()->first;
      for (const auto& [m, c] : p) {
        Monomial keep;
        std::set_intersection(common.begin(), common.end(), m.begin(), m.end(), std::back_inserter(keep), ExprLess);
        common = keep;
      }
      if (!common.empty()) {
        Poly q;
        for (const auto& [m, c] : p) {
          Monomial rest;
          DivideMono(m, common, &rest);
          q[rest] += c;
        }
        ValueRange f = RMul(Bound(MonoTerm(1, common), ranges), Bound(FromPoly(q), ranges));
        r.lo = std::max(r.lo, f.lo);
        r.hi = std::min(r.hi, f.hi);
      }
      return r;
    }
    case ExprKind::kMul: {
      ValueRange r{1, 1};
      for (Expr a : e->args) r = RMul(r, Bound(a, ranges));
      return r;
    }
    case ExprKind::kPow: {
      ValueRange b = Bound(e->args[0], ranges), r{1, 1};
      for (int64_t i = 0; i < e->ival; ++i) r = RMul(r, b);
      if (e->ival % 2 == 0) r.lo = std::max<int64_t>(r.lo, 0);
      return r;
    }
    case ExprKind::kFloorDiv: {
      ValueRange a = Bound(e->args[0], ranges), b = Bound(e->args[1], ranges);
      if (b.lo <= 0) return kUnknown;
      auto div = [](int64_t x, int64_t y) -> int64_t {
        if (x == kNegInf || x == kPosInf) return x;
        if (y == kPosInf) return x >= 0 ? 0 : -1;
        return PyFloorDiv(x, y);
      };
      int64_t c[4] = {div(a.lo, b.lo), div(a.lo, b.hi), div(a.hi, b.lo), div(a.hi, b.hi)};
      return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
    }
    case ExprKind::kMod: {
      ValueRange a = Bound(e->args[0], ranges), b = Bound(e->args[1], ranges);
      if (b.lo <= 0) return kUnknown;
      if (a.lo >= 0 && a.hi != kPosInf && b.lo != kPosInf && a.hi < b.lo) return a;
      return {0, b.hi == kPosInf ? kPosInf : b.hi - 1};
    }
    case ExprKind::kMin: case ExprKind::kMax: {
      ValueRange a = Bound(e->args[0], ranges), b = Bound(e->args[1], ranges);
      if (e->kind == ExprKind::kMin) return {std::min(a.lo, b.lo), std::min(a.hi, b.hi)};
      return {std::max(a.lo, b.lo), std::max(a.hi, b.hi)};
    }
    default: return kUnknown;
  }
}

std::optional<bool> StaticEval(Expr e, const RangeMap& ranges) {
  if (e->is_bool_const()) return e->ival != 0;
  if (e->is_relation()) {
    if (e->args[0]->is_float || e->args[1]->is_float || e->args[0]->is_boolean()) return std::nullopt;
    ValueRange d = Bound(Sub(e->args[0], e->args[1]), ranges);
    switch (e->kind) {
      case ExprKind::kEq:
        if (d.lo == 0 && d.hi == 0) return true;
        if (!d.contains(0)) return false;
        return std::nullopt;
      case ExprKind::kNe:
        if (d.lo == 0 && d.hi == 0) return false;
        if (!d.contains(0)) return true;
        return std::nullopt;
      case ExprKind::kLt:
        if (d.hi != kPosInf && d.hi < 0) return true;
        if (d.lo >= 0) return false;
        return std::nullopt;
      case ExprKind::kLe:
        if (d.hi <= 0) return true;
        if (d.lo != kNegInf && d.lo > 0) return false;
        return std::nullopt;
      case ExprKind::kGt:
        if (d.lo != kNegInf && d.lo > 0) return true;
        if (d.hi <= 0) return false;
        return std::nullopt;
      case ExprKind::kGe:
        if (d.lo >= 0) return true;
        if (d.hi != kPosInf && d.hi < 0) return false;
        return std::nullopt;
      default: break;
    }
  }
  if (e->kind == ExprKind::kNot) {
    auto v = StaticEval(e->args[0], ranges);
    if (v) return !*v;
    return std::nullopt;
  }
  if (e->kind == ExprKind::kAnd || e->kind == ExprKind::kOr) {
    auto a = StaticEval(e->args[0], ranges), b = StaticEval(e->args[1], ranges);
    bool is_and = e->kind == ExprKind::kAnd;
    if ((a && *a != is_and) || (b && *b != is_and)) return !is_and;
    if (a && b) return is_and;
  }
  return std::nullopt;
}

}  // namespace kiln::fx
