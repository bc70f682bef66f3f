// fx/sym_expr_print.cc: printing expressions (fx/sym_expr.h): Str, sympy's str() as PyTorch shows
// guards, and PythonStr, Python source over the symbols' sources (ShapeEnv.produce_guards).
#include <cmath>
#include <map>
#include <sstream>
#include <string>

#include "fx/sym_expr.h"

namespace kiln::fx {

// --- printing ------------------------------------------------------------------------------------
namespace {

enum Prec { kPrecRel = 1, kPrecAdd = 2, kPrecMul = 3, kPrecPow = 4, kPrecAtom = 5 };

std::string FloatStr(double v) {
  if (std::isinf(v)) return v > 0 ? "oo" : "-oo";
  std::ostringstream os;
  os.precision(17);
  os << v;
  std::string s = os.str();
  if (s.find_first_of(".eE") == std::string::npos && s.find("nan") == std::string::npos) s += ".0";
  return s;
}

// The coefficient of a term (Mul's leading integer, or the integer itself).
int64_t Coefficient(Expr t) {
  if (t->is_integer()) return t->ival;
  if (t->kind == ExprKind::kMul && t->args[0]->is_integer()) return t->args[0]->ival;
  if (t->kind == ExprKind::kFloat) return t->fval < 0 ? -1 : 1;
  return 1;
}

// Prints an expression as sympy's str() does (Str), or as Python source that computes the same
// value (PythonStr: Eq(a, b) is `a == b`, Mod `((a) % (b))`, Max `max(a, b)`, symbols replaced by
// the caller's texts), with the least parentheses each needs.
class Printer {
 public:
  Printer(std::ostream& os, const std::map<std::string, std::string>* python_symbols)
      : os_(os), python_(python_symbols != nullptr), symbols_(python_symbols) {}

  void Print(Expr e, int ctx) {
    auto paren = [&](int prec, auto body) {
      bool p = prec < ctx;
      if (p) os_ << "(";
      body();
      if (p) os_ << ")";
    };
    switch (e->kind) {
      case ExprKind::kInteger:
        if (e->ival < 0 && ctx > kPrecAdd) os_ << "(" << e->ival << ")";
        else os_ << e->ival;
        return;
      case ExprKind::kFloat:
        if (python_ && !std::isfinite(e->fval)) {
          os_ << "float('" << (std::isnan(e->fval) ? "nan" : e->fval > 0 ? "inf" : "-inf") << "')";
        } else {
          os_ << FloatStr(e->fval);
        }
        return;
      case ExprKind::kBool: os_ << (e->ival ? "True" : "False"); return;
      case ExprKind::kSymbol: {
        if (!python_) {
          os_ << e->name;
          return;
        }
        auto it = symbols_->find(e->name);
        os_ << (it != symbols_->end() ? it->second : e->name);
        return;
      }
      case ExprKind::kAdd: return paren(kPrecAdd, [&] { PrintAdd(e); });
      case ExprKind::kMul:
        return paren(Coefficient(e) < 0 ? kPrecAdd : kPrecMul, [&] { PrintMul(e); });
      case ExprKind::kPow:
        return paren(kPrecPow, [&] {
          Print(e->args[0], kPrecAtom);
          os_ << "**" << e->ival;
        });
      case ExprKind::kFloorDiv:
        // PyTorch's FloorDiv prints `(a//b)`, parenthesised again inside sums and products.
        if (!python_ && (ctx == kPrecAdd || ctx == kPrecMul)) os_ << "(";
        os_ << "(";
        Print(e->args[0], kPrecAtom);
        os_ << "//";
        Print(e->args[1], kPrecAtom);
        os_ << ")";
        if (!python_ && (ctx == kPrecAdd || ctx == kPrecMul)) os_ << ")";
        return;
      case ExprKind::kTrueDiv:
        return paren(kPrecMul, [&] {
          Print(e->args[0], kPrecMul);
          os_ << "/";
          Print(e->args[1], kPrecAtom);
        });
      case ExprKind::kMod:
        if (!python_) return PrintCall("Mod", e);
        os_ << "(";  // Python's % binds as * does: both sides atoms, the whole one too
        Print(e->args[0], kPrecAtom);
        os_ << " % ";
        Print(e->args[1], kPrecAtom);
        os_ << ")";
        return;
      case ExprKind::kMin: return PrintCall(python_ ? "min" : "Min", e);
      case ExprKind::kMax: return PrintCall(python_ ? "max" : "Max", e);
      case ExprKind::kToFloat: return PrintCall(python_ ? "float" : "ToFloat", e);
      case ExprKind::kTrunc: return PrintCall(python_ ? "int" : "TruncToInt", e);
      case ExprKind::kEq:
      case ExprKind::kNe:
        if (!python_) return PrintCall(e->kind == ExprKind::kEq ? "Eq" : "Ne", e);
        return PrintRelation(e->kind == ExprKind::kEq ? " == " : " != ", e, paren);
      case ExprKind::kLt: return PrintRelation(" < ", e, paren);
      case ExprKind::kLe: return PrintRelation(" <= ", e, paren);
      case ExprKind::kGt: return PrintRelation(" > ", e, paren);
      case ExprKind::kGe: return PrintRelation(" >= ", e, paren);
      case ExprKind::kNot:
        os_ << (python_ ? "(not " : "~");
        Print(e->args[0], kPrecAtom);
        if (python_) os_ << ")";
        return;
      case ExprKind::kAnd:
      case ExprKind::kOr: {
        const bool p = python_ || kPrecRel < ctx;
        if (p) os_ << "(";
        Print(e->args[0], kPrecAtom);
        if (python_) os_ << (e->kind == ExprKind::kAnd ? " and " : " or ");
        else os_ << (e->kind == ExprKind::kAnd ? " & " : " | ");
        Print(e->args[1], kPrecAtom);
        if (p) os_ << ")";
        return;
      }
    }
  }

