// aot/joint.cc: the joint graph's contract checked (Note [The joint graph's contract]) and input
// mutations as its leading outputs (Note [Input mutations as outputs]), both in joint.h.
#include "aot/joint.h"

#include <algorithm>
#include <unordered_map>

#include "runtime/error.h"

namespace kiln::aot {
namespace {

std::vector<fx::Node*> Placeholders(const fx::Graph& graph) {
  std::vector<fx::Node*> out;
  for (fx::Node* n : graph.nodes())
    if (n->op() == fx::Opcode::kPlaceholder) out.push_back(n);
  return out;
}

}  // namespace

JointGraph::JointGraph(std::shared_ptr<fx::Graph> g, int primals, int tangents, int fwd_outputs,
                       std::vector<int> mutated, std::vector<std::optional<OutputAlias>> aliases)
    : graph(std::move(g)), num_primals(primals), num_tangents(tangents), num_fwd_outputs(fwd_outputs),
      mutated_inputs(std::move(mutated)), output_aliases(std::move(aliases)) {
  if (!graph) throw ValueError("JointGraph: graph is None");
  if (num_primals < 0 || num_tangents < 0 || num_fwd_outputs < 0)
    throw ValueError(StrCat("JointGraph: counts must be non-negative, got num_primals=", num_primals,
                            ", num_tangents=", num_tangents, ", num_fwd_outputs=", num_fwd_outputs));
  const size_t placeholders = Placeholders(*graph).size();
  if (placeholders != static_cast<size_t>(num_primals) + num_tangents)
    throw ValueError(StrCat("JointGraph: num_primals=", num_primals, " + num_tangents=", num_tangents,
                            " but the graph has ", placeholders, " placeholders"));
  const fx::Node* out = graph->output_node();
  if (out == nullptr || out->args().size() != 1 ||
      (out->args()[0].kind != fx::Argument::Kind::kTuple && out->args()[0].kind != fx::Argument::Kind::kList))
    throw ValueError("JointGraph: the graph must end in an output of one flat tuple (forward outputs, gradients)");
  const size_t outputs = out->args()[0].items.size();
  if (static_cast<size_t>(num_fwd_outputs) > outputs)
    throw ValueError(StrCat("JointGraph: num_fwd_outputs=", num_fwd_outputs, " but the graph has ", outputs,
                            " outputs"));
  if (mutated_inputs.size() > static_cast<size_t>(num_fwd_outputs))
    throw ValueError(StrCat("JointGraph: ", mutated_inputs.size(), " mutated inputs but only ", num_fwd_outputs,
                            " forward outputs to return their new values"));
  for (int i : mutated_inputs)
    if (i < 0 || i >= num_primals)
      throw ValueError(StrCat("JointGraph: mutated input ", i, " is not among the ", num_primals, " primals"));
  const size_t function_outputs = num_fwd_outputs - mutated_inputs.size();
  if (!output_aliases.empty() && output_aliases.size() != function_outputs)
    throw ValueError(StrCat("JointGraph: ", output_aliases.size(), " output aliases for ", function_outputs,
                            " function outputs"));
  for (const std::optional<OutputAlias>& a : output_aliases) {
    if (!a) continue;
    const bool of_output = a->base == OutputAlias::Base::kOutput;
    const int limit = of_output ? static_cast<int>(function_outputs) : num_primals;
    if (a->index < 0 || a->index >= limit)
      throw ValueError(StrCat("JointGraph: an output alias of ", of_output ? "output " : "input ", a->index,
                              ", not among the ", limit, of_output ? " function outputs" : " primals"));
  }
}

std::vector<fx::Node*> JointGraph::primals() const {
  std::vector<fx::Node*> all = Placeholders(*graph);
  all.resize(std::min<size_t>(all.size(), num_primals));
  return all;
}

std::vector<fx::Node*> JointGraph::tangents() const { return TrailingPlaceholders(*graph, num_tangents); }

std::vector<fx::Node*> TrailingPlaceholders(const fx::Graph& graph, int num_tangents) {
  std::vector<fx::Node*> all = Placeholders(graph);
  if (num_tangents < 0 || static_cast<size_t>(num_tangents) > all.size())
    throw ValueError(StrCat("num_tangents=", num_tangents, " but the graph has ", all.size(), " placeholders"));
  return std::vector<fx::Node*>(all.end() - num_tangents, all.end());
}

std::vector<int> MutationsToOutputs(fx::Graph& graph) {
  std::unordered_map<const fx::Node*, int> input_index;
  for (fx::Node* n : graph.nodes())
    if (n->op() == fx::Opcode::kPlaceholder) input_index.emplace(n, static_cast<int>(input_index.size()));
  auto reads_input = [&](const fx::Node* n) {
    return !n->args().empty() && n->args()[0].is_node() && input_index.count(n->args()[0].node) > 0;
  };
  auto calls = [](const fx::Node* n) { return n->op() == fx::Opcode::kCallFunction ? n->target().op : nullptr; };

  // an input's in-place view op: its users read the input (whose new layout the runtime replays)
  for (fx::Node* n : graph.nodes()) {
    const Op* op = calls(n);
    if (op && op->has_tag(Tag::inplace_view) && reads_input(n)) {
      n->ReplaceAllUsesWith(n->args()[0].node);
      graph.EraseNode(n);
    }
  }
  const Op& copy_ = Registry::Get().FindOrThrow("aten::copy_");
  std::vector<int> mutated;
  std::vector<fx::Argument> outputs;
  for (fx::Node* n : graph.nodes()) {
    if (calls(n) == &copy_ && reads_input(n) && n->users().empty()) {
      mutated.push_back(input_index.at(n->args()[0].node));
      outputs.push_back(n->args().at(1));
      graph.EraseNode(n);
    }
  }
  fx::Node* out = graph.output_node();
  if (out == nullptr) throw ValueError("[aot] the joint graph has no output");
  const fx::Argument results = out->args().empty() ? fx::Argument() : out->args()[0];
  if (results.kind == fx::Argument::Kind::kTuple || results.kind == fx::Argument::Kind::kList) {
    outputs.insert(outputs.end(), results.items.begin(), results.items.end());
  } else {
    outputs.push_back(results);
  }
  out->SetArgs({fx::Argument::Tuple(std::move(outputs))});
  return mutated;
}

}  // namespace kiln::aot
