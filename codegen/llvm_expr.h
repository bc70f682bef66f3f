// codegen/llvm_expr.h: kernel IR expressions -> LLVM IR, the part of code generation the CPU
// emitter (llvm_emit.cc) and the NVPTX emitter (nvptx_emit.cc) share.
//
// An ExprEmitter turns an Expr tree (kernel_ir.h) into scalar LLVM IR at the builder's insertion
// point, with the IR's promotion rules, PyTorch's semantics at the edges (NaN-propagating max/min,
// Python's remainder, integer division that never traps, float->int as x86 converts) and the
// inline f32 math of llvm_math.h. Where a value lives is the emitter's business: a subclass says
// how a load reads its buffer (Load) and what ("index", dim) is (LoopVar). Math the target has no
// instruction for is written as LLVM's intrinsics (llvm.exp, llvm.log, ...) or as calls to libm's
// names (tanhf, erf, atan2, ...); the CPU links those from libm, NVPTX maps them to libdevice
// (Note [Libdevice] in nvptx_codegen.cc). Internal to this package.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "codegen/kernel_ir.h"
#include "codegen/llvm_math.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Module.h"

namespace kiln::codegen {

// A value and its compute dtype (F32, F64, I64 or Bool).
struct V {
  llvm::Value* v;
  DType t;
};

// Promotion order of compute dtypes: bool < i64 < f32 < f64.
int Rank(DType t);

class ExprEmitter {
 public:
  ExprEmitter(llvm::LLVMContext& ctx, llvm::Module& m, const Kernel& k, bool inline_exp)
      : ctx_(ctx), m_(m), b_(ctx), k_(k), inline_exp_(inline_exp) {}
  virtual ~ExprEmitter() = default;

  V EmitExpr(const Expr& e);
  // The compute dtype an expression produces (mirrors EmitExpr's promotion rules).
  DType TypeOf(const Expr& e);

 protected:
  // Where each ("load", buffer, index) reads, and what ("index", dim) is (dim -1: the inner r).
  virtual V Load(const Expr& load) = 0;
  virtual llvm::Value* LoopVar(int dim) = 0;

  struct Acc {
    llvm::AllocaInst* slot = nullptr;   // the value read by ("acc", id)
    llvm::AllocaInst* value = nullptr;  // argmax/argmin: the running best value
    DType t = DType::F32;
  };

  llvm::Type* MemType(DType t);
  llvm::Type* CType(DType t);
  llvm::Value* Identity(ReduceKind r, DType t);
  llvm::Value* BF16ToF32(llvm::Value* raw);
  llvm::Value* F32ToBF16(llvm::Value* f);
  V FromMemory(llvm::Value* raw, DType t);
  llvm::Value* ToMemory(llvm::Value* v, DType t);
  V Convert(V x, DType to);
  // float -> signed integer as x86 converts (NaN and out of range give the minimum)
  llvm::Value* FloatToInt(llvm::Value* x, llvm::Type* ty);
  V Cast(V x, DType d);
  llvm::Value* Intrinsic(llvm::Intrinsic::ID id, std::vector<llvm::Value*> args);
  // copysign(sqrt(x), x): Note [sqrt of -0]
  llvm::Value* SignedSqrt(llvm::Value* v);
  llvm::Value* LibmCall(const char* f32_name, const char* f64_name, V x, llvm::Value* y = nullptr);
  V EmitUnary(OpCode op, V x);
  llvm::Value* NormalCdfF64(llvm::Value* x);
  DType TypeOf_Unary(OpCode op, DType t);
  // never traps: x / 0 gives 0
  llvm::Value* SafeIntDiv(llvm::Value* a, llvm::Value* d, bool rem);
  V EmitBinary(OpCode op, V a, V c);
  llvm::Value* FConst(DType t, double v) { return llvm::ConstantFP::get(CType(t), v); }
  VectorMath Math() { return VectorMath(b_, inline_exp_); }

  llvm::LLVMContext& ctx_;
  llvm::Module& m_;
  llvm::IRBuilder<> b_;
  const Kernel& k_;
  bool inline_exp_ = true;
  std::unordered_map<int, Acc> accs_;
  std::unordered_map<int, DType> arg_types_;
};

}  // namespace kiln::codegen
