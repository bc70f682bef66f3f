// aot/partition.cc: DefaultPartition and MinCutPartition (PyTorch's default_partition and
// min_cut_rematerialization_partition), and the Dinic max-flow they share.
//
// Note [Partitioning the joint graph]
// The joint graph computes the forward outputs and, from the tangents, the gradients. Its nodes
// fall into:
//  - forward nodes: ancestors of the forward outputs (they never reach a tangent);
//  - backward nodes: the tangents and everything that reads them (transitively), plus the
//    gradient outputs themselves;
//  - the rest: primal-only values that only the backward reads (`w.t()` for mm's backward).
// The backward graph can only see the tangents and what the forward hands it ("saved values").
// Any forward value it needs and does not get must be recomputed from saved values inside the
// backward. The choice is the cut:
//  - DefaultPartition saves every forward value a non-forward node reads (for a tuple-valued op
//    its getitems; a tensor that the backward only asks for its sizes gives those sizes instead).
//  - MinCutPartition builds a flow network: each node v is an edge v_in -> v_out whose capacity is
//    the bytes of v's value (doubled when v would not be materialised in the forward anyway: all
//    its users are fusible; scaled by 1.1^distance-to-backward so that, of equal sizes, the value
//    nearer the backward is saved); data edges u_out -> v_in are infinite. The source feeds the
//    primals and every node whose recomputation is banned (source -> v_in, infinite); every
//    backward node drains to the sink (v_in -> sink). A minimum s-t cut is then a minimum-byte
//    set of values (cut v_in -> v_out edges) through which every backward use of a forward value
//    passes: save those, recompute everything between them and the backward.
//    Banned (PyTorch's should_ban_recomputation): compute-heavy ops (mm, bmm, addmm, convolution,
//    attention: CostClass::kComputeIntensive), random ops (Tag::nondeterministic_seeded: rand,
//    bernoulli, native_dropout), with ban_if_not_in_allowlist every op whose cost class is not
//    kFree or kMemoryBound (pointwise, reductions, views, copies, factories, cat), values
//    the backward reads through a non-fusible op (ban_if_materialized_backward), reductions whose
//    output is 4x smaller than their inputs (ban_if_reduction), and CheckpointPolicy MUST_SAVE /
//    PREFER_SAVE. MUST_RECOMPUTE / PREFER_RECOMPUTE wire v_in to the sink, so v is recomputed.
//    An input no backward node reads is never cut (Note [Saving only the inputs eager saves]).
// Both then extract the forward graph (primals -> fw outs + saved) and the backward graph (saved
// + tangents -> grads), drop saved values the backward turns out not to read, and extract again.
#include "aot/partition.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "fx/symbolic_shapes.h"
#include "runtime/error.h"

