// tensor/sym_int.h: SymInt, a size that is either a plain int64 or a symbolic expression.
//
// Note [SymInt fast path]: every size, stride and offset in kiln is a SymInt. Eager tensors only
// ever hold concrete values (node_ == nullptr), so copying and comparing stays cheap; symbolic
// values point at a SymNode implemented by the ShapeEnv in fx/ (this layer only sees the
// interface). Arithmetic mixing the two wraps the int into the other operand's node. Turning a
// symbolic value into a C++ int or bool (`guard_int`, `operator bool` on SymBool) asks the node to
// record a guard: that is how branches in meta functions become guards.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

namespace kiln {

class SymNode;
using SymNodePtr = std::shared_ptr<SymNode>;

// Interface of a symbolic expression node; fx/symbolic_shapes implements it.
class SymNode {
 public:
  virtual ~SymNode() = default;
  virtual SymNodePtr wrap_int(int64_t v) = 0;
  virtual SymNodePtr add(const SymNodePtr& o) = 0;
  virtual SymNodePtr sub(const SymNodePtr& o) = 0;
  virtual SymNodePtr mul(const SymNodePtr& o) = 0;
  virtual SymNodePtr floordiv(const SymNodePtr& o) = 0;
  virtual SymNodePtr mod(const SymNodePtr& o) = 0;
  virtual SymNodePtr min(const SymNodePtr& o) = 0;
  virtual SymNodePtr max(const SymNodePtr& o) = 0;
  virtual SymNodePtr eq(const SymNodePtr& o) = 0;
  virtual SymNodePtr ne(const SymNodePtr& o) = 0;
  virtual SymNodePtr lt(const SymNodePtr& o) = 0;
  virtual SymNodePtr le(const SymNodePtr& o) = 0;
  virtual SymNodePtr gt(const SymNodePtr& o) = 0;
  virtual SymNodePtr ge(const SymNodePtr& o) = 0;
  // Concrete value under a guard that the current value stays (records the guard).
  virtual int64_t guard_int(const char* file, int line) = 0;
  virtual bool guard_bool(const char* file, int line) = 0;
  // The value if the expression is a known constant, without guarding.
  virtual std::optional<int64_t> maybe_as_int() { return std::nullopt; }
  virtual bool is_bool() const = 0;
  virtual std::string str() const = 0;
};

class SymBool;

class SymInt {
 public:
  SymInt(int64_t v = 0) : value_(v) {}  // NOLINT: ints convert implicitly, as in PyTorch
  explicit SymInt(SymNodePtr node) : value_(0), node_(std::move(node)) {}

  bool is_symbolic() const { return node_ != nullptr; }
  const SymNodePtr& node() const { return node_; }
  // The int64 of a concrete SymInt; raises for a symbolic one (kernels need real sizes).
  int64_t expect_int() const;
  // Concrete value, guarding on it when symbolic.
  int64_t guard_int(const char* file = "", int line = 0) const;
  std::optional<int64_t> maybe_as_int() const {
    if (!node_) return value_;
    return node_->maybe_as_int();
  }

  SymInt operator+(const SymInt& o) const;
  SymInt operator-(const SymInt& o) const;
  SymInt operator*(const SymInt& o) const;
  SymInt operator-() const { return SymInt(0) - *this; }
  SymInt floordiv(const SymInt& o) const;  // Python //
  SymInt mod(const SymInt& o) const;       // Python %
  SymInt& operator+=(const SymInt& o) { return *this = *this + o; }
  SymInt& operator*=(const SymInt& o) { return *this = *this * o; }
  SymBool sym_eq(const SymInt& o) const;
  SymBool sym_ne(const SymInt& o) const;
  SymBool sym_lt(const SymInt& o) const;
  SymBool sym_le(const SymInt& o) const;
  SymBool sym_gt(const SymInt& o) const;
  SymBool sym_ge(const SymInt& o) const;
  // C++ comparisons branch, so on symbolic values they guard.
  bool operator==(const SymInt& o) const;
  bool operator!=(const SymInt& o) const { return !(*this == o); }
  bool operator<(const SymInt& o) const;
  bool operator<=(const SymInt& o) const;
  bool operator>(const SymInt& o) const { return o < *this; }
  bool operator>=(const SymInt& o) const { return o <= *this; }
  std::string str() const { return node_ ? node_->str() : std::to_string(value_); }

 private:
  SymNodePtr wrapped_node(const SymNodePtr& like) const { return node_ ? node_ : like->wrap_int(value_); }
  int64_t value_;
  SymNodePtr node_;
};

SymInt sym_min(const SymInt& a, const SymInt& b);
SymInt sym_max(const SymInt& a, const SymInt& b);

class SymBool {
 public:
  SymBool(bool v = false) : value_(v) {}  // NOLINT
  explicit SymBool(SymNodePtr node) : value_(false), node_(std::move(node)) {}
  bool is_symbolic() const { return node_ != nullptr; }
  const SymNodePtr& node() const { return node_; }
  bool guard_bool(const char* file = "", int line = 0) const {
    return node_ ? node_->guard_bool(file, line) : value_;
  }
  explicit operator bool() const { return guard_bool(); }
  std::string str() const { return node_ ? node_->str() : (value_ ? "True" : "False"); }

 private:
  bool value_;
  SymNodePtr node_;
};

inline std::ostream& operator<<(std::ostream& os, const SymInt& s) { return os << s.str(); }

}  // namespace kiln
