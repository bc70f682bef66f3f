// inductor/lowering/lowering_test.cc: pointwise values from the registry's element functions --
// broadcast reads, promotion, constants, bfloat16 rounding, integer division by zero, epilogues
// (Note [Pointwise values]), compared as text.
#include <gtest/gtest.h>

#include <cmath>

#include "inductor/lowering/pointwise.h"

namespace kiln::inductor::lowering {
namespace {

using codegen::DType;
using codegen::Expr;
using codegen::ExprPtr;
using codegen::OpCode;
using ir::Buffer;

const Op& OpNamed(const std::string& name) { return Registry::Get().FindOrThrow(name); }

Operand Input(ScalarType dtype, std::vector<int64_t> shape) {
  std::vector<int64_t> stride = ir::ContiguousStrides(shape);
  return Operand{std::make_shared<Buffer>("x", dtype, shape, stride, 0, Buffer::Source::kInput), Scalar()};
}

Operand Number(Scalar s) { return Operand{nullptr, s}; }

// The body with each read's value named by its position among `operands` (handles differ per run).
std::string Text(const Pointwise& p, const std::vector<Operand>& operands) {
  std::string s = p.body().ToString();
  for (size_t i = 0; i < operands.size(); ++i) {
    if (!operands[i].is_value()) continue;
    const std::string from = "v" + std::to_string(operands[i].value->handle()) + "[";
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from))
      s.replace(at, from.size(), "operand" + std::to_string(i) + "[");
  }
  return s;
}

std::string E(const ExprPtr& e) { return codegen::SerializeExpr(*e); }

TEST(Pointwise, OperandsAreReadAtTheirBroadcastIndex) {
  std::vector<Operand> in{Input(ScalarType::Float32, {4, 8}), Input(ScalarType::Float32, {1, 8})};
  auto p = LowerElementwise(OpNamed("aten::add.Tensor"), ScalarType::Float32, {4, 8}, in, std::nullopt);
  const ExprPtr want = Expr::Op(OpCode::kAdd, {Expr::Load(0, {}), Expr::Load(1, {})});
  EXPECT_EQ(Text(*p, in), "read0 = operand0[d0, d1]\nread1 = operand1[0, d1]\n" + E(want));
  EXPECT_EQ(p->ops, (std::set<std::string>{"add"}));
  EXPECT_EQ(p->traced()->inputs.size(), 2u);
}

TEST(Pointwise, NumbersAreWeakAndAlphaIsAnOperand) {
  // int64 tensor + 2.5: float32 (the default dtype), the tensor read as float
  std::vector<Operand> in{Input(ScalarType::Int64, {3}), Number(2.5)};
  auto p = LowerElementwise(OpNamed("aten::add.Tensor"), ScalarType::Float32, {3}, in, std::nullopt);
  ExprPtr x = Expr::Cast(Expr::Load(0, {}), DType::F32);
  EXPECT_EQ(E(p->body().expr), E(Expr::Op(OpCode::kAdd, {x, Expr::Const(2.5, DType::F32)})));
  EXPECT_EQ(Promoted(Input(ScalarType::BFloat16, {4}), Input(ScalarType::Float32, {})), DType::BF16)
      << "a 0-d value ranks below one with dims";
  EXPECT_EQ(Promoted(Input(ScalarType::Int32, {4}), Number(int64_t{7})), DType::I32);
  // a - 3 * b: alpha a constant of the element function's last operand
  std::vector<Operand> two{Input(ScalarType::Float32, {2}), Input(ScalarType::Float32, {2})};
  auto sub = LowerElementwise(OpNamed("aten::sub.Tensor"), ScalarType::Float32, {2}, two, Scalar(3.0));
  EXPECT_NE(E(sub->body().expr).find("Cf32:0x1.8p+1"), std::string::npos) << E(sub->body().expr);
}

