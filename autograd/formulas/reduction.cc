// autograd/formulas/reduction.cc: derivatives of reductions, statistics, softmax and scans.
#include <limits>

#include "autograd/formulas/common.h"
#include "autograd/grad_mode.h"

namespace kiln::autograd {
using namespace formulas;

namespace {
std::optional<IntList> OptDims(Ctx& c, const char* name) {
  const IValue& v = c.arg(name);
  if (v.is_none()) return std::nullopt;
  return v.to_int_list();
}

double Correction(Ctx& c) {
  const IValue& v = c.arg("correction");
  return v.is_none() ? 1.0 : v.to_scalar().to_double();
}

// Spreads grad evenly over the positions equal to the (kept-dim) result: amax/amin/max/min.
Tensor EvenlyDistributed(Ctx& c, const Tensor& result, const IntList& dims, bool keepdim) {
  Tensor self = c.input("self");
  const SymDimVector& sizes = c.sizes("self");
  Tensor r = ExpandReduced(result, sizes, dims, keepdim);
  Tensor mask = to(eq(self, r), c.grad().dtype());
  Tensor count = ExpandReduced(sum(mask, dims, true), sizes, dims, true);
  return div(mul(ExpandReduced(c.grad(), sizes, dims, keepdim), mask), count);
}

// max()/min() of the whole tensor: grad / count at the positions holding the result (NaNs when
// the result is NaN), exactly 0 elsewhere even when grad is NaN or inf (PyTorch's CPU
// evenly_distribute_backward fills zeros; a product mask * grad spread NaN over every element).
Tensor EvenlyDistributedAll(Ctx& c) {
  Tensor self = c.input("self"), r = c.result();
  Tensor mask = logical_or(eq(self, r), logical_and(isnan(self), isnan(r)));
  Tensor count = sum_all(to(mask, c.grad().dtype()));
  return where(mask, div(c.grad(), count), 0.0);
}

// Note [prod's gradient as PyTorch computes it]: PyTorch's eager prod_backward takes result /
// input when the input has no zero at all, so an inf element's gradient is inf / inf = NaN, and
// the product of the other elements (`others`) otherwise. Both are computed and one selected by
// a where, so compiled code (which cannot look at the data) gives eager's numbers too.
Tensor ProdGradFactor(const Tensor& self, const Tensor& result, const Tensor& others) {
  Tensor any_zero = CallOp<Tensor>(KILN_OP("aten::any"), CallOp<Tensor>(KILN_OP("aten::eq.Scalar"), self,
                                                                         Scalar(int64_t(0))));
  return where(any_zero, others, div(result, self));
}

// Element i along `dim`: the product of every other element of its line.
Tensor ProductOfOthers(const Tensor& x, int64_t dim) {
  const int64_t n = x.size(dim);
  if (n == 0) return x;
  auto exclusive = [&](const Tensor& t) {  // [1, t0, t0*t1, ...] along dim
    Tensor one = ones_like(narrow(t, dim, 0, 1));
    if (n == 1) return one;
    return ops::cat({one, narrow(cumprod(t, dim), dim, 0, n - 1)}, dim);
  };
  return mul(exclusive(x), ops::flip(exclusive(ops::flip(x, {dim})), {dim}));
}

// var's gradient: grad * 2 (x - mean) / (N - correction), as PyTorch's var_backward. A reduction
// over everything (no dim, or a 0-d self) with no degrees of freedom left gives inf where x is
// not its mean and NaN where it is (inf * 0), also where x is NaN: there NaN != mean, so the
// gradient is inf, as PyTorch's (kiln's inf * NaN gave NaN: fuzz seed 301, program 17102).
// With dims, 2 / (N - correction) is taken as it is (inf at 0, negative below).
Tensor VarBackward(const Tensor& grad, const Tensor& self, const IntList& dims, double correction, bool keepdim,
                   const SymDimVector& sizes, bool all_dims) {
  SymInt n = ReducedCount(sizes, dims);
  const double dof = static_cast<double>(n.expect_int()) - correction;
  Tensor mean = ops::sum(self, dims, true);
  mean = div(mean, static_cast<double>(n.expect_int()));
  Tensor expanded = ExpandReduced(grad, sizes, dims, keepdim);
  if (all_dims && dof <= 0) {
    Tensor inf = mul(ones_like(self), std::numeric_limits<double>::infinity());
    return mul(expanded, masked_fill(inf, eq(self, mean), std::numeric_limits<double>::quiet_NaN()));
  }
  return mul(expanded, mul(sub(self, mean), 2.0 / dof));
}

// The arguments of var's backward (PyTorch's "all" branch: no dim given, or a 0-d self).
Tensor VarBackwardOf(Ctx& c, const Tensor& grad, const IntList& dims, bool keepdim) {
  const bool all_dims = !OptDims(c, "dim").has_value() || c.dim("self") == 0;
  return VarBackward(grad, c.input("self"), dims, Correction(c), keepdim, c.sizes("self"), all_dims);
}

}  // namespace

void DefineReductionFormulas(DerivativeTable& d) {
  d.Def("sum.dim_IntList", {}, [](Ctx& c, Grads& g) {
    IntList dims = NormalizeDims(OptDims(c, "dim"), c.dim("self"));
    g["self"] = ExpandReduced(c.grad(), c.sizes("self"), dims, c.flag("keepdim"));
  });
  d.Def("sum", {}, [](Ctx& c, Grads& g) {
    g["self"] = ExpandReduced(c.grad(), c.sizes("self"), NormalizeDims(std::nullopt, c.dim("self")), false);
  });
  d.Def("mean", {}, [](Ctx& c, Grads& g) {
    IntList dims = NormalizeDims(std::nullopt, c.dim("self"));
    SymInt n = ReducedCount(c.sizes("self"), dims);
    g["self"] = div(ExpandReduced(c.grad(), c.sizes("self"), dims, false), static_cast<double>(n.expect_int()));
  });
  d.Def("mean.dim", {}, [](Ctx& c, Grads& g) {
    IntList dims = NormalizeDims(OptDims(c, "dim"), c.dim("self"));
    SymInt n = ReducedCount(c.sizes("self"), dims);
    g["self"] = div(ExpandReduced(c.grad(), c.sizes("self"), dims, c.flag("keepdim")),
                    static_cast<double>(n.expect_int()));
  });
  // prod: d prod / d x_i is the product of the other elements, computed as exclusive products
  // from the left and from the right, so zero inputs are exact (grad * prod / x is not).
  // PyTorch's prod_backward reads the result too: it is saved (and checked), though the product
  // of the others is computed here without dividing by it.
  // Two zeros or more make every element's gradient 0, also where grad is inf or NaN (sqrt(x.prod())
  // at 0), where PyTorch's prod_backward returns zeros without multiplying, unless the backward
  // is itself recorded (create_graph): kiln's grad * 0 was NaN (fuzz seed 1571, program 1815).
  d.Def("prod", {"self", "result"}, [](Ctx& c, Grads& g) {
    Tensor self = c.input("self");
    if (c.dim("self") == 0) { g["self"] = c.grad(); return; }
    Tensor flat = ops::reshape(self, {SymInt(-1)});
    Tensor others = reshape(ProductOfOthers(flat, 0), c.sizes("self"));
    Tensor grad = mul(c.grad(), ProdGradFactor(self, c.result(), others));
    if (!GradMode::is_enabled()) grad = masked_fill(grad, gt(sum_all(eq(self, Scalar(int64_t(0)))), Scalar(int64_t(1))), 0.0);
    g["self"] = grad;
  });
  d.Def("prod.dim_int", {"self", "result"}, [](Ctx& c, Grads& g) {
    if (c.dim("self") == 0) { g["self"] = c.grad(); return; }
    int64_t dim = WrapDim(c.i64("dim"), c.dim("self"));
    Tensor self = c.input("self");
    Tensor grad = ExpandReduced(c.grad(), c.sizes("self"), {dim}, c.flag("keepdim"));
    Tensor result = ExpandReduced(c.result(), c.sizes("self"), {dim}, c.flag("keepdim"));
    g["self"] = mul(grad, ProdGradFactor(self, result, ProductOfOthers(self, dim)));
  });
  for (const char* name : {"amax", "amin"})
    d.Def(name, {"self", "result"}, [](Ctx& c, Grads& g) {
      IntList dims = NormalizeDims(c.ints("dim"), c.dim("self"));
      g["self"] = EvenlyDistributed(c, c.result(), dims, c.flag("keepdim"));
    });
  for (const char* name : {"max", "min"})
    d.Def(name, {"self", "result"}, [](Ctx& c, Grads& g) { g["self"] = EvenlyDistributedAll(c); });
  d.NonDifferentiable({"argmax", "argmin", "any", "any.dim", "any.dims", "all", "all.dim", "all.dims",
                       "count_nonzero.dim_IntList"});
  for (const char* name : {"max.dim", "min.dim"})
    d.Def(name, {"result1"}, [](Ctx& c, Grads& g) {
      int64_t dim = c.dim("self") == 0 ? 0 : WrapDim(c.i64("dim"), c.dim("self"));
      g["self"] = ValueSelectingBackward(c.grad(0), dim, c.result(1), c.sizes("self"), c.flag("keepdim"));
    });
  for (const char* name : {"sort", "sort.stable"})
    d.Def(name, {"result1"}, [](Ctx& c, Grads& g) {
      int64_t dim = c.dim("self") == 0 ? 0 : WrapDim(c.i64("dim"), c.dim("self"));
      g["self"] = ValueSelectingBackward(c.grad(0), dim, c.result(1), c.sizes("self"), true);
    });
  d.Def("topk", {"result1"}, [](Ctx& c, Grads& g) {
    int64_t dim = c.dim("self") == 0 ? 0 : WrapDim(c.i64("dim"), c.dim("self"));
    g["self"] = ValueSelectingBackward(c.grad(0), dim, c.result(1), c.sizes("self"), true);
  });
  d.Def("var.correction", {"self"}, [](Ctx& c, Grads& g) {
    IntList dims = NormalizeDims(OptDims(c, "dim"), c.dim("self"));
    g["self"] = VarBackwardOf(c, c.grad(), dims, c.flag("keepdim"));
  });
  d.Def("std.correction", {"self", "result"}, [](Ctx& c, Grads& g) {
    IntList dims = NormalizeDims(OptDims(c, "dim"), c.dim("self"));
    bool keepdim = c.flag("keepdim");
    // d std = d var / (2 std)
    Tensor gvar = div(c.grad(), mul(c.result(), 2.0));
    gvar = masked_fill(gvar, eq(c.result(), 0.0), 0);
    g["self"] = VarBackwardOf(c, gvar, dims, keepdim);
  });
  d.Def("var_mean.correction", {"self"}, [](Ctx& c, Grads& g) {
    IntList dims = NormalizeDims(OptDims(c, "dim"), c.dim("self"));
    bool keepdim = c.flag("keepdim");
    SymInt n = ReducedCount(c.sizes("self"), dims);
    Tensor out = zeros(c.sizes("self"), c.grad(0).dtype());
    if (c.has_grad(0)) out = add(out, VarBackwardOf(c, c.grad(0), dims, keepdim));
    if (c.has_grad(1))
      out = add(out, div(ExpandReduced(c.grad(1), c.sizes("self"), dims, keepdim), static_cast<double>(n.expect_int())));
    g["self"] = out;
  });
  d.Def("std_mean.correction", {"self", "result"}, [](Ctx& c, Grads& g) {
    IntList dims = NormalizeDims(OptDims(c, "dim"), c.dim("self"));
    bool keepdim = c.flag("keepdim");
    SymInt n = ReducedCount(c.sizes("self"), dims);
    Tensor out = zeros(c.sizes("self"), c.grad(0).dtype());
    if (c.has_grad(0)) {
      Tensor gvar = masked_fill(div(c.grad(0), mul(c.result(0), 2.0)), eq(c.result(0), 0.0), 0);
      out = add(out, VarBackwardOf(c, gvar, dims, keepdim));
    }
    if (c.has_grad(1))
      out = add(out, div(ExpandReduced(c.grad(1), c.sizes("self"), dims, keepdim), static_cast<double>(n.expect_int())));
    g["self"] = out;
  });
  d.Def("logsumexp", {"self", "result"}, [](Ctx& c, Grads& g) {
    IntList dims = NormalizeDims(c.ints("dim"), c.dim("self"));
    bool keepdim = c.flag("keepdim");
    Tensor r = ExpandReduced(c.result(), c.sizes("self"), dims, keepdim);
    g["self"] = mul(ExpandReduced(c.grad(), c.sizes("self"), dims, keepdim), exp(sub(c.input("self"), r)));
  });
  d.Def("linalg_vector_norm", {"self", "result"}, [](Ctx& c, Grads& g) {
    IntList dims = NormalizeDims(OptDims(c, "dim"), c.dim("self"));
    bool keepdim = c.flag("keepdim");
    double p = c.scalar("ord").to_double();
    Tensor self = c.input("self");
    const SymDimVector& sizes = c.sizes("self");
    Tensor gr = ExpandReduced(c.grad(), sizes, dims, keepdim);
    Tensor r = ExpandReduced(c.result(), sizes, dims, keepdim);
    // PyTorch's norm_backward term for term: the 0-norm counts and has no gradient (undefined, not
    // zeros), and where the norm is 0 the 2-norm masks self / norm before the product with grad,
    // so an infinite or NaN grad still gives NaN there (-1 / x.norm() of a zero x).
    if (p == 0.0) return;
    Tensor out;
    if (p == 1.0) {
      out = mul(gr, sign(self));
    } else if (p == 2.0) {
      out = mul(gr, masked_fill(div(self, r), eq(r, 0.0), 0));
    } else if (std::isinf(p)) {
      // the extreme entries share the gradient; a NaN entry is one of them (the norm is NaN)
      Tensor self_abs = abs(self);
      Tensor mask = logical_or(eq(self_abs, r), isnan(self_abs));
      Tensor count = ExpandReduced(sum(mask, dims, true), sizes, dims, true);
      out = mul(sign(self), mul(div(gr, count), mask));
    } else if (p < 1.0) {
      // sign(x) |x|^(p-1) ||x||^(1-p), 0 where x is 0 (|x|^(p-1) is inf there), as PyTorch's
      Tensor scaled = mul(sign(self), masked_fill(pow(abs(self), p - 1.0), eq(self, 0.0), 0));
      out = mul(mul(scaled, gr), pow(r, 1.0 - p));
    } else {
      // x |x|^(p-2) / ||x||^(p-1) (sign(x) |x|^(p-1) below 2, finite at 0), 0 where the norm is 0
      Tensor scaled = p < 2.0 ? mul(sign(self), pow(abs(self), p - 1.0)) : mul(self, pow(abs(self), p - 2.0));
      out = mul(scaled, masked_fill(div(gr, pow(r, p - 1.0)), eq(r, 0.0), 0));
    }
    g["self"] = out;
  });
  d.Def("_softmax", {"result"}, [](Ctx& c, Grads& g) {
    g["self"] = CallOp<Tensor>(KILN_OP("aten::_softmax_backward_data"), c.grad(), c.result(), c.i64("dim"),
                               c.dtype("self"));
  });
  d.Def("_log_softmax", {"result"}, [](Ctx& c, Grads& g) {
    g["self"] = CallOp<Tensor>(KILN_OP("aten::_log_softmax_backward_data"), c.grad(), c.result(), c.i64("dim"),
                               c.dtype("self"));
  });
  d.Def("cumsum", {}, [](Ctx& c, Grads& g) {
    if (c.dim("self") == 0) { g["self"] = c.grad(); return; }
    int64_t dim = WrapDim(c.i64("dim"), c.dim("self"));
    g["self"] = ops::flip(ops::cumsum(ops::flip(c.grad(), {dim}), dim), {dim});
  });
  // cumprod: dx_i = sum_{j>=i} grad_j * prod_{k<=j, k!=i} x_k. Without zeros that is
  // reverse_cumsum(grad * out)_i / x_i. With zeros (z = a line's first zero): positions before z
  // keep that form, z itself gets reverse_cumsum(grad * cumprod(x with x_z = 1))_z, later ones 0.
  // The zero-safe form is used always: on a line without zeros it reduces to rev / x. It used to
  // be skipped after reading any(x == 0) from memory, which fake tensors (compiled backward) do
  // not have: kiln.compile of a cumprod's backward dereferenced a null pointer.
  d.Def("cumprod", {"self", "result"}, [](Ctx& c, Grads& g) {
    if (c.dim("self") == 0) { g["self"] = c.grad(); return; }
    int64_t dim = WrapDim(c.i64("dim"), c.dim("self"));
    auto reverse_cumsum = [dim](const Tensor& t) { return ops::flip(ops::cumsum(ops::flip(t, {dim}), dim), {dim}); };
    Tensor x = c.input("self");
    Tensor rev = reverse_cumsum(mul(c.grad(), c.result()));
    Tensor is_zero = eq(x, 0.0);
    Tensor zeros_so_far = ops::cumsum(to(is_zero, ScalarType::Int64), dim);
    Tensor first_zero = logical_and(is_zero, eq(zeros_so_far, Scalar(int64_t(1))));
    Tensor at_or_after = gt(zeros_so_far, Scalar(int64_t(0)));
    Tensor before = div(rev, where(is_zero, 1.0, x));
    Tensor x_without_first = where(first_zero, 1.0, x);
    Tensor at_first = reverse_cumsum(mul(c.grad(), cumprod(x_without_first, dim)));
    g["self"] = where(at_or_after, where(first_zero, at_first, 0.0), before);
  });
}

}  // namespace kiln::autograd
