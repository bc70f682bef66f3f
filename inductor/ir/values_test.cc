// inductor/ir/values_test.cc: values -- handles, views, groups, origins and their printing
// (Note [Values]).
#include <gtest/gtest.h>

#include "inductor/ir/values.h"
#include "runtime/error.h"

namespace kiln::inductor::ir {
namespace {

using codegen::DType;
using codegen::Expr;
using codegen::OpCode;

std::shared_ptr<Buffer> Input(const char* name, std::vector<int64_t> shape) {
  std::vector<int64_t> stride = ContiguousStrides(shape);
  return std::make_shared<Buffer>(name, ScalarType::Float32, shape, stride, 0, Buffer::Source::kInput);
}

// A Pointwise over x's shape computing op(x) elementwise.
std::shared_ptr<Pointwise> Unary(OpCode op, const std::shared_ptr<Value>& x, std::vector<std::shared_ptr<Value>> inlined = {}) {
  Tracer t;
  std::vector<Affine> idx;
  for (size_t d = 0; d < x->shape().size(); ++d) idx.push_back(Affine::Var(static_cast<int>(d)));
  auto traced = std::make_shared<Traced>();
  traced->body = std::make_shared<Body>(t.Finish(Expr::Op(op, {t.Read(x->handle(), idx)})));
  traced->inputs = {x};
  traced->inlined = std::move(inlined);
  return std::make_shared<Pointwise>(x->dtype(), x->shape(), traced);
}

TEST(Values, HandlesFindLiveValuesOnly) {
  auto a = Input("a", {2, 3});
  auto b = Input("b", {2, 3});
  EXPECT_NE(a->handle(), b->handle());
  EXPECT_EQ(ValueOf(a->handle()), a);
  const int64_t gone = b->handle();
  b.reset();
  EXPECT_EQ(ValueOf(gone), nullptr);
}

TEST(Values, ViewsShareTheirRootsMemory) {
  auto a = Input("a", {4, 6});
  auto t = std::make_shared<Buffer>(std::nullopt, ScalarType::Float32, std::vector<int64_t>{6, 4},
                                    std::vector<int64_t>{1, 6}, 0, a);
  auto row = std::make_shared<Buffer>(std::nullopt, ScalarType::Float32, std::vector<int64_t>{4},
                                      std::vector<int64_t>{6}, 2, t);
  EXPECT_EQ(&row->Root(), a.get());
  EXPECT_EQ(row->source(), Buffer::Source::kView);
  EXPECT_TRUE(a->IsContiguous());
  EXPECT_FALSE(t->IsContiguous());
  EXPECT_EQ(a->ToString(), "Buffer a float32 [4, 6] stride=[6, 1]");
  EXPECT_EQ(t->ToString(), "Buffer None float32 [6, 4] stride=[1, 6]");
  EXPECT_THROW(Buffer("x", ScalarType::Float32, {2, 2}, {1}, 0, Buffer::Source::kInput), ValueError);
  EXPECT_EQ(ContiguousStrides({2, 0, 3}), (std::vector<int64_t>{3, 3, 1}));
}

TEST(Values, LazyValuesPrintTheirKindShapeAndOps) {
  auto x = Input("x", {4, 8});
  auto e = Unary(OpCode::kExp, x);
  e->ops = {"exp", "add"};
  EXPECT_EQ(e->ToString(), "Pointwise float32 [4, 8] ops=['add', 'exp']");
  Tracer t;
  auto source = std::make_shared<Traced>();
  source->body = std::make_shared<Body>(t.Finish(t.Read(e->handle(), {Affine::Var(0), Affine::Var(kReduced)})));
  source->inputs = {e};
  // mean: the accumulator (Load(0)) divided by 8
  auto finish = Expr::Op(OpCode::kDiv, {Expr::Load(0, {}), Expr::Const(8, DType::F32)});
  Reduction red(ScalarType::Float32, {4}, 8, "sum", source, {4, 1}, finish);
  red.axis = 1;
  red.ops = {"mean"};
  EXPECT_EQ(red.ToString(), "Reduction sum float32 kept=[4] extent=8 ops=['mean']");
  EXPECT_EQ(red.Space().ToString(), "LoopSpace(kept=[4], extent=8, axis=1)");
  EXPECT_TRUE(red.Space() == (LoopSpace{{4}, 8, 1}));
  EXPECT_FALSE(red.Space() == (LoopSpace{{4}, 8, std::nullopt}));
  EXPECT_EQ(codegen::SerializeExpr(*red.Finished(Expr::Acc(3))),
            codegen::SerializeExpr(*Expr::Op(OpCode::kDiv, {Expr::Acc(3), Expr::Const(8, DType::F32)})));
  EXPECT_EQ(red.traced()->inputs.front(), e) << "the source keeps what it reads alive";
}

TEST(Values, GroupsHoldTheirMembersWeakly) {
  auto x = Input("x", {3});
  auto values = Unary(OpCode::kNeg, x);
  auto indices = Unary(OpCode::kAbs, x);
  EXPECT_TRUE(values->Group().empty());
  Value::MakeGroup({values, indices});
  EXPECT_EQ(values->Group(), (std::vector<std::shared_ptr<Value>>{values, indices}));
  indices.reset();
  EXPECT_EQ(values->Group(), (std::vector<std::shared_ptr<Value>>{values})) << "no cycle keeps a member alive";
}

TEST(Values, AllOriginsFollowInlinedBodies) {
  auto x = Input("x", {3});
  auto inner = Unary(OpCode::kNeg, x);
  inner->origins.insert({1, "line 1"});
  auto middle = Unary(OpCode::kExp, x, {inner});
  middle->origins.insert({2, "line 2"});
  auto outer = Unary(OpCode::kAbs, x, {middle, inner});
  outer->origins.insert({3, "line 3"});
  EXPECT_EQ(outer->AllOrigins(), (std::set<Origin>{{1, "line 1"}, {2, "line 2"}, {3, "line 3"}}));
  EXPECT_EQ(inner->AllOrigins(), (std::set<Origin>{{1, "line 1"}}));
}

}  // namespace
}  // namespace kiln::inductor::ir

