// python/csrc/python_subgraph.cc: kiln._C._fx._subgraph_match, the binding of fx/subgraph_matcher.h
// that kiln.fx.subgraph_rewriter (and passes.utils.matcher_utils.SubgraphMatcher) call.
#include <pybind11/stl.h>

#include "fx/subgraph_matcher.h"
#include "python/csrc/python_fx.h"
#include "python/csrc/python_subgraph.h"

namespace py = pybind11;

namespace kiln::python {

namespace {

py::object NodeOrNone(const fx::Node* n) {
  return n ? NodeObject(const_cast<fx::Node*>(n)) : py::none();
}

// One match as (anchors, nodes_map items, placeholder values, returning nodes); pattern nodes
// and target nodes are the graphs' own Node objects, constants bound to placeholders are Python
// values.
py::tuple MatchToPython(const fx::InternalMatch& m) {
  py::list anchors, items, placeholders, returning;
  for (const fx::Node* a : m.anchors) anchors.append(NodeOrNone(a));
  for (const auto& [pn, v] : m.nodes_map) items.append(py::make_tuple(NodeOrNone(pn), FromArgument(v)));
  for (const fx::Argument& a : m.placeholder_nodes) placeholders.append(FromArgument(a));
  for (const fx::Node* r : m.returning_nodes) returning.append(NodeOrNone(r));
  return py::make_tuple(anchors, items, placeholders, returning);
}

}  // namespace

void InitSubgraphBindings(py::module_& parent) {
  py::module_ m = parent.attr("_fx").cast<py::module_>();
  m.def("_subgraph_match", [](py::handle pattern, py::handle graph, bool match_output, bool match_placeholder,
                              bool remove_overlapping_matches, bool ignore_literals) {
    std::shared_ptr<fx::Graph> p = UnwrapGraph(pattern);
    std::shared_ptr<fx::Graph> g = UnwrapGraph(graph);
    fx::SubgraphMatcherOptions opts;
    opts.match_output = match_output;
    opts.match_placeholder = match_placeholder;
    opts.remove_overlapping_matches = remove_overlapping_matches;
    opts.ignore_literals = ignore_literals;
    fx::SubgraphMatcher matcher(*p, opts);
    py::list out;
    for (const fx::InternalMatch& match : matcher.Match(*g)) out.append(MatchToPython(match));
    return out;
  }, py::arg("pattern"), py::arg("graph"), py::arg("match_output") = false, py::arg("match_placeholder") = false,
     py::arg("remove_overlapping_matches") = true, py::arg("ignore_literals") = false,
     "Matches of the pattern graph in graph: [(anchors, [(pattern_node, value)], placeholder_values, returning_nodes)]");
}

}  // namespace kiln::python
