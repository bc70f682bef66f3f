// tensor/cuda/pointwise.cc: LaunchPointwise (pointwise.h): layout and launch.
//
// Kernels are generated and compiled once per device and kept (Note [Generated kernel cache] in
// generated_kernels.cc).
#include "tensor/cuda/pointwise.h"

#include <algorithm>
#include <climits>

#include "codegen/nvptx_codegen.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/module.h"
#include "runtime/cuda/stream.h"
#include "runtime/error.h"
#include "tensor/cuda/generated_kernels.h"
#include "tensor/ops/common.h"

namespace kiln::cuda {
namespace {

using codegen::DType;

// The output and the inputs: enough for batch_norm's backward (10); a launch's parameters (a pointer
// or number per operand, its strides per dim) stay far inside the 4 KB a kernel may take.
constexpr int kMaxOperands = 12;

}  // namespace

codegen::DType CodegenDType(ScalarType t, const char* op) {
  switch (t) {
    case ScalarType::Float32: return DType::F32;
    case ScalarType::Float64: return DType::F64;
    case ScalarType::Float16: return DType::F16;
    case ScalarType::BFloat16: return DType::BF16;
    case ScalarType::Int64: return DType::I64;
    case ScalarType::Int32: return DType::I32;
    case ScalarType::Int16: return DType::I16;
    case ScalarType::Int8: return DType::I8;
    case ScalarType::UInt8: return DType::U8;
    case ScalarType::Bool: return DType::Bool;
    default:
      throw NotImplementedError(StrCat("\"", op, "_cuda\" not implemented for '", ScalarTypeDisplayName(t), "'"));
  }
}

codegen::ExprPtr Input(int i) { return codegen::Expr::Load(1 + i, codegen::Index{}); }

codegen::DType OpmathDType(ScalarType compute, const char* op) {
  DType t = CodegenDType(compute, op);
  return t == DType::F16 || t == DType::BF16 ? DType::F32 : t;
}

codegen::ExprPtr OpmathInput(int i, ScalarType compute, const char* op) {
  return codegen::Expr::Cast(Input(i), OpmathDType(compute, op));
}

codegen::ExprPtr InputAsElement(int i, ScalarType dtype, const char* op) {
  const DType element = CodegenDType(dtype, op), opmath = OpmathDType(dtype, op);
  codegen::ExprPtr v = codegen::Expr::Cast(Input(i), opmath);
  return element == opmath ? v : codegen::Expr::Cast(codegen::Expr::Cast(v, element), opmath);
}

void LaunchPointwise(const char* name, const Tensor& out, const std::vector<PointwiseInput>& inputs,
                     const codegen::ExprPtr& expr) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const int nops = 1 + static_cast<int>(inputs.size());
  KILN_INTERNAL_ASSERT(nops <= kMaxOperands, "too many pointwise operands for ", name);
  const int device = out.device().index;

  // The operands: tensors (with broadcast element strides over out's dims) or numbers.
  codegen::PointwiseKernel k;
  k.name = name;
  k.expr = expr;
  const DimVector shape = out.sizes();
  const int nd = static_cast<int>(shape.size());
  std::vector<DimVector> strides;
  std::vector<char*> data;
  std::vector<ScalarArg> numbers(nops);
  auto add_tensor = [&](const Tensor& t, const char* role) {
    DimVector st(nd, 0);
    const int td = static_cast<int>(t.dim());
    for (int d = 0; d < td; ++d) {
      int od = nd - td + d;
      st[od] = t.size(d) == 1 && shape[od] != 1 ? 0 : t.stride(d);
    }
    strides.push_back(std::move(st));
    data.push_back(static_cast<char*>(t.raw_data()));
    k.operands.push_back({role, CodegenDType(t.dtype(), name)});
    k.scalar.push_back(false);
  };
  add_tensor(out, "out");
  for (size_t i = 0; i < inputs.size(); ++i) {
    const PointwiseInput& in = inputs[i];
    const bool number = in.tensor == nullptr || (in.tensor->device().is_cpu() && in.tensor->dim() == 0);
    if (!number) {
      CheckSameDevice(name, out, *in.tensor);
      add_tensor(*in.tensor, "in");
      continue;
    }
    Scalar value = in.tensor ? ItemScalar(name, *in.tensor) : in.value;
    DType t = CodegenDType(in.tensor ? in.tensor->dtype() : in.dtype, name);
    numbers[1 + i] = ScalarValue(value, t);
    strides.emplace_back();
    data.push_back(nullptr);
    k.operands.push_back({"number", t});
    k.scalar.push_back(true);
  }

