// codegen/nvptx_codegen.cc: PointwiseKernel -> LLVM IR -> libdevice linked -> O3 -> PTX for sm_80.
//
// The kernel function is emitted by nvptx_emit.cc; libdevice, O3 and PTX are nvptx_module.cc's.
#include "codegen/nvptx_codegen.h"

#include <cctype>
#include <sstream>

#include "codegen/nvptx_emit.h"
#include "codegen/nvptx_module.h"
#include "llvm/IR/Module.h"
#include "runtime/error.h"

namespace kiln::codegen {

namespace {

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

// The optimised module for the kernel (in `ctx`).
std::unique_ptr<llvm::Module> BuildOptimised(llvm::LLVMContext& ctx, llvm::TargetMachine& tm, const PointwiseKernel& k,
                                             const PointwiseLayout& layout) {
  ValidatePointwise(k, layout);
  const std::string symbol = PointwiseSymbol(k, layout);
  std::unique_ptr<llvm::Module> m = NewNVPTXModule(ctx, tm, k.name);
  EmitPointwise(*m, k, layout, symbol);
  FinishNVPTXModule(*m, tm, symbol, k.name);
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
  key << "\nlayout " << layout.ndim << " " << layout.vector << " " << layout.index32 << "\n" << NVPTXTargetText();
  return k.name + "_" + HashString(key.str()).substr(0, 16);
}

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
  std::unique_ptr<llvm::TargetMachine> tm = MakeNVPTXTargetMachine();
  llvm::LLVMContext ctx;
  return ModuleLLVMIR(*BuildOptimised(ctx, *tm, k, layout));
}

std::string PointwisePTX(const PointwiseKernel& k, const PointwiseLayout& layout) {
  std::unique_ptr<llvm::TargetMachine> tm = MakeNVPTXTargetMachine();
  llvm::LLVMContext ctx;
  return ModulePTX(*BuildOptimised(ctx, *tm, k, layout), *tm);
}

}  // namespace kiln::codegen
