// fx/interpreter.cc: aten graphs run node by node through the dispatcher (Note [Interpreting aten
// graphs] in interpreter.h).
#include "fx/interpreter.h"

#include <unordered_map>
#include <utility>

#include "runtime/error.h"
#include "tensor/ops/common.h"

namespace kiln::fx {
namespace {

bool HasPythonObject(const Argument& a) {
  if (a.kind == Argument::Kind::kPy) return true;
  for (const Argument& x : a.items)
    if (HasPythonObject(x)) return true;
  for (const Argument& x : a.keys)
    if (HasPythonObject(x)) return true;
  return false;
}

bool IsNumber(const IValue& v) {
  return v.is_int() || v.is_double() || v.is_bool() || std::holds_alternative<std::complex<double>>(v.variant());
}

// A node's value: one IValue, or one per return of a multi-output op (read through getitem).
struct Value {
  std::vector<IValue> items;
  bool multi = false;
};

class Run {
 public:
  Run(const Graph& graph, const InterpretOptions& options) : nodes_(graph.nodes()), options_(options) {
    for (size_t i = 0; i < nodes_.size(); ++i) position_[nodes_[i]] = i;
    last_use_.assign(nodes_.size(), 0);
    for (size_t i = 0; i < nodes_.size(); ++i)
      for (Node* in : nodes_[i]->AllInputNodes()) last_use_[position_.at(in)] = i;
  }

  InterpretedOutput operator()(std::vector<IValue> inputs) {
    size_t next_input = 0;
    InterpretedOutput out;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      Node* n = nodes_[i];
      switch (n->op()) {
        case Opcode::kPlaceholder:
          if (next_input >= inputs.size())
            throw TypeError(StrCat("[fx.Interpreter] the graph takes more inputs than the ", inputs.size(), " given"));
          env_[n] = Value{{std::move(inputs[next_input++])}, false};
          break;
        case Opcode::kCallFunction:
          env_[n] = Call(*n);
          break;
        case Opcode::kOutput: {
          out.structure = n->args().empty() ? Argument() : n->args()[0];
          out.structure.ForEachNode([&](Node* m) { out.values.push_back(Single(m)); });
          break;
        }
        default:
          throw ValueError(StrCat("[fx.Interpreter] cannot run node ", n->name(), " (", OpcodeName(n->op()), ")"));
      }
      for (Node* in : n->AllInputNodes())  // values die after their last reader
        if (last_use_[position_.at(in)] == i) env_.erase(in);
    }
    if (next_input != inputs.size())
      throw TypeError(StrCat("[fx.Interpreter] the graph takes ", next_input, " inputs, got ", inputs.size()));
    return out;
  }

 private:
  const IValue& Single(Node* n) const {
    const Value& v = env_.at(n);
    if (v.multi) throw ValueError(StrCat("[fx.Interpreter] node ", n->name(), " has several outputs: read one with getitem"));
    return v.items[0];
  }

  Value Call(const Node& n) {
    if (IsGetItem(n.target())) return GetItem(n);
    const Op& op = *n.target().op;
    const FunctionSchema& schema = op.schema();
    Stack stack;
    stack.reserve(schema.arguments.size());
    for (size_t k = 0; k < schema.arguments.size(); ++k) {
      const kiln::Argument& param = schema.arguments[k];
      const Argument* given = k < n.args().size() && !param.kwarg_only ? &n.args()[k] : nullptr;
      if (!given)
        for (const auto& [name, value] : n.kwargs())
          if (name == param.name) given = &value;
      if (given) {
        stack.push_back(ToIValue(*given, param, n));
      } else if (param.default_value) {
        stack.push_back(*param.default_value);
      } else if (param.optional) {
        stack.emplace_back();
      } else {
        throw TypeError(StrCat("[fx.Interpreter] node ", n.name(), ": ", schema.full_name(), " is missing argument '",
                               param.name, "'"));
      }
    }
    const Argument* stack_trace = options_.annotate ? n.FindMeta("stack_trace") : nullptr;
    Node* last = stack_trace ? options_.annotate->root()->prev() : nullptr;
    op.Call(stack);
    if (stack_trace) {
      for (Node* m = last->next(); m != options_.annotate->root(); m = m->next())
        if (!m->FindMeta("stack_trace")) m->SetMeta("stack_trace", *stack_trace);
    }
    Value v;
    v.multi = schema.returns.size() != 1;
    v.items = std::move(stack);
    return v;
  }

  Value GetItem(const Node& n) {
    const Node* parent = n.args().at(0).node;
    const int64_t index = n.args().at(1).value.to_int();
    const Value& v = env_.at(parent);
    auto pick = [&](size_t size) {
      const int64_t i = index < 0 ? index + static_cast<int64_t>(size) : index;
      if (i < 0 || i >= static_cast<int64_t>(size))
        throw IndexError(StrCat("[fx.Interpreter] node ", n.name(), ": index ", index, " of ", size, " values"));
      return static_cast<size_t>(i);
    };
    if (v.multi) return Value{{v.items[pick(v.items.size())]}, false};
    const IValue& list = v.items[0];
    if (list.is_tensor_list()) return Value{{IValue(list.to_tensor_list()[pick(list.to_tensor_list().size())])}, false};
    if (list.is_optional_tensor_list()) {
      const auto& l = list.to_optional_tensor_list();
      const auto& t = l[pick(l.size())];
      return Value{{t ? IValue(*t) : IValue()}, false};
    }
    throw TypeError(StrCat("[fx.Interpreter] node ", n.name(), " indexes ", parent->name(), ", which is not a sequence"));
  }

