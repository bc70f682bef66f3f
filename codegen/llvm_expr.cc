// codegen/llvm_expr.cc: kernel IR expressions -> LLVM IR, shared by the CPU (llvm_emit.cc) and
// NVPTX (nvptx_emit.cc) emitters.
#include "codegen/llvm_expr.h"

#include <cmath>
#include <limits>

#include "runtime/error.h"

namespace kiln::codegen {

int Rank(DType t) { return t == DType::Bool ? 0 : t == DType::I64 ? 1 : t == DType::F32 ? 2 : 3; }

llvm::Type* ExprEmitter::MemType(DType t) {
  switch (t) {
    case DType::F32: return b_.getFloatTy();
    case DType::F64: return b_.getDoubleTy();
    case DType::I64: return b_.getInt64Ty();
    case DType::I32: return b_.getInt32Ty();
    case DType::Bool: case DType::I8: case DType::U8: return b_.getInt8Ty();
    case DType::BF16: case DType::I16: return b_.getInt16Ty();
    case DType::F16: return b_.getHalfTy();
  }
  return nullptr;
}

llvm::Type* ExprEmitter::CType(DType t) {
  switch (ComputeDType(t)) {
    case DType::F32: return b_.getFloatTy();
    case DType::F64: return b_.getDoubleTy();
    case DType::Bool: return b_.getInt1Ty();
    default: return b_.getInt64Ty();
  }
}

// The compute dtype an expression produces (mirrors EmitExpr's promotion rules).
DType ExprEmitter::TypeOf(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::kLoad: return ComputeDType(k_.buffers[e.buffer].dtype);
    case Expr::Kind::kConst: case Expr::Kind::kCast: return ComputeDType(e.dtype);
    case Expr::Kind::kAcc: return accs_.at(e.acc_id).t;
    case Expr::Kind::kIndex: return DType::I64;
    case Expr::Kind::kOp: break;
  }
  auto promote = [&](int from) {
    DType t = TypeOf(*e.args[from]);
    for (size_t i = from + 1; i < e.args.size(); ++i) {
      DType u = TypeOf(*e.args[i]);
      if (Rank(u) > Rank(t)) t = u;
    }
    return t;
  };
  switch (e.op) {
    case OpCode::kEq: case OpCode::kNe: case OpCode::kLt: case OpCode::kLe: case OpCode::kGt: case OpCode::kGe:
    case OpCode::kLogicalAnd: case OpCode::kLogicalOr: case OpCode::kLogicalNot: case OpCode::kSignbit:
      return DType::Bool;
    case OpCode::kExp: case OpCode::kLog: case OpCode::kLog1p: case OpCode::kExpm1: case OpCode::kSqrt:
    case OpCode::kRsqrt: case OpCode::kSin: case OpCode::kCos: case OpCode::kTanh: case OpCode::kSigmoid:
    case OpCode::kErf: case OpCode::kGelu: case OpCode::kNormalCdf: case OpCode::kReciprocal: case OpCode::kAtan2:
    case OpCode::kTan: case OpCode::kAsin: case OpCode::kAcos: case OpCode::kAtan: case OpCode::kSinh:
    case OpCode::kCosh: case OpCode::kAsinh: case OpCode::kAcosh: case OpCode::kAtanh: case OpCode::kErfc:
    case OpCode::kLgamma: case OpCode::kExp2: case OpCode::kLog2: case OpCode::kLog10: case OpCode::kHypot:
    case OpCode::kCopysign: case OpCode::kGeluBackward: {
      DType t = promote(0);
      return IsFloatDType(t) ? t : DType::F32;
    }
    case OpCode::kPow: return promote(0);
    case OpCode::kWhere: return promote(1);
    case OpCode::kNeg: case OpCode::kAbs: case OpCode::kSign: case OpCode::kAdd: case OpCode::kSub:
    case OpCode::kMul: case OpCode::kDiv: case OpCode::kFloorDiv: case OpCode::kMod: case OpCode::kFmod:
    case OpCode::kShl: case OpCode::kShr: {
      DType t = promote(0);
      return t == DType::Bool ? DType::I64 : t;
    }
    default: return promote(0);
  }
}

