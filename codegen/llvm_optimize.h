// codegen/llvm_optimize.h: LLVM's O3 module pipeline for a target, shared by the CPU and NVPTX
// code generators (each target machine adds its own passes: NVPTX's NVVMReflect among them).
#pragma once

#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/IR/Module.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Target/TargetMachine.h"

namespace kiln::codegen {

// Runs O3 on `m` for `tm`; `tlii`, when given, says which library calls the vectoriser may widen.
void OptimizeO3(llvm::Module& m, llvm::TargetMachine& tm, const llvm::PipelineTuningOptions& tuning,
                const llvm::TargetLibraryInfoImpl* tlii = nullptr);

}  // namespace kiln::codegen
