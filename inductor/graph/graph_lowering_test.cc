// inductor/graph/graph_lowering_test.cc: hand-built aten graphs lowered to the wrapper's steps (Note
// [Lowering a graph]), compared as listings: fusion into an output's kernel, outputs in their meta
// layouts, extern calls on realized arguments, outputs sharing a storage, the hooks.
#include "inductor/graph/graph_lowering.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "fx/testing/calls.h"
#include "runtime/error.h"
#include "tensor/ops.h"

namespace kiln::inductor::graph {
namespace {

using fx::Argument;
using fx::Graph;
using fx::Node;
using fx::testing::Call;

// The node, with its meta value (what make_fx records: the op's result on the inputs' values).
Node* WithVal(Node* n, const Tensor& t) {
  n->SetMeta("val", Argument(IValue(t)));
  return n;
}

Tensor Floats(std::vector<int64_t> shape) {
  return ops::empty(std::vector<SymInt>(shape.begin(), shape.end()), ScalarType::Float32);
}

std::string Ints(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

std::string Layout(const Buffer& b) {
  return "[" + Ints(b.shape()) + "] (" + Ints(b.stride()) + ") +" + std::to_string(b.offset());
}

std::string Describe(const GraphValue& v) {
  switch (v.kind) {
    case GraphValue::Kind::kValue:
      if (v.value->kind() == Value::Kind::kBuffer) return static_cast<const Buffer&>(*v.value).name.value_or("?");
      return "lazy";
    case GraphValue::Kind::kTuple:
    case GraphValue::Kind::kList: {
      std::string s = "(";
      for (size_t i = 0; i < v.items.size(); ++i) s += (i ? ", " : "") + Describe(v.items[i]);
      return s + ")";
    }
    case GraphValue::Kind::kConst:
      break;
  }
  return v.constant.Format(false);
}

// The records, one line each.
std::string Listing(const GraphLowering& g) {
  std::string out;
  for (const Record& r : g.records()) {
    switch (r.kind) {
      case Record::Kind::kAlloc:
        out += "alloc " + r.buf->name.value_or("?") + " " + Layout(*r.buf) + "\n";
        break;
      case Record::Kind::kView:
        out += "view " + r.buf->name.value_or("?") + " of " + r.base->name.value_or("?") + " " + Layout(*r.buf) + "\n";
        break;
      case Record::Kind::kKernel: {
        out += "kernel " + r.kernel->ir->name + "(";
        for (size_t i = 0; i < r.kernel->buffers.size(); ++i)
          out += (i ? ", " : "") + r.kernel->buffers[i]->name.value_or("?");
        out += ")\n";
        break;
      }
      case Record::Kind::kExtern: {
        out += "extern " + r.call->target.str() + "(";
        for (size_t i = 0; i < r.call->args.size(); ++i) out += (i ? ", " : "") + Describe(r.call->args[i]);
        out += ") ->";
        for (const BufferPtr& b : r.call->results) out += " " + (b ? *b->name + " " + Layout(*b) : "None");
        out += "\n";
        break;
      }
      case Record::Kind::kReturn: {
        out += "return";
        for (const GraphValue& v : r.values) out += " " + Describe(v);
        out += "\n";
        break;
      }
    }
  }
  return out;
}

Argument Float(double v) { return Argument(IValue(v)); }

TEST(GraphLowering, APointwiseChainIsOneKernelStoringTheOutput) {
  auto g = std::make_shared<Graph>();
  Tensor x = Floats({4, 8});
  Node* px = WithVal(g->Placeholder("x"), x);
  Node* add = WithVal(Call(*g, "aten::add.Tensor", {px, Float(1.0)}), ops::add(x, x));
  Node* relu = WithVal(Call(*g, "aten::relu", {add}), x);
  g->Output(Argument::Tuple({relu}));
  GraphLowering lowering(g, std::nullopt);
  lowering.Run();
  EXPECT_EQ(Listing(lowering),
            "alloc buf0 [4, 8] (8, 1) +0\n"
            "kernel cpp_fused_add_relu_0(x, buf0)\n"
            "return buf0\n");
  EXPECT_EQ(lowering.inputs(), (std::vector<std::string>{"x"}));
  EXPECT_TRUE(lowering.fallbacks().empty());
  ASSERT_EQ(lowering.lowered().size(), 2u);
  EXPECT_EQ(lowering.lowered()[0].first, add);
  EXPECT_THROW(lowering.Run(), ValueError) << "a graph is lowered once";
}

// Note [Output strides]: `x.t() + 1` leaves column-major, as eager makes it.
TEST(GraphLowering, AnOutputIsStoredInItsMetaLayout) {
  auto g = std::make_shared<Graph>();
  Tensor x = Floats({3, 4});
  Tensor xt = ops::transpose(x, 0, 1);
  Node* px = WithVal(g->Placeholder("x"), x);
  Node* t = WithVal(Call(*g, "aten::t", {px}), xt);
  Node* add = WithVal(Call(*g, "aten::add.Tensor", {t, Float(1.0)}), ops::add(xt, xt));
  g->Output(Argument::Tuple({add}));
  GraphLowering lowering(g, std::nullopt);
  lowering.Run();
  EXPECT_EQ(Listing(lowering),
            "alloc buf0 [4, 3] (1, 4) +0\n"
            "kernel cpp_fused_add_0(x, buf0)\n"
            "return buf0\n");

  // where layout optimization chose another layout for the node, the output leaves in eager's
  GraphLowering optimized(g, std::map<int64_t, std::vector<int64_t>>{{0, {3, 1}}});
  optimized.Run();
  EXPECT_EQ(Listing(optimized),
            "alloc buf0 [4, 3] (3, 1) +0\n"
            "kernel cpp_fused_add_0(x, buf0)\n"
            "return buf0\n");
}

// An op without a lowering runs eagerly, its lazy arguments realized first; its results are
// buffers laid out as its meta value.
TEST(GraphLowering, AnOpWithoutALoweringRunsEagerlyOnRealizedArguments) {
  auto g = std::make_shared<Graph>();
  Tensor x = Floats({4, 4});
  Node* px = WithVal(g->Placeholder("x"), x);
  Node* e = WithVal(Call(*g, "aten::exp", {px}), x);
  Node* mm = WithVal(Call(*g, "aten::mm", {e, px}), x);
  g->Output(Argument::Tuple({mm, Argument(IValue(int64_t{7}))}));
  GraphLowering lowering(g, std::nullopt);
  lowering.Run();
  EXPECT_EQ(Listing(lowering),
            "alloc buf0 [4, 4] (4, 1) +0\n"
            "kernel cpp_fused_exp_0(x, buf0)\n"
            "extern aten.mm.default(buf0, x) -> buf1 [4, 4] (4, 1) +0\n"
            "return buf1 7\n");
  ASSERT_EQ(lowering.fallbacks().size(), 1u);
  EXPECT_EQ(lowering.fallbacks()[0].target.str(), "aten.mm.default");
}

// Note [Outputs sharing a storage]: `v[:1], v[1:]` are views of one buffer, at eager's offsets.
TEST(GraphLowering, OutputsViewingOneValueAreViewsOfItsBuffer) {
  auto g = std::make_shared<Graph>();
  Tensor x = Floats({4, 2});
  Node* px = WithVal(g->Placeholder("x"), x);
  Tensor v = ops::mul(x, x);
  Node* mul = WithVal(Call(*g, "aten::mul.Tensor", {px, Float(3.0)}), v);
  Node* head = WithVal(Call(*g, "aten::slice.Tensor", {mul, Argument(IValue(int64_t{0})), Argument(IValue(int64_t{0})),
                                                       Argument(IValue(int64_t{1})), Argument(IValue(int64_t{1}))}),
                       ops::slice(v, 0, 0, 1));
  Node* tail = WithVal(Call(*g, "aten::slice.Tensor", {mul, Argument(IValue(int64_t{0})), Argument(IValue(int64_t{1})),
                                                       Argument(IValue(int64_t{4})), Argument(IValue(int64_t{1}))}),
                       ops::slice(v, 0, 1, 4));
  g->Output(Argument::Tuple({head, tail}));
  EXPECT_EQ(StoragesOutputsShare(*g), (std::set<const fx::Node*>{mul}));
  GraphLowering lowering(g, std::nullopt);
  lowering.Run();
  EXPECT_EQ(Listing(lowering),
            "alloc buf0 [4, 2] (2, 1) +0\n"
            "kernel cpp_fused_mul_0(x, buf0)\n"
            "view buf1 of buf0 [1, 2] (2, 1) +0\n"
            "view buf2 of buf0 [3, 2] (2, 1) +2\n"
            "return buf1 buf2\n");
}

// A graph input named like one of the wrapper's own names is renamed (fuzz seed 81, program 362:
// a saved activation named `empty_strided` shadowed the wrapper's allocator).
TEST(GraphLowering, InputsTakeNoNameTheWrapperUses) {
  EXPECT_EQ(InputName("x", {"x"}), "x");
  EXPECT_EQ(InputName("empty_strided", {"empty_strided", "empty_strided_"}), "empty_strided__");
  EXPECT_EQ(InputName("call", {"call"}), "call_");
}

// What Python decides through the hooks: an op run eagerly (a bisected lowering), a value realized
// where its fusion is refused.
TEST(GraphLowering, HooksSendANodeToItsEagerKernelAndRefuseFusion) {
  auto g = std::make_shared<Graph>();
  Tensor x = Floats({8});
  Node* px = WithVal(g->Placeholder("x"), x);
  Node* add = WithVal(Call(*g, "aten::add.Tensor", {px, Float(1.0)}), x);
  Node* neg = WithVal(Call(*g, "aten::neg", {add}), x);
  Node* relu = WithVal(Call(*g, "aten::relu", {neg}), x);
  g->Output(Argument::Tuple({relu}));
  GraphLowering lowering(g, std::nullopt);
  Hooks hooks;
  hooks.lower = [&](const Node& n, const std::vector<GraphValue>&, const GraphKwargs&) {
    HookChoice c;
    if (&n == relu) {
      c.kind = HookChoice::Kind::kExtern;
      c.why = "lowering turned off";
    }
    return c;
  };
  hooks.allow_fusion = [&](const Node& n) { return &n != add; };
  lowering.Run(hooks);
  EXPECT_EQ(Listing(lowering),
            "alloc buf0 [8] (1) +0\n"
            "kernel cpp_fused_add_0(x, buf0)\n"
            "alloc buf1 [8] (1) +0\n"
            "kernel cpp_fused_neg_1(buf0, buf1)\n"
            "extern aten.relu.default(buf1) -> buf2 [8] (1) +0\n"
            "return buf2\n");
  ASSERT_EQ(lowering.fallbacks().size(), 1u);
  EXPECT_EQ(lowering.fallbacks()[0].why, "lowering turned off");
}

}  // namespace
}  // namespace kiln::inductor::graph
