// codegen/llvm_optimize.cc: the O3 pipeline (llvm_optimize.h).
#include "codegen/llvm_optimize.h"

#include "llvm/Transforms/InstCombine/InstCombine.h"
#include "llvm/Transforms/Scalar/LoopUnrollPass.h"
#include "llvm/Transforms/Scalar/SimplifyCFG.h"

namespace kiln::codegen {

// Note [Full unrolling only]: O3 unrolls loops in two places. In the loop simplification pipeline,
// before vectorisation, LoopFullUnrollPass removes loops with small constant trip counts (a
// kernel's inner loop over 3 or 4 elements). After vectorisation, LoopUnrollPass unrolls the
// vector loops too: whole when their trip count is small (a row of 256 floats is 16 AVX-512
// bodies), else partially and at run time, 4 to 8 bodies at a time. That partial and runtime
// unrolling was half of LLVM's time (its phase of a cold GPT training step's compile, 1 layer:
// 0.35 -> 0.17 s; 16 layers: 0.42 -> 0.22 s; the digits CNN's first compiled step 455 -> 210 ms)
// and bought little run time: the GPT step's kernels take 12.1-12.6 ms either way; the digits MLP
// and CNN steps, the fused RMSNorm+SiLU, softmax, log_softmax, sums, maxima, var_mean and
// pointwise kernels are no slower; the one pattern found slower is a sum of exp over rows of 512
// floats alone (183 against 168 us for 1024 rows), while the softmax that contains it is not.
// Both full unrollings matter: without any unrolling (PipelineTuningOptions::LoopUnrolling off)
// `x.sum(-1)` over 4 columns and `(x * 2 + 1).relu()` over 3 ran 2.6x slower, and without the
// late one a layer-norm-like kernel over rows of 256 ran 10% slower. So the CPU code generator
// turns LoopUnrolling off and puts both back without partial and runtime unrolling: the full
// unroll at the end of the loop optimizer, where O3 has it, and the late one at the end of the
// pipeline with the clean-up O3 runs after it.
void OptimizeO3(llvm::Module& m, llvm::TargetMachine& tm, const llvm::PipelineTuningOptions& tuning,
                const llvm::TargetLibraryInfoImpl* tlii, Unrolling unrolling) {
  llvm::PipelineTuningOptions options = tuning;
  if (unrolling == Unrolling::kFullOnly) options.LoopUnrolling = false;
  llvm::PassBuilder pb(&tm, options);
  if (unrolling == Unrolling::kFullOnly) {
    pb.registerLoopOptimizerEndEPCallback([](llvm::LoopPassManager& lpm, llvm::OptimizationLevel level) {
      lpm.addPass(llvm::LoopFullUnrollPass(level.getSpeedupLevel(), /*OnlyWhenForced=*/false, /*ForgetSCEV=*/false));
    });
    // the late full unrolling, then the clean-up O3 runs after its own
    pb.registerOptimizerLastEPCallback([](llvm::ModulePassManager& mpm, llvm::OptimizationLevel level) {
      llvm::FunctionPassManager fpm;
      fpm.addPass(llvm::LoopUnrollPass(
          llvm::LoopUnrollOptions(level.getSpeedupLevel()).setPartial(false).setRuntime(false)));
      fpm.addPass(llvm::InstCombinePass());
      fpm.addPass(llvm::SimplifyCFGPass());
      mpm.addPass(llvm::createModuleToFunctionPassAdaptor(std::move(fpm)));
    });
  }
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