namespace kiln::aot {

using fx::Argument;
using fx::Graph;
using fx::Node;
using fx::Opcode;

// --- Dinic max-flow -------------------------------------------------------------------------

int FlowNetwork::AddVertex() {
  adj_.emplace_back();
  return size() - 1;
}

void FlowNetwork::AddEdge(int from, int to, int64_t capacity) {
  adj_[from].push_back(static_cast<int>(edges_.size()));
  edges_.push_back({to, std::min(capacity, kInfinity)});
  adj_[to].push_back(static_cast<int>(edges_.size()));
  edges_.push_back({from, 0});
}

bool FlowNetwork::Levels(int s, int t) {
  level_.assign(adj_.size(), -1);
  std::deque<int> queue{s};
  level_[s] = 0;
  while (!queue.empty()) {
    int v = queue.front();
    queue.pop_front();
    for (int e : adj_[v]) {
      if (edges_[e].cap > 0 && level_[edges_[e].to] < 0) {
        level_[edges_[e].to] = level_[v] + 1;
        queue.push_back(edges_[e].to);
      }
    }
  }
  return level_[t] >= 0;
}

int64_t FlowNetwork::Push(int v, int t, int64_t f) {
  if (v == t) return f;
  for (int& i = next_[v]; i < static_cast<int>(adj_[v].size()); ++i) {
    int e = adj_[v][i];
    if (edges_[e].cap <= 0 || level_[edges_[e].to] != level_[v] + 1) continue;
    int64_t d = Push(edges_[e].to, t, std::min(f, edges_[e].cap));
    if (d > 0) {
      edges_[e].cap -= d;
      edges_[e ^ 1].cap += d;
      return d;
    }
  }
  return 0;
}

int64_t FlowNetwork::MaxFlow(int source, int sink) {
  int64_t flow = 0;
  while (flow < kInfinity && Levels(source, sink)) {
    next_.assign(adj_.size(), 0);
    while (int64_t f = Push(source, sink, kInfinity)) {
      flow += f;
      if (flow >= kInfinity) break;
    }
  }
  source_side_.assign(adj_.size(), false);
  std::deque<int> queue{source};
  source_side_[source] = true;
  while (!queue.empty()) {
    int v = queue.front();
    queue.pop_front();
    for (int e : adj_[v]) {
      if (edges_[e].cap > 0 && !source_side_[edges_[e].to]) {
        source_side_[edges_[e].to] = true;
        queue.push_back(edges_[e].to);
      }
    }
  }
  return flow;
}

// --- node properties --------------------------------------------------------------------------

namespace {

constexpr int64_t kUnknownSize = 4096;  // a symbolic size without a hint (PyTorch's fallback)

int64_t SizeHint(const SymInt& s) {
  if (auto v = s.maybe_as_int()) return *v;
  if (auto* e = dynamic_cast<fx::SymExprNode*>(s.node().get())) {
    if (auto h = e->hint()) return h->i;
  }
  return kUnknownSize;
}

int64_t ArgumentBytes(const Argument& a) {
  if (a.kind == Argument::Kind::kConst && a.value.is_tensor()) {
    const Tensor& t = a.value.to_tensor();
    int64_t numel = 1;
    for (const SymInt& s : t->sym_sizes()) numel *= SizeHint(s);
    return numel * t->itemsize();
  }
  int64_t total = 0;
  if (a.kind == Argument::Kind::kTuple || a.kind == Argument::Kind::kList)
    for (const Argument& x : a.items) total += ArgumentBytes(x);
  return total;
}

const Argument* Val(const Node* n) { return n->FindMeta("val"); }

bool IsOutput(const Node* n) { return n->op() == Opcode::kOutput; }

const Op* OpOf(const Node* n) { return n->op() == Opcode::kCallFunction ? n->target().op : nullptr; }

bool IsGetItem(const Node* n) {
  return n->op() == Opcode::kCallFunction && !n->target().op && n->target().py &&
         n->target().py->name_hint() == "getitem";
}

bool IsSymNode(const Node* n) {
  if (const Argument* v = Val(n)) return v->kind == Argument::Kind::kConst && v->value.is_symint();
  if (n->op() != Opcode::kCallFunction) return false;
  if (const Op* op = OpOf(n)) return op->base_name().rfind("sym_", 0) == 0;  // sym_size.int, sym_numel, ...
  if (IsGetItem(n)) return false;
  // A Python operator (operator.mul, sym_max) over size nodes, as make_fx's symbolic mode builds.
  std::vector<Node*> ins = n->AllInputNodes();
  return !ins.empty() && std::all_of(ins.begin(), ins.end(), [](Node* i) { return IsSymNode(i); });
}

// A tensor value: meta "val" is a tensor (without meta "val" a node counts as a non-tensor).
bool IsTensorValued(const Node* n) {
  const Argument* v = Val(n);
  return v && v->kind == Argument::Kind::kConst && v->value.is_tensor();
}

bool HasTag(const Node* n, Tag t) {
  const Op* op = OpOf(n);
  return op && op->has_tag(t);
}
bool IsView(const Node* n) { return HasTag(n, Tag::view); }
bool IsRandom(const Node* n) { return HasTag(n, Tag::nondeterministic_seeded); }

// Note [Op cost classes] in tensor/dispatcher.h: the registry says what an op costs to recompute.
bool IsComputeIntensive(const Node* n) {
  const Op* op = OpOf(n);
  return op && op->cost_class() == CostClass::kComputeIntensive;
}

bool IsRecomputable(const Node* n) {
  if (IsGetItem(n) || IsSymNode(n)) return true;
  const Op* op = OpOf(n);
  if (!op || IsRandom(n)) return false;
  return op->cost_class() == CostClass::kFree || op->cost_class() == CostClass::kMemoryBound;
}

// PyTorch's fusible_ops = recomputable | random. A getitem fuses as its producer does.
bool IsFusibleOp(const Node* n) {
  if (IsGetItem(n)) return !n->args().empty() && n->args()[0].is_node() && IsFusibleOp(n->args()[0].node);
  return IsRecomputable(n) || IsRandom(n);
}
bool IsFusible(const Node* producer, const Node* consumer) {
  if (OpOf(consumer) && OpOf(consumer)->base_name() == "cat") return true;  // memory fusion into cat
  return IsFusibleOp(producer) && IsFusibleOp(consumer);
}

// --- the joint graph, classified ----------------------------------------------------------------

struct Joint {
  const Graph& graph;
  std::vector<Node*> nodes;
  std::unordered_map<const Node*, size_t> index;
  std::vector<Argument> fw_outs, bw_outs;
  std::vector<Node*> primals, tangents;
  std::vector<bool> fw, bw;  // by index: required by the forward outputs / by the backward
  std::vector<bool> primal, tangent;  // by index