llvm::Value* ExprEmitter::Identity(ReduceKind r, DType t) {
  bool is_float = t == DType::F32 || t == DType::F64;
  llvm::Type* ty = CType(t);
  auto inf = [&](bool neg) { return llvm::ConstantFP::getInfinity(ty, neg); };
  switch (r) {
    case ReduceKind::kSum: return is_float ? llvm::ConstantFP::get(ty, 0.0) : b_.getInt64(0);
    case ReduceKind::kProd: return is_float ? llvm::ConstantFP::get(ty, 1.0) : b_.getInt64(1);
    case ReduceKind::kMax: case ReduceKind::kArgmax: case ReduceKind::kMaxLast:
      return is_float ? inf(true) : b_.getInt64(std::numeric_limits<int64_t>::min());
    case ReduceKind::kMin: case ReduceKind::kArgmin: case ReduceKind::kMinLast:
      return is_float ? inf(false) : b_.getInt64(std::numeric_limits<int64_t>::max());
  }
  return nullptr;
}

llvm::Value* ExprEmitter::BF16ToF32(llvm::Value* raw) {
  llvm::Value* w = b_.CreateShl(b_.CreateZExt(raw, b_.getInt32Ty()), 16);
  return b_.CreateBitCast(w, b_.getFloatTy());
}

// Round to nearest even; NaN stays a (quiet) NaN.
llvm::Value* ExprEmitter::F32ToBF16(llvm::Value* f) {
  llvm::Value* u = b_.CreateBitCast(f, b_.getInt32Ty());
  llvm::Value* lsb = b_.CreateAnd(b_.CreateLShr(u, 16), 1);
  llvm::Value* rounded = b_.CreateLShr(b_.CreateAdd(u, b_.CreateAdd(lsb, b_.getInt32(0x7fff))), 16);
  llvm::Value* isnan = b_.CreateFCmpUNO(f, f);
  llvm::Value* r = b_.CreateSelect(isnan, b_.getInt32(0x7fc0), rounded);
  return b_.CreateTrunc(r, b_.getInt16Ty());
}

V ExprEmitter::FromMemory(llvm::Value* raw, DType t) {
  switch (t) {
    case DType::F32: case DType::F64: case DType::I64: return {raw, t};
    case DType::I32: case DType::I16: case DType::I8: return {b_.CreateSExt(raw, b_.getInt64Ty()), DType::I64};
    case DType::U8: return {b_.CreateZExt(raw, b_.getInt64Ty()), DType::I64};
    case DType::F16: return {b_.CreateFPExt(raw, b_.getFloatTy()), DType::F32};
    case DType::Bool: return {b_.CreateICmpNE(raw, b_.getInt8(0)), DType::Bool};
    case DType::BF16: return {BF16ToF32(raw), DType::F32};
  }
  return {raw, t};
}

llvm::Value* ExprEmitter::ToMemory(llvm::Value* v, DType t) {
  switch (t) {
    case DType::I32: case DType::I16: case DType::I8: case DType::U8: return b_.CreateTrunc(v, MemType(t));
    case DType::Bool: return b_.CreateZExt(v, b_.getInt8Ty());
    case DType::BF16: return F32ToBF16(v);
    case DType::F16: return b_.CreateFPTrunc(v, b_.getHalfTy());
    default: return v;
  }
}

// Between compute dtypes (F32, F64, I64, Bool), C++ semantics (float -> bool is x != 0).
V ExprEmitter::Convert(V x, DType to) {
  if (x.t == to) return x;
  llvm::Type* ty = CType(to);
  bool from_f = x.t == DType::F32 || x.t == DType::F64;
  bool to_f = to == DType::F32 || to == DType::F64;
  if (to == DType::Bool)
    return {from_f ? b_.CreateFCmpUNE(x.v, llvm::ConstantFP::get(x.v->getType(), 0.0))
                   : b_.CreateICmpNE(x.v, llvm::ConstantInt::get(x.v->getType(), 0)),
            to};
  if (x.t == DType::Bool) return {to_f ? b_.CreateUIToFP(x.v, ty) : b_.CreateZExt(x.v, ty), to};
  if (from_f && to_f) return {to == DType::F64 ? b_.CreateFPExt(x.v, ty) : b_.CreateFPTrunc(x.v, ty), to};
  if (from_f) return {FloatToInt(x.v, ty), to};
  return {b_.CreateSIToFP(x.v, ty), to};
}

