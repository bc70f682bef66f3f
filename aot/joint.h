// aot/joint.h: the joint graph, typed (JointGraph: which inputs are primals and which tangents,
// how many outputs are the forward's, which inputs the forward wrote), and its epilogue passes,
// after make_fx(functionalize(f)) recorded it.
//
// Note [Input mutations as outputs]: functionalize ends f with `copy_(input, new_value)` for each
// input f wrote, and replays an input's in-place view op (`x.t_()`) on it. AOTAutograd returns the
// new values instead, first among the graph's outputs, and the runtime writes them back (and
// replays a new layout itself: Note [Input metadata mutations] in python/kiln/_functorch/
// _aot_autograd/runtime.py), so the compiled graphs are functional.
#pragma once

#include <memory>
#include <vector>

#include "aot/output_aliases.h"
#include "fx/graph.h"

namespace kiln::aot {

// Note [The joint graph's contract]: the graph AOTAutograd traces takes the primals (the
// function's inputs, lifted constants after them), then one tangent per differentiable forward
// output; it returns one flat tuple, the forward's outputs (the new values of mutated inputs
// first, then the function's outputs) followed by a gradient (or None) per primal. PyTorch tells
// tangents from primals by the placeholders' names ("tangents_1", ...); kiln's passes are given
// the counts, so a graph's names are only names. A backward graph keeps the convention: its
// tangents are its last placeholders, after the values the forward saved.
struct JointGraph {
  std::shared_ptr<fx::Graph> graph;
  int num_primals = 0;
  int num_tangents = 0;
  int num_fwd_outputs = 0;
  // Positions among the primals of the inputs the function wrote, in the order of their new
  // values among the first forward outputs (Note [Input mutations as outputs]).
  std::vector<int> mutated_inputs;
  // Per function output (the forward outputs after the mutated inputs' new values): the input or
  // output it views, as the fake run found it (Note [Output aliases]); empty when not known.
  std::vector<std::optional<OutputAlias>> output_aliases;

  // Checks the counts against the graph (ValueError naming what disagrees): num_primals +
  // num_tangents placeholders, an output of one flat tuple with at least num_fwd_outputs items,
  // mutated inputs among the primals and no more of them than forward outputs, an output alias
  // (if any are given) per function output, each of a primal or of a function output.
  JointGraph(std::shared_ptr<fx::Graph> graph, int num_primals, int num_tangents, int num_fwd_outputs,
             std::vector<int> mutated_inputs = {}, std::vector<std::optional<OutputAlias>> output_aliases = {});

  std::vector<fx::Node*> primals() const;
  std::vector<fx::Node*> tangents() const;
};

// The last `num_tangents` placeholders of `graph` (a joint graph's or a backward graph's tangents);
// ValueError when it has fewer.
std::vector<fx::Node*> TrailingPlaceholders(const fx::Graph& graph, int num_tangents);

// Drops the in-place view ops applied to placeholders (their users read the placeholder), turns
// each unused `aten.copy_(placeholder, value)` into a leading output (in graph order) and returns
// the positions among the placeholders of the inputs so written. Nodes the rewrite leaves dead
// stay (the caller's dead-code elimination knows which Python callables have side effects).
std::vector<int> MutationsToOutputs(fx::Graph& graph);

}  // namespace kiln::aot