  explicit Joint(const JointGraph& joint)
      : graph(*joint.graph), nodes(graph.nodes()), primals(joint.primals()), tangents(joint.tangents()) {
    for (size_t i = 0; i < nodes.size(); ++i) index[nodes[i]] = i;
    const std::vector<Argument>& items = graph.output_node()->args()[0].items;  // checked by JointGraph
    fw_outs.assign(items.begin(), items.begin() + joint.num_fwd_outputs);
    bw_outs.assign(items.begin() + joint.num_fwd_outputs, items.end());
    primal.assign(nodes.size(), false);
    tangent.assign(nodes.size(), false);
    for (Node* n : primals) primal[index.at(n)] = true;
    for (Node* n : tangents) tangent[index.at(n)] = true;
    fw.assign(nodes.size(), false);
    bw.assign(nodes.size(), false);
    std::vector<Node*> stack;
    for (const Argument& a : fw_outs) a.ForEachNode([&](Node* n) { stack.push_back(n); });
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      if (fw[index.at(n)]) continue;
      KILN_CHECK(!is_tangent(n), "partition: the forward output depends on the tangent '", n->name(), "'");
      fw[index.at(n)] = true;
      for (Node* in : n->AllInputNodes()) stack.push_back(in);
    }
    for (Node* n : nodes) {  // program order is topological: users come later
      if (is_tangent(n)) bw[index.at(n)] = true;
      if (!bw[index.at(n)]) continue;
      for (Node* u : n->users()) bw[index.at(u)] = true;
    }
    for (const Argument& a : bw_outs) a.ForEachNode([&](Node* n) { bw[index.at(n)] = true; });
  }
  bool is_primal(const Node* n) const { return primal[index.at(n)]; }
  bool is_tangent(const Node* n) const { return tangent[index.at(n)]; }
  bool is_fw(const Node* n) const { return fw[index.at(n)]; }
  bool is_bw(const Node* n) const { return bw[index.at(n)]; }
};

// Copies the part of `joint` that computes `outputs` from `inputs` into a new graph; `copied`
// gets the joint nodes copied as computations (not inputs).
std::shared_ptr<Graph> Extract(const Joint& j, const std::vector<Node*>& inputs, const std::vector<Argument>& outputs,
                               const char* what, std::vector<Node*>* copied = nullptr) {
  auto g = std::make_shared<Graph>();
  std::unordered_map<const Node*, Node*> map;
  for (Node* in : inputs) {
    Node* p = g->Placeholder(in->name());
    p->meta() = in->meta();
    p->type = in->type;
    map[in] = p;
  }
  std::vector<bool> needed(j.nodes.size(), false);
  std::vector<Node*> stack;
  for (const Argument& a : outputs) a.ForEachNode([&](Node* n) { stack.push_back(n); });
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    size_t i = j.index.at(n);
    if (needed[i] || map.count(n)) continue;
    needed[i] = true;
    for (Node* in : n->AllInputNodes()) stack.push_back(in);
  }
  auto lookup = [&](Node* n) { return Argument(map.at(n)); };
  for (Node* n : j.nodes) {
    if (!needed[j.index.at(n)] || map.count(n)) continue;
    KILN_CHECK(n->op() != Opcode::kPlaceholder, "partition: the ", what, " graph needs the input '", n->name(),
               "', which is not among its inputs");
    map[n] = g->NodeCopy(n, lookup);
    if (copied) copied->push_back(n);
  }
  std::vector<Argument> outs;
  for (const Argument& a : outputs) outs.push_back(a.Map(lookup));
  g->Output(Argument::Tuple(std::move(outs)));
  g->EliminateDeadCode();
  return g;
}

