// codegen/nvptx_codegen.cc: PointwiseKernel -> LLVM IR -> libdevice linked -> O3 -> PTX for sm_80.
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
#include "codegen/nvptx_codegen.h"

#include <cctype>
#include <cstring>
#include <mutex>
#include <sstream>

#include "codegen/codegen_fingerprint.h"
#include "codegen/llvm_optimize.h"
#include "codegen/nvptx_emit.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Linker/Linker.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Transforms/IPO/Internalize.h"
#include "runtime/error.h"

namespace kiln::codegen {

extern const unsigned char kLibdevice[];  // @cuda_libdevice (third_party/system.bzl)
extern const size_t kLibdeviceSize;

namespace {

constexpr const char* kTriple = "nvptx64-nvidia-cuda";
constexpr const char* kGpu = "sm_80";        // the newest LLVM 14 targets; nvJitLink compiles it for sm_90
constexpr const char* kFeatures = "+ptx70";
constexpr int kMaxDims = 8;

// The pointwise kernel as a one-loop kernel storing its expression once: what Validate and
// Serialize read.
Kernel AsLoopKernel(const PointwiseKernel& k) {
  Kernel kernel;
  kernel.name = k.name;
  kernel.buffers = k.operands;
  kernel.loops.push_back(Loop{1, {Stmt{Stmt::Kind::kStore, 0, Index{}, k.expr}}});
  return kernel;
}

std::string Where(const PointwiseKernel& k) { return StrCat("[codegen] pointwise kernel '", k.name, "': "); }

void CheckPointwiseExpr(const PointwiseKernel& k, const Expr& e) {
  ForEachExpr(e, [&](const Expr& x) {
    KILN_CHECK_VALUE(x.kind != Expr::Kind::kIndex && x.kind != Expr::Kind::kAcc, Where(k),
                     "loop indices and accumulators have no meaning in a pointwise kernel");
    if (x.kind == Expr::Kind::kLoad)
      KILN_CHECK_VALUE(x.buffer >= 1 && x.buffer < static_cast<int>(k.operands.size()), Where(k), "load of operand ",
                       x.buffer, ": operands 1..", k.operands.size() - 1, " are the inputs");
  });
}

std::unique_ptr<llvm::TargetMachine> MakeTargetMachine() {
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

// The optimised module for the kernel (in `ctx`); *symbol gets its name.
std::unique_ptr<llvm::Module> BuildOptimised(llvm::LLVMContext& ctx, llvm::TargetMachine& tm, const PointwiseKernel& k,
                                             const PointwiseLayout& layout, std::string* symbol) {
  ValidatePointwise(k, layout);
  *symbol = PointwiseSymbol(k, layout);
  auto m = std::make_unique<llvm::Module>(k.name, ctx);
  m->setTargetTriple(kTriple);
  m->setDataLayout(tm.createDataLayout());
  EmitPointwise(*m, k, layout, *symbol);
  if (UseLibdevice(*m)) {
    m->addModuleFlag(llvm::Module::Override, "nvvm-reflect-ftz", uint32_t{0});
    LinkLibdevice(*m, k.name);
  }
  const std::string keep = *symbol;
  llvm::internalizeModule(*m, [&](const llvm::GlobalValue& gv) { return gv.getName() == keep; });
  std::string err;
  llvm::raw_string_ostream es(err);
  if (llvm::verifyModule(*m, &es))
    throw Error("[codegen] invalid NVPTX module for '" + k.name + "' (a bug in kiln): " + es.str());
  OptimizeO3(*m, tm, llvm::PipelineTuningOptions());
  return m;
}

}  // namespace

void ValidatePointwise(const PointwiseKernel& k, const PointwiseLayout& layout) {
  KILN_CHECK_VALUE(!k.name.empty(), "[codegen] a pointwise kernel needs a name");
  for (char c : k.name)
    KILN_CHECK_VALUE(std::isalnum(static_cast<unsigned char>(c)) || c == '_', Where(k), "the name must be an identifier");
  KILN_CHECK_VALUE(k.operands.size() >= 1, Where(k), "needs an output operand");
  KILN_CHECK_VALUE(k.scalar.size() == k.operands.size(), Where(k), "one scalar flag per operand: ", k.scalar.size(),
                   " flags for ", k.operands.size(), " operands");
  KILN_CHECK_VALUE(!k.scalar[0], Where(k), "the output (operand 0) cannot be a scalar");
  KILN_CHECK_VALUE(k.expr != nullptr, Where(k), "missing expression");
  KILN_CHECK_VALUE(layout.ndim >= 0 && layout.ndim <= kMaxDims, Where(k), "layout ndim ", layout.ndim,
                   " out of range [0, ", kMaxDims, "]");
  const int v = layout.vector;
  KILN_CHECK_VALUE(v == 1 || v == 2 || v == 4 || v == 8 || v == 16, Where(k), "vector width ", v,
                   " is not 1, 2, 4, 8 or 16");
  KILN_CHECK_VALUE(layout.ndim == 0 || v == 1, Where(k), "a strided layout takes one element per thread");
  Validate(AsLoopKernel(k));  // the same structural checks as a loop kernel's (arity, casts)
  CheckPointwiseExpr(k, *k.expr);
}

std::string PointwiseSymbol(const PointwiseKernel& k, const PointwiseLayout& layout) {
  std::ostringstream key;
  key << Serialize(AsLoopKernel(k)) << "\nscalar";
  for (bool s : k.scalar) key << (s ? " 1" : " 0");
  key << "\nlayout " << layout.ndim << " " << layout.vector << " " << layout.index32 << "\nnvptx " << kGpu << " "
      << kFeatures << " " KILN_CODEGEN_FINGERPRINT " llvm " LLVM_VERSION_STRING;
  return k.name + "_" + HashString(key.str()).substr(0, 16);
}

namespace {

// Two independent 64-bit mixes of the same stream of words (splitmix64's finaliser).
struct KeyHasher {
  uint64_t a = 0x9e3779b97f4a7c15ull, b = 0xbf58476d1ce4e5b9ull;
  static uint64_t Mix(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  }
  void Add(uint64_t w) {
    a = Mix(a ^ w) + 0x632be59bd9b4e019ull;
    b = Mix(b + w * 0xff51afd7ed558ccdull) ^ 0xc4ceb9fe1a85ec53ull;
  }
  void AddExpr(const Expr& e) {
    Add(uint64_t(e.kind) | uint64_t(e.op) << 8 | uint64_t(e.dtype) << 16 | uint64_t(uint32_t(e.buffer)) << 24);
    if (e.kind == Expr::Kind::kConst) {
      uint64_t bits;
      std::memcpy(&bits, &e.value, sizeof(bits));
      Add(bits);
      Add(static_cast<uint64_t>(e.int_value));
    }
    Add(e.args.size());
    for (const ExprPtr& x : e.args) AddExpr(*x);
  }
};

}  // namespace

PointwiseKey KeyOf(const PointwiseKernel& k, const PointwiseLayout& layout) {
  KeyHasher h;
  for (char c : k.name) h.Add(static_cast<unsigned char>(c));
  h.Add(k.operands.size());
  for (size_t i = 0; i < k.operands.size(); ++i) h.Add(uint64_t(k.operands[i].dtype) | uint64_t(k.scalar[i]) << 8);
  h.Add(uint64_t(layout.ndim) | uint64_t(layout.vector) << 8 | uint64_t(layout.index32) << 16);
  if (k.expr) h.AddExpr(*k.expr);
  return PointwiseKey{h.a, h.b};
}

std::string PointwiseLLVMIR(const PointwiseKernel& k, const PointwiseLayout& layout) {
  std::unique_ptr<llvm::TargetMachine> tm = MakeTargetMachine();
  llvm::LLVMContext ctx;
  std::string symbol;
  std::unique_ptr<llvm::Module> m = BuildOptimised(ctx, *tm, k, layout, &symbol);
  std::string text;
  llvm::raw_string_ostream os(text);
  m->print(os, nullptr);
  return os.str();
}

std::string PointwisePTX(const PointwiseKernel& k, const PointwiseLayout& layout) {
  std::unique_ptr<llvm::TargetMachine> tm = MakeTargetMachine();
  llvm::LLVMContext ctx;
  std::string symbol;
  std::unique_ptr<llvm::Module> m = BuildOptimised(ctx, *tm, k, layout, &symbol);
  llvm::SmallString<0> ptx;
  llvm::raw_svector_ostream os(ptx);
  llvm::legacy::PassManager pm;
  if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CGFT_AssemblyFile))
    throw Error("[codegen] the NVPTX target cannot emit PTX");
  pm.run(*m);
  return std::string(ptx.str());
}

bool HaveLibdevice() { return kLibdeviceSize > 0; }

}  // namespace kiln::codegen
