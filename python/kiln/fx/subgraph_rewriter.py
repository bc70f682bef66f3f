"""kiln.fx.subgraph_rewriter: replace_pattern (torch.fx.subgraph_rewriter).

    def pattern(x, w):
        return kiln.relu(kiln.add(x, w))
    def replacement(x, w):
        return kiln.clamp_min(x + w, 0.0)
    matches = replace_pattern(gm, pattern, replacement)   # [Match(anchor, nodes_map), ...]

The pattern and replacement are traced (or taken as given Graphs/GraphModules); the C++
SubgraphMatcher (fx/subgraph_matcher.h) finds the non-overlapping, self-contained occurrences of
the pattern, and each is replaced by a copy of the replacement with its placeholders bound to
what the pattern's placeholders matched (nodes or constants). The GraphModule is recompiled.
"""

from typing import Any, Dict, List, NamedTuple

from kiln._C import _fx
from kiln.fx.graph import Graph
from kiln.fx.graph_module import GraphModule
from kiln.fx.node import Node, map_arg

__all__ = ["Match", "ReplacedPatterns", "InternalMatch", "SubgraphMatcher", "replace_pattern",
           "replace_pattern_with_filters"]


class Match(NamedTuple):
    anchor: Node  # the pattern's anchor node (a node of the pattern graph)
    nodes_map: Dict[Node, Any]  # pattern node -> the graph node (or constant) it matched


class ReplacedPatterns(NamedTuple):
    anchor: Node
    nodes_map: Dict[Node, Any]
    replacements: List[Node]  # the nodes added to the graph for this match


class InternalMatch:
    """One occurrence found by SubgraphMatcher (torch.fx.passes.utils.matcher_utils.InternalMatch)."""

    def __init__(self, anchors, nodes_map=None, placeholder_nodes=None, returning_nodes=None):
        self.anchors = anchors
        self.nodes_map = nodes_map if nodes_map is not None else {}
        self.placeholder_nodes = placeholder_nodes if placeholder_nodes is not None else []
        self.returning_nodes = returning_nodes if returning_nodes is not None else []
        self.name_node_map = {}

    def __repr__(self):
        return (f"InternalMatch(anchors={self.anchors}, nodes_map={self.nodes_map}, "
                f"placeholder_nodes={self.placeholder_nodes}, returning_nodes={self.returning_nodes})")


class SubgraphMatcher:
    """Finds a pattern Graph inside other graphs (torch.fx.passes.utils.matcher_utils.SubgraphMatcher).

    Placeholders of the pattern are wildcards (binding any node or constant) unless
    match_placeholder; the output is matched too with match_output; overlapping matches are dropped
    unless remove_overlapping_matches=False; constants must be equal unless ignore_literals."""

    def __init__(self, pattern, match_output=False, match_placeholder=False, remove_overlapping_matches=True,
                 ignore_literals=False):
        if not isinstance(pattern, Graph):
            raise TypeError(f"SubgraphMatcher expects a kiln.fx.Graph pattern, got {type(pattern).__name__}")
        self.pattern = pattern
        self.match_output = match_output
        self.match_placeholder = match_placeholder
        self.remove_overlapping_matches = remove_overlapping_matches
        self.ignore_literals = ignore_literals
        # Checks the pattern now (empty, no output, dead code), as PyTorch's constructor does.
        _fx._subgraph_match(pattern, Graph(), match_output, match_placeholder, remove_overlapping_matches,
                            ignore_literals)
        self.pattern_placeholder_nodes = [n for n in pattern.nodes if n.op == "placeholder"]
        output = list(pattern.nodes)[-1]
        self.pattern_returning_nodes = output.all_input_nodes
        if match_output:
            self.pattern_anchors = [output]
        else:
            self.pattern_anchors = [n for n in output.all_input_nodes if len(n.users) == 1]

    def match(self, graph):
        """The InternalMatches of the pattern in `graph`, in graph order."""
        out = []
        for anchors, items, placeholders, returning in _fx._subgraph_match(
                self.pattern, graph, self.match_output, self.match_placeholder,
                self.remove_overlapping_matches, self.ignore_literals):
            out.append(InternalMatch(anchors, dict(items), placeholders, returning))
        return out


def _as_graph(obj, role):
    if isinstance(obj, GraphModule):
        return obj.graph
    if isinstance(obj, Graph):
        return obj
    if callable(obj):
        from kiln.fx._symbolic_trace import symbolic_trace

        return symbolic_trace(obj).graph
    raise TypeError(f"replace_pattern: the {role} must be a callable, a Graph or a GraphModule, "
                    f"got {type(obj).__name__}")