// float -> signed integer as x86's cvtt instructions do it, and so eager kiln's C++ casts (and
// PyTorch's) on x86: NaN and values out of range give the type's minimum. LLVM's fptosi leaves
// them poison, and compiled `nan_tensor.int()` gave 0 where eager gives -2147483648.
llvm::Value* ExprEmitter::FloatToInt(llvm::Value* x, llvm::Type* ty) {
  unsigned bits = ty->getScalarSizeInBits();
  llvm::Type* fty = x->getType();
  double limit = std::ldexp(1.0, static_cast<int>(bits) - 1);
  llvm::Value* in_range = b_.CreateAnd(b_.CreateFCmpOGE(x, llvm::ConstantFP::get(fty, -limit)),
                                       b_.CreateFCmpOLT(x, llvm::ConstantFP::get(fty, limit)));
  llvm::Value* safe = b_.CreateSelect(in_range, x, llvm::ConstantFP::get(fty, 0.0));
  return b_.CreateSelect(in_range, b_.CreateFPToSI(safe, ty),
                         llvm::ConstantInt::get(ty, llvm::APInt::getSignedMinValue(bits)));
}

V ExprEmitter::Cast(V x, DType d) {
  if (d == DType::I32 && (x.t == DType::F32 || x.t == DType::F64))  // int32's range, not int64's
    return {b_.CreateSExt(FloatToInt(x.v, b_.getInt32Ty()), b_.getInt64Ty()), DType::I64};
  V v = Convert(x, ComputeDType(d));
  if (d == DType::BF16) v.v = BF16ToF32(F32ToBF16(v.v));
  if (d == DType::F16) v.v = b_.CreateFPExt(b_.CreateFPTrunc(v.v, b_.getHalfTy()), b_.getFloatTy());
  // narrower integers wrap (x.to(torch.uint8) of 300 is 44)
  if (d == DType::I32 || d == DType::I16 || d == DType::I8) v.v = b_.CreateSExt(b_.CreateTrunc(v.v, MemType(d)), b_.getInt64Ty());
  if (d == DType::U8) v.v = b_.CreateZExt(b_.CreateTrunc(v.v, MemType(d)), b_.getInt64Ty());
  return v;
}

llvm::Value* ExprEmitter::Intrinsic(llvm::Intrinsic::ID id, std::vector<llvm::Value*> args) {
  return b_.CreateIntrinsic(id, {args[0]->getType()}, args);
}

// Note [sqrt of -0]: sqrt(-0.0) is -0.0, so 1 / sqrt(-0.0) is -inf, as eager's rsqrt gives. LLVM
// 14's value tracking reads sqrt's result as never below zero and a quotient of two such as
// never below zero either, forgetting the -0.0 divisor: it folded `rsqrt(x) < -3` to false and
// the clamps inside tanh and exp away, so `rsqrt(x).tanh()` of -0.0 gave NaN for eager's -1 (fuzz
// seed 341, program 8800). copysign(sqrt(x), x) is the same value for every x (a NaN keeps its
// sign), and its sign comes from x, which value tracking cannot bound.
llvm::Value* ExprEmitter::SignedSqrt(llvm::Value* v) {
  return Intrinsic(llvm::Intrinsic::copysign, {Intrinsic(llvm::Intrinsic::sqrt, {v}), v});
}

llvm::Value* ExprEmitter::LibmCall(const char* f32_name, const char* f64_name, V x, llvm::Value* y) {
  const char* name = x.t == DType::F32 ? f32_name : f64_name;
  llvm::Type* ty = CType(x.t);
  std::vector<llvm::Type*> params(y ? 2 : 1, ty);
  auto callee = m_.getOrInsertFunction(name, llvm::FunctionType::get(ty, params, false));
  llvm::CallInst* call = y ? b_.CreateCall(callee, {x.v, y}) : b_.CreateCall(callee, {x.v});
  call->setDoesNotThrow();
  call->setOnlyReadsMemory();  // -fno-math-errno semantics: no errno writes we care about
  return call;
}

