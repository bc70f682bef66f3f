// codegen/nvptx_reduce.cc: ReduceKernel -> validated, named, emitted (nvptx_reduce_emit.cc),
// optimised and written as PTX (nvptx_module.h).
#include "codegen/nvptx_reduce.h"

#include <cctype>
#include <sstream>

#include "codegen/nvptx_emit.h"
#include "codegen/nvptx_module.h"
#include "runtime/error.h"

namespace kiln::codegen {
namespace {

constexpr int kMaxDims = 8;

bool IsArg(ReduceKind r) { return r == ReduceKind::kArgmax || r == ReduceKind::kArgmin; }
bool IsPow2(int v) { return v > 0 && (v & (v - 1)) == 0; }

std::string Where(const ReduceKernel& k) { return StrCat("[codegen] reduction kernel '", k.name, "': "); }

// The reduction as a loop kernel (reduce pre into acc 0, then store post): what Validate and
// Serialize read.
Kernel AsLoopKernel(const ReduceKernel& k) {
  Kernel kernel;
  kernel.name = k.name;
  kernel.buffers = k.operands;
  Stmt reduce{Stmt::Kind::kReduce, 0, Index{}, k.pre, 0, k.reduce};
  kernel.loops.push_back(Loop{1, {reduce}});
  kernel.loops.push_back(Loop{1, {Stmt{Stmt::Kind::kStore, 0, Index{}, k.post}}});
  return kernel;
}

std::unique_ptr<llvm::Module> BuildOptimised(llvm::LLVMContext& ctx, llvm::TargetMachine& tm, const ReduceKernel& k,
                                             const ReduceLayout& layout) {
  ValidateReduce(k, layout);
  const std::string symbol = ReduceSymbol(k, layout);
  std::unique_ptr<llvm::Module> m = NewNVPTXModule(ctx, tm, k.name);
  EmitReduce(*m, k, layout, symbol);
  FinishNVPTXModule(*m, tm, symbol, k.name);
  return m;
}

}  // namespace

void ValidateReduce(const ReduceKernel& k, const ReduceLayout& layout) {
  KILN_CHECK_VALUE(!k.name.empty(), "[codegen] a reduction kernel needs a name");
  for (char c : k.name)
    KILN_CHECK_VALUE(std::isalnum(static_cast<unsigned char>(c)) || c == '_', Where(k), "the name must be an identifier");
  const int first = FirstReduceInput(k);
  const int nops = static_cast<int>(k.operands.size());
  KILN_CHECK_VALUE(nops > first, Where(k), "needs ", first, " output operand(s) and at least one input; got ", nops,
                   " operands");
  KILN_CHECK_VALUE(k.scalar.size() == k.operands.size(), Where(k), "one scalar flag per operand: ", k.scalar.size(),
                   " flags for ", nops, " operands");
  for (int b = 0; b < first; ++b) KILN_CHECK_VALUE(!k.scalar[b], Where(k), "output operand ", b, " cannot be a scalar");
  if (IsArg(k.reduce))
    KILN_CHECK_VALUE(k.operands[1].dtype == DType::I64, Where(k), "the index output must be i64, got ",
                     DTypeName(k.operands[1].dtype));
  KILN_CHECK_VALUE(k.acc == DType::F32 || k.acc == DType::F64 || k.acc == DType::I64, Where(k),
                   "the accumulator must be f32, f64 or i64, got ", DTypeName(k.acc));
  KILN_CHECK_VALUE(k.pre != nullptr && k.post != nullptr, Where(k), "missing pre or post expression");
  if (k.index_input >= 0) {
    KILN_CHECK_VALUE(IsArg(k.reduce), Where(k), "an index input belongs to argmax/argmin");
    KILN_CHECK_VALUE(k.index_input >= first && k.index_input < nops && !k.scalar[k.index_input] &&
                         k.operands[k.index_input].dtype == DType::I64,
                     Where(k), "index input ", k.index_input, " is not an i64 tensor input");
  }
  ForEachExpr(*k.pre, [&](const Expr& x) {
    KILN_CHECK_VALUE(x.kind != Expr::Kind::kIndex && x.kind != Expr::Kind::kAcc, Where(k),
                     "the pre expression reads inputs only");
    if (x.kind == Expr::Kind::kLoad)
      KILN_CHECK_VALUE(x.buffer >= first && x.buffer < nops, Where(k), "load of operand ", x.buffer, ": operands ",
                       first, "..", nops - 1, " are the inputs");
  });
  ForEachExpr(*k.post, [&](const Expr& x) {
    KILN_CHECK_VALUE(x.kind != Expr::Kind::kIndex && (x.kind != Expr::Kind::kAcc || x.acc_id == 0), Where(k),
                     "the post expression reads (\"acc\", 0) and scalar operands");
    if (x.kind == Expr::Kind::kLoad)
      KILN_CHECK_VALUE(x.buffer >= first && x.buffer < nops && k.scalar[x.buffer], Where(k),
                       "the post expression loads operand ", x.buffer, ", which is not a scalar input");
  });
  KILN_CHECK_VALUE(IsPow2(layout.bx) && IsPow2(layout.by) && layout.bx * layout.by >= 32 &&
                       layout.bx * layout.by <= kMaxReduceThreads,
                   Where(k), "block ", layout.bx, "x", layout.by, " is not two powers of two of 32..",
                   kMaxReduceThreads, " threads");
  const int v = layout.vector;
  KILN_CHECK_VALUE(v == 1 || v == 2 || v == 4 || v == 8 || v == 16, Where(k), "vector width ", v,
                   " is not 1, 2, 4, 8 or 16");
  KILN_CHECK_VALUE(v == 1 || (layout.row && layout.red_ndim == 1), Where(k),
                   "vector loads need a row layout over one reduced dim");
  KILN_CHECK_VALUE(layout.out_ndim >= 1 && layout.out_ndim <= kMaxDims && layout.red_ndim >= 1 &&
                       layout.red_ndim <= kMaxDims,
                   Where(k), "dims ", layout.out_ndim, " and ", layout.red_ndim, " out of range [1, ", kMaxDims, "]");
  Validate(AsLoopKernel(k));  // the loop kernel's structural checks (arity, casts)
}

std::string ReduceSymbol(const ReduceKernel& k, const ReduceLayout& layout) {
  std::ostringstream key;
  key << Serialize(AsLoopKernel(k)) << "\nscalar";
  for (bool s : k.scalar) key << (s ? " 1" : " 0");
  key << "\nacc " << DTypeName(k.acc) << " index " << k.index_input << "\nlayout " << layout.row << " " << layout.bx
      << " " << layout.by << " " << layout.vector << " " << layout.out_ndim << " " << layout.red_ndim << " "
      << layout.index32 << "\n" << NVPTXTargetText();
  return k.name + "_" + HashString(key.str()).substr(0, 16);
}

PointwiseKey KeyOf(const ReduceKernel& k, const ReduceLayout& layout) {
  KeyHasher h;
  h.Add(0x7265647563650000ull);  // "reduce": never equal to a pointwise kernel's key
  h.AddString(k.name);
  h.Add(k.operands.size());
  for (size_t i = 0; i < k.operands.size(); ++i) h.Add(uint64_t(k.operands[i].dtype) | uint64_t(k.scalar[i]) << 8);
  h.Add(uint64_t(k.reduce) | uint64_t(k.acc) << 8 | uint64_t(uint32_t(k.index_input)) << 16);
  h.Add(uint64_t(layout.row) | uint64_t(layout.bx) << 8 | uint64_t(layout.by) << 20 | uint64_t(layout.vector) << 32 |
        uint64_t(layout.out_ndim) << 40 | uint64_t(layout.red_ndim) << 48 | uint64_t(layout.index32) << 56);
  if (k.pre) h.AddExpr(*k.pre);
  if (k.post) h.AddExpr(*k.post);
  return PointwiseKey{h.a, h.b};
}

std::string ReduceLLVMIR(const ReduceKernel& k, const ReduceLayout& layout) {
  std::unique_ptr<llvm::TargetMachine> tm = MakeNVPTXTargetMachine();
  llvm::LLVMContext ctx;
  return ModuleLLVMIR(*BuildOptimised(ctx, *tm, k, layout));
}

std::string ReducePTX(const ReduceKernel& k, const ReduceLayout& layout) {
  std::unique_ptr<llvm::TargetMachine> tm = MakeNVPTXTargetMachine();
  llvm::LLVMContext ctx;
  return ModulePTX(*BuildOptimised(ctx, *tm, k, layout), *tm);
}

}  // namespace kiln::codegen
