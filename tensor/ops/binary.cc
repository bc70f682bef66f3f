// tensor/ops/binary.cc: binary pointwise ops (add, sub, mul, div, comparisons, maximum, ...).
//
// Every binary op is one BinarySpec: a name, an element function over the compute type, and how
// the result dtype follows from the operands (promoted, bool for comparisons, float for true
// division). From the spec come the Tensor and Scalar overloads, the in-place variants and the
// out= variants, each with its meta function, so adding an op is one table row.
#include <cmath>
#include <cstring>
#include <utility>

#include "tensor/cuda/cuda_ops.h"
#include "tensor/cuda/pointwise.h"
#include "tensor/ops/common.h"
#include "tensor/ops/binary_kernels.h"
#include "tensor/ops/complex_cuda.h"
#include "tensor/ops/pointwise_ir.h"

namespace kiln {
namespace {

using namespace binary;  // NOLINT: the op enum, kSpecs and the loops (binary_kernels.h)

ScalarType ComputeType(const BinarySpec& spec, ScalarType promoted) {
  if (spec.result == ResultKind::Float && IsIntegral(promoted, true)) return GetDefaultDtype();
  return promoted;
}
ScalarType ResultDtype(const BinarySpec& spec, ScalarType promoted) {
  return spec.result == ResultKind::Bool ? ScalarType::Bool : ComputeType(spec, promoted);
}

void CheckDtype(const BinarySpec& spec, ScalarType t) {
  KILN_CHECK(!(std::string(spec.name) == "sub" && t == ScalarType::Bool),
             "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
             "`logical_xor()` operator instead.");
  if (IsComplex(t)) {  // the ops complex numbers have (add, sub, mul, div, eq, ne)
    const std::string name = spec.name;
    KILN_CHECK_NOT_IMPLEMENTED(name == "add" || name == "sub" || name == "mul" || name == "div" || name == "eq" ||
                                   name == "ne",
                               "\"", spec.name, "\" not implemented for '", ScalarTypeDisplayName(t), "'");
    return;
  }
  bool ok = spec.dtypes == DtypeSet::All ||
            (spec.dtypes == DtypeSet::Numeric && t != ScalarType::Bool) ||
            (spec.dtypes == DtypeSet::IntegralAndBool && IsIntegral(t, true)) ||
            (spec.dtypes == DtypeSet::Integral && IsIntegral(t, false)) ||
            (spec.dtypes == DtypeSet::Floating && IsFloating(t));
  KILN_CHECK_NOT_IMPLEMENTED(ok, "\"", spec.name, "\" not implemented for '", ScalarTypeDisplayName(t), "'");
}

// out = a ** e for e in {0.5, -0.5, 1, 2, 3, -1, -2}, as PyTorch's pow_tensor_scalar_optimized:
// sqrt and 1 / sqrt keep their own edge cases (-inf ** -0.5 is nan, -0.0 ** -0.5 is -inf, where
// libm's pow gives 0 and inf); false for other exponents. float16 takes none of these forms for
// +-0.5 (PyTorch runs std::pow for it: -0.0 ** -0.5 is inf), and bfloat16's cube and inverse
// square round the square to bfloat16 first (its Vectorized<BFloat16> multiplies round each step).
bool PowScalarFastPath(const Tensor& out, const Tensor& a, double e) {
  if (!(e == 0.5 || e == -0.5 || e == 1 || e == 2 || e == 3 || e == -1 || e == -2)) return false;
  if (a.dtype() == ScalarType::Float16 && (e == 0.5 || e == -0.5)) return false;
  ElementwiseIter iter({out, a});
  KILN_DISPATCH_FLOATING(a.dtype(), "pow", [&] {
    using C = scalar_t;
    using M = opmath_t<C>;
    // v * v, rounded to C where PyTorch's bfloat16 kernel rounds it
    auto square = [](M v) -> M { return std::is_same_v<C, BFloat16> ? M(C(v * v)) : v * v; };
    if (e == 2) CpuKernel<C, C>(iter, [](C x) -> C { M v = M(x); return C(v * v); });
    else if (e == 3) CpuKernel<C, C>(iter, [=](C x) -> C { M v = M(x); return C(square(v) * v); });
    else if (e == 0.5) CpuKernel<C, C>(iter, [](C x) -> C { return C(std::sqrt(M(x))); });
    else if (e == -0.5) CpuKernel<C, C>(iter, [](C x) -> C { return C(M(1) / std::sqrt(M(x))); });
    else if (e == 1) CpuKernel<C, C>(iter, [](C x) -> C { return x; });
    else if (e == -1) CpuKernel<C, C>(iter, [](C x) -> C { return C(M(1) / M(x)); });
    else CpuKernel<C, C>(iter, [=](C x) -> C { return C(M(1) / square(M(x))); });
  });
  return true;
}

// Note [16-bit floats times a scalar]: PyTorch's CPU kernels for mul, div and its trunc/floor
// modes (floor_divide too) on float16/bfloat16, when the second operand is a single element,
// read that operand's original value in float (TensorIterator's original_scalar_value<opmath_t>)
// instead of rounding it to the 16-bit dtype: x * 0.1 multiplies by 0.1f, not by half(0.1). A
// 0-d tensor of the same 16-bit dtype is already rounded, so only Python numbers and 0-d tensors
// of wider dtypes differ. add, sub, remainder and fmod have no such path: they round first.
constexpr bool ReadsScalarInOpmath(int op) {
  return op == kMul || op == kDiv || op == kDivTrunc || op == kDivFloor || op == kFloorDivide;
}

// out = f(a, b) for one-element b per Note [16-bit floats times a scalar]; false where it does not apply.
template <int kOp>
bool ReducedFloatScalarOp(const Tensor& dst, const Tensor& a, const Tensor* b, const Scalar* b_scalar,
                          ScalarType compute) {
  if constexpr (!ReadsScalarInOpmath(kOp)) {
    return false;
  } else {
    if (compute != ScalarType::Float16 && compute != ScalarType::BFloat16) return false;
    if (!b_scalar && (b->numel() != 1 || IsComplex(b->dtype()))) return false;
    const float scalar = b_scalar ? b_scalar->to<float>() : ItemScalar(kSpecs[kOp].name, *b).to<float>();
    ElementwiseIter iter({dst, a});
    KILN_DISPATCH_FLOATING(compute, kSpecs[kOp].name, [&] {
      using C = scalar_t;
      BinaryFn<kOp, float> f{1.0f};
      CpuKernel<C, C>(iter, [f, scalar](C x) -> C { return C(f(float(x), scalar)); });
    });
    return true;
  }
}

// --- CUDA: the element functions as kernel IR (tensor/cuda/pointwise.h) ------------------------

using codegen::OpCode;
using IR = codegen::ExprPtr;
IR Ir(OpCode op, IR a) { return codegen::Expr::Op(op, {std::move(a)}); }
IR Ir(OpCode op, IR a, IR b) { return codegen::Expr::Op(op, {std::move(a), std::move(b)}); }
IR Ir(OpCode op, IR a, IR b, IR c) { return codegen::Expr::Op(op, {std::move(a), std::move(b), std::move(c)}); }

// PyTorch's div_floor for floats (as FloorDivide above): through fmod, so 1 // 0.1 is 9, not
// floor(1 / 0.1) = 10; a zero quotient keeps its sign; division by zero is a / b.
IR FloorDivideFloat(IR a, IR b, codegen::DType t) {
  auto c = [&](double v) { return codegen::Expr::Const(v, t); };
  IR q = Ir(OpCode::kDiv, a, b);
  IR m = Ir(OpCode::kFmod, a, b);
  IR d0 = Ir(OpCode::kDiv, Ir(OpCode::kSub, a, m), b);
  IR adjust = Ir(OpCode::kLogicalAnd, Ir(OpCode::kNe, m, c(0)),
                 Ir(OpCode::kNe, Ir(OpCode::kLt, b, c(0)), Ir(OpCode::kLt, m, c(0))));
  IR d = Ir(OpCode::kWhere, adjust, Ir(OpCode::kSub, d0, c(1)), d0);
  IR f = Ir(OpCode::kFloor, d);
  IR rounded = Ir(OpCode::kWhere, Ir(OpCode::kGt, Ir(OpCode::kSub, d, f), c(0.5)), Ir(OpCode::kAdd, f, c(1)), f);
  IR r = Ir(OpCode::kWhere, Ir(OpCode::kEq, d, c(0)), Ir(OpCode::kCopysign, c(0), q), rounded);
  return Ir(OpCode::kWhere, Ir(OpCode::kEq, b, c(0)), q, r);
}

// f(a, b) over opmath values a, b (alpha: add/sub's multiplier, or null for 1).
IR BinaryExpr(int op, IR a, IR b, IR alpha, ScalarType compute) {
  const codegen::DType t = cuda::CodegenDType(compute, kSpecs[op].name);
  const codegen::DType m = cuda::OpmathDType(compute, kSpecs[op].name);
  const bool is_float = IsFloating(compute), is_bool = compute == ScalarType::Bool;
  auto c = [&](double v) { return codegen::Expr::Const(v, m); };
  auto isnan = [&](IR x) { return Ir(OpCode::kNe, x, x); };
  switch (op) {
    case kAdd: return Ir(OpCode::kAdd, a, alpha ? Ir(OpCode::kMul, alpha, b) : b);
    case kSub: return Ir(OpCode::kSub, a, alpha ? Ir(OpCode::kMul, alpha, b) : b);
    case kMul: return is_bool ? Ir(OpCode::kLogicalAnd, a, b) : Ir(OpCode::kMul, a, b);
    case kDiv: return Ir(OpCode::kDiv, a, b);
    case kDivTrunc:  // 16-bit floats round the quotient to their type first (see RunTyped)
      if (!is_float) return Ir(OpCode::kDiv, a, b);
      return Ir(OpCode::kTrunc, m == t ? Ir(OpCode::kDiv, a, b) : codegen::Expr::Cast(Ir(OpCode::kDiv, a, b), t));
    case kDivFloor: case kFloorDivide:
      if (is_bool) return a;
      return is_float ? FloorDivideFloat(a, b, m) : Ir(OpCode::kFloorDiv, a, b);
    case kRemainder: return is_bool ? a : Ir(OpCode::kMod, a, b);
    case kFmod: return Ir(OpCode::kFmod, a, b);
    case kPow: return is_bool ? Ir(OpCode::kLogicalOr, a, Ir(OpCode::kLogicalNot, b)) : Ir(OpCode::kPow, a, b);
    case kMaximum: return Ir(OpCode::kMax, a, b);
    case kMinimum: return Ir(OpCode::kMin, a, b);
    case kEq: return Ir(OpCode::kEq, a, b);
    case kNe: return Ir(OpCode::kNe, a, b);
    case kLt: return Ir(OpCode::kLt, a, b);
    case kLe: return Ir(OpCode::kLe, a, b);
    case kGt: return Ir(OpCode::kGt, a, b);
    case kGe: return Ir(OpCode::kGe, a, b);
    case kLogicalAnd: return Ir(OpCode::kLogicalAnd, a, b);
    case kLogicalOr: return Ir(OpCode::kLogicalOr, a, b);
    case kLogicalXor:
      return Ir(OpCode::kNe, codegen::Expr::Cast(a, codegen::DType::Bool), codegen::Expr::Cast(b, codegen::DType::Bool));
    case kBitAnd: return Ir(OpCode::kBitAnd, a, b);
    case kBitOr: return Ir(OpCode::kBitOr, a, b);
    case kBitXor: return Ir(OpCode::kBitXor, a, b);
    case kAtan2: return Ir(OpCode::kAtan2, a, b);
    case kFmax: case kFmin: {  // the other operand where one is NaN
      IR best = Ir(op == kFmax ? OpCode::kMax : OpCode::kMin, a, b);
      if (!is_float) return best;
      return Ir(OpCode::kWhere, isnan(a), b, Ir(OpCode::kWhere, isnan(b), a, best));
    }
    case kHypot: return Ir(OpCode::kHypot, a, b);
    case kCopysign: return Ir(OpCode::kCopysign, a, b);
    case kXlogy:
      return Ir(OpCode::kWhere, isnan(b), b,
                Ir(OpCode::kWhere, Ir(OpCode::kEq, a, c(0)), c(0), Ir(OpCode::kMul, a, Ir(OpCode::kLog, b))));
    case kLshift: return Ir(OpCode::kShl, a, b);
    case kRshift: return Ir(OpCode::kShr, a, b);
  }
  KILN_INTERNAL_ASSERT(false, "no CUDA expression for ", kSpecs[op].name);
  return a;
}

// Exponents whose pow PyTorch computes exactly (x * x, sqrt, ...): compiled in as constants so the
// emitter takes those forms (see PowScalarFastPath); other exponents stay launch parameters.
bool PowExponentIsSpecial(const Scalar& e) {
  if (e.is_complex() || e.is_bool()) return false;
  double v = e.to_double();
  return v == 0.5 || v == -0.5 || v == 2 || v == 3 || v == -1 || v == -2;
}

template <int kOp>
void BinaryCUDA(const Tensor& out, const Tensor& a, const Tensor* b, const Scalar* b_scalar, ScalarType compute,
                const Scalar& alpha) {
  const BinarySpec& spec = kSpecs[kOp];
  if constexpr (kOp == kAdd || kOp == kSub || kOp == kMul || kOp == kDiv) {
    if (IsComplex(compute)) {  // Note [Complex on CUDA]
      constexpr ComplexBinary kComplex = kOp == kAdd ? ComplexBinary::kAdd : kOp == kSub ? ComplexBinary::kSub
                                         : kOp == kMul ? ComplexBinary::kMul : ComplexBinary::kDiv;
      return ComplexBinaryCUDA(kComplex, out, a, b, b_scalar, alpha, spec.name);
    }
  }
  if constexpr (kOp == kEq || kOp == kNe) {
    if (IsComplex(compute)) return ComplexEqualCUDA(kOp == kNe, out, a, b, b_scalar, compute, spec.name);
  }
  std::vector<cuda::PointwiseInput> inputs = {cuda::PointwiseInput::Of(a)};
  inputs.push_back(b ? cuda::PointwiseInput::Of(*b) : cuda::PointwiseInput::Number(*b_scalar, compute));
  IR x = cuda::OpmathInput(0, compute, spec.name);
  IR y = cuda::OpmathInput(1, compute, spec.name);
  if (kOp == kPow && b_scalar && IsFloating(compute) && PowExponentIsSpecial(*b_scalar)) {
    inputs.pop_back();
    y = codegen::Expr::Const(b_scalar->to_double(), cuda::OpmathDType(compute, spec.name));
  }
  IR alpha_ir;
  if (spec.has_alpha && !(alpha.is_integral() ? alpha.to_int() == 1 : alpha.to_double() == 1.0)) {
    inputs.push_back(cuda::PointwiseInput::Number(alpha, compute));
    alpha_ir = cuda::OpmathInput(static_cast<int>(inputs.size()) - 1, compute, spec.name);
  }
  cuda::LaunchPointwise(spec.name, out, inputs, BinaryExpr(kOp, x, y, alpha_ir, compute));
}

// Writes f(a, b) into `out` (already sized). b_scalar, when given, replaces b.
template <int kOp>
void BinaryInto(const Tensor& out, const Tensor& a, const Tensor* b, const Scalar* b_scalar,
                ScalarType compute, const Scalar& alpha) {
  if (out.numel() == 0) return;
  const BinarySpec& spec = kSpecs[kOp];
  CheckDtype(spec, compute);
  if (out.device().is_cuda()) return BinaryCUDA<kOp>(out, a, b, b_scalar, compute, alpha);
  // Comparisons and logical ops write bool; everything else writes the compute type.
  ScalarType loop_out = spec.result == ResultKind::Bool ? ScalarType::Bool : compute;
  Tensor dst = out.dtype() == loop_out ? out : EmptyLike(out, loop_out);
  Tensor ac = CastTo(a, compute);
  if (ReducedFloatScalarOp<kOp>(dst, ac, b, b_scalar, compute)) {
    // done: the one-element operand was read in float
  } else if (b_scalar) {
    alignas(16) char value[16];
    KILN_DISPATCH_ALL_AND_COMPLEX(compute, spec.name, [&] {
      scalar_t v = b_scalar->to<scalar_t>();
      std::memcpy(value, &v, sizeof(v));
    });
    if constexpr (kOp == kPow) {
      // x ** 2 and friends: cheap exact forms instead of pow() per element (as PyTorch does).
      if (IsFloating(compute) && PowScalarFastPath(dst, ac, b_scalar->to_double())) {
        if (!dst.is_same(out)) { Tensor o = out; ops::copy_(o, dst); }
        return;
      }
    }
    ElementwiseIter iter({dst, ac, Operand::Broadcast(value)});
    RunBinary<kOp>(iter, compute, alpha);
  } else {
    Tensor bc = CastTo(*b, compute);
    ElementwiseIter iter({dst, ac, bc});
    RunBinary<kOp>(iter, compute, alpha);
  }
  if (!dst.is_same(out)) {
    Tensor o = out;
    ops::copy_(o, dst);
  }
}

// --- Meta functions ------------------------------------------------------------------------

// PyTorch refuses `-` on bools (its sub_check): a mask is inverted with `~`, two are compared with `^`.
template <int kOp>
void CheckSubOperands(bool a_bool, bool b_bool) {
  if constexpr (kOp == kSub) {
    KILN_CHECK(!(a_bool && b_bool), "Subtraction, the `-` operator, with two bool tensors is not supported. "
               "Use the `^` or `logical_xor()` operator instead.");
    KILN_CHECK(!(a_bool || b_bool), "Subtraction, the `-` operator, with a bool tensor is not supported. "
               "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.");
  }
}

template <int kOp>
TensorMeta MetaTensor(const Tensor& a, const Tensor& b) {
  const BinarySpec& spec = kSpecs[kOp];
  CheckSubOperands<kOp>(a.dtype() == ScalarType::Bool, b.dtype() == ScalarType::Bool);
  ScalarType promoted = ResultType(a, b);
  // Shapes first, then dtypes, as PyTorch's TensorIterator reports them.
  const ScalarType result = ResultDtype(spec, promoted);
  // the inputs compute in the promoted dtype, or in the float result of true division of integers
  const ScalarType computed = IsIntegral(promoted, /*include_bool=*/true) && IsFloating(result) ? result : promoted;
  TensorMeta meta = ElementwiseMeta(spec.name, a, b, result, computed);
  CheckDtype(spec, promoted);
  return meta;
}
// pow(integer tensor, negative integer scalar) is an error in PyTorch (a tensor exponent is not).
template <int kOp>
void CheckIntegerPow(const Tensor& a, const Scalar& b) {
  if constexpr (kOp == kPow)
    KILN_CHECK(!(IsIntegral(a.dtype(), true) && b.is_integral() && !b.is_bool() && b.to_int() < 0),
               "Integers to negative integer powers are not allowed.");
}

template <int kOp>
TensorMeta MetaScalar(const Tensor& a, const Scalar& b) {
  const BinarySpec& spec = kSpecs[kOp];
  CheckIntegerPow<kOp>(a, b);
  CheckSubOperands<kOp>(a.dtype() == ScalarType::Bool, b.is_bool());
  ScalarType promoted = ResultType(a, b);
  CheckDtype(spec, promoted);
  return TensorMeta{a->sym_sizes(), LayoutOfInputs(a->sym_sizes(), {&a}, std::nullopt, /*scalar_operand=*/true),
                    ResultDtype(spec, promoted), a.device()};
}

// PyTorch's alpha_check, on the operands' common dtype; the meta functions run it too, so a
// compiled graph raises where eager does even when it drops the op's unused result.
void CheckAlpha(const Scalar& alpha, ScalarType common) {
  KILN_CHECK(!alpha.is_bool() || common == ScalarType::Bool, "Boolean alpha only supported for Boolean results.");
  KILN_CHECK(!(alpha.is_floating() && IsIntegral(common, true)), "For integral input tensors, argument alpha must "
             "not be a floating point number.");
  KILN_CHECK(!(alpha.is_complex() && !IsComplex(common)), "For non-complex input tensors, argument alpha must not "
             "be a complex number.");
}

// --- Functional kernels --------------------------------------------------------------------

template <int kOp>
Tensor FunctionalTensor(const Tensor& a, const Tensor& b) {
  TensorMeta m = MetaTensor<kOp>(a, b);
  Tensor out = EmptyFromMeta(m);
  BinaryInto<kOp>(out, a, &b, nullptr, ComputeType(kSpecs[kOp], ResultType(a, b)), Scalar(int64_t(1)));
  return out;
}
template <int kOp>
Tensor FunctionalScalar(const Tensor& a, const Scalar& b) {
  TensorMeta m = MetaScalar<kOp>(a, b);
  Tensor out = EmptyFromMeta(m);
  BinaryInto<kOp>(out, a, nullptr, &b, ComputeType(kSpecs[kOp], ResultType(a, b)), Scalar(int64_t(1)));
  return out;
}
template <int kOp>
Tensor AlphaTensor(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  TensorMeta m = MetaTensor<kOp>(a, b);
  CheckAlpha(alpha, ResultType(a, b));
  Tensor out = EmptyFromMeta(m);
  BinaryInto<kOp>(out, a, &b, nullptr, m.dtype, alpha);
  return out;
}
template <int kOp>
Tensor AlphaScalar(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  TensorMeta m = MetaScalar<kOp>(a, b);
  CheckAlpha(alpha, ResultType(a, b));
  Tensor out = EmptyFromMeta(m);
  BinaryInto<kOp>(out, a, nullptr, &b, m.dtype, alpha);
  return out;
}
template <int kOp> TensorMeta AlphaTensorMeta(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  TensorMeta m = MetaTensor<kOp>(a, b);
  CheckAlpha(alpha, ResultType(a, b));
  return m;
}
template <int kOp> TensorMeta AlphaScalarMeta(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  TensorMeta m = MetaScalar<kOp>(a, b);
  CheckAlpha(alpha, ResultType(a, b));
  return m;
}

// --- In-place kernels: the result must fit self's shape and dtype -------------------------

void CheckInplace(const BinarySpec& spec, const Tensor& self, const SymDimVector& broadcast, ScalarType result) {
  KILN_CHECK(broadcast == self->sym_sizes(), "output with shape ", ShapeStr(self),
             " doesn't match the broadcast shape ", SizesToString(broadcast));
  KILN_CHECK(CanCast(result, self.dtype()), "result type ", ScalarTypeDisplayName(result),
             " can't be cast to the desired output type ", ScalarTypeDisplayName(self.dtype()));
  (void)spec;
}

template <int kOp>
Tensor InplaceTensorImpl(Tensor self, const Tensor& b, const Scalar& alpha, bool run) {
  const BinarySpec& spec = kSpecs[kOp];
  // (a CUDA b of a CPU kernel was read on the host)
  CheckOperandOnSelfDevice(StrCat(spec.name, "_").c_str(), self, b);
  CheckSubOperands<kOp>(self.dtype() == ScalarType::Bool, b.dtype() == ScalarType::Bool);
  ScalarType promoted = ResultType(self, b);
  CheckInplace(spec, self, BroadcastShapes(spec.name, self->sym_sizes(), b->sym_sizes()), ResultDtype(spec, promoted));
  CheckDtype(spec, promoted);
  CheckAlpha(alpha, promoted);
  if (run) BinaryInto<kOp>(self, self, &b, nullptr, ComputeType(spec, promoted), alpha);
  return self;
}
template <int kOp>
Tensor InplaceScalarImpl(Tensor self, const Scalar& b, const Scalar& alpha, bool run) {
  const BinarySpec& spec = kSpecs[kOp];
  CheckIntegerPow<kOp>(self, b);
  CheckSubOperands<kOp>(self.dtype() == ScalarType::Bool, b.is_bool());
  ScalarType promoted = ResultType(self, b);
  CheckDtype(spec, promoted);
  CheckInplace(spec, self, self->sym_sizes(), ResultDtype(spec, promoted));
  CheckAlpha(alpha, promoted);
  if (run) BinaryInto<kOp>(self, self, nullptr, &b, ComputeType(spec, promoted), alpha);
  return self;
}
template <int kOp> Tensor InplaceTensor(Tensor self, const Tensor& b) { return InplaceTensorImpl<kOp>(self, b, 1, true); }
template <int kOp> Tensor InplaceTensorMeta(Tensor self, const Tensor& b) { return InplaceTensorImpl<kOp>(self, b, 1, false); }
template <int kOp> Tensor InplaceScalar(Tensor self, const Scalar& b) { return InplaceScalarImpl<kOp>(self, b, 1, true); }
template <int kOp> Tensor InplaceScalarMeta(Tensor self, const Scalar& b) { return InplaceScalarImpl<kOp>(self, b, 1, false); }
template <int kOp> Tensor InplaceAlphaTensor(Tensor self, const Tensor& b, const Scalar& a) { return InplaceTensorImpl<kOp>(self, b, a, true); }
template <int kOp> Tensor InplaceAlphaTensorMeta(Tensor self, const Tensor& b, const Scalar& a) { return InplaceTensorImpl<kOp>(self, b, a, false); }
template <int kOp> Tensor InplaceAlphaScalar(Tensor self, const Scalar& b, const Scalar& a) { return InplaceScalarImpl<kOp>(self, b, a, true); }
template <int kOp> Tensor InplaceAlphaScalarMeta(Tensor self, const Scalar& b, const Scalar& a) { return InplaceScalarImpl<kOp>(self, b, a, false); }

template <int kOp>
Tensor OutTensor(const Tensor& a, const Tensor& b, Tensor out) {
  TensorMeta m = MetaTensor<kOp>(a, b);
  ResizeOut(kSpecs[kOp].name, out, m);
  BinaryInto<kOp>(out, a, &b, nullptr, ComputeType(kSpecs[kOp], ResultType(a, b)), 1);
  return out;
}
template <int kOp>
Tensor OutAlphaTensor(const Tensor& a, const Tensor& b, const Scalar& alpha, Tensor out) {
  TensorMeta m = MetaTensor<kOp>(a, b);
  CheckAlpha(alpha, ResultType(a, b));
  ResizeOut(kSpecs[kOp].name, out, m);
  BinaryInto<kOp>(out, a, &b, nullptr, ComputeType(kSpecs[kOp], ResultType(a, b)), alpha);
  return out;
}

// --- rounding-mode division ----------------------------------------------------------------

Tensor DivMode(const Tensor& a, const Tensor& b, std::optional<std::string> mode) {
  if (!mode) return FunctionalTensor<kDiv>(a, b);
  KILN_CHECK(*mode == "trunc" || *mode == "floor",
                   "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '", *mode, "'");
  return *mode == "trunc" ? FunctionalTensor<kDivTrunc>(a, b) : FunctionalTensor<kDivFloor>(a, b);
}
TensorMeta DivModeMeta(const Tensor& a, const Tensor& b, std::optional<std::string> mode) {
  return mode ? MetaTensor<kDivTrunc>(a, b) : MetaTensor<kDiv>(a, b);
}
Tensor DivModeScalar(const Tensor& a, const Scalar& b, std::optional<std::string> mode) {
  if (!mode) return FunctionalScalar<kDiv>(a, b);
  KILN_CHECK(*mode == "trunc" || *mode == "floor",
                   "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '", *mode, "'");
  return *mode == "trunc" ? FunctionalScalar<kDivTrunc>(a, b) : FunctionalScalar<kDivFloor>(a, b);
}
TensorMeta DivModeScalarMeta(const Tensor& a, const Scalar& b, std::optional<std::string> mode) {
  return mode ? MetaScalar<kDivTrunc>(a, b) : MetaScalar<kDiv>(a, b);
}

// rsub(a, b, alpha) = b - alpha * a
Tensor RsubTensor(const Tensor& a, const Tensor& b, const Scalar& alpha) { return ops::sub(b, a, alpha); }
Tensor RsubScalar(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  return CallOp<Tensor>(KILN_OP("aten::sub.Tensor"), WrapScalar(b, a.device()), a, alpha);
}
// Scalar ** Tensor
Tensor PowScalarBase(const Scalar& base, const Tensor& exp) {
  return CallOp<Tensor>(KILN_OP("aten::pow.Tensor_Tensor"), WrapScalar(base, exp.device()), exp);
}

// The element function of a functional overload as kernel IR (Note [Pointwise ops as kernel IR] in
// pointwise_ir.h): operands (self, other[, alpha]) in the promoted dtype, as Inductor reads them.
template <int kOp>
void RegisterBinaryIr(const Op& op) {
  PointwiseIr ir;
  ir.arity = 2;
  ir.has_alpha = kSpecs[kOp].has_alpha;
  ir.integer_division = kOp == kDivTrunc || kOp == kDivFloor || kOp == kFloorDivide || kOp == kRemainder ||
                        kOp == kFmod;
  ir.reads_scalar_in_opmath = ReadsScalarInOpmath(kOp);
  ir.compute = [](const std::vector<ScalarType>& in) {
    return ComputeType(kSpecs[kOp], PromoteTypes(in.at(0), in.at(1)));
  };
  ir.build = [](std::vector<codegen::ExprPtr> in, ScalarType compute, DeviceType) {
    return BinaryExpr(kOp, in.at(0), in.at(1), in.size() > 2 ? in[2] : nullptr, compute);
  };
  RegisterPointwiseIr(op, std::move(ir));
}

// The functional and in-place overloads of a binary op under the names a spelling needs: Tensor
// ones always, Scalar ones when named; registered in that order (the order Python tries them).
template <int kOp>
void DefOverloads(Registry& r, const std::string& tensor, const std::string& scalar, const std::string& inplace_tensor,
                  const std::string& inplace_scalar, std::initializer_list<Tag> tags, Variants variants,
                  Variants inplace_variants) {
  RegisterBinaryIr<kOp>(*r.Def(tensor + "(Tensor self, Tensor other) -> Tensor", tags, variants)
                              .template CPUAndCUDA<&FunctionalTensor<kOp>>()
                              .template Meta<&MetaTensor<kOp>>()
                              .op());
  if (!scalar.empty()) {
    RegisterBinaryIr<kOp>(*r.Def(scalar + "(Tensor self, Scalar other) -> Tensor", tags, variants)
                                .template CPUAndCUDA<&FunctionalScalar<kOp>>()
                                .template Meta<&MetaScalar<kOp>>()
                                .op());
  }
  r.Def(inplace_tensor + "(Tensor(a!) self, Tensor other) -> Tensor(a!)", {Tag::pointwise}, inplace_variants)
      .template CPUAndCUDA<&InplaceTensor<kOp>>()
      .template Impl<&InplaceTensorMeta<kOp>>(DispatchKey::Meta)
      .template Impl<&InplaceTensorMeta<kOp>>(DispatchKey::Fake);
  if (!inplace_scalar.empty()) {
    r.Def(inplace_scalar + "(Tensor(a!) self, Scalar other) -> Tensor(a!)", {Tag::pointwise}, inplace_variants)
        .template CPUAndCUDA<&InplaceScalar<kOp>>()
        .template Impl<&InplaceScalarMeta<kOp>>(DispatchKey::Meta)
        .template Impl<&InplaceScalarMeta<kOp>>(DispatchKey::Fake);
  }
}

// `tensor_overload`: the functional Tensor overload's name; floor_divide's is the default
// overload in PyTorch ("floor_divide", not "floor_divide.Tensor").
template <int kOp>
void DefFamily(Registry& r, const std::string& name, Variants variants = kFunctionAndMethod,
               const std::string& tensor_overload = ".Tensor", const std::string& scalar_overload = ".Scalar") {
  const BinarySpec& spec = kSpecs[kOp];
  std::initializer_list<Tag> tags = {Tag::pointwise, Tag::core};
  if (spec.has_alpha) {
    RegisterBinaryIr<kOp>(*r.Def(name + ".Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", tags,
                                 variants)
                                .template CPUAndCUDA<&AlphaTensor<kOp>>()
                                .template Meta<&AlphaTensorMeta<kOp>>()
                                .op());
    RegisterBinaryIr<kOp>(*r.Def(name + ".Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor", tags, variants)
                                .template CPUAndCUDA<&AlphaScalar<kOp>>()
                                .template Meta<&AlphaScalarMeta<kOp>>()
                                .op());
    r.Def(name + "_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)", {Tag::pointwise}, kMethod)
        .template CPUAndCUDA<&InplaceAlphaTensor<kOp>>()
        .template Impl<&InplaceAlphaTensorMeta<kOp>>(DispatchKey::Meta)
        .template Impl<&InplaceAlphaTensorMeta<kOp>>(DispatchKey::Fake);
    r.Def(name + "_.Scalar(Tensor(a!) self, Scalar other, Scalar alpha=1) -> Tensor(a!)", {Tag::pointwise}, kMethod)
        .template CPUAndCUDA<&InplaceAlphaScalar<kOp>>()
        .template Impl<&InplaceAlphaScalarMeta<kOp>>(DispatchKey::Meta)
        .template Impl<&InplaceAlphaScalarMeta<kOp>>(DispatchKey::Fake);
    r.Def(name + ".out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)", {Tag::pointwise})
        .template CPUAndCUDA<&OutAlphaTensor<kOp>>();
    return;
  }
  const std::string none;
  DefOverloads<kOp>(r, name + tensor_overload, spec.has_scalar ? name + scalar_overload : none, name + "_.Tensor",
                    spec.has_scalar ? name + "_" + scalar_overload : none, tags, variants, kMethod);
  r.Def(name + ".out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)", {Tag::pointwise})
      .template CPUAndCUDA<&OutTensor<kOp>>();
}

// A number first (`2 % x`, xlogy(2, x), `1 << x`): PyTorch's Scalar_Self / Scalar_Tensor overloads,
// the number as a wrapped 0-d tensor, so a traced graph records them as PyTorch's does.
template <int kOp>
Tensor ScalarFirst(const Scalar& a, const Tensor& b) { return FunctionalTensor<kOp>(WrapScalar(a, b.device()), b); }
template <int kOp>
TensorMeta ScalarFirstMeta(const Scalar& a, const Tensor& b) { return MetaTensor<kOp>(WrapScalar(a, b.device()), b); }
template <int kOp>
void DefScalarFirst(Registry& r, const std::string& name_and_overload) {
  r.Def(name_and_overload + "(Scalar self, Tensor other) -> Tensor", {Tag::pointwise}, kFunction)
      .template CPUAndCUDA<&ScalarFirst<kOp>>().template Meta<&ScalarFirstMeta<kOp>>();
}

// The operators `x << n`, `x >> n`, `x <<= n`, `x >>= n`: PyTorch's __lshift__ and friends (the
// ops its Tensor's operators call, so its traces record them), computing the bitwise shifts.
template <int kOp>
void DefShiftOperator(Registry& r, const std::string& op, const std::string& inplace_op) {
  const Variants none = static_cast<Variants>(0);  // reached through the operators, as PyTorch's
  DefOverloads<kOp>(r, op + ".Tensor", op + ".Scalar", inplace_op + ".Tensor", inplace_op + ".Scalar",
                    {Tag::pointwise}, none, none);
}

// Ops whose only overload is the Tensor one keep PyTorch's overload name ("maximum", not
// "maximum.Tensor"), so they register under their own schema text.
template <int kOp>
void DefPlain(Registry& r, const std::string& name) {
  DefOverloads<kOp>(r, name, "", name + "_", "", {Tag::pointwise, Tag::core}, kFunctionAndMethod, kMethod);
  r.Def(name + ".out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)", {Tag::pointwise})
      .template CPUAndCUDA<&OutTensor<kOp>>();
}

}  // namespace

Tensor ResizeOut(const char* op, Tensor out, const TensorMeta& m) {
  KILN_CHECK(out.device() == m.device, "Expected out tensor to have device ", m.device.str(), ", but got ",
             out.device().str(), " instead");
  KILN_CHECK(CanCast(m.dtype, out.dtype()), "[", op, "] result type ", ScalarTypeDisplayName(m.dtype),
             " can't be cast to the desired output type ", ScalarTypeDisplayName(out.dtype()));
  if (out->sym_sizes() == m.sizes) return out;
  // resize_: reallocate when growing, keeping the bytes there were (as PyTorch's resize_); shrinking
  // keeps the storage.
  out->set_sizes_contiguous(m.sizes);
  if (out->has_storage()) {
    const int64_t need = (out->storage_offset() + out.numel()) * out->itemsize();
    const int64_t have = static_cast<int64_t>(out->storage()->nbytes());
    if (need > have) {
      Allocator* alloc = out->storage()->allocator() ? out->storage()->allocator() : GetCPUAllocator();
      DataPtr grown = alloc->Allocate(need);
      if (have > 0 && out.device().is_cuda()) {
        cuda::CopyDeviceBytes(grown.get(), out->storage()->data(), static_cast<size_t>(have), out.device().index);
      } else if (have > 0) {
        std::memcpy(grown.get(), out->storage()->data(), static_cast<size_t>(have));
      }
      out->storage()->set_data(std::move(grown), need);
    }
  } else if (out->storage() && !out->is_symbolic()) {  // meta/fake: the data-less storage grows too
    int64_t need = (out->storage_offset() + out.numel()) * out->itemsize();
    if (need > static_cast<int64_t>(out->storage()->nbytes())) out->storage()->set_sym_nbytes(need);
  }
  return out;
}

void RegisterBinaryOps(Registry& r) {
  DefFamily<kAdd>(r, "add");
  DefFamily<kSub>(r, "sub");
  DefFamily<kMul>(r, "mul");
  DefFamily<kDiv>(r, "div");
  DefFamily<kRemainder>(r, "remainder");
  DefFamily<kFmod>(r, "fmod");
  DefFamily<kEq>(r, "eq");
  DefFamily<kNe>(r, "ne");
  DefFamily<kLt>(r, "lt");
  DefFamily<kLe>(r, "le");
  DefFamily<kGt>(r, "gt");
  DefFamily<kGe>(r, "ge");
  DefFamily<kBitAnd>(r, "bitwise_and");
  DefFamily<kBitOr>(r, "bitwise_or");
  DefFamily<kBitXor>(r, "bitwise_xor");
  DefPlain<kMaximum>(r, "maximum");
  DefPlain<kMinimum>(r, "minimum");
  DefPlain<kFmax>(r, "fmax");
  DefPlain<kFmin>(r, "fmin");
  DefPlain<kLogicalAnd>(r, "logical_and");
  DefPlain<kLogicalOr>(r, "logical_or");
  DefPlain<kLogicalXor>(r, "logical_xor");
  DefPlain<kAtan2>(r, "atan2");
  DefPlain<kHypot>(r, "hypot");
  DefFamily<kCopysign>(r, "copysign");
  DefFamily<kFloorDivide>(r, "floor_divide", kFunctionAndMethod, "");
  DefFamily<kXlogy>(r, "xlogy", kFunctionAndMethod, ".Tensor", ".Scalar_Other");
  DefScalarFirst<kXlogy>(r, "xlogy.Scalar_Self");
  DefScalarFirst<kRemainder>(r, "remainder.Scalar_Tensor");
  DefFamily<kLshift>(r, "bitwise_left_shift", kFunctionAndMethod, ".Tensor", ".Tensor_Scalar");
  DefScalarFirst<kLshift>(r, "bitwise_left_shift.Scalar_Tensor");
  DefShiftOperator<kLshift>(r, "__lshift__", "__ilshift__");
  DefFamily<kRshift>(r, "bitwise_right_shift", kFunctionAndMethod, ".Tensor", ".Tensor_Scalar");
  DefScalarFirst<kRshift>(r, "bitwise_right_shift.Scalar_Tensor");
  DefShiftOperator<kRshift>(r, "__rshift__", "__irshift__");
  // pow: Tensor_Tensor / Tensor_Scalar / Scalar overload names as in PyTorch.
  RegisterBinaryIr<kPow>(
      *r.Def("pow.Tensor_Tensor(Tensor self, Tensor exponent) -> Tensor", {Tag::pointwise, Tag::core},
             kFunctionAndMethod)
           .CPUAndCUDA<&FunctionalTensor<kPow>>()
           .Meta<&MetaTensor<kPow>>()
           .op());
  RegisterBinaryIr<kPow>(
      *r.Def("pow.Tensor_Scalar(Tensor self, Scalar exponent) -> Tensor", {Tag::pointwise, Tag::core},
             kFunctionAndMethod)
           .CPUAndCUDA<&FunctionalScalar<kPow>>()
           .Meta<&MetaScalar<kPow>>()
           .op());
  r.Def("pow.Scalar(Scalar self, Tensor exponent) -> Tensor", {Tag::pointwise}, kFunction)
      .CompositeExplicit<&PowScalarBase>();
  r.Def("pow_.Scalar(Tensor(a!) self, Scalar exponent) -> Tensor(a!)", {Tag::pointwise}, kMethod)
      .CPUAndCUDA<&InplaceScalar<kPow>>().Impl<&InplaceScalarMeta<kPow>>(DispatchKey::Meta)
      .Impl<&InplaceScalarMeta<kPow>>(DispatchKey::Fake);
  r.Def("pow_.Tensor(Tensor(a!) self, Tensor exponent) -> Tensor(a!)", {Tag::pointwise}, kMethod)
      .CPUAndCUDA<&InplaceTensor<kPow>>().Impl<&InplaceTensorMeta<kPow>>(DispatchKey::Meta)
      .Impl<&InplaceTensorMeta<kPow>>(DispatchKey::Fake);
  r.Def("div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor", {Tag::pointwise, Tag::core},
        kFunctionAndMethod)
      .CPUAndCUDA<&DivMode>().Meta<&DivModeMeta>();
  r.Def("div.Scalar_mode(Tensor self, Scalar other, *, str? rounding_mode) -> Tensor", {Tag::pointwise},
        kFunctionAndMethod)
      .CPUAndCUDA<&DivModeScalar>().Meta<&DivModeScalarMeta>();
  r.Def("rsub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", {Tag::pointwise}, kFunction)
      .CompositeExplicit<&RsubTensor>();
  r.Def("rsub.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor", {Tag::pointwise}, kFunction)
      .CompositeExplicit<&RsubScalar>();

  // torch's second names of these ops (Note [Op aliases] in dispatcher.h); their in-place forms
  // are Tensor methods only (there is no torch.greater_)
  for (auto [alias, name] : {std::pair<std::string, std::string>{"greater", "gt"}, {"greater_equal", "ge"},
                             {"less", "lt"}, {"less_equal", "le"}, {"not_equal", "ne"}, {"divide", "div"},
                             {"multiply", "mul"}, {"subtract", "sub"}, {"arctan2", "atan2"}}) {
    r.Alias(alias, name);
    r.Alias(alias + "_", name + "_", kMethod);
  }
  r.Alias("special_xlogy", "xlogy", kModuleOnly);
}

}  // namespace kiln