V ExprEmitter::EmitUnary(OpCode op, V x) {
  DType out = TypeOf_Unary(op, x.t);
  if (op == OpCode::kLogicalNot) return {b_.CreateNot(Convert(x, DType::Bool).v), DType::Bool};
  if (op == OpCode::kSignbit) {  // the sign bit itself: signbit(-0.0) and of a negative NaN are true
    if (x.t == DType::Bool) return {b_.getFalse(), DType::Bool};
    if (x.t == DType::I64) return {b_.CreateICmpSLT(x.v, b_.getInt64(0)), DType::Bool};
    llvm::Type* bits = b_.getIntNTy(x.t == DType::F32 ? 32 : 64);
    return {b_.CreateICmpSLT(b_.CreateBitCast(x.v, bits), llvm::ConstantInt::get(bits, 0)), DType::Bool};
  }
  if (op == OpCode::kBitNot) {
    KILN_INTERNAL_ASSERT(x.t == DType::Bool || x.t == DType::I64, "bitwise_not of a float");
    return {x.t == DType::Bool ? b_.CreateNot(x.v) : b_.CreateXor(x.v, b_.getInt64(-1)), x.t};
  }
  x = Convert(x, out);
  llvm::Value* v = x.v;
  bool f = out == DType::F32 || out == DType::F64;
  auto I = [&](llvm::Intrinsic::ID id) { return V{Intrinsic(id, {v}), out}; };
  auto libm = [&](const char* f32_name, const char* f64_name) { return V{LibmCall(f32_name, f64_name, x), out}; };
  switch (op) {
    case OpCode::kTan: return libm("tanf", "tan");
    case OpCode::kAsin: return libm("asinf", "asin");
    case OpCode::kAcos: return libm("acosf", "acos");
    case OpCode::kAtan: return libm("atanf", "atan");
    case OpCode::kSinh: return libm("sinhf", "sinh");
    case OpCode::kCosh: return libm("coshf", "cosh");
    case OpCode::kAsinh: return libm("asinhf", "asinh");
    case OpCode::kAcosh: return libm("acoshf", "acosh");
    case OpCode::kAtanh: return libm("atanhf", "atanh");
    case OpCode::kErfc: return libm("erfcf", "erfc");
    case OpCode::kLgamma: return libm("lgammaf", "lgamma");
    case OpCode::kExp2: return libm("exp2f", "exp2");
    case OpCode::kLog2: return libm("log2f", "log2");
    case OpCode::kLog10: return libm("log10f", "log10");
    case OpCode::kNeg: return {f ? b_.CreateFNeg(v) : b_.CreateNeg(v), out};
    case OpCode::kAbs:
      if (f) return I(llvm::Intrinsic::fabs);
      return {b_.CreateSelect(b_.CreateICmpSLT(v, b_.getInt64(0)), b_.CreateNeg(v), v), out};
    case OpCode::kExp: return {Math().Exp(v), out};
    case OpCode::kLog: return I(llvm::Intrinsic::log);
    case OpCode::kSqrt: return {SignedSqrt(v), out};
    case OpCode::kSin: return I(llvm::Intrinsic::sin);
    case OpCode::kCos: return I(llvm::Intrinsic::cos);
    case OpCode::kFloor: return f ? I(llvm::Intrinsic::floor) : x;
    case OpCode::kCeil: return f ? I(llvm::Intrinsic::ceil) : x;
    case OpCode::kRound: return f ? I(llvm::Intrinsic::roundeven) : x;  // half to even, as PyTorch
    case OpCode::kTrunc: return f ? I(llvm::Intrinsic::trunc) : x;
    case OpCode::kRsqrt: return {b_.CreateFDiv(FConst(out, 1.0), SignedSqrt(v)), out};
    case OpCode::kReciprocal: return {b_.CreateFDiv(FConst(out, 1.0), v), out};
    case OpCode::kSigmoid: return {Math().Sigmoid(v), out};
    case OpCode::kTanh:
      if (out == DType::F32) return {Math().TanhF32(v), out};
      return {LibmCall("tanhf", "tanh", x), out};
    case OpCode::kErf:
      if (out == DType::F32) return {Math().ErfF32(v), out};
      return {LibmCall("erff", "erf", x), out};
    // As eager's kernels (tensor/ops/activation.cc): f32 through Abramowitz and Stegun's erf
    // (Note [Gelu's erf]), f64 x * 0.5 * (1 + erf(x / sqrt 2)) with libm's erf.
    case OpCode::kGelu:
      if (out == DType::F32) return {Math().GeluF32(v), out};
      return {b_.CreateFMul(v, NormalCdfF64(v)), out};
    case OpCode::kNormalCdf:
      if (out == DType::F32) return {Math().NormalCdfF32(v), out};
      return {NormalCdfF64(v), out};
    case OpCode::kLog1p: {  // Kahan: u = 1 + x; u == 1 ? x : log(u) * x / (u - 1)
      llvm::Value* one = FConst(out, 1.0);
      llvm::Value* u = b_.CreateFAdd(one, v);
      llvm::Value* r = b_.CreateFDiv(b_.CreateFMul(Intrinsic(llvm::Intrinsic::log, {u}), v), b_.CreateFSub(u, one));
      r = b_.CreateSelect(b_.CreateFCmpOEQ(u, llvm::ConstantFP::getInfinity(CType(out))), u, r);
      return {b_.CreateSelect(b_.CreateFCmpOEQ(u, one), v, r), out};
    }
    case OpCode::kExpm1: {  // Kahan: u = exp(x); u == 1 ? x : u - 1 == -1 ? -1 : (u - 1) * x / log(u)
      llvm::Value* one = FConst(out, 1.0);
      llvm::Value* u = Math().Exp(v);
      llvm::Value* um1 = b_.CreateFSub(u, one);
      llvm::Value* r = b_.CreateFDiv(b_.CreateFMul(um1, v), Intrinsic(llvm::Intrinsic::log, {u}));
      r = b_.CreateSelect(b_.CreateFCmpOEQ(u, llvm::ConstantFP::getInfinity(CType(out))), u, r);
      r = b_.CreateSelect(b_.CreateFCmpOEQ(um1, FConst(out, -1.0)), FConst(out, -1.0), r);
      return {b_.CreateSelect(b_.CreateFCmpOEQ(u, one), v, r), out};
    }
    case OpCode::kRelu:
      if (f) return {b_.CreateSelect(b_.CreateFCmpOLT(v, FConst(out, 0.0)), FConst(out, 0.0), v), out};
      if (out == DType::Bool) return x;
      return {b_.CreateSelect(b_.CreateICmpSLT(v, b_.getInt64(0)), b_.getInt64(0), v), out};
    case OpCode::kSign:
      if (f) {
        llvm::Value* pos = b_.CreateUIToFP(b_.CreateFCmpOGT(v, FConst(out, 0.0)), CType(out));
        llvm::Value* neg = b_.CreateUIToFP(b_.CreateFCmpOLT(v, FConst(out, 0.0)), CType(out));
        return {b_.CreateFSub(pos, neg), out};
      } else {
        llvm::Value* pos = b_.CreateZExt(b_.CreateICmpSGT(v, b_.getInt64(0)), b_.getInt64Ty());
        llvm::Value* neg = b_.CreateZExt(b_.CreateICmpSLT(v, b_.getInt64(0)), b_.getInt64Ty());
        return {b_.CreateSub(pos, neg), out};
      }
    default: break;
  }
  KILN_INTERNAL_ASSERT(false, "unhandled unary op ", OpName(op));
  return x;
}

