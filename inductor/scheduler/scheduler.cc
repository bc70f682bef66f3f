// inductor/scheduler/scheduler.cc: forming kernels from values (Note [Kernels formed at
// realization] in scheduler.h).
#include "inductor/scheduler/scheduler.h"

#include <algorithm>
#include <utility>

#include "inductor/ir/strides.h"
#include "inductor/scheduler/fusion.h"
#include "inductor/scheduler/probe.h"
#include "runtime/error.h"

namespace kiln::inductor::scheduler {

using codegen::Expr;
using codegen::ExprPtr;
using ir::Affine;

namespace {

std::vector<Affine> Vars(size_t n) {
  std::vector<Affine> idx;
  idx.reserve(n);
  for (size_t k = 0; k < n; ++k) idx.push_back(Affine::Var(static_cast<int>(k)));
  return idx;
}

// A loop nest over `shape`: its last dimension the inner loop (r), the others outer (d0, d1, ...);
// a 0-d shape is one iteration.
struct LoopNest {
  std::vector<int64_t> outer;
  int64_t inner = 1;
  std::vector<Affine> vars;  // each dimension's loop variable
  explicit LoopNest(const std::vector<int64_t>& shape) : outer(shape) {
    if (shape.empty()) return;
    inner = shape.back();
    outer.pop_back();
    vars = Vars(outer.size());
    vars.push_back(Affine::Var(ir::kReduced));
  }
};

// Whether every index but `axis`'s is the loop variable of its position among them (d0, d1, ...).
bool IsIdentityExcept(const std::vector<Affine>& idx, int axis) {
  int k = 0;
  for (int d = 0; d < static_cast<int>(idx.size()); ++d) {
    if (d == axis) continue;
    if (idx[d] != Affine::Var(k++)) return false;
  }
  return true;
}

}  // namespace

// Collects one kernel's buffers, loops and accumulators while bodies are placed in it, and
// answers each read of a placed body (ir::Reader).
class KernelBuilder : public ir::Reader {
 public:
  KernelBuilder(Scheduler& s, std::vector<int64_t> outer, int64_t inner)
      : outer(std::move(outer)), inner(inner), s_(s) {}

  std::vector<int64_t> outer;
  int64_t inner;
  std::vector<std::shared_ptr<Buffer>> buffers;
  std::vector<codegen::Loop> loops;
  std::set<std::string> ops;

  int BufferIndex(const std::shared_ptr<Buffer>& buf) {
    for (size_t i = 0; i < buffers.size(); ++i)
      if (buffers[i] == buf) return static_cast<int>(i);
    buffers.push_back(buf);
    return static_cast<int>(buffers.size()) - 1;
  }

  codegen::Index Index(const Affine& offset) const { return ir::KernelIndex(offset, static_cast<int>(outer.size())); }

  // value's code at idx (over this kernel's loop variables), never its buffer.
  ExprPtr Place(const std::shared_ptr<Value>& value, const std::vector<Affine>& idx) {
    Placed(value);
    const auto& pw = static_cast<const Pointwise&>(*value);
    return ir::Instantiate(pw.body(), ir::Placement{idx, Affine(), false}, *this);
  }

  // A read of value `handle` at index in this kernel: a buffer's load; a reduction's value; a
  // lazy value's load from its buffer when a kernel computed it already (as of the read's
  // snapshot), else its body computed here.
  ExprPtr ReadValue(int64_t handle, const std::vector<Affine>& index, int64_t as_of) override {
    std::shared_ptr<Value> value = ir::ValueOf(handle);
    KILN_CHECK_VALUE(value != nullptr, "inductor: a body reads value ", handle, ", which no longer exists");
    switch (value->kind()) {
      case Value::Kind::kBuffer:
        return Load(std::static_pointer_cast<Buffer>(value), index);
      case Value::Kind::kReduction:
        return ReductionValue(std::static_pointer_cast<Reduction>(value), index);
      case Value::Kind::kPointwise:
        break;
    }
    if (std::shared_ptr<Buffer> buf = s_.state.AsOf(as_of).Get(*value)) return Load(buf, index);
    Placed(value);
    const auto& pw = static_cast<const Pointwise&>(*value);
    return ir::Instantiate(pw.body(), ir::Placement{index, Affine(), false}, *this, as_of);
  }

