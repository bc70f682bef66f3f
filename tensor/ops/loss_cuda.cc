// tensor/ops/loss_cuda.cc: the pointwise losses (mse, smooth_l1, huber, binary cross entropy) and
// their gradients on CUDA, each one generated kernel (tensor/cuda/pointwise.h) whose element function
// follows PyTorch's CUDA kernel for the op; the reductions (mean, sum) are the callers'.
#include "tensor/ops/loss_cuda.h"

#include "tensor/cuda/pointwise.h"
#include "tensor/cuda/reduce.h"
#include "tensor/ops/common.h"
#include "tensor/ops/reduce_cuda.h"

namespace kiln {
namespace {

using codegen::DType;
using codegen::Expr;
using codegen::OpCode;
using IR = codegen::ExprPtr;

// Arithmetic "on the dtype" as PyTorch's CUDA kernels do it on scalar_t: computed in the opmath
// type, each result rounded to the element type (a no-op but for 16-bit floats).
struct OnDtype {
  DType elem, math;
  IR R(const IR& v) const { return elem == math ? v : Expr::Cast(Expr::Cast(v, elem), math); }
  IR Add(const IR& a, const IR& b) const { return R(Expr::Op(OpCode::kAdd, {a, b})); }
  IR Sub(const IR& a, const IR& b) const { return R(Expr::Op(OpCode::kSub, {a, b})); }
  IR Mul(const IR& a, const IR& b) const { return R(Expr::Op(OpCode::kMul, {a, b})); }
  IR Div(const IR& a, const IR& b) const { return R(Expr::Op(OpCode::kDiv, {a, b})); }
  IR Const(double v) const { return R(Expr::Const(v, math)); }
};

OnDtype For(ScalarType t, const char* op) { return OnDtype{cuda::CodegenDType(t, op), cuda::OpmathDType(t, op)}; }

const char* LossName(PwLoss kind, bool backward) {
  static const char* const kNames[2][3] = {{"mse_loss", "smooth_l1_loss", "huber_loss"},
                                           {"mse_loss_backward", "smooth_l1_loss_backward", "huber_loss_backward"}};
  return kNames[backward][static_cast<int>(kind)];
}

}  // namespace

void PointwiseLossCUDA(PwLoss kind, const Tensor& loss, const Tensor& x, const Tensor& y, double param) {
  const char* name = LossName(kind, false);
  const ScalarType t = loss.dtype();
  const OnDtype d = For(t, name);
  // inputs: 0 x, 1 y, 2 the parameter (as the dtype)
  const IR diff = d.Sub(cuda::OpmathInput(0, t, name), cuda::OpmathInput(1, t, name));
  const IR p = cuda::InputAsElement(2, t, name), z = Expr::Op(OpCode::kAbs, {diff}), half = d.Const(0.5);
  IR value = d.Mul(diff, diff);
  if (kind == PwLoss::kSmoothL1) {
    value = Expr::Op(OpCode::kWhere, {Expr::Op(OpCode::kLt, {z, p}), d.Div(d.Mul(d.Mul(half, z), z), p), d.Sub(z, d.Mul(half, p))});
  } else if (kind == PwLoss::kHuber) {
    value = Expr::Op(OpCode::kWhere, {Expr::Op(OpCode::kLt, {z, p}), d.Mul(d.Mul(half, z), z), d.Mul(p, d.Sub(z, d.Mul(half, p)))});
  }
  cuda::LaunchPointwise(name, loss,
                        {cuda::PointwiseInput::Of(x), cuda::PointwiseInput::Of(y), cuda::PointwiseInput::Number(Scalar(param), t)},
                        value);
}

void PointwiseLossBackwardCUDA(PwLoss kind, const Tensor& out, const Tensor& x, const Tensor& y,
                               const Tensor& g, double norm, double param) {
  const char* name = LossName(kind, true);
  const ScalarType t = x.dtype();
  const OnDtype d = For(t, name);
  // inputs: 0 x, 1 y, 2 grad, 3 norm, 4 the parameter (both as the dtype)
  const IR diff = d.Sub(cuda::OpmathInput(0, t, name), cuda::OpmathInput(1, t, name));
  const IR grad = cuda::OpmathInput(2, t, name), n = cuda::InputAsElement(3, t, name);
  const IR p = cuda::InputAsElement(4, t, name);
  auto neg = [&](const IR& v) { return Expr::Op(OpCode::kNeg, {v}); };
  IR value = d.Mul(d.Mul(n, diff), grad);
  if (kind == PwLoss::kSmoothL1) {
    value = Expr::Op(OpCode::kWhere, {Expr::Op(OpCode::kLt, {diff, neg(p)}), d.Mul(neg(n), grad),
                                Expr::Op(OpCode::kWhere, {Expr::Op(OpCode::kGt, {diff, p}), d.Mul(n, grad),
                                                    d.Div(d.Mul(d.Mul(n, diff), grad), p)})});
  } else if (kind == PwLoss::kHuber) {
    value = Expr::Op(OpCode::kWhere, {Expr::Op(OpCode::kLt, {diff, neg(p)}), d.Mul(d.Mul(neg(n), grad), p),
                                Expr::Op(OpCode::kWhere, {Expr::Op(OpCode::kGt, {diff, p}), d.Mul(d.Mul(n, grad), p),
                                                    d.Mul(d.Mul(n, diff), grad)})});
  }
  cuda::LaunchPointwise(name, out,
                        {cuda::PointwiseInput::Of(x), cuda::PointwiseInput::Of(y), cuda::PointwiseInput::Of(g),
                         cuda::PointwiseInput::Number(Scalar(norm), t), cuda::PointwiseInput::Number(Scalar(param), t)},
                        value);
}

void BceCUDA(bool logits, const Tensor& loss, const Tensor& x, const Tensor& y, const Tensor* weight,
             const Tensor* pos_weight) {
  const char* name = logits ? "binary_cross_entropy_with_logits" : "binary_cross_entropy";
  const ScalarType t = loss.dtype();
  const DType m = cuda::OpmathDType(t, name);
  if (!logits) {  // PyTorch's CUDA kernel asserts on the device; kiln checks first, as its CPU kernel
    Tensor bad = EmptyTensor(DimVector{}, ScalarType::Bool, x.device());
    const IR v = cuda::ReduceInput(0, codegen::ReduceKind::kSum);
    const IR inside = Expr::Op(OpCode::kLogicalAnd, {Expr::Op(OpCode::kGe, {v, Expr::Const(0.0, cuda::CodegenDType(t, name))}),
                                               Expr::Op(OpCode::kLe, {v, Expr::Const(1.0, cuda::CodegenDType(t, name))})});
    cuda::LaunchReduce(cuda::ReduceOp{name, codegen::ReduceKind::kSum, DType::I64,
                                      Expr::Cast(Expr::Op(OpCode::kLogicalNot, {inside}), DType::I64),
                                      Expr::Op(OpCode::kGt, {Expr::Acc(0), Expr::ConstInt(0, DType::I64)})},
                       bad, nullptr, {cuda::PointwiseInput::Of(x)}, x.sizes(), std::vector<bool>(x.dim(), true));
    KILN_CHECK(!ItemScalar(name, bad).to_bool(), "all elements of input should be between 0 and 1");
  }
  // inputs: 0 x, 1 y, 2 weight, 3 pos_weight (absent: the number 1)
  std::vector<cuda::PointwiseInput> inputs = {cuda::PointwiseInput::Of(x), cuda::PointwiseInput::Of(y)};
  for (const Tensor* w : {weight, pos_weight}) {
    inputs.push_back(w ? cuda::PointwiseInput::Of(*w) : cuda::PointwiseInput::Number(Scalar(1.0), t));
  }
  const IR xv = cuda::OpmathInput(0, t, name), yv = cuda::OpmathInput(1, t, name), w = cuda::OpmathInput(2, t, name);
  const IR one = Expr::Const(1.0, m), zero = Expr::Const(0.0, m);
  IR value;
  if (logits) {  // log_sigmoid(x) = min(x, 0) - log1p(exp(-|x|))
    const IR log_sig = Expr::Op(OpCode::kSub, {Expr::Op(OpCode::kMin, {xv, zero}),
                                         Expr::Op(OpCode::kLog1p, {Expr::Op(OpCode::kExp, {Expr::Op(OpCode::kNeg, {Expr::Op(OpCode::kAbs, {xv})})})})});
    const IR log_weight = Expr::Op(OpCode::kAdd, {Expr::Op(OpCode::kMul, {Expr::Op(OpCode::kSub, {cuda::OpmathInput(3, t, name), one}), yv}), one});
    value = Expr::Op(OpCode::kMul, {Expr::Op(OpCode::kSub, {Expr::Op(OpCode::kMul, {Expr::Op(OpCode::kSub, {one, yv}), xv}),
                                                Expr::Op(OpCode::kMul, {log_weight, log_sig})}),
                              w});
  } else {
    const IR floor = Expr::Const(-100.0, m);
    const IR log_x = Expr::Op(OpCode::kMax, {Expr::Op(OpCode::kLog, {xv}), floor});
    const IR log_1mx = Expr::Op(OpCode::kMax, {Expr::Op(OpCode::kLog1p, {Expr::Op(OpCode::kNeg, {xv})}), floor});
    value = Expr::Op(OpCode::kNeg, {Expr::Op(OpCode::kMul, {w, Expr::Op(OpCode::kAdd, {Expr::Op(OpCode::kMul, {yv, log_x}),
                                                                     Expr::Op(OpCode::kMul, {Expr::Op(OpCode::kSub, {one, yv}), log_1mx})})})});
  }
  cuda::LaunchPointwise(name, loss, inputs, value);
}

void BceBackwardCUDA(const Tensor& out, const Tensor& g, const Tensor& x, const Tensor& y, const Tensor* weight,
                     double scale) {
  const char* name = "binary_cross_entropy_backward";
  const ScalarType t = out.dtype();
  const DType m = cuda::OpmathDType(t, name);
  // inputs: 0 grad, 1 x, 2 y, 3 weight (absent: 1), 4 scale
  std::vector<cuda::PointwiseInput> inputs = {cuda::PointwiseInput::Of(g), cuda::PointwiseInput::Of(x),
                                              cuda::PointwiseInput::Of(y),
                                              weight ? cuda::PointwiseInput::Of(*weight)
                                                     : cuda::PointwiseInput::Number(Scalar(1.0), t),
                                              cuda::PointwiseInput::Number(Scalar(scale), t)};
  const IR xv = cuda::OpmathInput(1, t, name);
  const IR denom = Expr::Op(OpCode::kMax, {Expr::Op(OpCode::kMul, {Expr::Op(OpCode::kSub, {Expr::Const(1.0, m), xv}), xv}),
                                     Expr::Const(1e-12, m)});
  IR value = Expr::Op(OpCode::kDiv, {Expr::Op(OpCode::kMul, {cuda::OpmathInput(0, t, name), Expr::Op(OpCode::kSub, {xv, cuda::OpmathInput(2, t, name)})}),
                               denom});
  value = Expr::Op(OpCode::kMul, {Expr::Op(OpCode::kMul, {value, cuda::OpmathInput(3, t, name)}), cuda::OpmathInput(4, t, name)});
  cuda::LaunchPointwise(name, out, inputs, value);
}

}  // namespace kiln