#include "inductor/ir/strides.h"

namespace kiln::inductor::ir {
namespace {

TEST(Strides, DenseGappedAndExpandedLayouts) {
  EXPECT_EQ(DenseOrder({2, 3, 4}, {12, 4, 1}), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(DenseOrder({2, 3, 4}, {1, 8, 2}), (std::vector<int>{1, 2, 0})) << "a permuted dense layout";
  EXPECT_EQ(DenseOrder({2, 1, 4}, {4, 99, 1}), (std::vector<int>{0, 2, 1})) << "size-1 strides never matter";
  EXPECT_FALSE(DenseOrder({2, 3}, {6, 2}).has_value()) << "gaps";
  EXPECT_FALSE(DenseOrder({2, 3}, {0, 1}).has_value()) << "expanded";
  EXPECT_EQ(GappedOrder({2, 3}, {6, 2}), (std::vector<int>{0, 1}));
  EXPECT_FALSE(GappedOrder({2, 3}, {1, 1}).has_value()) << "overlapping";
  EXPECT_FALSE(GappedOrder({0, 3}, {3, 1}).has_value()) << "empty";
  EXPECT_EQ(ExpandedDims({2, 1, 4}, {0, 0, 1}), (std::set<int>{0}));
  EXPECT_TRUE(SameLayout({2, 1, 4}, {4, 4, 1}, {4, 1, 1}));
  EXPECT_FALSE(SameLayout({2, 4}, {4, 1}, {1, 2}));
  EXPECT_TRUE(SameLayout({0, 4}, {4, 1}, {1, 2})) << "an empty tensor's layout never matters";
  EXPECT_EQ(SqueezedStrides({4, 1, 6}, {6, 6, 1}, {4, 6, 1}), (std::vector<int64_t>{6, 1, 1}));
  EXPECT_THROW(SqueezedStrides({4, 1}, {1, 1}, {4, 6}), ValueError);
}

}  // namespace
}  // namespace kiln::inductor::ir
