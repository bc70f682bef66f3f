// inductor/graph/graph_lowering.cc: the walk over an aten graph that lowers its nodes, realizes
// values and records the wrapper's steps (Note [Lowering a graph] in graph_lowering.h).
#include "inductor/graph/graph_lowering.h"

#include <cstdlib>
#include <utility>

#include "fx/interpreter.h"
#include "inductor/ir/strides.h"
#include "inductor/lowering/lazy.h"
#include "inductor/lowering/pointwise.h"
#include "inductor/lowering/registry.h"
#include "inductor/scheduler/fusion.h"
#include "runtime/error.h"
#include "tensor/ops.h"

namespace kiln::inductor::graph {
namespace {

using fx::Opcode;
using ir::Pointwise;
using ir::Reduction;
using ArgKind = fx::Argument::Kind;

bool IsLazy(const ValuePtr& v) { return v && v->kind() != Value::Kind::kBuffer; }
bool IsBuffer(const GraphValue& v) { return v.is_value() && v.value->kind() == Value::Kind::kBuffer; }

std::shared_ptr<Pointwise> AsPointwise(const ValuePtr& v) {
  return v && v->kind() == Value::Kind::kPointwise ? std::static_pointer_cast<Pointwise>(v) : nullptr;
}

const Tensor* MetaTensor(const fx::Node* n) {
  const fx::Argument* a = n ? n->FindMeta("val") : nullptr;
  return a && a->kind == ArgKind::kConst && a->value.is_tensor() ? &a->value.to_tensor() : nullptr;
}

// A meta value's sizes and strides (a symbolic one cannot be lowered: a typed error, and the graph
// runs eagerly).
std::vector<int64_t> ShapeOf(const Tensor& t) {
  const DimVector s = t.sizes();
  return {s.begin(), s.end()};
}
std::vector<int64_t> StrideOf(const Tensor& t) {
  const DimVector s = t.strides();
  return {s.begin(), s.end()};
}
bool SameShape(const Tensor& t, const std::vector<int64_t>& shape) {
  const auto& sizes = t->sym_sizes();
  if (sizes.size() != shape.size()) return false;
  for (size_t d = 0; d < shape.size(); ++d)
    if (sizes[d].is_symbolic() || sizes[d].expect_int() != shape[d]) return false;
  return true;
}

std::optional<std::string> StackTraceOf(const fx::Node& n) {
  const fx::Argument* a = n.FindMeta("stack_trace");
  if (!a || a->kind != ArgKind::kConst) return std::nullopt;
  if (const auto* s = std::get_if<std::string>(&a->value.variant())) return *s;
  return std::nullopt;
}

// The items of a meta value that is a sequence (a tuple or list of them, or a tensor list).
std::optional<std::vector<fx::Argument>> MetaItems(const fx::Argument& a) {
  if (a.kind == ArgKind::kTuple || a.kind == ArgKind::kList) return a.items;
  if (a.kind == ArgKind::kConst && a.value.is_tensor_list()) {
    std::vector<fx::Argument> items;
    for (const Tensor& t : a.value.to_tensor_list()) items.emplace_back(IValue(t));
    return items;
  }
  return std::nullopt;
}

bool IsMetaTensor(const fx::Argument& a) { return a.kind == ArgKind::kConst && a.value.is_tensor(); }

// Whether a node's meta value is a tensor, or a non-empty sequence of them (what lowerings make).
bool TensorResults(const fx::Argument* meta) {
  if (!meta) return false;
  if (IsMetaTensor(*meta)) return true;
  const auto items = MetaItems(*meta);
  if (!items || items->empty()) return false;
  for (const fx::Argument& x : *items)
    if (!IsMetaTensor(x)) return false;
  return true;
}

bool HasLowering(const fx::Target& target) {
  return target.op != nullptr && lowering::FindLowering(*target.op) != nullptr;
}

// An op whose result may alias its input (views, t, reshape) with a lowering, so it can be
// lowered again over a realized base.
bool IsLoweredView(const fx::Target& target) { return HasLowering(target) && ReturnsAlias(target); }

// An integer constant as Python's argument parser would see it: a bool, an int, a concrete SymInt.
std::optional<int64_t> IntConstant(const fx::Argument& a) {
  if (a.kind != ArgKind::kConst) return std::nullopt;
  if (a.value.is_int() || a.value.is_bool()) return a.value.to_int();
  if (a.value.is_symint() && !a.value.to_symint().is_symbolic()) return a.value.to_int();
  return std::nullopt;
}

// An argument as a lowering reads it (Note [The lowering table]): a value, a number, an int list, a
// string; anything else a constant no lowering reads as a number (Other, naming what it was).
lowering::LoweringArg LoweringArgOf(const GraphValue& v) {
  using lowering::LoweringArg;
  switch (v.kind) {
    case GraphValue::Kind::kValue:
      return LoweringArg::Of(v.value);
    case GraphValue::Kind::kTuple:
    case GraphValue::Kind::kList: {
      std::vector<int64_t> ints;
      for (const GraphValue& x : v.items) {
        const bool is_int = x.kind == GraphValue::Kind::kConst && x.constant.kind == ArgKind::kConst &&
                            !x.constant.value.is_bool() && IntConstant(x.constant);
        if (!is_int) return LoweringArg::Other("a list holding something other than ints");
        ints.push_back(*IntConstant(x.constant));
      }
      return LoweringArg::Ints(std::move(ints));
    }
    case GraphValue::Kind::kConst:
      break;
  }
  const fx::Argument& a = v.constant;
  if (a.kind == ArgKind::kNone) return LoweringArg::None();
  if (a.kind != ArgKind::kConst) return LoweringArg::Other(a.Format());
  return LoweringArg::Constant(a.value);
}

// The node's results (its meta value) as dtypes and static shapes.
std::vector<lowering::LoweringOutput> LoweringOutputsOf(const fx::Argument* meta) {
  if (!meta) throw lowering::Fallback("a node without a meta value");
  auto one = [](const fx::Argument& a) {
    if (!IsMetaTensor(a)) throw lowering::Fallback("a result that is not a tensor");
    const Tensor& t = a.value.to_tensor();
    std::vector<int64_t> shape;
    for (const SymInt& n : t->sym_sizes()) {
      if (n.is_symbolic()) throw lowering::Fallback("a symbolic shape");
      shape.push_back(n.expect_int());
    }
    return lowering::LoweringOutput{t.dtype(), std::move(shape)};
  };
  std::vector<lowering::LoweringOutput> outs;
  if (const auto items = MetaItems(*meta)) {
    for (const fx::Argument& x : *items) outs.push_back(one(x));
  } else {
    outs.push_back(one(*meta));
  }
  return outs;
}

// Whether an argument is an int or a list of them (what a view op's other arguments are).
bool PlainInts(const GraphValue& v) {
  if (v.is_seq()) {
    for (const GraphValue& x : v.items)
      if (x.kind != GraphValue::Kind::kConst || !IntConstant(x.constant)) return false;
    return true;
  }
  if (v.kind != GraphValue::Kind::kConst) return false;
  if (IntConstant(v.constant)) return true;
  if (v.constant.kind == ArgKind::kTuple || v.constant.kind == ArgKind::kList) {
    for (const fx::Argument& x : v.constant.items)
      if (!IntConstant(x)) return false;
    return true;
  }
  if (v.constant.kind == ArgKind::kConst) {
    if (const auto* l = std::get_if<std::vector<SymInt>>(&v.constant.value.variant())) {
      for (const SymInt& s : *l)
        if (s.is_symbolic()) return false;
      return true;
    }
  }
  return false;
}

// A plain-int argument as the boxed value its parameter takes.
IValue PlainIntsIValue(const GraphValue& v, const kiln::Argument& param) {
  std::vector<int64_t> ints;
  if (v.is_seq()) {
    for (const GraphValue& x : v.items) ints.push_back(*IntConstant(x.constant));
  } else if (v.constant.kind == ArgKind::kTuple || v.constant.kind == ArgKind::kList) {
    for (const fx::Argument& x : v.constant.items) ints.push_back(*IntConstant(x));
  } else if (v.constant.value.is_int() || v.constant.value.is_bool() || v.constant.value.is_symint()) {
    if (param.kind == TypeKind::Bool && v.constant.value.is_bool()) return v.constant.value;
    if (param.kind == TypeKind::SymInt) return IValue(SymInt(v.constant.value.to_int()));
    return IValue(v.constant.value.to_int());
  } else {
    return v.constant.value;  // an int list already
  }
  std::vector<SymInt> list(ints.begin(), ints.end());
  return IValue(std::move(list));
}

// A copy of `buf` (a kernel reading it where it stores), named by `ops`.
std::shared_ptr<Pointwise> CopyOf(const BufferPtr& buf, std::set<std::string> ops) {
  return lowering::LazyPointwise(buf->dtype(), buf->shape(), std::move(ops),
                                 [&](lowering::Trace& t, const lowering::Indices& idx) { return t.Read(buf, idx); });
}

// Source provenance of a lazy value: placing its body inside a kernel adds its node's stack trace
// to the kernel's origins, so a fused kernel names every user line it computes; a Buffer's own
// kernel or extern call was attributed when it was made.
void RecordOrigin(const ValuePtr& value, const ir::Origin& origin) {
  if (!IsLazy(value)) return;
  if (auto pw = AsPointwise(value); pw && pw->squeeze_of) RecordOrigin(pw->squeeze_of, origin);  // realized as its view
  value->origins.insert(origin);
}

// The node whose memory `node` views: back through ops returning an alias of their first argument
// (`Tensor(a)`, a piece of `Tensor(a)[]`).
const fx::Node* StorageOwner(const fx::Node* node) {
  while (node->op() == Opcode::kCallFunction && !node->args().empty() && node->args()[0].is_node()) {
    const fx::Node* first = node->args()[0].node;
    if (fx::IsGetItem(node->target())) {
      if (!ReturnsAlias(first->target()) || first->args().empty() || !first->args()[0].is_node()) break;
      node = first->args()[0].node;
    } else if (ReturnsAlias(node->target())) {
      node = first;
    } else {
      break;
    }
  }
  return node;
}

std::vector<const fx::Argument*> OutputsOf(const fx::Node& output) {
  std::vector<const fx::Argument*> outs;
  if (output.args().empty()) return outs;
  const fx::Argument& a = output.args()[0];
  if (a.kind == ArgKind::kTuple || a.kind == ArgKind::kList) {
    for (const fx::Argument& x : a.items) outs.push_back(&x);
  } else {
    outs.push_back(&a);
  }
  return outs;
}

// Names the wrapper's own code uses (python/kiln/_inductor/wrapper.py: compile_fx's namespace,
// `call(args)`, static_buffers): a graph input may not take one.
const std::set<std::string>& WrapperNames() {
  static const std::set<std::string> names = {"kiln", "empty_strided", "reinterpret_tensor", "as_declared",
                                              "static_buffers", "call", "args"};
  return names;
}

}  // namespace

GraphValue GraphValue::Of(ValuePtr v) {
  GraphValue g;
  g.kind = Kind::kValue;
  g.value = std::move(v);
  return g;
}

GraphValue GraphValue::Const(fx::Argument a) {
  GraphValue g;
  g.constant = std::move(a);
  return g;
}

GraphValue GraphValue::Seq(Kind kind, std::vector<GraphValue> items) {
  GraphValue g;
  g.kind = kind;
  g.items = std::move(items);
  return g;
}

std::string InputName(const std::string& name, const std::set<std::string>& taken) {
  if (WrapperNames().count(name) == 0) return name;
  std::string renamed = name + "_";
  while (taken.count(renamed) != 0 || WrapperNames().count(renamed) != 0) renamed += "_";
  return renamed;
}

bool ReturnsAlias(const fx::Target& target) {
  if (target.op == nullptr) return false;
  for (const kiln::Argument& r : target.op->schema().returns)
    if (!r.alias.set.empty() && !r.alias.is_write) return true;
  return false;
}

std::set<const fx::Node*> StoragesOutputsShare(const fx::Graph& graph) {
  std::map<const fx::Node*, int> count;
  for (const fx::Node* n : graph.nodes()) {
    if (n->op() != Opcode::kOutput) continue;
    for (const fx::Argument* out : OutputsOf(*n)) {
      if (!out->is_node() || !MetaTensor(out->node)) continue;
      const fx::Node* root = StorageOwner(out->node);
      if (root->op() != Opcode::kPlaceholder) ++count[root];
    }
  }
  std::set<const fx::Node*> shared;
  for (const auto& [node, n] : count)
    if (n > 1) shared.insert(node);
  return shared;
}

GraphLowering::GraphLowering(std::shared_ptr<fx::Graph> graph,
                             std::optional<std::map<int64_t, std::vector<int64_t>>> output_strides)
    : graph_(std::move(graph)), output_strides_(std::move(output_strides)), context_(&scheduler_) {
  if (!graph_) throw ValueError("GraphLowering: no graph");
}

void GraphLowering::Run(const Hooks& hooks) {
  if (ran_) throw ValueError("GraphLowering: a graph is lowered once");
  ran_ = true;
  hooks_ = &hooks;
  struct ForgetHooks {  // read during this call only (Python's callables die with it)
    const Hooks*& hooks;
    ~ForgetHooks() { hooks = nullptr; }
  } forget{hooks_};
  // the Reductions lowerings make join this graph's candidates (Note [Sibling reductions])
  scheduler::Realization::Scope scope(&scheduler_.state);

  const std::vector<fx::Node*> nodes = graph_->nodes();
  std::set<std::string> names;
  for (const fx::Node* n : nodes) names.insert(n->name());
  const std::set<const fx::Node*> shared = StoragesOutputsShare(*graph_);
  std::set<const fx::Node*> recomputes;  // lazy values that recompute a value several nodes read
  for (const fx::Node* node : nodes) {
    switch (node->op()) {
      case Opcode::kPlaceholder: {
        const std::string name = InputName(node->name(), names);
        if (const Tensor* t = MetaTensor(node)) {
          env_[node] = GraphValue::Of(std::make_shared<Buffer>(name, t->dtype(), ShapeOf(*t), StrideOf(*t),
                                                                (*t)->storage_offset(), Buffer::Source::kInput));
          scheduler_.MarkDefined(name);
        } else {
          const fx::Argument* val = node->FindMeta("val");
          env_[node] = GraphValue::Const(val ? *val : fx::Argument());
        }
        inputs_.push_back(name);
        break;
      }
      case Opcode::kCallFunction: {
        GraphValue value = Call(*node);
        if (const auto trace = StackTraceOf(*node); trace && value.is_value())
          RecordOrigin(value.value, {static_cast<int64_t>(lowered_.size()), *trace});
        lowered_.emplace_back(node, value);
        if (value.is_value() && IsLazy(value.value) && hooks.allow_fusion && !hooks.allow_fusion(*node))
          value = GraphValue::Of(Realize(value));  // kiln._dynamo.bisect: no fusion past here
        env_[node] = value;
        ValuePtr base = value.is_value() ? value.value : nullptr;
        while (auto pw = AsPointwise(base)) {
          if (!pw->squeeze_of) break;
          base = pw->squeeze_of;
        }
        const size_t users = node->users().size();
        if (base && base->kind() == Value::Kind::kReduction && users > 1) {
          BufferPtr buf = scheduler_.Defer(std::static_pointer_cast<Reduction>(base));
          const std::vector<int64_t>& shape = value.value->shape();
          env_[node] = base == value.value
                           ? GraphValue::Of(buf)
                           : GraphValue::Of(std::make_shared<Buffer>(
                                 std::nullopt, buf->dtype(), shape, ir::SqueezedStrides(buf->shape(), buf->stride(), shape),
                                 0, buf));
        } else if (auto pw = value.is_value() ? AsPointwise(value.value) : nullptr) {
          bool chained = false;
          for (const fx::Node* in : node->AllInputNodes()) {
            auto it = env_.find(in);
            chained = chained || (recomputes.count(in) != 0 && it != env_.end() && it->second.is_value() &&
                                  AsPointwise(it->second.value));
          }
          if (users > 1 && !pw->ops.empty()) {
            if (chained || !scheduler::CheapToRecompute(*pw, &scheduler_.state)) {
              // in its meta layout where layout optimization chose one (channels-last after a
              // convolution)
              env_[node] = output_strides_ ? RealizeInMetaLayout(*node) : GraphValue::Of(Realize(value));
            } else {
              recomputes.insert(node);
            }
          } else if (chained) {
            recomputes.insert(node);
          }
        }
        if (shared.count(node) != 0) env_[node] = RealizeInMetaLayout(*node);  // Note [Outputs sharing a storage]
        break;
      }
      case Opcode::kOutput:
        Output(*node);
        break;
      default:
        throw NotImplementedError(StrCat("inductor: ", fx::OpcodeName(node->op()), " nodes"));
    }
  }
}

GraphValue GraphLowering::Arg(const fx::Argument& a) const {
  switch (a.kind) {
    case ArgKind::kNode: {
      auto it = env_.find(a.node);
      if (it == env_.end()) throw ValueError(StrCat("inductor: node ", a.node->name(), " is read before it is lowered"));
      return it->second;
    }
    case ArgKind::kTuple:
    case ArgKind::kList: {
      std::vector<GraphValue> items;
      for (const fx::Argument& x : a.items) items.push_back(Arg(x));
      return GraphValue::Seq(a.kind == ArgKind::kTuple ? GraphValue::Kind::kTuple : GraphValue::Kind::kList,
                             std::move(items));
    }
    default:
      return GraphValue::Const(a);
  }
}

GraphValue GraphLowering::Call(const fx::Node& node) {
  std::vector<GraphValue> args;
  for (const fx::Argument& a : node.args()) args.push_back(Arg(a));
  GraphKwargs kwargs;
  for (const auto& [k, v] : node.kwargs()) kwargs.emplace_back(k, Arg(v));
  if (fx::IsGetItem(node.target())) {
    if (args.size() != 2 || !args[0].is_seq() || args[1].kind != GraphValue::Kind::kConst || !IntConstant(args[1].constant))
      throw TypeError(StrCat("inductor: ", node.name(), " indexes something that is not a node's results"));
    const auto size = static_cast<int64_t>(args[0].items.size());
    int64_t i = *IntConstant(args[1].constant);
    if (i < 0) i += size;
    if (i < 0 || i >= size) throw IndexError(StrCat("inductor: ", node.name(), ": index out of range"));
    return args[0].items[static_cast<size_t>(i)];
  }
  if (hooks_ && hooks_->lower) {
    HookChoice choice = hooks_->lower(node, args, kwargs);
    if (choice.kind == HookChoice::Kind::kValue) return choice.value;
    if (choice.kind == HookChoice::Kind::kExtern)
      return Fallback(node, std::move(args), std::move(kwargs), choice.why, choice.target);
  }
  if (TensorResults(node.FindMeta("val"))) return LowerByTable(node, std::move(args), kwargs);
  return Fallback(node, std::move(args), std::move(kwargs), "non-tensor result");
}

namespace {

// The node lowered by its op's entry over `args` and `kwargs` (Fallback where it has none).
GraphValue LowerNode(const fx::Node& node, const std::vector<GraphValue>& args, const GraphKwargs& kwargs,
                     lowering::GraphContext* context) {
  using lowering::LoweringArg;
  const Op* op = node.target().op;
  if (op == nullptr) throw lowering::Fallback("no lowering for " + node.target().str());
  const std::vector<kiln::Argument>& schema = op->schema().arguments;
  if (args.size() > schema.size())
    throw TypeError(StrCat("inductor: ", op->name(), " takes ", schema.size(), " arguments, got ", args.size()));
  std::vector<LoweringArg> values;
  size_t used = 0;
  for (size_t i = 0; i < schema.size(); ++i) {
    const kiln::Argument& a = schema[i];
    const GraphValue* given = i < args.size() ? &args[i] : nullptr;
    if (!given) {
      for (const auto& [k, v] : kwargs)
        if (k == a.name) given = &v;
      used += given != nullptr;
    }
    if (given) values.push_back(LoweringArgOf(*given));
    else if (a.default_value) values.push_back(LoweringArg::Constant(*a.default_value));
    else if (a.optional) values.push_back(LoweringArg::None());
    else throw TypeError(StrCat("inductor: ", op->name(), ": argument '", a.name, "' is missing"));
  }
  if (used != kwargs.size()) throw TypeError(StrCat("inductor: ", op->name(), " got an unexpected keyword argument"));
  const fx::Argument* meta = node.FindMeta("val");
  const bool several = meta && MetaItems(*meta).has_value();
  lowering::LoweringCall call(*op, LoweringOutputsOf(meta), std::move(values), context);
  std::vector<ValuePtr> lowered = lowering::Lower(call);
  if (!several) return GraphValue::Of(lowered.at(0));
  std::vector<GraphValue> items;
  for (ValuePtr& v : lowered) items.push_back(GraphValue::Of(std::move(v)));
  return GraphValue::Seq(GraphValue::Kind::kTuple, std::move(items));
}

}  // namespace

GraphValue GraphLowering::LowerByTable(const fx::Node& node, std::vector<GraphValue> args, const GraphKwargs& kwargs) {
  auto lower = [&] {
    GraphValue v = LowerNode(node, args, kwargs, &context_);
    Formed(nullptr);  // the kernels a lowering formed on the way (a variance's partial statistics)
    return v;
  };
  try {
    return lower();
  } catch (const lowering::ViewOfUnrealized&) {
    // in its meta layout, the one eager's view read: an expanded value stays expanded (Note
    // [Expanded layouts])
    if (args.empty()) throw;
    if (node.args()[0].is_node()) args[0] = RealizeInMetaLayout(*node.args()[0].node);
    args[0] = GraphValue::Of(Realize(args[0]));
    try {
      return lower();
    } catch (const lowering::Fallback& again) {
      return Fallback(node, std::move(args), kwargs, again.what());
    }
  } catch (const lowering::Fallback& why) {
    return Fallback(node, std::move(args), kwargs, why.what());
  } catch (const NotImplementedError& why) {
    return Fallback(node, std::move(args), kwargs, why.what());
  }
}

// --- realization (Note [Output strides]) --------------------------------------------------------

BufferPtr GraphLowering::Formed(BufferPtr result) {
  for (scheduler::Step& step : scheduler_.TakeSteps()) {
    Record r;
    switch (step.kind) {
      case scheduler::Step::Kind::kAlloc:
        r.kind = Record::Kind::kAlloc;
        r.buf = std::move(step.buf);
        break;
      case scheduler::Step::Kind::kView:
        r.kind = Record::Kind::kView;
        r.buf = std::move(step.buf);
        r.base = std::move(step.base);
        break;
      case scheduler::Step::Kind::kKernel:
        r.kind = Record::Kind::kKernel;
        r.kernel = std::move(step.kernel);
        break;
    }
    records_.push_back(std::move(r));
  }
  return result;
}

BufferPtr GraphLowering::Realize(const GraphValue& v) {
  if (!v.is_value())
    throw TypeError(StrCat("inductor: cannot realize ", v.is_seq() ? "a sequence" : "a constant"));
  return Formed(scheduler_.Realize(v.value));
}

// A graph output in memory with the strides its node's meta value promises: a lazy value is
// computed straight into that layout; a kernel output already computed in another layout is copied
// into it.
BufferPtr GraphLowering::RealizeOutput(const ValuePtr& value, const std::optional<std::vector<int64_t>>& stride) {
  const bool dense = stride && ir::DenseOrder(value->shape(), *stride).has_value();
  // a view's layout with gaps (`v[:, ::2]`), where an extern op reads it: its results' strides
  // follow this input's (a split piece of a compacted copy was read with the gaps)
  const bool gapped = stride && !dense && ir::GappedOrder(value->shape(), *stride).has_value();
  std::shared_ptr<Pointwise> plain = AsPointwise(value);
  if (plain && (plain->space || plain->squeeze_of || scheduler_.state.now.Contains(*plain))) plain = nullptr;
  if (plain && stride && !dense && !ir::ExpandedDims(value->shape(), *stride).empty()) {
    if (BufferPtr expanded = RealizeExpanded(plain, *stride)) {
      scheduler_.state.now.Set(value, expanded);
      return expanded;
    }
  }
  if ((dense || gapped) && plain) {
    BufferPtr buf = KernelForPointwise(plain, stride);
    scheduler_.state.now.Set(value, buf);
    return buf;
  }
  BufferPtr buf = Formed(scheduler_.Realize(value));
  if ((dense || gapped) && buf->Root().source() == Buffer::Source::kKernel &&
      !ir::SameLayout(buf->shape(), buf->stride(), *stride))
    return KernelForPointwise(CopyOf(buf, {}), stride);
  return buf;
}

// A graph output in the dense layout eager gives it where layout optimization laid its node out
// otherwise (Note [Layout optimization]): computed into it, or copied into it from whatever made
// it (an extern convolution's channels-last result included).
BufferPtr GraphLowering::InUserLayout(const ValuePtr& value, const std::vector<int64_t>& stride) {
  BufferPtr buf = RealizeOutput(value, stride);
  if (ir::SameLayout(buf->shape(), buf->stride(), stride)) return buf;
  return KernelForPointwise(CopyOf(buf, {"copy"}), stride);
}

// value in an expanded layout (Note [Expanded layouts]): its elements at index 0 of each expanded
// dimension computed into a dense buffer, seen with stride 0 along those dimensions; nullptr when
// the other dimensions are no dense layout.
BufferPtr GraphLowering::RealizeExpanded(const std::shared_ptr<Pointwise>& value, const std::vector<int64_t>& stride) {
  const std::set<int> expanded = ir::ExpandedDims(value->shape(), stride);
  std::vector<int64_t> shape = value->shape();
  for (int d : expanded) shape[static_cast<size_t>(d)] = 1;
  if (!ir::DenseOrder(shape, stride)) return nullptr;
  // over a size-1 dimension the loop index is 0: the body reads the first of the repeated elements
  auto first = std::make_shared<Pointwise>(value->dtype(), shape, value->shared_trace());
  first->ops = value->ops;
  BufferPtr buf = KernelForPointwise(first, stride);
  return Define(std::make_shared<Buffer>(std::nullopt, value->dtype(), value->shape(), stride, buf->offset(), buf));
}

// An output whose meta layout is no dense one of its own (a strided view into a larger
// intermediate: `seq[:, -1].t()` saved for a backward) computed as that view: the intermediate its
// chain of view nodes starts from is realized in its own meta layout and the views are lowered
// again over its buffer, giving the meta strides and offset. nullptr where the output is not such a
// view of a computed value.
//
// So is an output whose dense meta layout is exactly what the chain makes of its base's (a
// transpose of a row-major value, column-major): the base is computed once, in its own layout, for
// the view and for its other readers. A gelu backward that a sum read and a matmul read transposed
// was computed twice into the same memory order, and a gradient already in memory was copied to be
// read transposed (the digits MLP's backward).
BufferPtr GraphLowering::OutputView(const fx::Node& node, const Tensor& meta) {
  auto buffer_at = [&](const fx::Node* n) {
    auto it = env_.find(n);
    return it != env_.end() && IsBuffer(it->second);
  };
  if (buffer_at(&node)) return nullptr;
  const std::vector<int64_t> meta_stride = StrideOf(meta);
  const bool dense = ir::DenseOrder(ShapeOf(meta), meta_stride).has_value();
  std::vector<const fx::Node*> chain;
  const fx::Node* base = &node;
  while (base && base->op() == Opcode::kCallFunction && IsLoweredView(base->target()) && !base->args().empty() &&
         !buffer_at(base)) {
    chain.push_back(base);
    base = base->args()[0].is_node() ? base->args()[0].node : nullptr;
  }
  if (chain.empty() || !base) return nullptr;
  auto it = env_.find(base);
  const Tensor* base_meta = MetaTensor(base);
  if (it == env_.end() || !it->second.is_value() || !IsLazy(it->second.value) || !base_meta) return nullptr;
  if (dense) {
    // the chain over a buffer laid out as base_meta (a dry run: view lowerings of a Buffer only
    // make Buffers) must give meta's strides at that buffer's own offset (a transpose, a permute,
    // a reshape of a dense base; no slice into it)
    auto probe = std::make_shared<Buffer>(std::nullopt, base_meta->dtype(), ShapeOf(*base_meta), StrideOf(*base_meta), 0,
                                          Buffer::Source::kInput);
    BufferPtr out = LowerViews(chain, probe);
    if (!out || !SameShape(meta, out->shape()) || out->offset() != probe->offset() ||
        !ir::SameLayout(out->shape(), out->stride(), meta_stride))
      return nullptr;
  }
  BufferPtr out = LowerViews(chain, RealizeOutput(it->second.value, StrideOf(*base_meta)));
  return out ? Define(out) : nullptr;
}

// The view nodes in `chain` (last first) lowered again over `buf`: a Buffer, or nullptr where one of
// them cannot view a buffer.
BufferPtr GraphLowering::LowerViews(const std::vector<const fx::Node*>& chain, BufferPtr buf) {
  for (auto view = chain.rbegin(); view != chain.rend(); ++view) {
    std::vector<GraphValue> args{GraphValue::Of(buf)};
    for (size_t i = 1; i < (*view)->args().size(); ++i) args.push_back(Arg((*view)->args()[i]));
    GraphKwargs kwargs;
    for (const auto& [k, v] : (*view)->kwargs()) kwargs.emplace_back(k, Arg(v));
    GraphValue out;
    try {
      out = LowerNode(**view, args, kwargs, &context_);
      Formed(nullptr);
    } catch (const lowering::Fallback&) {
      return nullptr;
    } catch (const NotImplementedError&) {
      return nullptr;
    }
    if (!IsBuffer(out)) return nullptr;
    buf = std::static_pointer_cast<Buffer>(out.value);
  }
  return buf;
}

// node's value in memory laid out as its meta value (a kernel's output, or a buffer).
GraphValue GraphLowering::RealizeInMetaLayout(const fx::Node& node) {
  const GraphValue& value = env_.at(&node);
  const Tensor* meta = MetaTensor(&node);
  if (!value.is_value() || !meta) return value;
  return GraphValue::Of(RealizeOutput(value.value, StrideOf(*meta)));
}

void GraphLowering::Output(const fx::Node& node) {
  Record r;
  r.kind = Record::Kind::kReturn;
  const std::vector<const fx::Argument*> outs = OutputsOf(node);
  for (size_t i = 0; i < outs.size(); ++i) {
    const fx::Argument& o = *outs[i];
    GraphValue v = GraphValue::Const(o);
    if (o.is_node()) {
      auto it = env_.find(o.node);
      v = it != env_.end() ? it->second : GraphValue::Const(fx::Argument());
    }
    if (v.is_value()) {
      const auto position = static_cast<int64_t>(i);
      if (output_strides_ && output_strides_->count(position) != 0) {
        v = GraphValue::Of(InUserLayout(v.value, output_strides_->at(position)));
      } else {
        const Tensor* meta = o.is_node() ? MetaTensor(o.node) : nullptr;
        BufferPtr view = meta ? OutputView(*o.node, *meta) : nullptr;
        v = GraphValue::Of(view ? view
                                : RealizeOutput(v.value, meta ? std::optional(StrideOf(*meta)) : std::nullopt));
      }
    }
    r.values.push_back(std::move(v));
  }
  records_.push_back(std::move(r));
}

// --- extern calls --------------------------------------------------------------------------------

// An extern op's argument v (its node's argument src): lazy values realized, each in the layout of
// its own meta value (Fallback's comment says why).
GraphValue GraphLowering::ExternArg(const GraphValue& v, const fx::Argument* src) {
  if (v.is_value()) {
    const fx::Node* n = src && src->is_node() ? src->node : nullptr;
    const Tensor* meta = MetaTensor(n);
    if (meta && SameShape(*meta, v.value->shape())) {
      if (BufferPtr view = OutputView(*n, *meta)) return GraphValue::Of(view);
      return GraphValue::Of(RealizeOutput(v.value, StrideOf(*meta)));
    }
    return GraphValue::Of(Realize(v));
  }
  if (v.is_seq()) {
    const bool by_item = src && (src->kind == ArgKind::kTuple || src->kind == ArgKind::kList) &&
                         src->items.size() == v.items.size();
    std::vector<GraphValue> items;
    for (size_t i = 0; i < v.items.size(); ++i) items.push_back(ExternArg(v.items[i], by_item ? &src->items[i] : nullptr));
    return GraphValue::Seq(v.kind, std::move(items));
  }
  return v;
}

// The results of an extern op that returns views of its first argument, laid out as they are over
// that argument's buffer: the op run on a meta tensor with the buffer's layout.
// `v1[1:].split(1, 1)[-1].view(-1)` was made past the end of the buffer `v1[1:]` was computed into
// (fuzz seed 1041, program 3175), and a chunk of an expanded value computed densely was read with
// the stride 0 of its meta value: a wrong matmul (fuzz seed 1051, program 1517). Other ops, and
// views of non-buffer or symbolic inputs, keep their meta value.
fx::Argument GraphLowering::ViewResultsOf(const fx::Node& node, const fx::Target& target,
                                          const std::vector<GraphValue>& args, const GraphKwargs& kwargs,
                                          fx::Argument val) const {
  const Tensor* meta = !node.args().empty() && node.args()[0].is_node() ? MetaTensor(node.args()[0].node) : nullptr;
  if (!ReturnsAlias(target) || args.empty() || !IsBuffer(args[0]) || !meta || (*meta)->is_symbolic()) return val;
  for (size_t i = 1; i < args.size(); ++i)
    if (!PlainInts(args[i])) return val;
  for (const auto& kv : kwargs)
    if (!PlainInts(kv.second)) return val;
  const auto buf = std::static_pointer_cast<Buffer>(args[0].value);
  if (buf->stride() == StrideOf(*meta) && buf->offset() == (*meta)->storage_offset()) return val;
  try {
    int64_t span = 0;
    if (buf->numel() != 0)
      for (size_t d = 0; d < buf->shape().size(); ++d) span += (buf->shape()[d] - 1) * std::llabs(buf->stride()[d]);
    Tensor base = ops::empty({SymInt(buf->offset() + span + 1)}, buf->dtype(), Device(DeviceType::Meta));
    const std::vector<SymInt> shape(buf->shape().begin(), buf->shape().end());
    const std::vector<SymInt> stride(buf->stride().begin(), buf->stride().end());
    Tensor probe = ops::as_strided(base, shape, stride, SymInt(buf->offset()));
    const FunctionSchema& schema = target.op->schema();
    Stack stack;
    for (size_t k = 0; k < schema.arguments.size(); ++k) {
      const kiln::Argument& param = schema.arguments[k];
      const GraphValue* given = k < args.size() ? &args[k] : nullptr;
      for (const auto& [name, value] : kwargs)
        if (!given && name == param.name) given = &value;
      if (k == 0) stack.emplace_back(probe);
      else if (given) stack.push_back(PlainIntsIValue(*given, param));
      else if (param.default_value) stack.push_back(*param.default_value);
      else if (param.optional) stack.emplace_back();
      else return val;
    }
    target.op->Call(stack);
    auto as_argument = [](const IValue& r) {
      if (!r.is_tensor_list()) return fx::Argument(r);
      std::vector<fx::Argument> items;
      for (const Tensor& t : r.to_tensor_list()) items.emplace_back(IValue(t));
      return fx::Argument::List(std::move(items));
    };
    if (schema.returns.size() == 1) return as_argument(stack.at(0));
    std::vector<fx::Argument> items;
    for (const IValue& r : stack) items.push_back(as_argument(r));
    return fx::Argument::Tuple(std::move(items));
  } catch (const ValueError&) {
    throw;
  } catch (const IndexError&) {
    throw;
  } catch (const Error&) {  // a case the meta kernel refuses: the meta value's layout
    return val;
  }
}

// An op the wrapper runs eagerly. Its result layout follows its inputs' (index_put of a
// column-major tensor is column-major), and its output buffer is declared with the layout of the
// node's meta value: so each input is realized in the layout of its own meta value (Note [Output
// strides]). A `clone` of a transposed input computed into a row-major buffer gave masked_fill a
// row-major input, whose row-major result the next kernel read as the column-major one the meta
// promised: values transposed, silently. An input whose meta layout is a strided view with gaps
// (`v3[::2]` of a transposed intermediate) is that view of its intermediate realized in its own
// layout: a dense copy gave `diagonal` other strides than the meta value the next kernel read it
// by, and that kernel read past the copy's end (fuzz seed 191, program 48).
GraphValue GraphLowering::Fallback(const fx::Node& node, std::vector<GraphValue> args, GraphKwargs kwargs,
                                   const std::string& why, const std::optional<fx::Target>& replacement) {
  const fx::Target target = replacement ? *replacement : node.target();
  fallbacks_.push_back({target, why});
  const bool by_position = node.args().size() == args.size();
  for (size_t i = 0; i < args.size(); ++i) args[i] = ExternArg(args[i], by_position ? &node.args()[i] : nullptr);
  for (auto& [k, v] : kwargs) {
    const fx::Argument* src = nullptr;
    for (const auto& [name, a] : node.kwargs())
      if (name == k) src = &a;
    v = ExternArg(v, src);
  }
  // An extern op may return views (split's pieces) at the storage offsets its meta value has: a
  // view of one is made at that offset plus its own (it was made at its own alone, and
  // x.split(1)[-1].t() read row 0: fuzz seed 71, program 1629). The meta value's layout is the
  // meta input's; the input in memory may be laid out otherwise (a lazy `v1[1:]` computed into a
  // buffer of its own starts at 0, not at row 1; an expanded value computed densely has no stride
  // 0), and the views follow it (ViewResultsOf).
  const fx::Argument* meta = node.FindMeta("val");
  const fx::Argument val = ViewResultsOf(node, target, args, kwargs, meta ? *meta : fx::Argument());
  auto call = std::make_shared<ExternCall>();
  auto buffer_for = [&](const Tensor& t) {
    BufferPtr b = scheduler_.NewBuffer(t.dtype(), ShapeOf(t), StrideOf(t), t->storage_offset());
    call->results.push_back(b);
    return GraphValue::Of(b);
  };
  GraphValue value;
  if (IsMetaTensor(val)) {
    value = buffer_for(val.value.to_tensor());
  } else if (const auto items = MetaItems(val)) {
    std::vector<GraphValue> values;
    for (const fx::Argument& x : *items) {
      if (IsMetaTensor(x)) {
        values.push_back(buffer_for(x.value.to_tensor()));
      } else {
        call->results.push_back(nullptr);
        values.push_back(GraphValue::Const(x));
      }
    }
    value = GraphValue::Seq(GraphValue::Kind::kTuple, std::move(values));
    call->unpack = true;
  } else {
    value = GraphValue::Const(val);
  }
  for (const BufferPtr& b : call->results)
    if (b) scheduler_.MarkDefined(*b->name);
  call->target = target;
  call->args = std::move(args);
  call->kwargs = std::move(kwargs);
  if (auto trace = StackTraceOf(node)) call->stack_traces.push_back(*trace);
  Record r;
  r.kind = Record::Kind::kExtern;
  r.call = std::move(call);
  records_.push_back(std::move(r));
  return value;
}

}  // namespace kiln::inductor::graph
