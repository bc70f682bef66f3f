// aot/backward_reads_test.cc: tangent masks (Note [Tangent masks]) and the inputs the backward reads (Note
// [Inputs read by the backward]) on hand-built graphs.
#include "aot/backward_reads.h"

#include <gtest/gtest.h>

#include <memory>

#include "fx/symbolic_context.h"
#include "fx/testing/calls.h"

namespace kiln::aot {
namespace {

using fx::Argument;
using fx::Graph;
using fx::Node;
using fx::testing::Call;

BitSet MaskOf(const std::vector<std::pair<const Node*, BitSet>>& masks, const Node* n) {
  for (const auto& [m, set] : masks)
    if (m == n) return set;
  ADD_FAILURE() << "no mask for " << n->name();
  return {};
}

TEST(BitSet, HoldsAnyNumberOfTangents) {
  BitSet s = BitSet::Of(3);
  s |= BitSet::Of(130);
  EXPECT_EQ(s.words(), (std::vector<uint64_t>{8, 0, 4}));
  EXPECT_TRUE(BitSet().empty());
  EXPECT_EQ(BitSet(std::vector<uint64_t>{0, 0}), BitSet()) << "trailing zero words trimmed";
}

TEST(TangentMasks, NodesCarryTheTangentsTheyAreComputedFrom) {
  // the tangents are the last placeholders, whatever their names (Note [The joint graph's contract])
  Graph g;
  Node* x = g.Placeholder("tangents_x");
  Node* t1 = g.Placeholder("grad_a");
  Node* t2 = g.Placeholder("grad_b");
  Node* a = Call(g, "aten::mul.Tensor", {t1, x});
  Node* b = Call(g, "aten::mul.Tensor", {t2, x});
  Node* sum = Call(g, "aten::add.Tensor", {a, b});
  Node* only_x = Call(g, "aten::exp", {x});
  g.Output(Argument::Tuple({sum, only_x}));
  auto masks = TangentMasks(g, 2);
  EXPECT_EQ(masks.size(), 7u) << "every node but the output";
  EXPECT_EQ(masks.front().first, x) << "in graph order";
  EXPECT_EQ(MaskOf(masks, x), BitSet());
  EXPECT_EQ(MaskOf(masks, a), BitSet::Of(0));
  EXPECT_EQ(MaskOf(masks, b), BitSet::Of(1));
  BitSet both = BitSet::Of(0);
  both |= BitSet::Of(1);
  EXPECT_EQ(MaskOf(masks, sum), both);
  EXPECT_EQ(MaskOf(masks, only_x), BitSet());
}

TEST(TangentMasks, AWriteIntoAViewMarksItsBaseAndEveryViewOfIt) {
  // slice's raw backward: zeros = full(...); v = zeros.slice(...); v.copy_(tangents_1); grad = zeros
  Graph g;
  Node* t = g.Placeholder("tangents_1");
  Node* zeros = Call(g, "aten::zeros", {Argument::List({Argument(IValue(int64_t{4}))})});
  Node* view = Call(g, "aten::slice.Tensor", {zeros, Argument(IValue(int64_t{0})), Argument(IValue(int64_t{0})),
                                              Argument(IValue(int64_t{2}))});
  Node* other_view = Call(g, "aten::t", {zeros});
  Node* copy = Call(g, "aten::copy_", {view, t});
  Node* reader = Call(g, "aten::neg", {zeros});
  g.Output(Argument::Tuple({zeros, reader, other_view, copy}));
  auto masks = TangentMasks(g, 1);
  for (const Node* n : {zeros, view, other_view, copy, reader})
    EXPECT_EQ(MaskOf(masks, n), BitSet::Of(0)) << n->name();
}

TEST(TangentMasks, SeedsAddTangentsANodeStandsFor) {
  Graph g;
  Node* x = g.Placeholder("primals_1");
  g.Placeholder("tangents_1");
  Node* e = Call(g, "aten::exp", {x});
  Node* r = Call(g, "aten::relu", {e});
  g.Output(Argument(r));
  auto masks = TangentMasks(g, 1, {{e, BitSet::Of(5)}});
  EXPECT_EQ(MaskOf(masks, e), BitSet::Of(5));
  EXPECT_EQ(MaskOf(masks, r), BitSet::Of(5));
}

// A joint graph of f(x, y) = (x * 2, y.exp()) whose backward reads x only through the first
// output's gradient and y's exp through the second's: gx = t1 * 2 (reads nothing), gy = t2 * exp(y).
TEST(BackwardReads, EachSetOfAbsentTangentsReadsItsOwnInputs) {
  InstallDynamicShapeKernels();  // aten::sym_size.int
  auto graph = std::make_shared<Graph>();
  Graph& g = *graph;
  Node* x = g.Placeholder("primals_1");
  Node* y = g.Placeholder("primals_2");
  Node* t1 = g.Placeholder("tangents_1");
  Node* t2 = g.Placeholder("tangents_2");
  Node* out1 = Call(g, "aten::mul.Tensor", {x, Argument(IValue(2.0))});
  Node* out2 = Call(g, "aten::exp", {y});
  Node* gx = Call(g, "aten::mul.Tensor", {t1, Argument(IValue(2.0))});
  Node* gy = Call(g, "aten::mul.Tensor", {t2, out2});
  Node* gy_from_y = Call(g, "aten::mul.Tensor", {gy, y});  // reads y directly
  Node* size = Call(g, "aten::sym_size.int", {t1, Argument(IValue(int64_t{0}))});  // sizes only
  g.Output(Argument::Tuple({out1, out2, gx, gy_from_y, size}));
  const JointGraph joint(graph, /*num_primals=*/2, /*num_tangents=*/2, /*num_fwd_outputs=*/2);
  BackwardReads reads(joint, {});
  // positions: x 0, y 1, out1 2, out2 3
  EXPECT_EQ(reads.Read(BitSet()), (std::vector<int>{1, 3})) << "both tangents: y and exp(y) (out2)";
  EXPECT_EQ(reads.Read(BitSet::Of(1)), (std::vector<int>{})) << "t2 absent: gy does not run";
  EXPECT_EQ(reads.Read(BitSet::Of(0)), (std::vector<int>{1, 3}));
  BackwardReads with_saved(joint, {{0, BitSet::Of(0)}, {1, BitSet()}});
  EXPECT_EQ(with_saved.Read(BitSet::Of(1)), (std::vector<int>{0, 1})) << "x unpacked for t1; y for any tangent";
  BitSet both = BitSet::Of(0);
  both |= BitSet::Of(1);
  EXPECT_EQ(with_saved.Read(both), (std::vector<int>{})) << "no tangent at all: nothing runs";
}

TEST(TangentMasks, MoreTangentsThanPlaceholdersIsAnError) {
  Graph g;
  g.Placeholder("x");
  g.Output(Argument(IValue(int64_t{0})));
  EXPECT_THROW(TangentMasks(g, 2), ValueError);
}

TEST(BitSet, SetOperations) {
  BitSet a = BitSet::FirstN(70);
  EXPECT_TRUE(a.Has(69));
  EXPECT_FALSE(a.Has(70));
  BitSet b = a.Minus(BitSet::Of(3));
  EXPECT_FALSE(b.Has(3));
  EXPECT_TRUE(b.Intersects(BitSet::Of(65)));
  EXPECT_FALSE(b.Intersects(BitSet::Of(3)));
  EXPECT_EQ(BitSet::FirstN(64).words(), (std::vector<uint64_t>{~uint64_t{0}}));
  EXPECT_TRUE(BitSet::FirstN(0).empty());
}

}  // namespace
}  // namespace kiln::aot
