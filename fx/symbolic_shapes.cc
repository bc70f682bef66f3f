// fx/symbolic_shapes.cc: ShapeEnv (symbols, ranges, replacements, guards) and SymExprNode.
#include "fx/symbolic_shapes.h"

#include <algorithm>
#include <sstream>

#include "runtime/error.h"

namespace kiln::fx {

// --- SymExprNode -----------------------------------------------------------------------------

Expr SymExprNode::expr() const { return env_->Simplify(expr_); }
SymNodePtr SymExprNode::Make(Expr e) const { return env_->Wrap(env_->Simplify(e)); }
Expr SymExprNode::Other(const SymNodePtr& o) const {
  auto* n = dynamic_cast<SymExprNode*>(o.get());
  KILN_CHECK(n != nullptr, "cannot combine a symbolic value of a ShapeEnv with another kind of symbolic node");
  KILN_CHECK(n->env_ == env_, "cannot combine symbolic values of two different ShapeEnvs (", str(), " and ",
             n->str(), ")");
  return n->expr();
}

SymNodePtr SymExprNode::wrap_int(int64_t v) { return env_->Wrap(Int(v)); }
SymNodePtr SymExprNode::wrap_float(double v) { return env_->Wrap(Float(v)); }
SymNodePtr SymExprNode::wrap_bool(bool v) { return env_->Wrap(Bool(v)); }
SymNodePtr SymExprNode::add(const SymNodePtr& o) { return Make(Add(expr(), Other(o))); }
SymNodePtr SymExprNode::sub(const SymNodePtr& o) { return Make(Sub(expr(), Other(o))); }
SymNodePtr SymExprNode::mul(const SymNodePtr& o) { return Make(Mul(expr(), Other(o))); }
SymNodePtr SymExprNode::floordiv(const SymNodePtr& o) { return Make(FloorDiv(expr(), Other(o))); }
SymNodePtr SymExprNode::mod(const SymNodePtr& o) { return Make(Mod(expr(), Other(o))); }
SymNodePtr SymExprNode::min(const SymNodePtr& o) { return Make(Min(expr(), Other(o))); }
SymNodePtr SymExprNode::max(const SymNodePtr& o) { return Make(Max(expr(), Other(o))); }
SymNodePtr SymExprNode::eq(const SymNodePtr& o) { return Make(Eq(expr(), Other(o))); }
SymNodePtr SymExprNode::ne(const SymNodePtr& o) { return Make(Ne(expr(), Other(o))); }
SymNodePtr SymExprNode::lt(const SymNodePtr& o) { return Make(Lt(expr(), Other(o))); }
SymNodePtr SymExprNode::le(const SymNodePtr& o) { return Make(Le(expr(), Other(o))); }
SymNodePtr SymExprNode::gt(const SymNodePtr& o) { return Make(Gt(expr(), Other(o))); }
SymNodePtr SymExprNode::ge(const SymNodePtr& o) { return Make(Ge(expr(), Other(o))); }
SymNodePtr SymExprNode::truediv(const SymNodePtr& o) { return Make(TrueDiv(expr(), Other(o))); }
SymNodePtr SymExprNode::neg() { return Make(expr()->is_float ? Mul(Float(-1), expr()) : Neg(expr())); }
SymNodePtr SymExprNode::sym_float() { return Make(ToFloat(expr())); }
SymNodePtr SymExprNode::sym_int() { return Make(Trunc(expr())); }
SymNodePtr SymExprNode::sym_not() { return Make(Not(expr())); }
SymNodePtr SymExprNode::sym_and(const SymNodePtr& o) { return Make(And(expr(), Other(o))); }
SymNodePtr SymExprNode::sym_or(const SymNodePtr& o) { return Make(Or(expr(), Other(o))); }
SymNodePtr SymExprNode::pow(int64_t n) {
  if (expr()->is_float) {
    Expr out = Float(1);
    for (int64_t i = 0; i < n; ++i) out = Mul(out, expr());
    return Make(out);
  }
  return Make(Pow(expr(), n));
}

int64_t SymExprNode::guard_int(const char* file, int line) {
  return env_->GuardInt(expr(), env_->Location(file, line));
}
bool SymExprNode::guard_bool(const char* file, int line) {
  return env_->EvaluateExpr(expr(), env_->Location(file, line));
}
double SymExprNode::guard_float(const char* file, int line) {
  return env_->GuardFloat(expr(), env_->Location(file, line));
}
std::optional<int64_t> SymExprNode::maybe_as_int() {
  Expr e = expr();
  if (e->is_integer() || e->is_bool_const()) return e->ival;
  return std::nullopt;
}
bool SymExprNode::has_hint() const { return env_->Hint(expr()).has_value(); }
std::optional<Value> SymExprNode::hint() const { return env_->Hint(expr()); }

// --- ShapeEnv: symbols ---------------------------------------------------------------------------

std::shared_ptr<ShapeEnv> ShapeEnv::Create(Options options) {
  return std::shared_ptr<ShapeEnv>(new ShapeEnv(options));
}

SymNodePtr ShapeEnv::Wrap(Expr e) { return std::make_shared<SymExprNode>(shared_from_this(), e); }

SymInt ShapeEnv::ToSymInt(Expr e) {
  if (e->is_integer()) return SymInt(e->ival);
  return SymInt(Wrap(e));
}

Expr ShapeEnv::CreateSymbolExpr(int64_t hint, const std::string& source) {
  KILN_CHECK(hint >= 0, "ShapeEnv.create_symbol: sizes are non-negative, got ", hint);
  if (options_.specialize_zero_one && (hint == 0 || hint == 1)) return Int(hint);
  if (options_.duck_shape) {
    auto it = val_to_var_.find(hint);
    if (it != val_to_var_.end()) return Simplify(it->second);
  }
  Expr s = Symbol("s" + std::to_string(next_backed_++));
  var_to_val_[s] = hint;
  Value v;
  v.i = hint;
  hints_[s] = v;
  ValueRange r{options_.specialize_zero_one ? 2 : 0, kPosInf};
  ranges_[s] = r;
  base_ranges_[s] = r;
  if (!source.empty()) sources_[s] = source;
  val_to_var_.emplace(hint, s);
  return s;
}

SymInt ShapeEnv::CreateSymbol(int64_t hint, const std::string& source) {
  return ToSymInt(CreateSymbolExpr(hint, source));
}

SymInt ShapeEnv::CreateUnbackedSymInt(ValueRange range, bool size_like) {
  Expr u = Symbol("u" + std::to_string(next_unbacked_++));
  ranges_[u] = range;
  base_ranges_[u] = range;
  if (size_like) size_like_.insert(u);
  return SymInt(Wrap(u));
}

SymInt ShapeEnv::CreateUnbackedSymFloat() {
  Expr u = Symbol("zuf" + std::to_string(next_unbacked_float_++), /*is_float=*/true);
  return SymInt(Wrap(u));
}

SymNodePtr ShapeEnv::NewUnbackedSymInt(int64_t min, std::optional<int64_t> max, bool size_like) {
  return CreateUnbackedSymInt(ValueRange{min, max ? *max : kPosInf}, size_like).node();
}
SymNodePtr ShapeEnv::NewUnbackedSymFloat() { return CreateUnbackedSymFloat().node(); }

ShapeEnv::SymbolicLayout ShapeEnv::CreateSymbolicSizesStridesOffset(const DimVector& sizes, const DimVector& strides,
                                                                    int64_t offset, const std::string& source) {
  KILN_CHECK(sizes.size() == strides.size(), "create_symbolic_sizes_strides_storage_offset: ", sizes.size(),
             " sizes but ", strides.size(), " strides");
  const size_t n = sizes.size();
  SymbolicLayout out;
  std::vector<Expr> size_e(n), stride_e(n, nullptr);
  for (size_t d = 0; d < n; ++d) {
    std::string src = source.empty() ? "" : source + ".size()[" + std::to_string(d) + "]";
    size_e[d] = CreateSymbolExpr(sizes[d], src);
  }
  // Strides from the innermost dim out: a stride equal to (inner stride * inner size) at the
  // example values is that product; other strides get symbols of their own.
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (strides[a] != strides[b]) return strides[a] < strides[b];
    return a > b;
  });
  std::vector<std::pair<int64_t, Expr>> candidates = {{1, Int(1)}};
  for (size_t i : order) {
    for (const auto& [v, e] : candidates)
      if (v == strides[i]) { stride_e[i] = e; break; }
    if (!stride_e[i]) {
      std::string src = source.empty() ? "" : source + ".stride()[" + std::to_string(i) + "]";
      stride_e[i] = CreateSymbolExpr(strides[i], src);
    }
    candidates.emplace_back(strides[i] * sizes[i], Mul(stride_e[i], size_e[i]));
  }
  for (size_t d = 0; d < n; ++d) {
    out.sizes.push_back(ToSymInt(size_e[d]));
    out.strides.push_back(ToSymInt(stride_e[d]));
  }
  out.storage_offset = ToSymInt(CreateSymbolExpr(offset, source.empty() ? "" : source + ".storage_offset()"));
  return out;
}