// 0.5 * (1 + erf(x / sqrt 2)) in f64, the order eager's NormalCdf rounds in.
llvm::Value* ExprEmitter::NormalCdfF64(llvm::Value* x) {
  V scaled{b_.CreateFMul(x, FConst(DType::F64, M_SQRT1_2)), DType::F64};
  llvm::Value* erf = LibmCall("erff", "erf", scaled);
  return b_.CreateFMul(FConst(DType::F64, 0.5), b_.CreateFAdd(FConst(DType::F64, 1.0), erf));
}

DType ExprEmitter::TypeOf_Unary(OpCode op, DType t) {
  Expr e;
  e.kind = Expr::Kind::kOp;
  e.op = op;
  auto c = std::make_shared<Expr>();
  c->kind = Expr::Kind::kConst;
  c->dtype = t;
  e.args = {c};
  return TypeOf(e);
}

// Integer division and remainder never trap: x/0 gives 0 (PyTorch raises; a kernel cannot),
// INT64_MIN / -1 wraps.
llvm::Value* ExprEmitter::SafeIntDiv(llvm::Value* a, llvm::Value* d, bool rem) {
  llvm::Value* zero = b_.CreateICmpEQ(d, b_.getInt64(0));
  llvm::Value* m1 = b_.CreateICmpEQ(d, b_.getInt64(-1));
  llvm::Value* dd = b_.CreateSelect(b_.CreateOr(zero, m1), b_.getInt64(1), d);
  llvm::Value* q = rem ? b_.CreateSRem(a, dd) : b_.CreateSDiv(a, dd);
  q = b_.CreateSelect(m1, rem ? b_.getInt64(0) : b_.CreateNeg(a), q);
  return b_.CreateSelect(zero, b_.getInt64(0), q);
}

