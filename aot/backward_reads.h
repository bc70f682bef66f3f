// aot/backward_reads.h: which tangents each node of a joint or backward graph is computed from
// (Note [Tangent masks]). python/kiln/_functorch/backward_reads.py builds on it: which gradients
// depend on which outputs' tangents, and the backward specialised to the tangents present.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fx/graph.h"

namespace kiln::aot {

// A set of tangents (a graph's `tangents_*` placeholders, numbered in graph order): bit k of word
// k / 64 stands for tangent k, so any number of them fits.
class TangentSet {
 public:
  TangentSet() = default;
  explicit TangentSet(std::vector<uint64_t> words);
  static TangentSet Of(int tangent);
  TangentSet& operator|=(const TangentSet& other);
  bool operator==(const TangentSet& other) const;
  bool empty() const;
  const std::vector<uint64_t>& words() const { return words_; }  // no trailing zero words

 private:
  void Trim();
  std::vector<uint64_t> words_;
};

// Note [Tangent masks]: a node's mask is the set of tangents it is computed from: a tangent
// placeholder stands for itself, another node ORs the masks of the nodes it reads (and `seeds`,
// tangents a node stands for without reading them). An op that writes an argument in place (its
// schema's `Tensor(a!)`) writes what it computed into that argument's storage, so every node of
// that storage -- the argument, the views it was made through (ops whose first result is a view
// of their first argument, `Tensor(a)`), their base -- carries the writer's mask too: a raw joint
// graph builds slice's gradient as `full` zeros and copy_ of the tangent into a view of them, and
// the gradient a formula receives is the `full` node (its mask would be empty, which counts as
// read whatever the tangents: fuzz seed 971, program 251).
//
// Every node but the output, in graph order, with its mask.
std::vector<std::pair<const fx::Node*, TangentSet>> TangentMasks(
    const fx::Graph& graph, const std::unordered_map<const fx::Node*, TangentSet>& seeds = {});

}  // namespace kiln::aot
