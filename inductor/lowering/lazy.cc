// inductor/lowering/lazy.cc: lazy values from C++ element functions (lazy.h).
#include "inductor/lowering/lazy.h"

#include <algorithm>
#include <utility>

#include "inductor/scheduler/realization.h"
#include "runtime/error.h"

namespace kiln::inductor::lowering {

using codegen::ExprPtr;

Trace::Trace() : traced_(std::make_shared<ir::Traced>()) {}

ExprPtr Trace::Read(const std::shared_ptr<ir::Value>& value, Indices index, std::optional<codegen::DType> as) {
  const codegen::DType own = ir::KernelDType(value->dtype());
  auto& inputs = traced_->inputs;
  if (std::find(inputs.begin(), inputs.end(), value) == inputs.end()) inputs.push_back(value);
  ExprPtr e = tracer_.Read(value->handle(), std::move(index));
  return as && *as != own ? codegen::Expr::Cast(std::move(e), *as) : e;
}

ExprPtr Trace::Inline(const std::shared_ptr<ir::Pointwise>& value, Indices index) {
  traced_->inlined.push_back(value);
  ir::Placement at;
  at.dims = std::move(index);
  return tracer_.Inline(value->body(), at);
}

ExprPtr Trace::ValueAt(const std::shared_ptr<ir::Value>& value, Indices index) {
  if (value->kind() == ir::Value::Kind::kPointwise)
    return Inline(std::static_pointer_cast<ir::Pointwise>(value), std::move(index));
  return Read(value, std::move(index));
}

std::shared_ptr<const ir::Traced> Trace::Finish(ExprPtr expr) {
  traced_->body = std::make_shared<ir::Body>(tracer_.Finish(std::move(expr)));
  return std::exchange(traced_, std::make_shared<ir::Traced>());
}

Indices Variables(size_t n) {
  Indices idx;
  idx.reserve(n);
  for (size_t d = 0; d < n; ++d) idx.push_back(ir::Affine::Var(static_cast<int>(d)));
  return idx;
}

int64_t WrapDim(int64_t d, size_t rank) {
  const auto n = static_cast<int64_t>(rank);
  KILN_CHECK_VALUE(n > 0 || d == 0 || d == -1, "inductor: dimension ", d, " of a 0-d value");
  return n == 0 ? 0 : ((d % n) + n) % n;
}

const Op& AtenOp(const char* full_name) { return Registry::Get().FindOrThrow(full_name); }

Indices BroadcastIndices(const Indices& idx, const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  const size_t lead = out.size() - in.size();
  Indices result;
  result.reserve(in.size());
  for (size_t d = 0; d < in.size(); ++d)
    result.push_back(in[d] == 1 && out[lead + d] != 1 ? ir::Affine(0) : idx[lead + d]);
  return result;
}

std::shared_ptr<ir::Pointwise> LazyPointwise(ScalarType dtype, std::vector<int64_t> shape, std::set<std::string> ops,
                                             const ElementFn& fn) {
  Trace trace;
  ExprPtr e = fn(trace, Variables(shape.size()));
  auto value = std::make_shared<ir::Pointwise>(dtype, std::move(shape), trace.Finish(std::move(e)));
  value->ops = std::move(ops);
  return value;
}

std::shared_ptr<ir::Reduction> LazyReduction(ScalarType dtype, const std::vector<int64_t>& shape, int axis,
                                             const std::string& reduce, std::set<std::string> ops, const SourceFn& fn,
                                             ExprPtr finish) {
  std::vector<int64_t> kept = shape, keepdim_shape = shape;
  kept.erase(kept.begin() + axis);
  keepdim_shape[axis] = 1;
  Trace trace;
  ExprPtr e = fn(trace, Variables(kept.size()), ir::Affine::Var(ir::kReduced));
  auto value = std::make_shared<ir::Reduction>(dtype, std::move(kept), shape[axis], reduce, trace.Finish(std::move(e)),
                                               std::move(keepdim_shape), std::move(finish));
  value->axis = axis;
  value->ops = std::move(ops);
  if (auto* graph = scheduler::Realization::Current()) graph->reductions.push_back(value);
  return value;
}

}  // namespace kiln::inductor::lowering