V ExprEmitter::EmitBinary(OpCode op, V a, V c) {
  DType t = Rank(a.t) >= Rank(c.t) ? a.t : c.t;
  if (op == OpCode::kLogicalAnd || op == OpCode::kLogicalOr) {
    llvm::Value* x = Convert(a, DType::Bool).v;
    llvm::Value* y = Convert(c, DType::Bool).v;
    return {op == OpCode::kLogicalAnd ? b_.CreateAnd(x, y) : b_.CreateOr(x, y), DType::Bool};
  }
  bool cmp = op == OpCode::kEq || op == OpCode::kNe || op == OpCode::kLt || op == OpCode::kLe || op == OpCode::kGt ||
             op == OpCode::kGe;
  const bool bitwise = op == OpCode::kBitAnd || op == OpCode::kBitOr || op == OpCode::kBitXor;
  if (t == DType::Bool && !(cmp && (op == OpCode::kEq || op == OpCode::kNe)) && op != OpCode::kMax &&
      op != OpCode::kMin && !bitwise)
    t = DType::I64;
  if ((op == OpCode::kAtan2 || op == OpCode::kHypot || op == OpCode::kCopysign) && !IsFloatDType(t)) t = DType::F32;
  if (bitwise) {
    KILN_INTERNAL_ASSERT(t == DType::Bool || t == DType::I64, OpName(op), " of floats");
    llvm::Value* x = Convert(a, t).v;
    llvm::Value* y = Convert(c, t).v;
    llvm::Value* r = op == OpCode::kBitAnd ? b_.CreateAnd(x, y) : op == OpCode::kBitOr ? b_.CreateOr(x, y) : b_.CreateXor(x, y);
    return {r, t};
  }
  llvm::Value* x = Convert(a, t).v;
  llvm::Value* y = Convert(c, t).v;
  bool f = t == DType::F32 || t == DType::F64;
  if (cmp) {
    using P = llvm::CmpInst::Predicate;
    P p;
    switch (op) {
      case OpCode::kEq: p = f ? P::FCMP_OEQ : P::ICMP_EQ; break;
      case OpCode::kNe: p = f ? P::FCMP_UNE : P::ICMP_NE; break;
      case OpCode::kLt: p = f ? P::FCMP_OLT : P::ICMP_SLT; break;
      case OpCode::kLe: p = f ? P::FCMP_OLE : P::ICMP_SLE; break;
      case OpCode::kGt: p = f ? P::FCMP_OGT : P::ICMP_SGT; break;
      default: p = f ? P::FCMP_OGE : P::ICMP_SGE; break;
    }
    return {f ? b_.CreateFCmp(p, x, y) : b_.CreateICmp(p, x, y), DType::Bool};
  }
  switch (op) {
    case OpCode::kAdd: return {f ? b_.CreateFAdd(x, y) : b_.CreateAdd(x, y), t};
    case OpCode::kSub: return {f ? b_.CreateFSub(x, y) : b_.CreateSub(x, y), t};
    case OpCode::kMul: return {f ? b_.CreateFMul(x, y) : b_.CreateMul(x, y), t};
    case OpCode::kDiv: return {f ? b_.CreateFDiv(x, y) : SafeIntDiv(x, y, false), t};
    case OpCode::kFloorDiv:
      if (f) return {Intrinsic(llvm::Intrinsic::floor, {b_.CreateFDiv(x, y)}), t};
      else {
        llvm::Value* q = SafeIntDiv(x, y, false);
        llvm::Value* r = SafeIntDiv(x, y, true);
        llvm::Value* adjust = b_.CreateAnd(b_.CreateICmpNE(r, b_.getInt64(0)),
                                           b_.CreateICmpNE(b_.CreateICmpSLT(r, b_.getInt64(0)),
                                                           b_.CreateICmpSLT(y, b_.getInt64(0))));
        return {b_.CreateSub(q, b_.CreateZExt(adjust, b_.getInt64Ty())), t};
      }
    case OpCode::kMod: {  // Python's remainder: the sign of the divisor
      llvm::Value* r = f ? b_.CreateFRem(x, y) : SafeIntDiv(x, y, true);
      llvm::Value* zero = f ? FConst(t, 0.0) : b_.getInt64(0);
      llvm::Value* rneg = f ? b_.CreateFCmpOLT(r, zero) : b_.CreateICmpSLT(r, zero);
      llvm::Value* yneg = f ? b_.CreateFCmpOLT(y, zero) : b_.CreateICmpSLT(y, zero);
      llvm::Value* nz = f ? b_.CreateFCmpONE(r, zero) : b_.CreateICmpNE(r, zero);
      llvm::Value* adjust = b_.CreateAnd(nz, b_.CreateICmpNE(rneg, yneg));
      return {b_.CreateSelect(adjust, f ? b_.CreateFAdd(r, y) : b_.CreateAdd(r, y), r), t};
    }
    case OpCode::kPow:
      if (f) {  // x^2 is x * x, exactly (and then a multiply that a sum can contract)
        auto* c = llvm::dyn_cast<llvm::ConstantFP>(y);
        if (c && c->isExactlyValue(2.0)) return {b_.CreateFMul(x, x), t};
        // eager's pow by 0.5 / -0.5 / 3 / -1 / -2 is sqrt, 1 / sqrt, x * x * x, 1 / x, 1 / (x * x):
        // libm's pow(-inf, 0.5) is +inf where sqrt gives eager's nan (fuzz seed 91, 1048)
        llvm::Value* one = llvm::ConstantFP::get(x->getType(), 1.0);
        if (c && c->isExactlyValue(0.5)) return {Intrinsic(llvm::Intrinsic::sqrt, {x}), t};
        if (c && c->isExactlyValue(-0.5)) return {b_.CreateFDiv(one, Intrinsic(llvm::Intrinsic::sqrt, {x})), t};
        if (c && c->isExactlyValue(3.0)) return {b_.CreateFMul(b_.CreateFMul(x, x), x), t};
        if (c && c->isExactlyValue(-1.0)) return {b_.CreateFDiv(one, x), t};
        if (c && c->isExactlyValue(-2.0)) return {b_.CreateFDiv(one, b_.CreateFMul(x, x)), t};
        return {Intrinsic(llvm::Intrinsic::pow, {x, y}), t};
      }
      else {  // integers through double (exact below 2^53)
        llvm::Value* d = Intrinsic(llvm::Intrinsic::pow, {b_.CreateSIToFP(x, b_.getDoubleTy()),
                                                          b_.CreateSIToFP(y, b_.getDoubleTy())});
        llvm::Value* p = b_.CreateFPToSI(Intrinsic(llvm::Intrinsic::roundeven, {d}), b_.getInt64Ty());
        // A negative exponent, as eager's integer pow: 1 for a base of 1, +-1 for -1 (by the
        // exponent's parity), else 0; through double, 0 ** -1 was inf, cast to INT64_MIN
        llvm::Value* one = b_.getInt64(1);
        llvm::Value* odd = b_.CreateICmpNE(b_.CreateAnd(y, one), b_.getInt64(0));
        llvm::Value* of_minus_one = b_.CreateSelect(odd, b_.getInt64(-1), one);
        llvm::Value* tiny = b_.CreateSelect(b_.CreateICmpEQ(x, one), one,
                                            b_.CreateSelect(b_.CreateICmpEQ(x, b_.getInt64(-1)), of_minus_one,
                                                            b_.getInt64(0)));
        return {b_.CreateSelect(b_.CreateICmpSLT(y, b_.getInt64(0)), tiny, p), t};
      }
    case OpCode::kMax: case OpCode::kMin: {
      bool mx = op == OpCode::kMax;
      if (f) {
        // eager's `x < y ? y : x` (max) and `x > y ? y : x` (min): x on ties, so max(-0., 0.) is
        // -0. as eager's clamp_min and maximum give it (maxnum may return either zero, and
        // 1 // clamp_min(-0., 0) came out inf, eager -inf: fuzz seed 321, program 15804). NaN
        // propagates (x + y is NaN when either is).
        llvm::Value* m = b_.CreateSelect(mx ? b_.CreateFCmpOLT(x, y) : b_.CreateFCmpOGT(x, y), y, x);
        return {b_.CreateSelect(b_.CreateFCmpUNO(x, y), b_.CreateFAdd(x, y), m), t};
      }
      if (t == DType::Bool) return {mx ? b_.CreateOr(x, y) : b_.CreateAnd(x, y), t};
      llvm::Value* take = mx ? b_.CreateICmpSGT(x, y) : b_.CreateICmpSLT(x, y);
      return {b_.CreateSelect(take, x, y), t};
    }
    case OpCode::kAtan2: return {LibmCall("atan2f", "atan2", {x, t}, y), t};
    case OpCode::kHypot: return {LibmCall("hypotf", "hypot", {x, t}, y), t};
    case OpCode::kCopysign: return {Intrinsic(llvm::Intrinsic::copysign, {x, y}), t};
    case OpCode::kGeluBackward:
      KILN_INTERNAL_ASSERT(t == DType::F32, "gelu_backward of ", DTypeName(t), " (the lowering decomposes it)");
      return {Math().GeluBackwardF32(x, y), t};
    case OpCode::kFmod: return {f ? b_.CreateFRem(x, y) : SafeIntDiv(x, y, true), t};
    case OpCode::kShl: case OpCode::kShr: {
      // PyTorch's shifts: by a negative amount or the width or more, 0 (left) or the sign (right);
      // in 64 bits, which narrower integer dtypes then truncate to the same result
      KILN_INTERNAL_ASSERT(t == DType::I64, OpName(op), " of floats");
      llvm::Value* out_of_range = b_.CreateICmpUGE(y, b_.getInt64(64));
      llvm::Value* amount = b_.CreateSelect(out_of_range, b_.getInt64(0), y);
      if (op == OpCode::kShl) return {b_.CreateSelect(out_of_range, b_.getInt64(0), b_.CreateShl(x, amount)), t};
      return {b_.CreateSelect(out_of_range, b_.CreateAShr(x, b_.getInt64(63)), b_.CreateAShr(x, amount)), t};
    }
    default: break;
  }
  KILN_INTERNAL_ASSERT(false, "unhandled binary op ", OpName(op));
  return a;
}

