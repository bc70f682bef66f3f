// tensor/cuda/reduce.cc: LaunchReduce (reduce.h): the problem's dims, the kernel's layout, one or
// two launches.
//
// Note [Reduction layout]: the inputs are seen as [outputs..., reduced...]: the kept dims in order
// (the output is contiguous over them) and the reduced dims, size-1 dims dropped and neighbours
// merged where every input allows. The reduced dims are sorted by the first tensor input's stride
// (memory order, as TensorIterator sorts them) except for argmax/argmin, whose reported index is the
// row-major position over the reduced dims as given. Then, as PyTorch's ReduceConfig decides:
//   - row layout when the reduction is innermost in the first tensor input (or there is one output):
//     a row of bx threads per output, 16-byte loads where every input allows (stride 1, aligned
//     rows), bx sized so each thread has about kReduceLoadsInFlight loads, by rows a block;
//   - column layout otherwise (the outputs innermost): bx = 32 neighbouring outputs, coalesced, and
//     by threads of each output splitting the reduction;
//   - a split when the blocks would not fill the device (4 blocks per multiprocessor): the reduction
//     is cut into `splits` chunks of at least 16 loads a thread, each block writes a partial result
//     into a workspace [splits, outputs], and a second kernel (a column reduction over the splits,
//     or a row one for a single output) combines them and applies `post`.
#include "tensor/cuda/reduce.h"

#include <algorithm>
#include <climits>
#include <memory>

#include "runtime/cuda/driver.h"
#include "runtime/cuda/module.h"
#include "runtime/cuda/stream.h"
#include "runtime/error.h"
#include "tensor/cuda/generated_kernels.h"
#include "tensor/empty.h"
#include "tensor/ops/common.h"