TEST(Pointwise, Bfloat16IsRoundedAtEveryOpAndAScalarReadInFloat) {
  std::vector<Operand> in{Input(ScalarType::BFloat16, {4}), Number(0.1)};
  auto p = LowerElementwise(OpNamed("aten::mul.Tensor"), ScalarType::BFloat16, {4}, in, std::nullopt);
  // x read as bfloat16 (the kernel computes bfloat16 ops in float32), 0.1 in float, unrounded, and
  // the product rounded to bfloat16
  EXPECT_EQ(E(p->body().expr),
            E(Expr::Cast(Expr::Op(OpCode::kMul, {Expr::Load(0, {}), Expr::Const(0.1, DType::F32)}), DType::BF16)));
}

TEST(Pointwise, IntegerDivisionByAPossibleZeroRunsEagersKernel) {
  const Op& floor_divide = OpNamed("aten::floor_divide");
  EXPECT_THROW(LowerElementwise(floor_divide, ScalarType::Int64, {3}, {Input(ScalarType::Int64, {3}), Input(ScalarType::Int64, {3})},
                                std::nullopt),
               Fallback);
  EXPECT_THROW(LowerElementwise(floor_divide, ScalarType::Int64, {3}, {Input(ScalarType::Int64, {3}), Number(int64_t{0})},
                                std::nullopt),
               Fallback);
  EXPECT_NO_THROW(LowerElementwise(floor_divide, ScalarType::Int64, {3},
                                   {Input(ScalarType::Int64, {3}), Number(int64_t{3})}, std::nullopt));
  EXPECT_NO_THROW(LowerElementwise(floor_divide, ScalarType::Float32, {3},
                                   {Input(ScalarType::Float32, {3}), Input(ScalarType::Float32, {3})}, std::nullopt))
      << "float division by zero is inf or NaN";
}

TEST(Pointwise, ABoolResultIsABoolWhereStoredAndAnEpilogueJoinsItsLoop) {
  std::vector<Operand> in{Input(ScalarType::Bool, {3}), Input(ScalarType::Bool, {3})};
  auto p = LowerElementwise(OpNamed("aten::add.Tensor"), ScalarType::Bool, {3}, in, std::nullopt);
  EXPECT_EQ(p->body().expr->kind, Expr::Kind::kCast);
  EXPECT_EQ(p->body().expr->dtype, DType::Bool);

  auto x = Input(ScalarType::Float32, {4, 8});
  auto loop_value = std::static_pointer_cast<ir::Pointwise>(
      LowerElementwise(OpNamed("aten::neg"), ScalarType::Float32, {4, 8}, {x}, std::nullopt));
  loop_value->space = ir::LoopSpace{{4, 8}, 16, 1};
  auto epilogue = LowerElementwise(OpNamed("aten::relu"), ScalarType::Float32, {4, 8}, {Operand{loop_value, Scalar()}},
                                   std::nullopt);
  ASSERT_TRUE(epilogue->space.has_value());
  EXPECT_EQ(epilogue->space->ToString(), "LoopSpace(kept=[4, 8], extent=16, axis=1)");
  EXPECT_EQ(epilogue->ops, (std::set<std::string>{"neg", "relu"}));
  EXPECT_THROW(LowerElementwise(OpNamed("aten::neg"), ScalarType::Float16, {3}, {Input(ScalarType::Float16, {3})},
                                std::nullopt),
               NotImplementedError)
      << "a dtype kernels cannot hold";
}

}  // namespace
}  // namespace kiln::inductor::lowering

#include "inductor/lowering/views.h"

