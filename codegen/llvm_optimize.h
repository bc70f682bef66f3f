// codegen/llvm_optimize.h: LLVM's O3 module pipeline for a target, shared by the CPU and NVPTX
// code generators (each target machine adds its own passes: NVPTX's NVVMReflect among them); the
// CPU's unrolls loops only whole (Note [Full unrolling only]).
#pragma once

#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/IR/Module.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Target/TargetMachine.h"

namespace kiln::codegen {

// How O3 may unroll loops (Note [Full unrolling only]).
enum class Unrolling : uint8_t {
  kAll,       // LLVM's O3: full, partial and runtime unrolling
  kFullOnly,  // loops with small constant trip counts unrolled whole; no partial or runtime unrolling
};

// A loop hint (a loop ID operand !{!"kiln.loop.unroll.late"}): under Unrolling::kFullOnly the loop
// is not unrolled before vectorisation, but may be unrolled whole at the end of the pipeline
// (Note [Which loops unroll] in llvm_optimize.cc).
inline constexpr const char* kUnrollLateHint = "kiln.loop.unroll.late";

// Runs O3 on `m` for `tm`; `tlii`, when given, says which library calls the vectoriser may widen.
void OptimizeO3(llvm::Module& m, llvm::TargetMachine& tm, const llvm::PipelineTuningOptions& tuning,
                const llvm::TargetLibraryInfoImpl* tlii = nullptr, Unrolling unrolling = Unrolling::kAll);

}  // namespace kiln::codegen
