// tensor/ops/binary_kernels.h: the CPU loops of the binary pointwise ops (binary.cc), shared with
// the files that compile them (binary_kernels_*.cc).
//
// Note [Binary kernels in several files]: every op's loop is a template instantiated per compute
// type, per instruction set (loops.h's RunForCpu) and per fast path, which made binary.cc the
// slowest file to build (267 s here, one core). The loops are declared here and instantiated in
// binary_kernels_{arith,math,compare,logic}.cc (extern templates keep binary.cc from instantiating
// them again), so the files build in parallel, none over a minute; each op's table row (kSpecs),
// element function (BinaryFn) and registration stay in one place.
#pragma once

#include <cmath>
#include <type_traits>

#include "tensor/ops/common.h"

namespace kiln::binary {

enum class ResultKind { Promoted, Bool, Float };
enum class DtypeSet { All, Numeric, IntegralAndBool, Integral, Floating };

struct BinarySpec {
  const char* name;
  ResultKind result;
  DtypeSet dtypes;
  bool has_alpha;      // add/sub: a + alpha * b
  bool has_scalar;     // a .Scalar overload exists
};

// Element functions over the opmath type T.

// Signed integers wrap around when + - * overflow, as PyTorch's kernels do in practice (C++ leaves
// it undefined: UBSan stopped at INT64_MIN + -1): through uint64, whose arithmetic wraps.
template <typename T>
inline constexpr bool kWrapsSigned = std::is_integral_v<T> && std::is_signed_v<T>;
template <typename T> T WrapAdd(T a, T b) {
  return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
template <typename T> T WrapSub(T a, T b) {
  return static_cast<T>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
template <typename T> T WrapMul(T a, T b) {
  return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

// a / b and a % b of integers (b != 0) without the trap x86's idiv raises for the one quotient that
// does not fit, INT_MIN / -1 (undefined in C++; it killed the process): the quotient wraps to
// INT_MIN and the remainder is 0, as PyTorch's kernels give.
template <typename T> T IntDiv(T a, T b) {
  if constexpr (std::is_signed_v<T>) {
    if (b == T(-1)) return static_cast<T>(std::make_unsigned_t<T>(0) - static_cast<std::make_unsigned_t<T>>(a));
  }
  return a / b;
}
template <typename T> T IntMod(T a, T b) {
  if constexpr (std::is_signed_v<T>) {
    if (b == T(-1)) return T(0);
  }
  return a % b;
}

template <typename T> T FloorDivide(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if (b == 0) throw Error("ZeroDivisionError");
    T q = IntDiv(a, b);
    if ((IntMod(a, b) != 0) && ((a < 0) != (b < 0))) --q;
    return q;
  } else {
    if (b == 0) return a / b;
    T m = std::fmod(a, b);
    T div = (a - m) / b;
    if (m != 0 && ((b < 0) != (m < 0))) div -= 1;
    T floordiv = std::floor(div);
    if (div - floordiv > T(0.5)) floordiv += 1;
    return div == 0 ? std::copysign(T(0), a / b) : floordiv;
  }
}
template <typename T> T Remainder(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if (b == 0) throw Error("ZeroDivisionError");
    T r = IntMod(a, b);
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  } else {
    T r = std::fmod(a, b);
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  }
}
// A negative exponent from a tensor gives 1 / base^-exp truncated, as PyTorch computes it (a
// negative scalar exponent of an integer tensor is refused up front: CheckIntegerPow).
template <typename T> T PowInt(T base, T exp) {
  if (exp < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exp % 2 == 0) ? 1 : -1;
    return 0;
  }
  T result = 1;
  while (exp) {
    if (exp & 1) result = WrapMul(result, base);
    exp >>= 1;
    base = WrapMul(base, base);
  }
  return result;
}

// Applies op kOp to opmath values; `alpha` is used by add/sub. The op is a template argument so
// each kernel's inner loop is straight-line code the compiler can vectorise.
template <int kOp, typename T>
struct BinaryFn {
  T alpha;
  T operator()(T a, T b) const;
};

enum BinaryOpCode : int {
  kAdd, kSub, kMul, kDiv, kDivTrunc, kDivFloor, kRemainder, kFmod, kPow, kMaximum, kMinimum,
  kEq, kNe, kLt, kLe, kGt, kGe, kLogicalAnd, kLogicalOr, kLogicalXor, kBitAnd, kBitOr, kBitXor,
  kAtan2, kFloorDivide, kFmax, kFmin, kHypot, kCopysign, kXlogy, kLshift, kRshift, kNumOps
};

inline constexpr BinarySpec kSpecs[kNumOps] = {
    {"add", ResultKind::Promoted, DtypeSet::All, true, true},
    {"sub", ResultKind::Promoted, DtypeSet::Numeric, true, true},
    {"mul", ResultKind::Promoted, DtypeSet::All, false, true},
    {"div", ResultKind::Float, DtypeSet::All, false, true},
    {"div_trunc", ResultKind::Promoted, DtypeSet::Numeric, false, false},
    {"div_floor", ResultKind::Promoted, DtypeSet::Numeric, false, false},
    {"remainder", ResultKind::Promoted, DtypeSet::Numeric, false, true},
    {"fmod", ResultKind::Promoted, DtypeSet::Numeric, false, true},
    {"pow", ResultKind::Promoted, DtypeSet::Numeric, false, true},
    {"maximum", ResultKind::Promoted, DtypeSet::All, false, false},
    {"minimum", ResultKind::Promoted, DtypeSet::All, false, false},
    {"eq", ResultKind::Bool, DtypeSet::All, false, true},
    {"ne", ResultKind::Bool, DtypeSet::All, false, true},
    {"lt", ResultKind::Bool, DtypeSet::All, false, true},
    {"le", ResultKind::Bool, DtypeSet::All, false, true},
    {"gt", ResultKind::Bool, DtypeSet::All, false, true},
    {"ge", ResultKind::Bool, DtypeSet::All, false, true},
    {"logical_and", ResultKind::Bool, DtypeSet::All, false, false},
    {"logical_or", ResultKind::Bool, DtypeSet::All, false, false},
    {"logical_xor", ResultKind::Bool, DtypeSet::All, false, false},
    {"bitwise_and", ResultKind::Promoted, DtypeSet::IntegralAndBool, false, true},
    {"bitwise_or", ResultKind::Promoted, DtypeSet::IntegralAndBool, false, true},
    {"bitwise_xor", ResultKind::Promoted, DtypeSet::IntegralAndBool, false, true},
    {"atan2", ResultKind::Float, DtypeSet::All, false, false},
    {"floor_divide", ResultKind::Promoted, DtypeSet::Numeric, false, true},
    {"fmax", ResultKind::Promoted, DtypeSet::All, false, false},
    {"fmin", ResultKind::Promoted, DtypeSet::All, false, false},
    {"hypot", ResultKind::Float, DtypeSet::Floating, false, false},
    {"copysign", ResultKind::Float, DtypeSet::All, false, true},
    {"xlogy", ResultKind::Float, DtypeSet::All, false, true},
    // PyTorch shifts integers only ("lshift_cpu" not implemented for 'Bool')
    {"bitwise_left_shift", ResultKind::Promoted, DtypeSet::Integral, false, true},
    {"bitwise_right_shift", ResultKind::Promoted, DtypeSet::Integral, false, true},
};

template <int kOp, typename T>
T BinaryFn<kOp, T>::operator()(T a, T b) const {
  switch (kOp) {
    // Floating point: no test of alpha == 1 per element, which made EmitRun's streamed runs slower
    // once they shared the plain runs' loop (x + 1.5 over 8M floats: 1.05x): 1 * b is b exactly, so
    // a + alpha * b, fused or not, rounds as a + b does.
    case kAdd:
      if constexpr (kWrapsSigned<T>) return alpha == T(1) ? WrapAdd(a, b) : WrapAdd(a, WrapMul(alpha, b));
      else if constexpr (std::is_floating_point_v<T>) return a + alpha * b;
      else return alpha == T(1) ? T(a + b) : T(a + alpha * b);
    case kSub:
      if constexpr (kWrapsSigned<T>) return alpha == T(1) ? WrapSub(a, b) : WrapSub(a, WrapMul(alpha, b));
      else if constexpr (std::is_floating_point_v<T>) return a - alpha * b;
      else return alpha == T(1) ? T(a - b) : T(a - alpha * b);
    case kMul:
      if constexpr (std::is_same_v<T, bool>) return a && b;
      else if constexpr (kWrapsSigned<T>) return WrapMul(a, b);
      else return a * b;
    case kDiv: return a / b;
    case kDivTrunc:
      if constexpr (std::is_integral_v<T>) { if (b == 0) throw Error("ZeroDivisionError"); return IntDiv(a, b); }
      else return std::trunc(a / b);
    case kDivFloor: case kFloorDivide:
      if constexpr (std::is_same_v<T, bool>) return a; else return FloorDivide(a, b);
    case kRemainder: if constexpr (std::is_same_v<T, bool>) return a; else return Remainder(a, b);
    case kFmod:
      if constexpr (std::is_integral_v<T>) { if (b == 0) throw Error("ZeroDivisionError"); return IntMod(a, b); }
      else return std::fmod(a, b);
    case kPow:
      if constexpr (std::is_integral_v<T>) { if constexpr (std::is_same_v<T, bool>) return a || !b; else return PowInt(a, b); }
      else return std::pow(a, b);
    // a on ties, as PyTorch's std::max/std::min: maximum(-0., 0.) is -0.
    case kMaximum:
      if constexpr (!std::is_integral_v<T>) { if (a != a) return a; if (b != b) return b; }
      return a < b ? b : a;
    case kMinimum:
      if constexpr (!std::is_integral_v<T>) { if (a != a) return a; if (b != b) return b; }
      return b < a ? b : a;
    case kEq: return a == b;
    case kNe: return a != b;
    case kLt: return a < b;
    case kLe: return a <= b;
    case kGt: return a > b;
    case kGe: return a >= b;
    case kLogicalAnd: return (a != T(0)) && (b != T(0));
    case kLogicalOr: return (a != T(0)) || (b != T(0));
    case kLogicalXor: return (a != T(0)) != (b != T(0));
    case kBitAnd: if constexpr (std::is_integral_v<T>) return a & b; else return a;
    case kBitOr: if constexpr (std::is_integral_v<T>) return a | b; else return a;
    case kBitXor: if constexpr (std::is_integral_v<T>) return a ^ b; else return a;
    case kAtan2: if constexpr (!std::is_integral_v<T>) return std::atan2(a, b); else return a;
    case kFmax: if constexpr (!std::is_integral_v<T>) return std::fmax(a, b); else return a > b ? a : b;
    case kFmin: if constexpr (!std::is_integral_v<T>) return std::fmin(a, b); else return a < b ? a : b;
    case kHypot: if constexpr (!std::is_integral_v<T>) return std::hypot(a, b); else return a;
    case kCopysign: if constexpr (!std::is_integral_v<T>) return std::copysign(a, b); else return a;
    case kLshift:
      // Shifts by the type's width or more give 0, as PyTorch defines them (C++ leaves it undefined).
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        using U = std::make_unsigned_t<T>;
        if (b < 0 || b >= T(sizeof(T) * 8)) return 0;
        return static_cast<T>(static_cast<U>(a) << b);
      } else return a;
    case kRshift:
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        if (b < 0 || b >= T(sizeof(T) * 8)) return a < 0 ? T(-1) : T(0);
        return static_cast<T>(a >> b);
      } else return a;
    case kXlogy:
      if constexpr (!std::is_integral_v<T>) {
        if (b != b) return b;
        if (a == 0) return 0;
        return a * std::log(b);
      } else return a;
  }
  return a;
}

