// inductor/lowering/nn_test.cc: the matmul template (a reduction over k with its bias epilogue) and
// max pooling with indices (unrolled windows, one group; the tiled backward realized), as text.
#include <gtest/gtest.h>

#include "inductor/lowering/nn.h"

namespace kiln::inductor::lowering {
namespace {

using codegen::OpCode;
using ir::Buffer;

std::shared_ptr<Buffer> In(ScalarType dtype, std::vector<int64_t> shape) {
  return std::make_shared<Buffer>("x", dtype, shape, ir::ContiguousStrides(shape), 0, Buffer::Source::kInput);
}

constexpr ScalarType kF32 = ScalarType::Float32;

TEST(Nn, TheMatmulTemplateIsAReductionOverKWithItsBiasAsEpilogue) {
  auto a = In(kF32, {4, 3}), b = In(kF32, {3, 5}), bias = In(kF32, {5});
  auto mm = MatmulTemplate(kF32, a, b, bias, 1.0, 2.0);
  ASSERT_TRUE(mm->space.has_value());
  EXPECT_EQ(mm->space->ToString(), "LoopSpace(kept=[4, 5], extent=3, axis=2)");
  EXPECT_EQ(mm->ops, (std::set<std::string>{"addmm", "mm"}));
  const std::string text = mm->body().ToString();
  EXPECT_NE(text.find("read1 = v" + std::to_string(bias->handle()) + "[d1]"), std::string::npos) << text;
  EXPECT_EQ(mm->body().expr->op, OpCode::kAdd) << "alpha * (a @ b) + bias";
  EXPECT_THROW(MatmulTemplate(ScalarType::Int64, In(ScalarType::Int64, {2, 2}), In(ScalarType::Int64, {2, 2}), nullptr,
                              1.0, 1.0),
               Fallback);
}

TEST(Nn, MaxPoolUnrollsItsWindowIntoValuesAndIndicesOfOneGroup) {
  auto x = In(kF32, {1, 2, 4, 4});
  auto [values, indices] = MaxPool2dWithIndices(nullptr, kF32, {1, 2, 2, 2}, ScalarType::Int64, {1, 2, 2, 2}, x,
                                                {2, 2}, {2, 2}, {0, 0}, {1, 1}, false);
  EXPECT_EQ(values->Group().size(), 2u);
  EXPECT_EQ(values->body().reads.size(), 4u) << "a 2x2 window";
  EXPECT_EQ(indices->body().expr->op, OpCode::kWhere);
  EXPECT_THROW(MaxPool2dWithIndices(nullptr, kF32, {1, 2, 2, 2}, ScalarType::Int64, {1, 2, 2, 2}, x, {2, 2}, {2, 2},
                                    {1, 1}, {1, 1}, false),
               Fallback)
      << "padding";
  EXPECT_THROW(MaxPool2dWithIndices(nullptr, kF32, {1, 2, 2, 2}, ScalarType::Int64, {1, 2, 2, 2}, In(kF32, {1, 2, 3, 3}),
                                    {2, 2}, {2, 2}, {0, 0}, {1, 1}, true),
               Fallback)
      << "ceil_mode's last window past the input";
}

TEST(Nn, MaxPoolBackwardOfTilingWindowsIsRealizedTiled) {
  scheduler::Scheduler s;
  GraphContext graph(&s);
  auto x = In(kF32, {1, 2, 4, 4}), grad = In(kF32, {1, 2, 2, 2}), idx = In(ScalarType::Int64, {1, 2, 2, 2});
  auto out = MaxPool2dWithIndicesBackward(&graph, kF32, {1, 2, 4, 4}, grad, x, {2, 2}, {2, 2}, {0, 0}, {1, 1}, idx);
  EXPECT_EQ(out->stride(), (std::vector<int64_t>{32, 16, 4, 1}));
  ASSERT_NE(out->base(), nullptr);
  EXPECT_EQ(out->base()->shape(), (std::vector<int64_t>{1, 2, 2, 2, 2, 2})) << "[N, C, OH, kh, OW, kw]";
  EXPECT_THROW(MaxPool2dWithIndicesBackward(&graph, kF32, {1, 2, 4, 4}, grad, x, {2, 2}, {1, 1}, {0, 0}, {1, 1}, idx),
               Fallback)
      << "overlapping windows";
}

}  // namespace
}  // namespace kiln::inductor::lowering
