// codegen/llvm_codegen.h: CPU code generation for kernel IR through LLVM 14's ORC JIT.
//
// Compile(kernel) lowers a Kernel (kernel_ir.h) to one LLVM function
//   void <name>_<hash>(char** ptrs, int64_t outer_begin, int64_t outer_end)
// that loops the first outer dim over [outer_begin, outer_end), the other outer dims fully, and
// each inner loop in order; optimises it at O3 for the host CPU (AVX2/AVX-512 found at run time,
// inner loops vectorised with a scalar tail); and compiles it to an object that an in-process
// LLJIT links. Compiled kernels are cached in memory and on disk (Note [Kernel cache]).
//
// Only this library sees LLVM's headers; everything above it uses this header.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codegen/kernel_ir.h"

namespace kiln::codegen {

using KernelFn = void (*)(char** ptrs, int64_t outer_begin, int64_t outer_end);

class CompiledKernel {
 public:
  CompiledKernel(Kernel kernel, std::string hash, KernelFn fn, bool from_cache);

  const Kernel& kernel() const { return kernel_; }
  const std::string& name() const { return kernel_.name; }
  const std::string& hash() const { return hash_; }   // of the IR (not of the CPU)
  KernelFn fn() const { return fn_; }
  bool from_cache() const { return from_cache_; }      // object came from memory or disk
  // The optimised LLVM IR (regenerated on first use when the object came from the cache).
  std::string llvm_ir() const;
  // The readable C-like listing (PrintKernel).
  std::string code() const { return PrintKernel(kernel_); }
  // [min, max] element offsets touched per buffer (for callers' bounds checks).
  const std::vector<Extent>& extents() const { return extents_; }

  // Runs the whole iteration space: the first outer dim is split over kiln's thread pool when
  // the work is large enough, else one direct call. ptrs[b] points at element 0 of buffer b.
  void Run(char** ptrs) const;

 private:
  Kernel kernel_;
  std::string hash_;
  KernelFn fn_;
  bool from_cache_;
  std::vector<Extent> extents_;
  int64_t grain_ = 1;
  mutable std::string llvm_ir_;
};

struct CodegenOptions {
  bool use_cache = true;       // memory and disk cache
  // LIBMVEC-X86 (glibc's libmvec) for vector log/sin/cos/pow and f64 exp: off by default (Note
  // [One value, one set of bits] in llvm_emit.cc).
  bool vector_library = false;
  // Vector width in bits (256, 512); 0: 512 where the host has AVX-512F, else the target's
  // default (Note [Vector width and interleaving] in llvm_emit.cc).
  int prefer_vector_width = 0;
  // f32 exp (also in sigmoid, expm1) as inline FMA arithmetic (Note [One float math]) instead of
  // llvm.exp, which becomes a call to libmvec's 8-lane _ZGVdN8v_expf.
  bool inline_exp = true;
};

// Validates, then compiles (or finds in the cache). Throws kiln::ValueError for invalid IR,
// kiln::Error when LLVM fails. Thread-safe.
std::shared_ptr<CompiledKernel> Compile(const Kernel& kernel, const CodegenOptions& options = {});

// Compile for each kernel, on up to `threads` threads (this one among them); kernels with the same
// body compile once (Note [Kernels keyed by body]). Every kernel is attempted; the first failing
// kernel's error (in `kernels`' order) is rethrown.
std::vector<std::shared_ptr<CompiledKernel>> CompileMany(const std::vector<Kernel>& kernels, int threads,
                                                         const CodegenOptions& options = {});

// Optimised LLVM IR text for `kernel` without compiling it to machine code.
std::string GenerateLLVMIR(const Kernel& kernel, const CodegenOptions& options = {});

// Counters for tests: compiles that ran LLVM codegen, hits in memory, hits on disk.
struct CacheStats {
  int64_t compiled = 0, memory_hits = 0, disk_hits = 0;
};
CacheStats GetCacheStats();
// Drops the in-memory cache (the JIT keeps already-linked code alive); the disk cache stays.
void ClearMemoryCache();
// The disk cache directory: $KILN_INDUCTOR_CACHE_DIR, else ~/.cache/kiln/inductor.
std::string CacheDir();
// "cpu-name +feature,..." of the host, part of every cache key.
std::string HostCpuKey();

}  // namespace kiln::codegen