// The elementwise loop: out[i] = f(a[i], b[i]) with a and b already in compute type C.
template <int kOp, typename C, typename Out>
void RunTyped(const ElementwiseIter& iter, opmath_t<C> alpha) {
  using M = opmath_t<C>;
  if constexpr (kOp == kDivTrunc && std::is_floating_point_v<M> && !std::is_same_v<C, M>) {
    // float16/bfloat16: PyTorch's kernel divides in its 16-bit type (whose operator/ rounds the
    // float quotient), then truncates, so x / leaky_relu(x, 0.1) is 10, not trunc(9.99...) = 9
    // (fuzz seed 301, program 17650). Its floor mode stays in float.
    CpuKernel<Out, C, C>(iter, [](C a, C b) -> Out { return static_cast<Out>(std::trunc(M(C(M(a) / M(b))))); });
  } else {
    BinaryFn<kOp, M> f{alpha};
    CpuKernel<Out, C, C>(iter, [f](C a, C b) -> Out { return static_cast<Out>(f(M(a), M(b))); });
  }
}

// Complex numbers have the arithmetic ops and equality (CheckDtype refused the rest).
template <int kOp>
void RunComplex(const ElementwiseIter& iter, ScalarType compute, const Scalar& alpha) {
  if constexpr (kOp == kAdd || kOp == kSub || kOp == kMul || kOp == kDiv || kOp == kEq || kOp == kNe) {
    KILN_DISPATCH_COMPLEX(compute, kSpecs[kOp].name, [&] {
      using C = scalar_t;
      const C a = alpha.to<C>();
      if constexpr (kOp == kEq || kOp == kNe) {
        CpuKernel<bool, C, C>(iter, [](C x, C y) -> bool { return (x == y) == (kOp == kEq); });
      } else {
        CpuKernel<C, C, C>(iter, [a](C x, C y) -> C {
          if constexpr (kOp == kAdd) return x + a * y;
          else if constexpr (kOp == kSub) return x - a * y;
          else if constexpr (kOp == kMul) return x * y;
          else return x / y;
        });
      }
    });
  }
}

