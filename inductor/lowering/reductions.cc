// inductor/lowering/reductions.cc: reductions lowered to the loop IR (reductions.h).
//
// Every element function below names its reads in the order the body makes them (a kernel numbers
// its buffers in that order), never inside one call's arguments, whose order C++ leaves open.
#include "inductor/lowering/reductions.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <set>
#include <tuple>

#include "inductor/lowering/lazy.h"
#include "runtime/error.h"
#include "tensor/dispatcher.h"

namespace kiln::inductor::lowering {
namespace {

using codegen::DType;
using codegen::Expr;
using codegen::ExprPtr;
using codegen::OpCode;
using ir::Affine;
using ir::Pointwise;
using ir::Reduction;

constexpr double kInf = std::numeric_limits<double>::infinity();

ExprPtr Float(double v, DType t) { return Expr::Const(v, t); }
ExprPtr CastTo(ExprPtr e, DType from, DType to) { return from == to ? e : Expr::Cast(std::move(e), to); }

// The dtype of partial results towards a `dtype` result (float32 for bfloat16), kept unrounded.
ScalarType AccDtype(ScalarType t) { return t == ScalarType::BFloat16 ? ScalarType::Float32 : t; }

// The axes `dims` names, sorted, each once; every axis where it names none.
std::vector<int> ReducedAxes(size_t n, const Dims& dims) {
  std::set<int> axes;
  if (!dims || dims->empty()) {
    for (size_t d = 0; d < n; ++d) axes.insert(static_cast<int>(d));
  } else if (n > 0) {
    for (int64_t d : *dims) axes.insert(static_cast<int>(WrapDim(d, n)));
  }
  return {axes.begin(), axes.end()};
}

bool Among(const std::vector<int>& axes, size_t d) { return std::count(axes.begin(), axes.end(), static_cast<int>(d)) != 0; }

// `shape` with each of `axes` of size 1 (a keepdim result's).
std::vector<int64_t> KeepShape(std::vector<int64_t> shape, const std::vector<int>& axes) {
  for (int a : axes) shape[a] = 1;
  return shape;
}

// kept indices with `r` at `axis`: a reduction's source index.
Indices WithAxis(Indices kept, int axis, const Affine& r) {
  kept.insert(kept.begin() + axis, r);
  return kept;
}

// indices of a keepdim result from those of the full shape (0 along `axes`).
Indices AtReduced(Indices idx, const std::vector<int>& axes) {
  for (int a : axes) idx[a] = Affine(0);
  return idx;
}

// indices of a keepdim result of `n` dimensions from those of the result without `axes`.
Indices Unsqueezed(const Indices& idx, const std::vector<int>& axes, size_t n) {
  Indices full;
  size_t k = 0;
  for (size_t d = 0; d < n; ++d) full.push_back(Among(axes, d) ? Affine(0) : idx.at(k++));
  return full;
}

// The reduced axes of a merged view, and indices into its keepdim result from the original's.
std::vector<int> MergedAxes(const scheduler::Merged& m) {
  std::vector<int> axes;
  for (size_t k = 0; k < m.reduced.size(); ++k)
    if (m.reduced[k]) axes.push_back(static_cast<int>(k));
  return axes;
}

Indices ToMerged(const scheduler::Merged& m, const Indices& idx) {
  Indices out;
  for (size_t k = 0; k < m.runs.size(); ++k) out.push_back(m.reduced[k] ? Affine(0) : idx.at(m.runs[k][0]));
  return out;
}

// x with each run of adjacent reduced axes merged where its layout (a lazy value's: every load's)
// allows, as the graph has realized values now (MergeDims, Note [Realized as of]).
std::optional<scheduler::Merged> MergeReduced(GraphContext* graph, const ValuePtr& x, const std::vector<int>& axes) {
  if (x->kind() == ir::Value::Kind::kReduction) return std::nullopt;
  return scheduler::MergeDims(x, std::set<int>(axes.begin(), axes.end()),
                              graph != nullptr ? &graph->scheduler()->state : nullptr);
}

bool IsOuterReduction(const std::vector<int64_t>& shape, int axis) {
  int64_t inner = 1;
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  return shape[axis] >= 8 && inner >= 8;
}

// How a reduction accumulates and what it is called.
struct Reducer {
  std::string kind;  // sum, prod, max, min, max_last, min_last
  std::string name;  // the aten op's (kernel names)
  std::function<ExprPtr(ExprPtr)> finish;  // the value from the accumulator (a mean divides); unset: itself
  const Op* eager = nullptr;  // an op whose eager kernel may take an outer reduction (Note [Outer reductions])
};

ValuePtr Reduce(GraphContext* graph, ScalarType dtype, const std::vector<int64_t>& shape, const ValuePtr& x,
                const std::vector<int>& axes, bool keepdim, const Reducer& r);

// A reduction's result read in the original (keepdim or not) shape, from `red` computed over the
// merged view's keepdim shape.
ValuePtr ReadMerged(ScalarType dtype, const std::vector<int64_t>& shape, const ValuePtr& red,
                    const std::vector<int>& axes, bool keepdim, size_t n, const scheduler::Merged& merged) {
  auto value = LazyPointwise(dtype, shape, red->ops, [&](Trace& t, const Indices& idx) {
    return t.ValueAt(red, ToMerged(merged, keepdim ? idx : Unsqueezed(idx, axes, n)));
  });
  value->squeeze_of = red;
  return value;
}

// A reduction over several axes as one per axis, the last first, each keeping its axis (valid for
// sum, prod, max and min, and for mean, whose finish divides by the whole count at the end).
ValuePtr ReduceAxes(GraphContext* graph, ScalarType dtype, const std::vector<int64_t>& shape, const ValuePtr& x,
                    const std::vector<int>& axes, bool keepdim, const Reducer& r) {
  std::vector<int64_t> keep = x->shape();
  ValuePtr value = x;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int axis = axes[axes.size() - 1 - i];
    keep[axis] = 1;
    const bool last = i + 1 == axes.size();
    Reducer step = r;
    if (!last) step.finish = nullptr;
    value = Reduce(graph, last ? dtype : AccDtype(dtype), keep, value, {axis}, true, step);
  }
  if (keepdim) return value;
  auto result = LazyPointwise(dtype, shape, value->ops, [&](Trace& t, const Indices& idx) {
    return t.Read(value, Unsqueezed(idx, axes, keep.size()));
  });
  result->squeeze_of = value;
  return result;
}

ValuePtr Reduce(GraphContext* graph, ScalarType dtype, const std::vector<int64_t>& shape, const ValuePtr& x,
                const std::vector<int>& axes, bool keepdim, const Reducer& r) {
  if (axes.empty()) {  // a 0-d x: its one element, finished (a mean divides by 1)
    return MakePointwise(r.name, dtype, shape, {Operand{x, Scalar()}},
                         [&](std::vector<ExprPtr> xs) { return r.finish ? r.finish(xs[0]) : xs[0]; });
  }
  if (axes.size() > 1) {
    if (std::optional<scheduler::Merged> merged = MergeReduced(graph, x, axes)) {
      const std::vector<int> merged_axes = MergedAxes(*merged);
      ValuePtr red = Reduce(graph, dtype, KeepShape(merged->value->shape(), merged_axes), merged->value, merged_axes,
                            true, r);
      return ReadMerged(dtype, shape, red, axes, keepdim, x->shape().size(), *merged);
    }
    return ReduceAxes(graph, dtype, shape, x, axes, keepdim, r);
  }
  const int axis = axes[0];
  if (r.eager != nullptr && r.eager->has_outer_reduction_kernel(dtype) && IsOuterReduction(x->shape(), axis))
    throw Fallback("a reduction over an outer dim: eager's column accumulators (Note [Outer reductions])");
  // sum and prod accumulate in the result's compute type (float32 for bfloat16: a bfloat16
  // partial result read back would be rounded)
  std::optional<DType> load_as;
  if (r.kind == "sum" || r.kind == "prod") load_as = Opmath(ir::KernelDType(dtype));
  ExprPtr finish = r.finish ? r.finish(Expr::Load(0, codegen::Index{})) : nullptr;
  auto red = LazyReduction(dtype, x->shape(), axis, r.kind, With(x->ops, {r.name.c_str()}),
                           [&](Trace& t, const Indices& kept, const Affine& at) {
                             return t.Read(x, WithAxis(kept, axis, at), load_as);
                           }, finish);
  if (keepdim) return red;
  auto value = LazyPointwise(dtype, shape, red->ops, [&](Trace& t, const Indices& idx) {
    return t.Read(red, WithAxis(idx, axis, Affine(0)));
  });
  value->squeeze_of = red;
  return value;
}

// `value` (a keepdim-shaped lazy result) as the op's result: read in `compute` where given,
// post(expr) of it where given, with the reduced axes dropped unless keepdim.
ValuePtr DropAxes(ScalarType dtype, const std::vector<int64_t>& shape, const ValuePtr& value,
                  const std::vector<int>& axes, bool keepdim, const char* name,
                  const std::function<ExprPtr(ExprPtr)>& post = nullptr, std::optional<DType> compute = std::nullopt) {
  const DType d = ir::KernelDType(dtype);
  const size_t n = value->shape().size();
  return LazyPointwise(dtype, shape, With(value->ops, {name}), [&](Trace& t, const Indices& idx) {
    ExprPtr e = t.Read(value, keepdim ? idx : Unsqueezed(idx, axes, n), compute);
    if (post) e = post(e);
    return compute ? CastTo(e, *compute, d) : e;
  });
}

// The number of elements where test(a) (a bool expression) holds along `axes`: int64, keepdim.
ValuePtr Count(GraphContext* graph, const ValuePtr& x, const std::vector<int>& axes,
               const std::function<ExprPtr(ExprPtr)>& test, const char* name) {
  auto hits = MakePointwise(name, ScalarType::Bool, x->shape(), {Operand{x, Scalar()}},
                            [&](std::vector<ExprPtr> xs) { return test(xs[0]); }, ir::KernelDType(x->dtype()));
  return Reduce(graph, ScalarType::Int64, KeepShape(x->shape(), axes), hits, axes, true, Reducer{"sum", name});
}

ExprPtr Nonzero(ExprPtr a) { return Expr::Cast(std::move(a), DType::Bool); }  // NaN counts as nonzero, as in C++

// Note [Shifted means]
// A row's mean is computed as K + sum(x - K) / n with K its first element (0 where that is not
// finite), its squared deviations then from that mean. Equal finite elements then have exactly
// their value as mean (x - K is 0) and a variance of exactly 0, as eager's Welford gives: sum / n
// can be an ulp off them, so std of a constant column was 4e-8 and x % std finite where eager's
// is NaN (fuzz seed 191, program 3329), and layer norm of a constant row 3.8e-5 instead of 0 (fuzz
// seed 901, program 4712). Over several axes the partial means combine the same way, shifted by
// the first of them (std of an expanded scalar had a gradient of 1.04 where eager's is 0: fuzz
// seed 931, program 1624). This replaced a max and a min per row that found the constant rows:
// two more passes over each row, which made the digits CNN's batch-norm statistics slower than
// eager's. The shift also keeps the sum small where the values sit far from 0.

// The lazy mean along `axis` of `shape` of element(trace, kept, r): a Pointwise over the loop
// space of its one Reduction, the shifted sum.
std::shared_ptr<Pointwise> ShiftedMean(ScalarType dtype, const std::vector<int64_t>& shape, int axis,
                                       const SourceFn& element, const std::set<std::string>& ops) {
  const DType dt = ir::KernelDType(dtype);
  const int64_t extent = shape[axis];
  auto shift = [&](Trace& t, const Indices& kept) -> ExprPtr {
    if (extent == 0) return Float(0.0, dt);  // no first element to read
    ExprPtr first = element(t, kept, Affine(0));
    return Where(Binary(OpCode::kLt, Unary(OpCode::kAbs, first), Float(kInf, dt)), first, Float(0.0, dt));
  };
  auto total = LazyReduction(dtype, shape, axis, "sum", ops, [&](Trace& t, const Indices& kept, const Affine& r) {
    ExprPtr e = element(t, kept, r);
    return Binary(OpCode::kSub, e, shift(t, kept));
  });
  auto mean = LazyPointwise(dtype, KeepShape(shape, {axis}), ops, [&](Trace& t, const Indices& idx) {
    Indices kept = idx;
    kept.erase(kept.begin() + axis);
    ExprPtr s = t.Read(total, idx);
    ExprPtr k = shift(t, kept);
    if (extent == 0) return Binary(OpCode::kDiv, s, Float(0.0, dt));  // 0 / 0: NaN, as eager's mean of nothing
    // s == 0: K itself, so a row of -0. keeps its sign (K + 0. is +0.)
    return Where(Binary(OpCode::kEq, s, Float(0.0, dt)), k,
                 Binary(OpCode::kAdd, k, Binary(OpCode::kDiv, s, Float(static_cast<double>(extent), dt))));
  });
  mean->space = total->Space();
  return mean;
}

// Squared deviations from `mean` (a value of the same loop) summed along `axis`.
std::shared_ptr<Reduction> SquaredDeviations(ScalarType dtype, const std::vector<int64_t>& shape, int axis,
                                             const SourceFn& element, const std::shared_ptr<Pointwise>& mean) {
  return LazyReduction(dtype, shape, axis, "sum", {"var_mean"}, [&](Trace& t, const Indices& kept, const Affine& r) {
    ExprPtr e = element(t, kept, r);
    ExprPtr d = Binary(OpCode::kSub, e, t.Inline(mean, WithAxis(kept, axis, Affine(0))));
    return Binary(OpCode::kMul, d, d);
  });
}

// Lazy (mean, m2) along one axis of x: values of reductions of the same loop, so one kernel.
std::pair<std::shared_ptr<Pointwise>, ValuePtr> RowMeanM2(const ValuePtr& x, int axis, ScalarType sd) {
  const DType as = ir::KernelDType(sd);
  SourceFn element = [&](Trace& t, const Indices& kept, const Affine& r) {
    return t.Read(x, WithAxis(kept, axis, r), as);
  };
  auto mean = ShiftedMean(sd, x->shape(), axis, element, With(x->ops, {"var_mean"}));
  return {mean, SquaredDeviations(sd, x->shape(), axis, element, mean)};
}

// Partial statistics (mean and m2 over `partial` elements each, keepdim shape `shape`) realized
// by one kernel, then combined along `axis` as lazy (mean, m2), as in Chan's parallel form of
// Welford's update: the mean of the means, and the sum of the m2s plus `partial` times the
// squared deviations of the means.
std::pair<std::shared_ptr<Pointwise>, ValuePtr> ChanCombine(GraphContext* graph, const std::shared_ptr<Pointwise>& mean,
                                                             const ValuePtr& m2, const std::vector<int64_t>& shape,
                                                             int axis, int64_t partial, ScalarType sd) {
  if (graph == nullptr) throw Fallback("a variance over axes that do not merge, outside a graph");
  const std::vector<std::shared_ptr<ir::Buffer>> bufs = graph->scheduler()->RealizeReductions({mean, m2}, *mean->space);
  const std::shared_ptr<ir::Buffer> mean_buf = bufs.at(0), m2_buf = bufs.at(1);
  SourceFn means = [&](Trace& t, const Indices& kept, const Affine& r) { return t.Read(mean_buf, WithAxis(kept, axis, r)); };
  auto new_mean = ShiftedMean(sd, shape, axis, means, {"var_mean"});
  auto dev = SquaredDeviations(sd, shape, axis, means, new_mean);
  auto m2_sum = LazyReduction(sd, shape, axis, "sum", {"var_mean"}, [&](Trace& t, const Indices& kept, const Affine& r) {
    return t.Read(m2_buf, WithAxis(kept, axis, r));
  });
  const DType dt = ir::KernelDType(sd);
  auto combined = LazyPointwise(sd, KeepShape(shape, {axis}), {"var_mean"}, [&](Trace& t, const Indices& idx) {
    ExprPtr sum = t.Read(m2_sum, idx);
    ExprPtr spread = t.Read(dev, idx);
    return Binary(OpCode::kAdd, sum, Binary(OpCode::kMul, Float(static_cast<double>(partial), dt), spread));
  });
  combined->space = m2_sum->Space();
  return {new_mean, combined};
}

std::optional<ir::LoopSpace> SpaceOf(const ValuePtr& v) {
  if (v->kind() == ir::Value::Kind::kReduction) return static_cast<const Reduction&>(*v).Space();
  if (v->kind() == ir::Value::Kind::kPointwise) return static_cast<const Pointwise&>(*v).space;
  return std::nullopt;
}

// A statistic computed in the (merged) keepdim shape, seen as the op's result.
std::shared_ptr<Pointwise> FromKeepdim(ScalarType dtype, const std::vector<int64_t>& shape,
                                       const std::shared_ptr<Pointwise>& value, const std::vector<int>& axes,
                                       bool keepdim, size_t n, const std::optional<scheduler::Merged>& merged) {
  if (keepdim && !merged) return value;
  auto result = LazyPointwise(dtype, shape, value->ops, [&](Trace& t, const Indices& idx) {
    Indices full = keepdim ? idx : Unsqueezed(idx, axes, n);
    return t.Inline(value, merged ? ToMerged(*merged, full) : full);
  });
  result->squeeze_of = value;
  return result;
}

ValuePtr Mean(GraphContext* graph, ScalarType dtype, const std::vector<int64_t>& shape, const ValuePtr& x,
              const std::vector<int>& axes, bool keepdim) {
  const DType d = Opmath(ir::KernelDType(dtype));  // a bfloat16 count above 256 would be rounded
  if (graph != nullptr) {
    auto known = graph->means.find({x->handle(), axes});
    if (known != graph->means.end() && known->second.value->dtype() == dtype)  // computed with a variance already
      return FromKeepdim(dtype, shape, known->second.value, axes, keepdim, x->shape().size(), known->second.merged);
  }
  int64_t count = 1;
  for (int a : axes) count *= x->shape()[a];
  Reducer r{"sum", "mean", [=](ExprPtr acc) { return Binary(OpCode::kDiv, acc, Float(static_cast<double>(count), d)); },
            &AtenOp("aten::mean.dim")};
  return Reduce(graph, dtype, shape, x, axes, keepdim, r);
}

}  // namespace

