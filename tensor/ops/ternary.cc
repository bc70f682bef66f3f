// tensor/ops/ternary.cc: pointwise ops with bounds or three operands (clamp, clamp_min/max,
// lerp, addcmul, addcdiv), with their in-place variants.
//
// Each computes in the promoted dtype of all its operands (numbers are weak, Note [Weak Python
// numbers]) through one ElementwiseIter over (out, a, b, c); a number operand is a broadcast
// Operand, so clamp(x, 0, 1) allocates nothing for its bounds. In-place variants check that the
// result dtype can be cast to self's and that the broadcast shape is self's.
#include <cmath>

#include "tensor/cuda/pointwise.h"
#include "tensor/ops/common.h"

namespace kiln {
namespace {

// Results are laid out as their inputs (Note [Elementwise output layout], ops/common.cc).
TensorMeta SameAs(const Tensor& t, ScalarType dtype) {
  return TensorMeta{t->sym_sizes(), LayoutOfInputs(t->sym_sizes(), {&t}), dtype, t.device()};
}
TensorMeta Laid(SymDimVector shape, std::initializer_list<const Tensor*> inputs, ScalarType dtype, Device device) {
  SymDimVector strides = LayoutOfInputs(shape, inputs);
  return TensorMeta{std::move(shape), std::move(strides), dtype, device};
}

// --- clamp ---------------------------------------------------------------------------------

// A clamp bound: a tensor, a number, or absent.
struct Bound {
  const Tensor* tensor = nullptr;
  std::optional<Scalar> scalar;
  bool present() const { return tensor != nullptr || scalar.has_value(); }
};

ScalarType ClampType(const Tensor& self, const Bound& lo, const Bound& hi) {
  KILN_CHECK(lo.present() || hi.present(), "torch.clamp: At least one of 'min' or 'max' must not be None");
  ResultTypeState st;
  st.Update(self);
  for (const Bound* b : {&lo, &hi}) {
    if (b->tensor) st.Update(*b->tensor);
    else if (b->scalar) st.Update(*b->scalar);
  }
  ScalarType t = st.Result();
  // Bool clamps exist in PyTorch only with one tensor bound (clamp_min/clamp_max with a tensor);
  // scalar bounds or both tensor bounds have no kernel.
  KILN_CHECK_NOT_IMPLEMENTED(t != ScalarType::Bool || !(lo.scalar || hi.scalar || (lo.tensor && hi.tensor)), "\"",
                             lo.scalar || hi.scalar ? "clamp_scalar_cpu" : "clamp_cpu",
                             "\" not implemented for 'Bool'");
  return t;
}

SymDimVector ClampShape(const Tensor& self, const Bound& lo, const Bound& hi) {
  SymDimVector s = self->sym_sizes();
  for (const Bound* b : {&lo, &hi}) {
    if (!b->tensor) continue;
    // the result is on self's device (a CUDA bound of a CPU self was read on the host)
    CheckOperandOnSelfDevice("clamp", self, *b->tensor);
    s = BroadcastShapes("clamp", s, (*b->tensor)->sym_sizes());
  }
  return s;
}

// clamp on CUDA: the CPU loop below as kernel IR (NaN in self, then in min, then in max wins).
void ClampCUDA(const Tensor& out, const Tensor& self, const Bound& lo, const Bound& hi, ScalarType compute) {
  using codegen::OpCode;
  auto ir = [](OpCode o, std::vector<codegen::ExprPtr> a) { return codegen::Expr::Op(o, std::move(a)); };
  std::vector<cuda::PointwiseInput> inputs = {cuda::PointwiseInput::Of(self)};
  auto bound = [&](const Bound& b) {
    inputs.push_back(b.tensor ? cuda::PointwiseInput::Of(*b.tensor) : cuda::PointwiseInput::Number(*b.scalar, compute));
    return cuda::OpmathInput(static_cast<int>(inputs.size()) - 1, compute, "clamp");
  };
  codegen::ExprPtr a = cuda::OpmathInput(0, compute, "clamp"), c = a;
  codegen::ExprPtr l = lo.present() ? bound(lo) : nullptr, h = hi.present() ? bound(hi) : nullptr;
  if (l) c = ir(OpCode::kWhere, {ir(OpCode::kLt, {c, l}), l, c});
  if (h) c = ir(OpCode::kWhere, {ir(OpCode::kGt, {c, h}), h, c});
  if (h) c = ir(OpCode::kWhere, {ir(OpCode::kNe, {h, h}), h, c});
  if (l) c = ir(OpCode::kWhere, {ir(OpCode::kNe, {l, l}), l, c});
  c = ir(OpCode::kWhere, {ir(OpCode::kNe, {a, a}), a, c});
  cuda::LaunchPointwise("clamp", out, inputs, c);
}

void ClampInto(const Tensor& out, const Tensor& self, const Bound& lo, const Bound& hi, ScalarType compute) {
  if (out.numel() == 0) return;
  if (compute == ScalarType::Bool) compute = ScalarType::UInt8;  // min/max of 0/1 values, copied back
  if (out.device().is_cuda()) return ClampCUDA(out, self, lo, hi, compute);
  Tensor x = CastTo(self, compute);
  Tensor lt = lo.tensor ? CastTo(*lo.tensor, compute) : Tensor(), ht = hi.tensor ? CastTo(*hi.tensor, compute) : Tensor();
  Tensor dst = out.dtype() == compute ? out : EmptyLike(out, compute);
  const bool has_lo = lo.present(), has_hi = hi.present();
  KILN_DISPATCH_NUMERIC(compute, "clamp", [&] {
    using T = scalar_t;
    using M = opmath_t<T>;
    const T lv = lo.scalar ? lo.scalar->to<T>() : T(0), hv = hi.scalar ? hi.scalar->to<T>() : T(0);
    Operand lop = lt.defined() ? Operand(lt) : Operand::Broadcast(&lv);
    Operand hop = ht.defined() ? Operand(ht) : Operand::Broadcast(&hv);
    ElementwiseIter iter({dst, x, lop, hop});
    CpuKernel<T, T, T, T>(iter, [=](T v, T l, T h) -> T {
      M a = static_cast<M>(v);
      if (a != a) return v;  // NaN stays NaN
      if (has_lo) {
        M m = static_cast<M>(l);
        if (m != m) return l;
        if (a < m) a = m;
      }
      if (has_hi) {
        M m = static_cast<M>(h);
        if (m != m) return h;
        if (a > m) a = m;
      }
      return static_cast<T>(a);
    });
  });
  if (!dst.is_same(out)) {
    Tensor o = out;
    ops::copy_(o, dst);
  }
}

Tensor ClampImpl(const Tensor& self, const Bound& lo, const Bound& hi) {
  ScalarType t = ClampType(self, lo, hi);
  const Tensor none;
  Tensor out = EmptyFromMeta(Laid(ClampShape(self, lo, hi), {&self, lo.tensor ? lo.tensor : &none,
                                  hi.tensor ? hi.tensor : &none}, t, self.device()));
  ClampInto(out, self, lo, hi, t);
  return out;
}
Tensor ClampInplaceImpl(Tensor self, const Bound& lo, const Bound& hi, bool run) {
  ScalarType t = ClampType(self, lo, hi);
  KILN_CHECK(CanCast(t, self.dtype()), "result type ", ScalarTypeDisplayName(t),
             " can't be cast to the desired output type ", ScalarTypeDisplayName(self.dtype()));
  SymDimVector s = ClampShape(self, lo, hi);
  KILN_CHECK(s == self->sym_sizes(), "output with shape ", ShapeStr(self), " doesn't match the broadcast shape ",
             SizesToString(s));
  if (run) ClampInto(self, self, lo, hi, t);
  return self;
}
Bound SB(const std::optional<Scalar>& s) { return Bound{nullptr, s}; }
Bound TB(const std::optional<Tensor>& t) { return Bound{t && t->defined() ? &*t : nullptr, std::nullopt}; }

using OptScalar = std::optional<Scalar>;
using OptTensor = std::optional<Tensor>;
Tensor Clamp(const Tensor& self, OptScalar lo, OptScalar hi) { return ClampImpl(self, SB(lo), SB(hi)); }
TensorMeta ClampMeta(const Tensor& self, OptScalar lo, OptScalar hi) { return SameAs(self, ClampType(self, SB(lo), SB(hi))); }
Tensor ClampTensor(const Tensor& self, const OptTensor& lo, const OptTensor& hi) { return ClampImpl(self, TB(lo), TB(hi)); }
TensorMeta ClampTensorMeta(const Tensor& self, const OptTensor& lo, const OptTensor& hi) {
  const Bound l = TB(lo), h = TB(hi);
  const Tensor none;
  return Laid(ClampShape(self, l, h), {&self, l.tensor ? l.tensor : &none, h.tensor ? h.tensor : &none},
              ClampType(self, l, h), self.device());
}
Tensor Clamp_(Tensor self, OptScalar lo, OptScalar hi) { return ClampInplaceImpl(self, SB(lo), SB(hi), true); }
Tensor ClampMeta_(Tensor self, OptScalar lo, OptScalar hi) { return ClampInplaceImpl(self, SB(lo), SB(hi), false); }
Tensor ClampTensor_(Tensor self, const OptTensor& lo, const OptTensor& hi) {
  return ClampInplaceImpl(self, TB(lo), TB(hi), true);
}
Tensor ClampTensorMeta_(Tensor self, const OptTensor& lo, const OptTensor& hi) {
  return ClampInplaceImpl(self, TB(lo), TB(hi), false);
}
Tensor ClampMin(const Tensor& self, const Scalar& lo) {
  return CallOp<Tensor>(KILN_OP("aten::clamp"), self, OptScalar(lo), OptScalar());
}
Tensor ClampMax(const Tensor& self, const Scalar& hi) {
  return CallOp<Tensor>(KILN_OP("aten::clamp"), self, OptScalar(), OptScalar(hi));
}
// clamp_min.Tensor / clamp_max.Tensor: clamp.Tensor with one bound (bools allowed, as PyTorch's)
Tensor ClampMinTensor(const Tensor& self, const Tensor& lo) {
  return CallOp<Tensor>(KILN_OP("aten::clamp.Tensor"), self, OptTensor(lo), OptTensor());
}
Tensor ClampMaxTensor(const Tensor& self, const Tensor& hi) {
  return CallOp<Tensor>(KILN_OP("aten::clamp.Tensor"), self, OptTensor(), OptTensor(hi));
}
Tensor ClampMinTensor_(Tensor self, const Tensor& lo) {
  return CallOp<Tensor>(KILN_OP("aten::clamp_.Tensor"), self, OptTensor(lo), OptTensor());
}
Tensor ClampMaxTensor_(Tensor self, const Tensor& hi) {
  return CallOp<Tensor>(KILN_OP("aten::clamp_.Tensor"), self, OptTensor(), OptTensor(hi));
}
Tensor ClampMin_(Tensor self, const Scalar& lo) {
  return CallOp<Tensor>(KILN_OP("aten::clamp_"), self, OptScalar(lo), OptScalar());
}
Tensor ClampMax_(Tensor self, const Scalar& hi) {
  return CallOp<Tensor>(KILN_OP("aten::clamp_"), self, OptScalar(), OptScalar(hi));
}

// --- ternary pointwise: lerp, addcmul, addcdiv ---------------------------------------------

enum class Ternary { Lerp, Addcmul, Addcdiv };

// out = f(a, b, c) elementwise in `compute`; c may be a broadcast number instead of a tensor.
// lerp, addcmul, addcdiv on CUDA: the CPU loops below as kernel IR, in the opmath type.
void TernaryCUDA(Ternary op, const Tensor& out, const Tensor& a, const Tensor& b, const Tensor* c,
                 const Scalar& c_or_value, ScalarType compute) {
  using codegen::OpCode;
  auto ir = [](OpCode o, codegen::ExprPtr x, codegen::ExprPtr y) { return codegen::Expr::Op(o, {x, y}); };
  const char* name = op == Ternary::Lerp ? "lerp" : op == Ternary::Addcmul ? "addcmul" : "addcdiv";
  std::vector<cuda::PointwiseInput> inputs = {cuda::PointwiseInput::Of(a), cuda::PointwiseInput::Of(b),
                                              c ? cuda::PointwiseInput::Of(*c)
                                                : cuda::PointwiseInput::Number(c_or_value, compute)};
  codegen::ExprPtr x = cuda::OpmathInput(0, compute, name), y = cuda::OpmathInput(1, compute, name);
  codegen::ExprPtr w = cuda::OpmathInput(2, compute, name);
  codegen::ExprPtr e;
  if (op == Ternary::Lerp) {
    codegen::DType m = cuda::OpmathDType(compute, name);
    auto k = [&](double v) { return codegen::Expr::Const(v, m); };
    codegen::ExprPtr d = ir(OpCode::kSub, y, x);
    e = codegen::Expr::Op(OpCode::kWhere, {ir(OpCode::kLt, codegen::Expr::Op(OpCode::kAbs, {w}), k(0.5)),
                                           ir(OpCode::kAdd, x, ir(OpCode::kMul, w, d)),
                                           ir(OpCode::kSub, y, ir(OpCode::kMul, d, ir(OpCode::kSub, k(1), w)))});
  } else {  // (self, tensor1, tensor2) and `value` (the third input) scaling the product or quotient
    inputs.push_back(cuda::PointwiseInput::Number(c_or_value, compute));
    codegen::ExprPtr value = cuda::OpmathInput(3, compute, name);
    e = op == Ternary::Addcmul ? ir(OpCode::kAdd, x, ir(OpCode::kMul, ir(OpCode::kMul, value, y), w))
                               : ir(OpCode::kAdd, x, ir(OpCode::kMul, value, ir(OpCode::kDiv, y, w)));
  }
  cuda::LaunchPointwise(name, out, inputs, e);
}

void TernaryInto(Ternary op, const Tensor& out, const Tensor& a, const Tensor& b, const Tensor* c,
                 const Scalar& c_or_value, ScalarType compute) {
  if (out.numel() == 0) return;
  if (out.device().is_cuda()) return TernaryCUDA(op, out, a, b, c, c_or_value, compute);
  Tensor ac = CastTo(a, compute), bc = CastTo(b, compute), cc = c ? CastTo(*c, compute) : Tensor();
  Tensor dst = out.dtype() == compute ? out : EmptyLike(out, compute);
  KILN_DISPATCH_NUMERIC(compute, op == Ternary::Lerp ? "lerp" : op == Ternary::Addcmul ? "addcmul" : "addcdiv", [&] {
    using T = scalar_t;
    using M = opmath_t<T>;
    const T cv = c_or_value.to<T>();
    const M value = c_or_value.to<M>();
    // PyTorch's vectorised lerp, one rounding each: fma(w, y - x, x) for |w| < 0.5, else
    // fma(w - 1, y - x, y) (written out: an -O0 build does not fuse x + w * (y - x) as GCC's -O2
    // does, and missed PyTorch's bits by an ulp).
    auto lerp_near = [](M x, M y, M w) { return std::fma(w, y - x, x); };
    auto lerp_far = [](M x, M y, M w) { return std::fma(w - M(1), y - x, y); };
    if (op == Ternary::Lerp && !cc.defined()) {
      // A number weight is a constant of the loop, in opmath as PyTorch's lerp_kernel_scalar reads
      // it (a float for bfloat16/float16), and its |w| < 0.5 branch is taken once: read per
      // element as a broadcast operand, it kept the loop scalar, 14x PyTorch's time for Adam's
      // exp_avg.lerp_(grad, 0.1) on 768x256 (280 against 20 us).
      ElementwiseIter iter({dst, ac, bc});
      const M t = value;
      if (std::abs(t) < M(0.5)) {
        CpuKernel<T, T, T>(iter, [=](T s, T e) -> T { return static_cast<T>(lerp_near(M(s), M(e), t)); });
      } else {
        CpuKernel<T, T, T>(iter, [=](T s, T e) -> T { return static_cast<T>(lerp_far(M(s), M(e), t)); });
      }
      return;
    }
    Operand cop = cc.defined() ? Operand(cc) : Operand::Broadcast(&cv);
    ElementwiseIter iter({dst, ac, bc, cop});
    if (op == Ternary::Lerp) {
      CpuKernel<T, T, T, T>(iter, [=](T s, T e, T w) -> T {
        const M x = s, y = e, t = w;
        return static_cast<T>(std::abs(t) < M(0.5) ? lerp_near(x, y, t) : lerp_far(x, y, t));
      });
    } else if (op == Ternary::Addcmul) {
      // Here the tensor operands are (self, tensor1, tensor2) and `value` scales the product.
      CpuKernel<T, T, T, T>(iter, [value](T s, T x, T y) -> T { return static_cast<T>(M(s) + value * M(x) * M(y)); });
    } else {
      CpuKernel<T, T, T, T>(iter, [value](T s, T x, T y) -> T { return static_cast<T>(M(s) + value * (M(x) / M(y))); });
    }
  });
  if (!dst.is_same(out)) {
    Tensor o = out;
    ops::copy_(o, dst);
  }
}

void CheckLerp(const Tensor& self, const Tensor& end, const Tensor* weight) {
  KILN_CHECK(self.dtype() == end.dtype(), "expected dtype ", ScalarTypeDisplayName(self.dtype()),
             " for `end` but got dtype ", ScalarTypeDisplayName(end.dtype()));
  if (weight)
    KILN_CHECK(self.dtype() == weight->dtype(), "expected dtype ", ScalarTypeDisplayName(self.dtype()),
               " for `weight` but got dtype ", ScalarTypeDisplayName(weight->dtype()));
  KILN_CHECK_NOT_IMPLEMENTED(IsFloating(self.dtype()), "\"lerp_kernel_scalar\" not implemented for '",
                             ScalarTypeDisplayName(self.dtype()), "'");
}
SymDimVector TernaryShape(const char* op, const Tensor& a, const Tensor& b, const Tensor* c) {
  CheckSameDevice(op, a, b);
  SymDimVector s = BroadcastShapes(op, a->sym_sizes(), b->sym_sizes());
  if (c) {
    CheckSameDevice(op, a, *c);
    s = BroadcastShapes(op, s, (*c)->sym_sizes());
  }
  return s;
}
TensorMeta LerpScalarMeta(const Tensor& self, const Tensor& end, const Scalar&) {
  CheckLerp(self, end, nullptr);
  return Laid(TernaryShape("lerp", self, end, nullptr), {&self, &end}, self.dtype(), self.device());
}
TensorMeta LerpTensorMeta(const Tensor& self, const Tensor& end, const Tensor& weight) {
  CheckLerp(self, end, &weight);
  return Laid(TernaryShape("lerp", self, end, &weight), {&self, &end, &weight}, self.dtype(), self.device());
}
Tensor LerpScalar(const Tensor& self, const Tensor& end, const Scalar& w) {
  Tensor out = EmptyFromMeta(LerpScalarMeta(self, end, w));
  TernaryInto(Ternary::Lerp, out, self, end, nullptr, w, self.dtype());
  return out;
}
Tensor LerpTensor(const Tensor& self, const Tensor& end, const Tensor& w) {
  Tensor out = EmptyFromMeta(LerpTensorMeta(self, end, w));
  TernaryInto(Ternary::Lerp, out, self, end, &w, 0, self.dtype());
  return out;
}
void CheckInplaceShape(const Tensor& self, const SymDimVector& s) {
  KILN_CHECK(s == self->sym_sizes(), "output with shape ", ShapeStr(self), " doesn't match the broadcast shape ",
             SizesToString(s));
}
Tensor LerpScalar_(Tensor self, const Tensor& end, const Scalar& w) {
  CheckInplaceShape(self, LerpScalarMeta(self, end, w).sizes);
  TernaryInto(Ternary::Lerp, self, self, end, nullptr, w, self.dtype());
  return self;
}
Tensor LerpScalarMeta_(Tensor self, const Tensor& end, const Scalar& w) {
  CheckInplaceShape(self, LerpScalarMeta(self, end, w).sizes);
  return self;
}
Tensor LerpTensor_(Tensor self, const Tensor& end, const Tensor& w) {
  CheckInplaceShape(self, LerpTensorMeta(self, end, w).sizes);
  TernaryInto(Ternary::Lerp, self, self, end, &w, 0, self.dtype());
  return self;
}
Tensor LerpTensorMeta_(Tensor self, const Tensor& end, const Tensor& w) {
  CheckInplaceShape(self, LerpTensorMeta(self, end, w).sizes);
  return self;
}

template <Ternary kOp>
TensorMeta AddcMeta(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  const char* name = kOp == Ternary::Addcmul ? "addcmul" : "addcdiv";
  ResultTypeState st;
  st.Update(self);
  st.Update(t1);
  st.Update(t2);
  ScalarType t = st.Result();
  if (kOp == Ternary::Addcdiv)
    KILN_CHECK(!(IsIntegral(t1.dtype(), true) && IsIntegral(t2.dtype(), true)),
               "Integer division with addcdiv is no longer supported, and in a future release addcdiv will perform a "
               "true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as (input + "
               "value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as (input + value * "
               "tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the latter implementation: "
               "(input + value * tensor1 / tensor2), for all dtypes.");
  // No "alpha must not be a floating point number" check here: PyTorch's addcmul/addcdiv accept a
  // float value for integral tensors (it is cast to the tensor type).
  KILN_CHECK_NOT_IMPLEMENTED(t != ScalarType::Bool, "\"", name, "_cpu_out\" not implemented for 'Bool'");
  return Laid(TernaryShape(name, self, t1, &t2), {&self, &t1, &t2}, t, self.device());
}
// The kernel's operands are (self, tensor1, tensor2) with `value` passed as the number.
template <Ternary kOp>
Tensor Addc(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  TensorMeta m = AddcMeta<kOp>(self, t1, t2, value);
  Tensor out = EmptyFromMeta(m);
  TernaryInto(kOp, out, self, t1, &t2, value, m.dtype);
  return out;
}
template <Ternary kOp>
Tensor AddcImpl_(Tensor self, const Tensor& t1, const Tensor& t2, const Scalar& value, bool run) {
  TensorMeta m = AddcMeta<kOp>(self, t1, t2, value);
  KILN_CHECK(CanCast(m.dtype, self.dtype()), "result type ", ScalarTypeDisplayName(m.dtype),
             " can't be cast to the desired output type ", ScalarTypeDisplayName(self.dtype()));
  CheckInplaceShape(self, m.sizes);
  if (run) TernaryInto(kOp, self, self, t1, &t2, value, m.dtype);
  return self;
}
template <Ternary kOp> Tensor Addc_(Tensor s, const Tensor& a, const Tensor& b, const Scalar& v) {
  return AddcImpl_<kOp>(s, a, b, v, true);
}
template <Ternary kOp> Tensor AddcMeta_(Tensor s, const Tensor& a, const Tensor& b, const Scalar& v) {
  return AddcImpl_<kOp>(s, a, b, v, false);
}

}  // namespace

void RegisterTernaryOps(Registry& r) {
  const std::initializer_list<Tag> kPointwise = {Tag::pointwise, Tag::core};
  r.Def("clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor", kPointwise, kFunctionAndMethod)
      .CPUAndCUDA<&Clamp>().Meta<&ClampMeta>();
  r.Def("clamp.Tensor(Tensor self, Tensor? min=None, Tensor? max=None) -> Tensor", kPointwise, kFunctionAndMethod)
      .CPUAndCUDA<&ClampTensor>().Meta<&ClampTensorMeta>();
  r.Def("clamp_(Tensor(a!) self, Scalar? min=None, Scalar? max=None) -> Tensor(a!)", {Tag::pointwise},
        kFunctionAndMethod)
      .CPUAndCUDA<&Clamp_>().Impl<&ClampMeta_>(DispatchKey::Meta).Impl<&ClampMeta_>(DispatchKey::Fake);
  r.Def("clamp_.Tensor(Tensor(a!) self, Tensor? min=None, Tensor? max=None) -> Tensor(a!)", {Tag::pointwise},
        kFunctionAndMethod)
      .CPUAndCUDA<&ClampTensor_>().Impl<&ClampTensorMeta_>(DispatchKey::Meta)
      .Impl<&ClampTensorMeta_>(DispatchKey::Fake);
  r.Def("clamp_min(Tensor self, Scalar min) -> Tensor", {Tag::pointwise}, kFunctionAndMethod).CompositeExplicit<&ClampMin>();
  r.Def("clamp_max(Tensor self, Scalar max) -> Tensor", {Tag::pointwise}, kFunctionAndMethod).CompositeExplicit<&ClampMax>();
  r.Def("clamp_min_(Tensor(a!) self, Scalar min) -> Tensor(a!)", {Tag::pointwise}, kFunctionAndMethod)
      .Composite<&ClampMin_>();
  r.Def("clamp_max_(Tensor(a!) self, Scalar max) -> Tensor(a!)", {Tag::pointwise}, kFunctionAndMethod)
      .Composite<&ClampMax_>();
  r.Def("clamp_min.Tensor(Tensor self, Tensor min) -> Tensor", {Tag::pointwise}, kFunctionAndMethod)
      .CompositeExplicit<&ClampMinTensor>();
  r.Def("clamp_max.Tensor(Tensor self, Tensor max) -> Tensor", {Tag::pointwise}, kFunctionAndMethod)
      .CompositeExplicit<&ClampMaxTensor>();
  r.Def("clamp_min_.Tensor(Tensor(a!) self, Tensor min) -> Tensor(a!)", {Tag::pointwise}, kFunctionAndMethod)
      .Composite<&ClampMinTensor_>();
  r.Def("clamp_max_.Tensor(Tensor(a!) self, Tensor max) -> Tensor(a!)", {Tag::pointwise}, kFunctionAndMethod)
      .Composite<&ClampMaxTensor_>();
  r.Def("lerp.Scalar(Tensor self, Tensor end, Scalar weight) -> Tensor", kPointwise, kFunctionAndMethod)
      .CPUAndCUDA<&LerpScalar>().Meta<&LerpScalarMeta>();
  r.Def("lerp.Tensor(Tensor self, Tensor end, Tensor weight) -> Tensor", kPointwise, kFunctionAndMethod)
      .CPUAndCUDA<&LerpTensor>().Meta<&LerpTensorMeta>();
  r.Def("lerp_.Scalar(Tensor(a!) self, Tensor end, Scalar weight) -> Tensor(a!)", {Tag::pointwise}, kMethod)
      .CPUAndCUDA<&LerpScalar_>().Impl<&LerpScalarMeta_>(DispatchKey::Meta)
      .Impl<&LerpScalarMeta_>(DispatchKey::Fake);
  r.Def("lerp_.Tensor(Tensor(a!) self, Tensor end, Tensor weight) -> Tensor(a!)", {Tag::pointwise}, kMethod)
      .CPUAndCUDA<&LerpTensor_>().Impl<&LerpTensorMeta_>(DispatchKey::Meta)
      .Impl<&LerpTensorMeta_>(DispatchKey::Fake);
  r.Def("addcmul(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor", kPointwise,
        kFunctionAndMethod)
      .CPUAndCUDA<&Addc<Ternary::Addcmul>>().Meta<&AddcMeta<Ternary::Addcmul>>();
  r.Def("addcdiv(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor", kPointwise,
        kFunctionAndMethod)
      .CPUAndCUDA<&Addc<Ternary::Addcdiv>>().Meta<&AddcMeta<Ternary::Addcdiv>>();
  r.Def("addcmul_(Tensor(a!) self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor(a!)",
        {Tag::pointwise}, kMethod)
      .CPUAndCUDA<&Addc_<Ternary::Addcmul>>().Impl<&AddcMeta_<Ternary::Addcmul>>(DispatchKey::Meta)
      .Impl<&AddcMeta_<Ternary::Addcmul>>(DispatchKey::Fake);
  r.Def("addcdiv_(Tensor(a!) self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor(a!)",
        {Tag::pointwise}, kMethod)
      .CPUAndCUDA<&Addc_<Ternary::Addcdiv>>().Impl<&AddcMeta_<Ternary::Addcdiv>>(DispatchKey::Meta)
      .Impl<&AddcMeta_<Ternary::Addcdiv>>(DispatchKey::Fake);
}

}  // namespace kiln