ShapeEnv::SymbolicLayout ShapeEnv::CreateSymbolicSizesStridesOffset(const Tensor& t, const std::string& source) {
  KILN_CHECK(!t->is_symbolic(), "create_symbolic_sizes_strides_storage_offset: the tensor already has symbolic "
             "sizes ", SizesToString(t->sym_sizes()));
  return CreateSymbolicSizesStridesOffset(t.sizes(), t.strides(), t->storage_offset(), source);
}

// --- ShapeEnv: reasoning ---------------------------------------------------------------------------

Expr ShapeEnv::Simplify(Expr e) const {
  e = Substitute(e, replacements_);
  if (e->args.empty()) return e;
  return Transform(e, [&](Expr x) -> Expr {
    switch (x->kind) {
      case ExprKind::kMin:
      case ExprKind::kMax: {
        if (x->is_float) return x;
        auto ge = StaticEval(Ge(x->args[0], x->args[1]), ranges_);
        if (ge) return (*ge == (x->kind == ExprKind::kMax)) ? x->args[0] : x->args[1];
        return x;
      }
      case ExprKind::kMod:
      case ExprKind::kFloorDiv: {
        if (x->is_float) return x;
        ValueRange a = Bound(x->args[0], ranges_), b = Bound(x->args[1], ranges_);
        // 0 <= a < b: a % b == a and a // b == 0.
        if (a.lo >= 0 && b.lo > 0 && a.hi != kPosInf && a.hi < b.lo)
          return x->kind == ExprKind::kMod ? x->args[0] : Int(0);
        return x;
      }
      default: return x;
    }
  });
}

