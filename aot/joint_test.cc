// aot/joint_test.cc: input mutations as leading outputs (Note [Input mutations as outputs]) on
// hand-built joint-graph epilogues.
#include "aot/joint.h"

#include <gtest/gtest.h>

#include "fx/testing/calls.h"

namespace kiln::aot {
namespace {

using fx::Argument;
using fx::Graph;
using fx::Node;
using fx::testing::Call;

TEST(MutationsToOutputs, CopiesIntoInputsBecomeLeadingOutputsAndInputViewOpsGo) {
  // def f(x, y, z): x.t_(); s = x + z; y.copy_(s) (functionalized: copy_ epilogue); z.copy_(s * 2); return s.sum()
  Graph g;
  Node* x = g.Placeholder("x");
  Node* y = g.Placeholder("y");
  Node* z = g.Placeholder("z");
  Node* t = Call(g, "aten::t_", {x});
  Node* s = Call(g, "aten::add.Tensor", {t, z});
  Node* m = Call(g, "aten::mul.Tensor", {s, Argument(IValue(2.0))});
  Node* sum = Call(g, "aten::sum", {s});
  Call(g, "aten::copy_", {y, s});
  Call(g, "aten::copy_", {z, m});
  g.Output(Argument::Tuple({sum}));
  const std::string t_name = t->name();  // t is freed when erased

  EXPECT_EQ(MutationsToOutputs(g), (std::vector<int>{1, 2}));
  g.Lint();
  EXPECT_EQ(s->args()[0].node, x);  // t_ went: its user reads x
  EXPECT_EQ(g.FindNode(t_name), nullptr);
  EXPECT_EQ(g.nodes().size(), 7u);  // x, y, z, add, mul, sum and the output: the copies went too
  const Argument& out = g.output_node()->args()[0];
  ASSERT_EQ(out.kind, Argument::Kind::kTuple);
  ASSERT_EQ(out.items.size(), 3u);
  EXPECT_EQ(out.items[0].node, s);
  EXPECT_EQ(out.items[1].node, m);
  EXPECT_EQ(out.items[2].node, sum);
}

TEST(MutationsToOutputs, LeavesUsedCopiesAndCopiesIntoIntermediates) {
  Graph g;
  Node* x = g.Placeholder("x");
  Node* e = Call(g, "aten::exp", {x});
  Node* into_intermediate = Call(g, "aten::copy_", {e, x});
  Node* used = Call(g, "aten::copy_", {x, e});
  Node* r = Call(g, "aten::relu", {used});
  g.Output(Argument(r));  // a single output, not a tuple
  EXPECT_TRUE(MutationsToOutputs(g).empty());
  EXPECT_EQ(g.FindNode(into_intermediate->name()), into_intermediate);
  const Argument& out = g.output_node()->args()[0];
  ASSERT_EQ(out.kind, Argument::Kind::kTuple);
  ASSERT_EQ(out.items.size(), 1u);
  EXPECT_EQ(out.items[0].node, r);
}

}  // namespace
}  // namespace kiln::aot
