// aot/joint.h: the joint graph's epilogue passes, after make_fx(functionalize(f)) recorded it.
//
// Note [Input mutations as outputs]: functionalize ends f with `copy_(input, new_value)` for each
// input f wrote, and replays an input's in-place view op (`x.t_()`) on it. AOTAutograd returns the
// new values instead, first among the graph's outputs, and the runtime writes them back (and
// replays a new layout itself: Note [Input metadata mutations] in python/kiln/_functorch/
// _aot_autograd/runtime.py), so the compiled graphs are functional.
#pragma once

#include <vector>

#include "fx/graph.h"

namespace kiln::aot {

// Drops the in-place view ops applied to placeholders (their users read the placeholder), turns
// each unused `aten.copy_(placeholder, value)` into a leading output (in graph order) and returns
// the positions among the placeholders of the inputs so written. Nodes the rewrite leaves dead
// stay (the caller's dead-code elimination knows which Python callables have side effects).
std::vector<int> MutationsToOutputs(fx::Graph& graph);

}  // namespace kiln::aot