namespace kiln::cuda {
namespace {

using codegen::DType;
using codegen::Expr;
using codegen::ExprPtr;
using codegen::ReduceKind;

constexpr int64_t kMinSplitLoads = 16;  // a split gives each thread at least this many loads
constexpr int64_t kMaxSplits = 1024;
constexpr int kMaxOperands = 10;

bool IsArg(ReduceKind k) { return k == ReduceKind::kArgmax || k == ReduceKind::kArgmin; }

int64_t Pow2Ceil(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}
int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// e with loads of operand b renamed to operand map[b], and ("acc", 0) replaced by `acc` if given.
ExprPtr Rewrite(const ExprPtr& e, const std::vector<int>& map, const ExprPtr& acc) {
  if (e->kind == Expr::Kind::kAcc && acc) return acc;
  if (e->kind == Expr::Kind::kLoad) {
    auto n = std::make_shared<Expr>(*e);
    n->buffer = map.at(e->buffer);
    return n;
  }
  if (e->args.empty()) return e;
  auto n = std::make_shared<Expr>(*e);
  for (ExprPtr& a : n->args) a = Rewrite(a, map, acc);
  return n;
}


// One launch's description: the kernel, its operands' data, the problem's dims and the layout.
struct ReduceLaunch {
  codegen::ReduceKernel k;
  std::vector<void*> data;          // per operand: the element pointer (tensor operands)
  std::vector<ScalarArg> numbers;   // per operand: the value (scalar operands)
  DimVector out_sizes, red_sizes;
  std::vector<DimVector> out_strides, red_strides;  // per operand (tensor inputs)
  int64_t outputs = 1, reduced = 1;
};

bool IsTensorInput(const ReduceLaunch& l, int b) { return b >= codegen::FirstReduceInput(l.k) && !l.k.scalar[b]; }

// Appends operand b's dims to the problem, merging into the last dim where every tensor input
// allows and dropping size-1 dims (the kept or reduced side per `reduced`).
void AddDim(ReduceLaunch& l, bool reduced, int64_t size, const std::vector<int64_t>& strides) {
  if (size == 1) return;
  DimVector& sizes = reduced ? l.red_sizes : l.out_sizes;
  std::vector<DimVector>& all = reduced ? l.red_strides : l.out_strides;
  const int nops = static_cast<int>(l.k.operands.size());
  bool mergeable = !sizes.empty();
  for (int b = 0; b < nops && mergeable; ++b)
    if (IsTensorInput(l, b)) mergeable = all[b].back() == strides[b] * size;
  if (mergeable) {
    sizes.back() *= size;
    for (int b = 0; b < nops; ++b)
      if (IsTensorInput(l, b)) all[b].back() = strides[b];
    return;
  }
  sizes.push_back(size);
  for (int b = 0; b < nops; ++b)
    if (IsTensorInput(l, b)) all[b].push_back(strides[b]);
}

// Empty sides become one dim of size 1 (the kernel has at least one dim each).
void Finish(ReduceLaunch& l) {
  const int nops = static_cast<int>(l.k.operands.size());
  for (auto [sizes, strides] : {std::pair{&l.out_sizes, &l.out_strides}, std::pair{&l.red_sizes, &l.red_strides}}) {
    if (!sizes->empty()) continue;
    sizes->push_back(1);
    for (int b = 0; b < nops; ++b)
      if (IsTensorInput(l, b)) (*strides)[b].push_back(0);
  }
  l.outputs = 1;
  for (int64_t s : l.out_sizes) l.outputs *= s;
  l.reduced = 1;
  for (int64_t s : l.red_sizes) l.reduced *= s;
}

struct Plan {
  codegen::ReduceLayout layout;
  int64_t blocks = 1, splits = 1, chunk = 1;
};

// Note [Reduction layout].
Plan PlanLaunch(const ReduceLaunch& l, int device, bool allow_split) {
  Plan p;
  const int nops = static_cast<int>(l.k.operands.size());
  int lead = -1;
  for (int b = 0; b < nops && lead < 0; ++b)
    if (IsTensorInput(l, b)) lead = b;
  KILN_INTERNAL_ASSERT(lead >= 0, "a reduction over numbers only: ", l.k.name);
  const int64_t red_inner = l.red_strides[lead].back(), out_inner = l.out_strides[lead].back();
  const bool row = l.outputs == 1 || red_inner == 1 || (out_inner != 1 && red_inner <= out_inner);
  p.layout.row = row;
  p.layout.out_ndim = static_cast<int>(l.out_sizes.size());
  p.layout.red_ndim = static_cast<int>(l.red_sizes.size());

  int vec = 1;
  if (row && l.red_sizes.size() == 1) {
    int64_t widest = 1;
    for (int b = 0; b < nops; ++b)
      if (IsTensorInput(l, b)) widest = std::max(widest, codegen::DTypeSize(l.k.operands[b].dtype));
    auto fits = [&](int v) {
      if (l.reduced % v != 0) return false;
      for (int b = 0; b < nops; ++b) {
        if (!IsTensorInput(l, b)) continue;
        if (l.red_strides[b][0] != 1) return false;
        for (int64_t s : l.out_strides[b])
          if (s % v != 0) return false;
        if (reinterpret_cast<uintptr_t>(l.data[b]) % (v * codegen::DTypeSize(l.k.operands[b].dtype)) != 0) return false;
      }
      return true;
    };
    vec = static_cast<int>(16 / widest);
    while (vec > 1 && !fits(vec)) vec /= 2;
  }
  p.layout.vector = vec;

  int64_t bx, by;
  if (row) {
    bx = std::clamp<int64_t>(Pow2Ceil(CeilDiv(CeilDiv(l.reduced, vec), codegen::kReduceLoadsInFlight)), 1, 512);
    by = std::min<int64_t>(std::max<int64_t>(1, 256 / bx), Pow2Ceil(l.outputs));
    if (bx * by < 32) bx = 32 / by;
  } else {
    bx = std::min<int64_t>(32, Pow2Ceil(l.outputs));
    by = std::clamp<int64_t>(Pow2Ceil(CeilDiv(l.reduced, 2 * codegen::kReduceLoadsInFlight)), 1, 512 / bx);
    if (bx * by < 32) by = 32 / bx;
  }
  p.layout.bx = static_cast<int>(bx);
  p.layout.by = static_cast<int>(by);
  const int64_t lanes = row ? bx : by;
  p.blocks = CeilDiv(l.outputs, row ? by : bx);
  p.chunk = l.reduced;
  if (allow_split) {
    const int64_t target = 4 * int64_t(GetDeviceProperties(device).multi_processor_count);
    const int64_t step = lanes * vec;
    int64_t splits = std::min({CeilDiv(target, p.blocks), CeilDiv(l.reduced, step * kMinSplitLoads), kMaxSplits});
    if (p.blocks < target && splits >= 2) {
      p.chunk = CeilDiv(CeilDiv(l.reduced, splits), vec) * vec;
      p.splits = CeilDiv(l.reduced, p.chunk);
    }
  }

  int64_t reach = std::max(l.outputs * p.splits, l.reduced);
  for (int b = 0; b < nops; ++b) {
    if (!IsTensorInput(l, b)) continue;
    int64_t last = 0;
    for (size_t d = 0; d < l.out_sizes.size(); ++d) last += (l.out_sizes[d] - 1) * l.out_strides[b][d];
    for (size_t d = 0; d < l.red_sizes.size(); ++d) last += (l.red_sizes[d] - 1) * l.red_strides[b][d];
    reach = std::max(reach, last);
  }
  p.layout.index32 = reach <= INT32_MAX;
  return p;
}

void Run(const ReduceLaunch& l, const Plan& p, int device) {
  CUfunction fn = FindOrCompileKernel(device, codegen::KeyOf(l.k, p.layout), l.k.name,
                                      [&] { return codegen::ReduceSymbol(l.k, p.layout); },
                                      [&] { return codegen::ReducePTX(l.k, p.layout); });
  const int nops = static_cast<int>(l.k.operands.size());
  std::vector<void*> data = l.data;
  std::vector<ScalarArg> numbers = l.numbers;
  std::vector<int64_t> values = {l.outputs, l.reduced, p.chunk, p.blocks};
  values.insert(values.end(), l.out_sizes.begin(), l.out_sizes.end());
  values.insert(values.end(), l.red_sizes.begin(), l.red_sizes.end());
  for (int b = 0; b < nops; ++b) {
    if (!IsTensorInput(l, b)) continue;
    values.insert(values.end(), l.out_strides[b].begin(), l.out_strides[b].end());
    values.insert(values.end(), l.red_strides[b].begin(), l.red_strides[b].end());
  }
  std::vector<void*> args;
  for (int b = 0; b < nops; ++b) args.push_back(l.k.scalar[b] ? static_cast<void*>(&numbers[b]) : &data[b]);
  for (int64_t& v : values) args.push_back(&v);
  const int64_t grid = p.blocks * p.splits;
  KILN_CHECK(grid <= INT32_MAX, "[", l.k.name, "] ", l.outputs, " outputs are more than one launch covers");
  cuda::Launch(fn, static_cast<unsigned>(grid), static_cast<unsigned>(p.layout.bx * p.layout.by), 0,
               CurrentStream(device), args);
}

}  // namespace

ExprPtr ReduceInput(int i, ReduceKind kind) { return Expr::Load((IsArg(kind) ? 2 : 1) + i, codegen::Index{}); }

void LaunchReduce(const ReduceOp& op, const Tensor& out, const Tensor* indices, const std::vector<PointwiseInput>& inputs,
                  const DimVector& shape, const std::vector<bool>& mask) {
  if (out.numel() == 0) return;
  const bool arg = IsArg(op.kind);
  KILN_INTERNAL_ASSERT(arg == (indices != nullptr), "argmax/argmin (and only they) write indices: ", op.name);
  KILN_INTERNAL_ASSERT(out.is_contiguous() && (!indices || indices->is_contiguous()), "reduction outputs are contiguous");
  const int device = out.device().index;
  const int first = arg ? 2 : 1;
  const int nd = static_cast<int>(shape.size());

  ReduceLaunch l;
  l.k.name = op.name;
  l.k.reduce = op.kind;
  l.k.acc = op.acc;
  l.k.pre = op.pre;
  l.k.post = op.post;
  l.k.operands.push_back({"out", CodegenDType(out.dtype(), op.name)});
  l.data.push_back(out.raw_data());
  if (arg) {
    l.k.operands.push_back({"indices", DType::I64});
    l.data.push_back(indices->raw_data());
  }
  l.k.scalar.assign(first, false);
  l.numbers.resize(first);
  std::vector<DimVector> strides(first);  // per operand, broadcast over `shape`
  for (const PointwiseInput& in : inputs) {
    const bool number = in.tensor == nullptr || (in.tensor->device().is_cpu() && in.tensor->dim() == 0);
    if (number) {
      Scalar value = in.tensor ? ItemScalar(op.name, *in.tensor) : in.value;
      DType t = CodegenDType(in.tensor ? in.tensor->dtype() : in.dtype, op.name);
      l.k.operands.push_back({"number", t});
      l.k.scalar.push_back(true);
      l.numbers.push_back(ScalarValue(value, t));
      l.data.push_back(nullptr);
      strides.emplace_back();
      continue;
    }
    const Tensor& t = *in.tensor;
    CheckSameDevice(op.name, out, t);
    DimVector st(nd, 0);
    for (int d = 0; d < t.dim(); ++d) {
      int od = nd - static_cast<int>(t.dim()) + d;
      st[od] = t.size(d) == 1 && shape[od] != 1 ? 0 : t.stride(d);
    }
    strides.push_back(std::move(st));
    l.k.operands.push_back({"in", CodegenDType(t.dtype(), op.name)});
    l.k.scalar.push_back(false);
    l.numbers.emplace_back();
    l.data.push_back(t.raw_data());
  }
  const int nops = static_cast<int>(l.k.operands.size());
  KILN_INTERNAL_ASSERT(nops <= kMaxOperands, "too many reduction operands for ", op.name);
  l.out_strides.resize(nops);
  l.red_strides.resize(nops);

  // Note [Reduction layout]: the kept dims in order, then the reduced dims (in memory order unless
  // an index is reported).
  std::vector<int> reduced_dims;
  for (int d = 0; d < nd; ++d) {
    if (mask[d]) {
      reduced_dims.push_back(d);
      continue;
    }
    std::vector<int64_t> s(nops, 0);
    for (int b = first; b < nops; ++b) if (!l.k.scalar[b]) s[b] = strides[b][d];
    AddDim(l, false, shape[d], s);
  }
  int lead = -1;
  for (int b = first; b < nops && lead < 0; ++b)
    if (!l.k.scalar[b]) lead = b;
  KILN_INTERNAL_ASSERT(lead >= 0, "a reduction over numbers only: ", op.name);
  if (!arg)
    std::stable_sort(reduced_dims.begin(), reduced_dims.end(),
                     [&](int a, int b) { return strides[lead][a] > strides[lead][b]; });
  int64_t reduced = 1;
  for (int d : reduced_dims) {
    reduced *= shape[d];
    std::vector<int64_t> s(nops, 0);
    for (int b = first; b < nops; ++b) if (!l.k.scalar[b]) s[b] = strides[b][d];
    AddDim(l, true, shape[d], s);
  }
  Finish(l);

  if (reduced == 0) {  // post(identity), element by element
    KILN_INTERNAL_ASSERT(op.kind == ReduceKind::kSum || op.kind == ReduceKind::kProd, op.name,
                         " has no identity for an empty reduction");
    std::vector<PointwiseInput> numbers;
    std::vector<int> map(nops, 0);
    for (int b = first; b < nops; ++b)
      if (l.k.scalar[b]) {
        map[b] = 1 + static_cast<int>(numbers.size());
        numbers.push_back(inputs[b - first]);
      }
    ExprPtr identity = op.acc == DType::I64 ? Expr::ConstInt(op.kind == ReduceKind::kSum ? 0 : 1, DType::I64)
                                            : Expr::Const(op.kind == ReduceKind::kSum ? 0.0 : 1.0, op.acc);
    LaunchPointwise(op.name, out, numbers, Rewrite(op.post, map, identity));
    return;
  }

  EnsureContext(device);
  Plan plan = PlanLaunch(l, device, /*allow_split=*/true);
  if (plan.splits == 1) return Run(l, plan, device);

  // Two passes: partial results per split into a workspace, then a reduction over the splits.
  const int64_t outputs = l.outputs;
  Tensor partial = EmptyTensor(DimVector{plan.splits * outputs}, AccScalarType(op.acc), out.device());
  Tensor partial_indices = arg ? EmptyTensor(DimVector{plan.splits * outputs}, ScalarType::Int64, out.device()) : Tensor();
  ReduceLaunch first_pass = l;
  first_pass.k.operands[0] = {"partial", op.acc};
  first_pass.k.post = Expr::Acc(0);
  first_pass.data[0] = partial.raw_data();
  if (arg) first_pass.data[1] = partial_indices.raw_data();
  Run(first_pass, plan, device);

  ReduceLaunch second;
  second.k.name = op.name;
  second.k.reduce = op.kind;
  second.k.acc = op.acc;
  second.k.operands = {l.k.operands[0]};
  second.data = {out.raw_data()};
  if (arg) {
    second.k.operands.push_back(l.k.operands[1]);
    second.data.push_back(indices->raw_data());
  }
  std::vector<int> map(nops, 0);
  const int ws = static_cast<int>(second.k.operands.size());
  second.k.operands.push_back({"partial", op.acc});
  second.data.push_back(partial.raw_data());
  if (arg) {
    second.k.operands.push_back({"partial_indices", DType::I64});
    second.data.push_back(partial_indices.raw_data());
    second.k.index_input = ws + 1;
  }
  second.k.scalar.assign(second.k.operands.size(), false);
  second.numbers.resize(second.k.operands.size());
  for (int b = first; b < nops; ++b) {
    if (!l.k.scalar[b]) continue;
    map[b] = static_cast<int>(second.k.operands.size());
    second.k.operands.push_back(l.k.operands[b]);
    second.k.scalar.push_back(true);
    second.data.push_back(nullptr);
    second.numbers.push_back(l.numbers[b]);
  }
  second.k.pre = Expr::Load(ws, codegen::Index{});
  second.k.post = Rewrite(op.post, map, nullptr);
  const int sops = static_cast<int>(second.k.operands.size());
  second.out_strides.resize(sops);
  second.red_strides.resize(sops);
  second.out_sizes = {outputs};
  second.red_sizes = {plan.splits};
  for (int b = ws; b < sops; ++b)
    if (!second.k.scalar[b]) {
      second.out_strides[b] = {1};
      second.red_strides[b] = {outputs};
    }
  second.outputs = outputs;
  second.reduced = plan.splits;
  Run(second, PlanLaunch(second, device, /*allow_split=*/false), device);
}

ScalarType AccScalarType(DType t) {
  return t == DType::F32 ? ScalarType::Float32 : t == DType::F64 ? ScalarType::Float64 : ScalarType::Int64;
}

DType AccumulatorOf(ScalarType t, const char* op) {
  DType c = codegen::ComputeDType(CodegenDType(t, op));
  return c == DType::Bool ? DType::I64 : c;
}

}  // namespace kiln::cuda
