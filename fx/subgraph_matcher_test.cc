// fx/subgraph_matcher_test.cc: the subgraph matcher on small hand-built graphs: counts, bindings,
// literals, containment, overlap, cycles and schema-normalised arguments.
#include "fx/subgraph_matcher.h"

#include <gtest/gtest.h>

namespace kiln::fx {
namespace {

const Op* Aten(const std::string& name) { return &Registry::Get().FindOrThrow(name); }
Argument Int(int64_t v) { return Argument(IValue(v)); }

// Pattern: relu(add(a, b)), returning the relu.
struct AddRelu {
  Graph p;
  Node *a, *b, *add, *relu;
  AddRelu() {
    a = p.Placeholder("a");
    b = p.Placeholder("b");
    add = p.CallFunction(Aten("aten::add.Tensor"), {a, b});
    relu = p.CallFunction(Aten("aten::relu"), {add});
    p.Output(relu);
  }
};

TEST(SubgraphMatcher, FindsEveryOccurrence) {
  AddRelu pat;
  Graph g;
  Node* x = g.Placeholder("x");
  Node* y = g.Placeholder("y");
  Node* add1 = g.CallFunction(Aten("aten::add.Tensor"), {x, y});
  Node* relu1 = g.CallFunction(Aten("aten::relu"), {add1});
  Node* add2 = g.CallFunction(Aten("aten::add.Tensor"), {relu1, x});
  Node* relu2 = g.CallFunction(Aten("aten::relu"), {add2});
  Node* neg = g.CallFunction(Aten("aten::neg"), {relu2});
  Node* relu3 = g.CallFunction(Aten("aten::relu"), {neg});  // relu without an add: no match
  g.Output(relu3);

  SubgraphMatcher matcher(pat.p);
  EXPECT_EQ(matcher.anchors(), (std::vector<Node*>{pat.relu}));
  std::vector<InternalMatch> ms = matcher.Match(g);
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_EQ(ms[0].returning_nodes, (std::vector<Node*>{relu1}));
  EXPECT_EQ(ms[0].placeholder_nodes[0].node, x);
  EXPECT_EQ(ms[0].placeholder_nodes[1].node, y);
  EXPECT_EQ(ms[0].Find(pat.add)->node, add1);
  EXPECT_EQ(ms[1].returning_nodes, (std::vector<Node*>{relu2}));
  EXPECT_EQ(ms[1].placeholder_nodes[0].node, relu1);
  EXPECT_EQ(ms[1].placeholder_nodes[1].node, x);
  EXPECT_EQ(ms[1].ComputeNodes(), (std::vector<Node*>{relu2, add2}));
}

TEST(SubgraphMatcher, InternalNodeUsedOutsideIsNoMatch) {
  AddRelu pat;
  Graph g;
  Node* x = g.Placeholder("x");
  Node* add = g.CallFunction(Aten("aten::add.Tensor"), {x, x});
  Node* relu = g.CallFunction(Aten("aten::relu"), {add});
  Node* mul = g.CallFunction(Aten("aten::mul.Tensor"), {relu, add});  // add leaks out
  g.Output(mul);
  EXPECT_TRUE(SubgraphMatcher(pat.p).Match(g).empty());
}

TEST(SubgraphMatcher, PlaceholderBindsOnceAndToConstants) {
  // Pattern: mul(a, a) — both uses must be the same value.
  Graph p;
  Node* a = p.Placeholder("a");
  p.Output(p.CallFunction(Aten("aten::mul.Tensor"), {a, a}));
  Graph g;
  Node* x = g.Placeholder("x");
  Node* y = g.Placeholder("y");
  Node* m1 = g.CallFunction(Aten("aten::mul.Tensor"), {x, y});
  Node* m2 = g.CallFunction(Aten("aten::mul.Tensor"), {m1, m1});
  g.Output(m2);
  std::vector<InternalMatch> ms = SubgraphMatcher(p).Match(g);
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_EQ(ms[0].returning_nodes[0], m2);

  // Pattern: add(a, b) where b binds to the constant 2.
  Graph p2;
  Node* pa = p2.Placeholder("a");
  Node* pb = p2.Placeholder("b");
  p2.Output(p2.CallFunction(Aten("aten::add.Tensor"), {pa, pb}));
  Graph g2;
  Node* z = g2.Placeholder("z");
  g2.Output(g2.CallFunction(Aten("aten::add.Tensor"), {z, Int(2)}));
  ms = SubgraphMatcher(p2).Match(g2);
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_EQ(ms[0].placeholder_nodes[0].node, z);
  EXPECT_EQ(ms[0].placeholder_nodes[1].kind, Argument::Kind::kConst);
  EXPECT_EQ(ms[0].placeholder_nodes[1].value.variant().index(), IValue(int64_t(2)).variant().index());
}

TEST(SubgraphMatcher, LiteralsMustBeEqualUnlessIgnored) {
  Graph p;
  Node* a = p.Placeholder("a");
  p.Output(p.CallFunction(Aten("aten::add.Tensor"), {a, Int(1)}));
  Graph g;
  Node* x = g.Placeholder("x");
  Node* n1 = g.CallFunction(Aten("aten::add.Tensor"), {x, Int(2)});
  Node* n2 = g.CallFunction(Aten("aten::add.Tensor"), {n1, Argument(IValue(1.0))});  // float, not int
  Node* n3 = g.CallFunction(Aten("aten::add.Tensor"), {n2, Int(1)});
  g.Output(n3);
  std::vector<InternalMatch> ms = SubgraphMatcher(p).Match(g);
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_EQ(ms[0].returning_nodes[0], n3);
  SubgraphMatcherOptions opts;
  opts.ignore_literals = true;
  EXPECT_EQ(SubgraphMatcher(p, opts).Match(g).size(), 3u);
}

TEST(SubgraphMatcher, TargetsAndOpcodesMustAgree) {
  Graph p;
  Node* a = p.Placeholder("a");
  p.Output(p.CallMethod("relu", {a}));
  Graph g;
  Node* x = g.Placeholder("x");
  Node* f = g.CallFunction(Aten("aten::relu"), {x});
  Node* m = g.CallMethod("sigmoid", {f});
  Node* r = g.CallMethod("relu", {m});
  Node* mod = g.CallModule("relu", {r});
  g.Output(mod);
  std::vector<InternalMatch> ms = SubgraphMatcher(p).Match(g);
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_EQ(ms[0].returning_nodes[0], r);
}

TEST(SubgraphMatcher, OverlappingMatchesKeepTheFirst) {
  // Pattern: neg(neg(a)); graph: a chain of three negs holds two overlapping occurrences.
  Graph p;
  Node* a = p.Placeholder("a");
  p.Output(p.CallFunction(Aten("aten::neg"), {p.CallFunction(Aten("aten::neg"), {a})}));
  Graph g;
  Node* x = g.Placeholder("x");
  Node* n1 = g.CallFunction(Aten("aten::neg"), {x});
  Node* n2 = g.CallFunction(Aten("aten::neg"), {n1});
  Node* n3 = g.CallFunction(Aten("aten::neg"), {n2});
  g.Output(n3);
  std::vector<InternalMatch> ms = SubgraphMatcher(p).Match(g);
  ASSERT_EQ(ms.size(), 1u);
  // Anchors are tried in graph order: n1 (its input is no neg), n2 (with n1), n3 (with n2, which
  // overlaps the first match).
  EXPECT_EQ(ms[0].returning_nodes[0], n2);
  SubgraphMatcherOptions opts;
  opts.remove_overlapping_matches = false;
  // Both (n1, n2) and (n2, n3) are self-contained.
  EXPECT_EQ(SubgraphMatcher(p, opts).Match(g).size(), 2u);
}

TEST(SubgraphMatcher, MultipleOutputsAndCycles) {
  // Pattern returns two values: s = sin(a), c = cos(a).
  Graph p;
  Node* a = p.Placeholder("a");
  Node* s = p.CallFunction(Aten("aten::sin"), {a});
  Node* c = p.CallFunction(Aten("aten::cos"), {a});
  p.Output(Argument::Tuple({s, c}));
  SubgraphMatcher matcher(p);
  EXPECT_EQ(matcher.anchors(), (std::vector<Node*>{s, c}));

  Graph g;
  Node* x = g.Placeholder("x");
  Node* gs = g.CallFunction(Aten("aten::sin"), {x});
  Node* gc = g.CallFunction(Aten("aten::cos"), {x});
  g.Output(g.CallFunction(Aten("aten::add.Tensor"), {gs, gc}));
  std::vector<InternalMatch> ms = matcher.Match(g);
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_EQ(ms[0].returning_nodes, (std::vector<Node*>{gs, gc}));

  // cos reads sin's result through an outside node: fusing {sin, cos} would form a cycle.
  Graph g2;
  Node* y = g2.Placeholder("y");
  Node* s2 = g2.CallFunction(Aten("aten::sin"), {y});
  Node* e2 = g2.CallFunction(Aten("aten::exp"), {s2});
  Node* c2 = g2.CallFunction(Aten("aten::cos"), {e2});
  g2.Output(Argument::Tuple({s2, c2}));
  // The pattern's `a` must be the same node for both: here it is not, so nothing matches anyway.
  EXPECT_TRUE(matcher.Match(g2).empty());
  EXPECT_FALSE(ValidatePartition({s2, c2}));
  EXPECT_TRUE(ValidatePartition({s2, e2, c2}));
}

TEST(SubgraphMatcher, SchemaNormalisesArgsAndKwargs) {
  // A pattern passing alpha=1 explicitly matches a node that leaves alpha at its default, and not
  // one passing alpha=3.
  Graph p;
  Node* a = p.Placeholder("a");
  Node* b = p.Placeholder("b");
  p.Output(p.CallFunction(Aten("aten::add.Tensor"), {a, b}, {{"alpha", Int(1)}}));
  Graph g;
  Node* x = g.Placeholder("x");
  Node* y = g.Placeholder("y");
  Node* n1 = g.CallFunction(Aten("aten::add.Tensor"), {x, y});
  Node* n2 = g.CallFunction(Aten("aten::add.Tensor"), {n1, x}, {{"alpha", Int(3)}});
  g.Output(n2);
  std::vector<InternalMatch> ms = SubgraphMatcher(p).Match(g);
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_EQ(ms[0].returning_nodes[0], n1);
  // Like PyTorch's matcher, two pattern placeholders never bind the same node: add(x, x) is no match.
  Graph g2;
  Node* z = g2.Placeholder("z");
  g2.Output(g2.CallFunction(Aten("aten::add.Tensor"), {z, z}));
  EXPECT_TRUE(SubgraphMatcher(p).Match(g2).empty());
}

TEST(SubgraphMatcher, ListsMatchElementwise) {
  Graph p;
  Node* a = p.Placeholder("a");
  Node* d = p.Placeholder("d");
  p.Output(p.CallMethod("permute", {a, Argument::List({d, Int(0)})}));
  Graph g;
  Node* x = g.Placeholder("x");
  Node* perm = g.CallMethod("permute", {x, Argument::Tuple({Int(1), Int(0)})});
  Node* perm2 = g.CallMethod("permute", {perm, Argument(IValue(std::vector<int64_t>{0, 1}))});
  g.Output(perm2);
  std::vector<InternalMatch> ms = SubgraphMatcher(p).Match(g);
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_EQ(ms[0].returning_nodes[0], perm);
  ASSERT_EQ(ms[0].placeholder_nodes[1].kind, Argument::Kind::kConst);
  EXPECT_EQ(ms[0].placeholder_nodes[1].value.variant().index(), IValue(int64_t(1)).variant().index());
}

TEST(SubgraphMatcher, RejectsBadPatterns) {
  Graph empty;
  EXPECT_THROW(SubgraphMatcher{empty}, ValueError);
  Graph dead;
  Node* a = dead.Placeholder("a");
  dead.CallFunction(Aten("aten::neg"), {a});
  dead.Output(a);
  EXPECT_THROW(SubgraphMatcher{dead}, ValueError);
}

}  // namespace
}  // namespace kiln::fx
