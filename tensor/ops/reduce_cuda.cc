// tensor/ops/reduce_cuda.cc: the reductions as generated CUDA kernels (tensor/cuda/reduce.h): each
// is an accumulator dtype, a combine, what an element contributes and what the output is made of;
// softmax and log_softmax (and their backward) as row reductions followed by a pointwise kernel
// (layer_norm and batch_norm: norm_cuda.cc).
#include "tensor/ops/reduce_cuda.h"

#include <cmath>
#include <functional>
#include <tuple>

#include "runtime/cuda/device_errors.h"
#include "runtime/cuda/module.h"
#include "runtime/cuda/stream.h"
#include "tensor/cuda/embedded_kernels.h"
#include "tensor/cuda/kernels/loss_args.h"
#include "tensor/cuda/kernels/row_args.h"
#include "tensor/cuda/reduce.h"
#include "tensor/empty.h"
#include "tensor/ops/common.h"

namespace kiln {
namespace {

using codegen::DType;
using codegen::Expr;
using codegen::ReduceKind;
using IR = codegen::ExprPtr;

}  // namespace

void SumCUDA(const Tensor& input, const std::vector<bool>& mask, const Tensor& out, double scale) {
  if (IsComplex(input.dtype())) {  // the (real, imag) halves summed as reals (Note [Complex on CUDA])
    std::vector<bool> pairs_mask = mask;
    pairs_mask.push_back(false);
    return SumCUDA(CallOp<Tensor>(KILN_OP("aten::view_as_real"), input), pairs_mask,
                   CallOp<Tensor>(KILN_OP("aten::view_as_real"), out), scale);
  }
  const char* name = scale != 1.0 ? "mean" : "sum";
  DType acc = cuda::AccumulatorOf(input.dtype(), name);
  IR pre = Expr::Cast(cuda::ReduceInput(0, ReduceKind::kSum), acc);
  std::vector<cuda::PointwiseInput> inputs = {cuda::PointwiseInput::Of(input)};
  IR post = Expr::Acc(0);
  if (scale != 1.0) {  // PyTorch's MeanOps: the sum times 1/n in the accumulator's type
    inputs.push_back(cuda::PointwiseInput::Number(Scalar(scale), acc == DType::F64 ? ScalarType::Float64 : ScalarType::Float32));
    post = Expr::Op(codegen::OpCode::kMul, {post, cuda::ReduceInput(1, ReduceKind::kSum)});
  }
  cuda::LaunchReduce(cuda::ReduceOp{name, ReduceKind::kSum, acc, pre, post}, out, nullptr, inputs, input.sizes(), mask);
}

void VarMeanCUDA(const Tensor& input, const std::vector<bool>& mask, double correction, bool take_sqrt,
                 const Tensor& var, const Tensor* mean) {
  const char* name = take_sqrt ? "std" : "var";
  const DType acc = cuda::AccumulatorOf(input.dtype(), name);
  DimVector keep = input.sizes();
  int64_t n = 1;
  for (size_t d = 0; d < mask.size(); ++d) {
    if (!mask[d]) continue;
    n *= keep[d];
    keep[d] = 1;
  }
  Tensor mu = EmptyTensor(keep, cuda::AccScalarType(acc), input.device());
  SumCUDA(input, mask, mu, 1.0 / static_cast<double>(n));  // no elements: NaN, as 0 / 0
  auto in = [](int i) { return cuda::ReduceInput(i, ReduceKind::kSum); };
  const IR centred = Expr::Op(codegen::OpCode::kSub, {Expr::Cast(in(0), acc), in(1)});
  IR post = Expr::Op(codegen::OpCode::kMul, {Expr::Acc(0), in(2)});
  if (take_sqrt) post = Expr::Op(codegen::OpCode::kSqrt, {post});
  const double divisor = std::max(static_cast<double>(n) - correction, 0.0);  // 0: inf or NaN, as PyTorch's
  cuda::LaunchReduce(cuda::ReduceOp{name, ReduceKind::kSum, acc, Expr::Op(codegen::OpCode::kMul, {centred, centred}), post},
                     var, nullptr,
                     {cuda::PointwiseInput::Of(input), cuda::PointwiseInput::Of(mu),
                      cuda::PointwiseInput::Number(Scalar(1.0 / divisor), cuda::AccScalarType(acc))},
                     input.sizes(), mask);
  if (mean) {
    Tensor m = *mean;
    const DimVector sizes = mean->sizes();
    ops::copy_(m, ops::reshape(mu, std::vector<SymInt>(sizes.begin(), sizes.end())));
  }
}

void ProdCUDA(const Tensor& input, const std::vector<bool>& mask, const Tensor& out) {
  DType acc = cuda::AccumulatorOf(input.dtype(), "prod");
  IR pre = Expr::Cast(cuda::ReduceInput(0, ReduceKind::kProd), acc);
  cuda::LaunchReduce(cuda::ReduceOp{"prod", ReduceKind::kProd, acc, pre, Expr::Acc(0)}, out, nullptr,
                     {cuda::PointwiseInput::Of(input)}, input.sizes(), mask);
}

void MinMaxCUDA(bool max, const Tensor& input, const std::vector<bool>& mask, const Tensor* values,
                const Tensor* indices) {
  const char* name = indices ? (max ? "argmax" : "argmin") : (max ? "amax" : "amin");
  const ReduceKind kind = indices ? (max ? ReduceKind::kArgmax : ReduceKind::kArgmin)
                                  : (max ? ReduceKind::kMax : ReduceKind::kMin);
  DType acc = cuda::AccumulatorOf(input.dtype(), name);
  IR pre = Expr::Cast(cuda::ReduceInput(0, kind), acc);
  // the value output is the input's dtype; argmax alone writes its values into a scratch tensor
  Tensor scratch = values ? Tensor() : EmptyLike(*indices, input.dtype());
  cuda::LaunchReduce(cuda::ReduceOp{name, kind, acc, pre, Expr::Acc(0)}, values ? *values : scratch, indices,
                     {cuda::PointwiseInput::Of(input)}, input.sizes(), mask);
}

void VectorNormCUDA(const Tensor& input, double p, const std::vector<bool>& mask, const Tensor& out) {
  const char* name = "linalg_vector_norm";
  const DType acc = cuda::AccumulatorOf(input.dtype(), name);
  const bool extreme = std::isinf(p);
  const ReduceKind kind = !extreme ? ReduceKind::kSum : p > 0 ? ReduceKind::kMax : ReduceKind::kMin;
  IR x = Expr::Cast(cuda::ReduceInput(0, kind), acc);
  IR ax = Expr::Op(codegen::OpCode::kAbs, {x});
  std::vector<cuda::PointwiseInput> inputs = {cuda::PointwiseInput::Of(input)};
  IR pre = ax, post = Expr::Acc(0);
  if (p == 0) {
    pre = Expr::Cast(Expr::Op(codegen::OpCode::kNe, {x, Expr::Const(0.0, acc)}), acc);
  } else if (p == 2) {
    pre = Expr::Op(codegen::OpCode::kMul, {x, x});
    post = Expr::Op(codegen::OpCode::kSqrt, {post});
  } else if (!extreme && p != 1) {  // the exponents as number inputs: one kernel serves every p
    const ScalarType t = acc == DType::F64 ? ScalarType::Float64 : ScalarType::Float32;
    inputs.push_back(cuda::PointwiseInput::Number(Scalar(p), t));
    inputs.push_back(cuda::PointwiseInput::Number(Scalar(1.0 / p), t));
    pre = Expr::Op(codegen::OpCode::kPow, {ax, cuda::ReduceInput(1, kind)});
    post = Expr::Op(codegen::OpCode::kPow, {post, cuda::ReduceInput(2, kind)});
  }
  cuda::LaunchReduce(cuda::ReduceOp{name, kind, acc, pre, post}, out, nullptr, inputs, input.sizes(), mask);
}

void LogicalCUDA(LogicalReduce kind, const Tensor& input, const std::vector<bool>& mask, const Tensor& out) {
  const char* name = kind == LogicalReduce::kAny ? "any" : kind == LogicalReduce::kAll ? "all" : "count_nonzero";
  // counts of nonzero (all: of zero) elements, so an empty reduction is 0 and needs no special case
  IR x = cuda::ReduceInput(0, ReduceKind::kSum);
  cuda::CodegenDType(input.dtype(), name);  // complex: NotImplementedError naming the op
  IR zero = Expr::ConstInt(0, DType::I64);
  IR counted = Expr::Op(kind == LogicalReduce::kAll ? codegen::OpCode::kEq : codegen::OpCode::kNe, {x, zero});
  IR pre = Expr::Cast(counted, DType::I64);
  IR post = Expr::Acc(0);
  if (kind == LogicalReduce::kAny) post = Expr::Op(codegen::OpCode::kGt, {post, zero});
  if (kind == LogicalReduce::kAll) post = Expr::Op(codegen::OpCode::kEq, {post, zero});
  cuda::LaunchReduce(cuda::ReduceOp{name, ReduceKind::kSum, DType::I64, pre, post}, out, nullptr,
                     {cuda::PointwiseInput::Of(input)}, input.sizes(), mask);
}

namespace {

// `t`'s sizes with `dim` reduced to 1, and the mask that reduces it.
std::pair<DimVector, std::vector<bool>> RowOf(const Tensor& t, int64_t dim) {
  DimVector keep = t.sizes();
  std::vector<bool> mask(t.dim(), false);
  if (t.dim() > 0) {
    keep[dim] = 1;
    mask[dim] = true;
  }
  return {keep, mask};
}

// A row statistic of `inputs` over the dims of `mask` (kept as 1s), in `acc`.
Tensor RowReduce(const char* name, ReduceKind kind, DType acc, const IR& pre, const std::vector<cuda::PointwiseInput>& inputs,
                 const DimVector& shape, const DimVector& keep, const std::vector<bool>& mask, Device device) {
  Tensor out = EmptyTensor(keep, cuda::AccScalarType(acc), device);
  cuda::LaunchReduce(cuda::ReduceOp{name, kind, acc, pre, Expr::Acc(0)}, out, nullptr, inputs, shape, mask);
  return out;
}

// Note [One-pass softmax]: rows of up to 8192 contiguous elements (4096 for float64; the last dim
// of contiguous tensors) run softmax.cu's kernels, which keep each row in registers and so read it
// once; the others take the generic reductions below (a max pass, a sum pass, a pointwise pass).
bool OnePassSoftmax(const std::vector<const Tensor*>& tensors, int64_t dim) {
  const Tensor& first = *tensors[0];
  if (dim != first.dim() - 1 || !cuda::RowKernelFits(first.dtype(), first.size(dim))) return false;
  for (const Tensor* t : tensors) {
    if (!t->is_contiguous() || !IsFloating(t->dtype())) return false;
  }
  const ScalarType in = first.dtype(), out = tensors.back()->dtype();  // softmax.cu's pairs:
  return in == out || (out == ScalarType::Float32 && IsReducedFloat(in)) ||  // half_to_float
         (in == ScalarType::Float32 && IsReducedFloat(out));                 // and its backward
}

void LaunchOnePassSoftmax(const char* kernel, const Tensor& x, const Tensor* y, const Tensor& out, bool log) {
  const int64_t n = x.size(-1);
  SoftmaxArgs a{x.raw_data(), y ? y->raw_data() : nullptr, out.raw_data(), x.numel() / n, n, log};
  const bool vec = cuda::RowKernelVectorizable(n, {&x, y, &out});
  const std::string name = StrCat("kiln_softmax_", kernel, "_", cuda::KernelSuffix(x.dtype()), "_",
                                  cuda::KernelSuffix(out.dtype()), vec ? "_vec" : "");
  const int device = out.device().index;
  std::vector<void*> args = {&a};
  cuda::LaunchRowKernel(cuda::EmbeddedKernel(cuda::SoftmaxKernels(), device, name.c_str(), log ? "log_softmax" : "softmax"),
                   device, a.rows, n, args);
}

}  // namespace

void SoftmaxCUDA(bool log, const Tensor& input, int64_t dim, const Tensor& out) {
  const char* name = log ? "log_softmax" : "softmax";
  if (OnePassSoftmax({&input, &out}, dim)) {  // Note [One-pass softmax]
    LaunchOnePassSoftmax("forward", input, nullptr, out, log);
    return;
  }
  DType acc = cuda::AccumulatorOf(input.dtype(), name);
  auto [keep, mask] = RowOf(input, dim);
  const DimVector shape = input.sizes();
  auto x = [&](ReduceKind kind) { return Expr::Cast(cuda::ReduceInput(0, kind), acc); };
  Tensor max = RowReduce("softmax_max", ReduceKind::kMax, acc, x(ReduceKind::kMax), {cuda::PointwiseInput::Of(input)},
                         shape, keep, mask, input.device());
  IR shifted = Expr::Op(codegen::OpCode::kSub, {x(ReduceKind::kSum), cuda::ReduceInput(1, ReduceKind::kSum)});
  Tensor sum = RowReduce("softmax_sum", ReduceKind::kSum, acc, Expr::Op(codegen::OpCode::kExp, {shifted}),
                         {cuda::PointwiseInput::Of(input), cuda::PointwiseInput::Of(max)}, shape, keep, mask,
                         input.device());
  IR xi = Expr::Cast(cuda::Input(0), acc), mi = cuda::Input(1), si = cuda::Input(2);
  // (x - max) - log(sum), the CPU kernels' (and PyTorch's) order
  IR value = log ? Expr::Op(codegen::OpCode::kSub, {Expr::Op(codegen::OpCode::kSub, {xi, mi}), Expr::Op(codegen::OpCode::kLog, {si})})
                 : Expr::Op(codegen::OpCode::kDiv, {Expr::Op(codegen::OpCode::kExp, {Expr::Op(codegen::OpCode::kSub, {xi, mi})}), si});
  cuda::LaunchPointwise(name, out,
                        {cuda::PointwiseInput::Of(input), cuda::PointwiseInput::Of(max), cuda::PointwiseInput::Of(sum)},
                        value);
}

void SoftmaxBackwardCUDA(bool log, const Tensor& grad, const Tensor& output, int64_t dim, const Tensor& out) {
  const char* name = log ? "log_softmax_backward" : "softmax_backward";
  if (OnePassSoftmax({&grad, &output, &out}, dim)) {  // Note [One-pass softmax]
    LaunchOnePassSoftmax("backward", grad, &output, out, log);
    return;
  }
  DType acc = cuda::AccumulatorOf(grad.dtype(), name);
  auto [keep, mask] = RowOf(grad, dim);
  const DimVector shape = grad.sizes();
  IR g = Expr::Cast(cuda::ReduceInput(0, ReduceKind::kSum), acc);
  IR y = Expr::Cast(cuda::ReduceInput(1, ReduceKind::kSum), acc);
  Tensor sum = RowReduce(log ? "log_softmax_backward_sum" : "softmax_backward_sum", ReduceKind::kSum, acc,
                         log ? g : Expr::Op(codegen::OpCode::kMul, {g, y}),
                         {cuda::PointwiseInput::Of(grad), cuda::PointwiseInput::Of(output)}, shape, keep, mask,
                         grad.device());
  IR gi = Expr::Cast(cuda::Input(0), acc), yi = Expr::Cast(cuda::Input(1), acc), si = cuda::Input(2);
  IR value = log ? Expr::Op(codegen::OpCode::kSub, {gi, Expr::Op(codegen::OpCode::kMul, {Expr::Op(codegen::OpCode::kExp, {yi}), si})})
                 : Expr::Op(codegen::OpCode::kMul, {yi, Expr::Op(codegen::OpCode::kSub, {gi, si})});
  cuda::LaunchPointwise(name, out,
                        {cuda::PointwiseInput::Of(grad), cuda::PointwiseInput::Of(output), cuda::PointwiseInput::Of(sum)},
                        value);
}

namespace {

// [0, 1, ..., C - 1] on `device` (the class index each column of a [B, C] input compares with).
Tensor ClassIndices(int64_t classes, Device device) {
  Tensor host = EmptyTensor(DimVector{classes}, ScalarType::Int64, Device(DeviceType::CPU));
  int64_t* p = host.data_ptr<int64_t>();
  for (int64_t c = 0; c < classes; ++c) p[c] = c;
  return CopyToDevice(host, device);
}

// Whether (cls == t and t != ignore): the element is a counted sample's target class.
IR IsTarget(const IR& cls, const IR& t, const IR& ignore) {
  return Expr::Op(codegen::OpCode::kLogicalAnd, {Expr::Op(codegen::OpCode::kEq, {cls, t}), Expr::Op(codegen::OpCode::kNe, {t, ignore})});
}

}  // namespace

void NllLossForwardCUDA(const Tensor& x, const Tensor& target, const Tensor* weight, int64_t reduction,
                        int64_t ignore_index, const Tensor& out, const Tensor& total_weight) {
  const int device = x.device().index;
  const char* name = "nll_loss_forward";
  const char* suffix = cuda::KernelSuffix(x.dtype());
  KILN_CHECK_NOT_IMPLEMENTED(IsFloating(x.dtype()), "\"", name, "\" not implemented for '",
                             ScalarTypeDisplayName(x.dtype()), "'");
  const bool per_sample = reduction == 0 && x.dim() == 2;
  const Tensor w = weight ? ops::contiguous(*weight) : Tensor();
  NllArgs a{};
  a.x = x.raw_data();
  a.x_batch_stride = x.dim() == 2 ? x.stride(0) : 0;
  a.x_class_stride = x.stride(-1);
  a.target = target.raw_data();
  a.target_stride = target.dim() == 1 ? target.stride(0) : 0;
  a.weight = weight ? w.raw_data() : nullptr;
  a.batch = x.dim() == 2 ? x.size(0) : 1;
  a.classes = x.size(-1);
  a.ignore_index = ignore_index;
  a.out = out.raw_data();
  a.out_stride = per_sample ? out.stride(0) : 0;
  a.total_weight = per_sample ? nullptr : total_weight.raw_data();
  a.reduction = per_sample ? 0 : (reduction == 1 ? 1 : 2);
  a.error_word = cuda::DeviceErrorWord(device);
  static const int32_t kBadTarget = cuda::DeviceErrorCode(KILN_DEVICE_ERROR_INDEX, "Target {} is out of bounds.");
  a.error_code = kBadTarget;
  cuda::CUfunction fn = cuda::EmbeddedKernel(
      cuda::LossKernels(), device,
      StrCat("kiln_nll_loss_", suffix, target.dtype() == ScalarType::UInt8 ? "_u8" : "_i64").c_str(), name);
  std::vector<void*> args = {&a};
  if (per_sample) {  // PyTorch leaves total_weight at 0 for an unreduced batch
    Tensor total = total_weight;
    ops::fill_(total, Scalar(int64_t(0)));
    cuda::LaunchGrid(fn, device, a.batch, args);
  } else {
    cuda::Launch(fn, 1, kNllThreads, 0, cuda::CurrentStream(device), args);
  }
}

void NllLossBackwardCUDA(const Tensor& grad, const Tensor& target, const Tensor* weight, int64_t reduction,
                         int64_t ignore_index, const Tensor& total_weight, const Tensor& grad_input) {
  const int64_t classes = grad_input.size(-1), batch = grad_input.dim() == 1 ? 1 : grad_input.size(0);
  const Tensor out2 = ops::reshape(grad_input, {SymInt(batch), SymInt(classes)});
  const Tensor t2 = ops::reshape(target, {SymInt(batch), SymInt(1)});
  const bool unreduced = reduction == 0 && grad.dim() > 0 && grad.numel() == batch;
  const Tensor g2 = unreduced ? ops::reshape(grad, {SymInt(batch), SymInt(1)}) : grad;
  DType acc = cuda::AccumulatorOf(grad_input.dtype(), "nll_loss_backward");
  const Tensor cls = ClassIndices(classes, grad_input.device());  // named: PointwiseInput holds a pointer
  // inputs: 0 grad, 1 target, 2 class index, 3 ignore_index, 4 total_weight, [5 weight]
  std::vector<cuda::PointwiseInput> inputs = {cuda::PointwiseInput::Of(g2), cuda::PointwiseInput::Of(t2),
                                              cuda::PointwiseInput::Of(cls),
                                              cuda::PointwiseInput::Number(Scalar(ignore_index), ScalarType::Int64),
                                              cuda::PointwiseInput::Of(total_weight)};
  if (weight) inputs.push_back(cuda::PointwiseInput::Of(*weight));
  IR g = Expr::Cast(cuda::Input(0), acc);
  if (reduction == 1) g = Expr::Op(codegen::OpCode::kDiv, {g, Expr::Cast(cuda::Input(4), acc)});
  IR w = weight ? Expr::Cast(cuda::Input(5), acc) : Expr::Const(1.0, acc);
  IR value = Expr::Op(codegen::OpCode::kWhere, {IsTarget(cuda::Input(2), cuda::Input(1), cuda::Input(3)),
                                          Expr::Op(codegen::OpCode::kNeg, {Expr::Op(codegen::OpCode::kMul, {g, w})}),
                                          Expr::Const(0.0, acc)});
  cuda::LaunchPointwise("nll_loss_backward", out2, inputs, value);
}

}  // namespace kiln
