// aot/backward_reads.h: which tangents each node of a joint or backward graph is computed from
// (Note [Tangent masks]), and which inputs the backward reads when some tangents are absent (Note
// [Inputs read by the backward]). python/kiln/_functorch/backward_reads.py builds on them: which
// gradients depend on which outputs' tangents, the backward specialised to the tangents present,
// and which inputs' in-place changes must raise as eager's saved-tensor checks do.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "aot/joint.h"
#include "fx/graph.h"

namespace kiln::aot {

// A set of small ints (tangents numbered in graph order, inputs by position): bit k of word k / 64
// stands for k, so any number of them fits.
class BitSet {
 public:
  BitSet() = default;
  explicit BitSet(std::vector<uint64_t> words);
  static BitSet Of(int k);
  BitSet& operator|=(const BitSet& other);
  bool operator==(const BitSet& other) const;
  bool empty() const;
  bool Has(int k) const;
  bool Intersects(const BitSet& other) const;
  BitSet Minus(const BitSet& other) const;
  static BitSet FirstN(int n);  // {0, ..., n - 1}
  const std::vector<uint64_t>& words() const { return words_; }  // no trailing zero words

 private:
  void Trim();
  std::vector<uint64_t> words_;
};

// Note [Tangent masks]: a node's mask is the set of tangents it is computed from: a tangent
// placeholder (one of the graph's last `num_tangents` placeholders, numbered in order: Note [The
// joint graph's contract] in joint.h) stands for itself, another node ORs the masks of the nodes it reads (and `seeds`,
// tangents a node stands for without reading them). An op that writes an argument in place (its
// schema's `Tensor(a!)`) writes what it computed into that argument's storage, so every node of
// that storage -- the argument, the views it was made through (ops whose first result is a view
// of their first argument, `Tensor(a)`), their base -- carries the writer's mask too: a raw joint
// graph builds slice's gradient as `full` zeros and copy_ of the tangent into a view of them, and
// the gradient a formula receives is the `full` node (its mask would be empty, which counts as
// read whatever the tangents: fuzz seed 971, program 251).
//
// Every node but the output, in graph order, with its mask.
std::vector<std::pair<const fx::Node*, BitSet>> TangentMasks(
    const fx::Graph& graph, int num_tangents, const std::unordered_map<const fx::Node*, BitSet>& seeds = {});

// Note [Inputs read by the backward]: eager's autograd checks, when a backward formula unpacks a
// saved input, that nothing changed it in place since (its version counter); a compiled function
// must raise where eager would, and only there. Which of a joint graph's inputs nodes that only
// the backward needs read directly -- in the part of the backward that runs when some tangents are
// absent (None: no gradient flows from those outputs), as the backward is specialised then. A
// value sharing an input's or an output's memory (x.t(), the intermediate an output views) is that
// tensor to eager's check: it shares its version counter. Ops that read only metadata (their
// schema returns sizes: sym_size, sym_numel, ...) read nothing. The rest of the story is in
// python/kiln/_functorch/backward_reads.py (Note [Inputs eager would have saved]).
class BackwardReads {
 public:
  // `joint`: its primals, its tangents, its outputs: the forward's (the new values of mutated
  // inputs first, then the function's outputs), then the gradients.
  // `saved_reads`: (input position, tangents) pairs eager's formulas unpack without the graph
  // reading them (div's with a rounding mode): read when one of those tangents is present (any,
  // for an empty set).
  BackwardReads(const JointGraph& joint, std::vector<std::pair<int, BitSet>> saved_reads);
  // The positions read when the tangents in `absent` are None: an input's among the primals, or
  // len(primals) + k for the forward's k-th output. Ascending.
  std::vector<int> Read(const BitSet& absent) const;

 private:
  struct Step {  // a node only the backward needs
    BitSet mask;                  // its tangents
    bool metadata_only = false;   // reads sizes only
    std::vector<int> inputs;      // positions in steps_ of the backward nodes it reads
    BitSet direct;                // the inputs and outputs it reads itself
  };
  std::vector<Step> steps_;
  std::vector<std::pair<int, BitSet>> saved_reads_;
  BitSet all_tangents_;
  int positions_ = 0;  // primals + forward outputs
};

}  // namespace kiln::aot
