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

void ComplexUnaryCUDA(ComplexUnary op, const Tensor& out, const Tensor& z, const char* name) {
  Inputs in(ToRealValueType(z.dtype()));
  const std::pair<IR, IR> x = in.Of(z);
  if (op == ComplexUnary::kAbs) {
    cuda::LaunchPointwise(name, out, in.list, E(OpCode::kHypot, x.first, x.second));
    return;
  }
  if (op == ComplexUnary::kNeg) {
    WriteHalves(name, out, {&z}, in, {E(OpCode::kNeg, x.first), E(OpCode::kNeg, x.second)});
    return;
  }
  const std::pair<IR, IR> one = {Expr::Const(1.0, in.dtype), Expr::Const(0.0, in.dtype)};
  WriteHalves(name, out, {&z}, in, Div(one, x, in.dtype));
}

}  // namespace kiln
