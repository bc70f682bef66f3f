// aot/backward_reads_test.cc: tangent masks (Note [Tangent masks]) on hand-built backward graphs.
#include "aot/backward_reads.h"

#include <gtest/gtest.h>

#include "fx/testing/calls.h"

namespace kiln::aot {
namespace {

using fx::Argument;
using fx::Graph;
using fx::Node;
using fx::testing::Call;

TangentSet MaskOf(const std::vector<std::pair<const Node*, TangentSet>>& masks, const Node* n) {
  for (const auto& [m, set] : masks)
    if (m == n) return set;
  ADD_FAILURE() << "no mask for " << n->name();
  return {};
}

TEST(TangentSet, HoldsAnyNumberOfTangents) {
  TangentSet s = TangentSet::Of(3);
  s |= TangentSet::Of(130);
  EXPECT_EQ(s.words(), (std::vector<uint64_t>{8, 0, 4}));
  EXPECT_TRUE(TangentSet().empty());
  EXPECT_EQ(TangentSet(std::vector<uint64_t>{0, 0}), TangentSet()) << "trailing zero words trimmed";
}

TEST(TangentMasks, NodesCarryTheTangentsTheyAreComputedFrom) {
  Graph g;
  Node* x = g.Placeholder("primals_1");
  Node* t1 = g.Placeholder("tangents_1");
  Node* t2 = g.Placeholder("tangents_2");
  Node* a = Call(g, "aten::mul.Tensor", {t1, x});
  Node* b = Call(g, "aten::mul.Tensor", {t2, x});
  Node* sum = Call(g, "aten::add.Tensor", {a, b});
  Node* only_x = Call(g, "aten::exp", {x});
  g.Output(Argument::Tuple({sum, only_x}));
  auto masks = TangentMasks(g);
  EXPECT_EQ(masks.size(), 7u) << "every node but the output";
  EXPECT_EQ(masks.front().first, x) << "in graph order";
  EXPECT_EQ(MaskOf(masks, x), TangentSet());
  EXPECT_EQ(MaskOf(masks, a), TangentSet::Of(0));
  EXPECT_EQ(MaskOf(masks, b), TangentSet::Of(1));
  TangentSet both = TangentSet::Of(0);
  both |= TangentSet::Of(1);
  EXPECT_EQ(MaskOf(masks, sum), both);
  EXPECT_EQ(MaskOf(masks, only_x), TangentSet());
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
  auto masks = TangentMasks(g);
  for (const Node* n : {zeros, view, other_view, copy, reader})
    EXPECT_EQ(MaskOf(masks, n), TangentSet::Of(0)) << n->name();
}

TEST(TangentMasks, SeedsAddTangentsANodeStandsFor) {
  Graph g;
  Node* x = g.Placeholder("primals_1");
  g.Placeholder("tangents_1");
  Node* e = Call(g, "aten::exp", {x});
  Node* r = Call(g, "aten::relu", {e});
  g.Output(Argument(r));
  auto masks = TangentMasks(g, {{e, TangentSet::Of(5)}});
  EXPECT_EQ(MaskOf(masks, e), TangentSet::Of(5));
  EXPECT_EQ(MaskOf(masks, r), TangentSet::Of(5));
}

}  // namespace
}  // namespace kiln::aot
