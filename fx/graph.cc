// fx/graph.cc: Graph and Node editing, naming, dead-code elimination, lint, copying, printing.
#include "fx/graph.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <regex>
#include <sstream>

#include "fx/repr.h"

namespace kiln::fx {

const char* OpcodeName(Opcode op) {
  switch (op) {
    case Opcode::kPlaceholder: return "placeholder";
    case Opcode::kGetAttr: return "get_attr";
    case Opcode::kCallFunction: return "call_function";
    case Opcode::kCallMethod: return "call_method";
    case Opcode::kCallModule: return "call_module";
    case Opcode::kOutput: return "output";
    case Opcode::kRoot: return "root";
  }
  return "?";
}

Opcode OpcodeFromName(const std::string& name) {
  for (Opcode op : {Opcode::kPlaceholder, Opcode::kGetAttr, Opcode::kCallFunction, Opcode::kCallMethod,
                    Opcode::kCallModule, Opcode::kOutput})
    if (name == OpcodeName(op)) return op;
  throw ValueError(StrCat("Unsupported node opcode '", name,
                          "'; expected one of placeholder, get_attr, call_function, call_method, "
                          "call_module, output"));
}

// ---------------------------------------------------------------------------------------------
// Argument

Argument Argument::Dict(std::vector<Argument> keys, std::vector<Argument> values) {
  Argument a;
  a.kind = Kind::kDict;
  a.keys = std::move(keys);
  a.items = std::move(values);
  return a;
}

Argument Argument::Py(PyValuePtr p) {
  Argument a;
  a.kind = Kind::kPy;
  a.py = std::move(p);
  return a;
}

void Argument::ForEachNode(const std::function<void(Node*)>& f) const {
  if (kind == Kind::kNode) f(node);
  for (const Argument& k : keys) k.ForEachNode(f);
  for (const Argument& x : items) x.ForEachNode(f);
}

Argument Argument::Map(const std::function<Argument(Node*)>& f) const {
  if (kind == Kind::kNode) return f(node);
  if (items.empty() && keys.empty()) return *this;
  Argument out = *this;
  for (Argument& x : out.items) x = x.Map(f);
  for (Argument& k : out.keys) k = k.Map(f);
  return out;
}

bool Argument::operator==(const Argument& o) const {
  if (kind != o.kind) return false;
  switch (kind) {
    case Kind::kNone: return true;
    case Kind::kNode: return node == o.node;
    case Kind::kConst: return ConstEqual(value, o.value);
    case Kind::kPy: return py->identity() == o.py->identity();
    default: return items == o.items && keys == o.keys;
  }
}

std::string Argument::Format(bool node_percent) const {
  switch (kind) {
    case Kind::kNone: return "None";
    case Kind::kNode: return (node_percent ? "%" : "") + node->name();
    case Kind::kConst: return ConstRepr(value);
    case Kind::kPy: return py->repr();
    case Kind::kTuple:
    case Kind::kList: {
      std::string s = kind == Kind::kTuple ? "(" : "[";
      for (size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + items[i].Format(node_percent);
      if (kind == Kind::kTuple && items.size() == 1) s += ",";
      return s + (kind == Kind::kTuple ? ")" : "]");
    }
    case Kind::kDict: {
      std::string s = "{";
      for (size_t i = 0; i < items.size(); ++i)
        s += (i ? ", " : "") + keys[i].Format(node_percent) + ": " + items[i].Format(node_percent);
      return s + "}";
    }
    case Kind::kSlice:
      return "slice(" + items[0].Format(node_percent) + ", " + items[1].Format(node_percent) + ", " +
             items[2].Format(node_percent) + ")";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------
// Target

Target Target::Callable(PyValuePtr p, const Op* op) {
  Target t;
  t.py = std::move(p);
  t.op = op;
  return t;
}

bool Target::operator==(const Target& o) const {
  if (op || o.op) return op == o.op;
  if (py || o.py) return py && o.py && py->identity() == o.py->identity();
  return name == o.name;
}

std::string Target::str() const {
  if (op) {
    // "aten::add.Tensor" -> "aten.add.Tensor"; the default overload prints as ".default".
    std::string s = op->name();
    s.replace(s.find("::"), 2, ".");
    if (op->schema().overload.empty()) s += ".default";
    return s;
  }
  if (py) return py->target_str();
  return name;
}

// ---------------------------------------------------------------------------------------------
// Node

std::vector<Node*> Node::AllInputNodes() const {
  std::vector<Node*> out;
  auto add = [&](Node* n) {
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  };
  for (const Argument& a : args_) a.ForEachNode(add);
  for (const auto& [k, a] : kwargs_) a.ForEachNode(add);
  return out;
}

void Node::AddUser(Node* user) {
  if (std::find(users_.begin(), users_.end(), user) == users_.end()) users_.push_back(user);
}

void Node::RemoveUser(Node* user) {
  users_.erase(std::remove(users_.begin(), users_.end(), user), users_.end());
}

void Node::DetachInputs() {
  for (Node* in : AllInputNodes()) in->RemoveUser(this);
}

void Node::AttachInputs() {
  for (Node* in : AllInputNodes()) {
    KILN_CHECK(in->graph_ == graph_ && !in->erased_, "Argument '", in->name(), "' of Node '", name_,
               "' was used before it has been defined, or belongs to another graph");
    in->AddUser(this);
  }
}

void Node::SetArgs(std::vector<Argument> args) {
  DetachInputs();
  args_ = std::move(args);
  AttachInputs();
}

void Node::SetKwargs(Kwargs kwargs) {
  DetachInputs();
  kwargs_ = std::move(kwargs);
  AttachInputs();
}

void Node::UpdateArg(size_t index, Argument arg) {
  KILN_CHECK_INDEX(index < args_.size(), "update_arg: index ", index, " out of range for node '", name_,
                   "' with ", args_.size(), " args");
  std::vector<Argument> args = args_;
  args[index] = std::move(arg);
  SetArgs(std::move(args));
}

void Node::UpdateKwarg(const std::string& key, Argument arg) {
  Kwargs kwargs = kwargs_;
  auto it = std::find_if(kwargs.begin(), kwargs.end(), [&](auto& kv) { return kv.first == key; });
  if (it == kwargs.end()) kwargs.emplace_back(key, std::move(arg));
  else it->second = std::move(arg);
  SetKwargs(std::move(kwargs));
}

void Node::ReplaceInputWith(Node* old_input, Node* new_input) {
  auto swap = [&](Node* n) { return Argument(n == old_input ? new_input : n); };
  DetachInputs();
  for (Argument& a : args_) a = a.Map(swap);
  for (auto& [k, a] : kwargs_) a = a.Map(swap);
  AttachInputs();
}

std::vector<Node*> Node::ReplaceAllUsesWith(Node* replacement, const std::function<bool(Node*)>& filter) {
  KILN_CHECK(replacement != this || filter, "replace_all_uses_with: cannot replace node '", name_,
             "' with itself");
  std::vector<Node*> changed;
  for (Node* user : std::vector<Node*>(users_)) {
    if (user == replacement && filter == nullptr) continue;  // keeps x -> f(x) edges when wrapping
    if (filter && !filter(user)) continue;
    user->ReplaceInputWith(this, replacement);
    changed.push_back(user);
  }
  return changed;
}

void Node::SetName(const std::string& name) {
  KILN_CHECK(graph_ != nullptr, "cannot rename erased node '", name_, "'");
  if (name == name_) return;
  graph_->ReleaseName(name_);
  name_ = graph_->CreateName(name);
}

void Node::RemoveFromList() {
  ++graph_->order_version_;
  prev_->next_ = next_;
  next_->prev_ = prev_;
  prev_ = next_ = nullptr;
}

void Node::InsertBefore(Node* where) {
  ++graph_->order_version_;
  prev_ = where->prev_;
  next_ = where;
  prev_->next_ = this;
  where->prev_ = this;
}

void Node::Prepend(Node* n) {
  KILN_CHECK(n->graph_ == graph_, "prepend: node '", n->name(), "' belongs to another graph");
  if (n == this) return;
  n->RemoveFromList();
  n->InsertBefore(this);
}

void Node::Append(Node* n) {
  KILN_CHECK(n->graph_ == graph_, "append: node '", n->name(), "' belongs to another graph");
  if (n == this) return;
  n->RemoveFromList();
  n->InsertBefore(next_);
}

bool Node::IsImpure() const {
  if (op_ == Opcode::kPlaceholder || op_ == Opcode::kOutput) return true;
  if (op_ == Opcode::kCallFunction && target_.op) return target_.op->schema().is_mutable();
  return false;
}

const Argument* Node::FindMeta(const std::string& key) const {
  for (const auto& [k, v] : meta_)
    if (k == key) return &v;
  return nullptr;
}

void Node::SetMeta(const std::string& key, Argument value) {
  for (auto& [k, v] : meta_)
    if (k == key) { v = std::move(value); return; }
  meta_.emplace_back(key, std::move(value));
}

std::string Node::Format() const {
  std::ostringstream os;
  os << "%" << name_ << " : [num_users=" << users_.size() << "] = ";
  if (op_ == Opcode::kPlaceholder) {
    os << "placeholder[target=" << target_.str() << "]";
    if (!args_.empty()) os << "(default=" << args_[0].Format() << ")";
    return os.str();
  }
  if (op_ == Opcode::kOutput) {
    // PyTorch prints outputs as `return <value>` in graph dumps.
    return "return " + (args_.empty() ? std::string("None") : args_[0].Format(/*node_percent=*/false));
  }
  if (op_ == Opcode::kGetAttr) {
    os << "get_attr[target=" << target_.str() << "]";
    return os.str();
  }
  os << OpcodeName(op_) << "[target=" << target_.str() << "](args = "
     << Argument::Tuple(args_).Format() << ", kwargs = {";
  for (size_t i = 0; i < kwargs_.size(); ++i)
    os << (i ? ", " : "") << kwargs_[i].first << ": " << kwargs_[i].second.Format();
  os << "})";
  return os.str();
}

// ---------------------------------------------------------------------------------------------
// Graph

namespace {
std::vector<std::string>& ReservedNames() {
  // A fallback for C++-only users; python/ installs Python's keywords and builtins.
  static std::vector<std::string> names = {
      "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
      "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in",
      "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with",
      "yield", "abs", "all", "any", "bool", "dict", "float", "getattr", "hash", "id", "input", "int",
      "len", "list", "max", "min", "object", "pow", "print", "range", "round", "set", "slice", "sorted",
      "str", "sum", "tuple", "type", "zip", "inf", "nan", "kiln", "device", "self", "NoneType"};
  return names;
}
std::unordered_set<std::string>& ReservedSet() {
  static std::unordered_set<std::string> set(ReservedNames().begin(), ReservedNames().end());
  return set;
}
}  // namespace

void Graph::SetReservedNames(std::vector<std::string> names) {
  ReservedNames() = std::move(names);
  ReservedSet() = std::unordered_set<std::string>(ReservedNames().begin(), ReservedNames().end());
}

Graph::Graph() : root_(new Node(this, "", Opcode::kRoot, Target())) {
  root_->prev_ = root_->next_ = root_.get();
}

Graph::~Graph() {
  // Python may still hold nodes: detach them so they read as erased instead of dangling.
  for (auto& [raw, node] : owned_) {
    node->graph_ = nullptr;
    node->erased_ = true;
    node->args_.clear();
    node->kwargs_.clear();
    node->users_.clear();
    node->prev_ = node->next_ = nullptr;
  }
  root_->graph_ = nullptr;
}

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> out;
  out.reserve(size_);
  for (Node* n = root_->next_; n != root_.get(); n = n->next_) out.push_back(n);
  return out;
}

std::shared_ptr<Node> Graph::shared(const Node* n) const {
  auto it = owned_.find(n);
  return it == owned_.end() ? nullptr : it->second;
}

Node* Graph::FindNode(const std::string& name) const {
  for (Node* n = root_->next_; n != root_.get(); n = n->next_)
    if (n->name_ == name) return n;
  return nullptr;
}

Node* Graph::output_node() const {
  Node* last = root_->prev_;
  return last != root_.get() && last->op_ == Opcode::kOutput ? last : nullptr;
}

std::string Graph::CreateName(const std::string& candidate_in) {
  // Sanitise to an identifier: runs of other characters become '_'; a leading digit gets '_'.
  std::string candidate;
  bool in_run = false;
  for (char c : candidate_in) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') { candidate += c; in_run = false; }
    else if (!in_run) { candidate += '_'; in_run = true; }
  }
  if (candidate.empty()) candidate = "_unnamed";
  if (std::isdigit(static_cast<unsigned char>(candidate[0]))) candidate = "_" + candidate;
  // "add_2" continues the numbering of base "add".
  std::string base = candidate;
  int64_t num = 0;
  bool has_suffix = false;
  size_t us = candidate.rfind('_');
  if (us != std::string::npos && us + 1 < candidate.size() && us > 0 &&
      std::all_of(candidate.begin() + us + 1, candidate.end(), [](char c) { return std::isdigit(c); }) &&
      candidate.size() - us - 1 < 18) {
    base = candidate.substr(0, us);
    num = std::stoll(candidate.substr(us + 1));
    has_suffix = true;
  }
  // "head_0" (a module path "head.0") keeps its suffix, as torch.fx does.
  std::string name = has_suffix ? base + "_" + std::to_string(num) : base;
  if (!num) num = base_count_[base];
  while (used_names_.count(name) || ReservedSet().count(name)) {
    ++num;
    name = base + "_" + std::to_string(num);
  }
  used_names_.insert(name);
  base_count_[base] = num;
  return name;
}

void Graph::ReleaseName(const std::string& name) { used_names_.erase(name); }

void Graph::InsertingBefore(Node* n) {
  KILN_CHECK(n == nullptr || n->graph_ == this, "inserting_before: node '", n ? n->name() : "",
             "' is not in this graph");
  insert_point_.node = n;
}

void Graph::InsertingAfter(Node* n) {
  KILN_CHECK(n == nullptr || n->graph_ == this, "inserting_after: node '", n ? n->name() : "",
             "' is not in this graph");
  // Inserting after n is inserting before n's successor; nullptr means the start of the graph.
  insert_point_.node = n == nullptr ? root_->next_ : n->next_;
}

Node* Graph::CreateNode(Opcode op, Target target, std::vector<Argument> args, Kwargs kwargs,
                        const std::string& name) {
  KILN_CHECK(op != Opcode::kRoot, "create_node: invalid opcode");
  std::string hint = name;
  if (hint.empty()) {
    if (op == Opcode::kOutput) hint = "output";
    else if (target.op) hint = target.op->base_name();
    else if (target.py) hint = target.py->name_hint();
    else hint = target.name;
    // Magic methods name their node after the operation: "__add__" -> "add".
    if (hint.size() > 4 && hint.rfind("__", 0) == 0 && hint.compare(hint.size() - 2, 2, "__") == 0)
      hint = hint.substr(2, hint.size() - 4);
    // Module and attribute paths: "layer1.conv" -> "layer1_conv".
  }
  std::shared_ptr<Node> node(new Node(this, CreateName(hint), op, std::move(target)));
  Node* raw = node.get();
  owned_.emplace(raw, std::move(node));
  raw->args_ = std::move(args);
  raw->kwargs_ = std::move(kwargs);
  try {
    raw->AttachInputs();
  } catch (...) {
    raw->DetachInputs();
    ReleaseName(raw->name_);
    owned_.erase(raw);
    throw;
  }
  Node* where = insert_point_.node && insert_point_.node->graph_ == this ? insert_point_.node : root_.get();
  raw->InsertBefore(where);
  ++size_;
  return raw;
}

Node* Graph::Placeholder(const std::string& name, std::optional<Argument> default_value) {
  std::vector<Argument> args;
  if (default_value) args.push_back(std::move(*default_value));
  Node* n = CreateNode(Opcode::kPlaceholder, Target(name), std::move(args), {}, name);
  return n;
}

Node* Graph::GetAttr(const std::string& qualified_name) {
  return CreateNode(Opcode::kGetAttr, Target(qualified_name));
}

Node* Graph::CallFunction(Target target, std::vector<Argument> args, Kwargs kwargs) {
  return CreateNode(Opcode::kCallFunction, std::move(target), std::move(args), std::move(kwargs));
}

Node* Graph::CallMethod(const std::string& method, std::vector<Argument> args, Kwargs kwargs) {
  return CreateNode(Opcode::kCallMethod, Target(method), std::move(args), std::move(kwargs));
}

Node* Graph::CallModule(const std::string& module_path, std::vector<Argument> args, Kwargs kwargs) {
  return CreateNode(Opcode::kCallModule, Target(module_path), std::move(args), std::move(kwargs));
}

Node* Graph::Output(Argument result) {
  return CreateNode(Opcode::kOutput, Target("output"), {std::move(result)});
}

void Graph::EraseNode(Node* n) {
  KILN_CHECK(n->graph_ == this && !n->erased_, "erase_node: node '", n->name(), "' is not in this graph");
  if (!n->users_.empty()) {
    std::string users;
    for (Node* u : n->users_) users += (users.empty() ? "" : ", ") + u->name();
    throw Error(StrCat("Tried to erase Node ", n->name(), " but it still had ", n->users_.size(),
                       " users in the graph: {", users, "}!"));
  }
  if (insert_point_.node == n) insert_point_.node = n->next_;
  n->DetachInputs();
  n->RemoveFromList();
  // Like PyTorch, an erased node keeps its shape but references no nodes.
  auto to_none = [](Node*) { return Argument(); };
  for (Argument& a : n->args_) a = a.Map(to_none);
  for (auto& [k, a] : n->kwargs_) a = a.Map(to_none);
  n->erased_ = true;
  n->graph_ = nullptr;
  ReleaseName(n->name_);
  --size_;
  owned_.erase(n);  // Python handles keep the object alive
}

bool Graph::EliminateDeadCode(const std::function<bool(const Node*)>& is_impure) {
  bool changed = false;
  for (Node* n = root_->prev_; n != root_.get();) {
    Node* prev = n->prev_;
    bool impure = is_impure ? is_impure(n) : n->IsImpure();
    if (!impure && n->users_.empty()) {
      EraseNode(n);
      changed = true;
    }
    n = prev;
  }
  return changed;
}

void Graph::Lint() const {
  std::unordered_set<const Node*> seen;
  std::unordered_set<std::string> names;
  size_t count = 0;
  for (Node* n = root_->next_; n != root_.get(); n = n->next_) {
    ++count;
    KILN_CHECK(n->graph_ == this, "Node '", n->name(), "' does not belong to this Graph!");
    KILN_CHECK(n->next_->prev_ == n && n->prev_->next_ == n, "Linked list corrupted at node '", n->name(), "'");
    KILN_CHECK(names.insert(n->name_).second, "Node redefined name ", n->name(), "!");
    KILN_CHECK(n->op_ != Opcode::kOutput || n->next_ == root_.get(),
               "Output node '", n->name(), "' is not the last node of the graph");
    for (Node* in : n->AllInputNodes()) {
      KILN_CHECK(in->graph_ == this, "Argument '", in->name(), "' of Node '", n->name(),
                 "' does not belong to this Graph, but was used as an argument!");
      KILN_CHECK(seen.count(in), "Argument '", in->name(), "' of Node '", n->name(),
                 "' was used before it has been defined! Please check that Nodes in the graph are "
                 "topologically ordered");
      KILN_CHECK(std::find(in->users_.begin(), in->users_.end(), n) != in->users_.end(),
                 "Node '", n->name(), "' reads '", in->name(), "' but is missing from its users");
    }
    for (Node* u : n->users_)
      KILN_CHECK(u->graph_ == this && !u->erased_ && [&] {
        auto ins = u->AllInputNodes();
        return std::find(ins.begin(), ins.end(), n) != ins.end();
      }(), "Node '", n->name(), "' lists user '", u->name(), "' which does not read it");
    if (n->op_ == Opcode::kCallFunction)
      KILN_CHECK(n->target_.op || n->target_.py, "Node '", n->name(), "' target ", n->target_.name,
                 " has type str but a Callable is expected");
    else
      KILN_CHECK(!n->target_.op && !n->target_.py && !n->target_.name.empty(), "Node '", n->name(),
                 "' of op ", OpcodeName(n->op_), " needs a str target, got ", n->target_.str());
    seen.insert(n);
  }
  KILN_CHECK(count == size_, "Graph node count ", size_, " does not match its list (", count, ")");
}

Node* Graph::NodeCopy(const Node* n, const std::function<Argument(Node*)>& arg_transform) {
  std::vector<Argument> args;
  for (const Argument& a : n->args_) args.push_back(a.Map(arg_transform));
  Kwargs kwargs;
  for (const auto& [k, a] : n->kwargs_) kwargs.emplace_back(k, a.Map(arg_transform));
  Node* copy = CreateNode(n->op_, n->target_, std::move(args), std::move(kwargs), n->name_);
  copy->type = n->type;
  copy->meta_ = n->meta_;
  return copy;
}

Argument Graph::GraphCopy(const Graph& g, std::unordered_map<const Node*, Node*>& value_map) {
  auto lookup = [&](Node* n) -> Argument {
    auto it = value_map.find(n);
    KILN_INTERNAL_ASSERT(it != value_map.end(), "graph_copy: node ", n->name(), " has no mapping");
    return Argument(it->second);
  };
  for (Node* n : g.nodes()) {
    if (value_map.count(n)) continue;
    if (n->op_ == Opcode::kOutput) {
      return n->args_.empty() ? Argument() : n->args_[0].Map(lookup);
    }
    value_map[n] = NodeCopy(n, lookup);
  }
  return Argument();
}

std::string Graph::str() const {
  // PyTorch lists placeholders as lines of their own and leaves the signature empty.
  std::string s = "graph():\n";
  for (Node* n = root_->next_; n != root_.get(); n = n->next_) s += "    " + n->Format() + "\n";
  s.pop_back();  // no trailing newline, as PyTorch prints it
  return s;
}

}  // namespace kiln::fx
