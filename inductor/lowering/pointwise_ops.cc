// inductor/lowering/pointwise_ops.cc: pointwise lowerings beyond the registry's rows (pointwise_ops.h).
#include "inductor/lowering/pointwise_ops.h"

#include <cmath>
#include <limits>
#include <utility>

#include "inductor/lowering/lazy.h"
#include "runtime/error.h"

namespace kiln::inductor::lowering {
namespace {

using codegen::DType;
using codegen::Expr;
using codegen::ExprPtr;
using codegen::OpCode;

constexpr double kInf = std::numeric_limits<double>::infinity();

ExprPtr Float(double v, DType t) { return Expr::Const(v, t); }

// Note [Integer pow]: eager raises integers to integer powers by repeated squaring in int64, so a
// result past 2^63 wraps around (3 ** 41 is -420491770248316829); the kernel IR's pow computes
// integers through double, exact only below 2^53, and an overflow came out INT64_MIN (fuzz seed
// 171, program 5882). A constant exponent is unrolled into multiplications, which wrap as eager's
// do; the IR is a tree without shared values (x ** 8 is a product of 8 loads, merged again by
// LLVM), so only small exponents are, and the rest run eager's kernel, as PyTorch's Inductor
// runs ATen's for a tensor exponent.
constexpr int64_t kUnrolledIntegerPowMax = 64;

// x ** n (n >= 0) as multiplications by squaring.
ExprPtr IntegerPower(const ExprPtr& x, int64_t n, DType dtype) {
  if (n == 0) return Expr::ConstInt(1, dtype);
  if (n == 1) return x;
  ExprPtr half = IntegerPower(x, n / 2, dtype);
  ExprPtr square = Binary(OpCode::kMul, half, half);
  return n % 2 ? Binary(OpCode::kMul, square, x) : square;
}

// A one-operand element function over x, computed in the result's type.
std::shared_ptr<Pointwise> Unary1(const char* name, ScalarType dtype, std::vector<int64_t> shape, const Operand& x,
                                  const std::function<ExprPtr(ExprPtr)>& f) {
  return MakePointwise(name, dtype, std::move(shape), {x}, [&](std::vector<ExprPtr> xs) { return f(xs[0]); });
}

std::shared_ptr<Pointwise> Binary2(const char* name, ScalarType dtype, std::vector<int64_t> shape, const Operand& a,
                                   const Operand& b, const std::function<ExprPtr(ExprPtr, ExprPtr)>& f,
                                   const std::vector<std::optional<DType>>& load_as = {}) {
  return MakePointwise(name, dtype, std::move(shape), {a, b},
                       [&](std::vector<ExprPtr> xs) { return f(xs[0], xs[1]); }, std::nullopt, load_as);
}

// sqrt(2 / pi) and 1 / sqrt(2 pi) (M_2_SQRTPI * M_SQRT1_2 / 2), as eager's kernels spell them
const double kSqrt2OverPi = std::sqrt(2 / M_PI);
constexpr double kInvSqrt2Pi = 1.12837916709551257390 * 0.70710678118654752440 * 0.5;

}  // namespace

std::shared_ptr<Pointwise> LowerPow(ScalarType dtype, std::vector<int64_t> shape, const Operand& a, const Operand& b) {
  const DType d = ir::KernelDType(dtype);
  if (IsFloat(d)) return LowerElementwise(AtenOp("aten::pow.Tensor_Tensor"), dtype, std::move(shape), {a, b}, std::nullopt);
  if (b.is_value() || !b.number.is_integral() || b.number.to_int() < 0 || b.number.to_int() > kUnrolledIntegerPowMax)
    throw Fallback("integer pow by a tensor or a large exponent (Note [Integer pow])");
  const int64_t n = b.number.to_int();
  return Unary1("pow", dtype, std::move(shape), a, [&](ExprPtr x) { return IntegerPower(x, n, d); });
}

std::shared_ptr<Pointwise> LowerWhere(ScalarType dtype, std::vector<int64_t> shape, const Operand& cond,
                                      const Operand& a, const Operand& b) {
  const DType d = ir::KernelDType(dtype);
  std::set<std::string> ops{"where"};
  for (const Operand* o : {&cond, &a, &b})
    if (o->is_value()) ops.insert(o->value->ops.begin(), o->value->ops.end());
  auto read = [&](Trace& t, const Operand& o, const Indices& idx, DType as) {
    return o.is_value() ? t.Read(o.value, BroadcastIndices(idx, o.value->shape(), shape), as) : Constant(o.number, as);
  };
  return LazyPointwise(dtype, shape, ops, [&](Trace& t, const Indices& idx) {
    ExprPtr c = read(t, cond, idx, DType::Bool);
    ExprPtr x = read(t, a, idx, d);
    return Where(c, x, read(t, b, idx, d));
  });
}

std::shared_ptr<Pointwise> LowerGelu(ScalarType dtype, std::vector<int64_t> shape, const Operand& x,
                                     const std::string& approximate) {
  const DType d = ir::KernelDType(dtype);
  auto c = [d](double v) { return Float(v, d); };
  bool one_element = true;
  for (int64_t n : shape) one_element &= n == 1;
  std::function<ExprPtr(ExprPtr)> f;
  if (approximate == "tanh") {
    f = [&](ExprPtr a) {
      // eager's order (x^3 first); eager fuses the multiply-add, which this IR cannot say
      ExprPtr cube = Binary(OpCode::kMul, Binary(OpCode::kMul, a, a), a);
      ExprPtr inner = Binary(OpCode::kMul, c(kSqrt2OverPi), Binary(OpCode::kAdd, a, Binary(OpCode::kMul, c(0.044715), cube)));
      return Binary(OpCode::kMul, Binary(OpCode::kMul, c(0.5), a), Binary(OpCode::kAdd, c(1.0), Unary(OpCode::kTanh, inner)));
    };
  } else if (one_element) {
    // one element: eager's scalar loop, x * 0.5 * (1 + erf(x / sqrt 2)) with libm's erf, in the
    // opmath type (Note [gelu's two loops] in tensor/ops/activation.cc)
    const DType m = Opmath(d);
    f = [m](ExprPtr a) {
      ExprPtr erf = Unary(OpCode::kErf, Binary(OpCode::kMul, a, Float(std::sqrt(0.5), m)));
      return Binary(OpCode::kMul, Binary(OpCode::kMul, a, Float(0.5, m)), Binary(OpCode::kAdd, Float(1.0, m), erf));
    };
  } else if (d == DType::F32) {
    // eager's float32 kernel: 0.5 * fma(x, erf, x) with its erf (Note [Gelu's erf] in codegen/float_math.inc)
    f = [](ExprPtr a) { return Unary(OpCode::kGelu, a); };
  } else {
    // float64, and the 16-bit types computed in float32: x * cdf, as eager's
    f = [](ExprPtr a) { return Binary(OpCode::kMul, a, Unary(OpCode::kNormalCdf, a)); };
  }
  return Unary1("gelu", dtype, std::move(shape), x, f);
}

std::shared_ptr<Pointwise> LowerGeluBackward(ScalarType dtype, std::vector<int64_t> shape, const Operand& grad,
                                             const Operand& x, const std::string& approximate) {
  if (approximate != "none") throw Fallback("gelu_backward(approximate='tanh')");
  const DType d = ir::KernelDType(dtype);
  if (d == DType::F32) {
    // eager's float32 kernel, one exp shared by the CDF's erf and the PDF (fmath::GeluBackward):
    // the same bits (Note [One float math])
    return Binary2("gelu_backward", dtype, std::move(shape), grad, x,
                   [](ExprPtr g, ExprPtr a) { return Binary(OpCode::kGeluBackward, g, a); });
  }
  // cdf + x * exp(-0.5 * x * x) / sqrt(2 pi), as eager's other dtypes
  return Binary2("gelu_backward", dtype, std::move(shape), grad, x, [d](ExprPtr g, ExprPtr a) {
    ExprPtr pdf = Binary(OpCode::kMul, Unary(OpCode::kExp, Binary(OpCode::kMul, Binary(OpCode::kMul, Float(-0.5, d), a), a)),
                         Float(kInvSqrt2Pi, d));
    return Binary(OpCode::kMul, g, Binary(OpCode::kAdd, Unary(OpCode::kNormalCdf, a), Binary(OpCode::kMul, a, pdf)));
  });
}

std::shared_ptr<Pointwise> LowerActivationBackward(const std::string& name, ScalarType dtype,
                                                   std::vector<int64_t> shape, const Operand& grad, const Operand& x,
                                                   const Scalar& threshold) {
  const DType d = ir::KernelDType(dtype);
  ExprPtr one = Float(1.0, d);
  std::function<ExprPtr(ExprPtr, ExprPtr)> f;
  if (name == "silu_backward") {
    f = [&](ExprPtr g, ExprPtr a) {
      ExprPtr s = Unary(OpCode::kSigmoid, a);
      return Binary(OpCode::kMul, g, Binary(OpCode::kMul, s, Binary(OpCode::kAdd, one, Binary(OpCode::kMul, a, Binary(OpCode::kSub, one, s)))));
    };
  } else if (name == "sigmoid_backward") {  // x is the forward's result y
    f = [&](ExprPtr g, ExprPtr s) { return Binary(OpCode::kMul, g, Binary(OpCode::kMul, s, Binary(OpCode::kSub, one, s))); };
  } else if (name == "tanh_backward") {  // x is the forward's result y
    f = [&](ExprPtr g, ExprPtr t) { return Binary(OpCode::kMul, g, Binary(OpCode::kSub, one, Binary(OpCode::kMul, t, t))); };
  } else if (name == "threshold_backward") {
    f = [&](ExprPtr g, ExprPtr a) {
      return Where(Binary(OpCode::kLe, a, Constant(threshold, d)), Constant(Scalar(int64_t{0}), d), g);
    };
  } else {
    KILN_CHECK_VALUE(false, "inductor: no activation backward named '", name, "'");
  }
  return Binary2(name.c_str(), dtype, std::move(shape), grad, x, f);
}

std::shared_ptr<Pointwise> LowerClamp(ScalarType dtype, std::vector<int64_t> shape, const Operand& x,
                                      const std::optional<Operand>& min, const std::optional<Operand>& max) {
  // max then min, as eager's loop: x on ties (max(-0., 0.) is -0.), NaN from x, then min, then max
  std::vector<Operand> operands = {x};
  if (min) operands.push_back(*min);
  if (max) operands.push_back(*max);
  return MakePointwise("clamp", dtype, std::move(shape), operands, [&](std::vector<ExprPtr> xs) {
    ExprPtr a = xs[0];
    if (min) a = Binary(OpCode::kMax, a, xs[1]);
    if (max) a = Binary(OpCode::kMin, a, xs.back());
    return a;
  });
}

std::shared_ptr<Pointwise> LowerDivMode(ScalarType dtype, std::vector<int64_t> shape, const Operand& a,
                                        const Operand& b, const std::optional<std::string>& rounding_mode) {
  const DType d = ir::KernelDType(dtype);
  if (rounding_mode == "floor") return LowerElementwise(AtenOp("aten::floor_divide"), dtype, std::move(shape), {a, b}, std::nullopt);
  const std::vector<std::optional<DType>> load_as = OneElementInFloat(dtype, b);
  if (rounding_mode == "trunc" && IsFloat(d)) {
    return Binary2("div", dtype, std::move(shape), a, b,
                   [](ExprPtr x, ExprPtr y) { return Unary(OpCode::kTrunc, Binary(OpCode::kDiv, x, y)); }, load_as);
  }
  if (rounding_mode) CheckIntegerDivisor("div", b);
  // true division, or integers' (truncating)
  return Binary2("div", dtype, std::move(shape), a, b, [](ExprPtr x, ExprPtr y) { return Binary(OpCode::kDiv, x, y); },
                 load_as);
}

std::shared_ptr<Pointwise> LowerRoundDecimals(ScalarType dtype, std::vector<int64_t> shape, const Operand& x,
                                              int64_t decimals) {
  const DType d = ir::KernelDType(dtype);
  if (!IsFloat(d)) throw Fallback("round with decimals of integers (eager raises NotImplementedError)");
  ExprPtr scale = Float(std::pow(10.0, static_cast<double>(std::llabs(decimals))), Opmath(d));
  return Unary1("round", dtype, std::move(shape), x, [&](ExprPtr a) {
    if (decimals < 0) return Binary(OpCode::kMul, Unary(OpCode::kRound, Binary(OpCode::kDiv, a, scale)), scale);
    return Binary(OpCode::kDiv, Unary(OpCode::kRound, Binary(OpCode::kMul, a, scale)), scale);
  });
}

std::shared_ptr<Pointwise> LowerNanToNum(ScalarType dtype, std::vector<int64_t> shape, const Operand& x,
                                         std::optional<double> nan, std::optional<double> posinf,
                                         std::optional<double> neginf) {
  const DType d = ir::KernelDType(dtype);
  if (!IsFloat(d))  // integers and bools have no NaN or infinity: a copy
    return Unary1("nan_to_num", dtype, std::move(shape), x, [](ExprPtr a) { return a; });
  const double big = d == DType::F64 ? std::numeric_limits<double>::max()
                     : d == DType::F32 ? static_cast<double>(std::numeric_limits<float>::max())
                                       : 3.3895313892515355e38;  // bfloat16's largest
  const DType m = Opmath(d);
  return Unary1("nan_to_num", dtype, std::move(shape), x, [&](ExprPtr a) {
    ExprPtr infinite = Where(Binary(OpCode::kEq, a, Float(-kInf, m)), Float(neginf.value_or(-big), m), a);
    infinite = Where(Binary(OpCode::kEq, a, Float(kInf, m)), Float(posinf.value_or(big), m), infinite);
    return Where(Binary(OpCode::kNe, a, a), Float(nan.value_or(0.0), m), infinite);
  });
}

std::shared_ptr<Pointwise> LowerCopy(ScalarType dtype, std::vector<int64_t> shape, const Operand& x) {
  return Unary1("clone", dtype, std::move(shape), x, [](ExprPtr a) { return a; });
}

std::shared_ptr<Pointwise> LowerFill(const std::string& name, ScalarType dtype, std::vector<int64_t> shape,
                                     const Scalar& value) {
  const DType d = ir::KernelDType(dtype);
  return LazyPointwise(dtype, std::move(shape), {name}, [&](Trace&, const Indices&) { return Constant(value, d); });
}

}  // namespace kiln::inductor::lowering