std::optional<Value> ShapeEnv::Hint(Expr e) const { return Evaluate(Simplify(e), hints_); }

std::optional<bool> ShapeEnv::StaticallyKnown(Expr cond) const {
  Expr e = Simplify(cond);
  if (e->is_bool_const()) return e->ival != 0;
  if (auto v = StaticEval(e, ranges_)) return v;
  Expr ne = Not(e);
  for (Expr f : facts_) {
    Expr sf = Simplify(f);
    if (sf == e) return true;
    if (sf == ne) return false;
    // A fact a == b decides relations between the same sides.
    if (sf->kind == ExprKind::kAnd && (sf->args[0] == e || sf->args[1] == e)) return true;
  }
  return std::nullopt;
}

std::string ShapeEnv::Location(const char* file, int line) const {
  std::string cpp = file && *file ? StrCat(file, ":", line) : "";
  std::string user = location_provider ? location_provider() : "";
  if (user.empty()) return cpp;
  if (cpp.empty()) return user;
  return user + " (" + cpp + ")";
}

void ShapeEnv::DataDependentError(Expr e, Expr unhinted, const std::string& location, bool is_int) const {
  std::ostringstream size_like;
  bool any = false;
  for (Expr s : FreeSymbols(e))
    if (size_like_.count(s)) size_like << (any ? ", " : "") << s->name, any = true;
  std::ostringstream os;
  if (is_int)
    os << "Could not extract specialized integer from data-dependent expression " << Str(e) << " (unhinted: "
       << Str(unhinted) << ").";
  else
    os << "Could not guard on data-dependent expression " << Str(e) << " (unhinted: " << Str(unhinted) << ").";
  os << "  (Size-like symbols: " << (any ? size_like.str() : "none") << ")\n\n";
  if (!location.empty()) os << "Caused by: " << location << "\n";
  os << "The value depends on data (an unbacked symbol from nonzero/item/...). Tell kiln what it may "
        "assume with kiln._check(...) (e.g. kiln._check("
     << Str(is_int ? Ge(e, Int(0)) : e) << ")) or kiln._check_is_size(...), or avoid branching on it.";
  throw GuardOnDataDependentSymNode(os.str());
}

bool ShapeEnv::EvaluateExpr(Expr cond, const std::string& location) {
  Expr e = Simplify(cond);
  KILN_CHECK(!e->is_float || e->is_boolean(), "cannot guard on the float expression ", Str(e), " as a bool");
  if (auto known = StaticallyKnown(e)) return *known;
  auto hint = Evaluate(e, hints_);
  if (!hint) DataDependentError(e, cond, location, false);
  bool v = hint->i != 0;
  RecordGuard(v ? e : Not(e), location);
  return v;
}

