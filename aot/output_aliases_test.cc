// aot/output_aliases_test.cc: which outputs view an input or another output (Note [Output
// aliases]) and the view ops read back from an output (Note [Replaying output views]).
#include "aot/output_aliases.h"

#include <gtest/gtest.h>

#include <memory>

#include "fx/testing/calls.h"
#include "fx/testing/getitem.h"
#include "tensor/ops.h"

namespace kiln::aot {
namespace {

using fx::Argument;
using fx::Graph;
using fx::Node;
using fx::testing::Call;

Tensor Arange(int64_t n) {
  Tensor t = ops::empty({n}, ScalarType::Float32);
  for (int64_t i = 0; i < n; ++i) static_cast<float*>(t->data())[i] = static_cast<float>(i);
  return t;
}

TEST(FindOutputAliases, OutputsOfAnInputsStorageViewTheFirstInputWithIt) {
  Tensor x = ops::view(Arange(6), {2, 3});
  Tensor y = ops::empty({3}, ScalarType::Float32);
  Tensor x_again = ops::transpose(x, 0, 1);  // a second input with x's storage
  Tensor row = ops::select(x, 0, 1);
  auto aliases = FindOutputAliases({x, Tensor(), y, x_again}, {{row, true}, {Tensor(), false}, {ops::clone(y), false}});
  ASSERT_EQ(aliases.size(), 3u);
  ASSERT_TRUE(aliases[0].has_value());
  EXPECT_EQ(aliases[0]->base, OutputAlias::Base::kInput);
  EXPECT_EQ(aliases[0]->index, 0);
  EXPECT_EQ(aliases[0]->view, (StridedLayout{{3}, {1}, 3}));
  EXPECT_FALSE(aliases[0]->base_layout.has_value());
  EXPECT_FALSE(aliases[1].has_value());  // not a tensor
  EXPECT_FALSE(aliases[2].has_value());  // a storage of its own
}

TEST(FindOutputAliases, OutputsSharingAStorageViewTheDenseOneWithTheLargestExtent) {
  // v[::2] returned before v: v is the root, whatever the order (its rows between keep their gradient)
  Tensor v = ops::view(Arange(8), {4, 2});
  Tensor every_other = ops::slice(v, 0, std::nullopt, std::nullopt, 2);
  Tensor vt = ops::transpose(v, 0, 1);
  auto aliases = FindOutputAliases({}, {{every_other, true}, {v, false}, {vt, true}});
  ASSERT_FALSE(aliases[1].has_value());
  for (int k : {0, 2}) {
    ASSERT_TRUE(aliases[k].has_value()) << k;
    EXPECT_EQ(aliases[k]->base, OutputAlias::Base::kOutput);
    EXPECT_EQ(aliases[k]->index, 1);
    EXPECT_EQ(aliases[k]->base_layout, (StridedLayout{{4, 2}, {2, 1}, 0}));
  }
  EXPECT_EQ(aliases[0]->view, (StridedLayout{{2, 2}, {4, 1}, 0}));
  EXPECT_EQ(aliases[2]->view, (StridedLayout{{2, 4}, {1, 2}, 0}));
}

TEST(FindOutputAliases, MembersOutsideTheRootsExtentAndGroupsWithoutADenseRootStayTensors) {
  Tensor s = Arange(10);
  Tensor head = ops::slice(s, 0, 0, 6);  // dense, extent [0, 5]: the root
  Tensor tail = ops::slice(s, 0, 4, 10, 2);  // [4, 8]: past the root's end
  Tensor inner = ops::slice(s, 0, 1, 3);  // [1, 2]
  auto aliases = FindOutputAliases({}, {{tail, true}, {head, true}, {inner, true}});
  EXPECT_FALSE(aliases[0].has_value());
  EXPECT_FALSE(aliases[1].has_value());
  ASSERT_TRUE(aliases[2].has_value());
  EXPECT_EQ(aliases[2]->index, 1);
  // two strided views of one storage, neither dense: no root
  Tensor evens = ops::slice(s, 0, 0, 10, 2), odds = ops::slice(s, 0, 1, 10, 2);
  for (const auto& a : FindOutputAliases({}, {{evens, true}, {odds, true}})) EXPECT_FALSE(a.has_value());
}

TEST(FindOutputAliases, OfEqualExtentsTheOneThatIsNoViewIsTheRootAndEmptyPiecesFollowIt) {
  // v.split(1)[0] of a one-element v, returned before v (a hidden output): v is the root
  Tensor v = Arange(1);
  Tensor piece = ops::slice(v, 0, 0, 1);
  auto aliases = FindOutputAliases({}, {{piece, true}, {v, false}});
  ASSERT_TRUE(aliases[0].has_value());
  EXPECT_EQ(aliases[0]->index, 1);
  EXPECT_FALSE(aliases[1].has_value());
  // all empty: the first that is no view is the root, and the empty pieces view it
  Tensor e = ops::empty({0}, ScalarType::Float32);
  Tensor e_piece = ops::slice(e, 0, 0, 0);
  aliases = FindOutputAliases({}, {{e_piece, true}, {e, false}});
  ASSERT_TRUE(aliases[0].has_value());
  EXPECT_EQ(aliases[0]->index, 1);
  EXPECT_EQ(aliases[0]->base_layout, (StridedLayout{{0}, {1}, 0}));
}

TEST(WalkViews, ReadsViewOpsAndSplitPiecesBackToTheirBase) {
  // def f(x): return x.exp().t().split(1)[1].unsqueeze(0), x.exp().narrow(0, 0, 1)
  Graph g;
  Node* x = g.Placeholder("x");
  Node* e = Call(g, "aten::exp", {x});
  Node* t = Call(g, "aten::t", {e});
  Node* split = Call(g, "aten::split.Tensor", {t, Argument(IValue(int64_t{1}))});
  Node* item = g.CallFunction(fx::Target::Callable(std::make_shared<fx::testing::GetItem>()),
                              {split, Argument(IValue(int64_t{1}))});
  Node* u = Call(g, "aten::unsqueeze", {item, Argument(IValue(int64_t{0}))});
  g.Output(Argument::Tuple({u}));

  ViewChain to_e = WalkViews(u, e);
  EXPECT_EQ(to_e.reached, e);
  ASSERT_EQ(to_e.steps.size(), 3u);
  EXPECT_EQ(to_e.steps[0].node, t);
  EXPECT_EQ(to_e.steps[0].piece, -1);
  EXPECT_EQ(to_e.steps[1].node, split);  // the split, replayed with the item taken
  EXPECT_EQ(to_e.steps[1].piece, 1);
  EXPECT_EQ(to_e.steps[2].node, u);
  ViewChain as_far = WalkViews(u);  // exp is no view: the walk stops at it
  EXPECT_EQ(as_far.reached, e);
  EXPECT_EQ(as_far.steps.size(), 3u);
  EXPECT_EQ(WalkViews(u, u).steps.size(), 0u);
}

TEST(WalkViews, StopsAtAViewWhoseOtherArgumentsAreNodes) {
  // x.view(n) with n a node (a symbolic size): a replay could not pass n
  Graph g;
  Node* x = g.Placeholder("x");
  Node* n = g.Placeholder("n");
  Node* v = Call(g, "aten::view", {x, Argument::List({n})});
  Node* t = Call(g, "aten::t", {v});
  g.Output(Argument::Tuple({t}));
  ViewChain chain = WalkViews(t, x);
  EXPECT_EQ(chain.reached, v);
  ASSERT_EQ(chain.steps.size(), 1u);
  EXPECT_EQ(chain.steps[0].node, t);
}

}  // namespace
}  // namespace kiln::aot