// Builds both graphs for a choice of saved values (PyTorch's _extract_fwd_bwd_modules).
Partition Finish(const Joint& j, std::vector<Node*> saved, std::vector<Node*> saved_sym) {
  auto dedupe = [&](std::vector<Node*>& v) {
    std::unordered_set<const Node*> seen;
    v.erase(std::remove_if(v.begin(), v.end(), [&](Node* n) { return !seen.insert(n).second; }), v.end());
    std::sort(v.begin(), v.end(), [&](Node* a, Node* b) { return j.index.at(a) < j.index.at(b); });
  };
  dedupe(saved);
  dedupe(saved_sym);
  auto bw_inputs = [&] {
    std::vector<Node*> in = saved_sym;
    in.insert(in.end(), saved.begin(), saved.end());
    in.insert(in.end(), j.tangents.begin(), j.tangents.end());
    return in;
  };
  // Saved values the backward does not read after all (their readers were dead) are dropped.
  std::shared_ptr<Graph> bw = Extract(j, bw_inputs(), j.bw_outs, "backward");
  std::unordered_set<std::string> unused;
  for (Node* p : bw->nodes())
    if (p->op() == Opcode::kPlaceholder && p->users().empty()) unused.insert(p->name());
  auto drop = [&](std::vector<Node*>& v) {
    v.erase(std::remove_if(v.begin(), v.end(), [&](Node* n) { return unused.count(n->name()) > 0; }), v.end());
  };
  drop(saved);
  drop(saved_sym);

  Partition p;
  std::vector<Node*> recomputed;
  p.backward = Extract(j, bw_inputs(), j.bw_outs, "backward", &recomputed);
  std::vector<Argument> fw_outs = j.fw_outs;
  for (Node* n : saved) fw_outs.emplace_back(n);
  for (Node* n : saved_sym) fw_outs.emplace_back(n);
  p.forward = Extract(j, j.primals, fw_outs, "forward");
  for (Node* n : saved) {
    p.saved_values.push_back(n->name());
    p.saved_bytes += NodeBytes(n);
  }
  for (Node* n : saved_sym) p.saved_sym_nodes.push_back(n->name());
  const int num_saved = static_cast<int>(saved.size());
  for (int s = 0; s < static_cast<int>(saved_sym.size()); ++s) p.saved_order.push_back(num_saved + s);
  for (int v = 0; v < num_saved; ++v) p.saved_order.push_back(v);
  for (Node* n : recomputed)
    if (j.is_fw(n) || !j.is_bw(n)) p.recomputed.push_back(n->name());
  return p;
}

}  // namespace

std::optional<CheckpointPolicy> PolicyOf(const Node* n) {
  const Argument* a = n->FindMeta("recompute");
  if (!a || a->is_none()) return std::nullopt;
  if (a->kind == Argument::Kind::kConst && a->value.is_int()) {
    int64_t v = a->value.to_int();
    KILN_CHECK_VALUE(v >= 0 && v <= 3, "node '", n->name(), "': meta['recompute'] = ", v, " is no CheckpointPolicy");
    return static_cast<CheckpointPolicy>(v);
  }
  std::string text = a->kind == Argument::Kind::kPy ? a->py->repr() : a->Format(false);
  static const std::pair<const char*, CheckpointPolicy> kNames[] = {
      {"MUST_SAVE", CheckpointPolicy::kMustSave},
      {"PREFER_SAVE", CheckpointPolicy::kPreferSave},
      {"MUST_RECOMPUTE", CheckpointPolicy::kMustRecompute},
      {"PREFER_RECOMPUTE", CheckpointPolicy::kPreferRecompute}};
  for (const auto& [name, policy] : kNames)
    if (text.find(name) != std::string::npos) return policy;
  throw ValueError(StrCat("node '", n->name(), "': meta['recompute'] = ", text, " is no CheckpointPolicy"));
}

int64_t NodeBytes(const Node* n) {
  const Argument* v = Val(n);
  return v ? ArgumentBytes(*v) : 0;
}

// --- the default partition ----------------------------------------------------------------------