ValuePtr LowerReduce(GraphContext* graph, const std::string& name, ScalarType dtype, std::vector<int64_t> shape,
                     const ValuePtr& x, const Dims& dims, bool keepdim) {
  const std::vector<int> axes = ReducedAxes(x->shape().size(), dims);
  if (name == "mean") return Mean(graph, dtype, shape, x, axes, keepdim);
  Reducer r;
  if (name == "sum") {
    r = {"sum", "sum", nullptr, &AtenOp("aten::sum.dim_IntList")};
  } else if (name == "amax" || name == "amin") {
    r = {name == "amax" ? "max" : "min", name, nullptr, &AtenOp(name == "amax" ? "aten::amax" : "aten::amin")};
  } else if (name == "prod") {
    r = {"prod", "prod"};
  } else if (name == "max" || name == "min") {  // over every element: the later of equal values
    r = {name + "_last", name};
  } else {
    KILN_CHECK_VALUE(false, "inductor: no reduction named '", name, "'");
  }
  return Reduce(graph, dtype, shape, x, axes, keepdim, r);
}

ValuePtr LowerAnyAll(GraphContext* graph, bool any, ScalarType dtype, std::vector<int64_t> shape, const ValuePtr& x,
                     const Dims& dims, bool keepdim) {
  const std::vector<int> axes = ReducedAxes(x->shape().size(), dims);
  const char* name = any ? "any" : "all";
  ValuePtr counts = Count(graph, x, axes, [&](ExprPtr a) {
    return any ? Nonzero(std::move(a)) : Unary(OpCode::kLogicalNot, Nonzero(std::move(a)));
  }, name);
  return DropAxes(dtype, shape, counts, axes, keepdim, name, [&](ExprPtr n) {
    return Binary(any ? OpCode::kGt : OpCode::kEq, std::move(n), Expr::ConstInt(0, DType::I64));
  });
}