  // An argument as the boxed value its parameter takes (what Python's argument parser makes).
  IValue ToIValue(const Argument& a, const kiln::Argument& param, const Node& n) const {
    switch (a.kind) {
      case Argument::Kind::kNone:
        return IValue();
      case Argument::Kind::kNode:
        return Single(a.node);
      case Argument::Kind::kConst:
        if (param.kind == TypeKind::Tensor && IsNumber(a.value))  // a Python number the parser wrapped
          return IValue(WrapScalar(a.value.to_scalar(), Device(DeviceType::CPU)));
        if (param.kind == TypeKind::SymInt && a.value.is_int()) return IValue(SymInt(a.value.to_int()));
        return a.value;
      case Argument::Kind::kList:
      case Argument::Kind::kTuple:
        return ListToIValue(a, param, n);
      default:
        throw TypeError(StrCat("[fx.Interpreter] node ", n.name(), ": argument '", param.name, "' is ", a.Format()));
    }
  }

  IValue ListToIValue(const Argument& a, const kiln::Argument& param, const Node& n) const {
    switch (param.kind) {
      case TypeKind::TensorList: {
        std::vector<Tensor> l;
        for (const Argument& x : a.items) l.push_back(Single(x.node).to_tensor());
        return IValue(std::move(l));
      }
      case TypeKind::OptionalTensorList: {
        OptionalTensorList l;
        for (const Argument& x : a.items) {
          if (x.is_none()) l.emplace_back();
          else l.emplace_back(Single(x.node).to_tensor());
        }
        return IValue(std::move(l));
      }
      case TypeKind::IntList:
      case TypeKind::SymIntList: {
        std::vector<SymInt> l;
        for (const Argument& x : a.items) l.push_back(x.is_node() ? Single(x.node).to_symint() : x.value.to_symint());
        return IValue(std::move(l));
      }
      case TypeKind::FloatList: {
        std::vector<double> l;
        for (const Argument& x : a.items) l.push_back(x.value.to_double());
        return IValue(std::move(l));
      }
      case TypeKind::BoolList: {
        std::vector<bool> l;
        for (const Argument& x : a.items) l.push_back(x.value.to_bool());
        return IValue(std::move(l));
      }
      default:
        throw TypeError(StrCat("[fx.Interpreter] node ", n.name(), ": argument '", param.name, "' (",
                               TypeKindName(param.kind), ") is the list ", a.Format()));
    }
  }

  const std::vector<Node*> nodes_;  // the graph's nodes, in order
  const InterpretOptions& options_;
  std::unordered_map<const Node*, size_t> position_;
  std::vector<size_t> last_use_;
  std::unordered_map<const Node*, Value> env_;
};

}  // namespace

bool IsGetItem(const Target& target) {
  return target.op == nullptr && target.py && target.py->target_str() == "operator.getitem";
}

std::string WhyNotInterpretable(const Graph& graph) {
  for (Node* n : graph.nodes()) {
    const std::string where = "node " + n->name();
    switch (n->op()) {
      case Opcode::kPlaceholder:
        break;
      case Opcode::kOutput:
        if (!n->args().empty() && HasPythonObject(n->args()[0])) return where + " returns a Python object";
        for (Node* in : n->AllInputNodes())
          if (in->op() == Opcode::kCallFunction && in->target().op && in->target().op->schema().returns.size() != 1)
            return where + " returns " + in->name() + ", a tuple";
        break;
      case Opcode::kCallFunction: {
        const Target& t = n->target();
        if (IsGetItem(t)) {
          if (n->args().size() != 2 || !n->args()[0].is_node() || n->args()[1].kind != Argument::Kind::kConst ||
              !n->args()[1].value.is_int())
            return where + " is a getitem of something other than a node by an int";
          break;
        }
        if (t.op == nullptr) return where + " calls the Python callable " + t.str();
        const FunctionSchema& s = t.op->schema();
        if (n->args().size() > s.arguments.size()) return where + " has more arguments than " + s.full_name();
        for (const Argument& a : n->args())
          if (HasPythonObject(a)) return where + " has a Python object as an argument";
        for (const auto& [name, value] : n->kwargs()) {
          bool known = false;
          for (const kiln::Argument& p : s.arguments) known = known || p.name == name;
          if (!known) return where + " passes " + name + ", not an argument of " + s.full_name();
          if (HasPythonObject(value)) return where + " has a Python object as an argument";
        }
        // a multi-output result is read only through getitem
        if (s.returns.size() != 1)
          for (Node* user : n->users())
            if (!IsGetItem(user->target())) return where + "'s outputs are read other than by getitem";
        break;
      }
      default:
        return where + " is a " + OpcodeName(n->op()) + " node";
    }
  }
  return "";
}

InterpretedOutput Interpret(const Graph& graph, std::vector<IValue> inputs, const InterpretOptions& options) {
  const std::string why = WhyNotInterpretable(graph);
  if (!why.empty()) throw ValueError("[fx.Interpreter] cannot run this graph in C++: " + why);
  return Run(graph, options)(std::move(inputs));
}

}  // namespace kiln::fx
