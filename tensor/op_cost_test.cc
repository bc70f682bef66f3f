// tensor/op_cost_test.cc: what the registry tells the compiler about each op: its cost class
// (Note [Op cost classes] in dispatcher.h) and its element function as kernel IR (Note [Pointwise
// ops as kernel IR] in ops/pointwise_ir.h).
#include "gtest/gtest.h"
#include "tensor/dispatcher.h"
#include "tensor/ops/pointwise_ir.h"

namespace kiln {
namespace {

CostClass CostOf(const char* name) { return Registry::Get().FindOrThrow(name).cost_class(); }

TEST(OpCost, MatmulsConvolutionsAndAttentionAreComputeIntensive) {
  for (const char* name : {"aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm", "aten::matmul", "aten::linear",
                           "aten::convolution", "aten::convolution_backward",
                           "aten::_scaled_dot_product_flash_attention_for_cpu"}) {
    EXPECT_EQ(CostOf(name), CostClass::kComputeIntensive) << name;
    EXPECT_TRUE(Registry::Get().FindOrThrow(name).has_tag(Tag::compute_intensive)) << name;
  }
}

TEST(OpCost, PointwiseReductionsCopiesAndFactoriesAreMemoryBound) {
  for (const char* name : {"aten::add.Tensor", "aten::exp", "aten::sum.dim_IntList", "aten::amax", "aten::clone",
                           "aten::_to_copy", "aten::full", "aten::cat", "aten::index.Tensor", "aten::gather",
                           "aten::_softmax", "aten::native_layer_norm", "aten::tril", "aten::slice_scatter"})
    EXPECT_EQ(CostOf(name), CostClass::kMemoryBound) << name;
}

TEST(OpCost, ViewsAreFree) {
  for (const char* name : {"aten::view", "aten::transpose.int", "aten::permute", "aten::expand", "aten::t",
                           "aten::split.Tensor", "aten::unbind.int"})
    EXPECT_EQ(CostOf(name), CostClass::kFree) << name;
}

TEST(OpCost, SortsRandomDrawsAndDataDependentShapesAreOpaque) {
  // where(cond) is nonzero: its size is the data's
  for (const char* name : {"aten::sort", "aten::nonzero", "aten::where", "aten::randn", "aten::native_dropout",
                           "aten::linalg_qr"})
    EXPECT_EQ(CostOf(name), CostClass::kOpaque) << name;
}

TEST(OpCost, TheCostClassAgreesWithTheTagsOfEveryOp) {
  for (const Op* op : Registry::Get().ops()) {
    EXPECT_EQ(op->has_tag(Tag::compute_intensive), op->cost_class() == CostClass::kComputeIntensive) << op->name();
    if (op->has_tag(Tag::nondeterministic_seeded)) {
      EXPECT_EQ(op->cost_class(), CostClass::kOpaque) << op->name();
    }
  }
}

// Note [Outer reduction kernels]: what Inductor leaves to eager's kernels, declared where they are
TEST(OpCost, OuterReductionKernelsAreDeclaredByTheirDtypes) {
  const Registry& r = Registry::Get();
  for (const char* name : {"aten::sum.dim_IntList", "aten::mean.dim"})
    for (ScalarType t : {ScalarType::Float32, ScalarType::Float64, ScalarType::BFloat16, ScalarType::Int64})
      EXPECT_TRUE(r.FindOrThrow(name).has_outer_reduction_kernel(t)) << name << " " << ScalarTypeName(t);
  for (const char* name : {"aten::amax", "aten::amin"}) {
    EXPECT_TRUE(r.FindOrThrow(name).has_outer_reduction_kernel(ScalarType::Float32)) << name;
    EXPECT_TRUE(r.FindOrThrow(name).has_outer_reduction_kernel(ScalarType::Float64)) << name;
    EXPECT_FALSE(r.FindOrThrow(name).has_outer_reduction_kernel(ScalarType::Int64)) << name;
    EXPECT_FALSE(r.FindOrThrow(name).has_outer_reduction_kernel(ScalarType::BFloat16)) << name;
  }
  for (const char* name : {"aten::prod.dim_int", "aten::max.dim", "aten::add.Tensor", "aten::sum"})
    EXPECT_FALSE(r.FindOrThrow(name).has_outer_reduction_kernel(ScalarType::Float32)) << name;
  EXPECT_FALSE(r.FindOrThrow("aten::sum.dim_IntList").has_outer_reduction_kernel(ScalarType::Undefined));
}

codegen::ExprPtr Build(const char* name, ScalarType in, DeviceType device, ScalarType* compute = nullptr) {
  const PointwiseIr* ir = FindPointwiseIr(Registry::Get().FindOrThrow(name));
  EXPECT_NE(ir, nullptr) << name;
  ScalarType c = ir->compute({in});
  if (compute) *compute = c;
  return ir->build({codegen::Expr::Load(0, codegen::Index{})}, c, device);
}

TEST(PointwiseIr, UnaryRowsGiveTheirElementFunction) {
  codegen::ExprPtr exp = Build("aten::exp", ScalarType::Float32, DeviceType::CPU);
  ASSERT_EQ(exp->kind, codegen::Expr::Kind::kOp);
  EXPECT_EQ(exp->op, codegen::OpCode::kExp);
  EXPECT_EQ(exp->args.at(0)->kind, codegen::Expr::Kind::kLoad);
  ScalarType compute;
  Build("aten::sin", ScalarType::Int64, DeviceType::CPU, &compute);
  EXPECT_EQ(compute, ScalarType::Float32);  // integers compute in the default float dtype
  Build("aten::isnan", ScalarType::Float64, DeviceType::CPU, &compute);
  EXPECT_EQ(compute, ScalarType::Float64);
  // no IR operator for these: they stay eager's kernels
  EXPECT_EQ(FindPointwiseIr(Registry::Get().FindOrThrow("aten::digamma")), nullptr);
  EXPECT_EQ(FindPointwiseIr(Registry::Get().FindOrThrow("aten::erfinv")), nullptr);
  // only functional overloads: the in-place and out= ones reach compiled graphs functionalized
  EXPECT_EQ(FindPointwiseIr(Registry::Get().FindOrThrow("aten::exp_")), nullptr);
}

TEST(PointwiseIr, EachOperatorsCoreOpIsReadOffTheRows) {
  auto core = [](codegen::OpCode op) -> std::string {
    const Op* found = CoreOpOf(op);
    return found ? found->name() : "none";
  };
  EXPECT_EQ(core(codegen::OpCode::kExp), "aten::exp");
  EXPECT_EQ(core(codegen::OpCode::kAdd), "aten::add.Tensor");  // the tensor overload, not add.Scalar
  EXPECT_EQ(core(codegen::OpCode::kMax), "aten::maximum");
  EXPECT_EQ(core(codegen::OpCode::kMod), "aten::remainder.Tensor");
  EXPECT_EQ(core(codegen::OpCode::kPow), "aten::pow.Tensor_Tensor");
  EXPECT_EQ(core(codegen::OpCode::kWhere), "aten::where.self");
  EXPECT_EQ(core(codegen::OpCode::kGelu), "none");        // gelu's row computes more than the operator
  EXPECT_EQ(core(codegen::OpCode::kNormalCdf), "none");
  // every operator found is computed by a core op of its arity whose element function is it
  for (int i = 0; i <= static_cast<int>(codegen::OpCode::kWhere); ++i) {
    const Op* op = CoreOpOf(static_cast<codegen::OpCode>(i));
    if (op == nullptr) continue;
    EXPECT_TRUE(op->has_tag(Tag::core)) << op->name();
    EXPECT_GE(static_cast<int>(op->schema().arguments.size()), codegen::OpArity(static_cast<codegen::OpCode>(i)))
        << op->name();
  }
}

TEST(PointwiseIr, BinaryRowsGiveTheirElementFunctionAndWhatInductorMustKnow) {
  const PointwiseIr* add = FindPointwiseIr(Registry::Get().FindOrThrow("aten::add.Tensor"));
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->arity, 2);
  EXPECT_TRUE(add->has_alpha);
  codegen::ExprPtr x = codegen::Expr::Load(0, codegen::Index{}), y = codegen::Expr::Load(1, codegen::Index{});
  codegen::ExprPtr alpha = codegen::Expr::Load(2, codegen::Index{});
  codegen::ExprPtr sum = add->build({x, y, alpha}, ScalarType::Float32, DeviceType::CPU);  // x + alpha * y
  ASSERT_EQ(sum->op, codegen::OpCode::kAdd);
  EXPECT_EQ(sum->args.at(1)->op, codegen::OpCode::kMul);
  // true division of integers computes in the default float dtype; comparisons in the operands'
  EXPECT_EQ(FindPointwiseIr(Registry::Get().FindOrThrow("aten::div.Tensor"))
                ->compute({ScalarType::Int64, ScalarType::Int64}),
            ScalarType::Float32);
  EXPECT_EQ(FindPointwiseIr(Registry::Get().FindOrThrow("aten::lt.Tensor"))
                ->compute({ScalarType::Int32, ScalarType::Int64}),
            ScalarType::Int64);
  // eager raises ZeroDivisionError for these on integers: Inductor must not fuse a divisor that may be 0
  for (const char* name : {"aten::floor_divide", "aten::remainder.Tensor", "aten::fmod.Scalar"})
    EXPECT_TRUE(FindPointwiseIr(Registry::Get().FindOrThrow(name))->integer_division) << name;
  EXPECT_FALSE(FindPointwiseIr(Registry::Get().FindOrThrow("aten::div.Tensor"))->integer_division);
  EXPECT_TRUE(FindPointwiseIr(Registry::Get().FindOrThrow("aten::mul.Scalar"))->reads_scalar_in_opmath);
  EXPECT_FALSE(FindPointwiseIr(Registry::Get().FindOrThrow("aten::add.Scalar"))->reads_scalar_in_opmath);
}

TEST(PointwiseIr, ReluKeepsNegativeZeroOnTheCpuAsEagerDoes) {
  // PyTorch's CPU relu keeps -0.0 (x < 0 ? 0 : x); its CUDA relu is max(x, 0), +0.0
  EXPECT_EQ(Build("aten::relu", ScalarType::Float32, DeviceType::CPU)->op, codegen::OpCode::kRelu);
  EXPECT_EQ(Build("aten::relu", ScalarType::Float32, DeviceType::CUDA)->op, codegen::OpCode::kWhere);
}

}  // namespace
}  // namespace kiln
