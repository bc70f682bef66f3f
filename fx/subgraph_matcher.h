// fx/subgraph_matcher.h: finds the places where a pattern Graph occurs inside a target Graph.
//
// The structural matcher behind kiln.fx.subgraph_rewriter.replace_pattern (PyTorch's
// torch.fx.passes.utils.matcher_utils.SubgraphMatcher). A pattern is a Graph whose placeholders
// are its inputs and whose output names the values it produces.
//
// Matching starts at the pattern's anchors (the nodes its output returns, or the output itself
// with match_output) and walks upwards through args:
//  - a pattern node matches a target node with the same opcode and target (get_attr nodes match
//    any get_attr, as PyTorch compares only the attribute's type; placeholders are wildcards unless
//    match_placeholder is set);
//  - args, then kwarg values, are matched positionally (tuples and lists element by element,
//    either kind against either); when an aten op is called with args and kwargs split
//    differently, both sides are first normalised by its schema (defaults filled in);
//  - a pattern placeholder binds to any target node or to a constant; a pattern node binds to one
//    target node and each target node to at most one pattern node; other constants must be equal
//    (same type and value) unless ignore_literals.
// A match is kept only if it is self-contained (no node inside it other than the returned ones is
// used outside it) and fusing its compute nodes would not create a cycle. With
// remove_overlapping_matches (the default), a match sharing a compute node with an earlier match
// is dropped. Matches come in target-graph order of their first anchor.
#pragma once

#include <utility>
#include <vector>

#include "fx/graph.h"

namespace kiln::fx {

struct SubgraphMatcherOptions {
  bool match_output = false;
  bool match_placeholder = false;
  bool remove_overlapping_matches = true;
  bool ignore_literals = false;
};

// One occurrence of the pattern. nodes_map keys are pattern nodes; a value is a target node
// (Argument::kNode) or, for placeholders bound to a constant, that constant.
struct InternalMatch {
  std::vector<const Node*> anchors;
  std::vector<std::pair<const Node*, Argument>> nodes_map;  // in the order nodes were matched
  std::vector<Argument> placeholder_nodes;  // what each pattern placeholder bound to, in order
  std::vector<Node*> returning_nodes;       // what each returned pattern node matched, in order

  const Argument* Find(const Node* pattern_node) const;
  // The target nodes standing for the pattern's compute nodes (not placeholders or output).
  std::vector<Node*> ComputeNodes() const;
};

class SubgraphMatcher {
 public:
  // ValueError for an empty pattern, one without an output, or one with dead code.
  explicit SubgraphMatcher(const Graph& pattern, SubgraphMatcherOptions options = {});

  std::vector<InternalMatch> Match(const Graph& graph) const;

  const std::vector<Node*>& placeholders() const { return placeholders_; }
  const std::vector<Node*>& returning_nodes() const { return returning_; }
  const std::vector<Node*>& anchors() const { return anchors_; }

 private:
  bool NodesAreEqual(const Node* pn, const Node* gn) const;
  bool MatchNodes(const Node* pn, Node* gn, InternalMatch& m) const;
  bool MatchArgs(const std::vector<Argument>& pa, const std::vector<Argument>& ga, InternalMatch& m) const;
  bool MatchArg(const Argument& pa, const Argument& ga, InternalMatch& m) const;
  bool MatchLiteral(const Argument& pa, const Argument& ga, InternalMatch& m) const;
  bool IsContained(const InternalMatch& m) const;
  void Backtrack(size_t anchor_index, InternalMatch& m,
                 const std::vector<std::vector<Node*>>& candidates,
                 std::vector<InternalMatch>& out) const;

  const Graph& pattern_;
  SubgraphMatcherOptions options_;
  std::vector<Node*> placeholders_;
  std::vector<Node*> returning_;
  std::vector<Node*> anchors_;
};

// Whether fusing `nodes` into one node keeps the graph acyclic: no path leaves the set and
// comes back into it.
bool ValidatePartition(const std::vector<Node*>& nodes);

}  // namespace kiln::fx