  ExprPtr Load(std::shared_ptr<Buffer> buf, const std::vector<Affine>& index) {
    const std::vector<int64_t> strides = buf->stride();
    // A kernel addresses memory from the data pointer it receives, with the view's strides in its
    // index: a view starting where its base starts is passed as the base (no wrapper view).
    while (buf->base() && buf->offset() == buf->base()->offset() && buf->dtype() == buf->base()->dtype() &&
           !(buf->name && s_.IsDefined(*buf->name)))
      buf = buf->base();
    const int k = BufferIndex(s_.Define(buf));
    return Expr::Load(k, Index(ir::ElementOffset(index, strides)));
  }

  // A reduction read at kept indices: its accumulator when it reduces along this kernel's inner
  // loop over the same outer iteration (fused), else a load of its realized buffer.
  ExprPtr ReductionValue(const std::shared_ptr<Reduction>& red, const std::vector<Affine>& kept_idx) {
    const bool fusable = red->kept() == outer && red->extent() == inner && IsIdentityExcept(kept_idx, red->axis.value_or(-1));
    std::shared_ptr<Buffer> done = s_.state.now.Get(*red);
    if (!fusable || done) return Load(done ? done : s_.Realize(red), kept_idx);
    auto it = std::find_if(accs_.begin(), accs_.end(), [&](const auto& a) { return a.first == red; });
    if (it == accs_.end()) {
      // the source first: reductions it reads get their loops (and ids) before this one
      Placed(red);
      ExprPtr expr = ir::Instantiate(red->source(), ir::Placement{Vars(outer.size()), Affine::Var(ir::kReduced), true},
                                     *this);
      const int acc = static_cast<int>(accs_.size());
      codegen::Stmt stmt;
      stmt.kind = codegen::Stmt::Kind::kReduce;
      stmt.acc_id = acc;
      KILN_CHECK_VALUE(codegen::ParseReduce(red->reduce(), &stmt.reduce), "inductor: unknown reduction '",
                       red->reduce(), "'");
      stmt.expr = std::move(expr);
      loops.push_back(codegen::Loop{red->extent(), {std::move(stmt)}});
      accs_.emplace_back(red, acc);
      ops.insert(red->ops.begin(), red->ops.end());
      it = accs_.end() - 1;
    }
    return red->Finished(Expr::Acc(it->second));
  }

  // (node position, stack trace) of the graph nodes whose code it computes, sorted.
  std::set<ir::Origin> Origins() const {
    std::set<ir::Origin> out;
    for (const auto& v : placed_) {
      std::set<ir::Origin> o = v->AllOrigins();
      out.insert(o.begin(), o.end());
    }
    return out;
  }

 private:
  void Placed(const std::shared_ptr<Value>& v) {
    if (std::find(placed_.begin(), placed_.end(), v) == placed_.end()) placed_.push_back(v);
  }

  Scheduler& s_;
  std::vector<std::pair<std::shared_ptr<Reduction>, int>> accs_;
  std::vector<std::shared_ptr<Value>> placed_;
};

std::optional<Merged> MergeDims(const std::shared_ptr<Value>& x, const std::set<int>& dims, Realization* state) {
  if (x->kind() == Value::Kind::kReduction) return std::nullopt;
  // the layouts to follow: a buffer's strides, or each load's element offset
  std::vector<Affine> layouts;
  if (x->kind() == Value::Kind::kBuffer) {
    layouts.push_back(ir::ElementOffset(Vars(x->shape().size()), static_cast<const Buffer&>(*x).stride()));
  } else {
    ProbeResult probe = Probe(*x, state);
    bool uses_index = false;
    codegen::ForEachExpr(*probe.expr, [&](const Expr& e) { uses_index = uses_index || e.kind == Expr::Kind::kIndex; });
    if (probe.reads_reduction || uses_index) return std::nullopt;  // the loop index itself is no memory layout
    layouts = std::move(probe.loads);
  }
  const std::vector<int64_t>& shape = x->shape();
  auto mergeable = [&](int d) {
    for (const Affine& layout : layouts)
      if (layout.Coeff(d - 1) != layout.Coeff(d) * shape[d]) return false;
    return true;
  };
  Merged m;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    if (!m.runs.empty() && dims.count(d) && m.reduced.back() && mergeable(d)) {
      m.runs.back().push_back(d);
    } else {
      m.runs.push_back({d});
      m.reduced.push_back(dims.count(d) != 0);
    }
  }
  if (m.runs.size() == shape.size()) return std::nullopt;
  std::vector<int64_t> merged_shape;
  if (x->kind() == Value::Kind::kBuffer) {
    auto buf = std::static_pointer_cast<Buffer>(x);
    std::vector<int64_t> merged_stride;
    for (const std::vector<int>& run : m.runs) {
      int64_t n = 1;
      for (int d : run) n *= shape[d];
      merged_shape.push_back(n);
      merged_stride.push_back(buf->stride()[run.back()]);
    }
    m.value = std::make_shared<Buffer>(std::nullopt, buf->dtype(), std::move(merged_shape), std::move(merged_stride),
                                       buf->offset(), buf);
    return m;
  }
  const auto& pw = static_cast<const Pointwise&>(*x);
  ir::Placement full;
  full.dims.assign(shape.size(), Affine(0));
  for (size_t k = 0; k < m.runs.size(); ++k) {
    int64_t n = 1;
    for (int d : m.runs[k]) n *= shape[d];
    merged_shape.push_back(n);
    full.dims[m.runs[k].back()] = Affine::Var(static_cast<int>(k));  // a run's index walks its last axis
  }
  // x as the probe saw it: values realized later are recomputed (Note [Realized as of])
  const int64_t as_of = state ? state->Snapshot(state->now) : -1;
  ir::Tracer tracer;
  auto traced = std::make_shared<ir::Traced>();
  traced->body = std::make_shared<ir::Body>(tracer.Finish(tracer.Inline(pw.body(), full, as_of)));
  traced->inlined = {x};
  m.value = std::make_shared<Pointwise>(x->dtype(), std::move(merged_shape), std::move(traced));
  m.value->ops = x->ops;
  return m;
}