Partition DefaultPartition(const JointGraph& joint) {
  // As PyTorch's: a graph with recompute annotations (activation checkpointing) goes to min-cut.
  for (Node* n : joint.graph->nodes()) {
    auto p = PolicyOf(n);
    if (p == CheckpointPolicy::kMustRecompute || p == CheckpointPolicy::kPreferRecompute)
      return MinCutPartition(joint);
  }
  Joint j(joint);
  std::unordered_set<const Node*> bw_outputs;
  for (const Argument& a : j.bw_outs) a.ForEachNode([&](Node* n) { bw_outputs.insert(n); });
  std::vector<Node*> saved, saved_sym;
  for (Node* n : j.nodes) {
    if (!j.is_fw(n) || n->op() == Opcode::kGetAttr) continue;  // constants are copied, not saved
    std::vector<Node*> bw_users;
    for (Node* u : n->users())
      if (!IsOutput(u) && !j.is_fw(u)) bw_users.push_back(u);
    if (bw_users.empty() && !bw_outputs.count(n)) continue;
    if (IsSymNode(n)) {
      saved_sym.push_back(n);
    } else if (!IsTensorValued(n) && !n->users().empty() &&
               std::all_of(n->users().begin(), n->users().end(), [](Node* u) { return IsGetItem(u); })) {
      for (Node* u : n->users()) saved.push_back(u);  // a tuple: keep its items
    } else if (IsTensorValued(n) && !bw_users.empty() && !bw_outputs.count(n) &&
               std::all_of(bw_users.begin(), bw_users.end(), [](Node* u) { return IsSymNode(u); })) {
      for (Node* u : bw_users) saved_sym.push_back(u);  // the backward only reads its sizes
    } else {
      saved.push_back(n);
    }
  }
  return Finish(j, std::move(saved), std::move(saved_sym));
}

// --- the min-cut partition ----------------------------------------------------------------------

