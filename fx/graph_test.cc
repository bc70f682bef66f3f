// fx/graph_test.cc: the graph-editing invariants: users, names, erase, DCE, lint, copy, printing.
#include "fx/graph.h"

#include <gtest/gtest.h>

#include "fx/repr.h"

namespace kiln::fx {
namespace {

const Op* Aten(const std::string& name) { return &Registry::Get().FindOrThrow(name); }

// x -> relu -> add(relu, 1) -> output, plus a dead neg.
struct Small {
  Graph g;
  Node *x, *relu, *add, *neg, *out;
  Small() {
    x = g.Placeholder("x");
    relu = g.CallFunction(Aten("aten::relu"), {x});
    add = g.CallFunction(Aten("aten::add.Tensor"), {relu, IValue(int64_t(1))});
    neg = g.CallFunction(Aten("aten::neg"), {x});
    out = g.Output(add);
  }
};

TEST(Graph, UsersFollowEdits) {
  Small s;
  EXPECT_EQ(s.x->users(), (std::vector<Node*>{s.relu, s.neg}));
  EXPECT_EQ(s.relu->users(), (std::vector<Node*>{s.add}));
  s.add->UpdateArg(0, s.x);
  EXPECT_TRUE(s.relu->users().empty());
  EXPECT_EQ(s.x->users(), (std::vector<Node*>{s.relu, s.neg, s.add}));
  s.add->ReplaceInputWith(s.x, s.relu);
  EXPECT_EQ(s.relu->users(), (std::vector<Node*>{s.add}));
  EXPECT_EQ(s.x->users(), (std::vector<Node*>{s.relu, s.neg}));
  s.g.Lint();
}

// Every change of the node list moves order_version (graph.nodes' snapshots in Python rely on it);
// edits that leave the list alone do not.
TEST(Graph, OrderVersionFollowsListEdits) {
  Small s;
  uint64_t v = s.g.order_version();
  s.add->UpdateArg(0, s.x);  // arguments, not order
  EXPECT_EQ(s.g.order_version(), v);
  s.g.InsertingBefore(s.add);
  Node* abs = s.g.CallFunction(Aten("aten::abs"), {s.x});
  EXPECT_GT(s.g.order_version(), v);
  v = s.g.order_version();
  s.relu->Prepend(abs);
  EXPECT_GT(s.g.order_version(), v);
  EXPECT_EQ(s.g.nodes()[1], abs);
  v = s.g.order_version();
  s.g.EraseNode(s.neg);
  EXPECT_GT(s.g.order_version(), v);
  s.g.Lint();
}

TEST(Graph, ReplaceAllUsesWith) {
  Small s;
  s.g.InsertingAfter(s.relu);
  Node* sig = s.g.CallFunction(Aten("aten::sigmoid"), {s.relu});
  std::vector<Node*> changed = s.relu->ReplaceAllUsesWith(sig, [&](Node* u) { return u != sig; });
  EXPECT_EQ(changed, (std::vector<Node*>{s.add}));
  EXPECT_EQ(s.relu->users(), (std::vector<Node*>{sig}));
  EXPECT_EQ(s.add->args()[0].node, sig);
  s.g.Lint();
  // sigmoid sits between relu and add.
  EXPECT_EQ(s.relu->next(), sig);
  EXPECT_EQ(sig->next(), s.add);
}

TEST(Graph, NamesAreUniqueAndLegal) {
  Graph g;
  Node* x = g.Placeholder("x");
  Node* s1 = g.CallFunction(Aten("aten::sum"), {x});
  Node* s2 = g.CallFunction(Aten("aten::sum"), {x});
  Node* a1 = g.CallFunction(Aten("aten::add.Tensor"), {x, x});
  Node* a2 = g.CallFunction(Aten("aten::add.Tensor"), {x, x});
  Node* a3 = g.CreateNode(Opcode::kCallFunction, Aten("aten::add.Tensor"), {x, x}, {}, "add_1");
  Node* m = g.CallModule("layer1.0.conv", {x});
  Node* weird = g.CreateNode(Opcode::kGetAttr, Target("1weight"));
  EXPECT_EQ(s1->name(), "sum_1");  // `sum` is a Python builtin
  EXPECT_EQ(s2->name(), "sum_2");
  EXPECT_EQ(a1->name(), "add");
  EXPECT_EQ(a2->name(), "add_1");
  EXPECT_EQ(a3->name(), "add_2");
  EXPECT_EQ(m->name(), "layer1_0_conv");
  EXPECT_EQ(weird->name(), "_1weight");
  g.Lint();
}

TEST(Graph, EraseNeedsNoUsers) {
  Small s;
  EXPECT_THROW(s.g.EraseNode(s.relu), Error);
  s.g.Lint();  // unchanged by the failed erase
  EXPECT_EQ(s.g.size(), 5u);
  s.g.EraseNode(s.neg);
  EXPECT_EQ(s.x->users(), (std::vector<Node*>{s.relu}));
  EXPECT_EQ(s.g.size(), 4u);
  s.g.Lint();
}

TEST(Graph, DeadCodeElimination) {
  Small s;
  Node* dead2 = s.g.CallFunction(Aten("aten::exp"), {s.x});
  (void)dead2;
  // An in-place op is a side effect and stays.
  s.g.InsertingBefore(s.out);
  Node* inplace = s.g.CallFunction(Aten("aten::relu_"), {s.x});
  EXPECT_TRUE(s.g.EliminateDeadCode());
  std::vector<std::string> names;
  for (Node* n : s.g.nodes()) names.push_back(n->name());
  EXPECT_EQ(names, (std::vector<std::string>{"x", "relu", "add", "relu_", "output"}));
  EXPECT_EQ(inplace->name(), "relu_");
  EXPECT_FALSE(s.g.EliminateDeadCode());
  s.g.Lint();
}

TEST(Graph, LintCatchesUseBeforeDefinition) {
  Small s;
  s.x->Prepend(s.relu);  // move relu before its input
  EXPECT_THROW(s.g.Lint(), Error);
}

TEST(Graph, CreateNodeRejectsForeignNodes) {
  Small a, b;
  EXPECT_THROW(a.g.CallFunction(Aten("aten::relu"), {b.x}), Error);
  a.g.Lint();
  EXPECT_EQ(b.x->users().size(), 2u);
}

TEST(Graph, CopyKeepsStructure) {
  Small s;
  Graph g2;
  std::unordered_map<const Node*, Node*> map;
  Argument out = g2.GraphCopy(s.g, map);
  g2.Output(out);
  g2.Lint();
  EXPECT_EQ(g2.str(), s.g.str());
}

TEST(Graph, PrintsLikeFx) {
  Small s;
  s.g.EraseNode(s.neg);
  EXPECT_EQ(s.g.str(),
            "graph():\n"
            "    %x : [num_users=1] = placeholder[target=x]\n"
            "    %relu : [num_users=1] = call_function[target=aten.relu.default](args = (%x,), kwargs = {})\n"
            "    %add : [num_users=1] = call_function[target=aten.add.Tensor](args = (%relu, 1), kwargs = {})\n"
            "    return add");
}

TEST(Graph, NestedArguments) {
  Graph g;
  Node* x = g.Placeholder("x");
  Node* y = g.Placeholder("y");
  Argument nested = Argument::Tuple({Argument::List({x, IValue(2.5)}),
                                     Argument::Dict({IValue(std::string("k"))}, {y}),
                                     Argument::Slice(Argument(), IValue(int64_t(3)), Argument())});
  Node* n = g.CallMethod("foo", {nested});
  EXPECT_EQ(n->AllInputNodes(), (std::vector<Node*>{x, y}));
  EXPECT_EQ(y->users(), (std::vector<Node*>{n}));
  EXPECT_EQ(nested.Format(), "([%x, 2.5], {'k': %y}, slice(None, 3, None))");
  g.Lint();
}

TEST(Repr, FloatsFollowCPython) {
  EXPECT_EQ(PyFloatRepr(1.0), "1.0");
  EXPECT_EQ(PyFloatRepr(0.1), "0.1");
  EXPECT_EQ(PyFloatRepr(1e-5), "1e-05");
  EXPECT_EQ(PyFloatRepr(0.0001), "0.0001");
  EXPECT_EQ(PyFloatRepr(1e16), "1e+16");
  EXPECT_EQ(PyFloatRepr(123456789012345.0), "123456789012345.0");
  EXPECT_EQ(PyFloatRepr(-2.5), "-2.5");
  EXPECT_EQ(PyFloatRepr(1.5e300), "1.5e+300");
  EXPECT_EQ(PyStringRepr("it's"), "\"it's\"");
}

}  // namespace
}  // namespace kiln::fx
