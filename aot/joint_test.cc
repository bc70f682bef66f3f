// aot/joint_test.cc: input mutations as leading outputs (Note [Input mutations as outputs]) on
// hand-built joint-graph epilogues.
#include "aot/joint.h"

#include <gtest/gtest.h>

#include <memory>

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

// Note [The joint graph's contract]: the counts split the placeholders and are checked.
TEST(JointGraph, CountsSplitThePlaceholdersAndAreChecked) {
  auto graph = std::make_shared<Graph>();
  Node* x = graph->Placeholder("x");
  Node* w = graph->Placeholder("w");
  Node* t = graph->Placeholder("t");
  Node* y = Call(*graph, "aten::mul.Tensor", {x, w});
  Node* dx = Call(*graph, "aten::mul.Tensor", {t, w});
  graph->Output(Argument::Tuple({y, y, dx, Argument()}));
  const JointGraph joint(graph, /*num_primals=*/2, /*num_tangents=*/1, /*num_fwd_outputs=*/2, {0});
  EXPECT_EQ(joint.primals(), (std::vector<Node*>{x, w}));
  EXPECT_EQ(joint.tangents(), (std::vector<Node*>{t}));
  EXPECT_EQ(TrailingPlaceholders(*graph, 2), (std::vector<Node*>{w, t}));
  EXPECT_THROW(JointGraph(graph, 2, 2, 2), ValueError) << "four placeholders counted, three in the graph";
  EXPECT_THROW(JointGraph(graph, 2, 1, 5), ValueError) << "five forward outputs of four";
  EXPECT_THROW(JointGraph(graph, 2, 1, 2, {2}), ValueError) << "a mutated input that is no primal";
  EXPECT_THROW(JointGraph(graph, 2, 1, 0, {0}), ValueError) << "a mutated input without a forward output";
  EXPECT_THROW(JointGraph(graph, -1, 4, 2), ValueError);
  EXPECT_THROW(JointGraph(nullptr, 0, 0, 0), ValueError);
  EXPECT_THROW(TrailingPlaceholders(*graph, 4), ValueError);
  auto no_tuple = std::make_shared<Graph>();
  no_tuple->Output(Argument(no_tuple->Placeholder("x")));
  EXPECT_THROW(JointGraph(no_tuple, 1, 0, 0), ValueError) << "the output must be one flat tuple";
}

TEST(JointGraph, OutputAliasesArePerFunctionOutputAndNameAPrimalOrAnOutput) {
  // def f(x, w): x.mul_(w); return x.t(), x.t().t() (the first output views input 0, the second output 0)
  auto graph = std::make_shared<Graph>();
  Node* x = graph->Placeholder("x");
  Node* w = graph->Placeholder("w");
  Node* m = Call(*graph, "aten::mul.Tensor", {x, w});
  Node* t = Call(*graph, "aten::t", {m});
  Node* tt = Call(*graph, "aten::t", {t});
  graph->Output(Argument::Tuple({m, t, tt, Argument(), Argument()}));
  const OutputAlias of_x{OutputAlias::Base::kInput, 0, StridedLayout{{2, 2}, {1, 2}, 0}, std::nullopt};
  const StridedLayout t_layout{{2, 2}, {1, 2}, 0};
  const OutputAlias of_t{OutputAlias::Base::kOutput, 0, StridedLayout{{2, 2}, {2, 1}, 0}, t_layout};
  const JointGraph joint(graph, 2, 0, 3, {0}, {of_x, of_t});
  ASSERT_EQ(joint.output_aliases.size(), 2u);
  EXPECT_EQ(joint.output_aliases[1]->base_layout, t_layout);
  EXPECT_THROW(JointGraph(graph, 2, 0, 3, {0}, {of_x}), ValueError) << "one alias for two function outputs";
  OutputAlias of_input_5 = of_x;
  of_input_5.index = 5;
  EXPECT_THROW(JointGraph(graph, 2, 0, 3, {0}, {of_input_5, std::nullopt}), ValueError) << "no primal 5";
  OutputAlias of_output_2 = of_t;
  of_output_2.index = 2;
  EXPECT_THROW(JointGraph(graph, 2, 0, 3, {0}, {std::nullopt, of_output_2}), ValueError) << "no function output 2";
}

}  // namespace
}  // namespace kiln::aot