int64_t ShapeEnv::GuardInt(Expr e0, const std::string& location) {
  Expr e = Simplify(e0);
  KILN_CHECK(!e->is_float, "guard_int on the float expression ", Str(e));
  if (e->is_integer() || e->is_bool_const()) return e->ival;
  if (e->is_boolean()) return EvaluateExpr(e, location);
  ValueRange r = Bound(e, ranges_);
  if (r.is_singleton()) return r.lo;
  auto hint = Evaluate(e, hints_);
  if (!hint) DataDependentError(e, e0, location, true);
  RecordGuard(Eq(e, Int(hint->i)), location);
  return hint->i;
}

double ShapeEnv::GuardFloat(Expr e0, const std::string& location) {
  Expr e = Simplify(e0);
  if (e->is_number()) return e->kind == ExprKind::kFloat ? e->fval : static_cast<double>(e->ival);
  auto hint = Evaluate(e, hints_);
  if (!hint) DataDependentError(e, e0, location, true);
  RecordGuard(Eq(e, Float(hint->as_double())), location);
  return hint->as_double();
}

void ShapeEnv::Check(Expr cond, const std::string& location, const std::string& message) {
  Expr e = Simplify(cond);
  auto fail = [&] {
    throw Error(message.empty() ? StrCat("Expected cond to be True, but got False. (", Str(cond), ")") : message);
  };
  if (auto known = StaticallyKnown(e)) {
    if (!*known) fail();
    return;
  }
  auto hint = Evaluate(e, hints_);
  if (hint) {  // backed: a guard, as bool() would record
    if (!hint->i) fail();
    RecordGuard(e, location);
    return;
  }
  AddFact(e);  // unbacked: assumed from now on
}

void ShapeEnv::CheckIsSize(Expr e0, const std::string& location) {
  Expr e = Simplify(e0);
  if (e->is_symbol()) size_like_.insert(e);
  Check(Ge(e, Int(0)), location);
}

// --- ShapeEnv: facts, replacements, ranges -----------------------------------------------------------

void ShapeEnv::RecordGuard(Expr fact, const std::string& location) {
  guards_.push_back(Guard{fact, location});
  size_t idx = guards_.size() - 1;
  auto before = replacements_;
  AddFact(fact);
  for (const auto& [s, v] : replacements_)
    if (!before.count(s)) replacement_guard_[s] = idx;
}

void ShapeEnv::Refine(Expr sym, ValueRange r) {
  ValueRange& cur = ranges_[sym];
  cur.lo = std::max(cur.lo, r.lo);
  cur.hi = std::min(cur.hi, r.hi);
  if (cur.is_singleton()) Replace(sym, Int(cur.lo));
}

void ShapeEnv::Replace(Expr sym, Expr value) {
  if (Simplify(value) == sym) return;
  value = Simplify(value);
  std::map<Expr, Expr> one{{sym, value}};
  for (auto& [s, v] : replacements_) v = Substitute(v, one);
  replacements_[sym] = value;
  if (value->is_symbol()) {
    auto it = ranges_.find(sym);
    if (it != ranges_.end()) Refine(value, it->second);
  }
}

// Solves Eq(lhs, rhs) for a symbol that appears linearly (c*s + rest == 0 with c dividing rest),
// preferring unbacked symbols, then the newest one; a backed symbol is never replaced by an
// expression over unbacked ones.
bool ShapeEnv::TryReplace(Expr eq) {
  Expr d = Sub(eq->args[0], eq->args[1]);
  if (d->is_float) return false;
  std::vector<Expr> terms = d->kind == ExprKind::kAdd ? d->args : std::vector<Expr>{d};
  Expr best = nullptr, best_value = nullptr;
  for (Expr t : terms) {
    int64_t c = 1;
    Expr s = t;
    if (t->kind == ExprKind::kMul && t->args.size() == 2 && t->args[0]->is_integer()) c = t->args[0]->ival, s = t->args[1];
    if (!s->is_symbol() || s->is_float) continue;
    Expr rest = Sub(d, Mul(Int(c), s));
    if (FreeSymbols(rest).count(s)) continue;
    Expr value = FloorDiv(Neg(rest), Int(std::abs(c)));
    if (c < 0) value = Neg(value);
    if (Mul(Int(c), value) != Neg(rest)) continue;  // c does not divide the rest
    bool value_unbacked = false;
    for (Expr f : FreeSymbols(value)) value_unbacked = value_unbacked || IsUnbacked(f);
    if (!IsUnbacked(s) && value_unbacked) continue;
    if (!best || IsUnbacked(s) > IsUnbacked(best) || (IsUnbacked(s) == IsUnbacked(best) && ExprLess(best, s)))
      best = s, best_value = value;
  }
  if (!best) return false;
  Replace(best, best_value);
  return true;
}