std::shared_ptr<Buffer> Scheduler::NewBuffer(ScalarType dtype, std::vector<int64_t> shape,
                                             std::optional<std::vector<int64_t>> stride, int64_t offset) {
  std::vector<int64_t> strides = stride ? std::move(*stride) : ir::ContiguousStrides(shape);
  return std::make_shared<Buffer>("buf" + std::to_string(next_name_++), dtype, std::move(shape), std::move(strides),
                                  offset, Buffer::Source::kKernel);
}

std::shared_ptr<Buffer> Scheduler::Define(const std::shared_ptr<Buffer>& buf) {
  if (buf->source() == Buffer::Source::kInput || (buf->name && IsDefined(*buf->name))) return buf;
  if (buf->name) {
    auto it = deferred_.find(*buf->name);
    if (it != deferred_.end()) {  // its kernel is formed now, with the siblings lowered since
      KernelForReduction(it->second);
      return buf;
    }
  }
  if (buf->base()) {
    Define(buf->base());
    buf->name = "buf" + std::to_string(next_name_++);
    steps_.push_back(Step{Step::Kind::kView, buf, buf->base(), nullptr});
    MarkDefined(*buf->name);
  }
  return buf;
}

std::shared_ptr<Buffer> Scheduler::Realize(const std::shared_ptr<Value>& value) {
  if (value->kind() == Value::Kind::kBuffer) return Define(std::static_pointer_cast<Buffer>(value));
  if (std::shared_ptr<Buffer> hit = state.now.Get(*value)) return Define(hit);
  std::shared_ptr<Buffer> buf;
  if (value->kind() == Value::Kind::kReduction) {
    buf = KernelForReduction(std::static_pointer_cast<Reduction>(value));
  } else {
    auto pw = std::static_pointer_cast<Pointwise>(value);
    if (pw->squeeze_of) {
      buf = SqueezedView(Realize(pw->squeeze_of), pw->shape());
    } else if (pw->space) {
      std::vector<std::shared_ptr<Value>> group{value};
      for (const auto& v : value->Group())
        if (v != value && !state.now.Contains(*v)) group.push_back(v);
      buf = RealizeReductions(group, *pw->space)[0];
    } else {
      buf = KernelForPointwise(pw);
    }
  }
  state.now.Set(value, buf);
  return buf;
}

std::shared_ptr<Buffer> Scheduler::SqueezedView(const std::shared_ptr<Buffer>& buf, const std::vector<int64_t>& shape) {
  return Define(std::make_shared<Buffer>(std::nullopt, buf->dtype(), shape,
                                         ir::SqueezedStrides(buf->shape(), buf->stride(), shape), buf->offset(), buf));
}

