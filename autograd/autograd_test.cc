// autograd/autograd_test.cc: the engine's and the autograd layer's contracts, in C++: the order
// nodes run in and how often (diamonds, dependency counts), accumulation into .grad, saved-tensor
// version checks, grad mode removing the Autograd key, a 100,000-op chain (backward and freeing),
// hooks, and autograd.grad-style capture. Ops go through the dispatcher (tensor/ops.h).
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "autograd/derivatives.h"
#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/saved_variable.h"
#include "autograd/variable.h"
#include "gtest/gtest.h"
#include "runtime/error.h"
#include "tensor/empty.h"
#include "tensor/ops.h"

namespace kiln::autograd {
namespace {

class AutogradTest : public ::testing::Test {
 protected:
  void SetUp() override { InstallAutograd(); }
};

Tensor F(const std::vector<float>& v) {
  Tensor t = EmptyTensor(DimVector{static_cast<int64_t>(v.size())}, ScalarType::Float32, Device());
  std::memcpy(t.raw_data(), v.data(), v.size() * sizeof(float));
  return t;
}

Tensor Leaf(const std::vector<float>& v) {
  Tensor t = F(v);
  SetRequiresGrad(t, true);
  return t;
}

std::vector<float> Values(const Tensor& t) {
  AutoGradMode off(false);
  Tensor c = ops::contiguous(t);
  const float* p = c.data_ptr<float>();
  return std::vector<float>(p, p + c.numel());
}

Tensor Sum(const Tensor& t) { return ops::sum(t, std::nullopt); }

// backward() on a scalar root.
void Backward(const Tensor& root, bool keep_graph = false) {
  BackwardOptions opts;
  opts.keep_graph = keep_graph;
  RunBackward({GradientEdge(root)}, {ops::full({}, 1, root.dtype())}, {}, opts);
}

template <typename Fn>
std::string ErrorOf(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// --- the engine --------------------------------------------------------------------------------

TEST_F(AutogradTest, DiamondRunsEachNodeOnceAfterAllItsInputs) {
  Tensor x = Leaf({1, 2});
  Tensor a = ops::mul(x, Scalar(2.0));  // the top of the diamond
  Tensor b = ops::mul(a, Scalar(3.0));
  Tensor c = ops::mul(a, Scalar(4.0));
  Tensor d = ops::add(b, c);
  std::vector<std::string> order;
  auto record = [&](const Tensor& t, const std::string& tag) {
    GradFn(t)->AddPostHook([&order, tag](const TensorList&, const TensorList&) { order.push_back(tag); });
  };
  record(a, "a");
  record(b, "b");
  record(c, "c");
  record(d, "d");
  Backward(Sum(d));
  // Later nodes first (sequence numbers), and `a` once, after both of its consumers.
  EXPECT_EQ(order, (std::vector<std::string>{"d", "c", "b", "a"}));
  EXPECT_EQ(Values(Grad(x)), (std::vector<float>{14, 14}));
}

TEST_F(AutogradTest, GradientsFromSeveralPathsAreSummedBeforeTheNodeRuns) {
  Tensor x = Leaf({1, 2, 3});
  Tensor a = ops::mul(x, x);
  int calls = 0;
  std::vector<float> seen;
  GradFn(a)->AddPreHook(0, [&](const Tensor& g) {
    ++calls;
    seen = Values(g);
    return Tensor();
  });
  // Three uses of `a`, one through a longer path.
  Tensor y = ops::add(ops::add(a, ops::mul(a, Scalar(2.0))), ops::mul(ops::mul(a, Scalar(1.0)), Scalar(3.0)));
  Backward(Sum(y));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, (std::vector<float>{6, 6, 6}));
  EXPECT_EQ(Values(Grad(x)), (std::vector<float>{12, 24, 36}));
}

TEST_F(AutogradTest, ConstantInputsHaveNoEdge) {
  Tensor x = Leaf({1});
  Tensor k = F({5});
  Tensor y = ops::mul(x, k);
  ASSERT_EQ(GradFn(y)->next_edges().size(), 2u);
  EXPECT_TRUE(GradFn(y)->next_edges()[0].valid());
  EXPECT_FALSE(GradFn(y)->next_edges()[1].valid());
  EXPECT_EQ(GradFn(y)->name(), "MulBackward0");
  EXPECT_EQ(GradFn(y)->next_edges()[0].fn->name(), "torch::autograd::AccumulateGrad");
}

TEST_F(AutogradTest, OneAccumulatorPerLeaf) {
  Tensor x = Leaf({1});
  Tensor y = ops::mul(x, Scalar(2.0));
  Tensor z = ops::add(x, Scalar(1.0));
  EXPECT_EQ(GradFn(y)->next_edges()[0].fn, GradFn(z)->next_edges()[0].fn);
  auto* acc = dynamic_cast<AccumulateGrad*>(GradFn(y)->next_edges()[0].fn.get());
  ASSERT_NE(acc, nullptr);
  EXPECT_EQ(acc->variable().impl(), x.impl());
}

TEST_F(AutogradTest, AccumulateGradAddsAcrossBackwardCalls) {
  Tensor x = Leaf({1, 2});
  Backward(Sum(ops::mul(x, x)));
  EXPECT_EQ(Values(Grad(x)), (std::vector<float>{2, 4}));
  Tensor first = Grad(x);
  Backward(Sum(ops::mul(x, Scalar(3.0))));
  EXPECT_EQ(Values(Grad(x)), (std::vector<float>{5, 7}));
  SetGrad(x, Tensor());
  Backward(Sum(ops::mul(x, Scalar(3.0))));
  EXPECT_EQ(Values(Grad(x)), (std::vector<float>{3, 3}));
}

TEST_F(AutogradTest, GradNeverAliasesTheRootGradient) {
  Tensor x = Leaf({0, 0});
  Tensor g = F({1, 1});
  BackwardOptions opts;
  RunBackward({GradientEdge(x)}, {g}, {}, opts);  // the leaf is its own root
  ASSERT_TRUE(Grad(x).defined());
  EXPECT_NE(Grad(x)->storage().get(), g->storage().get());
}

TEST_F(AutogradTest, RetainGraphAllowsASecondPass) {
  Tensor x = Leaf({1, 2});
  Tensor y = Sum(ops::mul(x, x));
  Backward(y, /*keep_graph=*/true);
  Backward(y);
  EXPECT_EQ(Values(Grad(x)), (std::vector<float>{4, 8}));
  std::string msg = ErrorOf([&] { Backward(y); });
  EXPECT_NE(msg.find("Trying to backward through the graph a second time"), std::string::npos) << msg;
}

TEST_F(AutogradTest, CaptureInputsWithoutAccumulating) {
  Tensor a = Leaf({1, 2});
  Tensor b = Leaf({3, 4});
  Tensor y = Sum(ops::mul(a, b));
  BackwardOptions opts;
  opts.accumulate_grad = false;
  opts.keep_graph = true;
  TensorList g = RunBackward({GradientEdge(y)}, {ops::full({}, 1, ScalarType::Float32)}, {GradientEdge(a)}, opts);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(Values(g[0]), (std::vector<float>{3, 4}));
  EXPECT_FALSE(Grad(a).defined());
  EXPECT_FALSE(Grad(b).defined());
  // An input the outputs do not depend on.
  Tensor unused = Leaf({0});
  std::string msg = ErrorOf([&] {
    RunBackward({GradientEdge(y)}, {ops::full({}, 1, ScalarType::Float32)}, {GradientEdge(unused)}, opts);
  });
  EXPECT_NE(msg.find("appears to not have been used in the graph"), std::string::npos) << msg;
  opts.allow_unused = true;
  g = RunBackward({GradientEdge(y)}, {ops::full({}, 1, ScalarType::Float32)}, {GradientEdge(unused)}, opts);
  EXPECT_FALSE(g[0].defined());
}

TEST_F(AutogradTest, BroadcastGradientsAreReducedToTheInputShape) {
  Tensor x = Leaf({1, 2, 3});
  Tensor s = ops::view(Leaf({2}), {1});
  Tensor y = ops::mul(x, s);
  Backward(Sum(y));
  EXPECT_EQ(Values(Grad(x)), (std::vector<float>{2, 2, 2}));
}

// --- saved tensors ------------------------------------------------------------------------------

TEST_F(AutogradTest, SavedVariableChecksTheVersion) {
  Tensor x = Leaf({1, 2});
  Tensor y = ops::mul(x, Scalar(1.0));
  Tensor z = ops::mul(y, y);  // saves y (made by MulBackward0, the name the message gives) twice
  ops::add_(y, F({1, 1}));
  std::string msg = ErrorOf([&] { Backward(Sum(z)); });
  EXPECT_NE(msg.find("one of the variables needed for gradient computation has been modified by an inplace "
                     "operation: [kiln.FloatTensor [2]], which is output 0 of MulBackward0, is at version 1; "
                     "expected version 0 instead"),
            std::string::npos)
      << msg;
}

TEST_F(AutogradTest, AnOperandReadOnlyForTheOthersGradientIsSavedOnlyWhenThatIsWanted) {
  // mul saves "self for other", "other for self" (formulas/pointwise.cc), as PyTorch guards them
  Tensor x = Leaf({1, 2}), frozen = F({3, 4});
  Tensor z = ops::mul(x, frozen);
  auto* node = dynamic_cast<OpBackward*>(GradFn(z).get());
  ASSERT_NE(node, nullptr);
  EXPECT_FALSE(node->saved_inputs()[0].defined());  // x: only frozen's gradient would read it
  EXPECT_TRUE(node->saved_inputs()[1].defined());
  {
    AutoGradMode off(false);
    ops::add_(x, F({5, 5}));  // x changes in place: no error, z's backward never reads it
  }
  Backward(Sum(z));
  EXPECT_EQ(Values(Grad(x)), (std::vector<float>{3, 4}));
  ops::add_(frozen, F({1, 1}));  // the saved operand: its change is an error, as in PyTorch
  Tensor x2 = Leaf({1, 2});
  Tensor z2 = ops::mul(x2, frozen);
  ops::add_(frozen, F({1, 1}));
  EXPECT_NE(ErrorOf([&] { Backward(Sum(z2)); }).find("modified by an inplace operation"), std::string::npos);
}

TEST_F(AutogradTest, SavedVariableDirectly) {
  Tensor t = F({1});
  SavedVariable saved(t, /*is_output=*/false);
  EXPECT_EQ(saved.Unpack(nullptr).impl(), t.impl());
  t->bump_version();
  EXPECT_NE(ErrorOf([&] { saved.Unpack(nullptr); }).find("is at version 1; expected version 0"), std::string::npos);
  SavedVariable freed(F({1}), false);
  freed.Reset();
  EXPECT_NE(ErrorOf([&] { freed.Unpack(nullptr); }).find("second time"), std::string::npos);
  EXPECT_FALSE(SavedVariable().Unpack(nullptr).defined());
}

TEST_F(AutogradTest, InplaceRebasesHistory) {
  Tensor x = Leaf({1, 2});
  Tensor y = ops::mul(x, Scalar(2.0));
  ops::add_(y, F({1, 1}));
  EXPECT_EQ(GradFn(y)->name(), "AddBackward0");
  Backward(Sum(ops::mul(y, Scalar(3.0))));
  EXPECT_EQ(Values(Grad(x)), (std::vector<float>{6, 6}));
  std::string msg = ErrorOf([&] { ops::add_(x, F({1, 1})); });
  EXPECT_NE(msg.find("a leaf Variable that requires grad is being used in an in-place operation"), std::string::npos);
}

TEST_F(AutogradTest, StaleViewGetsANewGradFn) {
  // v views b; an in-place op on b afterwards must flow into v's gradient.
  Tensor x = Leaf({1, 2, 3, 4});
  Tensor b = ops::mul(x, Scalar(1.0));
  Tensor v = ops::slice(b, 0, SymInt(1), SymInt(3));
  CallOp<Tensor>(KILN_OP("aten::mul_.Scalar"), b, Scalar(2.0));
  EXPECT_EQ(GradFn(v)->name(), "AsStridedBackward0");
  Backward(Sum(v));
  EXPECT_EQ(Values(Grad(x)), (std::vector<float>{0, 2, 2, 0}));
}

// d(sum(grad))/dx of `y` (a scalar), with the first gradient built with create_graph.
std::pair<std::vector<float>, std::vector<float>> FirstAndSecondGrad(const Tensor& y, const Tensor& x) {
  BackwardOptions opts;
  opts.create_graph = opts.keep_graph = true;
  opts.accumulate_grad = false;
  Tensor g = RunBackward({GradientEdge(y)}, {ops::full({}, 1, y.dtype())}, {GradientEdge(x)}, opts)[0];
  EXPECT_TRUE(RequiresGrad(g));
  opts.create_graph = false;
  Tensor s = Sum(g);
  Tensor gg = RunBackward({GradientEdge(s)}, {ops::full({}, 1, s.dtype())}, {GradientEdge(x)}, opts)[0];
  return {Values(g), Values(gg)};
}

TEST_F(AutogradTest, DoubleBackwardThroughSlicingKeepsTheGraph) {
  // slice's backward writes the gradient into a view of zeros (ZerosForViewWrites).
  Tensor x = Leaf({1, 2, 3, 4});
  Tensor s = ops::slice(x, 0, SymInt(1), SymInt(3));
  auto [g, gg] = FirstAndSecondGrad(Sum(ops::mul(ops::mul(s, s), s)), x);
  EXPECT_EQ(g, (std::vector<float>{0, 12, 27, 0}));   // 3 s^2
  EXPECT_EQ(gg, (std::vector<float>{0, 12, 18, 0}));  // 6 s
}

TEST_F(AutogradTest, DoubleBackwardThroughInplaceOnAView) {
  // b = x*x; b[1:3] += x[1:3]; y = sum(b*b): CopySlices, out of place (Note [Functional CopySlices]).
  Tensor x = Leaf({1, 2, 3, 4});
  Tensor b = ops::mul(x, x);
  Tensor v = ops::slice(b, 0, SymInt(1), SymInt(3));
  ops::add_(v, ops::slice(x, 0, SymInt(1), SymInt(3)));
  EXPECT_EQ(GradFn(b)->name(), "torch::autograd::CopySlices");
  auto [g, gg] = FirstAndSecondGrad(Sum(ops::mul(b, b)), x);
  EXPECT_EQ(g, (std::vector<float>{4, 60, 168, 256}));  // PyTorch's values
  EXPECT_EQ(gg, (std::vector<float>{12, 74, 146, 192}));
}

// --- grad mode ------------------------------------------------------------------------------------

TEST_F(AutogradTest, GradModeOffExcludesTheAutogradKey) {
  Tensor x = Leaf({1});
  EXPECT_TRUE(x->keys().has(DispatchKey::Autograd));
  EXPECT_TRUE(GradMode::is_enabled());
  {
    AutoGradMode off(false);
    EXPECT_FALSE(GradMode::is_enabled());
    EXPECT_TRUE(TlsLocalDispatchKeySet().excluded.has(DispatchKey::Autograd));
    Tensor y = ops::mul(x, Scalar(2.0));
    EXPECT_FALSE(RequiresGrad(y));
    EXPECT_EQ(GradFn(y), nullptr);
    EXPECT_FALSE(y->keys().has(DispatchKey::Autograd));
    {
      AutoGradMode on(true);
      EXPECT_TRUE(RequiresGrad(ops::mul(x, Scalar(2.0))));
    }
    EXPECT_FALSE(GradMode::is_enabled());
  }
  EXPECT_TRUE(GradMode::is_enabled());
  EXPECT_FALSE(TlsLocalDispatchKeySet().excluded.has(DispatchKey::Autograd));
  // Tensors that do not require grad never carry the key.
  EXPECT_FALSE(F({1})->keys().has(DispatchKey::Autograd));
  EXPECT_FALSE(ops::mul(F({1}), Scalar(2.0))->keys().has(DispatchKey::Autograd));
}

TEST_F(AutogradTest, InferenceModeMarksOutputsAndForbidsSavingThem) {
  Tensor x = Leaf({1});
  Tensor made;
  InferenceMode::set_enabled(true);
  EXPECT_FALSE(GradMode::is_enabled());
  made = ops::mul(F({2}), Scalar(2.0));
  InferenceMode::set_enabled(false);
  EXPECT_TRUE(GradMode::is_enabled());
  ASSERT_NE(GetMeta(made), nullptr);
  EXPECT_TRUE(GetMeta(made)->is_inference_);
  std::string msg = ErrorOf([&] { ops::mul(x, made); });
  EXPECT_NE(msg.find("Inference tensors cannot be saved for backward"), std::string::npos) << msg;
  msg = ErrorOf([&] { ops::add_(made, F({1})); });
  EXPECT_NE(msg.find("Inplace update to inference tensor outside InferenceMode"), std::string::npos) << msg;
}

TEST_F(AutogradTest, RequiresGradRules) {
  Tensor i = EmptyTensor(DimVector{2}, ScalarType::Int64, Device());
  EXPECT_NE(ErrorOf([&] { SetRequiresGrad(i, true); }).find("only Tensors of floating point"), std::string::npos);
  Tensor x = Leaf({1});
  Tensor y = ops::mul(x, Scalar(2.0));
  EXPECT_TRUE(IsLeaf(x));
  EXPECT_FALSE(IsLeaf(y));
  EXPECT_NE(ErrorOf([&] { SetRequiresGrad(y, false); }).find("you can only change requires_grad flags of leaf"),
            std::string::npos);
  Tensor d = Detach(y);
  EXPECT_FALSE(RequiresGrad(d));
  EXPECT_EQ(d->storage().get(), y->storage().get());
  EXPECT_EQ(d->version_counter(), y->version_counter());
}

// --- long chains ------------------------------------------------------------------------------------

TEST_F(AutogradTest, HundredThousandOpChain) {
  Tensor x = Leaf({1});
  Tensor y = x;
  for (int i = 0; i < 100000; ++i) y = ops::mul(y, Scalar(1.0));
  Backward(Sum(y), /*keep_graph=*/true);
  EXPECT_EQ(Values(Grad(x)), (std::vector<float>{1}));
  y = Tensor();  // frees 100,000 nodes: must not recurse (Note [Freeing long graphs])
  Tensor z = x;
  for (int i = 0; i < 100000; ++i) z = ops::add(z, Scalar(1.0));
  z = Tensor();  // freed without ever running backward
}

// --- hooks ---------------------------------------------------------------------------------------------

TEST_F(AutogradTest, TensorHooksReplaceTheGradientAndCanBeRemoved) {
  Tensor x = Leaf({1, 2});
  Tensor y = ops::mul(x, Scalar(3.0));
  int id = RegisterHook(y, [](const Tensor& g) { return ops::mul(g, Scalar(10.0)); });
  Backward(Sum(y), /*keep_graph=*/true);
  EXPECT_EQ(Values(Grad(x)), (std::vector<float>{30, 30}));
  RemoveHook(y, id);
  SetGrad(x, Tensor());
  Backward(Sum(y));
  EXPECT_EQ(Values(Grad(x)), (std::vector<float>{3, 3}));

  // Leaf hooks run before accumulation; returning undefined keeps the gradient.
  Tensor w = Leaf({1});
  int seen = 0;
  RegisterHook(w, [&](const Tensor&) { ++seen; return Tensor(); });
  int leaf_id = RegisterHook(w, [](const Tensor& g) { return ops::add(g, Scalar(1.0)); });
  Backward(Sum(ops::mul(w, Scalar(2.0))));
  EXPECT_EQ(seen, 1);
  EXPECT_EQ(Values(Grad(w)), (std::vector<float>{3}));
  RemoveHook(w, leaf_id);
  Backward(Sum(ops::mul(w, Scalar(2.0))));
  EXPECT_EQ(Values(Grad(w)), (std::vector<float>{5}));
}

TEST_F(AutogradTest, RetainGradSeesTheHookedGradient) {
  Tensor x = Leaf({1, 2});
  Tensor y = ops::mul(x, Scalar(2.0));
  RetainGrad(y);
  RegisterHook(y, [](const Tensor& g) { return ops::mul(g, Scalar(5.0)); });
  Backward(Sum(ops::mul(y, y)));
  EXPECT_EQ(Values(Grad(y)), (std::vector<float>{20, 40}));  // 2y, then x5
  EXPECT_EQ(Values(Grad(x)), (std::vector<float>{40, 80}));
  std::string msg = ErrorOf([&] { RegisterHook(F({1}), [](const Tensor& g) { return g; }); });
  EXPECT_NE(msg.find("doesn't require gradient"), std::string::npos);
}

TEST_F(AutogradTest, PostHooksSeeGradInputsAndOutputs) {
  Tensor x = Leaf({1, 2});
  Tensor y = ops::mul(x, Scalar(4.0));
  std::vector<float> in, out;
  int id = GradFn(y)->AddPostHook([&](const TensorList& grad_inputs, const TensorList& grad_outputs) {
    in = Values(grad_inputs[0]);
    out = Values(grad_outputs[0]);
  });
  Backward(Sum(y), /*keep_graph=*/true);
  EXPECT_EQ(in, (std::vector<float>{4, 4}));
  EXPECT_EQ(out, (std::vector<float>{1, 1}));
  EXPECT_TRUE(GradFn(y)->RemovePostHook(id));
  EXPECT_FALSE(GradFn(y)->RemovePostHook(id));
}

// --- ops without a formula -------------------------------------------------------------------------

Tensor NoFormulaKernel(const Tensor& self) { return ops::clone(self); }

TEST_F(AutogradTest, MissingFormulaRaisesNotImplemented) {
  static std::once_flag once;
  std::call_once(once, [] {
    Registry::Get().Def("kiln_test_no_formula(Tensor self) -> Tensor").Impl<&NoFormulaKernel>(DispatchKey::CPU);
  });
  const Op& op = *Registry::Get().Find("aten::kiln_test_no_formula");
  // Without grad it is an ordinary op.
  EXPECT_EQ(Values(CallOp<Tensor>(op, F({1, 2}))), (std::vector<float>{1, 2}));
  try {
    CallOp<Tensor>(op, Leaf({1, 2}));
    ADD_FAILURE() << "expected NotImplementedError";
  } catch (const NotImplementedError& e) {
    EXPECT_NE(std::string(e.what()).find("the derivative for 'aten::kiln_test_no_formula' is not implemented"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kiln::autograd
