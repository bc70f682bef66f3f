// autograd/formulas/pointwise.cc: derivatives of the pointwise ops (binary, unary, activations).
// Broadcast gradients are reduced to each input's shape by the engine (engine.cc, Validate).
#include "autograd/formulas/common.h"

namespace kiln::autograd {
using namespace formulas;

namespace {
constexpr double kPi = 3.14159265358979323846;

Tensor ZeroGrad(Ctx& c) { return zeros_like(c.grad()); }

// PyTorch's complex gradients are conjugate Wirtinger derivatives: grad * conj(f'(z)) for a
// holomorphic f. For real tensors conj is the identity and records nothing.
Tensor Conj(const Tensor& t) {
  return IsComplex(t.dtype()) ? CallOp<Tensor>(KILN_OP("aten::conj_physical"), t) : t;
}

// d/dx of max/min-like selections: ties split the gradient in half, as PyTorch does.
Tensor SelectTie(const Tensor& g, const Tensor& self, const Tensor& other, bool is_self, bool is_max) {
  Tensor half = where(eq(self, other), div(g, 2.0), g);
  Tensor lose = is_self == is_max ? lt(self, other) : gt(self, other);
  return masked_fill(half, lose, 0);
}
// trigamma, the derivative of digamma: recurrence up to z >= 6.5, then the asymptotic series;
// reflection for x < 0.5.
Tensor Trigamma(const Tensor& x) {
  Tensor reflect = lt(x, 0.5);
  Tensor z = where(reflect, rsub(x, 1), x);
  Tensor acc = zeros_like(z);
  for (int k = 0; k < 6; ++k) {
    Tensor zk = add(z, static_cast<double>(k));
    acc = add(acc, reciprocal(mul(zk, zk)));
  }
  Tensor t = reciprocal(add(z, 6.0));
  Tensor t2 = mul(t, t);
  // series = t + t^2/2 + t^3 (1/6 - t^2 (1/30 - t^2 (1/42 - t^2/30)))
  Tensor p = sub(ops::full({}, 1.0 / 42, t.dtype()), div(t2, 30.0));
  p = sub(ops::full({}, 1.0 / 30, t.dtype()), mul(t2, p));
  p = sub(ops::full({}, 1.0 / 6, t.dtype()), mul(t2, p));
  Tensor series = add(add(t, div(t2, 2.0)), mul(mul(t2, t), p));
  Tensor psi1 = add(acc, series);
  Tensor s = sin(mul(x, kPi));
  Tensor reflected = sub(div(ops::full({}, kPi * kPi, x.dtype()), mul(s, s)), psi1);
  return where(reflect, reflected, psi1);
}

// self.div(other, rounding_mode=mode)
Tensor RoundedDiv(const Tensor& a, const Tensor& b, const char* mode) {
  return CallOp<Tensor>(KILN_OP("aten::div.Tensor_mode"), a, b, std::optional<std::string>(mode));
}

// PyTorch records these in-place ops but has no derivative for them: the backward raises.
[[noreturn]] void NoInplaceDerivative(const char* name) {
  throw NotImplementedError(StrCat("the derivative for 'inplace version of ", name, "' is not implemented."));
}
}  // namespace

void DefinePointwiseFormulas(DerivativeTable& d) {
  // --- arithmetic --------------------------------------------------------------------------
  d.Def("add.Tensor", {}, [](Ctx& c, Grads& g) {
    if (c.needs("self")) g["self"] = c.grad();
    if (c.needs("other")) g["other"] = mul(c.grad(), c.scalar("alpha"));
  });
  d.Def("add.Scalar", {}, [](Ctx& c, Grads& g) { g["self"] = c.grad(); });
  d.Def("sub.Tensor", {}, [](Ctx& c, Grads& g) {
    if (c.needs("self")) g["self"] = c.grad();
    if (c.needs("other")) g["other"] = mul(c.grad(), -c.scalar("alpha").to_double());
  });
  d.Def("sub.Scalar", {}, [](Ctx& c, Grads& g) { g["self"] = c.grad(); });
  // rsub(self, other, alpha) = other - alpha * self: composites over sub, given PyTorch's nodes
  // (`1 - x` is RsubBackward1)
  d.Def("rsub.Tensor", {}, [](Ctx& c, Grads& g) {
    if (c.needs("self")) g["self"] = mul(c.grad(), -c.scalar("alpha").to_double());
    if (c.needs("other")) g["other"] = c.grad();
  });
  d.Def("rsub.Scalar", {}, [](Ctx& c, Grads& g) { g["self"] = mul(c.grad(), -c.scalar("alpha").to_double()); });
  d.Def("mul.Tensor", {"self for other", "other for self"}, [](Ctx& c, Grads& g) {
    if (c.needs("self")) g["self"] = mul(c.grad(), Conj(c.input("other")));
    if (c.needs("other")) g["other"] = mul(c.grad(), Conj(c.input("self")));
  });
  d.Def("mul.Scalar", {}, [](Ctx& c, Grads& g) { g["self"] = mul(c.grad(), c.scalar("other")); });
  d.Def("div.Tensor", {"self for other", "other"}, [](Ctx& c, Grads& g) {
    Tensor other = Conj(c.input("other"));
    if (c.needs("self")) g["self"] = div(c.grad(), other);
    // PyTorch's -grad * ((self / other) / other): rounded as it rounds, x / x's two gradients
    // cancel where PyTorch's do (fuzz seed 181, program 26811)
    if (c.needs("other")) g["other"] = mul(neg(c.grad()), div(div(Conj(c.input("self")), other), other));
  });
  d.Def("div.Scalar", {}, [](Ctx& c, Grads& g) { g["self"] = div(c.grad(), c.scalar("other")); });
  // With a rounding mode the result is piecewise constant. PyTorch's formulas (for the mode-less
  // case) name other in both gradients and self in other's, so it saves and unpacks them for
  // those: an in-place change to one before the backward raises there too, and only then
  // (x.neg_() after `x // mask` with a bool mask trains on: fuzz seed 111, program 1977).
  d.Def("div.Tensor_mode", {"self", "other"}, [](Ctx& c, Grads& g) {
    if (c.needs("self") || c.needs("other")) (void)c.input("other");  // both gradients name other
    if (c.needs("other")) (void)c.input("self");
    if (c.needs("self")) g["self"] = ZeroGrad(c);
    if (c.needs("other")) g["other"] = ZeroGrad(c);
  });
  d.Def("div.Scalar_mode", {}, [](Ctx& c, Grads& g) { g["self"] = ZeroGrad(c); });
  // other's gradient is -grad * self.div(other, rounding_mode=...), as PyTorch's: its rounded
  // division of an infinity is NaN (floor(inf / x) was inf: fuzz seed 191, program 11897)
  d.Def("remainder.Tensor", {"self", "other"}, [](Ctx& c, Grads& g) {
    if (c.needs("self")) g["self"] = c.grad();
    if (c.needs("other")) g["other"] = neg(mul(c.grad(), RoundedDiv(c.input("self"), c.input("other"), "floor")));
  });
  d.Def("remainder.Scalar", {}, [](Ctx& c, Grads& g) { g["self"] = c.grad(); });
  d.Def("fmod.Tensor", {"self", "other"}, [](Ctx& c, Grads& g) {
    if (c.needs("self")) g["self"] = c.grad();
    if (c.needs("other")) g["other"] = neg(mul(c.grad(), RoundedDiv(c.input("self"), c.input("other"), "trunc")));
  });
  d.Def("fmod.Scalar", {}, [](Ctx& c, Grads& g) { g["self"] = c.grad(); });
  // As PyTorch: recorded, but backward through floor_divide is an error.
  for (const char* name : {"floor_divide", "floor_divide.Scalar"})
    d.Def(name, {}, [](Ctx&, Grads&) { throw Error("derivative for aten::floor_divide is not implemented"); });
  d.Def("maximum", {"self", "other"}, [](Ctx& c, Grads& g) {
    Tensor s = c.input("self"), o = c.input("other");
    if (c.needs("self")) g["self"] = SelectTie(c.grad(), s, o, true, true);
    if (c.needs("other")) g["other"] = SelectTie(c.grad(), s, o, false, true);
  });
  d.Def("minimum", {"self", "other"}, [](Ctx& c, Grads& g) {
    Tensor s = c.input("self"), o = c.input("other");
    if (c.needs("self")) g["self"] = SelectTie(c.grad(), s, o, true, false);
    if (c.needs("other")) g["other"] = SelectTie(c.grad(), s, o, false, false);
  });
  // fmax/fmin: the gradient goes to the operand chosen (NaNs lose).
  d.Def("fmax", {"self", "other"}, [](Ctx& c, Grads& g) {
    Tensor s = c.input("self"), o = c.input("other");
    Tensor self_wins = logical_or(ge(s, o), isnan(o));
    if (c.needs("self")) g["self"] = masked_fill(c.grad(), logical_not(self_wins), 0);
    if (c.needs("other")) g["other"] = masked_fill(c.grad(), self_wins, 0);
  });
  d.Def("fmin", {"self", "other"}, [](Ctx& c, Grads& g) {
    Tensor s = c.input("self"), o = c.input("other");
    Tensor self_wins = logical_or(le(s, o), isnan(o));
    if (c.needs("self")) g["self"] = masked_fill(c.grad(), logical_not(self_wins), 0);
    if (c.needs("other")) g["other"] = masked_fill(c.grad(), self_wins, 0);
  });
  d.Def("atan2", {"self", "other"}, [](Ctx& c, Grads& g) {
    Tensor s = c.input("self"), o = c.input("other");
    // where both are 0 (or their squares underflow) the gradient is 0, not 0 / 0, as PyTorch's
    Tensor denom = add(mul(s, s), mul(o, o));
    Tensor recip = masked_fill(reciprocal(denom), eq(denom, 0.0), 0);
    if (c.needs("self")) g["self"] = mul(mul(c.grad(), o), recip);
    if (c.needs("other")) g["other"] = mul(mul(c.grad(), neg(s)), recip);
  });
  d.Def("hypot", {"self", "other", "result"}, [](Ctx& c, Grads& g) {
    Tensor r = c.result();
    if (c.needs("self")) g["self"] = div(mul(c.grad(), c.input("self")), r);
    if (c.needs("other")) g["other"] = div(mul(c.grad(), c.input("other")), r);
  });
  // copysign(x, y) is +-x: the gradient is grad * result / x, 0 where x is 0; none reaches y.
  auto copysign_self = [](Ctx& c, Grads& g) {
    if (c.needs("self")) {
      Tensor s = c.input("self");
      Tensor ratio = masked_fill(div(c.result(), s), eq(s, 0.0), 0);
      g["self"] = mul(c.grad(), ratio);
    }
    if (c.needs("other")) g["other"] = ZeroGrad(c);
  };
  d.Def("copysign.Tensor", {"self", "result"}, copysign_self);
  d.Def("copysign.Scalar", {"self", "result"}, copysign_self);
  // PyTorch's formula: d/dx x log y = log y, also at x = 0 (where y > 0: xlogy(x != 0, y) gave 0
  // there, a wrong gradient); at x = 0 and y <= 0 it is 0 by choice (its Note [Gradient formula
  // for xlogy at x = 0, y <= 0]: the directional derivative along x = 0).
  d.Def("xlogy.Tensor", {"self", "other"}, [](Ctx& c, Grads& g) {
    Tensor s = c.input("self"), o = c.input("other");
    if (c.needs("self"))
      g["self"] = masked_fill(CallOp<Tensor>(KILN_OP("aten::xlogy.Tensor"), c.grad(), o),
                              logical_and(eq(s, 0.0), le(o, 0.0)), 0);
    if (c.needs("other")) g["other"] = div(mul(c.grad(), s), o);
  });
  d.Def("xlogy.Scalar_Other", {"self"}, [](Ctx& c, Grads& g) {
    const Scalar o = c.scalar("other");
    Tensor grad = CallOp<Tensor>(KILN_OP("aten::xlogy.Scalar_Other"), c.grad(), o);
    g["self"] = o.to_double() > 0 ? grad : masked_fill(grad, eq(c.input("self"), 0.0), 0);
  });
  d.Def("xlogy.Scalar_Self", {"other"}, [](Ctx& c, Grads& g) {
    g["other"] = div(mul(c.grad(), c.scalar("self")), c.input("other"));
  });
  // As PyTorch: `number % x` is recorded, but its backward is an error (no formula upstream).
  d.Def("remainder.Scalar_Tensor", {}, [](Ctx&, Grads&) {
    throw NotImplementedError("derivative for aten::remainder is not implemented");  // PyTorch's words
  });
  d.Def("pow.Tensor_Scalar", {"self"}, [](Ctx& c, Grads& g) {
    Scalar e = c.scalar("exponent");
    if (e.to_double() == 0.0) { g["self"] = ZeroGrad(c); return; }
    g["self"] = mul(mul(c.grad(), e), pow(c.input("self"), Scalar(e.to_double() - 1.0)));
  });
  d.InplaceOf("pow_.Scalar", "pow.Tensor_Scalar");
  d.Def("pow.Tensor_Tensor", {"self", "exponent", "result"}, [](Ctx& c, Grads& g) {
    Tensor s = c.input("self"), e = c.input("exponent");
    if (c.needs("self")) {
      Tensor v = mul(mul(c.grad(), e), pow(s, sub(e, ops::scalar_tensor(1, e.dtype()))));
      g["self"] = masked_fill(v, eq(e, 0.0), 0);
    }
    if (c.needs("exponent")) {
      // grad * where(self == 0 & exponent >= 0, 0, result * log(self)), as PyTorch's: an inf or NaN
      // gradient stays NaN there (masking the whole product gave 0; fuzz seed 191, program 25696)
      Tensor factor = masked_fill(mul(c.result(), log(s)), logical_and(eq(s, 0.0), ge(e, 0.0)), 0);
      g["exponent"] = mul(c.grad(), factor);
    }
  });
  d.InplaceOf("pow_.Tensor", "pow.Tensor_Tensor");
  // base ** exponent for a number base (a composite over pow.Tensor_Tensor, given PyTorch's node,
  // PowBackward2): grad * result * log(base), 0 where base is 0 and exponent >= 0
  d.Def("pow.Scalar", {"exponent", "result"}, [](Ctx& c, Grads& g) {
    const double base = c.scalar("self").to_double();
    Tensor factor = mul(c.result(), std::log(base));
    if (base == 0) factor = masked_fill(factor, ge(c.input("exponent"), 0.0), 0);
    g["exponent"] = mul(c.grad(), factor);
  });
  // Comparisons, bitwise and logical ops: boolean or integer results, no gradient.
  d.NonDifferentiable({"eq.Tensor", "eq.Scalar", "eq_.Tensor", "eq_.Scalar", "ne.Tensor", "ne.Scalar", "ne_.Tensor",
                       "ne_.Scalar", "lt.Tensor", "lt.Scalar", "lt_.Tensor", "lt_.Scalar", "le.Tensor", "le.Scalar",
                       "le_.Tensor", "le_.Scalar", "gt.Tensor", "gt.Scalar", "gt_.Tensor", "gt_.Scalar", "ge.Tensor",
                       "ge.Scalar", "ge_.Tensor", "ge_.Scalar", "bitwise_and.Tensor", "bitwise_and.Scalar",
                       "bitwise_and_.Tensor", "bitwise_and_.Scalar", "bitwise_or.Tensor", "bitwise_or.Scalar",
                       "bitwise_or_.Tensor", "bitwise_or_.Scalar", "bitwise_xor.Tensor", "bitwise_xor.Scalar",
                       "bitwise_xor_.Tensor", "bitwise_xor_.Scalar", "logical_and", "logical_and_", "logical_or",
                       "logical_or_", "logical_xor", "logical_xor_", "logical_not", "logical_not_", "bitwise_not",
                       "bitwise_not_"});
  d.NonDifferentiable({"bitwise_left_shift.Tensor", "bitwise_left_shift.Tensor_Scalar",
                       "bitwise_left_shift.Scalar_Tensor", "bitwise_left_shift_.Tensor",
                       "bitwise_left_shift_.Tensor_Scalar", "bitwise_right_shift.Tensor",
                       "bitwise_right_shift.Tensor_Scalar", "bitwise_right_shift.Scalar_Tensor",
                       "bitwise_right_shift_.Tensor", "bitwise_right_shift_.Tensor_Scalar", "__lshift__.Tensor",
                       "__lshift__.Scalar", "__ilshift__.Tensor", "__ilshift__.Scalar", "__rshift__.Tensor",
                       "__rshift__.Scalar", "__irshift__.Tensor", "__irshift__.Scalar"});
  d.Def("lerp.Scalar", {}, [](Ctx& c, Grads& g) {
    double w = c.scalar("weight").to_double();
    if (c.needs("self")) g["self"] = mul(c.grad(), 1.0 - w);
    if (c.needs("end")) g["end"] = mul(c.grad(), w);
  });
  d.Def("lerp.Tensor", {"self", "end", "weight"}, [](Ctx& c, Grads& g) {
    Tensor w = c.input("weight");
    if (c.needs("self")) g["self"] = mul(c.grad(), rsub(w, 1));
    if (c.needs("end")) g["end"] = mul(c.grad(), w);
    if (c.needs("weight")) g["weight"] = mul(c.grad(), sub(c.input("end"), c.input("self")));
  });
  d.Def("addcmul", {"tensor1", "tensor2"}, [](Ctx& c, Grads& g) {
    Scalar v = c.scalar("value");
    if (c.needs("self")) g["self"] = c.grad();
    if (c.needs("tensor1")) g["tensor1"] = mul(mul(c.grad(), c.input("tensor2")), v);
    if (c.needs("tensor2")) g["tensor2"] = mul(mul(c.grad(), c.input("tensor1")), v);
  });
  d.Def("addcdiv", {"tensor1", "tensor2"}, [](Ctx& c, Grads& g) {
    Scalar v = c.scalar("value");
    Tensor t2 = c.input("tensor2");
    if (c.needs("self")) g["self"] = c.grad();
    if (c.needs("tensor1")) g["tensor1"] = div(mul(c.grad(), v), t2);
    if (c.needs("tensor2"))
      g["tensor2"] = neg(div(mul(mul(c.grad(), v), c.input("tensor1")), mul(t2, t2)));
  });
  // The gradient passes where min <= self <= max holds, as in PyTorch: not at a NaN (which
  // clamp returns unchanged), nor anywhere when min > max.
  d.Def("clamp", {"self"}, [](Ctx& c, Grads& g) {
    Tensor s = c.input("self");
    const IValue& lo = c.arg("min");
    const IValue& hi = c.arg("max");
    Tensor pass;
    if (!lo.is_none()) pass = ge(s, lo.to_scalar());
    if (!hi.is_none()) pass = pass.defined() ? logical_and(pass, le(s, hi.to_scalar())) : le(s, hi.to_scalar());
    g["self"] = pass.defined() ? where(pass, c.grad(), Scalar(0.0)) : c.grad();
  });
  // One-sided clamps (composites over clamp, given PyTorch's nodes: ClampMinBackward0, ...).
  d.Def("clamp_min", {"self"}, [](Ctx& c, Grads& g) {
    g["self"] = where(ge(c.input("self"), c.scalar("min")), c.grad(), Scalar(0.0));
  });
  d.Def("clamp_max", {"self"}, [](Ctx& c, Grads& g) {
    g["self"] = where(le(c.input("self"), c.scalar("max")), c.grad(), Scalar(0.0));
  });
  // ClampMinBackward1 / ClampMaxBackward1, as PyTorch's: self's where it is kept (ties included),
  // the bound's where it wins; a NaN on either side sends the gradient to neither
  d.Def("clamp_min.Tensor", {"self", "min"}, [](Ctx& c, Grads& g) {
    Tensor s = c.input("self"), lo = c.input("min");
    if (c.needs("self")) g["self"] = where(ge(s, lo), c.grad(), Scalar(0.0));
    if (c.needs("min")) g["min"] = where(lt(s, lo), c.grad(), Scalar(0.0));
  });
  d.Def("clamp_max.Tensor", {"self", "max"}, [](Ctx& c, Grads& g) {
    Tensor s = c.input("self"), hi = c.input("max");
    if (c.needs("self")) g["self"] = where(le(s, hi), c.grad(), Scalar(0.0));
    if (c.needs("max")) g["max"] = where(gt(s, hi), c.grad(), Scalar(0.0));
  });
  d.Def("clamp.Tensor", {"self", "min", "max"}, [](Ctx& c, Grads& g) {
    Tensor s = c.input("self");
    Tensor lo = c.input("min"), hi = c.input("max");
    Tensor grad = c.grad();
    if (c.needs("self")) {
      Tensor pass;
      if (lo.defined()) pass = ge(s, lo);
      if (hi.defined()) pass = pass.defined() ? logical_and(pass, le(s, hi)) : le(s, hi);
      g["self"] = pass.defined() ? where(pass, grad, Scalar(0.0)) : grad;
    }
    if (lo.defined() && c.needs("min")) {  // min has no gradient where it loses to max (min >= max)
      Tensor m = lt(s, lo);
      if (hi.defined()) m = logical_and(m, lt(lo, hi));
      g["min"] = masked_fill(grad, logical_not(m), 0);
    }
    if (hi.defined() && c.needs("max")) {
      Tensor m = gt(s, hi);
      if (lo.defined()) m = logical_or(m, gt(lo, hi));
      g["max"] = masked_fill(grad, logical_not(m), 0);
    }
  });
  d.Def("where.self", {"condition"}, [](Ctx& c, Grads& g) {
    Tensor cond = c.input("condition");
    if (c.needs("self")) g["self"] = where(cond, c.grad(), 0.0);
    if (c.needs("other")) g["other"] = where(cond, 0.0, c.grad());
  });
  d.Def("nan_to_num", {"self"}, [](Ctx& c, Grads& g) {
    g["self"] = masked_fill(c.grad(), logical_not(isfinite(c.input("self"))), 0);
  });

  // --- unary ---------------------------------------------------------------------------------
  d.Def("neg", {}, [](Ctx& c, Grads& g) { g["self"] = neg(c.grad()); });
  d.Def("exp", {"result"}, [](Ctx& c, Grads& g) { g["self"] = mul(c.grad(), Conj(c.result())); });
  d.Def("exp2", {"result"}, [](Ctx& c, Grads& g) { g["self"] = mul(mul(c.grad(), c.result()), std::log(2.0)); });
  d.Def("expm1", {"result"}, [](Ctx& c, Grads& g) { g["self"] = mul(c.grad(), add(c.result(), 1.0)); });
  d.Def("log", {"self"}, [](Ctx& c, Grads& g) { g["self"] = div(c.grad(), c.input("self")); });
  d.Def("log2", {"self"}, [](Ctx& c, Grads& g) { g["self"] = div(c.grad(), mul(c.input("self"), std::log(2.0))); });
  d.Def("log10", {"self"}, [](Ctx& c, Grads& g) { g["self"] = div(c.grad(), mul(c.input("self"), std::log(10.0))); });
  d.Def("log1p", {"self"}, [](Ctx& c, Grads& g) { g["self"] = div(c.grad(), add(c.input("self"), 1.0)); });
  d.Def("sqrt", {"result"}, [](Ctx& c, Grads& g) { g["self"] = div(c.grad(), mul(c.result(), 2.0)); });
  d.Def("rsqrt", {"result"}, [](Ctx& c, Grads& g) {
    g["self"] = mul(mul(c.grad(), pow(c.result(), 3.0)), -0.5);
  });
  d.Def("reciprocal", {"result"}, [](Ctx& c, Grads& g) {
    Tensor r = c.result();
    g["self"] = neg(mul(c.grad(), mul(r, r)));
  });
  d.Def("sin", {"self"}, [](Ctx& c, Grads& g) { g["self"] = mul(c.grad(), cos(c.input("self"))); });
  d.Def("cos", {"self"}, [](Ctx& c, Grads& g) { g["self"] = neg(mul(c.grad(), sin(c.input("self")))); });
  d.Def("tan", {"result"}, [](Ctx& c, Grads& g) {
    Tensor r = c.result();
    g["self"] = mul(c.grad(), add(mul(r, r), 1.0));
  });
  d.Def("asin", {"self"}, [](Ctx& c, Grads& g) {
    Tensor s = c.input("self");
    g["self"] = div(c.grad(), sqrt(rsub(mul(s, s), 1)));
  });
  d.Def("acos", {"self"}, [](Ctx& c, Grads& g) {
    Tensor s = c.input("self");
    g["self"] = neg(div(c.grad(), sqrt(rsub(mul(s, s), 1))));
  });
  d.Def("atan", {"self"}, [](Ctx& c, Grads& g) {
    Tensor s = c.input("self");
    g["self"] = div(c.grad(), add(mul(s, s), 1.0));
  });
  d.Def("sinh", {"self"}, [](Ctx& c, Grads& g) { g["self"] = mul(c.grad(), cosh(c.input("self"))); });
  d.Def("cosh", {"self"}, [](Ctx& c, Grads& g) { g["self"] = mul(c.grad(), sinh(c.input("self"))); });
  d.Def("asinh", {"self"}, [](Ctx& c, Grads& g) {
    Tensor s = c.input("self");
    g["self"] = div(c.grad(), sqrt(add(mul(s, s), 1.0)));
  });
  d.Def("acosh", {"self"}, [](Ctx& c, Grads& g) {
    Tensor s = c.input("self");
    g["self"] = div(c.grad(), sqrt(add(mul(s, s), -1.0)));
  });
  d.Def("atanh", {"self"}, [](Ctx& c, Grads& g) {
    Tensor s = c.input("self");
    g["self"] = div(c.grad(), rsub(mul(s, s), 1));
  });
  d.Def("asinh_", {}, [](Ctx&, Grads&) { NoInplaceDerivative("asinh"); });
  d.Def("acosh_", {}, [](Ctx&, Grads&) { NoInplaceDerivative("acosh"); });
  d.Def("atanh_", {}, [](Ctx&, Grads&) { NoInplaceDerivative("atanh"); });
  d.Def("erf", {"self"}, [](Ctx& c, Grads& g) {
    Tensor s = c.input("self");
    g["self"] = mul(mul(c.grad(), exp(neg(mul(s, s)))), 2.0 / std::sqrt(kPi));
  });
  d.Def("erfc", {"self"}, [](Ctx& c, Grads& g) {
    Tensor s = c.input("self");
    g["self"] = mul(mul(c.grad(), exp(neg(mul(s, s)))), -2.0 / std::sqrt(kPi));
  });
  // From self, as PyTorch (which recomputes erfinv): y = x.erfinv(); y.mul_(2) trains there.
  d.Def("erfinv", {"self"}, [](Ctx& c, Grads& g) {
    Tensor r = CallOp<Tensor>(KILN_OP("aten::erfinv"), c.input("self"));
    g["self"] = mul(mul(c.grad(), exp(mul(r, r))), std::sqrt(kPi) / 2.0);
  });
  // the standard normal density: exp(-x^2 / 2) / sqrt(2 pi)
  d.Def("special_ndtr", {"self"}, [](Ctx& c, Grads& g) {
    Tensor s = c.input("self");
    g["self"] = mul(mul(c.grad(), exp(mul(mul(s, s), -0.5))), 1.0 / std::sqrt(2.0 * kPi));
  });
  d.Def("lgamma", {"self"}, [](Ctx& c, Grads& g) { g["self"] = mul(c.grad(), digamma(c.input("self"))); });
  d.Def("digamma", {"self"}, [](Ctx& c, Grads& g) { g["self"] = mul(c.grad(), Trigamma(c.input("self"))); });
  d.Def("abs", {"self"}, [](Ctx& c, Grads& g) {
    Tensor x = c.input("self");
    if (!IsComplex(x.dtype())) { g["self"] = mul(c.grad(), sign(x)); return; }
    // PyTorch's sgn: x / |x|, and 0 at 0
    Tensor magnitude = CallOp<Tensor>(KILN_OP("aten::abs"), x);
    Tensor unit = div(x, magnitude);
    Tensor zero = CallOp<Tensor>(KILN_OP("aten::eq.Scalar"), magnitude, Scalar(int64_t(0)));
    g["self"] = mul(c.grad(), CallOp<Tensor>(KILN_OP("aten::masked_fill.Scalar"), unit, zero, Scalar(int64_t(0))));
  });
  d.Def("frac", {}, [](Ctx& c, Grads& g) { g["self"] = c.grad(); });
  for (const char* flat : {"sign", "floor", "ceil", "round", "round.decimals", "trunc"})
    d.Def(flat, {}, [](Ctx& c, Grads& g) { g["self"] = ZeroGrad(c); });

  // --- activations (their backward kernels are ops: tensor/ops/activation_backward.cc) --------
  d.Def("sigmoid", {"result"}, [](Ctx& c, Grads& g) {
    g["self"] = CallOp<Tensor>(KILN_OP("aten::sigmoid_backward"), c.grad(), c.result());
  });
  d.Def("tanh", {"result"}, [](Ctx& c, Grads& g) {
    g["self"] = CallOp<Tensor>(KILN_OP("aten::tanh_backward"), c.grad(), c.result());
  });
  d.Def("relu", {"result"}, [](Ctx& c, Grads& g) {
    g["self"] = CallOp<Tensor>(KILN_OP("aten::threshold_backward"), c.grad(), c.result(), Scalar(0));
  });
  d.Def("threshold", {"self"}, [](Ctx& c, Grads& g) {
    g["self"] = CallOp<Tensor>(KILN_OP("aten::threshold_backward"), c.grad(), c.input("self"), c.scalar("threshold"));
  });
  d.Def("gelu", {"self"}, [](Ctx& c, Grads& g) {
    g["self"] = CallOp<Tensor>(KILN_OP("aten::gelu_backward"), c.grad(), c.input("self"),
                               c.arg("approximate").to_string());
  });
  d.Def("silu", {"self"}, [](Ctx& c, Grads& g) {
    g["self"] = CallOp<Tensor>(KILN_OP("aten::silu_backward"), c.grad(), c.input("self"));
  });
  d.Def("mish", {"self"}, [](Ctx& c, Grads& g) {
    g["self"] = CallOp<Tensor>(KILN_OP("aten::mish_backward"), c.grad(), c.input("self"));
  });
  d.Def("leaky_relu", {"self"}, [](Ctx& c, Grads& g) {
    g["self"] = CallOp<Tensor>(KILN_OP("aten::leaky_relu_backward"), c.grad(), c.input("self"),
                               c.scalar("negative_slope"), false);
  });
  d.Def("hardtanh", {"self"}, [](Ctx& c, Grads& g) {
    g["self"] = CallOp<Tensor>(KILN_OP("aten::hardtanh_backward"), c.grad(), c.input("self"), c.scalar("min_val"),
                               c.scalar("max_val"));
  });
  d.Def("elu", {"self"}, [](Ctx& c, Grads& g) {
    g["self"] = CallOp<Tensor>(KILN_OP("aten::elu_backward"), c.grad(), c.scalar("alpha"), c.scalar("scale"),
                               c.scalar("input_scale"), false, c.input("self"));
  });
  d.Def("softplus", {"self"}, [](Ctx& c, Grads& g) {
    g["self"] = CallOp<Tensor>(KILN_OP("aten::softplus_backward"), c.grad(), c.input("self"), c.scalar("beta"),
                               c.scalar("threshold"));
  });
  d.Def("hardsigmoid", {"self"}, [](Ctx& c, Grads& g) {
    g["self"] = CallOp<Tensor>(KILN_OP("aten::hardsigmoid_backward"), c.grad(), c.input("self"));
  });
  d.Def("hardswish", {"self"}, [](Ctx& c, Grads& g) {
    g["self"] = CallOp<Tensor>(KILN_OP("aten::hardswish_backward"), c.grad(), c.input("self"));
  });
  d.Def("logit", {"self"}, [](Ctx& c, Grads& g) {
    const IValue& eps = c.arg("eps");
    g["self"] = CallOp<Tensor>(KILN_OP("aten::logit_backward"), c.grad(), c.input("self"),
                               eps.is_none() ? std::optional<double>() : std::optional<double>(eps.to_double()));
  });
}

}  // namespace kiln::autograd
