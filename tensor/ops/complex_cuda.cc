// tensor/ops/complex_cuda.cc: complex arithmetic on CUDA (complex_cuda.h).
//
// Note [Complex on CUDA]: the generated kernels have no complex type. A complex result is computed
// by two real kernels over (real, imag) views (view_as_real, then each half selected): one writes
// the real parts, the other the imaginary parts, both reading every operand's halves (a real operand
// has imaginary part 0). When the result shares memory with an operand (a.mul_(b)) the halves go
// to a scratch tensor first, since the second kernel reads what the first would have overwritten.
// The formulas are c10::complex's: the product's four terms, Smith's division, hypot for |z|.
#include "tensor/ops/complex_cuda.h"

#include <array>
#include <cmath>

#include "tensor/cuda/pointwise.h"
#include "tensor/empty.h"
#include "tensor/ops/common.h"

namespace kiln {
namespace {

using codegen::Expr;
using codegen::OpCode;
using IR = codegen::ExprPtr;

IR E(OpCode op, IR a, IR b) { return Expr::Op(op, {std::move(a), std::move(b)}); }
IR E(OpCode op, IR a) { return Expr::Op(op, {std::move(a)}); }

Tensor Half(const Tensor& t, int64_t which) {
  return ops::select(CallOp<Tensor>(KILN_OP("aten::view_as_real"), t), -1, SymInt(which));
}

// The kernels' inputs: tensors kept alive here (PointwiseInput holds pointers to them).
struct Inputs {
  explicit Inputs(ScalarType real) : real(real), dtype(cuda::CodegenDType(real, "complex")) {}
  IR Add(const Tensor& t) {
    held[count] = t;
    list.push_back(cuda::PointwiseInput::Of(held[count]));
    return Expr::Cast(cuda::Input(static_cast<int>(count++)), dtype);
  }
  IR Number(double v) {
    list.push_back(cuda::PointwiseInput::Number(Scalar(v), real));
    ++count;
    return Expr::Cast(cuda::Input(static_cast<int>(count - 1)), dtype);
  }
  // (real, imag) of a tensor (real tensors: imag 0) or of a number.
  std::pair<IR, IR> Of(const Tensor& t) {
    if (!IsComplex(t.dtype())) return {Add(t), Expr::Const(0.0, dtype)};
    return {Add(Half(t, 0)), Add(Half(t, 1))};
  }
  std::pair<IR, IR> Of(const ComplexOperand& o) { return o.tensor ? Of(*o.tensor) : Of(o.number); }
  // A bool tensor (a condition), loaded as is.
  IR Condition(const Tensor& t) {
    held[count] = t;
    list.push_back(cuda::PointwiseInput::Of(held[count]));
    return cuda::Input(static_cast<int>(count++));
  }
  IR Const(double v) const { return Expr::Const(v, dtype); }
  std::pair<IR, IR> Of(const Scalar& s) {
    const std::complex<double> v = s.to_complex();
    return {Number(v.real()), Number(v.imag())};
  }
  ScalarType real;
  codegen::DType dtype;
  std::array<Tensor, 8> held;
  size_t count = 0;
  std::vector<cuda::PointwiseInput> list;
};

std::pair<IR, IR> Mul(const std::pair<IR, IR>& x, const std::pair<IR, IR>& y) {
  return {E(OpCode::kSub, E(OpCode::kMul, x.first, y.first), E(OpCode::kMul, x.second, y.second)),
          E(OpCode::kAdd, E(OpCode::kMul, x.first, y.second), E(OpCode::kMul, x.second, y.first))};
}

// c10::complex's division (Smith's algorithm): scale by the larger of |c|, |d| so that neither
// c^2 + d^2 overflows nor underflows.
std::pair<IR, IR> Div(const std::pair<IR, IR>& x, const std::pair<IR, IR>& y, codegen::DType t) {
  const IR &a = x.first, &b = x.second, &c = y.first, &d = y.second;
  const IR c_wins = E(OpCode::kGe, E(OpCode::kAbs, c), E(OpCode::kAbs, d));
  const IR rat_c = E(OpCode::kDiv, d, c), scl_c = E(OpCode::kDiv, Expr::Const(1.0, t),
                                                     E(OpCode::kAdd, c, E(OpCode::kMul, d, rat_c)));
  const IR rat_d = E(OpCode::kDiv, c, d), scl_d = E(OpCode::kDiv, Expr::Const(1.0, t),
                                                     E(OpCode::kAdd, d, E(OpCode::kMul, c, rat_d)));
  const IR re_c = E(OpCode::kMul, E(OpCode::kAdd, a, E(OpCode::kMul, b, rat_c)), scl_c);
  const IR im_c = E(OpCode::kMul, E(OpCode::kSub, b, E(OpCode::kMul, a, rat_c)), scl_c);
  const IR re_d = E(OpCode::kMul, E(OpCode::kAdd, E(OpCode::kMul, a, rat_d), b), scl_d);
  const IR im_d = E(OpCode::kMul, E(OpCode::kSub, E(OpCode::kMul, b, rat_d), a), scl_d);
  // 0 / 0: c10 divides by |c| and |d| themselves (an infinity or NaN, as IEEE division gives)
  const IR both_zero = E(OpCode::kLogicalAnd, E(OpCode::kEq, c, Expr::Const(0.0, t)),
                          E(OpCode::kEq, d, Expr::Const(0.0, t)));
  auto pick = [&](const IR& zero_case, const IR& when_c, const IR& when_d) {
    return Expr::Op(OpCode::kWhere, {both_zero, zero_case, Expr::Op(OpCode::kWhere, {c_wins, when_c, when_d})});
  };
  return {pick(E(OpCode::kDiv, a, E(OpCode::kAbs, c)), re_c, re_d),
          pick(E(OpCode::kDiv, b, E(OpCode::kAbs, d)), im_c, im_d)};
}

bool SharesMemory(const Tensor& out, const Tensor* t) {
  return t && t->defined() && (*t)->has_storage() && out->has_storage() && (*t)->storage() == out->storage();
}

// Writes the two halves of `out` (complex), through a scratch tensor when it overlaps an input.
void WriteHalves(const char* name, const Tensor& out, const std::vector<const Tensor*>& operands, Inputs& in,
                 const std::pair<IR, IR>& value) {
  bool overlap = false;
  for (const Tensor* t : operands) overlap = overlap || SharesMemory(out, t);
  Tensor dst = overlap ? EmptyTensor(out.sizes(), out.dtype(), out.device()) : out;
  cuda::LaunchPointwise(name, Half(dst, 0), in.list, value.first);
  cuda::LaunchPointwise(name, Half(dst, 1), in.list, value.second);
  if (overlap) {
    Tensor o = CallOp<Tensor>(KILN_OP("aten::view_as_real"), out);
    ops::copy_(o, CallOp<Tensor>(KILN_OP("aten::view_as_real"), dst));
  }
}

}  // namespace

void ComplexBinaryCUDA(ComplexBinary op, const Tensor& out, const Tensor& a, const Tensor* b, const Scalar* b_scalar,
                       const Scalar& alpha, const char* name) {
  Inputs in(ToRealValueType(out.dtype()));
  const std::pair<IR, IR> x = in.Of(a);
  std::pair<IR, IR> y = b ? in.Of(*b) : in.Of(*b_scalar);
  std::pair<IR, IR> value;
  if (op == ComplexBinary::kAdd || op == ComplexBinary::kSub) {
    if (alpha.to_complex() != std::complex<double>(1.0, 0.0)) y = Mul(in.Of(alpha), y);
    const OpCode o = op == ComplexBinary::kAdd ? OpCode::kAdd : OpCode::kSub;
    value = {E(o, x.first, y.first), E(o, x.second, y.second)};
  } else if (op == ComplexBinary::kMul) {
    value = Mul(x, y);
  } else {
    value = Div(x, y, in.dtype);
  }
  WriteHalves(name, out, {&a, b}, in, value);
}

namespace {

using Pair = std::pair<IR, IR>;

IR Sum(IR a, IR b) { return E(OpCode::kAdd, std::move(a), std::move(b)); }
IR Prod(IR a, IR b) { return E(OpCode::kMul, std::move(a), std::move(b)); }
IR Pick(IR c, IR a, IR b) { return Expr::Op(OpCode::kWhere, {std::move(c), std::move(a), std::move(b)}); }

// glibc's ctanh: past |re| > t (where sinh^2 would overflow) tanh is +-1 and the imaginary part
// 4 sin cos e^(-2|re|); below it (sinh cosh, sin cos) / (sinh^2 + cos^2).
Pair Tanh(const Pair& z, const Inputs& in) {
  const IR &a = z.first, &b = z.second;
  const IR sh = E(OpCode::kSinh, a), ch = E(OpCode::kCosh, a), s = E(OpCode::kSin, b), c = E(OpCode::kCos, b);
  const IR den = Sum(Prod(sh, sh), Prod(c, c));
  const IR large = E(OpCode::kGt, E(OpCode::kAbs, a), in.Const(in.real == ScalarType::Float64 ? 354 : 44));
  return {Pick(large, E(OpCode::kCopysign, in.Const(1), a), E(OpCode::kDiv, Prod(sh, ch), den)),
          Pick(large, Prod(Prod(in.Const(4), Prod(s, c)), E(OpCode::kExp, Prod(in.Const(-2), E(OpCode::kAbs, a)))),
               E(OpCode::kDiv, Prod(s, c), den))};
}

// e^z = e^a (cos b, sin b); a real z (b == 0) keeps its imaginary zero even when e^a is infinite.
Pair Exp(const Pair& z, const Inputs& in) {
  const IR ea = E(OpCode::kExp, z.first);
  return {Prod(ea, E(OpCode::kCos, z.second)),
          Pick(E(OpCode::kEq, z.second, in.Const(0)), z.second, Prod(ea, E(OpCode::kSin, z.second)))};
}

// The principal root without cancellation: t = sqrt((|a| + |z|) / 2), then (t, b / 2t) for a >= 0,
// (|b| / 2t, copysign(t, b)) otherwise; sqrt(+-0 + bi) with b == 0 is (0, b), and an infinite b
// gives (inf, b) whatever a is (C's csqrt).
Pair Sqrt(const Pair& z, const Inputs& in) {
  const IR &a = z.first, &b = z.second;
  const IR inf = in.Const(INFINITY), b_inf = E(OpCode::kEq, E(OpCode::kAbs, b), inf);
  const IR t = E(OpCode::kSqrt, Prod(Sum(E(OpCode::kAbs, a), E(OpCode::kHypot, a, b)), in.Const(0.5)));
  const IR two_t = Prod(in.Const(2), t);
  const IR zero = E(OpCode::kLogicalAnd, E(OpCode::kEq, a, in.Const(0)), E(OpCode::kEq, b, in.Const(0)));
  const IR right = E(OpCode::kGe, a, in.Const(0));
  return {Pick(b_inf, inf, Pick(zero, in.Const(0), Pick(right, t, E(OpCode::kDiv, E(OpCode::kAbs, b), two_t)))),
          Pick(b_inf, b, Pick(zero, b, Pick(right, E(OpCode::kDiv, b, two_t), E(OpCode::kCopysign, t, b))))};
}

Pair Unary(ComplexUnary op, const Pair& z, Inputs& in) {
  const IR &a = z.first, &b = z.second;
  const Pair one = {in.Const(1), in.Const(0)};
  switch (op) {
    case ComplexUnary::kNeg: return {E(OpCode::kNeg, a), E(OpCode::kNeg, b)};
    case ComplexUnary::kReciprocal: return Div(one, z, in.dtype);
    case ComplexUnary::kExp: return Exp(z, in);
    case ComplexUnary::kLog: return {E(OpCode::kLog, E(OpCode::kHypot, a, b)), E(OpCode::kAtan2, b, a)};
    case ComplexUnary::kSqrt: return Sqrt(z, in);
    case ComplexUnary::kRsqrt: return Div(one, Sqrt(z, in), in.dtype);
    case ComplexUnary::kSigmoid: {  // 1 / (1 + e^-z), as the CPU's
      const Pair e = Exp({E(OpCode::kNeg, a), E(OpCode::kNeg, b)}, in);
      return Div(one, {Sum(in.Const(1), e.first), e.second}, in.dtype);
    }
    case ComplexUnary::kTanh: return Tanh(z, in);
    case ComplexUnary::kTan: {  // tan z = -i tanh(iz)
      const Pair t = Tanh({E(OpCode::kNeg, b), a}, in);
      return {t.second, E(OpCode::kNeg, t.first)};
    }
    case ComplexUnary::kSin:
      return {Prod(E(OpCode::kSin, a), E(OpCode::kCosh, b)), Prod(E(OpCode::kCos, a), E(OpCode::kSinh, b))};
    case ComplexUnary::kCos:
      return {Prod(E(OpCode::kCos, a), E(OpCode::kCosh, b)), E(OpCode::kNeg, Prod(E(OpCode::kSin, a), E(OpCode::kSinh, b)))};
    case ComplexUnary::kSinh:
      return {Prod(E(OpCode::kSinh, a), E(OpCode::kCos, b)), Prod(E(OpCode::kCosh, a), E(OpCode::kSin, b))};
    case ComplexUnary::kCosh:
      return {Prod(E(OpCode::kCosh, a), E(OpCode::kCos, b)), Prod(E(OpCode::kSinh, a), E(OpCode::kSin, b))};
    default: break;
  }
  KILN_INTERNAL_ASSERT(false, "not a complex-valued unary op");
  return z;
}

// The real-valued results: |z| and the predicates.
IR RealUnary(ComplexUnary op, const Pair& z, const Inputs& in) {
  const IR &a = z.first, &b = z.second;
  const IR inf = in.Const(INFINITY);
  switch (op) {
    case ComplexUnary::kAbs: return E(OpCode::kHypot, a, b);
    case ComplexUnary::kIsnan: return E(OpCode::kLogicalOr, E(OpCode::kNe, a, a), E(OpCode::kNe, b, b));
    case ComplexUnary::kIsinf:
      return E(OpCode::kLogicalOr, E(OpCode::kEq, E(OpCode::kAbs, a), inf), E(OpCode::kEq, E(OpCode::kAbs, b), inf));
    case ComplexUnary::kIsfinite:
      return E(OpCode::kLogicalAnd, E(OpCode::kLt, E(OpCode::kAbs, a), inf), E(OpCode::kLt, E(OpCode::kAbs, b), inf));
    case ComplexUnary::kLogicalNot:
      return E(OpCode::kLogicalAnd, E(OpCode::kEq, a, in.Const(0)), E(OpCode::kEq, b, in.Const(0)));
    default: return nullptr;
  }
}

}  // namespace

void ComplexUnaryCUDA(ComplexUnary op, const Tensor& out, const Tensor& z, const char* name) {
  Inputs in(ToRealValueType(z.dtype()));
  const Pair x = in.Of(z);
  if (IR real = RealUnary(op, x, in)) {
    cuda::LaunchPointwise(name, out, in.list, real);
    return;
  }
  WriteHalves(name, out, {&z}, in, Unary(op, x, in));
}

void ComplexEqualCUDA(bool not_equal, const Tensor& out, const Tensor& a, const Tensor* b, const Scalar* b_scalar,
                      ScalarType compute, const char* name) {
  Inputs in(ToRealValueType(compute));
  const Pair x = in.Of(a), y = b ? in.Of(*b) : in.Of(*b_scalar);
  const IR equal = E(OpCode::kLogicalAnd, E(OpCode::kEq, x.first, y.first), E(OpCode::kEq, x.second, y.second));
  cuda::LaunchPointwise(name, out, in.list, not_equal ? E(OpCode::kLogicalNot, equal) : equal);
}

void ComplexWhereCUDA(const Tensor& out, const Tensor& cond, const ComplexOperand& a, const ComplexOperand& b,
                      const char* name) {
  Inputs in(ToRealValueType(out.dtype()));
  const IR c = in.Condition(cond);
  const Pair x = in.Of(a), y = in.Of(b);
  WriteHalves(name, out, {&cond, a.tensor, b.tensor}, in, {Pick(c, x.first, y.first), Pick(c, x.second, y.second)});
}

}  // namespace kiln