ValuePtr LowerCountNonzero(GraphContext* graph, ScalarType dtype, std::vector<int64_t> shape, const ValuePtr& x,
                           const Dims& dims) {
  const std::vector<int> axes = ReducedAxes(x->shape().size(), dims);
  ValuePtr counts = Count(graph, x, axes, Nonzero, "count_nonzero");
  return DropAxes(dtype, shape, counts, axes, false, "count_nonzero");
}

ValuePtr LowerArgReduce(bool max, ScalarType dtype, std::vector<int64_t> shape, ValuePtr x,
                        std::optional<int64_t> dim, bool keepdim) {
  const std::string kind = max ? "argmax" : "argmin";
  std::vector<int64_t> in = x->shape();
  if (in.empty())
    return LazyPointwise(dtype, shape, {kind}, [](Trace&, const Indices&) { return Expr::ConstInt(0, DType::I64); });
  if (!dim && in.size() > 1) {  // over every element: the buffer read flat
    auto buf = x->kind() == ir::Value::Kind::kBuffer ? std::static_pointer_cast<ir::Buffer>(x) : nullptr;
    if (buf == nullptr || !buf->IsContiguous())
      throw ViewOfUnrealized(StrCat("view of a non-contiguous or unrealized value (", kind, " over every axis reads it flat)"));
    in = {x->numel()};
    x = std::make_shared<ir::Buffer>(std::nullopt, x->dtype(), in, std::vector<int64_t>{1}, buf->offset(), buf);
  }
  const int axis = dim ? static_cast<int>(WrapDim(*dim, in.size())) : 0;
  auto red = LazyReduction(dtype, in, axis, kind, With(x->ops, {kind.c_str()}),
                           [&](Trace& t, const Indices& kept, const Affine& r) { return t.Read(x, WithAxis(kept, axis, r)); });
  if (!dim)  // the result is 0-d, or all ones with keepdim
    return LazyPointwise(dtype, shape, red->ops, [&](Trace& t, const Indices&) { return t.Read(red, {Affine(0)}); });
  if (keepdim) return red;
  return DropAxes(dtype, shape, red, {axis}, false, kind.c_str());
}

