// codegen/llvm_optimize.cc: the O3 pipeline (llvm_optimize.h).
#include "codegen/llvm_optimize.h"

#include "llvm/Analysis/LoopInfo.h"
#include "llvm/IR/Metadata.h"
#include "llvm/Transforms/Scalar/LoopPassManager.h"
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
//
// Note [Which loops unroll]: the full unrolling before vectorisation (above) took every loop
// whose trip count times body was small, whatever it held: a kernel's second outer loop (16 rows)
// was unrolled with the row loop inside it, and each of the 16 copies then vectorised on its own
// (1757 lines of IR, 89 ms to compile `x * (y - z)`); a sum over rows of 64 became one chain of 64
// scalar adds, neither vectorised nor quick to compile. So the CPU emitter says which loops
// unroll: outer loops of constant extent never ("llvm.loop.unroll.disable"); inner loops of at
// least 16 iterations (a vector's lanes) and the max/min lane loops (Note [Lanes for max and min]
// in llvm_emit.cc) only at the end, once the vectoriser and SLP made their bodies vectors
// (kUnrollLateHint, which the early full unrolling skips); shorter inner loops as O3 decides.
// "llvm.loop.unroll.disable" would not do for the late ones: the vectoriser reads it as "do not
// interleave" too, and a softmax over rows of 256 lost 4% without its four interleaved sums.
// Measured (one thread): the digits CNN training step's 23 distinct kernels compile in 349 ms
// instead of 566, a 2-layer GPT step's 25 in 429 instead of 509; rows of 64 run faster (a layer
// norm over 4096 of them 0.47 -> 0.25 ms, a softmax 0.44 -> 0.36 ms) and the GPT step's kernels
// are the same code but for one 5 us kernel.
namespace {

bool HasHint(const llvm::Loop& loop, llvm::StringRef name) {
  llvm::MDNode* id = loop.getLoopID();
  if (id == nullptr) return false;
  for (unsigned i = 1; i < id->getNumOperands(); ++i) {
    auto* node = llvm::dyn_cast<llvm::MDNode>(id->getOperand(i).get());
    if (node == nullptr || node->getNumOperands() == 0) continue;
    auto* s = llvm::dyn_cast<llvm::MDString>(node->getOperand(0));
    if (s != nullptr && s->getString() == name) return true;
  }
  return false;
}

// LoopFullUnrollPass, except on loops marked to unroll late.
struct FullUnrollUnlessLate : llvm::PassInfoMixin<FullUnrollUnlessLate> {
  explicit FullUnrollUnlessLate(int speedup_level) : full(speedup_level, /*OnlyWhenForced=*/false, /*ForgetSCEV=*/false) {}
  llvm::PreservedAnalyses run(llvm::Loop& loop, llvm::LoopAnalysisManager& lam, llvm::LoopStandardAnalysisResults& ar,
                              llvm::LPMUpdater& updater) {
    if (HasHint(loop, kUnrollLateHint)) return llvm::PreservedAnalyses::all();
    return full.run(loop, lam, ar, updater);
  }
  llvm::LoopFullUnrollPass full;
};

}  // namespace

void OptimizeO3(llvm::Module& m, llvm::TargetMachine& tm, const llvm::PipelineTuningOptions& tuning,
                const llvm::TargetLibraryInfoImpl* tlii, Unrolling unrolling) {
  llvm::PipelineTuningOptions options = tuning;
  if (unrolling == Unrolling::kFullOnly) options.LoopUnrolling = false;
  llvm::PassBuilder pb(&tm, options);
  if (unrolling == Unrolling::kFullOnly) {
    pb.registerLoopOptimizerEndEPCallback([](llvm::LoopPassManager& lpm, llvm::OptimizationLevel level) {
      lpm.addPass(FullUnrollUnlessLate(level.getSpeedupLevel()));
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