Partition MinCutPartition(const JointGraph& joint, const MinCutOptions& options) {
  Joint j(joint);
  const size_t n_nodes = j.nodes.size();
  auto must_recompute = [&](const Node* n) {
    auto p = PolicyOf(n);
    return p == CheckpointPolicy::kMustRecompute || p == CheckpointPolicy::kPreferRecompute;
  };
  auto materialized_backward = [&](Node* n) {
    if (IsView(n)) return false;
    std::vector<Node*> cur{n};
    std::unordered_set<const Node*> seen{n};
    while (!cur.empty()) {
      Node* c = cur.back();
      cur.pop_back();
      for (Node* u : c->users()) {
        if (!j.is_fw(u) && (IsOutput(u) || !IsFusible(c, u))) return true;
        if (IsView(u) && seen.insert(u).second) cur.push_back(u);
      }
    }
    return false;
  };
  auto should_ban = [&](Node* n) {
    if (n->op() != Opcode::kCallFunction || IsGetItem(n)) return false;
    auto policy = PolicyOf(n);
    if (policy == CheckpointPolicy::kMustSave || policy == CheckpointPolicy::kPreferSave) return true;
    if (options.ban_if_not_in_allowlist) {
      if (!IsRecomputable(n)) return true;
    } else if (IsRandom(n) || IsComputeIntensive(n)) {
      return true;
    }
    if (options.ban_if_materialized_backward && materialized_backward(n)) return true;
    if (options.ban_if_reduction && IsTensorValued(n)) {
      int64_t in_bytes = 0;
      for (Node* in : n->AllInputNodes()) in_bytes += NodeBytes(in);
      return NodeBytes(n) * 4 < in_bytes;
    }
    return false;
  };

  // Distance to the backward: 0 for backward nodes, else 1 + the nearest user's.
  constexpr int64_t kFar = 1000000000;
  std::vector<int64_t> dist(n_nodes, kFar);
  for (size_t i = n_nodes; i-- > 0;) {
    Node* n = j.nodes[i];
    if (j.bw[i]) {
      dist[i] = 0;
      continue;
    }
    for (Node* u : n->users()) dist[i] = std::min(dist[i], dist[j.index.at(u)] + 1);
  }

  // Note [Saving only the inputs eager saves]: an input that no backward node reads is not
  // saved; the values computed from it are. Saved, a later in-place change to it (`x2[::2].zero_()`
  // after the call) must raise, as the compiled backward would read the new values, where eager,
  // which saved the values computed from it, trains on (fuzz seed 101, program 1545). A graph
  // with no finite cut under that rule is cut without it.
  // Likewise a forward output no backward node reads (`v3 = v2 * -1; v4 = 2 / v3`, v3 returned:
  // the reciprocal's backward reads v4's reciprocal, which eager saves): saved instead of it (the
  // cheaper cut), the user's later `v3.fill_(-1.5)` made the compiled backward raise where eager's
  // trains on (fuzz seed 211, program 4860).
  std::vector<bool> read_by_backward(n_nodes, false), returned_unread(n_nodes, false);
  for (Node* p : j.primals)
    for (Node* u : p->users())
      if (!IsOutput(u) && !j.is_fw(u)) read_by_backward[j.index.at(p)] = true;
  for (size_t i = 0; i < n_nodes; ++i) {
    Node* n = j.nodes[i];
    if (j.is_primal(n) || IsOutput(n) || !j.fw[i]) continue;
    bool returned = false, read = false;
    for (Node* u : n->users()) {
      returned = returned || IsOutput(u);
      read = read || (!IsOutput(u) && !j.is_fw(u));
    }
    returned_unread[i] = returned && !read;
  }

  auto cut = [&](bool only_eager_saved_inputs, std::vector<Node*>& saved, std::vector<Node*>& saved_sym) {
    FlowNetwork net;
    const int source = net.AddVertex(), sink = net.AddVertex();
    for (size_t i = 0; i < n_nodes; ++i) {
      net.AddVertex();  // v_in  = 2 + 2i
      net.AddVertex();  // v_out = 3 + 2i
    }
    auto in_of = [&](const Node* n) { return 2 + 2 * static_cast<int>(j.index.at(n)); };
    auto out_of = [&](const Node* n) { return 3 + 2 * static_cast<int>(j.index.at(n)); };
    constexpr int64_t kInf = FlowNetwork::kInfinity;
    auto ban = [&](Node* n) {
      if (IsView(n) || must_recompute(n)) return;
      net.AddEdge(source, in_of(n), kInf);
    };
    auto fusible_users = [&](Node* n) {
      return std::all_of(n->users().begin(), n->users().end(),
                         [&](Node* u) { return !IsOutput(u) && IsFusible(n, u); });
    };

    for (size_t i = 0; i < n_nodes; ++i) {
      Node* n = j.nodes[i];
      if (IsOutput(n)) continue;
      if (j.bw[i]) {
        if (n->op() != Opcode::kPlaceholder && !j.fw[i]) {
          net.AddEdge(in_of(n), sink, kInf);  // computed in the backward
          continue;
        }
        net.AddEdge(out_of(n), sink, kInf);  // a forward value (or input) the backward returns
      }
      if (must_recompute(n)) {
        net.AddEdge(in_of(n), sink, kInf);
        continue;
      }
      if (j.is_primal(n)) ban(n);
      if (j.fw[i] && should_ban(n)) ban(n);

      int64_t weight;
      if (IsSymNode(n)) {
        weight = 1;
      } else if (!IsTensorValued(n) ||
                 (only_eager_saved_inputs && ((j.is_primal(n) && !read_by_backward[i]) || returned_unread[i]))) {
        weight = kInf;  // tuples and untyped values are never saved whole; nor inputs and outputs eager does not save
      } else {
        double w = static_cast<double>(NodeBytes(n)) * std::pow(1.1, std::clamp<int64_t>(dist[i], 1, 100));
        bool materialized = n->op() == Opcode::kPlaceholder || !fusible_users(n);
        weight = static_cast<int64_t>(materialized ? w : 2 * w);
      }
      net.AddEdge(in_of(n), out_of(n), weight);
      for (Node* u : n->users())
        if (!IsOutput(u)) net.AddEdge(out_of(n), in_of(u), kInf);
    }

    if (net.MaxFlow(source, sink) >= kInf) return false;
    for (size_t i = 0; i < n_nodes; ++i) {
      Node* n = j.nodes[i];
      if (IsOutput(n) || !net.OnSourceSide(in_of(n)) || net.OnSourceSide(out_of(n))) continue;
      (IsSymNode(n) ? saved_sym : saved).push_back(n);
    }
    return true;
  };

  std::vector<Node*> saved, saved_sym;
  KILN_CHECK(cut(true, saved, saved_sym) || cut(false, saved, saved_sym),
             "min_cut_rematerialization_partition: no finite cut: a value the backward needs can "
             "be neither saved nor recomputed (check MUST_RECOMPUTE on ops whose inputs are banned)");
  return Finish(j, std::move(saved), std::move(saved_sym));
}

}  // namespace kiln::aot