// Note [Only the kernels that can run]: an op's loop is compiled only for the compute types its
// DtypeSet admits (CheckDtype has refused the others before any loop runs) and only for the output
// type its ResultKind gives (bool for comparisons, the compute type otherwise). Compiling every op
// for every type and both output types made this file take 267 s to build, for code no call reached.
template <int kOp, typename C>
constexpr bool Admits() {
  switch (kSpecs[kOp].dtypes) {
    case DtypeSet::All: return true;
    case DtypeSet::Numeric: return !std::is_same_v<C, bool>;
    case DtypeSet::IntegralAndBool: return std::is_integral_v<C>;
    case DtypeSet::Integral: return std::is_integral_v<C> && !std::is_same_v<C, bool>;
    case DtypeSet::Floating: return !std::is_integral_v<C>;
  }
  return true;
}

// out = f(a, b) over the iterator, the output being bool for comparisons (ResultKind::Bool) and
// the compute type otherwise.
template <int kOp>
void RunBinary(const ElementwiseIter& iter, ScalarType compute, const Scalar& alpha) {
  if (IsComplex(compute)) return RunComplex<kOp>(iter, compute, alpha);
  KILN_DISPATCH_ALL(compute, kSpecs[kOp].name, [&] {
    using C = scalar_t;
    using M = opmath_t<C>;
    if constexpr (Admits<kOp, C>()) {
      using Out = std::conditional_t<kSpecs[kOp].result == ResultKind::Bool, bool, C>;
      RunTyped<kOp, C, Out>(iter, alpha.to<M>());
    } else {
      KILN_INTERNAL_ASSERT(false, "binary op ", kSpecs[kOp].name, " reached a dtype CheckDtype refuses");
    }
  });
}

