// codegen/llvm_emit.h: kernel IR -> one LLVM function, optimised at O3 for the host.
//
// The emitter writes each kernel as scalar loops (outer loops, then each inner loop in order;
// accumulators in allocas) and leaves vectorisation to LLVM's loop vectoriser, steered by loop
// metadata and function attributes (Note [Vector width and interleaving] in llvm_emit.cc).
// Internal to :llvm_codegen, which compiles and caches what this builds.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "codegen/kernel_ir.h"
#include "codegen/llvm_codegen.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"

namespace kiln::codegen {

// What the emitter needs to know of the host, found once by the JIT.
struct HostTarget {
  std::string cpu;                    // LLVM's name for the host CPU
  std::vector<std::string> features;  // "+avx512f", "-amx-tile", ...
  bool have_libmvec = false;          // vector calls only when glibc's libmvec could be loaded
};

// Builds and optimises the module for `kernel`; its one function is named `symbol`:
//   void symbol(char** ptrs, int64_t outer_begin, int64_t outer_end)
// Throws kiln::Error if the IR fails LLVM's verifier (a bug in kiln).
std::unique_ptr<llvm::Module> BuildModule(llvm::LLVMContext& ctx, const Kernel& kernel, const std::string& symbol,
                                          llvm::TargetMachine& tm, const CodegenOptions& options,
                                          const HostTarget& host);

// One module with a function per kernel, each named by its symbol and optimised as it would be
// alone (the functions call nothing of each other's): Note [Kernels compiled together] in
// llvm_codegen.cc.
struct KernelSymbol {
  const Kernel* kernel;
  std::string symbol;
};
std::unique_ptr<llvm::Module> BuildModule(llvm::LLVMContext& ctx, const std::vector<KernelSymbol>& kernels,
                                          llvm::TargetMachine& tm, const CodegenOptions& options,
                                          const HostTarget& host);

}  // namespace kiln::codegen