ValuePtr LowerLogsumexp(GraphContext* graph, ScalarType dtype, std::vector<int64_t> shape, const ValuePtr& x,
                        const Dims& dims, bool keepdim) {
  const std::vector<int> axes = ReducedAxes(x->shape().size(), dims);
  const ScalarType acc = AccDtype(dtype);
  const DType c = Opmath(ir::KernelDType(dtype));
  const std::vector<int64_t> keep = KeepShape(x->shape(), axes);
  ValuePtr mx = Reduce(graph, acc, keep, x, axes, true, Reducer{"max", "amax", nullptr, &AtenOp("aten::amax")});
  auto shift = [&](Trace& t, const Indices& idx) {  // the max, 0 where it is infinite
    ExprPtr m = t.Read(mx, idx, c);
    return Where(Binary(OpCode::kEq, Unary(OpCode::kAbs, m), Float(kInf, c)), Float(0.0, c), m);
  };
  auto exps = LazyPointwise(acc, x->shape(), With(x->ops, {"exp"}), [&](Trace& t, const Indices& idx) {
    ExprPtr v = t.Read(x, idx, c);
    return Unary(OpCode::kExp, Binary(OpCode::kSub, v, shift(t, AtReduced(idx, axes))));
  });
  ValuePtr total = Reduce(graph, acc, keep, exps, axes, true, Reducer{"sum", "sum", nullptr, &AtenOp("aten::sum.dim_IntList")});
  std::set<std::string> ops = total->ops;
  ops.insert(mx->ops.begin(), mx->ops.end());
  auto result = LazyPointwise(acc, keep, With(ops, {"log", "logsumexp"}), [&](Trace& t, const Indices& idx) {
    ExprPtr log_sum = Unary(OpCode::kLog, t.Read(total, idx, c));
    return Binary(OpCode::kAdd, log_sum, shift(t, idx));
  });
  return DropAxes(dtype, shape, result, axes, keepdim, "logsumexp");
}

