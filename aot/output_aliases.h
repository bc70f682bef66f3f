// aot/output_aliases.h: the outputs of a traced function that view one of its inputs or another of
// its outputs, found from the fake run's tensors (FindOutputAliases), and the view ops the graph
// made each of them with (WalkViews): what AOTAutograd's runtime rebuilds as views, so a compiled
// function returns views exactly where eager does (`x[0].mul_(2)`, `(y, y.t())`). The rebuilding
// itself, on the real tensors and under autograd, is python/kiln/_functorch/_aot_autograd/
// output_analysis.py's.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "fx/graph.h"
#include "tensor/tensor_impl.h"

namespace kiln::aot {

// Where a tensor lies in its storage.
struct StridedLayout {
  DimVector sizes, strides;
  int64_t offset = 0;
  bool operator==(const StridedLayout& o) const = default;
};

// An output that views an input (`index` its position among the inputs) or another output
// (`index` that output's position, `base_layout` its layout as traced).
struct OutputAlias {
  enum class Base : uint8_t { kInput, kOutput };
  Base base = Base::kInput;
  int index = 0;
  StridedLayout view;  // the output's own layout, as traced
  std::optional<StridedLayout> base_layout;
};

// One output of the fake run: its tensor (undefined for a non-tensor output) and whether autograd
// records it as a view of another tensor (Python's `t._base is not None`).
struct TracedOutput {
  Tensor tensor;
  bool is_view = false;
};

// Note [Output aliases]: an output whose storage is an input's views that input (the first input
// with that storage). Outputs sharing a storage of their own are rebuilt as views of one of them,
// the root, whose gradient then takes theirs through as_strided: so the root must hold every
// element they hold. It is a dense one with the largest extent (of equal extents, one that is no
// view: a split piece as large as its base, `v.split(1)[0]` of a one-element v, is then rebuilt
// from v as the multi-output view it is, not v from it: fuzz seed 211, program 5597); the members
// whose extent lies within the root's are its aliases (`v[::2]` returned before `v` was its root
// once, and v's rows between lost their gradient, silently). An empty member holds no element to
// lose (`v.split(1)[-1]` of an empty v: fuzz seed 291, program 3209). Of a group of empty outputs,
// the root is the first that is no view (a hidden base: its pieces stay pieces). `inputs` may hold
// undefined tensors (non-tensor inputs); the result has an entry per output, nullopt for the
// outputs that alias nothing.
std::vector<std::optional<OutputAlias>> FindOutputAliases(const std::vector<Tensor>& inputs,
                                                          const std::vector<TracedOutput>& outputs);

// One view op of a chain: the node applying it; for a piece of a multi-output view op (an item of
// split's or chunk's result) the node is the split and `piece` the item's position, else -1.
struct ViewStep {
  fx::Node* node = nullptr;
  int64_t piece = -1;
};

// Note [Replaying output views]: the view ops from a value to an output, read back from the
// output's node through ops whose result views their first argument (tagged `view`, or a schema
// `(Tensor(a) self, ...) -> Tensor(a)`: t, narrow, movedim carry no tag; maybe-views such as
// reshape too, whose replay the runtime keeps only if it aliases) and items of ops returning
// `Tensor(a)[]`, until `stop` (or as far as such ops go when `stop` is null) or an op whose other
// arguments are nodes (a replay could not pass them). Returns the node reached and the steps from
// it to `from`, in order.
struct ViewChain {
  fx::Node* reached = nullptr;
  std::vector<ViewStep> steps;
};
ViewChain WalkViews(fx::Node* from, const fx::Node* stop = nullptr);

}  // namespace kiln::aot
