// codegen/llvm_optimize.cc: the O3 pipeline (llvm_optimize.h).
#include "codegen/llvm_optimize.h"

namespace kiln::codegen {

void OptimizeO3(llvm::Module& m, llvm::TargetMachine& tm, const llvm::PipelineTuningOptions& tuning,
                const llvm::TargetLibraryInfoImpl* tlii) {
  llvm::PassBuilder pb(&tm, tuning);
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  if (tlii) fam.registerPass([&] { return llvm::TargetLibraryAnalysis(*tlii); });
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  mpm.run(m, mam);
}

}  // namespace kiln::codegen
