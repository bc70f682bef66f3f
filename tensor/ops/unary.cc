// tensor/ops/unary.cc: unary pointwise ops (exp, log, sqrt, sigmoid, relu, gelu, abs, floor, ...).
//
// Like binary.cc, each op is a table row (kUnary in unary_kernels.h): a name, the element function,
// and its dtype rule (Float: integer inputs compute in the default float dtype; Same: keep the
// input dtype; Bool: predicates). From each row come the functional op, the in-place `op_` and
// `op.out`; the CPU loops compile in unary_kernels_*.cc (Note [Unary kernels in several files]).
#include <cmath>

#include "tensor/cuda/pointwise.h"
#include "tensor/ops/common.h"
#include "tensor/ops/complex_cuda.h"
#include "tensor/ops/pointwise_ir.h"
#include "tensor/ops/unary_kernels.h"

namespace kiln {
namespace {

using namespace unary;  // NOLINT: the op enum, kUnary and the loops (unary_kernels.h)

// The CUDA kernel of a complex unary op (CheckUnaryDtype admitted only ComplexUnarySupported's).
ComplexUnary ToComplexUnary(int op) {
  switch (op) {
    case kExp: return ComplexUnary::kExp;
    case kLog: return ComplexUnary::kLog;
    case kSqrt: return ComplexUnary::kSqrt;
    case kRsqrt: return ComplexUnary::kRsqrt;
    case kSigmoid: return ComplexUnary::kSigmoid;
    case kTanh: return ComplexUnary::kTanh;
    case kSin: return ComplexUnary::kSin;
    case kCos: return ComplexUnary::kCos;
    case kTan: return ComplexUnary::kTan;
    case kSinh: return ComplexUnary::kSinh;
    case kCosh: return ComplexUnary::kCosh;
    case kNeg: return ComplexUnary::kNeg;
    case kAbs: return ComplexUnary::kAbs;
    case kReciprocal: return ComplexUnary::kReciprocal;
    case kIsnan: return ComplexUnary::kIsnan;
    case kIsinf: return ComplexUnary::kIsinf;
    case kIsfinite: return ComplexUnary::kIsfinite;
    case kLogicalNot: return ComplexUnary::kLogicalNot;
  }
  KILN_INTERNAL_ASSERT(false, "no complex kernel for ", kUnary[op].name);
  return ComplexUnary::kNeg;
}

ScalarType UnaryComputeType(int op, ScalarType in) {
  const UnarySpec& spec = kUnary[op];
  if (spec.result == UnaryResult::Float && IsIntegral(in, true)) return GetDefaultDtype();
  return in;
}

void CheckUnaryDtype(int op, ScalarType in) {
  const UnarySpec& spec = kUnary[op];
  KILN_CHECK_NOT_IMPLEMENTED(!IsComplex(in) || ComplexUnarySupported(op), "\"", spec.name,
                             "\" not implemented for '", ScalarTypeDisplayName(in), "'");
  KILN_CHECK(!(op == kNeg && in == ScalarType::Bool), "Negation, the `-` operator, on a bool tensor is not "
             "supported. If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.");
  KILN_CHECK(!(op == kRelu && in == ScalarType::Bool), "Boolean inputs not supported for relu");  // as PyTorch's
  KILN_CHECK_NOT_IMPLEMENTED(spec.allow_bool || in != ScalarType::Bool, "\"", spec.name, "\" not implemented for 'Bool'");
  if (op == kBitwiseNot) KILN_CHECK_NOT_IMPLEMENTED(IsIntegral(in, true), "\"bitwise_not\" not implemented for '", ScalarTypeDisplayName(in), "'");
  if (op == kSilu || op == kMish) KILN_CHECK_NOT_IMPLEMENTED(IsFloating(in), "\"", spec.name, "\" not implemented for '", ScalarTypeDisplayName(in), "'");
  if (op == kFrac) KILN_CHECK_NOT_IMPLEMENTED(IsFloating(in), "\"frac\" not implemented for '", ScalarTypeDisplayName(in), "'");
}

ScalarType UnaryResultType(int op, ScalarType in) {
  if (op == kAbs && IsComplex(in)) return ToRealValueType(in);
  return kUnary[op].result == UnaryResult::Bool ? ScalarType::Bool : UnaryComputeType(op, in);
}

// out = f(self) for complex self: the loop writes complex values (or bools); abs's real part
// goes to its real result through a copy.
template <int kOp>
void ComplexUnaryInto(const Tensor& out, const Tensor& self) {
  const bool to_bool = kUnary[kOp].result == UnaryResult::Bool;
  const ScalarType loop_out = to_bool ? ScalarType::Bool : self.dtype();
  Tensor dst = out.dtype() == loop_out ? out : EmptyLike(out, loop_out);
  RunComplexUnary<kOp>(ElementwiseIter({dst, self}), self.dtype());
  if (!dst.is_same(out)) {
    Tensor o = out;
    ops::copy_(o, dst);
  }
}

// --- the element functions as kernel IR: CUDA's kernels and Inductor's lowerings -------------
// (tensor/cuda/pointwise.h; Note [Pointwise ops as kernel IR] in pointwise_ir.h)

// Ops with an expression (and so a CUDA kernel and a lowering): all but erfinv and digamma (no IR
// operator and no libdevice function).
constexpr bool HasIr(int op) { return op != kErfinv && op != kDigamma; }

// The dtype the expression computes in: the opmath type of `compute`, except that isinf/isfinite
// of integers compare a float.
codegen::DType UnaryOpmath(int op, ScalarType compute) {
  if (!IsFloating(compute) && (op == kIsinf || op == kIsfinite)) return codegen::DType::F32;
  return cuda::OpmathDType(compute, kUnary[op].name);
}

codegen::ExprPtr UnaryExpr(int op, codegen::ExprPtr x, codegen::DType m, DeviceType device) {
  using codegen::OpCode;
  auto ir = [](OpCode o, codegen::ExprPtr a) { return codegen::Expr::Op(o, {std::move(a)}); };
  auto ir2 = [](OpCode o, codegen::ExprPtr a, codegen::ExprPtr b) { return codegen::Expr::Op(o, {std::move(a), std::move(b)}); };
  auto c = [&](double v) { return codegen::Expr::Const(v, m); };
  switch (op) {
    case kExp: return ir(OpCode::kExp, x);
    case kExp2: return ir(OpCode::kExp2, x);
    case kLog: return ir(OpCode::kLog, x);
    case kLog2: return ir(OpCode::kLog2, x);
    case kLog10: return ir(OpCode::kLog10, x);
    case kLog1p: return ir(OpCode::kLog1p, x);
    case kExpm1: return ir(OpCode::kExpm1, x);
    case kSqrt: return ir(OpCode::kSqrt, x);
    case kRsqrt: return ir(OpCode::kRsqrt, x);
    case kSigmoid: return ir(OpCode::kSigmoid, x);
    case kTanh: return ir(OpCode::kTanh, x);
    case kSin: return ir(OpCode::kSin, x);
    case kCos: return ir(OpCode::kCos, x);
    case kTan: return ir(OpCode::kTan, x);
    case kAsin: return ir(OpCode::kAsin, x);
    case kAcos: return ir(OpCode::kAcos, x);
    case kAtan: return ir(OpCode::kAtan, x);
    case kSinh: return ir(OpCode::kSinh, x);
    case kCosh: return ir(OpCode::kCosh, x);
    case kAsinh: return ir(OpCode::kAsinh, x);
    case kAcosh: return ir(OpCode::kAcosh, x);
    case kAtanh: return ir(OpCode::kAtanh, x);
    case kErf: return ir(OpCode::kErf, x);
    case kErfc: return ir(OpCode::kErfc, x);
    case kLgamma: return ir(OpCode::kLgamma, x);
    case kSilu: return ir2(OpCode::kDiv, x, ir2(OpCode::kAdd, c(1), ir(OpCode::kExp, ir(OpCode::kNeg, x))));
    case kMish: return ir2(OpCode::kMul, x, ir(OpCode::kTanh, ir(OpCode::kLog1p, ir(OpCode::kExp, x))));
    case kNeg: return ir(OpCode::kNeg, x);
    case kAbs: return ir(OpCode::kAbs, x);
    case kSign: return ir(OpCode::kSign, x);
    case kReciprocal: return ir(OpCode::kReciprocal, x);
    case kFloor: return ir(OpCode::kFloor, x);
    case kCeil: return ir(OpCode::kCeil, x);
    case kRound: return ir(OpCode::kRound, x);
    case kTrunc: return ir(OpCode::kTrunc, x);
    case kFrac: return ir2(OpCode::kSub, x, ir(OpCode::kTrunc, x));
    case kRelu:  // PyTorch's CUDA relu is max(x, 0): +0.0 for -0.0 (its CPU one keeps -0.0); NaN stays
      if (!codegen::IsFloatDType(m) || device != DeviceType::CUDA) return ir(OpCode::kRelu, x);
      return codegen::Expr::Op(OpCode::kWhere, {ir2(OpCode::kLe, x, c(0)), c(0), x});
    case kLogicalNot: return ir(OpCode::kLogicalNot, x);
    case kBitwiseNot: return ir(OpCode::kBitNot, x);
    case kIsnan: return ir2(OpCode::kNe, x, x);
    case kIsinf: return ir2(OpCode::kEq, ir(OpCode::kAbs, x), c(INFINITY));
    case kIsfinite: return ir2(OpCode::kLt, ir(OpCode::kAbs, x), c(INFINITY));
    case kSignbit: return ir(OpCode::kSignbit, x);
    case kSpecialNdtr:
      return ir2(OpCode::kMul, ir2(OpCode::kAdd, c(1), ir(OpCode::kErf, ir2(OpCode::kMul, x, c(M_SQRT1_2)))), c(0.5));
  }
  KILN_INTERNAL_ASSERT(false, "no CUDA expression for ", kUnary[op].name);
  return x;
}

template <int kOp>
void UnaryCUDA(const Tensor& out, const Tensor& self, ScalarType compute) {
  const char* name = kUnary[kOp].name;
  cuda::LaunchPointwise(
      name, out, {cuda::PointwiseInput::Of(self)},
      UnaryExpr(kOp, cuda::OpmathInput(0, compute, name), UnaryOpmath(kOp, compute), DeviceType::CUDA));
}

template <int kOp>
void UnaryInto(const Tensor& out, const Tensor& self) {
  if (out.numel() == 0) return;
  ScalarType compute = UnaryComputeType(kOp, self.dtype());
  if (out.device().is_cuda()) {
    if (IsComplex(self.dtype())) return ComplexUnaryCUDA(ToComplexUnary(kOp), out, self, kUnary[kOp].name);
    if constexpr (HasIr(kOp)) return UnaryCUDA<kOp>(out, self, compute);
  }
  if (IsComplex(self.dtype())) return ComplexUnaryInto<kOp>(out, self);
  Tensor in = CastTo(self, compute);
  const bool to_bool = kUnary[kOp].result == UnaryResult::Bool;
  Tensor dst = out.dtype() == (to_bool ? ScalarType::Bool : compute) ? out : EmptyLike(out, to_bool ? ScalarType::Bool : compute);
  RunUnary<kOp>(ElementwiseIter({dst, in}), compute);
  if (!dst.is_same(out)) {
    Tensor o = out;
    ops::copy_(o, dst);
  }
}

template <int kOp> TensorMeta UnaryMeta(const Tensor& self) {
  CheckUnaryDtype(kOp, self.dtype());
  return TensorMeta{self->sym_sizes(), LayoutOfInputs(self->sym_sizes(), {&self}), UnaryResultType(kOp, self.dtype()),
                    self.device()};
}
template <int kOp> Tensor UnaryFunctional(const Tensor& self) {
  Tensor out = EmptyFromMeta(UnaryMeta<kOp>(self));
  UnaryInto<kOp>(out, self);
  return out;
}
template <int kOp> Tensor UnaryInplaceImpl(Tensor self, bool run) {
  CheckUnaryDtype(kOp, self.dtype());
  ScalarType result = UnaryResultType(kOp, self.dtype());
  KILN_CHECK(CanCast(result, self.dtype()), "result type ", ScalarTypeDisplayName(result),
             " can't be cast to the desired output type ", ScalarTypeDisplayName(self.dtype()));
  if (run) UnaryInto<kOp>(self, self);
  return self;
}
template <int kOp> Tensor UnaryInplace(Tensor self) { return UnaryInplaceImpl<kOp>(self, true); }
template <int kOp> Tensor UnaryInplaceMeta(Tensor self) { return UnaryInplaceImpl<kOp>(self, false); }
template <int kOp> Tensor UnaryOut(const Tensor& self, Tensor out) {
  ResizeOut(kUnary[kOp].name, out, UnaryMeta<kOp>(self));
  UnaryInto<kOp>(out, self);
  return out;
}

template <int kOp>
void DefUnary(Registry& r, bool inplace = true) {
  std::string name = kUnary[kOp].name;
  // the same kernels on CUDA, where UnaryInto launches the op's generated kernel
  constexpr bool cuda = HasIr(kOp);
  // torch.special's ops are functions of that module only (kiln.special.ndtr: python/kiln/special)
  const Variants variants = name.rfind("special_", 0) == 0 ? kFunction : kFunctionAndMethod;
  Op* functional = r.Def(name + "(Tensor self) -> Tensor", {Tag::pointwise, Tag::core}, variants)
                       .template CPUAndCUDA<&UnaryFunctional<kOp>>(cuda)
                       .template Meta<&UnaryMeta<kOp>>()
                       .op();
  if constexpr (HasIr(kOp)) {
    PointwiseIr ir;
    ir.compute = [](const std::vector<ScalarType>& in) { return UnaryComputeType(kOp, in.at(0)); };
    ir.build = [](std::vector<codegen::ExprPtr> in, ScalarType compute, DeviceType device) {
      return UnaryExpr(kOp, std::move(in.at(0)), UnaryOpmath(kOp, compute), device);
    };
    RegisterPointwiseIr(*functional, std::move(ir));
  }
  if (inplace) {
    r.Def(name + "_(Tensor(a!) self) -> Tensor(a!)", {Tag::pointwise}, variants)
        .template CPUAndCUDA<&UnaryInplace<kOp>>(cuda)
        .template Impl<&UnaryInplaceMeta<kOp>>(DispatchKey::Meta)
        .template Impl<&UnaryInplaceMeta<kOp>>(DispatchKey::Fake);
  }
  r.Def(name + ".out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)", {Tag::pointwise})
      .template CPUAndCUDA<&UnaryOut<kOp>>(cuda);
}

template <int... I>
void DefAll(Registry& r, std::integer_sequence<int, I...>) {
  (DefUnary<I>(r, !(I == kIsnan || I == kIsinf || I == kIsfinite || I == kSignbit || I == kSpecialNdtr)), ...);
}

// Ops PyTorch exposes under other spellings.
Tensor Absolute(const Tensor& self) { return CallOp<Tensor>(KILN_OP("aten::abs"), self); }
Tensor Negative(const Tensor& self) { return CallOp<Tensor>(KILN_OP("aten::neg"), self); }
// square is pow(self, 2), as PyTorch's composite (graphs record pow.Tensor_Scalar, autograd
// PowBackward0; bool squares to int64). Complex numbers multiply instead: kiln has no complex pow.
Tensor Square(const Tensor& self) {
  if (IsComplex(self.dtype())) return ops::mul(self, self);
  return CallOp<Tensor>(KILN_OP("aten::pow.Tensor_Scalar"), self, Scalar(int64_t(2)));
}
Tensor Square_(Tensor self) {
  if (IsComplex(self.dtype())) return CallOp<Tensor>(KILN_OP("aten::mul_.Tensor"), self, Tensor(self));
  return CallOp<Tensor>(KILN_OP("aten::pow_.Scalar"), self, Scalar(int64_t(2)));
}
Tensor Positive(const Tensor& self) {
  KILN_CHECK(self.dtype() != ScalarType::Bool, "The `+` operator, on a bool tensor is not supported.");
  return self;
}

// round(x, decimals=d), as PyTorch's round_decimals_kernel: x * 10^d rounded half to even and
// divided back (for d < 0, x / 10^-d rounded and multiplied back), in the opmath type.
void RoundDecimalsInto(const Tensor& out, const Tensor& self, int64_t decimals) {
  if (out.numel() == 0) return;
  const bool negative = decimals < 0;
  if (out.device().is_cuda()) {  // as the CPU loop: nearbyint(x * 10^d) / 10^d, or * / for d < 0
    const ScalarType t = self.dtype();
    KILN_CHECK_NOT_IMPLEMENTED(IsFloating(t), "\"round_cuda\" not implemented for '", ScalarTypeDisplayName(t), "'");
    using codegen::OpCode;
    const codegen::ExprPtr x = cuda::OpmathInput(0, t, "round"), p = cuda::OpmathInput(1, t, "round");
    auto op = [](OpCode o, std::vector<codegen::ExprPtr> a) { return codegen::Expr::Op(o, std::move(a)); };
    const codegen::ExprPtr value =
        negative ? op(OpCode::kMul, {op(OpCode::kRound, {op(OpCode::kDiv, {x, p})}), p})
                 : op(OpCode::kDiv, {op(OpCode::kRound, {op(OpCode::kMul, {x, p})}), p});
    const double ten_pow = std::pow(10.0, static_cast<double>(negative ? -decimals : decimals));
    cuda::LaunchPointwise("round_decimals", out,
                          {cuda::PointwiseInput::Of(self), cuda::PointwiseInput::Number(Scalar(ten_pow), t)}, value);
    return;
  }
  Tensor dst = out.dtype() == self.dtype() ? out : EmptyLike(out, self.dtype());
  ElementwiseIter iter({dst, self});
  KILN_DISPATCH_FLOATING(self.dtype(), decimals == 0 ? "round_vml_cpu" : "round_cpu", [&] {
    using C = scalar_t;
    using M = opmath_t<C>;
    const M ten_pow = static_cast<M>(std::pow(10.0, static_cast<double>(negative ? -decimals : decimals)));
    CpuKernel<C, C>(iter, [ten_pow, negative](C x) -> C {
      return C(negative ? std::nearbyint(M(x) / ten_pow) * ten_pow : std::nearbyint(M(x) * ten_pow) / ten_pow);
    });
  });
  if (!dst.is_same(out)) {
    Tensor o = out;
    ops::copy_(o, dst);
  }
}
TensorMeta RoundDecimalsMeta(const Tensor& self, int64_t) { return UnaryMeta<kRound>(self); }
Tensor RoundDecimals(const Tensor& self, int64_t decimals) {
  Tensor out = EmptyFromMeta(RoundDecimalsMeta(self, decimals));
  RoundDecimalsInto(out, self, decimals);
  return out;
}
Tensor RoundDecimalsInplace(Tensor self, int64_t decimals) {
  RoundDecimalsInto(self, self, decimals);
  return self;
}
Tensor RoundDecimalsInplaceMeta(Tensor self, int64_t) { return self; }
Tensor RoundDecimalsOut(const Tensor& self, int64_t decimals, Tensor out) {
  ResizeOut("round", out, RoundDecimalsMeta(self, decimals));
  RoundDecimalsInto(out, self, decimals);
  return out;
}

}  // namespace

void RegisterUnaryOps(Registry& r) {
  DefAll(r, std::make_integer_sequence<int, kNumUnary>{});
  r.Def("absolute(Tensor self) -> Tensor", {}, kFunctionAndMethod).Composite<&Absolute>();
  r.Def("negative(Tensor self) -> Tensor", {}, kFunctionAndMethod).Composite<&Negative>();
  r.Def("positive(Tensor(a) self) -> Tensor(a)", {}, kFunctionAndMethod).Composite<&Positive>();
  r.Def("square(Tensor self) -> Tensor", {Tag::pointwise}, kFunctionAndMethod).Composite<&Square>();
  r.Def("square_(Tensor(a!) self) -> Tensor(a!)", {Tag::pointwise}, kFunctionAndMethod).Composite<&Square_>();
  r.Def("round.decimals(Tensor self, *, int decimals) -> Tensor", {Tag::pointwise}, kFunctionAndMethod)
      .CPUAndCUDA<&RoundDecimals>().Meta<&RoundDecimalsMeta>();
  r.Def("round_.decimals(Tensor(a!) self, *, int decimals) -> Tensor(a!)", {Tag::pointwise}, kFunctionAndMethod)
      .CPUAndCUDA<&RoundDecimalsInplace>()
      .Impl<&RoundDecimalsInplaceMeta>(DispatchKey::Meta)
      .Impl<&RoundDecimalsInplaceMeta>(DispatchKey::Fake);
  r.Def("round.decimals_out(Tensor self, *, int decimals, Tensor(a!) out) -> Tensor(a!)", {Tag::pointwise})
      .CPUAndCUDA<&RoundDecimalsOut>();

  // torch's second names of these ops (Note [Op aliases] in dispatcher.h): arccos, arccos_, ...
  for (std::string inverse : {"acos", "acosh", "asin", "asinh", "atan", "atanh"}) {
    r.Alias("arc" + inverse.substr(1), inverse);
    r.Alias("arc" + inverse.substr(1) + "_", inverse + "_");
  }
  r.Alias("absolute_", "abs_", kMethod);  // no torch.absolute_
  r.Alias("negative_", "neg_");
  r.Alias("fix", "trunc");
  r.Alias("fix_", "trunc_");
  r.Alias("sgn_", "sign_", kMethod);
  // torch.special's names of them (kiln.special.expit is kiln.sigmoid)
  for (std::string name : {"digamma", "erf", "erfc", "erfinv", "exp2", "expm1", "log1p", "round"})
    r.Alias("special_" + name, name, kModuleOnly);
  r.Alias("special_psi", "digamma", kModuleOnly);
  r.Alias("special_expit", "sigmoid", kModuleOnly);
  r.Alias("special_gammaln", "lgamma", kModuleOnly);
}

}  // namespace kiln