void ShapeEnv::AddFact(Expr fact) {
  fact = Simplify(fact);
  if (fact->is_bool_const()) return;
  facts_.push_back(fact);
  if (fact->kind == ExprKind::kAnd) {
    AddFact(fact->args[0]);
    AddFact(fact->args[1]);
    return;
  }
  if (!fact->is_relation()) return;
  if (fact->kind == ExprKind::kEq && TryReplace(fact)) return;
  // Bounds from a relation linear in one symbol: c*s + k  <rel>  0.
  Expr d = Sub(fact->args[0], fact->args[1]);
  if (d->is_float) return;
  // Only d = c*s + k (one symbol, linearly) gives bounds.
  Expr s = nullptr;
  int64_t c = 0, kv = 0;
  for (Expr t : d->kind == ExprKind::kAdd ? d->args : std::vector<Expr>{d}) {
    if (t->is_integer()) { kv += t->ival; continue; }
    int64_t tc = 1;
    Expr ts = t;
    if (t->kind == ExprKind::kMul && t->args.size() == 2 && t->args[0]->is_integer()) tc = t->args[0]->ival, ts = t->args[1];
    if (!ts->is_symbol() || s) return;
    s = ts, c = tc;
  }
  if (!s) return;
  Expr k = Int(kv);
  // d <= B  or  d >= B.
  auto upper = [&](int64_t B) {  // c*s <= B - k
    int64_t R = B - k->ival;
    if (c > 0) Refine(s, {kNegInf, PyFloorDiv(R, c)});
    else Refine(s, {-PyFloorDiv(-R, c), kPosInf});
  };
  auto lower = [&](int64_t B) {  // c*s >= B - k
    int64_t R = B - k->ival;
    if (c > 0) Refine(s, {-PyFloorDiv(-R, c), kPosInf});
    else Refine(s, {kNegInf, PyFloorDiv(R, c)});
  };
  switch (fact->kind) {
    case ExprKind::kLt: upper(-1); break;
    case ExprKind::kLe: upper(0); break;
    case ExprKind::kGt: lower(1); break;
    case ExprKind::kGe: lower(0); break;
    case ExprKind::kNe:
      if ((c == 1 || c == -1)) {
        int64_t v = c == 1 ? -k->ival : k->ival;
        ValueRange r = ranges_[s];
        if (r.lo == v) Refine(s, {v + 1, kPosInf});
        else if (r.hi == v) Refine(s, {kNegInf, v - 1});
      }
      break;
    default: break;
  }
}

// --- guards ---------------------------------------------------------------------------------------

namespace {
// The symbol a one-symbol bound guard constrains (s0 > 2, 4 <= s1), else null.
Expr BoundSymbol(Expr g) {
  if (!g->is_relation() || g->kind == ExprKind::kEq || g->kind == ExprKind::kNe) return nullptr;
  Expr a = g->args[0], b = g->args[1];
  if (a->is_symbol() && b->is_integer()) return a;
  if (b->is_symbol() && a->is_integer()) return b;
  return nullptr;
}
}  // namespace

