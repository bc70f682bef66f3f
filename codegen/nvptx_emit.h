// codegen/nvptx_emit.h: kernel functions for the NVPTX target, unoptimised: a PointwiseKernel
// (Note [Pointwise kernel shape] in nvptx_emit.cc) and a ReduceKernel (nvptx_reduce_emit.cc), each
// one function in `m` with its nvvm.annotations, and NvptxEmitter, the ExprEmitter both derive
// from (thread indices, 16-byte vector accesses). Internal to :nvptx_codegen, which validates,
// links libdevice, optimises and writes PTX (nvptx_module.h).
#pragma once

#include <string>
#include <vector>

#include "codegen/llvm_expr.h"
#include "codegen/nvptx_codegen.h"
#include "codegen/nvptx_reduce.h"
#include "llvm/IR/IntrinsicsNVPTX.h"
#include "llvm/IR/Module.h"

namespace kiln::codegen {

// The Kernel an ExprEmitter reads buffer dtypes from: the operands as buffers, nothing else.
Kernel OperandsAsKernel(const std::string& name, const std::vector<Buffer>& operands);

class NvptxEmitter : public ExprEmitter {
 public:
  NvptxEmitter(llvm::LLVMContext& ctx, llvm::Module& m, const Kernel& operands)
      : ExprEmitter(ctx, m, operands, /*inline_exp=*/true) {}

 protected:
  llvm::Value* Sreg(llvm::Intrinsic::ID id);  // a special register, zero-extended to i64
  llvm::Value* ThreadIndex();                 // blockIdx.x * blockDim.x + threadIdx.x (i64)

  // A by-value operand's parameter type (float, double or int64 per its compute dtype), and every
  // scalar operand's value in its compute dtype (bool from its int64); tensor operands' slots empty.
  llvm::Type* ScalarParamType(DType t);
  std::vector<V> ScalarValues(const std::vector<Buffer>& operands, const std::vector<bool>& scalar,
                              const std::vector<llvm::Value*>& args);

  // Note [Word-sized vector accesses]: LLVM 14's NVPTX back end splits an <8 x i16> access into two
  // 8-byte ones (and InstCombine folds a bitcast from <4 x i32> back into one), so elements
  // narrower than 4 bytes move as <k x i32> words, split into and built from lanes by shifts.
  bool InWords(DType t, int vec);
  llvm::Type* AccessType(DType t, int vec);
  std::vector<llvm::Value*> Unpack(llvm::Value* access, DType t, int vec);  // raw (memory-typed) lanes
  llvm::Value* Pack(const std::vector<llvm::Value*>& lanes, DType t, int vec);
  // `vec` elements of type t at base[first...] (aligned to the whole access), in compute types.
  std::vector<V> LoadVector(llvm::Value* base, llvm::Value* first, DType t, int vec);
};

llvm::Function* EmitPointwise(llvm::Module& m, const PointwiseKernel& k, const PointwiseLayout& layout,
                              const std::string& symbol);
llvm::Function* EmitReduce(llvm::Module& m, const ReduceKernel& k, const ReduceLayout& layout,
                           const std::string& symbol);

}  // namespace kiln::codegen
