// inductor/lowering/reductions_test.cc: reductions lowered to the loop IR -- one axis at a time,
// adjacent axes merged, outer reductions left to eager, bfloat16 accumulated in float32, Welford
// statistics (and the mean a variance shares), argmax over a flat buffer, softmax; compared as
// text.
#include <gtest/gtest.h>

#include <cmath>

#include "inductor/lowering/reductions.h"

namespace kiln::inductor::lowering {
namespace {

using codegen::DType;
using codegen::Expr;
using codegen::OpCode;
using ir::Buffer;
using ir::Pointwise;
using ir::Reduction;
using ir::Value;

std::shared_ptr<Buffer> In(ScalarType dtype, std::vector<int64_t> shape, std::vector<int64_t> stride = {}) {
  if (stride.empty()) stride = ir::ContiguousStrides(shape);
  return std::make_shared<Buffer>("x", dtype, shape, stride, 0, Buffer::Source::kInput);
}

std::shared_ptr<Reduction> AsReduction(const ValuePtr& v) { return std::dynamic_pointer_cast<Reduction>(v); }
std::shared_ptr<Pointwise> AsPointwise(const ValuePtr& v) { return std::dynamic_pointer_cast<Pointwise>(v); }

// The first line of a body: its first read ("read0 = v<handle>[...]"), the value named `name`.
std::string FirstRead(const ir::Body& body, const ValuePtr& of, const std::string& name) {
  std::string s = body.ToString();
  s = s.substr(0, s.find('\n'));
  const std::string from = "v" + std::to_string(of->handle()) + "[";
  const size_t at = s.find(from);
  if (at != std::string::npos) s.replace(at, from.size(), name + "[");
  return s;
}

constexpr ScalarType kF32 = ScalarType::Float32;

TEST(Reductions, OneAxisIsAReductionKeepdimOrItsSqueezedValue) {
  auto x = In(kF32, {4, 8});
  auto red = AsReduction(LowerReduce(nullptr, "sum", kF32, {4, 1}, x, std::vector<int64_t>{-1}, true));
  ASSERT_NE(red, nullptr);
  EXPECT_EQ(red->reduce(), "sum");
  EXPECT_EQ(red->Space().ToString(), "LoopSpace(kept=[4], extent=8, axis=1)");
  EXPECT_EQ(FirstRead(red->source(), x, "x"), "read0 = x[d0, r]");
  EXPECT_EQ(red->ops, (std::set<std::string>{"sum"}));

  auto squeezed = AsPointwise(LowerReduce(nullptr, "sum", kF32, {4}, x, std::vector<int64_t>{1}, false));
  ASSERT_NE(squeezed, nullptr);
  auto of = AsReduction(squeezed->squeeze_of);
  ASSERT_NE(of, nullptr) << "realized as a view of the keepdim reduction's buffer";
  EXPECT_EQ(FirstRead(squeezed->body(), of, "red"), "read0 = red[d0, 0]");
}

TEST(Reductions, AdjacentAxesLaidOutAsOneMergeAndOthersReduceOneAtATime) {
  auto x = In(kF32, {2, 3, 4});
  auto merged = AsPointwise(LowerReduce(nullptr, "sum", kF32, {2}, x, std::vector<int64_t>{1, 2}, false));
  ASSERT_NE(merged, nullptr);
  auto one = AsReduction(merged->squeeze_of);
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(one->Space().ToString(), "LoopSpace(kept=[2], extent=12, axis=1)") << "H and W read as one axis";

  // axes 0 and 2: the innermost first, into float32 partial sums for a bfloat16 result
  auto b = In(ScalarType::BFloat16, {2, 3, 4});
  auto two = AsReduction(LowerReduce(nullptr, "sum", ScalarType::BFloat16, {1, 3, 1}, b, std::vector<int64_t>{0, 2}, true));
  ASSERT_NE(two, nullptr);
  EXPECT_EQ(two->Space().ToString(), "LoopSpace(kept=[3, 1], extent=2, axis=0)");
  EXPECT_EQ(two->dtype(), ScalarType::BFloat16);
  auto inner = AsReduction(two->traced()->inputs.at(0));
  ASSERT_NE(inner, nullptr);
  EXPECT_EQ(inner->Space().ToString(), "LoopSpace(kept=[2, 3], extent=4, axis=2)");
  EXPECT_EQ(inner->dtype(), kF32) << "a partial sum towards bfloat16 is kept in float32";
  EXPECT_EQ(codegen::SerializeExpr(*inner->source().expr),
            codegen::SerializeExpr(*Expr::Cast(Expr::Load(0, {}), DType::F32)))
      << "bfloat16 summed in float32";
}

TEST(Reductions, OuterReductionsRunEagersKernelAndMeanDivides) {
  EXPECT_THROW(LowerReduce(nullptr, "sum", kF32, {16}, In(kF32, {16, 16}), std::vector<int64_t>{0}, false), Fallback)
      << "Note [Outer reductions]";
  EXPECT_NO_THROW(LowerReduce(nullptr, "sum", kF32, {16}, In(kF32, {4, 16}), std::vector<int64_t>{0}, false))
      << "a short column stays a loop";
  EXPECT_NO_THROW(LowerReduce(nullptr, "prod", kF32, {16}, In(kF32, {16, 16}), std::vector<int64_t>{0}, false))
      << "prod has no row kernel in eager";
  auto mean = AsReduction(LowerReduce(nullptr, "mean", kF32, {4, 1}, In(kF32, {4, 8}), std::vector<int64_t>{1}, true));
  ASSERT_NE(mean, nullptr);
  ASSERT_NE(mean->finish(), nullptr);
  EXPECT_EQ(codegen::SerializeExpr(*mean->finish()),
            codegen::SerializeExpr(*Expr::Op(OpCode::kDiv, {Expr::Load(0, {}), Expr::Const(8.0, DType::F32)})));
  // over every axis of a contiguous [4, 8]: one axis of 32, divided by 32
  auto whole = AsPointwise(LowerReduce(nullptr, "mean", kF32, {}, In(kF32, {4, 8}), std::nullopt, false));
  ASSERT_NE(whole, nullptr);
  auto flat = AsReduction(whole->squeeze_of);
  ASSERT_NE(flat, nullptr);
  EXPECT_EQ(flat->extent(), 32);
  EXPECT_EQ(codegen::SerializeExpr(*flat->finish()),
            codegen::SerializeExpr(*Expr::Op(OpCode::kDiv, {Expr::Load(0, {}), Expr::Const(32.0, DType::F32)})));
  EXPECT_THROW(LowerReduce(nullptr, "median", kF32, {}, In(kF32, {4}), std::nullopt, false), ValueError);
}

TEST(Reductions, AVarianceAndItsMeanAreOneGroupAndMeanReusesIt) {
  scheduler::Scheduler s;
  GraphContext graph(&s);
  auto x = In(kF32, {4, 8});
  auto var = LowerVar(&graph, kF32, {4}, x, std::vector<int64_t>{1}, std::nullopt, false);
  auto keep = AsPointwise(var->squeeze_of);
  ASSERT_NE(keep, nullptr);
  EXPECT_EQ(keep->Group().size(), 2u) << "the variance and its mean, stored by one kernel";
  ASSERT_TRUE(keep->space.has_value());
  EXPECT_EQ(keep->space->ToString(), "LoopSpace(kept=[4], extent=8, axis=1)");
  auto mean = AsPointwise(LowerReduce(&graph, "mean", kF32, {4}, x, std::vector<int64_t>{-1}, false));
  ASSERT_NE(mean, nullptr);
  auto shared = mean->squeeze_of;
  EXPECT_TRUE(shared == keep->Group()[0] || shared == keep->Group()[1]) << "the mean the variance computed";
  EXPECT_EQ(shared->ops, (std::set<std::string>{"mean"}));
  auto other = AsPointwise(LowerReduce(&graph, "mean", ScalarType::Float64, {4}, In(ScalarType::Float64, {4, 8}),
                                       std::vector<int64_t>{1}, false));
  EXPECT_EQ(AsReduction(other->squeeze_of)->reduce(), "sum") << "another input: its own sum";

  // axes that do not merge: the per-row statistics realized by one kernel, then combined
  EXPECT_EQ(s.TakeSteps().size(), 0u);
  auto spread = In(kF32, {3, 5, 7});
  LowerVar(&graph, kF32, {5}, spread, std::vector<int64_t>{0, 2}, 0.0, false);
  int kernels = 0;
  for (const auto& step : s.TakeSteps()) kernels += step.kind == scheduler::Step::Kind::kKernel;
  EXPECT_EQ(kernels, 1);
  EXPECT_THROW(LowerVar(nullptr, kF32, {5}, spread, std::vector<int64_t>{0, 2}, 0.0, false), Fallback)
      << "outside a graph nothing can be realized";
}

TEST(Reductions, ArgmaxOverEveryElementReadsAContiguousBufferFlat) {
  auto x = In(kF32, {3, 4});
  auto flat = AsPointwise(LowerArgReduce(true, ScalarType::Int64, {}, x, std::nullopt, false));
  ASSERT_NE(flat, nullptr);
  auto red = AsReduction(flat->traced()->inputs.at(0));
  ASSERT_NE(red, nullptr);
  EXPECT_EQ(red->reduce(), "argmax");
  EXPECT_EQ(red->Space().ToString(), "LoopSpace(kept=[], extent=12, axis=0)");
  auto view = std::dynamic_pointer_cast<Buffer>(red->traced()->inputs.at(0));
  ASSERT_NE(view, nullptr);
  EXPECT_EQ(view->base(), x);
  EXPECT_THROW(LowerArgReduce(true, ScalarType::Int64, {}, In(kF32, {3, 4}, {1, 3}), std::nullopt, false),
               ViewOfUnrealized);
  auto along = AsReduction(LowerArgReduce(false, ScalarType::Int64, {3, 1}, x, -1, true));
  ASSERT_NE(along, nullptr);
  EXPECT_EQ(along->reduce(), "argmin");
}

TEST(Reductions, SoftmaxIsAMaxAnExpSumAndOneElementwiseResult) {
  auto x = In(kF32, {4, 8});
  auto soft = AsPointwise(LowerSoftmax(nullptr, false, kF32, {4, 8}, x, -1));
  ASSERT_NE(soft, nullptr);
  EXPECT_EQ(soft->ops, (std::set<std::string>{"amax", "exp", "sum", "softmax"}));
  auto exp_sum = AsReduction(soft->traced()->inputs.at(0));
  ASSERT_NE(exp_sum, nullptr);
  EXPECT_EQ(exp_sum->Space().ToString(), "LoopSpace(kept=[4], extent=8, axis=1)");
  EXPECT_EQ(soft->body().expr->op, OpCode::kMul) << "times the reciprocal of the sum";
  auto b = In(ScalarType::BFloat16, {4, 8});
  auto log_soft = AsPointwise(LowerSoftmax(nullptr, true, ScalarType::BFloat16, {4, 8}, b, 1));
  EXPECT_EQ(log_soft->body().expr->kind, Expr::Kind::kCast) << "a bfloat16 result rounded";
  auto scalar = AsPointwise(LowerSoftmax(nullptr, true, kF32, {}, In(kF32, {}), 0));
  EXPECT_EQ(scalar->body().expr->op, OpCode::kSub) << "x - x: 0, NaN for a NaN or an infinity";
}

TEST(Reductions, AnyAllCountAndNormsDropTheirAxes) {
  auto x = In(kF32, {4, 8});
  auto any = AsPointwise(LowerAnyAll(nullptr, true, ScalarType::Bool, {4}, x, std::vector<int64_t>{1}, false));
  ASSERT_NE(any, nullptr);
  EXPECT_EQ(any->body().expr->op, OpCode::kGt) << "a count above 0";
  auto all = AsPointwise(LowerAnyAll(nullptr, false, ScalarType::Bool, {}, x, std::nullopt, false));
  EXPECT_EQ(all->body().expr->op, OpCode::kEq) << "no zero counted";
  auto count = AsPointwise(LowerCountNonzero(nullptr, ScalarType::Int64, {8}, x, std::vector<int64_t>{0}));
  EXPECT_EQ(count->ops, (std::set<std::string>{"count_nonzero"}));
  auto l2 = AsPointwise(LowerVectorNorm(nullptr, kF32, {4}, x, 2.0, std::vector<int64_t>{1}, false));
  EXPECT_EQ(l2->body().expr->op, OpCode::kSqrt);
  auto linf = AsPointwise(LowerVectorNorm(nullptr, kF32, {4}, x, -INFINITY, std::vector<int64_t>{1}, false));
  EXPECT_EQ(AsReduction(linf->traced()->inputs.at(0))->reduce(), "min");
  auto lse = AsPointwise(LowerLogsumexp(nullptr, kF32, {4}, x, std::vector<int64_t>{1}, false));
  EXPECT_TRUE(lse->ops.count("logsumexp"));
}

}  // namespace
}  // namespace kiln::inductor::lowering
