// codegen/nvptx_module.h: what every NVPTX kernel shares once its function is emitted: the target
// machine, libdevice (Note [Libdevice] in nvptx_module.cc), internalising, O3 and PTX text, the
// kernel annotations, and the 128-bit key hasher the launchers' in-memory caches use. Internal to
// :nvptx_codegen (pointwise kernels, nvptx_codegen.cc; reductions, nvptx_reduce.cc).
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "codegen/kernel_ir.h"
#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"

namespace kiln::codegen {

// sm_80 / PTX ISA 7.0: the newest LLVM 14 targets; nvJitLink compiles it for the device at hand.
std::unique_ptr<llvm::TargetMachine> MakeNVPTXTargetMachine();

// A module for the NVPTX target, ready for one kernel to be emitted into.
std::unique_ptr<llvm::Module> NewNVPTXModule(llvm::LLVMContext& ctx, llvm::TargetMachine& tm, const std::string& name);

// Marks `fn` a kernel (an entry point) that runs at most `max_threads` threads a block (a bound
// for register allocation), and verifies it; kiln::Error naming `kernel` if the IR is invalid.
void AnnotateKernel(llvm::Function* fn, int max_threads, const std::string& kernel);

// Links libdevice where the kernel's math needs it, internalises everything but `symbol`,
// verifies and optimises at O3.
void FinishNVPTXModule(llvm::Module& m, llvm::TargetMachine& tm, const std::string& symbol, const std::string& kernel);

std::string ModuleLLVMIR(const llvm::Module& m);
std::string ModulePTX(llvm::Module& m, llvm::TargetMachine& tm);

// The target and code generator versions every kernel symbol hashes ("nvptx sm_80 +ptx70 <fingerprint> llvm 14.x").
std::string NVPTXTargetText();

// Two independent 64-bit mixes of the same stream of words (splitmix64's finaliser): the launchers'
// cache keys, built without text (a small launch's host-side cost matters).
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
  void AddString(const std::string& s) {
    for (char c : s) Add(static_cast<unsigned char>(c));
    Add(s.size());
  }
  void AddExpr(const Expr& e) {
    Add(uint64_t(e.kind) | uint64_t(e.op) << 8 | uint64_t(e.dtype) << 16 | uint64_t(uint32_t(e.buffer)) << 24 |
        uint64_t(uint32_t(e.acc_id)) << 56);
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

}  // namespace kiln::codegen
