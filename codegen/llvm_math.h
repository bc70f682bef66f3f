// codegen/llvm_math.h: f32 exp, sigmoid, tanh, erf and gelu as LLVM IR arithmetic that vectorises.
//
// The kernel emitter (llvm_emit.cc) builds scalar IR for the loop vectoriser to widen, so these
// are written as plain arithmetic on one float: no calls and no target intrinsics, and a short
// instruction count, since a SiLU kernel's time goes to them (Note [Inline expf], Note
// [Sigmoid's reciprocal], Note [Inline erff] in llvm_math.cc). f64 exp, and f32 exp with
// inline_exp = false, use llvm.exp, which the vectoriser maps to libmvec.
#pragma once

#include <vector>

#include "llvm/IR/IRBuilder.h"

namespace kiln::codegen {

class VectorMath {
 public:
  VectorMath(llvm::IRBuilder<>& b, bool inline_exp) : b_(b), inline_exp_(inline_exp) {}

  llvm::Value* Exp(llvm::Value* x);      // f32 or f64
  llvm::Value* Sigmoid(llvm::Value* x);  // f32 or f64
  llvm::Value* TanhF32(llvm::Value* x);  // f32 only
  llvm::Value* ErfF32(llvm::Value* x);   // f32 only
  // gelu(x) and the normal CDF as eager's f32 kernels round them (Note [Gelu's erf]).
  llvm::Value* GeluF32(llvm::Value* x);
  llvm::Value* NormalCdfF32(llvm::Value* x);

 private:
  llvm::Value* F32(double v);
  llvm::Value* Intrinsic(llvm::Intrinsic::ID id, std::vector<llvm::Value*> args);
  // c0 + c1 v + c2 v^2 + ... (coeffs lowest first) by fused multiply-adds, in Horner's form.
  llvm::Value* Horner(llvm::Value* v, const std::vector<double>& coeffs);
  // e^r for x = n ln2 + r (of -x when negate); *t_out gets the rounding sum that holds n.
  llvm::Value* ExpF32Reduced(llvm::Value* x, bool negate, llvm::Value** t_out);
  llvm::Value* Pow2F32(llvm::Value* t);
  llvm::Value* Pow2F32OfInt(llvm::Value* n);
  llvm::Value* ClampKeepNaN(llvm::Value* x, llvm::Value* lo, llvm::Value* hi);
  llvm::Value* ExpF32(llvm::Value* x);
  llvm::Value* ErfAbramowitzStegunF32(llvm::Value* x);

  llvm::IRBuilder<>& b_;
  bool inline_exp_;
};

}  // namespace kiln::codegen
