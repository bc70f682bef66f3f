// codegen/kernel_ir_test.cc: the kernel IR as values, without LLVM: its canonical text read back
// (golden text in, the same text out), parse errors naming line and column, structural equality
// and hashing, the recompute cost, and element functions applied to operands.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "codegen/kernel_ir.h"
#include "runtime/error.h"

namespace kiln::codegen {
namespace {

// A reduction kernel (RMSNorm + SiLU's shape): two loops, an accumulator read by the second,
// every expression kind, negative strides, a cast, a bf16 buffer and an integer constant.
constexpr const char* kRmsNorm =
    "kernel cpp_fused_mean_mul_rsqrt_silu_0\n"
    "buffers in_ptr0:f32 in_ptr1:bf16 out_ptr0:f32\n"
    "outer 16 4\n"
    "loop 64\n"
    "  reduce 0 sum mul(L0(0;256,64,;1),L0(0;256,64,;1),)\n"
    "loop 64\n"
    "  store 2(63;256,64,;-1) mul(mul(L0(0;256,64,;1),rsqrt(add(div(A0,Cf32:0x1p+6,),Cf32:0x1.0c6f7ap-20,),),),"
    "cast<f32>(L1(0;0,0,;1)),)\n"
    "  store 2(0;256,64,;1) where(lt(I-1,Ci64:3,),Cf32:-inf,Cf32:nan,)";

constexpr const char* kWelford =
    "kernel cpp_fused_var_mean_1\n"
    "buffers in_ptr0:f64 out_ptr0:f64 out_ptr1:f64\n"
    "outer 8\n"
    "loop 100\n"
    "  welford 0 L0(0;100,;1)\n"
    "loop 1\n"
    "  store 1(0;1,;0) A0\n"
    "  store 2(0;1,;0) A1";

constexpr const char* kScalar = "kernel k\nbuffers out_ptr0:bool\nouter\nloop 1\n  store 0(0;;0) Cbool:1";

TEST(KernelIrText, RoundTrips) {
  for (const char* text : {kRmsNorm, kWelford, kScalar}) {
    Kernel k = ParseKernelText(text);
    Validate(k);
    EXPECT_EQ(Serialize(k), text);
  }
  Kernel k = ParseKernelText(kRmsNorm);
  EXPECT_EQ(k.name, "cpp_fused_mean_mul_rsqrt_silu_0");
  ASSERT_EQ(k.buffers.size(), 3u);
  EXPECT_EQ(k.buffers[1].dtype, DType::BF16);
  EXPECT_EQ(k.outer, (std::vector<int64_t>{16, 4}));
  ASSERT_EQ(k.loops.size(), 2u);
  EXPECT_EQ(k.loops[1].stmts[0].index.inner_stride, -1);
  EXPECT_EQ(k.loops[1].stmts[0].index.offset, 63);
  const Expr& where = *k.loops[1].stmts[1].expr;
  EXPECT_TRUE(std::isinf(where.args[1]->value) && where.args[1]->value < 0);
  EXPECT_TRUE(std::isnan(where.args[2]->value));
  EXPECT_EQ(where.args[0]->args[0]->dim, -1);
}

TEST(KernelIrText, ExactConstants) {
  // float constants survive as bits; integers beyond a double's 53 bits keep every digit
  const char* big = "Ci64:9007199254740993";
  EXPECT_EQ(ParseExprText(big)->int_value, 9007199254740993LL);
  EXPECT_EQ(SerializeExpr(*ParseExprText(big)), big);
  ExprPtr tiny = Expr::Const(std::numeric_limits<double>::denorm_min(), DType::F64);
  EXPECT_EQ(ParseExprText(SerializeExpr(*tiny))->value, std::numeric_limits<double>::denorm_min());
  ExprPtr neg_zero = ParseExprText(SerializeExpr(*Expr::Const(-0.0, DType::F32)));
  EXPECT_TRUE(std::signbit(neg_zero->value));
}

void ExpectParseError(const std::string& text, const std::string& where, const std::string& what) {
  try {
    ParseKernelText(text);
    ADD_FAILURE() << "parsed: " << text;
  } catch (const ValueError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(where), std::string::npos) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
  }
}

TEST(KernelIrText, ErrorsNameLineAndColumn) {
  ExpectParseError("kernel k\nbuffers a:f33\nouter\nloop 1\n  store 0(0;;0) A0", "line 2, column 11", "unknown dtype 'f33'");
  ExpectParseError("kernel k\nbuffers a:f32\nouter\nloop 1\n  store 0(0;;0) frob(A0,)", "line 5, column 17", "unknown operator 'frob'");
  ExpectParseError("kernel k\nbuffers a:f32\nouter\nloop 1\n  store 0(0;;0) add(A0,)", "line 5", "'add' takes 2 operands, got 1");
  ExpectParseError("kernel k\nbuffers a:f32\nouter x", "line 3, column 7", "expected an integer");
  ExpectParseError("kernel k\nbuffers a:f32\nouter\nloop 1\n  copy 0 A0", "line 5, column 3", "expected store, reduce or welford");
  ExpectParseError("kernel k\nbuffers a:f32\nouter\nloop 1\n  reduce 0 mean A0", "line 5, column 12", "unknown reduction 'mean'");
  ExpectParseError("kernel k\nbuffers a:f32\nouter\nloop 1\n  store 0(0;;0) Cf32:0x1q", "line 5", "bad float constant");
  ExpectParseError("kernel k", "line 1", "expected '\\n'");
  EXPECT_THROW(ParseExprText("A0 A1"), ValueError);
}

TEST(KernelIrValues, EqualityAndHash) {
  ExprPtr a = ParseExprText("add(L0(1;4,;1),Cf32:0x1p+0,)");
  ExprPtr b = ParseExprText("add(L0(1;4,;1),Cf32:0x1p+0,)");
  EXPECT_NE(a, b);
  EXPECT_TRUE(ExprEqual(*a, *b));
  EXPECT_EQ(ExprHash(*a), ExprHash(*b));
  for (const char* other : {"add(L0(1;4,;2),Cf32:0x1p+0,)", "add(L1(1;4,;1),Cf32:0x1p+0,)", "sub(L0(1;4,;1),Cf32:0x1p+0,)",
                            "add(L0(1;4,;1),Cf64:0x1p+0,)", "add(L0(1;4,;1),Cf32:-0x0p+0,)"}) {
    ExprPtr c = ParseExprText(other);
    EXPECT_FALSE(ExprEqual(*a, *c)) << other;
    EXPECT_NE(ExprHash(*a), ExprHash(*c)) << other;
  }
  // a NaN constant equals itself, as the canonical text says
  EXPECT_TRUE(ExprEqual(*ParseExprText("Cf32:nan"), *ParseExprText("Cf32:nan")));
  EXPECT_FALSE(ExprEqual(*ParseExprText("Cf32:0x0p+0"), *ParseExprText("Cf32:-0x0p+0")));
}

TEST(KernelIrValues, Cost) {
  EXPECT_EQ(ExprCost(*ParseExprText("L0(0;;1)")), 0);
  EXPECT_EQ(ExprCost(*ParseExprText("add(L0(0;;1),cast<f32>(L1(0;;1)),)")), 1);
  EXPECT_EQ(ExprCost(*ParseExprText("mul(exp(L0(0;;1),),div(A0,Cf32:0x1p+1,),)")), 1 + 4 + 4);
}

TEST(KernelIrValues, SubstituteLoads) {
  // an element function over operands 0 and 1, applied to two expressions
  ExprPtr fn = ParseExprText("mul(L1(0;;0),sigmoid(L0(0;;0),),)");
  ExprPtr x = ParseExprText("L3(5;2,;1)"), y = ParseExprText("Cf32:0x1p+1");
  EXPECT_EQ(SerializeExpr(*SubstituteLoads(fn, {x, y})), "mul(Cf32:0x1p+1,sigmoid(L3(5;2,;1),),)");
  // shared subtrees without loads are kept, not copied
  ExprPtr constant = ParseExprText("exp(Cf32:0x1p+0,)");
  EXPECT_EQ(SubstituteLoads(constant, {}), constant);
  EXPECT_THROW(SubstituteLoads(fn, {x}), ValueError);
}

TEST(KernelIrValues, MapLoads) {
  // each load rewritten (memory planning renumbers buffers this way); the rest rebuilt around it
  ExprPtr e = ParseExprText("add(L2(0;1,;0),cast<f64>(L0(4;0,;1)),)");
  ExprPtr renumbered = MapLoads(e, [](const ExprPtr& load) { return Expr::Load(load->buffer + 1, load->index); });
  EXPECT_EQ(SerializeExpr(*renumbered), "add(L3(0;1,;0),cast<f64>(L1(4;0,;1)),)");
  // a function returning the loads unchanged gives the same expression back, nothing copied
  EXPECT_EQ(MapLoads(e, [](const ExprPtr& load) { return load; }), e);
}

}  // namespace
}  // namespace kiln::codegen
