// inductor/lowering/nn.cc: the matmul template and max pooling with indices (nn.h).
#include "inductor/lowering/nn.h"

#include "inductor/lowering/lazy.h"
#include "inductor/scheduler/fusion.h"
#include "runtime/error.h"

namespace kiln::inductor::lowering {
namespace {

using codegen::DType;
using codegen::Expr;
using codegen::ExprPtr;
using codegen::OpCode;
using ir::Affine;

// The last two of `v` (a window's height and width).
std::vector<int64_t> Last2(const std::vector<int64_t>& v) {
  KILN_CHECK_VALUE(v.size() >= 2, "inductor: max_pool2d of a value of ", v.size(), " dimensions");
  return {v[v.size() - 2], v[v.size() - 1]};
}

void CheckPool(const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
               const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation) {
  KILN_CHECK_VALUE(kernel.size() == 2 && stride.size() == 2 && padding.size() == 2 && dilation.size() == 2,
                   "inductor: max_pool2d's kernel, stride, padding and dilation take 2 values each");
  if (padding != std::vector<int64_t>{0, 0} || dilation != std::vector<int64_t>{1, 1})
    throw Fallback("max_pool2d with padding or dilation");
}

}  // namespace

std::shared_ptr<ir::Pointwise> MatmulTemplate(ScalarType dtype, const ValuePtr& a, const ValuePtr& b,
                                              const ValuePtr& bias, double beta, double alpha) {
  const DType d = ir::KernelDType(dtype);
  if (d != DType::F32 && d != DType::F64) throw Fallback(StrCat("matmul template for kiln.", ScalarTypeName(dtype)));
  KILN_CHECK_VALUE(a->shape().size() == 2 && b->shape().size() == 2, "inductor: the matmul template takes matrices");
  const int64_t m = a->shape()[0], k = a->shape()[1], n = b->shape()[1];
  std::set<std::string> ops = a->ops;
  ops.insert(b->ops.begin(), b->ops.end());
  auto red = LazyReduction(dtype, {m, n, k}, 2, "sum", With(ops, {"mm"}),
                           [&](Trace& t, const Indices& kept, const Affine& r) {
                             ExprPtr x = t.Read(a, {kept[0], r}, d);
                             return Binary(OpCode::kMul, x, t.Read(b, {r, kept[1]}, d));
                           });
  const std::vector<int64_t> shape{m, n};
  const std::set<std::string> result_ops = bias ? With(red->ops, {"addmm"}) : red->ops;
  auto result = LazyPointwise(dtype, shape, result_ops, [&](Trace& t, const Indices& idx) {
    ExprPtr value = t.Read(red, {idx[0], idx[1], Affine(0)});
    if (alpha != 1) value = Binary(OpCode::kMul, value, Expr::Const(alpha, d));
    if (bias) {
      ExprPtr term = t.Read(bias, BroadcastIndices(idx, bias->shape(), shape), d);
      value = Binary(OpCode::kAdd, value, beta == 1 ? term : Binary(OpCode::kMul, term, Expr::Const(beta, d)));
    }
    return value;
  });
  result->space = red->Space();
  return result;
}

std::pair<std::shared_ptr<ir::Pointwise>, std::shared_ptr<ir::Pointwise>> MaxPool2dWithIndices(
    GraphContext* graph, ScalarType values_dtype, std::vector<int64_t> values_shape, ScalarType indices_dtype,
    std::vector<int64_t> indices_shape, ValuePtr x, const std::vector<int64_t>& kernel,
    const std::vector<int64_t>& stride, const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation,
    bool ceil_mode) {
  CheckPool(kernel, stride, padding, dilation);
  const std::vector<int64_t> out_hw = Last2(values_shape), in_hw = Last2(x->shape());
  for (int i = 0; ceil_mode && i < 2; ++i)
    if ((out_hw[i] - 1) * stride[i] + kernel[i] > in_hw[i])  // the unrolled loads would read past the input
      throw Fallback("max_pool2d with ceil_mode windows past the input");
  if (x->kind() == ir::Value::Kind::kPointwise && !x->ops.empty() && graph != nullptr &&
      !scheduler::CheapToRecompute(*x, &graph->scheduler()->state))
    x = graph->scheduler()->Realize(x);  // read k*k times per output: computed once, not in every window
  const int64_t width = in_hw[1];
  const DType vd = ir::KernelDType(values_dtype);
  const size_t lead = x->shape().size() - 2;
  // the window's maximum and the flat index of its first maximum (a later NaN replaces an earlier one)
  auto window = [&](Trace& t, const Indices& idx) {
    const Affine oh = idx[lead], ow = idx[lead + 1];
    ExprPtr best, flat;
    for (int64_t i = 0; i < kernel[0]; ++i) {
      for (int64_t j = 0; j < kernel[1]; ++j) {
        const Affine h = oh.Scaled(stride[0]) + Affine(i), w = ow.Scaled(stride[1]) + Affine(j);
        Indices at(idx.begin(), idx.begin() + lead);
        at.push_back(h);
        at.push_back(w);
        ExprPtr v = t.Read(x, at, vd);
        ExprPtr here = ir::AffineValue(h.Scaled(width) + w);
        if (best == nullptr) {
          best = v, flat = here;
          continue;
        }
        ExprPtr take = Binary(OpCode::kLogicalOr, Binary(OpCode::kGt, v, best), Binary(OpCode::kNe, v, v));
        best = Where(take, v, best);
        flat = Where(take, here, flat);
      }
    }
    return std::make_pair(best, flat);
  };
  const std::set<std::string> ops = With(x->ops, {"max_pool2d_with_indices"});
  auto values = LazyPointwise(values_dtype, std::move(values_shape), ops,
                              [&](Trace& t, const Indices& idx) { return window(t, idx).first; });
  auto indices = LazyPointwise(indices_dtype, std::move(indices_shape), ops,
                               [&](Trace& t, const Indices& idx) { return window(t, idx).second; });
  ir::Value::MakeGroup({values, indices});
  return {values, indices};
}

std::shared_ptr<ir::Buffer> MaxPool2dWithIndicesBackward(GraphContext* graph, ScalarType dtype,
                                                         std::vector<int64_t> shape, const ValuePtr& grad,
                                                         const ValuePtr& x, const std::vector<int64_t>& kernel,
                                                         const std::vector<int64_t>& stride,
                                                         const std::vector<int64_t>& padding,
                                                         const std::vector<int64_t>& dilation,
                                                         const ValuePtr& indices) {
  CheckPool(kernel, stride, padding, dilation);
  const std::vector<int64_t> in_hw = Last2(x->shape()), out_hw = Last2(grad->shape());
  if (stride != kernel || out_hw[0] * kernel[0] != in_hw[0] || out_hw[1] * kernel[1] != in_hw[1])
    throw Fallback("max_pool2d backward with overlapping, padded or partial windows");
  if (graph == nullptr) throw Fallback("max_pool2d backward outside a graph");
  const size_t lead = x->shape().size() - 2;
  const int64_t width = in_hw[1];
  const DType gd = ir::KernelDType(dtype);
  std::vector<int64_t> tiled(x->shape().begin(), x->shape().begin() + lead);
  tiled.insert(tiled.end(), {out_hw[0], kernel[0], out_hw[1], kernel[1]});
  auto gradient = LazyPointwise(dtype, tiled, With(grad->ops, {"max_pool2d_with_indices_backward"}),
                                [&](Trace& t, const Indices& idx) {
    const Affine oh = idx[lead], i = idx[lead + 1], ow = idx[lead + 2], j = idx[lead + 3];
    Indices window(idx.begin(), idx.begin() + lead);
    window.push_back(oh);
    window.push_back(ow);
    ExprPtr here = ir::AffineValue((oh.Scaled(kernel[0]) + i).Scaled(width) + ow.Scaled(kernel[1]) + j);
    ExprPtr argmax = t.Read(indices, window, DType::I64);
    ExprPtr g = t.Read(grad, window, gd);
    return Where(Binary(OpCode::kEq, argmax, here), g, Expr::Const(0.0, gd));
  });
  std::shared_ptr<ir::Buffer> buf = graph->scheduler()->Realize(gradient);
  std::vector<int64_t> strides = ir::ContiguousStrides(shape);
  return std::make_shared<ir::Buffer>(std::nullopt, dtype, std::move(shape), std::move(strides), buf->offset(), buf);
}

}  // namespace kiln::inductor::lowering
