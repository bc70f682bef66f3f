// fx/subgraph_matcher.cc: structural matching of a pattern Graph inside a target Graph.
#include "fx/subgraph_matcher.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace kiln::fx {

namespace {

bool IsPlaceholderOrOutput(const Node* n) {
  return n->op() == Opcode::kPlaceholder || n->op() == Opcode::kOutput;
}

// Tuples, lists, and constant int/float/bool lists read as sequences of elements, so that
// (1, 2) in a pattern matches [1, 2] in a graph however either was stored.
bool AsSequence(const Argument& a, std::vector<Argument>& out) {
  out.clear();
  if (a.kind == Argument::Kind::kTuple || a.kind == Argument::Kind::kList) {
    out = a.items;
    return true;
  }
  if (a.kind != Argument::Kind::kConst) return false;
  const auto& v = a.value.variant();
  if (auto* ints = std::get_if<std::vector<SymInt>>(&v)) {
    for (const SymInt& i : *ints) out.emplace_back(IValue(i));
    return true;
  }
  if (auto* fs = std::get_if<std::vector<double>>(&v)) {
    for (double f : *fs) out.emplace_back(IValue(f));
    return true;
  }
  if (auto* bs = std::get_if<std::vector<bool>>(&v)) {
    for (bool b : *bs) out.emplace_back(IValue(static_cast<bool>(b)));
    return true;
  }
  return false;
}

// A node's args and kwargs as one positional list; when `op` is given, laid out by its schema
// (kwargs placed by name, missing arguments filled with their defaults).
std::vector<Argument> FlattenArgs(const Node* n, const Op* op) {
  std::vector<Argument> out;
  if (op == nullptr) {
    out = n->args();
    for (const auto& [k, v] : n->kwargs()) out.push_back(v);
    return out;
  }
  const auto& schema_args = op->schema().arguments;
  for (size_t i = 0; i < schema_args.size(); ++i) {
    const auto& sa = schema_args[i];
    auto kw = std::find_if(n->kwargs().begin(), n->kwargs().end(),
                           [&](const auto& kv) { return kv.first == sa.name; });
    if (kw != n->kwargs().end()) out.push_back(kw->second);
    else if (!sa.kwarg_only && i < n->args().size()) out.push_back(n->args()[i]);
    else if (sa.default_value) out.emplace_back(*sa.default_value);
    else out.emplace_back();
  }
  return out;
}

bool SameKwargKeys(const Node* a, const Node* b) {
  if (a->kwargs().size() != b->kwargs().size()) return false;
  for (size_t i = 0; i < a->kwargs().size(); ++i)
    if (a->kwargs()[i].first != b->kwargs()[i].first) return false;
  return true;
}

}  // namespace

const Argument* InternalMatch::Find(const Node* pattern_node) const {
  for (const auto& [pn, v] : nodes_map)
    if (pn == pattern_node) return &v;
  return nullptr;
}

std::vector<Node*> InternalMatch::ComputeNodes() const {
  std::vector<Node*> out;
  for (const auto& [pn, v] : nodes_map)
    if (!IsPlaceholderOrOutput(pn) && v.is_node()) out.push_back(v.node);
  return out;
}

SubgraphMatcher::SubgraphMatcher(const Graph& pattern, SubgraphMatcherOptions options)
    : pattern_(pattern), options_(options) {
  std::vector<Node*> nodes = pattern.nodes();
  KILN_CHECK_VALUE(!nodes.empty(), "SubgraphMatcher cannot be initialized with an empty pattern");
  Node* output = pattern.output_node();
  KILN_CHECK_VALUE(output != nullptr, "SubgraphMatcher: the pattern graph has no output node");
  for (Node* n : nodes) {
    KILN_CHECK_VALUE(n->op() == Opcode::kOutput || !n->users().empty(),
                     "SubgraphMatcher cannot be initialized with an pattern with dead code (node '",
                     n->name(), "' has no users)");
    if (n->op() == Opcode::kPlaceholder) placeholders_.push_back(n);
  }
  returning_ = output->AllInputNodes();
  if (options_.match_output) {
    anchors_ = {output};
  } else {
    // A returned node whose only user is the output is a sink of the pattern: matching starts there.
    for (Node* n : returning_)
      if (n->users().size() == 1) anchors_.push_back(n);
  }
}

bool SubgraphMatcher::NodesAreEqual(const Node* pn, const Node* gn) const {
  if (!options_.match_placeholder && pn->op() == Opcode::kPlaceholder) return true;
  if (pn->op() != gn->op()) return false;
  switch (pn->op()) {
    case Opcode::kPlaceholder:
    case Opcode::kOutput:
    case Opcode::kGetAttr:  // PyTorch requires only that both attributes are tensors
      return true;
    default:
      return pn->target() == gn->target();
  }
}

bool SubgraphMatcher::MatchLiteral(const Argument& pa, const Argument& ga, InternalMatch& m) const {
  if (pa.is_node() && !ga.is_node()) {
    // A placeholder binds to a constant (or a container) as readily as to a node.
    if (pa.node->op() != Opcode::kPlaceholder) return false;
    if (const Argument* bound = m.Find(pa.node)) return *bound == ga;
    m.nodes_map.emplace_back(pa.node, ga);
    return true;
  }
  if (!pa.is_node() && ga.is_node()) return false;
  return pa == ga;
}