namespace kiln::inductor::lowering {
namespace {

std::shared_ptr<ir::Buffer> Strided(std::vector<int64_t> shape, std::vector<int64_t> stride, int64_t offset = 0) {
  return std::make_shared<ir::Buffer>("x", ScalarType::Float32, shape, stride, offset, ir::Buffer::Source::kInput);
}

std::string Layout(const std::shared_ptr<ir::Value>& v) {
  auto b = std::dynamic_pointer_cast<ir::Buffer>(v);
  if (!b) return "lazy";
  std::string s = "[";
  for (int64_t st : b->stride()) s += std::to_string(st) + ",";
  return s + "]+" + std::to_string(b->offset());
}

TEST(Views, OfABufferAreStridedBuffersOverItsMemory) {
  auto x = Strided({4, 6}, {6, 1}, 2);
  const ScalarType f = ScalarType::Float32;
  EXPECT_EQ(Layout(Permute(x, f, {6, 4}, {1, 0})), "[1,6,]+2");
  EXPECT_EQ(Layout(Transpose(x, f, {6, 4}, -1, 0)), "[1,6,]+2");
  EXPECT_EQ(Layout(Slice(x, f, {4, 2}, 1, -4, 2)), "[6,2,]+4") << "x[:, -4::2]: from column 2, every other";
  EXPECT_EQ(Layout(Slice(x, f, {0, 6}, 0, 9, 1)), "[6,1,]+26") << "a start past the end clamps to it";
  EXPECT_EQ(Layout(Select(x, f, {4}, 1, -1)), "[6,]+7");
  EXPECT_EQ(Layout(Unsqueeze(x, f, {4, 1, 6}, -2)), "[6,0,1,]+2");
  auto col = Strided({4, 1}, {6, 1});
  EXPECT_EQ(Layout(Expand(col, f, {3, 4, 5})), "[0,6,0,]+0");
  EXPECT_EQ(Layout(Squeeze(col, f, {4}, std::nullopt)), "[6,]+0");
  EXPECT_EQ(Layout(Squeeze(col, f, {4, 1}, std::vector<int64_t>{0})), "[6,1,]+0") << "a dim of size 4 stays";
  auto v = std::static_pointer_cast<ir::Buffer>(Select(x, f, {4}, 1, 0));
  EXPECT_EQ(v->base(), x);
}

TEST(Views, ViewAndReshapeFollowViewsChunkRule) {
  const ScalarType f = ScalarType::Float32;
  auto x = Strided({4, 6}, {6, 1}, 2);
  EXPECT_EQ(View(x, f, {4, 6}), x) << "its own shape: x itself";
  EXPECT_EQ(Layout(View(x, f, {2, 2, 6})), "[12,6,1,]+2");
  EXPECT_EQ(Layout(View(Strided({4, 6}, {12, 1}), f, {4, 2, 3})), "[12,3,1,]+0") << "rows with gaps split";
  EXPECT_THROW(View(Strided({4, 6}, {12, 1}), f, {24}), ViewOfUnrealized) << "rows with gaps do not merge";
  EXPECT_THROW(View(Strided({6, 4}, {1, 6}), f, {24}), ViewOfUnrealized) << "a transpose reads as a copy";
  EXPECT_EQ(Layout(View(Strided({2, 0}, {1, 1}), f, {0, 5})), "[5,1,]+0") << "no elements: contiguous";
  auto lazy = LowerElementwise(OpNamed("aten::exp"), f, {4, 6}, {Input(f, {4, 6})}, std::nullopt);
  EXPECT_THROW(View(lazy, f, {24}), ViewOfUnrealized) << "a lazy value is realized first";
}

TEST(Views, OfALazyValueReadItThroughTheMap) {
  auto x = Input(ScalarType::Float32, {4, 6});
  auto e = LowerElementwise(OpNamed("aten::exp"), ScalarType::Float32, {4, 6}, {x}, std::nullopt);
  auto t = std::static_pointer_cast<Pointwise>(Permute(e, ScalarType::Float32, {6, 4}, {1, 0}));
  std::string text = t->body().ToString();
  EXPECT_EQ(text.substr(0, text.find('\n')), "read0 = v" + std::to_string(e->handle()) + "[d1, d0]");
  EXPECT_EQ(t->ops, e->ops);
  auto s = std::static_pointer_cast<Pointwise>(Slice(e, ScalarType::Float32, {4, 2}, 1, 1, 3));
  text = s->body().ToString();
  EXPECT_EQ(text.substr(0, text.find('\n')), "read0 = v" + std::to_string(e->handle()) + "[d0, 1 + 3*d1]");
}

}  // namespace
}  // namespace kiln::inductor::lowering

#include "inductor/lowering/pointwise_ops.h"