ValuePtr LowerVectorNorm(GraphContext* graph, ScalarType dtype, std::vector<int64_t> shape, const ValuePtr& x,
                         double ord, const Dims& dims, bool keepdim) {
  const std::vector<int> axes = ReducedAxes(x->shape().size(), dims);
  const ScalarType acc = AccDtype(dtype);
  const DType c = Opmath(ir::KernelDType(dtype));
  std::string kind = "sum";
  std::function<ExprPtr(ExprPtr)> term, post;
  if (ord == kInf || ord == -kInf) {
    kind = ord > 0 ? "max" : "min";
    term = [](ExprPtr a) { return Unary(OpCode::kAbs, a); };
  } else if (ord == 0) {
    term = [c](ExprPtr a) { return Expr::Cast(Binary(OpCode::kNe, a, Float(0.0, c)), c); };
  } else if (ord == 1) {
    term = [](ExprPtr a) { return Unary(OpCode::kAbs, a); };
  } else if (ord == 2) {
    term = [](ExprPtr a) { return Binary(OpCode::kMul, a, a); };
    post = [](ExprPtr s) { return Unary(OpCode::kSqrt, s); };
  } else {
    term = [c, ord](ExprPtr a) { return Binary(OpCode::kPow, Unary(OpCode::kAbs, a), Float(ord, c)); };
    post = [c, ord](ExprPtr s) { return Binary(OpCode::kPow, s, Float(1.0 / ord, c)); };
  }
  auto terms = MakePointwise("linalg_vector_norm", acc, x->shape(), {Operand{x, Scalar()}},
                             [&](std::vector<ExprPtr> xs) { return term(xs[0]); }, c);
  ValuePtr total = Reduce(graph, acc, KeepShape(x->shape(), axes), terms, axes, true, Reducer{kind, "linalg_vector_norm"});
  return DropAxes(dtype, shape, total, axes, keepdim, "linalg_vector_norm", post, c);
}

