// fx/interpreter_test.cc: graphs the make_fx tracer recorded, run again by the C++ interpreter on
// other inputs: the values equal the ops called directly (defaults, kwargs, wrapped numbers that
// must not promote, lists of tensors, getitem of multi-output ops), a replay under a tracer records
// the same graph with each node's stack_trace, and graphs it cannot run are named.
#include "fx/interpreter.h"

#include <gtest/gtest.h>

#include "fx/tracer.h"
#include "fx/testing/getitem.h"
#include "tensor/ops.h"
#include "tensor/ops/common.h"

namespace kiln::fx {
namespace {

Tensor Ramp(std::vector<int64_t> sizes, float start, float step) {
  int64_t n = 1;
  std::vector<SymInt> s;
  for (int64_t d : sizes) n *= d, s.emplace_back(d);
  Tensor t = ops::full({SymInt(n)}, 0, ScalarType::Float32);
  float* p = t.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) p[i] = start + step * static_cast<float>(i);
  return ops::view(t, s);
}

using testing::GetItem;

void ExpectSame(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.sizes(), want.sizes());
  ASSERT_EQ(got.dtype(), want.dtype());
  Tensor g = ops::contiguous(got), w = ops::contiguous(want);
  if (g.dtype() == ScalarType::Float32) {
    for (int64_t i = 0; i < g.numel(); ++i) EXPECT_EQ(g.data_ptr<float>()[i], w.data_ptr<float>()[i]) << "element " << i;
  } else {
    ASSERT_EQ(g.dtype(), ScalarType::Int64);
    for (int64_t i = 0; i < g.numel(); ++i) EXPECT_EQ(g.data_ptr<int64_t>()[i], w.data_ptr<int64_t>()[i]) << "element " << i;
  }
}

// f(x, y) = (max(relu(x + 2 * y), dim=1).indices, cat([x, y]) / 3 rounded down, sum over dim 1)
struct Program {
  static std::vector<Tensor> Run(const Tensor& x, const Tensor& y) {
    Tensor a = ops::add(x, y, Scalar(2));                                    // alpha: kwarg-only
    Tensor r = CallOp<Tensor>(KILN_OP("aten::relu"), a);
    auto [values, indices] = CallOp<std::tuple<Tensor, Tensor>>(KILN_OP("aten::max.dim"), r, int64_t(1), false);
    Tensor c = ops::cat({x, y}, 0);                                          // a tensor list
    Tensor d = CallOp<Tensor>(KILN_OP("aten::div.Tensor_mode"), c, WrapScalar(Scalar(3.0), Device(DeviceType::CPU)),
                              std::optional<std::string>("floor"));          // a wrapped number
    Tensor s = ops::sum(values, std::vector<int64_t>{0}, /*keepdim=*/true);  // a default left out
    return {indices, d, s};
  }
};

std::shared_ptr<Graph> Trace(std::string stack_trace = "") {
  Tracer tracer;
  tracer.getitem_target = std::make_shared<GetItem>();
  Tensor x = Ramp({2, 3}, -1.5f, 0.75f), y = Ramp({2, 3}, 2.0f, -0.5f);
  tracer.Placeholder("x", x);
  tracer.Placeholder("y", y);
  std::vector<Tensor> outs;
  {
    TracingGuard guard(&tracer);
    outs = Program::Run(x, y);
  }
  std::vector<Argument> results;
  for (const Tensor& t : outs) results.push_back(tracer.TensorArg(t));
  tracer.graph().Output(Argument::Tuple(results));
  if (!stack_trace.empty())
    for (Node* n : tracer.graph().nodes())
      if (n->op() == Opcode::kCallFunction) n->SetMeta("stack_trace", Argument(IValue(stack_trace + n->name())));
  return tracer.graph_ptr();
}

TEST(Interpreter, RunsARecordedGraphOnOtherInputs) {
  std::shared_ptr<Graph> g = Trace();
  ASSERT_EQ(WhyNotInterpretable(*g), "");
  Tensor x = Ramp({2, 3}, 4.0f, -1.25f), y = Ramp({2, 3}, -3.0f, 1.5f);
  InterpretedOutput out = Interpret(*g, {IValue(x), IValue(y)});
  std::vector<Tensor> want = Program::Run(x, y);
  ASSERT_EQ(out.structure.kind, Argument::Kind::kTuple);
  ASSERT_EQ(out.values.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) ExpectSame(out.values[i].to_tensor(), want[i]);
  // the wrapped 3.0 kept the float32 dtype (a 0-d float64 tensor would not promote either, but a
  // 1-element float64 one would); the floor division really divided by 3
  EXPECT_EQ(out.values[1].to_tensor().dtype(), ScalarType::Float32);
}

TEST(Interpreter, AReplayUnderATracerRecordsTheSameGraphWithEachNodesStackTrace) {
  std::shared_ptr<Graph> g = Trace("File \"model.py\", line 1, in ");
  Tracer tracer;
  tracer.getitem_target = std::make_shared<GetItem>();
  Tensor x = Ramp({2, 3}, 0.5f, 1.0f), y = Ramp({2, 3}, 1.0f, 0.25f);
  tracer.Placeholder("x", x);
  tracer.Placeholder("y", y);
  InterpretedOutput out;
  {
    TracingGuard guard(&tracer);
    InterpretOptions options;
    options.annotate = &tracer.graph();
    out = Interpret(*g, {IValue(x), IValue(y)}, options);
  }
  std::vector<std::string> want, got;
  for (Node* n : g->nodes())
    if (n->op() == Opcode::kCallFunction) want.push_back(n->target().str());
  for (Node* n : tracer.graph().nodes()) {
    if (n->op() != Opcode::kCallFunction) continue;
    got.push_back(n->target().str());
    const Argument* st = n->FindMeta("stack_trace");
    ASSERT_NE(st, nullptr) << n->name();
    // getitems are made with their op (max_1: max is a builtin's name), so they carry its line
    const std::string expected = IsGetItem(n->target()) ? n->args()[0].node->name() : n->name();
    EXPECT_EQ(st->value.to_string(), "File \"model.py\", line 1, in " + expected) << n->name();
  }
  EXPECT_EQ(got, want);
}

TEST(Interpreter, NamesWhatItCannotRun) {
  Tracer tracer;
  Tensor x = Ramp({3}, 0.0f, 1.0f), w = Ramp({3}, 1.0f, 1.0f);
  tracer.Placeholder("x", x);
  Tensor y;
  {
    TracingGuard guard(&tracer);
    y = ops::add(x, w);  // w was never an input: a get_attr constant
  }
  tracer.graph().Output(tracer.TensorArg(y));
  EXPECT_EQ(WhyNotInterpretable(tracer.graph()), "node _tensor_constant0 is a get_attr node");
  EXPECT_THROW(Interpret(tracer.graph(), {IValue(x)}), ValueError);

  Graph g;
  Node* p = g.Placeholder("p");
  g.Output(Argument(g.CallMethod("relu", {Argument(p)})));
  EXPECT_EQ(WhyNotInterpretable(g), "node relu is a call_method node");
}

TEST(Interpreter, InputsMustMatchThePlaceholders) {
  std::shared_ptr<Graph> g = Trace();
  Tensor x = Ramp({2, 3}, 0.0f, 1.0f);
  EXPECT_THROW(Interpret(*g, {IValue(x)}), TypeError);
  EXPECT_THROW(Interpret(*g, {IValue(x), IValue(x), IValue(x)}), TypeError);
}

}  // namespace
}  // namespace kiln::fx