namespace kiln::inductor::lowering {
namespace {

TEST(PointwiseOps, IntegerPowIsUnrolledAndLargeOrTensorExponentsFallBack) {
  auto x = Input(ScalarType::Int64, {3});
  auto cube = LowerPow(ScalarType::Int64, {3}, x, Number(int64_t{3}));
  // x**3 = (x * x) * x, which wraps around as eager's repeated squaring does (Note [Integer pow])
  const ExprPtr l = Expr::Load(0, {});
  EXPECT_EQ(E(cube->body().expr), E(Expr::Op(OpCode::kMul, {Expr::Op(OpCode::kMul, {l, l}), l})));
  EXPECT_EQ(E(LowerPow(ScalarType::Int64, {3}, x, Number(int64_t{0}))->body().expr), E(Expr::ConstInt(1, DType::I64)));
  EXPECT_THROW(LowerPow(ScalarType::Int64, {3}, x, Number(int64_t{65})), Fallback);
  EXPECT_THROW(LowerPow(ScalarType::Int64, {3}, x, x), Fallback);
  EXPECT_THROW(LowerPow(ScalarType::Int64, {3}, x, Number(2.0)), Fallback) << "a float exponent";
  auto f = LowerPow(ScalarType::Float32, {3}, Input(ScalarType::Float32, {3}), Number(2.5));
  EXPECT_EQ(f->ops, (std::set<std::string>{"pow"})) << "floats: the registry's element function";
}

TEST(PointwiseOps, WhereReadsTheConditionAsBoolAndBroadcasts) {
  std::vector<Operand> in{Input(ScalarType::Bool, {4, 1}), Input(ScalarType::Float32, {4, 8}), Number(0.0)};
  auto w = LowerWhere(ScalarType::Float32, {4, 8}, in[0], in[1], in[2]);
  EXPECT_EQ(Text(*w, in), "read0 = operand0[d0, 0]\nread1 = operand1[d0, d1]\n" +
                              E(Expr::Op(OpCode::kWhere, {Expr::Load(0, {}), Expr::Load(1, {}), Expr::Const(0.0, DType::F32)})));
  EXPECT_EQ(w->ops, (std::set<std::string>{"where"}));
}

TEST(PointwiseOps, GeluAndItsBackwardFollowEagersFormulaPerDtype) {
  auto f32 = Input(ScalarType::Float32, {8});
  EXPECT_EQ(LowerGelu(ScalarType::Float32, {8}, f32, "none")->body().expr->op, OpCode::kGelu) << "eager's float kernel";
  auto one = LowerGelu(ScalarType::Float32, {1}, Input(ScalarType::Float32, {1}), "none");
  EXPECT_EQ(one->body().expr->op, OpCode::kMul) << "one element: eager's scalar loop with erf";
  auto f64 = LowerGelu(ScalarType::Float64, {8}, Input(ScalarType::Float64, {8}), "none");
  EXPECT_EQ(E(f64->body().expr), E(Expr::Op(OpCode::kMul, {Expr::Load(0, {}), Expr::Op(OpCode::kNormalCdf, {Expr::Load(0, {})})})));
  EXPECT_NE(E(LowerGelu(ScalarType::Float32, {8}, f32, "tanh")->body().expr).find("tanh"), std::string::npos);
  EXPECT_EQ(LowerGeluBackward(ScalarType::Float32, {8}, f32, f32, "none")->body().expr->op, OpCode::kGeluBackward);
  EXPECT_THROW(LowerGeluBackward(ScalarType::Float32, {8}, f32, f32, "tanh"), Fallback);
  auto relu_grad = LowerActivationBackward("threshold_backward", ScalarType::Float32, {8}, f32, f32, Scalar(0.0));
  EXPECT_EQ(relu_grad->body().expr->op, OpCode::kWhere);
  EXPECT_THROW(LowerActivationBackward("relu_backward", ScalarType::Float32, {8}, f32, f32), ValueError);
}

TEST(PointwiseOps, ClampRoundingNanToNumAndFills) {
  auto x = Input(ScalarType::Float32, {5});
  auto clamped = LowerClamp(ScalarType::Float32, {5}, x, Number(Scalar(0.0)), std::nullopt);
  EXPECT_EQ(E(clamped->body().expr), E(Expr::Op(OpCode::kMax, {Expr::Load(0, {}), Expr::Const(0.0, DType::F32)})));
  // a tensor bound is read at its broadcast index: max first, then min, x the first operand of each
  auto row = Input(ScalarType::Float32, {1});
  auto bounded = LowerClamp(ScalarType::Float32, {5}, x, row, Number(Scalar(0.5)));
  EXPECT_EQ(E(bounded->body().expr),
            E(Expr::Op(OpCode::kMin, {Expr::Op(OpCode::kMax, {Expr::Load(0, {}), Expr::Load(1, {})}),
                                      Expr::Const(0.5, DType::F32)})));
  EXPECT_EQ(LowerDivMode(ScalarType::Float32, {5}, x, x, std::string("trunc"))->body().expr->op, OpCode::kTrunc);
  auto ints = Input(ScalarType::Int64, {5});
  EXPECT_THROW(LowerDivMode(ScalarType::Int64, {5}, ints, ints, std::string("trunc")), Fallback)
      << "an integer divisor that may be 0";
  EXPECT_THROW(LowerRoundDecimals(ScalarType::Int64, {5}, ints, 2), Fallback);
  EXPECT_EQ(LowerRoundDecimals(ScalarType::Float32, {5}, x, -1)->body().expr->op, OpCode::kMul) << "x / 10 rounded, * 10";
  auto clean = LowerNanToNum(ScalarType::Float32, {5}, x, std::nullopt, std::nullopt, -1.0);
  EXPECT_NE(E(clean->body().expr).find("0x1.fffffep+127"), std::string::npos) << E(clean->body().expr);
  EXPECT_EQ(LowerNanToNum(ScalarType::Int64, {5}, ints, 0.0, 1.0, -1.0)->body().expr->kind, Expr::Kind::kLoad)
      << "integers: a copy";
  auto full = LowerFill("full", ScalarType::Int64, {2, 3}, Scalar(2.9));
  EXPECT_EQ(E(full->body().expr), E(Expr::ConstInt(2, DType::I64)));
  EXPECT_TRUE(full->body().reads.empty());
  EXPECT_EQ(LowerCopy(ScalarType::Float32, {5}, x)->ops, (std::set<std::string>{"clone"}));
}

}  // namespace
}  // namespace kiln::inductor::lowering