std::shared_ptr<Pointwise> LowerVar(GraphContext* graph, ScalarType dtype, std::vector<int64_t> shape,
                                    const ValuePtr& x, const Dims& dims, std::optional<double> correction,
                                    bool keepdim) {
  const double corr = correction.value_or(1.0);
  const size_t n = x->shape().size();
  const DType od = ir::KernelDType(dtype);
  if (n == 0) {  // one element: no deviation, divided by max(0, 1 - correction) (0 / 0: NaN, as eager)
    // (a - a)^2: +0 (a * 0 was -0 for a negative a, and 1 / var then -inf), NaN for inf or NaN
    return MakePointwise("var", dtype, std::move(shape), {Operand{x, Scalar()}}, [&](std::vector<ExprPtr> xs) {
      ExprPtr zero = Binary(OpCode::kSub, xs[0], xs[0]);
      return Binary(OpCode::kDiv, Binary(OpCode::kMul, zero, zero), Float(std::max(1.0 - corr, 0.0), od));
    });
  }
  const std::vector<int> axes = ReducedAxes(n, dims);
  int64_t count = 1;
  for (int a : axes) count *= x->shape()[a];
  const ScalarType sd = AccDtype(dtype);
  const DType sdt = ir::KernelDType(sd);
  const std::optional<scheduler::Merged> merged = MergeReduced(graph, x, axes);
  const ValuePtr src = merged ? merged->value : x;
  std::vector<int> order = merged ? MergedAxes(*merged) : axes;
  std::reverse(order.begin(), order.end());  // the innermost first
  std::vector<int64_t> keep = src->shape();
  std::shared_ptr<Pointwise> mean;
  ValuePtr m2;
  std::tie(mean, m2) = RowMeanM2(src, order[0], sd);
  int64_t partial = keep[order[0]];
  keep[order[0]] = 1;
  for (size_t i = 1; i < order.size(); ++i) {
    std::tie(mean, m2) = ChanCombine(graph, mean, m2, keep, order[i], partial, sd);
    partial *= keep[order[i]];
    keep[order[i]] = 1;
  }
  ExprPtr denom = Float(static_cast<double>(std::max(static_cast<double>(count) - corr, 0.0)), sdt);
  auto var = LazyPointwise(dtype, keep, With(x->ops, {"var"}), [&](Trace& t, const Indices& idx) {
    return CastTo(Binary(OpCode::kDiv, t.ValueAt(m2, idx), denom), sdt, od);
  });
  var->space = SpaceOf(m2);
  // The mean comes with the variance (GraphContext::means): one kernel stores both.
  auto mean_keep = LazyPointwise(dtype, keep, With(x->ops, {"mean"}), [&](Trace& t, const Indices& idx) {
    return CastTo(t.ValueAt(mean, idx), sdt, od);
  });
  mean_keep->space = var->space;
  ir::Value::MakeGroup({var, mean_keep});
  if (graph != nullptr) graph->means[{x->handle(), axes}] = {mean_keep, merged};
  return FromKeepdim(dtype, shape, var, axes, keepdim, n, merged);
}

