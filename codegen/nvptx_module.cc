// codegen/nvptx_module.cc: target machine, libdevice, O3 and PTX for every NVPTX kernel.
//
// Note [Libdevice]: the shared ExprEmitter writes math the CPU has no instruction for as LLVM's
// intrinsics (llvm.exp, llvm.log, llvm.sin, llvm.cos, llvm.pow; llvm.roundeven becomes llvm.rint,
// which NVPTX has) or as calls to libm's names (tanh, erf, atan2 and their f suffixes), and `frem` for fmod. LLVM 14's NVPTX back
// end cannot lower any of these (they would become calls to functions that do not exist on the
// GPU), so before optimisation each becomes the matching function of libdevice, NVIDIA's math
// library shipped as LLVM bitcode (__nv_expf, __nv_log, __nv_rintf, __nv_fmodf, ...: what
// nvcc's own expf() and PyTorch's CUDA kernels call), and libdevice is linked in, only the
// functions used, lazily read. Its __nvvm_reflect("__CUDA_FTZ") queries read the module flag
// "nvvm-reflect-ftz" = 0 (denormals kept, as PyTorch builds), and the NVPTX target's own passes
// (NVVMReflect, run by the pipeline the target machine registers) fold them away. Everything but
// the kernel is then internalised, so O3 inlines the library functions and drops the rest.
#include "codegen/nvptx_module.h"

#include <mutex>

#include "codegen/codegen_fingerprint.h"
#include "codegen/llvm_optimize.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Linker/Linker.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Transforms/IPO/Internalize.h"
#include "runtime/error.h"

namespace kiln::codegen {

extern const unsigned char kLibdevice[];  // @cuda_libdevice (third_party/system.bzl)
extern const size_t kLibdeviceSize;

namespace {

constexpr const char* kTriple = "nvptx64-nvidia-cuda";
constexpr const char* kGpu = "sm_80";        // the newest LLVM 14 targets; nvJitLink compiles it for sm_90
constexpr const char* kFeatures = "+ptx70";

// The libdevice function for a math intrinsic or libm name, or "" (Note [Libdevice]).
std::string LibdeviceName(const llvm::Function& f) {
  const bool f32 = f.getReturnType()->isFloatTy();
  auto nv = [&](const char* base) { return std::string("__nv_") + base + (f32 ? "f" : ""); };
  switch (f.getIntrinsicID()) {
    case llvm::Intrinsic::exp: return nv("exp");
    case llvm::Intrinsic::exp2: return nv("exp2");
    case llvm::Intrinsic::log: return nv("log");
    case llvm::Intrinsic::log2: return nv("log2");
    case llvm::Intrinsic::log10: return nv("log10");
    case llvm::Intrinsic::sin: return nv("sin");
    case llvm::Intrinsic::cos: return nv("cos");
    case llvm::Intrinsic::pow: return nv("pow");
    case llvm::Intrinsic::not_intrinsic: break;
    default: return "";
  }
  static const char* const kLibm[] = {
      "tanhf", "tanh", "erff", "erf", "erfcf", "erfc", "atan2f", "atan2", "hypotf", "hypot", "expf", "exp",
      "exp2f", "exp2", "logf", "log", "log2f", "log2", "log10f", "log10", "sinf", "sin", "cosf", "cos",
      "tanf", "tan", "asinf", "asin", "acosf", "acos", "atanf", "atan", "sinhf", "sinh", "coshf", "cosh",
      "asinhf", "asinh", "acoshf", "acosh", "atanhf", "atanh", "lgammaf", "lgamma", "powf", "pow"};
  for (const char* name : kLibm)
    if (f.getName() == name) return std::string("__nv_") + name;
  return "";
}

// Rewrites intrinsics, libm calls and frem into libdevice calls; true if any were needed.
bool UseLibdevice(llvm::Module& m) {
  bool needed = false;
  std::vector<llvm::Function*> replaced;
  for (llvm::Function& f : m) {
    if (!f.isDeclaration() || f.use_empty()) continue;
    if (f.getIntrinsicID() == llvm::Intrinsic::roundeven) {
      // llvm.rint is cvt.rni (half to even) on NVPTX; libdevice's __nv_rintf came out half away
      // from zero (2.5 gave 3) through LLVM 14's reading of its intrinsic
      f.replaceAllUsesWith(llvm::Intrinsic::getDeclaration(&m, llvm::Intrinsic::rint, {f.getReturnType()}));
      replaced.push_back(&f);
      continue;
    }
    std::string name = LibdeviceName(f);
    if (name.empty()) continue;
    llvm::FunctionCallee nv = m.getOrInsertFunction(name, f.getFunctionType());
    f.replaceAllUsesWith(nv.getCallee());
    replaced.push_back(&f);
    needed = true;
  }
  for (llvm::Function* f : replaced) f->eraseFromParent();
  std::vector<llvm::Instruction*> frems;
  for (llvm::Function& f : m)
    for (llvm::Instruction& inst : llvm::instructions(f))
      if (inst.getOpcode() == llvm::Instruction::FRem) frems.push_back(&inst);
  for (llvm::Instruction* inst : frems) {
    llvm::Type* ty = inst->getType();
    llvm::FunctionCallee fmod = m.getOrInsertFunction(ty->isFloatTy() ? "__nv_fmodf" : "__nv_fmod", ty, ty, ty);
    llvm::IRBuilder<> b(inst);
    inst->replaceAllUsesWith(b.CreateCall(fmod, {inst->getOperand(0), inst->getOperand(1)}));
    inst->eraseFromParent();
    needed = true;
  }
  return needed;
}

void LinkLibdevice(llvm::Module& m, const std::string& kernel) {
  if (kLibdeviceSize == 0)
    throw Error(StrCat("[codegen] kernel '", kernel, "' needs libdevice (the CUDA math library), and this kiln was "
                       "built without a CUDA toolkit to take it from (third_party/system.bzl: cuda_libdevice)"));
  llvm::MemoryBufferRef buffer(llvm::StringRef(reinterpret_cast<const char*>(kLibdevice), kLibdeviceSize), "libdevice");
  auto lib = llvm::getLazyBitcodeModule(buffer, m.getContext());
  if (!lib) throw Error("[codegen] reading libdevice failed: " + llvm::toString(lib.takeError()));
  (*lib)->setTargetTriple(m.getTargetTriple());
  (*lib)->setDataLayout(m.getDataLayout());
  if (llvm::Linker::linkModules(m, std::move(*lib), llvm::Linker::Flags::LinkOnlyNeeded))
    throw Error("[codegen] linking libdevice into '" + kernel + "' failed");
}

}  // namespace

std::unique_ptr<llvm::TargetMachine> MakeNVPTXTargetMachine() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
  std::string err;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(kTriple, err);
  if (!target) throw Error("[codegen] LLVM has no NVPTX target: " + err);
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(kTriple, kGpu, kFeatures, options, llvm::None,
                                                                      llvm::None, llvm::CodeGenOpt::Aggressive));
  if (!tm) throw Error("[codegen] could not create the NVPTX target machine");
  return tm;
}