V ExprEmitter::EmitExpr(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::kLoad: return Load(e);
    case Expr::Kind::kConst: {
      DType ct = ComputeDType(e.dtype);
      if (ct == DType::Bool) return {b_.getInt1(e.int_value != 0 || e.value != 0), ct};
      if (ct == DType::I64) {
        int64_t v = e.int_value;
        if (e.dtype == DType::I32) v = static_cast<int32_t>(v);
        if (e.dtype == DType::I16) v = static_cast<int16_t>(v);
        if (e.dtype == DType::I8) v = static_cast<int8_t>(v);
        if (e.dtype == DType::U8) v = static_cast<uint8_t>(v);
        return {b_.getInt64(v), ct};
      }
      V c{FConst(ct, e.value), ct};
      if (e.dtype == DType::BF16) c.v = BF16ToF32(F32ToBF16(c.v));
      if (e.dtype == DType::F16) c.v = b_.CreateFPExt(b_.CreateFPTrunc(c.v, b_.getHalfTy()), b_.getFloatTy());
      return c;
    }
    case Expr::Kind::kAcc: {
      const Acc& a = accs_.at(e.acc_id);
      return {b_.CreateLoad(CType(a.t), a.slot), a.t};
    }
    case Expr::Kind::kIndex: return {LoopVar(e.dim), DType::I64};
    case Expr::Kind::kCast: return Cast(EmitExpr(*e.args[0]), e.dtype);
    case Expr::Kind::kOp: break;
  }
  int n = OpArity(e.op);
  if (n == 1) return EmitUnary(e.op, EmitExpr(*e.args[0]));
  if (n == 2) return EmitBinary(e.op, EmitExpr(*e.args[0]), EmitExpr(*e.args[1]));
  V cond = Convert(EmitExpr(*e.args[0]), DType::Bool);
  V x = EmitExpr(*e.args[1]);
  V y = EmitExpr(*e.args[2]);
  DType t = Rank(x.t) >= Rank(y.t) ? x.t : y.t;
  return {b_.CreateSelect(cond.v, Convert(x, t).v, Convert(y, t).v), t};
}

}  // namespace kiln::codegen