// The ops whose loops each binary_kernels_*.cc compiles (every op in one list).
#define KILN_BINARY_ARITH_OPS(X) X(kAdd) X(kSub) X(kMul) X(kDiv) X(kDivTrunc) X(kDivFloor) X(kRemainder)
#define KILN_BINARY_MATH_OPS(X) X(kFmod) X(kPow) X(kFloorDivide) X(kAtan2) X(kHypot) X(kCopysign) X(kXlogy)
#define KILN_BINARY_COMPARE_OPS(X) \
  X(kMaximum) X(kMinimum) X(kFmax) X(kFmin) X(kEq) X(kNe) X(kLt) X(kLe) X(kGt) X(kGe)
#define KILN_BINARY_LOGIC_OPS(X) \
  X(kLogicalAnd) X(kLogicalOr) X(kLogicalXor) X(kBitAnd) X(kBitOr) X(kBitXor) X(kLshift) X(kRshift)
#define KILN_BINARY_DECLARE(op) \
  extern template void RunBinary<op>(const ElementwiseIter&, ScalarType, const Scalar&);
#define KILN_BINARY_INSTANTIATE(op) template void RunBinary<op>(const ElementwiseIter&, ScalarType, const Scalar&);
#ifndef KILN_BINARY_KERNELS_TU
KILN_BINARY_ARITH_OPS(KILN_BINARY_DECLARE)
KILN_BINARY_MATH_OPS(KILN_BINARY_DECLARE)
KILN_BINARY_COMPARE_OPS(KILN_BINARY_DECLARE)
KILN_BINARY_LOGIC_OPS(KILN_BINARY_DECLARE)
#endif

}  // namespace kiln::binary
