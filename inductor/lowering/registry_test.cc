// inductor/lowering/registry_test.cc: the lowering table (Note [The lowering table]) -- which ops
// have an entry, arguments read by name with the schema's defaults, several results, and the
// cases that fall back to the eager kernel.
#include <gtest/gtest.h>

#include "inductor/lowering/registry.h"
#include "inductor/scheduler/scheduler.h"

namespace kiln::inductor::lowering {
namespace {

using ir::Buffer;

const Op& OpNamed(const std::string& name) { return Registry::Get().FindOrThrow(name); }

LoweringArg Input(ScalarType dtype, std::vector<int64_t> shape) {
  std::vector<int64_t> stride = ir::ContiguousStrides(shape);
  return LoweringArg::Of(std::make_shared<Buffer>("x", dtype, shape, stride, 0, Buffer::Source::kInput));
}

// The op's arguments: `given` first, then the schema's defaults (None for an optional one without).
std::vector<LoweringArg> WithDefaults(const Op& op, std::vector<LoweringArg> given) {
  const std::vector<Argument>& schema = op.schema().arguments;
  for (size_t i = given.size(); i < schema.size(); ++i)
    given.push_back(schema[i].default_value ? LoweringArg::Constant(*schema[i].default_value) : LoweringArg::None());
  return given;
}

std::vector<ValuePtr> LowerOp(const std::string& name, std::vector<LoweringOutput> outs, std::vector<LoweringArg> given,
                              GraphContext* graph = nullptr) {
  const Op& op = OpNamed(name);
  return Lower(LoweringCall(op, std::move(outs), WithDefaults(op, std::move(given)), graph));
}

TEST(LoweringTable, ElementFunctionsAndOwnLoweringsHaveEntries) {
  for (const char* name : {"aten::exp", "aten::add.Tensor", "aten::elu", "aten::gelu", "aten::pow.Tensor_Scalar",
                           "aten::view", "aten::sum", "aten::sum.dim_IntList", "aten::max.dim",
                           "aten::max_pool2d_with_indices"})
    EXPECT_NE(FindLowering(OpNamed(name)), nullptr) << name;
  for (const char* name : {"aten::mm", "aten::convolution", "aten::index.Tensor", "aten::digamma"})
    EXPECT_EQ(FindLowering(OpNamed(name)), nullptr) << name;
  const std::vector<const Op*> ops = LoweredOps();
  EXPECT_TRUE(std::is_sorted(ops.begin(), ops.end(), [](const Op* a, const Op* b) { return a->name() < b->name(); }));
  EXPECT_THROW(LowerOp("aten::mm", {{ScalarType::Float32, {2, 2}}},
                       {Input(ScalarType::Float32, {2, 2}), Input(ScalarType::Float32, {2, 2})}),
               Fallback);
}

TEST(LoweringTable, ArgumentsAreReadByNameWithTheirDefaults) {
  const Op& gelu = OpNamed("aten::gelu");
  LoweringCall call(gelu, {{ScalarType::Float32, {4}}}, WithDefaults(gelu, {Input(ScalarType::Float32, {4})}), nullptr);
  EXPECT_EQ(call.Str("approximate"), "none");
  EXPECT_FALSE(call.Has("dim"));
  EXPECT_TRUE(call.IsNone("dim"));  // absent from the schema
  EXPECT_FALSE(call.Flag("keepdim"));
  EXPECT_THROW(call.Number("self"), Fallback);  // a tensor where a number is expected
  EXPECT_THROW(call.Int("approximate"), Fallback);

  // slice.Tensor's `SymInt step=1`: a SymInt default is a number (`v[1:]` leaves its step out,
  // and every such slice ran eagerly)
  const Op& slice = OpNamed("aten::slice.Tensor");
  LoweringCall sliced(slice, {{ScalarType::Float32, {3}}},
                      WithDefaults(slice, {Input(ScalarType::Float32, {4}), LoweringArg::Number(Scalar(int64_t{0})),
                                           LoweringArg::Number(Scalar(int64_t{1}))}),
                      nullptr);
  EXPECT_EQ(sliced.Int("step"), 1);
  EXPECT_EQ(LoweringArg::Constant(IValue(SymInt(5))).kind, LoweringArg::Kind::kNumber);

  const Op& amax = OpNamed("aten::amax");  // int[1] dim=[]: an empty list, every dimension
  LoweringCall reduce(amax, {{ScalarType::Float32, {}}}, WithDefaults(amax, {Input(ScalarType::Float32, {2, 3})}),
                      nullptr);
  EXPECT_EQ(reduce.OptionalInts("dim"), std::vector<int64_t>{});
  EXPECT_FALSE(reduce.Bool("keepdim"));
  // an int where a list is declared is a list of one
  LoweringCall one(amax, {{ScalarType::Float32, {2}}},
                   WithDefaults(amax, {Input(ScalarType::Float32, {2, 3}), LoweringArg::Number(Scalar(int64_t{1}))}),
                   nullptr);
  EXPECT_EQ(one.Ints("dim"), std::vector<int64_t>{1});
  EXPECT_THROW(LoweringCall(amax, {{ScalarType::Float32, {}}}, {Input(ScalarType::Float32, {2})}, nullptr), Error)
      << "one argument per schema argument";
}

TEST(LoweringTable, NodesLowerToValuesOfTheirMeta) {
  auto sum = LowerOp("aten::sum", {{ScalarType::Float32, {}}}, {Input(ScalarType::Float32, {2, 3})});
  ASSERT_EQ(sum.size(), 1u);
  EXPECT_EQ(sum[0]->shape(), std::vector<int64_t>{});
  auto view = LowerOp("aten::view", {{ScalarType::Float32, {6}}},
                      {Input(ScalarType::Float32, {2, 3}), LoweringArg::Ints({6})});
  ASSERT_EQ(view.size(), 1u);
  EXPECT_EQ(view[0]->kind(), ir::Value::Kind::kBuffer) << "a view of a buffer is a strided buffer";
  auto t = LowerOp("aten::t", {{ScalarType::Float32, {3, 2}}}, {Input(ScalarType::Float32, {2, 3})});
  EXPECT_EQ(t[0]->shape(), (std::vector<int64_t>{3, 2}));
  // max.dim: the values and the indices
  auto max = LowerOp("aten::max.dim", {{ScalarType::Float32, {2}}, {ScalarType::Int64, {2}}},
                     {Input(ScalarType::Float32, {2, 3}), LoweringArg::Number(Scalar(int64_t{1}))});
  ASSERT_EQ(max.size(), 2u);
  EXPECT_EQ(max[0]->dtype(), ScalarType::Float32);
  EXPECT_EQ(max[1]->dtype(), ScalarType::Int64);
  // max_pool2d_with_indices: kernel_size 2 alone is 2x2, an empty stride the kernel's
  auto pool = LowerOp("aten::max_pool2d_with_indices",
                      {{ScalarType::Float32, {1, 1, 2, 2}}, {ScalarType::Int64, {1, 1, 2, 2}}},
                      {Input(ScalarType::Float32, {1, 1, 4, 4}), LoweringArg::Ints({2})});
  ASSERT_EQ(pool.size(), 2u);
  EXPECT_EQ(pool[1]->shape(), (std::vector<int64_t>{1, 1, 2, 2}));
}

TEST(LoweringTable, WhatALoweringCannotReadFallsBack) {
  // a symbolic size or any other constant where a number is read
  EXPECT_THROW(LowerOp("aten::add.Tensor", {{ScalarType::Float32, {3}}},
                       {Input(ScalarType::Float32, {3}), LoweringArg::Other("a SymInt")}),
               Fallback);
  EXPECT_THROW(LowerOp("aten::transpose.int", {{ScalarType::Float32, {3, 2}}},
                       {Input(ScalarType::Float32, {2, 3}), LoweringArg::Other("a SymInt"),
                        LoweringArg::Number(Scalar(int64_t{1}))}),
               Fallback);
  // complex values, read or made
  EXPECT_THROW(LowerOp("aten::exp", {{ScalarType::ComplexFloat, {3}}}, {Input(ScalarType::ComplexFloat, {3})}),
               Fallback);
  EXPECT_THROW(LowerOp("aten::mul.Tensor", {{ScalarType::ComplexFloat, {3}}},
                       {Input(ScalarType::Float32, {3}), LoweringArg::Number(Scalar(std::complex<double>(0, 1)))}),
               Fallback);
  // a view of a lazy value it cannot index: the graph realizes it and lowers the node again
  auto lazy = LowerOp("aten::exp", {{ScalarType::Float32, {2, 3}}}, {Input(ScalarType::Float32, {2, 3})});
  EXPECT_THROW(LowerOp("aten::view", {{ScalarType::Float32, {3, 2}}}, {LoweringArg::Of(lazy[0]), LoweringArg::Ints({3, 2})}),
               ViewOfUnrealized);
}

}  // namespace
}  // namespace kiln::inductor::lowering