def _copy_replacement(graph, replacement_graph, val_map):
    """Copies the replacement's nodes into `graph` at its insert point; placeholders map through
    val_map (to nodes or constants). Returns the replacement's output value, mapped."""
    for rn in replacement_graph.nodes:
        if rn.op == "placeholder":
            continue
        if rn.op == "output":
            return map_arg(rn.args[0], lambda n: val_map[n])
        val_map[rn] = graph.node_copy(rn, lambda n: val_map[n])
    return None


def _replace_pattern(gm, pattern, replacement, match_filters=None, ignore_literals=False):
    if not isinstance(gm, GraphModule):
        raise TypeError(f"replace_pattern expects a kiln.fx.GraphModule, got {type(gm).__name__}")
    match_filters = match_filters or []
    original_graph = gm.graph
    pattern_graph = _as_graph(pattern, "pattern")
    replacement_graph = _as_graph(replacement, "replacement")

    matcher = SubgraphMatcher(pattern_graph, match_output=False, match_placeholder=False,
                              remove_overlapping_matches=True, ignore_literals=ignore_literals)
    matches = [m for m in matcher.match(original_graph)
               if all(f(m, original_graph, pattern_graph) for f in match_filters)]

    replacement_placeholders = [n for n in replacement_graph.nodes if n.op == "placeholder"]
    if len(matcher.pattern_placeholder_nodes) != len(replacement_placeholders):
        raise ValueError(f"replace_pattern: the pattern takes {len(matcher.pattern_placeholder_nodes)} inputs but the "
                         f"replacement takes {len(replacement_placeholders)}")

    # A node replaced by an earlier match's output stands for it in later matches.
    match_changed_node = {}
    results = []
    for match in matches:
        val_map = {}
        for i, (rn, gn) in enumerate(zip(replacement_placeholders, match.placeholder_nodes)):
            if isinstance(gn, Node):
                val_map[rn] = match_changed_node.get(gn, gn)
                if val_map[rn] is not gn:
                    match.placeholder_nodes[i] = val_map[rn]
                    for pn, v in match.nodes_map.items():
                        if v is gn:
                            match.nodes_map[pn] = val_map[rn]
            else:
                val_map[rn] = gn

        user_nodes = set()
        for n in match.returning_nodes:
            user_nodes.update(n.users)
        if not user_nodes:
            raise RuntimeError("The returning_nodes should have at least one user node")
        first_user = next(n for n in original_graph.nodes if n in user_nodes)

        with original_graph.inserting_before(first_user):
            copied = _copy_replacement(original_graph, replacement_graph, val_map)
        if isinstance(copied, Node) or not isinstance(copied, (tuple, list)):
            copied = (copied,)
        replacement_nodes = [v for k, v in val_map.items() if k.op != "placeholder"]

        if len(match.returning_nodes) != len(copied):
            raise ValueError(f"replace_pattern: the pattern returns {len(match.returning_nodes)} values but the "
                             f"replacement returns {len(copied)}")
        for gn, copied_node in zip(match.returning_nodes, copied):
            if isinstance(copied_node, Node):
                gn.replace_all_uses_with(copied_node)
            else:
                # The replacement returns a constant or one of its inputs bound to a constant.
                for user in list(gn.users):
                    _replace_input_with_value(user, gn, copied_node)
            match_changed_node[gn] = copied_node

        for pn in reversed(list(pattern_graph.nodes)):
            if pn.op not in ("placeholder", "output"):
                original_graph.erase_node(match.nodes_map[pn])

        results.append(ReplacedPatterns(anchor=match.anchors[0], nodes_map=match.nodes_map,
                                        replacements=replacement_nodes))
    gm.recompile()
    return results


def _replace_input_with_value(user, old, value):
    user.args = map_arg(user.args, lambda n: value if n is old else n)
    user.kwargs = map_arg(user.kwargs, lambda n: value if n is old else n)


def replace_pattern(gm, pattern, replacement):
    """Replaces every (non-overlapping, self-contained) occurrence of `pattern` in gm's graph by
    `replacement`; returns the Matches (anchor and nodes_map, keyed by pattern nodes)."""
    return [Match(anchor=m.anchor, nodes_map=m.nodes_map) for m in _replace_pattern(gm, pattern, replacement)]


def replace_pattern_with_filters(gm, pattern, replacement, match_filters=None, ignore_literals=False):
    """replace_pattern, keeping only the matches for which every `match_filter(match, graph,
    pattern_graph)` holds; with ignore_literals, constants in the pattern match any constant.
    Returns ReplacedPatterns (anchor, nodes_map, replacements)."""
    return _replace_pattern(gm, pattern, replacement, match_filters, ignore_literals)
