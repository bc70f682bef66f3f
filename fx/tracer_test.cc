// fx/tracer_test.cc: the make_fx tracer on real tensors: nodes, argument mapping, constants,
// in-place re-pointing, multi-output getitems and meta values.
#include "fx/tracer.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "fx/testing/getitem.h"
#include "tensor/ops.h"

namespace kiln::fx {
namespace {

Tensor Arange(int64_t n) {
  Tensor t = ops::full({SymInt(n)}, 0, ScalarType::Float32);
  float* p = t.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(i) - 2.5f;
  return t;
}

using testing::GetItem;

std::vector<std::string> Targets(const Graph& g) {
  std::vector<std::string> out;
  for (Node* n : g.nodes())
    if (n->op() == Opcode::kCallFunction) out.push_back(n->target().str());
  return out;
}

TEST(Tracer, RecordsAtenCallsWithMappedArguments) {
  Tracer tracer;
  Tensor x = ops::view(Arange(6), {SymInt(2), SymInt(3)});
  Tensor w = Arange(3);  // never a placeholder: a constant
  Node* ph = tracer.Placeholder("arg0_1", x);
  Tensor y;
  {
    TracingGuard guard(&tracer);
    Tensor a = ops::add(x, w);
    y = CallOp<Tensor>(KILN_OP("aten::relu"), a);
    y = ops::mul(y, Scalar(2.0));
  }
  tracer.graph().Output(tracer.TensorArg(y));
  Graph& g = tracer.graph();
  g.Lint();
  EXPECT_EQ(Targets(g), (std::vector<std::string>{"aten.add.Tensor", "aten.relu.default", "aten.mul.Scalar"}));
  EXPECT_EQ(ph->users().size(), 1u);
  ASSERT_EQ(tracer.constants().size(), 1u);
  EXPECT_EQ(tracer.constants()[0].first, "_tensor_constant0");
  EXPECT_TRUE(tracer.constants()[0].second.is_same(w));
  Node* add = g.FindNode("add");
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->args().size(), 2u);  // alpha=1 is the default: left out
  EXPECT_EQ(add->args()[1].node->op(), Opcode::kGetAttr);
  const Argument* val = g.FindNode("mul")->FindMeta("val");
  ASSERT_NE(val, nullptr);
  const Tensor& v = val->value.to_tensor();
  EXPECT_EQ(v.sizes(), (DimVector{2, 3}));
  EXPECT_FALSE(v->has_storage());
  // Running below the tracer really computed: relu(x + w) * 2.
  EXPECT_FLOAT_EQ(y.data_ptr<float>()[5], 2 * (2.5f - 0.5f));  // x[1][2] = 2.5, w[2] = -0.5
}

TEST(Tracer, InplaceRepointsAndKwargsFollowSchema) {
  Tracer tracer;
  Tensor x = Arange(4);
  tracer.Placeholder("arg0_1", x);
  Tensor out;
  {
    TracingGuard guard(&tracer);
    ops::add_(x, x, Scalar(3));
    out = ops::sum(x, std::vector<int64_t>{0}, /*keepdim=*/true);
  }
  Graph& g = tracer.graph();
  g.Output(tracer.TensorArg(out));
  g.Lint();
  Node* add_ = g.FindNode("add_");
  ASSERT_NE(add_, nullptr);
  EXPECT_EQ(add_->args().size(), 2u);
  ASSERT_EQ(add_->kwargs().size(), 1u);  // alpha=3 is kwarg-only and not the default
  EXPECT_EQ(add_->kwargs()[0].first, "alpha");
  Node* sum = g.nodes()[2];
  ASSERT_EQ(sum->target().str(), "aten.sum.dim_IntList");
  EXPECT_EQ(sum->args()[0].node, add_);  // x now stands for the add_ result
  EXPECT_TRUE(sum->kwargs().empty());
}

TEST(Tracer, SeveralOutputsBecomeAGetitemEachInOutputOrder) {
  Tracer tracer;
  tracer.getitem_target = std::make_shared<GetItem>();
  Tensor x = ops::view(Arange(6), {SymInt(2), SymInt(3)});
  tracer.Placeholder("arg0_1", x);
  Tensor idx;
  {
    TracingGuard guard(&tracer);
    auto r = CallOp<std::tuple<Tensor, Tensor>>(KILN_OP("aten::max.dim"), x, int64_t(1), false);
    idx = std::get<1>(r);
  }
  Graph& g = tracer.graph();
  g.Output(tracer.TensorArg(idx));
  g.Lint();
  std::vector<Node*> nodes = g.nodes();
  // placeholder, max, getitem and getitem_1 (made at once, in output order, as PyTorch's tracer
  // does, though only output 1 is used), output
  ASSERT_EQ(nodes.size(), 5u);
  EXPECT_EQ(nodes[2]->name(), "getitem");
  EXPECT_EQ(nodes[2]->args()[1].value.to_int(), 0);
  EXPECT_EQ(nodes[3]->name(), "getitem_1");
  EXPECT_EQ(nodes[3]->args()[1].value.to_int(), 1);
  EXPECT_EQ(nodes[1]->FindMeta("val")->kind, Argument::Kind::kTuple);
}

// The composites tracers record whole are the ones the registry marks CompositeExplicit<>: the
// factories, copies, functional scatters/fills, splits and random ops PyTorch's traces show as
// one node (the list kiln kept here by name before the registry said so).
TEST(Tracer, RecordedCompositesAreTheRegistrysCompositeExplicitOps) {
  std::set<std::string> recorded;
  for (const Op* op : Registry::Get().ops())
    if (IsRecordedComposite(*op)) recorded.insert(op->name());
  const std::set<std::string> expected = {
      "aten::full", "aten::zeros", "aten::ones", "aten::scalar_tensor", "aten::full_like", "aten::zeros_like",
      "aten::ones_like", "aten::new_empty", "aten::new_full", "aten::new_zeros", "aten::new_ones",
      "aten::lift_fresh_copy", "aten::arange", "aten::arange.start", "aten::clone", "aten::_to_copy", "aten::t",
      "aten::scatter.src", "aten::scatter.value", "aten::scatter_add", "aten::index_put",
      "aten::masked_fill.Scalar", "aten::masked_fill.Tensor", "aten::clamp_min", "aten::clamp_max",
      "aten::clamp_min.Tensor", "aten::clamp_max.Tensor", "aten::split.Tensor", "aten::split_with_sizes", "aten::unbind.int", "aten::stack", "aten::repeat",
      "aten::roll", "aten::rsub.Tensor", "aten::rsub.Scalar", "aten::pow.Scalar", "aten::bernoulli",
      "aten::bernoulli.p", "aten::rand", "aten::rand.generator", "aten::randn", "aten::randn.generator",
      "aten::randint", "aten::randint.generator", "aten::randint.low", "aten::randint.low_generator",
      "aten::rand_like", "aten::rand_like.generator", "aten::randn_like", "aten::randn_like.generator",
      "aten::randint_like", "aten::randint_like.generator", "aten::randint_like.low_dtype",
      "aten::randint_like.low_generator_dtype"};
  EXPECT_EQ(recorded, expected);
  EXPECT_FALSE(IsRecordedComposite(Registry::Get().FindOrThrow("aten::reshape")));  // decomposed (into view)
}

TEST(Tracer, RecordedCompositesAreOneNode) {
  Tracer tracer;
  Tensor x = Arange(4);
  tracer.Placeholder("arg0_1", x);
  Tensor y, z;
  {
    TracingGuard guard(&tracer);
    y = ops::clone(x);  // a composite PyTorch records as clone
    z = ops::reshape(y, {SymInt(2), SymInt(2)});  // a composite PyTorch decomposes (into view)
  }
  EXPECT_EQ(Targets(tracer.graph()), (std::vector<std::string>{"aten.clone.default", "aten.view.default"}));
  EXPECT_FLOAT_EQ(z.data_ptr<float>()[3], 0.5f);
}

TEST(Tracer, NoTracingAfterTheGuard) {
  Tracer tracer;
  Tensor x = Arange(4);
  {
    TracingGuard guard(&tracer);
    ops::add(x, x);
  }
  ops::add(x, x);
  EXPECT_EQ(tracer.ops_recorded(), 1u);
}

}  // namespace
}  // namespace kiln::fx