std::unique_ptr<llvm::Module> NewNVPTXModule(llvm::LLVMContext& ctx, llvm::TargetMachine& tm, const std::string& name) {
  auto m = std::make_unique<llvm::Module>(name, ctx);
  m->setTargetTriple(kTriple);
  m->setDataLayout(tm.createDataLayout());
  return m;
}

void AnnotateKernel(llvm::Function* fn, int max_threads, const std::string& kernel) {
  llvm::Module& m = *fn->getParent();
  llvm::LLVMContext& ctx = m.getContext();
  auto* i32 = llvm::Type::getInt32Ty(ctx);
  llvm::NamedMDNode* annotations = m.getOrInsertNamedMetadata("nvvm.annotations");
  for (auto [key, value] : {std::pair<const char*, int>{"kernel", 1}, {"maxntidx", max_threads}}) {
    llvm::Metadata* md[] = {llvm::ValueAsMetadata::get(fn), llvm::MDString::get(ctx, key),
                            llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(i32, value))};
    annotations->addOperand(llvm::MDNode::get(ctx, md));
  }
  std::string err;
  llvm::raw_string_ostream es(err);
  if (llvm::verifyFunction(*fn, &es))
    throw Error("[codegen] generated invalid NVPTX IR for '" + kernel + "' (a bug in kiln): " + es.str());
}

void FinishNVPTXModule(llvm::Module& m, llvm::TargetMachine& tm, const std::string& symbol, const std::string& kernel) {
  if (UseLibdevice(m)) {
    m.addModuleFlag(llvm::Module::Override, "nvvm-reflect-ftz", uint32_t{0});
    LinkLibdevice(m, kernel);
  }
  llvm::internalizeModule(m, [&](const llvm::GlobalValue& gv) { return gv.getName() == symbol; });
  std::string err;
  llvm::raw_string_ostream es(err);
  if (llvm::verifyModule(m, &es))
    throw Error("[codegen] invalid NVPTX module for '" + kernel + "' (a bug in kiln): " + es.str());
  OptimizeO3(m, tm, llvm::PipelineTuningOptions());
}

std::string ModuleLLVMIR(const llvm::Module& m) {
  std::string text;
  llvm::raw_string_ostream os(text);
  m.print(os, nullptr);
  return os.str();
}

std::string ModulePTX(llvm::Module& m, llvm::TargetMachine& tm) {
  llvm::SmallString<0> ptx;
  llvm::raw_svector_ostream os(ptx);
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr, llvm::CGFT_AssemblyFile))
    throw Error("[codegen] the NVPTX target cannot emit PTX");
  pm.run(m);
  return std::string(ptx.str());
}

std::string NVPTXTargetText() {
  return std::string("nvptx ") + kGpu + " " + kFeatures + " " KILN_CODEGEN_FINGERPRINT " llvm " LLVM_VERSION_STRING;
}

bool HaveLibdevice() { return kLibdeviceSize > 0; }

}  // namespace kiln::codegen