bool SubgraphMatcher::MatchArg(const Argument& pa, const Argument& ga, InternalMatch& m) const {
  if (pa.is_node() && ga.is_node()) return MatchNodes(pa.node, ga.node, m);
  std::vector<Argument> ps, gs;
  if (AsSequence(pa, ps) && AsSequence(ga, gs)) return MatchArgs(ps, gs, m);
  return MatchLiteral(pa, ga, m) || options_.ignore_literals;
}

bool SubgraphMatcher::MatchArgs(const std::vector<Argument>& pa, const std::vector<Argument>& ga,
                                InternalMatch& m) const {
  if (pa.size() != ga.size()) return false;
  for (size_t i = 0; i < pa.size(); ++i)
    if (!MatchArg(pa[i], ga[i], m)) return false;
  return true;
}

bool SubgraphMatcher::MatchNodes(const Node* pn, Node* gn, InternalMatch& m) const {
  if (const Argument* bound = m.Find(pn)) return bound->is_node() && bound->node == gn;
  for (const auto& [k, v] : m.nodes_map)
    if (v.is_node() && v.node == gn) return false;  // gn already stands for another pattern node
  if (!NodesAreEqual(pn, gn)) return false;

  InternalMatch saved = m;
  m.nodes_map.emplace_back(pn, Argument(gn));
  if (pn->op() == Opcode::kPlaceholder) return true;

  bool same_layout = pn->args().size() == gn->args().size() && SameKwargKeys(pn, gn);
  const Op* op = pn->op() == Opcode::kCallFunction ? pn->target().op : nullptr;
  bool ok;
  if (!same_layout && op != nullptr) ok = MatchArgs(FlattenArgs(pn, op), FlattenArgs(gn, op), m);
  else if (same_layout) ok = MatchArgs(FlattenArgs(pn, nullptr), FlattenArgs(gn, nullptr), m);
  else ok = false;
  if (!ok) m = std::move(saved);
  return ok;
}

bool SubgraphMatcher::IsContained(const InternalMatch& m) const {
  // Target nodes standing for the pattern's non-placeholder nodes: only the returned ones may
  // have users outside the match (placeholders' values come from outside anyway).
  std::unordered_map<const Node*, const Node*> lookup;
  for (const auto& [pn, v] : m.nodes_map)
    if (pn->op() != Opcode::kPlaceholder && v.is_node()) lookup[v.node] = pn;
  for (const auto& [gn, pn] : lookup) {
    if (std::find(returning_.begin(), returning_.end(), pn) != returning_.end()) continue;
    for (Node* user : gn->users())
      if (!lookup.count(user)) return false;
  }
  return true;
}

void SubgraphMatcher::Backtrack(size_t anchor_index, InternalMatch& m,
                                const std::vector<std::vector<Node*>>& candidates,
                                std::vector<InternalMatch>& out) const {
  if (anchor_index == anchors_.size()) {
    InternalMatch done = m;
    for (Node* p : placeholders_) {
      const Argument* a = done.Find(p);
      done.placeholder_nodes.push_back(a ? *a : Argument());
    }
    for (Node* r : returning_) {
      const Argument* a = done.Find(r);
      done.returning_nodes.push_back(a && a->is_node() ? a->node : nullptr);
    }
    out.push_back(std::move(done));
    return;
  }
  InternalMatch saved = m;
  for (Node* gn : candidates[anchor_index]) {
    if (MatchNodes(anchors_[anchor_index], gn, m)) Backtrack(anchor_index + 1, m, candidates, out);
    m = saved;
  }
}

std::vector<InternalMatch> SubgraphMatcher::Match(const Graph& graph) const {
  std::vector<Node*> gnodes = graph.nodes();
  std::vector<std::vector<Node*>> candidates(anchors_.size());
  for (size_t i = 0; i < anchors_.size(); ++i)
    for (Node* gn : gnodes)
      if (NodesAreEqual(anchors_[i], gn)) candidates[i].push_back(gn);

  std::vector<InternalMatch> found;
  if (!anchors_.empty()) {
    InternalMatch m;
    m.anchors.assign(anchors_.begin(), anchors_.end());
    Backtrack(0, m, candidates, found);
  }

  std::vector<InternalMatch> valid;
  for (InternalMatch& m : found)
    if (IsContained(m) && ValidatePartition(m.ComputeNodes())) valid.push_back(std::move(m));
  if (!options_.remove_overlapping_matches) return valid;

  std::vector<InternalMatch> kept;
  std::unordered_set<const Node*> taken;
  for (InternalMatch& m : valid) {
    std::vector<Node*> compute = m.ComputeNodes();
    bool overlaps = std::any_of(compute.begin(), compute.end(), [&](Node* n) { return taken.count(n); });
    if (overlaps) continue;
    taken.insert(compute.begin(), compute.end());
    kept.push_back(std::move(m));
  }
  return kept;
}

bool ValidatePartition(const std::vector<Node*>& nodes) {
  std::unordered_set<const Node*> part(nodes.begin(), nodes.end());
  std::vector<Node*> queue;
  for (Node* n : nodes)
    for (Node* u : n->users())
      if (!part.count(u)) queue.push_back(u);
  // From every user outside the partition, walk downstream: reaching the partition again means
  // fusing it would create a cycle.
  std::unordered_set<const Node*> visited;
  while (!queue.empty()) {
    Node* cur = queue.back();
    queue.pop_back();
    if (!visited.insert(cur).second) continue;
    if (part.count(cur)) return false;
    for (Node* u : cur->users())
      if (!visited.count(u)) queue.push_back(u);
  }
  return true;
}

}  // namespace kiln::fx