std::vector<Guard> ShapeEnv::guards() const {
  std::vector<Guard> out;
  std::set<Expr> seen;
  // Replacement guards, as Eq(symbol, value).
  std::vector<std::pair<size_t, Guard>> rep;
  std::set<size_t> rep_index;
  for (const auto& [s, idx] : replacement_guard_) rep_index.insert(idx);
  for (const auto& [s, idx] : replacement_guard_) {
    auto it = replacements_.find(s);
    if (it == replacements_.end() || IsUnbacked(s)) continue;
    Expr v = it->second;
    Expr g = (v->is_symbol() && ExprLess(v, s)) ? Eq(v, s) : Eq(s, v);
    rep.emplace_back(idx, Guard{g, guards_[idx].location});
  }
  // Tightest bound guard per symbol and side.
  std::map<Expr, std::pair<int, int>> best;  // symbol -> (index of lower, index of upper)
  std::vector<Expr> simplified(guards_.size());
  for (size_t i = 0; i < guards_.size(); ++i) simplified[i] = Simplify(guards_[i].expr);
  // The range a bound guard alone allows its symbol: s <kind> k.
  auto bound_of = [&](Expr g) {
    ValueRange r;
    bool s_left = g->args[0]->is_symbol();
    ExprKind kind = g->kind;
    if (!s_left) kind = kind == ExprKind::kLt ? ExprKind::kGt : kind == ExprKind::kGt ? ExprKind::kLt
                        : kind == ExprKind::kLe ? ExprKind::kGe : ExprKind::kLe;
    int64_t k = s_left ? g->args[1]->ival : g->args[0]->ival;
    switch (kind) {
      case ExprKind::kLt: r.hi = k - 1; break;
      case ExprKind::kLe: r.hi = k; break;
      case ExprKind::kGt: r.lo = k + 1; break;
      default: r.lo = k; break;
    }
    return r;
  };
  for (size_t i = 0; i < guards_.size(); ++i) {
    Expr g = simplified[i];
    Expr s = BoundSymbol(g);
    if (!s) continue;
    ValueRange r = bound_of(g);
    auto [it, fresh] = best.emplace(s, std::make_pair(-1, -1));
    auto& [lo_i, hi_i] = it->second;
    if (r.lo != kNegInf && (lo_i < 0 || r.lo > bound_of(simplified[lo_i]).lo)) lo_i = static_cast<int>(i);
    if (r.hi != kPosInf && (hi_i < 0 || r.hi < bound_of(simplified[hi_i]).hi)) hi_i = static_cast<int>(i);
  }
  // Ranges implied by the kept guards alone (not by the facts a dropped guard added).
  RangeMap kept_ranges = base_ranges_;
  for (const auto& [sym, idx] : best) {
    ValueRange& kr = kept_ranges[sym];
    if (idx.first >= 0) kr.lo = std::max(kr.lo, bound_of(simplified[idx.first]).lo);
    if (idx.second >= 0) kr.hi = std::min(kr.hi, bound_of(simplified[idx.second]).hi);
  }
  size_t r = 0;
  std::sort(rep.begin(), rep.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < guards_.size(); ++i) {
    for (; r < rep.size() && rep[r].first == i; ++r)
      if (seen.insert(rep[r].second.expr).second) out.push_back(rep[r].second);
    Expr g = simplified[i];
    if (g->is_bool_const() || rep_index.count(i)) continue;
    if (Expr s = BoundSymbol(g)) {
      auto& [lo_i, hi_i] = best[s];
      ValueRange br = bound_of(g), base = base_ranges_.count(s) ? base_ranges_.at(s) : ValueRange{};
      bool keep = (static_cast<int>(i) == lo_i && br.lo > base.lo) || (static_cast<int>(i) == hi_i && br.hi < base.hi);
      if (!keep) continue;
    } else if (StaticEval(g, kept_ranges).value_or(false)) {
      continue;
    }
    if (seen.insert(g).second) out.push_back(Guard{g, guards_[i].location});
  }
  return out;
}

std::vector<std::string> ShapeEnv::FormatGuards(bool with_locations) const {
  std::vector<std::string> out;
  for (const Guard& g : guards()) {
    std::string line = Str(g.expr);
    if (with_locations && !g.location.empty()) line += "  # " + g.location;
    out.push_back(line);
  }
  return out;
}

bool ShapeEnv::EvaluateGuards(const std::map<std::string, int64_t>& values) const {
  std::map<Expr, Value> vals;
  for (const auto& [name, v] : values) {
    Value x;
    x.i = v;
    vals[Symbol(name)] = x;
  }
  // Replaced symbols take their replacement's value (Eq(s0, s1) after s1 := s0 checks s1 too).
  for (const auto& [sym, value] : replacements_) {
    if (vals.count(sym)) continue;
    if (auto v = Evaluate(value, vals)) vals[sym] = *v;
  }
  for (const Guard& g : guards()) {
    auto v = Evaluate(g.expr, vals);
    KILN_CHECK(v.has_value(), "evaluate_guards: no value for a symbol of ", Str(g.expr));
    if (!v->i) return false;
  }
  // Sizes must also stay in the symbols' base ranges (a symbol never stands for 0 or 1).
  for (const auto& [name, v] : values) {
    auto it = base_ranges_.find(Symbol(name));
    if (it != base_ranges_.end() && !it->second.contains(v)) return false;
  }
  return true;
}

}  // namespace kiln::fx