  // Walk the dims in the output's memory order, as TensorIterator does: outermost the dim where the
  // output (then each input in turn) has the largest stride. A column-major output (x.t() + x) is
  // then written along its columns, coalesced, instead of one element per row apart.
  std::vector<int> order(nd);
  for (int d = 0; d < nd; ++d) order[d] = d;
  std::stable_sort(order.begin(), order.end(), [&](int d1, int d2) {
    for (int b = 0; b < nops; ++b) {
      if (k.scalar[b] || strides[b][d1] == strides[b][d2]) continue;
      if (strides[b][d1] == 0 || strides[b][d2] == 0) continue;  // broadcast dims say nothing of order
      return strides[b][d1] > strides[b][d2];
    }
    return false;
  });

  // Drop size-1 dims; merge dim d into the one before where every tensor operand allows it.
  DimVector merged;
  std::vector<DimVector> mstrides(nops);
  for (int d : order) {
    if (shape[d] == 1) continue;
    bool mergeable = !merged.empty();
    for (int b = 0; b < nops && mergeable; ++b)
      if (!k.scalar[b]) mergeable = mstrides[b].back() == strides[b][d] * shape[d];
    if (mergeable) {
      merged.back() *= shape[d];
      for (int b = 0; b < nops; ++b)
        if (!k.scalar[b]) mstrides[b].back() = strides[b][d];
      continue;
    }
    merged.push_back(shape[d]);
    for (int b = 0; b < nops; ++b)
      if (!k.scalar[b]) mstrides[b].push_back(strides[b][d]);
  }

  // Contiguous: at most one dim, and every tensor operand walks it with stride 1.
  codegen::PointwiseLayout layout;
  bool contiguous = merged.size() <= 1;
  for (int b = 0; b < nops && contiguous; ++b)
    if (!k.scalar[b] && !merged.empty()) contiguous = mstrides[b][0] == 1;
  if (contiguous) {
    // 16 bytes per thread for the widest operand, narrowed until every pointer is aligned to it
    int64_t widest = 1;
    for (int b = 0; b < nops; ++b)
      if (!k.scalar[b]) widest = std::max(widest, codegen::DTypeSize(k.operands[b].dtype));
    int vec = static_cast<int>(16 / widest);
    auto aligned = [&](int v) {
      for (int b = 0; b < nops; ++b)
        if (!k.scalar[b] && reinterpret_cast<uintptr_t>(data[b]) % (v * codegen::DTypeSize(k.operands[b].dtype)) != 0)
          return false;
      return true;
    };
    while (vec > 1 && !aligned(vec)) vec /= 2;
    layout.vector = vec;
  } else {
    layout.ndim = static_cast<int>(merged.size());
    int64_t reach = n;
    for (int b = 0; b < nops; ++b)
      if (!k.scalar[b]) {
        int64_t last = 0;
        for (size_t d = 0; d < merged.size(); ++d) last += (merged[d] - 1) * mstrides[b][d];
        reach = std::max(reach, last);
      }
    layout.index32 = reach <= INT32_MAX;
  }

  EnsureContext(device);
  CUfunction fn = FindOrCompileKernel(device, codegen::KeyOf(k, layout), k.name, [&] { return codegen::PointwiseSymbol(k, layout); },
                                      [&] { return codegen::PointwisePTX(k, layout); });

  // Parameters in the order codegen/nvptx_codegen.h gives.
  std::vector<void*> args;
  args.reserve(2 * nops + 2 + layout.ndim * (nops + 1));
  for (int b = 0; b < nops; ++b) args.push_back(k.scalar[b] ? static_cast<void*>(&numbers[b]) : &data[b]);
  int64_t count = n;
  args.push_back(&count);
  std::vector<int64_t> dims;
  if (layout.ndim > 0) {
    dims.reserve(layout.ndim * (nops + 3));
    for (int64_t s : merged) dims.push_back(s);
    if (layout.index32) {
      for (int64_t s : merged) dims.push_back(codegen::MakeFastDivisor(static_cast<uint32_t>(s)).magic);
      for (int64_t s : merged) dims.push_back(codegen::MakeFastDivisor(static_cast<uint32_t>(s)).shift);
    }
    for (int b = 0; b < nops; ++b)
      if (!k.scalar[b])
        for (int64_t s : mstrides[b]) dims.push_back(s);
    for (int64_t& v : dims) args.push_back(&v);
  }
  int64_t blocks = codegen::PointwiseBlocks(n, layout);
  KILN_CHECK(blocks <= INT32_MAX, "[", name, "] ", n, " elements are more than one launch covers");
  Launch(fn, static_cast<unsigned>(blocks), codegen::kPointwiseThreads, 0, CurrentStream(device), args);
}

}  // namespace kiln::cuda
