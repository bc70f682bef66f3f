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

// tanh for f32 computed in f64 and rounded once: eager's TanhF (tensor/vec_math.h, Note [tanhf
// in double]) operation for operation, multiply-adds as llvm.fma, so compiled and eager tanh
// agree bit for bit, both correctly rounded.
llvm::Value* VectorMath::TanhF32(llvm::Value* x) {
  llvm::Type* f64 = b_.getDoubleTy();
  auto c = [&](double v) { return llvm::ConstantFP::get(f64, v); };
  auto fma = [&](llvm::Value* a, llvm::Value* b, llvm::Value* d) { return Intrinsic(llvm::Intrinsic::fma, {a, b, d}); };
  llvm::Value* a = Intrinsic(llvm::Intrinsic::fabs, {b_.CreateFPExt(x, f64)});
  a = b_.CreateSelect(b_.CreateFCmpOGT(a, c(10.0)), c(10.0), a);  // NaN fails and stays NaN
  llvm::Value* z = b_.CreateFMul(a, a);
  llvm::Value* p = fma(fma(c(-9.64399179425052238628e-1), z, c(-9.92877231001918586564e1)), z,
                       c(-1.61468768441708447952e3));
  llvm::Value* q = fma(fma(b_.CreateFAdd(z, c(1.12811678491632931402e2)), z, c(2.23548839060100448583e3)), z,
                       c(4.84406305325125486048e3));
  llvm::Value* small = fma(b_.CreateFMul(a, z), b_.CreateFDiv(p, q), a);
  // e^2a as ExpForTanhD: reduction by ln2, Cephes' rational e^r, 2^n from the rounding sum's bits
  llvm::Value* y = b_.CreateFMul(c(2.0), a);
  llvm::Value* round = c(6755399441055744.0);  // 1.5 * 2^52
  llvm::Value* t = fma(y, c(1.4426950408889634), round);
  llvm::Value* n = b_.CreateFSub(t, round);
  llvm::Value* neg_n = b_.CreateFNeg(n);
  llvm::Value* r = fma(neg_n, c(6.93145751953125e-1), y);
  r = fma(neg_n, c(1.42860682030941723212e-6), r);
  llvm::Value* rr = b_.CreateFMul(r, r);
  llvm::Value* px = b_.CreateFMul(r, fma(fma(c(1.26177193074810590878e-4), rr, c(3.02994407707441961300e-2)), rr,
                                         c(9.99999999999999999910e-1)));
  llvm::Value* qx = fma(fma(fma(c(3.00198505138664455042e-6), rr, c(2.52448340349684104192e-3)), rr,
                            c(2.27265548208155028766e-1)), rr, c(2.00000000000000000009e0));
  llvm::Value* e = fma(c(2.0), b_.CreateFDiv(px, b_.CreateFSub(qx, px)), c(1.0));
  llvm::Value* t_bits = b_.CreateBitCast(t, b_.getInt64Ty());
  llvm::Value* scale = b_.CreateBitCast(b_.CreateShl(b_.CreateAdd(t_bits, b_.getInt64(1023)), 52), f64);
  llvm::Value* exp2a = b_.CreateFMul(e, scale);
  llvm::Value* large = b_.CreateFSub(c(1.0), b_.CreateFDiv(c(2.0), b_.CreateFAdd(exp2a, c(1.0))));
  llvm::Value* rounded = b_.CreateFPTrunc(b_.CreateSelect(b_.CreateFCmpOLT(a, c(0.625)), small, large), b_.getFloatTy());
  return Intrinsic(llvm::Intrinsic::copysign, {rounded, x});
}


}  // namespace kiln::codegen
