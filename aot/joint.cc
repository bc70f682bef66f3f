// aot/joint.cc: input mutations as the joint graph's leading outputs (Note [Input mutations as
// outputs] in joint.h).
#include "aot/joint.h"

#include <unordered_map>

#include "runtime/error.h"

namespace kiln::aot {

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