 private:
  void PrintTerm(Expr t, bool negate) {
    if (!negate) return Print(t, kPrecAdd);
    Print(t->is_float ? Mul(Float(-1), t) : Neg(t), kPrecAdd);
  }

  void PrintAdd(Expr e) {
    const auto& a = e->args;
    // sympy prints `3 - s0` (not `-s0 + 3`) for a positive constant and one negated atom.
    if (!e->is_float && a.size() == 2 && a[1]->is_integer() && a[1]->ival > 0 && a[0]->kind == ExprKind::kMul &&
        a[0]->args.size() == 2 && a[0]->args[0]->is_integer() && a[0]->args[0]->ival < 0 &&
        a[0]->args[1]->kind != ExprKind::kPow) {
      os_ << a[1]->ival << " - ";
      PrintTerm(a[0], true);
      return;
    }
    for (size_t i = 0; i < a.size(); ++i) {
      bool neg = Coefficient(a[i]) < 0;
      if (i == 0) {
        Print(a[i], kPrecAdd);
        continue;
      }
      os_ << (neg ? " - " : " + ");
      PrintTerm(a[i], neg);
    }
  }

  void PrintMul(Expr e) {
    const auto& a = e->args;
    size_t start = 0;
    if (a[0]->is_integer()) {
      if (a[0]->ival == -1) os_ << "-";
      else os_ << a[0]->ival << "*";
      start = 1;
    }
    for (size_t i = start; i < a.size(); ++i) {
      if (i > start) os_ << "*";
      Print(a[i], kPrecMul);
    }
  }

  void PrintCall(const char* name, Expr e) {
    os_ << name << "(";
    for (size_t i = 0; i < e->args.size(); ++i) {
      if (i) os_ << ", ";
      Print(e->args[i], 0);
    }
    os_ << ")";
  }

  template <typename Paren>
  void PrintRelation(const char* op, Expr e, Paren& paren) {
    paren(kPrecRel, [&] {
      Print(e->args[0], kPrecAdd);
      os_ << op;
      Print(e->args[1], kPrecAdd);
    });
  }

  std::ostream& os_;
  const bool python_;
  const std::map<std::string, std::string>* symbols_;
};

}  // namespace

std::string Str(Expr e) {
  std::ostringstream os;
  Printer(os, nullptr).Print(e, 0);
  return os.str();
}

std::string PythonStr(Expr e, const std::map<std::string, std::string>& symbols) {
  std::ostringstream os;
  Printer(os, &symbols).Print(e, 0);
  return os.str();
}

}  // namespace kiln::fx
