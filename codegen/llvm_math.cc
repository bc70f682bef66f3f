// codegen/llvm_math.cc: f32 exp, sigmoid, tanh, erf and gelu as LLVM IR arithmetic that vectorises.
#include "codegen/llvm_math.h"

#include <cmath>
#include <iterator>

#include "codegen/float_math.h"
#include "llvm/IR/Intrinsics.h"

namespace kiln::codegen {

namespace {

// float_math.inc's backend for Inductor (Note [One float math]): IR over one f32, which the loop
// vectoriser widens (no target intrinsics, so it widens to any width, and NVPTX takes it too).
// Fma is llvm.fma, not llvm.fmuladd, so it is fused on every target as eager's std::fma is, and
// nothing carries fast-math flags, so nothing else is fused or reassociated. ScaleByPow2 converts
// n to an integer; a NaN n (from a NaN x) converts to poison, which the algorithm's last select
// discards, as it discards the scalar code's garbage there.
struct IrF32 {
  using F = llvm::Value*;
  using M = llvm::Value*;
  llvm::IRBuilder<>& b;

  F Call(llvm::Intrinsic::ID id, std::vector<F> args) const {
    return b.CreateIntrinsic(id, {args[0]->getType()}, args);
  }
  F Const(float v) const { return llvm::ConstantFP::get(b.getFloatTy(), v); }
  F Add(F x, F y) const { return b.CreateFAdd(x, y); }
  F Sub(F x, F y) const { return b.CreateFSub(x, y); }
  F Mul(F x, F y) const { return b.CreateFMul(x, y); }
  F Div(F x, F y) const { return b.CreateFDiv(x, y); }
  F Neg(F x) const { return b.CreateFNeg(x); }
  F NegMul(F x, F y) const { return b.CreateFNeg(b.CreateFMul(x, y)); }
  F Fma(F x, F y, F z) const { return Call(llvm::Intrinsic::fma, {x, y, z}); }
  F Fnma(F x, F y, F z) const { return Fma(b.CreateFNeg(x), y, z); }
  F Abs(F x) const { return Call(llvm::Intrinsic::fabs, {x}); }
  F CopySign(F magnitude, F sign) const { return Call(llvm::Intrinsic::copysign, {magnitude, sign}); }
  M Gt(F x, F y) const { return b.CreateFCmpOGT(x, y); }
  M Lt(F x, F y) const { return b.CreateFCmpOLT(x, y); }
  M IsNaN(F x) const { return b.CreateFCmpUNO(x, x); }
  F Select(M m, F x, F y) const { return b.CreateSelect(m, x, y); }
  F ClampKeepNaN(F x, F lo, F hi) const {
    F y = Select(Gt(x, hi), hi, x);
    return Select(Lt(y, lo), lo, y);
  }
  F ScaleByPow2(F p, F n) const {
    llvm::Value* ni = b.CreateFPToSI(n, b.getInt32Ty());
    llvm::Value* half = b.CreateAShr(ni, 1);
    auto pow2 = [&](llvm::Value* e) {
      return b.CreateBitCast(b.CreateShl(b.CreateAdd(e, b.getInt32(127)), 23), b.getFloatTy());
    };
    return b.CreateFMul(b.CreateFMul(p, pow2(half)), pow2(b.CreateSub(ni, half)));
  }
};

// Doubles as LLVM IR, for tanh (Note [tanhf in double] in float_math.inc): the ops
// fmath::TanhOfAbsInDouble uses, rounded as ScalarF64's.
struct IrF64 {
  using F = llvm::Value*;
  using M = llvm::Value*;
  llvm::IRBuilder<>& b;

  F Const(double v) const { return llvm::ConstantFP::get(b.getDoubleTy(), v); }
  F Add(F x, F y) const { return b.CreateFAdd(x, y); }
  F Sub(F x, F y) const { return b.CreateFSub(x, y); }
  F Mul(F x, F y) const { return b.CreateFMul(x, y); }
  F Div(F x, F y) const { return b.CreateFDiv(x, y); }
  F Fma(F x, F y, F z) const { return b.CreateIntrinsic(llvm::Intrinsic::fma, {x->getType()}, {x, y, z}); }
  F Fnma(F x, F y, F z) const { return Fma(b.CreateFNeg(x), y, z); }
  M Lt(F x, F y) const { return b.CreateFCmpOLT(x, y); }
  F Select(M m, F x, F y) const { return b.CreateSelect(m, x, y); }
  F Pow2FromRoundingSum(F t) const {
    llvm::Value* bits = b.CreateAdd(b.CreateBitCast(t, b.getInt64Ty()), b.getInt64(1023));
    return b.CreateBitCast(b.CreateShl(bits, 52), b.getDoubleTy());
  }
};

}  // namespace

llvm::Value* VectorMath::Intrinsic(llvm::Intrinsic::ID id, std::vector<llvm::Value*> args) {
  return b_.CreateIntrinsic(id, {args[0]->getType()}, args);
}

// f32 with inline_exp: fmath::Exp; f64, and f32 without it, llvm.exp (libm's exp; libmvec's with
// CodegenOptions::vector_library).
llvm::Value* VectorMath::Exp(llvm::Value* x) {
  if (!x->getType()->isFloatTy() || !inline_exp_) return Intrinsic(llvm::Intrinsic::exp, {x});
  const IrF32 f{b_};
  return fmath::Exp(f, x);
}

// sigmoid(x) = 1 / (1 + exp(-x)), an exact division: for f32 with inline_exp fmath::Sigmoid, the
// bits eager's sigmoid returns.
llvm::Value* VectorMath::Sigmoid(llvm::Value* x) {
  if (x->getType()->isFloatTy() && inline_exp_) {
    const IrF32 f{b_};
    return fmath::Sigmoid(f, x);
  }
  llvm::Value* one = llvm::ConstantFP::get(x->getType(), 1.0);
  return b_.CreateFDiv(one, b_.CreateFAdd(one, Exp(b_.CreateFNeg(x))));
}

llvm::Value* VectorMath::ErfF32(llvm::Value* x) {
  const IrF32 f{b_};
  return fmath::Erf(f, x);
}
llvm::Value* VectorMath::GeluF32(llvm::Value* x) {
  const IrF32 f{b_};
  return fmath::Gelu(f, x);
}
llvm::Value* VectorMath::NormalCdfF32(llvm::Value* x) {
  const IrF32 f{b_};
  return fmath::NormalCdf(f, x);
}
llvm::Value* VectorMath::GeluBackwardF32(llvm::Value* grad, llvm::Value* x) {
  const IrF32 f{b_};
  return fmath::GeluBackward(f, grad, x);
}

// tanh for f32 computed in f64 and rounded once: eager's (fmath::TanhF32, Note [tanhf in double]
// in float_math.inc) operation for operation, so compiled and eager tanh agree bit for bit.
llvm::Value* VectorMath::TanhF32(llvm::Value* x) {
  const IrF64 d{b_};
  llvm::Value* a = Intrinsic(llvm::Intrinsic::fabs, {b_.CreateFPExt(x, b_.getDoubleTy())});
  a = b_.CreateSelect(b_.CreateFCmpOGT(a, d.Const(10.0)), d.Const(10.0), a);  // NaN fails and stays NaN
  llvm::Value* rounded = b_.CreateFPTrunc(fmath::TanhOfAbsInDouble(d, a), b_.getFloatTy());
  return Intrinsic(llvm::Intrinsic::copysign, {rounded, x});
}

}  // namespace kiln::codegen
