// tensor/sym_int.cc: SymInt arithmetic: int64 on the fast path, SymNode calls otherwise.
#include "tensor/sym_int.h"

#include "runtime/error.h"

namespace kiln {

namespace {
int64_t FloorDiv(int64_t a, int64_t b) {
  KILN_CHECK(b != 0, "ZeroDivisionError: integer division by zero in a size expression");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t FloorMod(int64_t a, int64_t b) { return a - FloorDiv(a, b) * b; }

// Concrete size arithmetic is checked: a size, stride or element count that overflows int64 must
// raise (PyTorch: "numel: integer multiplication overflow"), never wrap into a small or negative
// size that a kernel then trusts (ones(4).repeat(2**62) would otherwise be an empty tensor).
[[noreturn]] void Overflow(const char* op, int64_t a, int64_t b) {
  throw Error(StrCat("integer overflow in size arithmetic: ", a, " ", op, " ", b, " does not fit in int64"));
}
int64_t CheckedAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) Overflow("+", a, b);
  return r;
}
int64_t CheckedSub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) Overflow("-", a, b);
  return r;
}
int64_t CheckedMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) Overflow("*", a, b);
  return r;
}
}  // namespace

int64_t SymInt::expect_int() const {
  if (!node_) return value_;
  if (auto v = node_->maybe_as_int()) return *v;
  throw Error(StrCat("expected a concrete size but got the symbolic size ", node_->str(),
                     "; this kernel cannot run on symbolic shapes"));
}

int64_t SymInt::guard_int(const char* file, int line) const {
  return node_ ? node_->guard_int(file, line) : value_;
}

#define KILN_SYMINT_BINARY(OP, METHOD, EXPR)                                 \
  SymInt SymInt::OP(const SymInt& o) const {                                 \
    if (!node_ && !o.node_) {                                                \
      int64_t a = value_, b = o.value_;                                      \
      return SymInt(EXPR);                                                   \
    }                                                                        \
    const SymNodePtr& like = node_ ? node_ : o.node_;                        \
    return SymInt(wrapped_node(like)->METHOD(o.wrapped_node(like)));         \
  }
KILN_SYMINT_BINARY(operator+, add, CheckedAdd(a, b))
KILN_SYMINT_BINARY(operator-, sub, CheckedSub(a, b))
KILN_SYMINT_BINARY(operator*, mul, CheckedMul(a, b))
KILN_SYMINT_BINARY(floordiv, floordiv, FloorDiv(a, b))
KILN_SYMINT_BINARY(mod, mod, FloorMod(a, b))
#undef KILN_SYMINT_BINARY

#define KILN_SYMINT_COMPARE(METHOD, NODE_METHOD, EXPR)                        \
  SymBool SymInt::METHOD(const SymInt& o) const {                             \
    if (!node_ && !o.node_) {                                                 \
      int64_t a = value_, b = o.value_;                                       \
      return SymBool(EXPR);                                                   \
    }                                                                         \
    const SymNodePtr& like = node_ ? node_ : o.node_;                         \
    return SymBool(wrapped_node(like)->NODE_METHOD(o.wrapped_node(like)));    \
  }
KILN_SYMINT_COMPARE(sym_eq, eq, a == b)
KILN_SYMINT_COMPARE(sym_ne, ne, a != b)
KILN_SYMINT_COMPARE(sym_lt, lt, a < b)
KILN_SYMINT_COMPARE(sym_le, le, a <= b)
KILN_SYMINT_COMPARE(sym_gt, gt, a > b)
KILN_SYMINT_COMPARE(sym_ge, ge, a >= b)
#undef KILN_SYMINT_COMPARE

bool SymInt::operator==(const SymInt& o) const {
  if (!node_ && !o.node_) return value_ == o.value_;
  return sym_eq(o).guard_bool(__FILE__, __LINE__);
}
bool SymInt::operator<(const SymInt& o) const {
  if (!node_ && !o.node_) return value_ < o.value_;
  return sym_lt(o).guard_bool(__FILE__, __LINE__);
}
bool SymInt::operator<=(const SymInt& o) const {
  if (!node_ && !o.node_) return value_ <= o.value_;
  return sym_le(o).guard_bool(__FILE__, __LINE__);
}

SymInt sym_min(const SymInt& a, const SymInt& b) {
  if (!a.is_symbolic() && !b.is_symbolic()) return a.expect_int() < b.expect_int() ? a : b;
  const SymNodePtr& like = a.is_symbolic() ? a.node() : b.node();
  SymNodePtr an = a.is_symbolic() ? a.node() : like->wrap_int(a.expect_int());
  SymNodePtr bn = b.is_symbolic() ? b.node() : like->wrap_int(b.expect_int());
  return SymInt(an->min(bn));
}
SymInt sym_max(const SymInt& a, const SymInt& b) {
  if (!a.is_symbolic() && !b.is_symbolic()) return a.expect_int() > b.expect_int() ? a : b;
  const SymNodePtr& like = a.is_symbolic() ? a.node() : b.node();
  SymNodePtr an = a.is_symbolic() ? a.node() : like->wrap_int(a.expect_int());
  SymNodePtr bn = b.is_symbolic() ? b.node() : like->wrap_int(b.expect_int());
  return SymInt(an->max(bn));
}

}  // namespace kiln
