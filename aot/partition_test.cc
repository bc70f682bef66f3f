// aot/partition_test.cc: the partitioners on hand-built joint graphs: what each saves, what
// min-cut recomputes, bans on matmul, checkpoint policies, and the max-flow itself.
#include "aot/partition.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "tensor/ops.h"

namespace kiln::aot {
namespace {

using fx::Argument;
using fx::Graph;
using fx::Node;

const Op* OpNamed(const std::string& name) { return &Registry::Get().FindOrThrow(name); }

Tensor Zeros(std::vector<int64_t> sizes) {
  std::vector<SymInt> s(sizes.begin(), sizes.end());
  return ops::full(s, 0, ScalarType::Float32);
}

Node* Call(Graph& g, const std::string& op, std::vector<Argument> args, Tensor val) {
  Node* n = g.CallFunction(fx::Target(OpNamed(op)), std::move(args));
  n->SetMeta("val", Argument(IValue(std::move(val))));
  return n;
}

Node* Input(Graph& g, const std::string& name, Tensor val) {
  Node* n = g.Placeholder(name);
  n->SetMeta("val", Argument(IValue(std::move(val))));
  return n;
}

Argument Ints(std::vector<int64_t> xs) {
  std::vector<Argument> items;
  for (int64_t x : xs) items.emplace_back(IValue(x));
  return Argument::List(std::move(items));
}

bool Has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

int CountCalls(const Graph& g, const std::string& base) {
  int k = 0;
  for (Node* n : g.nodes())
    if (n->target().op && n->target().op->base_name() == base) ++k;
  return k;
}

// (gelu(x) * w).sum() and its backward, as aot_function traces it.
struct GeluJoint {
  std::shared_ptr<Graph> graph = std::make_shared<Graph>();
  Graph& g = *graph;
  Node *x, *w, *t, *gelu;
  GeluJoint() {
    x = Input(g, "primals_1", Zeros({4, 8}));
    w = Input(g, "primals_2", Zeros({4, 8}));
    t = Input(g, "tangents_1", Zeros({}));
    gelu = Call(g, "aten::gelu", {x}, Zeros({4, 8}));
    Node* mul = Call(g, "aten::mul.Tensor", {gelu, w}, Zeros({4, 8}));
    Node* sum = Call(g, "aten::sum", {mul}, Zeros({}));
    Node* expand = Call(g, "aten::expand", {t, Ints({4, 8})}, Zeros({4, 8}));
    Node* dgelu = Call(g, "aten::mul.Tensor", {expand, w}, Zeros({4, 8}));
    Node* dw = Call(g, "aten::mul.Tensor", {expand, gelu}, Zeros({4, 8}));
    Node* dx = Call(g, "aten::gelu_backward", {dgelu, x}, Zeros({4, 8}));
    g.Output(Argument::Tuple({sum, dx, dw}));
  }
  JointGraph joint() const { return JointGraph(graph, /*num_primals=*/2, /*num_tangents=*/1, /*num_fwd_outputs=*/1); }
};

// tanh(x @ w).sum(): the matmul is banned from recomputation.
struct MatmulJoint {
  std::shared_ptr<Graph> graph = std::make_shared<Graph>();
  Graph& g = *graph;
  Node *x, *w, *mm, *tanh;
  MatmulJoint() {
    x = Input(g, "primals_1", Zeros({4, 8}));
    w = Input(g, "primals_2", Zeros({8, 8}));
    Node* t = Input(g, "tangents_1", Zeros({}));
    mm = Call(g, "aten::mm", {x, w}, Zeros({4, 8}));
    tanh = Call(g, "aten::tanh", {mm}, Zeros({4, 8}));
    Node* sum = Call(g, "aten::sum", {tanh}, Zeros({}));
    Node* expand = Call(g, "aten::expand", {t, Ints({4, 8})}, Zeros({4, 8}));
    Node* dmm = Call(g, "aten::tanh_backward", {expand, tanh}, Zeros({4, 8}));
    Node* wt = Call(g, "aten::t", {w}, Zeros({8, 8}));
    Node* dx = Call(g, "aten::mm", {dmm, wt}, Zeros({4, 8}));
    Node* xt = Call(g, "aten::t", {x}, Zeros({8, 4}));
    Node* dw = Call(g, "aten::mm", {xt, dmm}, Zeros({8, 8}));
    g.Output(Argument::Tuple({sum, dx, dw}));
  }
  JointGraph joint() const { return JointGraph(graph, /*num_primals=*/2, /*num_tangents=*/1, /*num_fwd_outputs=*/1); }
};

std::vector<std::string> PlaceholderNames(const Graph& g) {
  std::vector<std::string> names;
  for (Node* n : g.nodes())
    if (n->op() == fx::Opcode::kPlaceholder) names.push_back(n->name());
  return names;
}

TEST(Partition, DefaultSavesWhatTheBackwardReads) {
  GeluJoint j;
  Partition p = DefaultPartition(j.joint());
  EXPECT_EQ(p.saved_values, (std::vector<std::string>{"primals_1", "primals_2", "gelu"}));
  EXPECT_EQ(p.saved_bytes, 3 * 4 * 8 * 4);
  EXPECT_TRUE(p.recomputed.empty());
  EXPECT_EQ(PlaceholderNames(*p.forward), (std::vector<std::string>{"primals_1", "primals_2"}));
  EXPECT_EQ(PlaceholderNames(*p.backward), (std::vector<std::string>{"primals_1", "primals_2", "gelu", "tangents_1"}));
  EXPECT_EQ(p.forward->output_node()->args()[0].items.size(), 4u);  // sum + 3 saved
  EXPECT_EQ(p.saved_order, (std::vector<int>{0, 1, 2})) << "no sizes saved: the backward takes them in order";
  EXPECT_EQ(CountCalls(*p.backward, "gelu"), 0);
  p.forward->Lint();
  p.backward->Lint();
}

TEST(Partition, MinCutRecomputesGelu) {
  GeluJoint j;
  Partition p = MinCutPartition(j.joint());
  EXPECT_EQ(p.saved_values, (std::vector<std::string>{"primals_1", "primals_2"}));
  EXPECT_EQ(p.saved_bytes, 2 * 4 * 8 * 4);
  EXPECT_EQ(p.recomputed, (std::vector<std::string>{"gelu"}));
  EXPECT_EQ(CountCalls(*p.backward, "gelu"), 1);
  EXPECT_EQ(CountCalls(*p.forward, "gelu_backward"), 0);
  p.backward->Lint();
}

// Note [Saving only the inputs eager saves]: y = sigmoid(x * 2) expanded 8-fold, (y * w).sum().
// sigmoid's backward reads its result; no backward node reads x. Saving x (32 bytes) and
// recomputing would be the smallest cut, but a later in-place change to x would then raise in
// backward where eager trains on: min-cut saves a value computed from x instead.
TEST(Partition, MinCutSavesOnlyInputsTheBackwardReads) {
  auto graph = std::make_shared<Graph>();
  Graph& g = *graph;
  Node* x = Input(g, "primals_1", Zeros({8}));
  Node* w = Input(g, "primals_2", Zeros({8, 8}));
  Node* t = Input(g, "tangents_1", Zeros({}));
  Node* twice = Call(g, "aten::mul.Scalar", {x, Argument(IValue(2.0))}, Zeros({8}));
  Node* sig = Call(g, "aten::sigmoid", {twice}, Zeros({8}));
  Node* wide = Call(g, "aten::expand", {sig, Ints({8, 8})}, Zeros({8, 8}));
  Node* mul = Call(g, "aten::mul.Tensor", {wide, w}, Zeros({8, 8}));
  Node* sum = Call(g, "aten::sum", {mul}, Zeros({}));
  Node* dy = Call(g, "aten::expand", {t, Ints({8, 8})}, Zeros({8, 8}));
  Node* dw = Call(g, "aten::mul.Tensor", {dy, wide}, Zeros({8, 8}));
  Node* dwide = Call(g, "aten::mul.Tensor", {dy, w}, Zeros({8, 8}));
  Node* dsig = Call(g, "aten::sum.dim_IntList", {dwide, Ints({0})}, Zeros({8}));
  Node* dtwice = Call(g, "aten::sigmoid_backward", {dsig, sig}, Zeros({8}));
  Node* dx = Call(g, "aten::mul.Scalar", {dtwice, Argument(IValue(2.0))}, Zeros({8}));
  g.Output(Argument::Tuple({sum, dx, dw}));
  Partition p = MinCutPartition(JointGraph(graph, 2, 1, 1));
  EXPECT_FALSE(Has(p.saved_values, "primals_1")) << p.backward->str();
  EXPECT_TRUE(Has(p.saved_values, "primals_2"));  // read by the backward (dwide): eager saves it too
  EXPECT_EQ(CountCalls(*p.backward, "sigmoid"), 0);
  p.backward->Lint();
}

TEST(Partition, MinCutNeverRecomputesMatmul) {
  MatmulJoint j;
  Partition p = MinCutPartition(j.joint());
  EXPECT_TRUE(Has(p.saved_values, "mm")) << p.backward->str();
  EXPECT_FALSE(Has(p.saved_values, "tanh"));  // recomputed from mm: not materialised in the forward
  EXPECT_TRUE(Has(p.recomputed, "tanh"));
  EXPECT_FALSE(Has(p.recomputed, "mm"));
  EXPECT_EQ(CountCalls(*p.backward, "mm"), 2);  // the two gradient matmuls only
}

TEST(Partition, CheckpointPolicies) {
  {
    GeluJoint j;
    j.gelu->SetMeta("recompute", Argument(IValue(int64_t{0})));  // MUST_SAVE
    Partition p = MinCutPartition(j.joint());
    EXPECT_TRUE(Has(p.saved_values, "gelu"));
    EXPECT_FALSE(Has(p.recomputed, "gelu"));
  }
  {
    MatmulJoint j;
    j.mm->SetMeta("recompute", Argument(IValue(std::string("CheckpointPolicy.MUST_RECOMPUTE"))));
    EXPECT_EQ(PolicyOf(j.mm), CheckpointPolicy::kMustRecompute);
    Partition p = MinCutPartition(j.joint());
    EXPECT_FALSE(Has(p.saved_values, "mm"));
    EXPECT_TRUE(Has(p.recomputed, "mm"));
    // The default partitioner hands annotated graphs to min-cut, as PyTorch's does.
    Partition d = DefaultPartition(j.joint());
    EXPECT_EQ(d.saved_values, p.saved_values);
  }
}

TEST(Partition, ForwardReadingATangentIsAnError) {
  auto graph = std::make_shared<Graph>();
  Graph& g = *graph;
  Node* x = Input(g, "primals_1", Zeros({2}));
  Node* t = Input(g, "tangents_1", Zeros({2}));
  Node* bad = Call(g, "aten::mul.Tensor", {x, t}, Zeros({2}));
  g.Output(Argument::Tuple({bad, t}));
  EXPECT_THROW(DefaultPartition(JointGraph(graph, 1, 1, 1)), Error);
}

// Note [The joint graph's contract]: the JointGraph's counts say which inputs are tangents, not
// their names: a primal named like a tangent is saved as a primal, a tangent named like a primal
// feeds only the backward.
TEST(Partition, TangentsAreTheLastPlaceholdersWhateverTheirNames) {
  auto graph = std::make_shared<Graph>();
  Graph& g = *graph;
  Node* x = Input(g, "tangents_x", Zeros({4}));
  Node* t = Input(g, "primals_t", Zeros({4}));
  Node* e = Call(g, "aten::exp", {x}, Zeros({4}));
  Node* sum = Call(g, "aten::sum", {e}, Zeros({}));
  Node* dx = Call(g, "aten::mul.Tensor", {t, e}, Zeros({4}));
  g.Output(Argument::Tuple({sum, dx}));
  const JointGraph joint(graph, /*num_primals=*/1, /*num_tangents=*/1, /*num_fwd_outputs=*/1);
  for (const Partition& p : {DefaultPartition(joint), MinCutPartition(joint)}) {
    EXPECT_EQ(PlaceholderNames(*p.forward), (std::vector<std::string>{"tangents_x"}));
    EXPECT_EQ(p.saved_values, (std::vector<std::string>{"exp"})) << p.backward->str();
    EXPECT_EQ(PlaceholderNames(*p.backward), (std::vector<std::string>{"exp", "primals_t"}));
  }
}

TEST(FlowNetwork, MinCutOfASmallNetwork) {
  FlowNetwork net;
  for (int i = 0; i < 6; ++i) net.AddVertex();
  // The textbook network (CLRS 26.1): max flow 23.
  net.AddEdge(0, 1, 16);
  net.AddEdge(0, 2, 13);
  net.AddEdge(2, 1, 4);
  net.AddEdge(1, 3, 12);
  net.AddEdge(3, 2, 9);
  net.AddEdge(2, 4, 14);
  net.AddEdge(4, 3, 7);
  net.AddEdge(3, 5, 20);
  net.AddEdge(4, 5, 4);
  EXPECT_EQ(net.MaxFlow(0, 5), 23);
  EXPECT_TRUE(net.OnSourceSide(0));
  EXPECT_FALSE(net.OnSourceSide(5));
  FlowNetwork inf;
  inf.AddVertex();
  inf.AddVertex();
  inf.AddEdge(0, 1, FlowNetwork::kInfinity);
  EXPECT_GE(inf.MaxFlow(0, 1), FlowNetwork::kInfinity);
}

}  // namespace
}  // namespace kiln::aot