std::shared_ptr<Pointwise> LowerStd(GraphContext* graph, ScalarType dtype, std::vector<int64_t> shape,
                                    const ValuePtr& x, const Dims& dims, std::optional<double> correction,
                                    bool keepdim) {
  const DType d = ir::KernelDType(dtype);
  auto var = LowerVar(graph, AccDtype(dtype), shape, x, dims, correction, keepdim);
  const DType vd = ir::KernelDType(var->dtype());
  return LazyPointwise(dtype, std::move(shape), With(var->ops, {"std"}), [&](Trace& t, const Indices& idx) {
    return CastTo(Unary(OpCode::kSqrt, t.Inline(var, idx)), vd, d);
  });
}

ValuePtr LowerSoftmax(GraphContext* graph, bool log, ScalarType dtype, std::vector<int64_t> shape, const ValuePtr& x,
                      int64_t dim) {
  const char* name = log ? "log_softmax" : "softmax";
  const DType d = ir::KernelDType(dtype);
  // of integers eager refuses, but an empty one succeeds in its dtype (fuzz seed 1701, program
  // 3319: the lowering's float body read as int64 crashed the code generator)
  if (!IsFloat(d)) throw Fallback(StrCat(name, " of ", codegen::DTypeName(d), " values runs its eager kernel"));
  const size_t n = x->shape().size();
  if (n == 0) {  // one element: 1 (log: 0), NaN for a NaN or an infinity as exp(x - x) gives
    return MakePointwise(name, dtype, std::move(shape), {Operand{x, Scalar()}}, [&](std::vector<ExprPtr> xs) {
      ExprPtr zero = Binary(OpCode::kSub, xs[0], xs[0]);
      return log ? zero : Unary(OpCode::kExp, zero);
    });
  }
  const int axis = static_cast<int>(WrapDim(dim, n));
  const std::vector<int64_t>& in = x->shape();
  // the max in the compute dtype: a bfloat16 max, rounded, shifted the float32 values the
  // exponentials read, and the largest element of a row got exp(0.35) = 1.42 (fuzz seed 261,
  // program 6773: softmax of a fused x ** x)
  ValuePtr mx = Reduce(graph, AccDtype(dtype), KeepShape(in, {axis}), x, {axis}, true, Reducer{"max", "amax"});
  auto shifted = [&](Trace& t, const Indices& idx) {
    ExprPtr v = t.Read(x, idx, d);
    return Binary(OpCode::kSub, v, t.Read(mx, AtReduced(idx, {axis})));
  };
  auto exp_sum = LazyReduction(AccDtype(dtype), in, axis, "sum", {"exp", "sum"},
                               [&](Trace& t, const Indices& kept, const Affine& r) {
                                 return Unary(OpCode::kExp, shifted(t, WithAxis(kept, axis, r)));
                               });
  // bfloat16 over the last dim: the sum and its log rounded to bfloat16 as eager's kernel keeps
  // them (Note in tensor/ops/activation.cc's SoftmaxKernel; fuzz seed 371, program 3296)
  const bool round_log_sum = log && d == DType::BF16 && axis == static_cast<int>(n) - 1;
  return LazyPointwise(dtype, in, With(x->ops, {"amax", "exp", "sum", name}), [&](Trace& t, const Indices& idx) {
    ExprPtr s = t.Read(exp_sum, AtReduced(idx, {axis}));
    ExprPtr value;
    if (log) {
      ExprPtr log_sum = round_log_sum ? Expr::Cast(Unary(OpCode::kLog, Expr::Cast(s, DType::BF16)), DType::BF16)
                                      : Unary(OpCode::kLog, s);
      value = Binary(OpCode::kSub, shifted(t, idx), log_sum);
    } else {
      // times the reciprocal of the sum, as eager's kernels (a multiply per element, 1/sum
      // hoisted out of the loop; a division per element cost 1.3x eager's time)
      value = Binary(OpCode::kMul, Unary(OpCode::kExp, shifted(t, idx)), Unary(OpCode::kReciprocal, s));
    }
    // read inline, the result is rounded as eager's is (Note [bfloat16 rounds at every op])
    return d == DType::BF16 ? Expr::Cast(value, DType::BF16) : value;
  });
}

}  // namespace kiln::inductor::lowering
