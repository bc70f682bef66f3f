// codegen/llvm_math.h: f32 exp, sigmoid, tanh, erf and gelu as LLVM IR arithmetic that vectorises.
//
// The kernel emitter (llvm_emit.cc) builds scalar IR for the loop vectoriser to widen, so these
// are plain arithmetic on one float: no calls and no target intrinsics. exp, sigmoid, erf, gelu
// and the normal CDF are codegen/float_math.h's algorithms (Note [One float math]), the ones eager
// kernels run; tanh mirrors eager's TanhF in f64. f64 exp, and f32 exp with inline_exp = false,
// use llvm.exp: libm's exp (libmvec's only with CodegenOptions::vector_library).
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
  // gelu(x) and the normal CDF as eager's f32 kernels round them (Note [Gelu's erf] in float_math.inc).
  llvm::Value* GeluF32(llvm::Value* x);
  llvm::Value* NormalCdfF32(llvm::Value* x);
  llvm::Value* GeluBackwardF32(llvm::Value* grad, llvm::Value* x);

 private:
  llvm::Value* Intrinsic(llvm::Intrinsic::ID id, std::vector<llvm::Value*> args);

  llvm::IRBuilder<>& b_;
  bool inline_exp_;
};

}  // namespace kiln::codegen
