// aot/functionalize_test.cc: functional tensors: in-place ops become functional ones, writes
// through views reach the base and the other views, and a traced program holds no mutation.
#include "aot/functionalize.h"

#include <gtest/gtest.h>

#include "fx/tracer.h"
#include "tensor/ops.h"

namespace kiln::aot {
namespace {

Tensor Arange(int64_t n) {
  Tensor t = ops::full({SymInt(n)}, 0, ScalarType::Float32);
  for (int64_t i = 0; i < n; ++i) t.data_ptr<float>()[i] = static_cast<float>(i);
  return t;
}

std::vector<float> Values(const Tensor& t) {
  Tensor c = ops::contiguous(FromFunctional(t));
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

TEST(Functionalize, InplaceReplacesTheValue) {
  InstallFunctionalize();
  Tensor x = Arange(3);
  Tensor f = ToFunctional(x);
  Tensor r = ops::add_(f, f, Scalar(2));
  EXPECT_TRUE(r.is_same(f));
  EXPECT_EQ(Values(f), (std::vector<float>{0, 3, 6}));
  EXPECT_EQ(Values(x), (std::vector<float>{0, 1, 2}));  // the wrapped tensor is untouched
  EXPECT_TRUE(AsFunctional(f)->has_data_mutation());
}

TEST(Functionalize, WritesThroughViewsReachBaseAndOtherViews) {
  InstallFunctionalize();
  Tensor base = ToFunctional(ops::view(Arange(6), {SymInt(2), SymInt(3)}));
  Tensor row = ops::select(base, 0, 1);                       // [3, 4, 5]
  Tensor col = ops::select(ops::transpose(base, 0, 1), 0, 2);  // [2, 5]
  Tensor part = ops::slice(row, 0, SymInt(1), std::nullopt);   // [4, 5]
  CallOp<Tensor>(KILN_OP("aten::mul_.Scalar"), part, Scalar(10));
  EXPECT_EQ(Values(base), (std::vector<float>{0, 1, 2, 3, 40, 50}));
  EXPECT_EQ(Values(row), (std::vector<float>{3, 40, 50}));
  EXPECT_EQ(Values(col), (std::vector<float>{2, 50}));
  ops::fill_(col, Scalar(-1));
  EXPECT_EQ(Values(base), (std::vector<float>{0, 1, -1, 3, 40, -1}));
  EXPECT_EQ(Values(part), (std::vector<float>{40, -1}));
}

// Note [Writes through overlapping views]: the expanded view's rows are one row in memory, so a
// write to its diagonal reaches both of the base's elements (eager's result), not only the last
// row's element as a view-by-view scatter would have it.
TEST(Functionalize, WritesThroughAnOverlappingViewLandOnTheBase) {
  InstallFunctionalize();
  Tensor base = ToFunctional(Arange(2));
  Tensor rows = ops::expand(base, {SymInt(5), SymInt(2)});
  Tensor diag = CallOp<Tensor>(KILN_OP("aten::diagonal"), rows, int64_t{0}, int64_t{0}, int64_t{1});
  CallOp<Tensor>(KILN_OP("aten::add_.Scalar"), diag, Scalar(10), Scalar(1));
  EXPECT_EQ(Values(base), (std::vector<float>{10, 11}));
  EXPECT_EQ(Values(rows), (std::vector<float>{10, 11, 10, 11, 10, 11, 10, 11, 10, 11}));
}

TEST(Functionalize, TracedProgramHasNoMutation) {
  InstallFunctionalize();
  fx::Tracer tracer;
  Tensor x = ops::view(Arange(6), {SymInt(2), SymInt(3)});
  tracer.Placeholder("arg0_1", x);
  Tensor out;
  {
    fx::TracingGuard guard(&tracer);
    Tensor f = ToFunctional(x);
    Tensor t = ops::transpose(f, 0, 1);
    Tensor row = ops::select(t, 0, 0);
    CallOp<Tensor>(KILN_OP("aten::add_.Scalar"), row, Scalar(1.0), Scalar(1));
    Tensor cols = ops::slice(f, 1, SymInt(2), std::nullopt);
    ops::copy_(cols, ops::full({SymInt(2), SymInt(1)}, 7, ScalarType::Float32));
    out = FromFunctional(ops::mul(f, f));
  }
  tracer.graph().Output(tracer.TensorArg(out));
  for (fx::Node* n : tracer.graph().nodes()) {
    if (n->op() != fx::Opcode::kCallFunction || !n->target().op) continue;
    EXPECT_FALSE(n->target().op->schema().is_mutable()) << n->Format();
  }
  EXPECT_EQ(Values(out), (std::vector<float>{1, 1, 49, 16, 16, 49}));
}

TEST(Functionalize, OutOverloadBecomesFunctional) {
  InstallFunctionalize();
  Tensor out = ToFunctional(ops::full({SymInt(3)}, 0, ScalarType::Float32));
  Tensor a = ToFunctional(Arange(3));
  CallOp<Tensor>(KILN_OP("aten::mul.out"), a, a, out);
  EXPECT_EQ(Values(out), (std::vector<float>{0, 1, 4}));
}

// The functional form of every in-place op takes the same arguments, kind for kind: the kernel
// calls it with the in-place op's stack. `pow_.Scalar` once paired with `pow.Scalar` by overload
// name, whose self is a Scalar, and `x.pow_(2)` in a compiled function raised "std::get: wrong
// index for variant".
TEST(Functionalize, EveryInplaceOpsFunctionalFormTakesItsArguments) {
  int paired = 0;
  for (const Op* op : Registry::Get().ops()) {
    if (!op->has_tag(Tag::inplace)) continue;
    const Op* functional = FunctionalVariant(*op);
    if (functional == nullptr) continue;  // clone-and-mutate instead
    ++paired;
    const auto& a = op->schema().arguments;
    const auto& b = functional->schema().arguments;
    EXPECT_FALSE(functional->schema().is_mutable()) << op->name();
    ASSERT_EQ(a.size(), b.size()) << op->name() << " -> " << functional->name();
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_EQ(a[i].kind, b[i].kind) << op->name() << " -> " << functional->name() << " argument " << a[i].name;
  }
  EXPECT_GT(paired, 50);
  EXPECT_EQ(FunctionalVariant(KILN_OP("aten::pow_.Scalar"))->name(), "aten::pow.Tensor_Scalar");
  EXPECT_EQ(FunctionalVariant(KILN_OP("aten::add_.Tensor"))->name(), "aten::add.Tensor");
}

TEST(Functionalize, InplacePowWithAScalarExponent) {
  InstallFunctionalize();
  Tensor f = ToFunctional(Arange(3));
  CallOp<Tensor>(KILN_OP("aten::pow_.Scalar"), f, Scalar(2));
  EXPECT_EQ(Values(f), (std::vector<float>{0, 1, 4}));
}

}  // namespace
}  // namespace kiln::aot