std::shared_ptr<Buffer> Scheduler::KernelForPointwise(const std::shared_ptr<Pointwise>& value,
                                                      const std::optional<std::vector<int64_t>>& stride) {
  std::vector<std::shared_ptr<Value>> group{value};
  for (const auto& v : value->Group())
    if (v != value && !state.now.Contains(*v)) group.push_back(v);
  if (stride && group.size() == 1 && !ir::SameLayout(value->shape(), ir::ContiguousStrides(value->shape()), *stride))
    return KernelInLayout(value, *stride);
  std::vector<std::shared_ptr<Buffer>> outs;
  for (const auto& v : group) outs.push_back(NewBuffer(v->dtype(), value->shape()));
  if (group.size() == 1 && value->shape().size() >= 3) {
    // NCHW batch norm + SiLU: an inner loop of H * W = 64 elements instead of W = 8, whose per-row
    // overhead cost more than the vector work; the first dimension stays outer, for the thread pool
    std::set<int> trailing;
    for (int d = 1; d < static_cast<int>(value->shape().size()); ++d) trailing.insert(d);
    if (std::optional<Merged> merged = MergeDims(value, trailing, &state)) group[0] = merged->value;
  }
  const std::vector<int64_t> shape = group[0]->shape();  // the outputs are contiguous: merged dims store alike
  const LoopNest nest(shape);
  KernelBuilder kb(*this, nest.outer, nest.inner);
  const std::vector<Affine>& idx = nest.vars;
  const std::vector<int64_t> strides = ir::ContiguousStrides(shape);
  std::vector<codegen::Stmt> stmts;
  std::set<std::string> ops;
  for (size_t i = 0; i < group.size(); ++i) {
    ExprPtr expr = kb.Place(group[i], idx);  // inputs first: in_ptr0.. before out_ptr0, as Inductor numbers them
    codegen::Stmt store;
    store.kind = codegen::Stmt::Kind::kStore;
    store.buffer = kb.BufferIndex(outs[i]);
    store.index = kb.Index(ir::ElementOffset(idx, strides));
    store.expr = std::move(expr);
    stmts.push_back(std::move(store));
    ops.insert(group[i]->ops.begin(), group[i]->ops.end());
  }
  kb.loops.push_back(codegen::Loop{nest.inner, std::move(stmts)});
  Emit(kb, std::move(ops), outs);
  for (size_t i = 1; i < group.size(); ++i) state.now.Set(group[i], outs[i]);
  return outs[0];
}

std::shared_ptr<Buffer> Scheduler::KernelInLayout(const std::shared_ptr<Pointwise>& value,
                                                  const std::vector<int64_t>& stride) {
  std::optional<std::vector<int>> order = ir::DenseOrder(value->shape(), stride);
  if (!order) order = ir::GappedOrder(value->shape(), stride);
  KILN_CHECK_VALUE(order.has_value(), "inductor: a kernel cannot store into a layout that repeats or overlaps elements");
  std::vector<int64_t> loop_shape;
  for (int d : *order) loop_shape.push_back(value->shape()[d]);
  std::shared_ptr<Buffer> out = NewBuffer(value->dtype(), value->shape(), stride);
  const LoopNest nest(loop_shape);
  KernelBuilder kb(*this, nest.outer, nest.inner);
  const std::vector<Affine>& loop_vars = nest.vars;
  std::vector<Affine> idx(order->size());
  Affine out_index(0);
  for (size_t k = 0; k < order->size(); ++k) {
    const int d = (*order)[k];
    idx[d] = loop_vars[k];
    out_index += loop_vars[k].Scaled(value->shape()[d] != 1 ? stride[d] : 0);
  }
  codegen::Stmt store;
  store.kind = codegen::Stmt::Kind::kStore;
  store.expr = kb.Place(value, idx);
  store.buffer = kb.BufferIndex(out);
  store.index = kb.Index(out_index);
  kb.loops.push_back(codegen::Loop{nest.inner, {std::move(store)}});
  Emit(kb, value->ops, {out});
  return out;
}

std::shared_ptr<Buffer> Scheduler::Defer(const std::shared_ptr<Reduction>& red) {
  std::shared_ptr<Buffer> buf = NewBuffer(red->dtype(), red->shape());
  state.now.Set(red, buf);
  deferred_[*buf->name] = red;
  return buf;
}

std::shared_ptr<Buffer> Scheduler::KernelForReduction(const std::shared_ptr<Reduction>& red) {
  std::set<std::string> deferred;
  for (const auto& [name, _] : deferred_) deferred.insert(name);
  std::vector<std::shared_ptr<Value>> values{red};
  for (auto& sibling : SiblingReductions(*red, state, deferred, building_)) values.push_back(std::move(sibling));
  return RealizeReductions(values, red->Space())[0];
}