namespace kiln::inductor::lowering {
namespace {

TEST(PointwiseOps, NumberArgumentsAreConstantsOfTheElementFunction) {
  auto x = Input(ScalarType::Float32, {4});
  const Op& leaky = OpNamed("aten::leaky_relu");
  auto a = LowerWithParams(leaky, ScalarType::Float32, {4}, x, {0.25});
  auto b = LowerWithParams(leaky, ScalarType::Float32, {4}, x, {0.5});
  EXPECT_NE(E(a->body().expr), E(b->body().expr)) << "another slope, another function";
  EXPECT_NE(E(a->body().expr).find("0x1p-2"), std::string::npos) << E(a->body().expr);
  EXPECT_EQ(a->ops, (std::set<std::string>{"leaky_relu"}));
  EXPECT_THROW(LowerWithParams(leaky, ScalarType::Float32, {4}, Number(1.0), {0.25}), Fallback);
  const double nan = std::nan("");
  EXPECT_EQ(E(LowerWithParams(leaky, ScalarType::Float32, {4}, x, {nan})->body().expr),
            E(LowerWithParams(leaky, ScalarType::Float32, {4}, x, {nan})->body().expr))
      << "a NaN slope is cached like any other";
  EXPECT_THROW(LowerWithParams(leaky, ScalarType::Float32, {4}, x, {0.25, 1.0}), ValueError) << "two slopes";
  EXPECT_THROW(LowerWithParams(OpNamed("aten::add.Tensor"), ScalarType::Float32, {4}, x, {}), ValueError);
}

}  // namespace
}  // namespace kiln::inductor::lowering
