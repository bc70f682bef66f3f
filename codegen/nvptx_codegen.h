// codegen/nvptx_codegen.h: GPU code generation for kernel IR through LLVM 14's NVPTX back end.
//
// Eager's CUDA pointwise ops are PointwiseKernels: out = expr(operands) element by element over a
// shape known only at run time, so one compiled kernel serves every size (a kernel per shape would
// compile on every new size). The expression is kernel IR (kernel_ir.h), emitted by the same
// ExprEmitter as the CPU code generator's, so eager CUDA and Inductor share one definition of each
// operator's semantics. PointwisePTX writes sm_80 PTX (the newest LLVM 14 knows); nvJitLink
// (runtime/cuda/nvjitlink.h) compiles it for the device at hand.
//
// The kernel's parameters, in order (the launcher's contract):
//   for each operand b: a tensor operand's element pointer (T*), or a scalar operand's value
//       (float for f32/bf16/f16, double for f64, int64 for integers and bool);
//   int64 n (elements);
//   strided layouts only: int64 sizes[ndim] (outermost first); with 32-bit index math, the sizes'
//       FastDivisors as int64 magics[ndim] then int64 shifts[ndim]; then for each tensor operand in
//       order int64 strides[ndim] (in elements; 0 broadcasts).
// Launch with kPointwiseThreads threads per block and PointwiseBlocks(n, layout) blocks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/kernel_ir.h"

namespace kiln::codegen {

struct PointwiseKernel {
  std::string name;              // a C identifier ("add_f32"); the symbol adds a hash
  std::vector<Buffer> operands;  // [0] is the output
  std::vector<bool> scalar;      // per operand: a by-value kernel parameter (never operand 0)
  ExprPtr expr;                  // ("load", b, any index) reads operand b at the current element
};

struct PointwiseLayout {
  // 0: every tensor operand is dense in the output's order (element i at offset i); k >= 1: the
  // operands are strided over k dims (a linear index is split into k coordinates).
  int ndim = 0;
  // contiguous only: elements per thread, read and written as one vector access (1, 2, 4, 8, 16);
  // the launcher picks it so that every tensor operand's pointer is aligned to vector elements.
  int vector = 1;
  // strided only: n and every offset fit in int32, so index math is 32-bit (a 64-bit division is
  // several times the cost).
  bool index32 = true;
};

constexpr int kPointwiseThreads = 128;
constexpr int kStridedElements = 4;  // per thread in a strided kernel (Note [Strided kernel shape])

inline int64_t PointwiseBlocks(int64_t n, const PointwiseLayout& layout) {
  int64_t per_block = int64_t(kPointwiseThreads) * (layout.ndim == 0 ? layout.vector : kStridedElements);
  return (n + per_block - 1) / per_block;
}

// x / d for 0 <= x < 2^31 as (umulhi(x, magic) + x) >> shift (Granlund and Montgomery's method,
// PyTorch's IntDivider): shift = ceil(log2 d), magic = 2^32 (2^shift - d) / d + 1.
struct FastDivisor {
  uint32_t magic = 1, shift = 0;
};
inline FastDivisor MakeFastDivisor(uint32_t d) {
  FastDivisor f;
  while ((uint64_t(1) << f.shift) < d) ++f.shift;
  f.magic = static_cast<uint32_t>(((uint64_t(1) << 32) * ((uint64_t(1) << f.shift) - d)) / d + 1);
  return f;
}

// A 128-bit hash of everything PointwiseSymbol covers but the code generator's version (constant
// in a process): the in-memory cache's key, cheap enough for every launch (no text is built).
struct PointwiseKey {
  uint64_t a = 0, b = 0;
  bool operator==(const PointwiseKey& o) const { return a == o.a && b == o.b; }
};
PointwiseKey KeyOf(const PointwiseKernel& k, const PointwiseLayout& layout);

// Throws kiln::ValueError naming the kernel when the description is malformed (operand 0 loaded
// or scalar, a load out of range, an accumulator or loop index in the expression, a bad layout).
void ValidatePointwise(const PointwiseKernel& k, const PointwiseLayout& layout);

// The kernel's symbol, `<name>_<hash>`: the hash covers the expression, the operand dtypes and
// kinds, the layout and the code generator's fingerprint, so equal symbols mean equal code.
std::string PointwiseSymbol(const PointwiseKernel& k, const PointwiseLayout& layout);

// Optimised LLVM IR (libdevice linked where the expression needs it) and the PTX text for it.
// Throws kiln::Error when LLVM fails (a bug in kiln) or libdevice is needed and was not built in.
std::string PointwiseLLVMIR(const PointwiseKernel& k, const PointwiseLayout& layout);
std::string PointwisePTX(const PointwiseKernel& k, const PointwiseLayout& layout);

// Whether libdevice (the math library transcendental ops link) was embedded at build time.
bool HaveLibdevice();

}  // namespace kiln::codegen