std::vector<std::shared_ptr<Buffer>> Scheduler::RealizeReductions(const std::vector<std::shared_ptr<Value>>& values,
                                                                  const ir::LoopSpace& space) {
  KILN_CHECK_VALUE(space.axis.has_value(), "inductor: a reduction loop without its reduced axis");
  // a deferred value has its buffer already; it is computed here, not loaded from there
  std::vector<std::shared_ptr<Buffer>> outs;
  for (const auto& v : values) {
    std::shared_ptr<Buffer> out = state.now.Pop(*v);
    outs.push_back(out ? out : NewBuffer(v->dtype(), v->shape()));
  }
  std::vector<const Buffer*> building;
  for (const auto& out : outs) {
    if (out->name) deferred_.erase(*out->name);
    if (std::find(building_.begin(), building_.end(), out.get()) == building_.end()) building.push_back(out.get());
  }
  building_.insert(building_.end(), building.begin(), building.end());
  struct Unbuild {
    std::vector<const Buffer*>& all;
    const std::vector<const Buffer*>& mine;
    ~Unbuild() {
      all.erase(std::remove_if(all.begin(), all.end(),
                               [&](const Buffer* b) { return std::find(mine.begin(), mine.end(), b) != mine.end(); }),
                all.end());
    }
  } unbuild{building_, building};

  const int axis = *space.axis;
  KernelBuilder kb(*this, space.kept, space.extent);
  const std::vector<Affine> kept_idx = Vars(space.kept.size());
  KILN_CHECK_VALUE(axis >= 0 && axis <= static_cast<int>(kept_idx.size()), "inductor: reduced axis ", axis, " of ",
                   kept_idx.size() + 1, " dimensions");
  std::vector<Affine> full(kept_idx.begin(), kept_idx.begin() + axis);
  full.push_back(Affine(0));
  full.insert(full.end(), kept_idx.begin() + axis, kept_idx.end());
  std::vector<codegen::Stmt> stmts;
  std::set<std::string> ops;
  for (size_t i = 0; i < values.size(); ++i) {
    const auto& v = values[i];
    // keepdim-shaped, or kept-shaped (a matmul template's output)
    const std::vector<Affine>& at = v->shape().size() == full.size() ? full : kept_idx;
    ExprPtr expr = v->kind() == Value::Kind::kReduction ? kb.ReductionValue(std::static_pointer_cast<Reduction>(v), at)
                                                         : kb.Place(v, at);
    ops.insert(v->ops.begin(), v->ops.end());
    codegen::Stmt store;
    store.kind = codegen::Stmt::Kind::kStore;
    store.buffer = kb.BufferIndex(outs[i]);
    store.index = kb.Index(ir::ElementOffset(at, outs[i]->stride()));
    store.expr = std::move(expr);
    stmts.push_back(std::move(store));
  }
  kb.loops.push_back(codegen::Loop{1, std::move(stmts)});
  Emit(kb, std::move(ops), outs);
  for (size_t i = 0; i < values.size(); ++i) state.now.Set(values[i], outs[i]);
  return outs;
}

void Scheduler::Emit(KernelBuilder& kb, std::set<std::string> ops, const std::vector<std::shared_ptr<Buffer>>& outs) {
  ops.insert(kb.ops.begin(), kb.ops.end());
  std::string name = "cpp_fused_";
  if (ops.empty()) ops.insert("copy");
  for (const std::string& op : ops) name += op + "_";
  name += std::to_string(num_kernels_++);
  auto ir = std::make_shared<codegen::Kernel>();
  ir->name = name;
  for (size_t i = 0; i < kb.buffers.size(); ++i) {
    auto out = std::find(outs.begin(), outs.end(), kb.buffers[i]);
    std::string arg = out != outs.end() ? "out_ptr" + std::to_string(out - outs.begin()) : "in_ptr" + std::to_string(i);
    ir->buffers.push_back(codegen::Buffer{std::move(arg), ir::KernelDType(kb.buffers[i]->dtype())});
  }
  ir->outer = kb.outer;
  ir->loops = std::move(kb.loops);
  codegen::Validate(*ir);
  auto kernel = std::make_shared<FormedKernel>();
  kernel->ir = std::move(ir);
  kernel->buffers = kb.buffers;
  kernel->ops = std::move(ops);
  for (const ir::Origin& o : kb.Origins()) kernel->stack_traces.push_back(o.stack_trace);
  for (const auto& out : outs) {
    steps_.push_back(Step{Step::Kind::kAlloc, out, nullptr, nullptr});
    MarkDefined(*out->name);
  }
  steps_.push_back(Step{Step::Kind::kKernel, nullptr, nullptr, std::move(kernel)});
}

}  // namespace kiln::inductor::scheduler
