// codegen/nvptx_codegen_test.cc: PointwiseKernel -> PTX, checked without a GPU: the PTX of each
// kernel shape is assembled by the local ptxas for sm_90 (it must assemble, use no local memory and
// spill nothing), the contiguous kernels must use 16-byte vector accesses, math must come from
// libdevice and leave no calls behind, and one kernel's PTX is compared with golden text
// (codegen/testdata/). The kernels' results are checked on the GPU by tests/cuda.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "codegen/nvptx_codegen.h"
#include "codegen/ptxas_testing.h"
#include "runtime/error.h"

namespace kiln::codegen {
namespace {

ExprPtr In(int b) { return Expr::Load(b, Index{}); }
ExprPtr Op(OpCode op, std::vector<ExprPtr> args) { return Expr::Op(op, std::move(args)); }

PointwiseKernel Kernel2(const std::string& name, DType out, DType a, DType b, ExprPtr expr, bool b_scalar = false) {
  return PointwiseKernel{name, {{"out", out}, {"a", a}, {"b", b}}, {false, false, b_scalar}, std::move(expr)};
}
PointwiseKernel Kernel1(const std::string& name, DType out, DType a, ExprPtr expr) {
  return PointwiseKernel{name, {{"out", out}, {"a", a}}, {false, false}, std::move(expr)};
}

const PointwiseLayout kVec4{0, 4, true};

TEST(NvptxCodegen, ContiguousAddUsesVectorAccesses) {
  auto k = Kernel2("add_f32", DType::F32, DType::F32, DType::F32, Op(OpCode::kAdd, {In(1), In(2)}));
  std::string ptx = PointwisePTX(k, kVec4);
  EXPECT_NE(ptx.find(".visible .entry " + PointwiseSymbol(k, kVec4)), std::string::npos) << ptx;
  EXPECT_NE(ptx.find("ld.global.v4.f32"), std::string::npos) << ptx;
  EXPECT_NE(ptx.find("st.global.v4.f32"), std::string::npos) << ptx;
  EXPECT_NE(ptx.find(".maxntid 128"), std::string::npos) << ptx;
  Assemble(ptx, "add_f32");
}

// The PTX of `x * y + 1` (contiguous, float4) against codegen/testdata/mul_add_f32_v4.ptx, with the
// symbol's hash (which covers the code generator's sources) masked. After an intended change,
// refresh it from this test's failure output.
TEST(NvptxCodegen, GoldenPTX) {
  auto k = Kernel2("mul_add_f32", DType::F32, DType::F32, DType::F32,
                   Op(OpCode::kAdd, {Op(OpCode::kMul, {In(1), In(2)}), Expr::Const(1.0, DType::F32)}));
  std::string ptx = std::regex_replace(PointwisePTX(k, kVec4), std::regex("mul_add_f32_[0-9a-f]{16}"), "mul_add_f32_HASH");
  std::stringstream golden;
  golden << std::ifstream("codegen/testdata/mul_add_f32_v4.ptx").rdbuf();
  ASSERT_FALSE(golden.str().empty()) << "codegen/testdata/mul_add_f32_v4.ptx is missing";
  EXPECT_EQ(ptx, golden.str()) << "PTX changed; new text:\n" << ptx;
}

TEST(NvptxCodegen, ReducedPrecisionAndBoolVectors) {
  // bf16 x 8 and f16 x 8 are 16 bytes per thread; bool x 16 likewise
  auto bf = Kernel2("mul_bf16", DType::BF16, DType::BF16, DType::BF16, Op(OpCode::kMul, {In(1), In(2)}));
  std::string ptx = PointwisePTX(bf, PointwiseLayout{0, 8, true});
  EXPECT_NE(ptx.find("ld.global.v4.u32"), std::string::npos) << ptx;  // 8 x 16 bits, as LLVM packs them
  Assemble(ptx, "mul_bf16");
  auto h = Kernel2("add_f16", DType::F16, DType::F16, DType::F16, Op(OpCode::kAdd, {In(1), In(2)}));
  Assemble(PointwisePTX(h, PointwiseLayout{0, 8, true}), "add_f16");
  auto lt = Kernel2("lt_f32", DType::Bool, DType::F32, DType::F32, Op(OpCode::kLt, {In(1), In(2)}));
  Assemble(PointwisePTX(lt, kVec4), "lt_f32");
}

TEST(NvptxCodegen, MathComesFromLibdeviceAndInlines) {
  ASSERT_TRUE(HaveLibdevice()) << "libdevice was not embedded (third_party/system.bzl: cuda_libdevice)";
  struct Case {
    const char* name;
    DType t;
    ExprPtr expr;
  };
  std::vector<Case> cases = {
      {"log_f32", DType::F32, Op(OpCode::kLog, {In(1)})},
      {"sin_f64", DType::F64, Op(OpCode::kSin, {In(1)})},
      {"tanh_f64", DType::F64, Op(OpCode::kTanh, {In(1)})},
      {"erf_f64", DType::F64, Op(OpCode::kErf, {In(1)})},
      {"pow_f32", DType::F32, Op(OpCode::kPow, {In(1), Expr::Const(1.7, DType::F32)})},
      {"atan2_f32", DType::F32, Op(OpCode::kAtan2, {In(1), In(1)})},
      {"mod_f32", DType::F32, Op(OpCode::kMod, {In(1), Expr::Const(0.3, DType::F32)})},
      {"round_f32", DType::F32, Op(OpCode::kRound, {In(1)})},
      {"exp_f64", DType::F64, Op(OpCode::kExp, {In(1)})},
      {"sigmoid_f32", DType::F32, Op(OpCode::kSigmoid, {In(1)})},
      {"gelu_f32", DType::F32, Op(OpCode::kGelu, {In(1)})},
      {"tan_f32", DType::F32, Op(OpCode::kTan, {In(1)})},
      {"lgamma_f64", DType::F64, Op(OpCode::kLgamma, {In(1)})},
      {"erfc_f32", DType::F32, Op(OpCode::kErfc, {In(1)})},
      {"hypot_f32", DType::F32, Op(OpCode::kHypot, {In(1), In(1)})},
      {"fmod_f64", DType::F64, Op(OpCode::kFmod, {In(1), Expr::Const(0.7, DType::F64)})},
  };
  for (const Case& c : cases) {
    auto k = Kernel1(c.name, c.t, c.t, c.expr);
    PointwiseLayout layout{0, c.t == DType::F64 ? 2 : 4, true};
    std::string ir = PointwiseLLVMIR(k, layout);
    EXPECT_EQ(ir.find("@__nv_"), std::string::npos) << c.name << ": a libdevice function was not inlined\n" << ir;
    std::string ptx = PointwisePTX(k, layout);
    // (libdevice keeps its slow paths out of line, as sin's huge-argument reduction: .func, not .extern)
    EXPECT_EQ(ptx.find(".extern"), std::string::npos) << c.name << ": PTX calls an undefined function\n" << ptx;
    Assemble(ptx, c.name);
  }
}

// round is half to even (PyTorch's nearbyint), not CUDA's roundf (half away from zero)
TEST(NvptxCodegen, RoundIsHalfToEven) {
  for (DType t : {DType::F32, DType::F64}) {
    auto k = Kernel1(t == DType::F32 ? "round_f32" : "round_f64", t, t, Op(OpCode::kRound, {In(1)}));
    std::string ptx = PointwisePTX(k, PointwiseLayout{0, 1, true});
    EXPECT_NE(ptx.find(t == DType::F32 ? "cvt.rni.f32.f32" : "cvt.rni.f64.f64"), std::string::npos) << ptx;
  }
}

TEST(NvptxCodegen, StridedLayoutsAndScalars) {
  // a broadcast add over 3 dims (32-bit and 64-bit index math), a scalar operand, integer division
  auto add = Kernel2("add_i64", DType::I64, DType::I64, DType::I64, Op(OpCode::kAdd, {In(1), In(2)}));
  for (bool index32 : {true, false}) {
    std::string ptx = PointwisePTX(add, PointwiseLayout{3, 1, index32});
    // 32-bit: the launch's FastDivisors (a multiply-high), no division; 64-bit: a real division
    EXPECT_NE(ptx.find(index32 ? "mul.hi.u32" : "div.u64"), std::string::npos) << ptx;
    if (index32) EXPECT_EQ(ptx.find("div."), std::string::npos) << ptx;
    Assemble(ptx, index32 ? "add_i64_s32" : "add_i64_s64");
  }
  auto scaled = Kernel2("mul_scalar_f32", DType::F32, DType::F32, DType::F32, Op(OpCode::kMul, {In(1), In(2)}),
                        /*b_scalar=*/true);
  std::string ptx = PointwisePTX(scaled, kVec4);
  EXPECT_NE(ptx.find(".param .f32"), std::string::npos) << "a float scalar is passed by value\n" << ptx;
  Assemble(ptx, "mul_scalar_f32");
  auto cast = Kernel1("copy_u8_f32", DType::U8, DType::F32, In(1));
  Assemble(PointwisePTX(cast, PointwiseLayout{2, 1, true}), "copy_u8_f32");
}

TEST(NvptxCodegen, SymbolsDifferByEverythingThatChangesCode) {
  auto a = Kernel2("add", DType::F32, DType::F32, DType::F32, Op(OpCode::kAdd, {In(1), In(2)}));
  auto b = Kernel2("add", DType::F32, DType::F32, DType::F32, Op(OpCode::kAdd, {In(1), In(2)}), /*b_scalar=*/true);
  auto c = Kernel2("add", DType::F64, DType::F32, DType::F32, Op(OpCode::kAdd, {In(1), In(2)}));
  std::set<std::string> symbols = {PointwiseSymbol(a, kVec4), PointwiseSymbol(b, kVec4), PointwiseSymbol(c, kVec4),
                                   PointwiseSymbol(a, PointwiseLayout{0, 1, true}),
                                   PointwiseSymbol(a, PointwiseLayout{2, 1, true}),
                                   PointwiseSymbol(a, PointwiseLayout{2, 1, false})};
  EXPECT_EQ(symbols.size(), 6u);
  EXPECT_EQ(PointwiseSymbol(a, kVec4), PointwiseSymbol(a, kVec4));
}

TEST(NvptxCodegen, KeysDifferWhereSymbolsDo) {
  auto a = Kernel2("add", DType::F32, DType::F32, DType::F32, Op(OpCode::kAdd, {In(1), In(2)}));
  auto b = Kernel2("add", DType::F32, DType::F32, DType::F32, Op(OpCode::kAdd, {In(2), In(1)}));
  auto c = Kernel2("add", DType::F32, DType::F32, DType::F32, Op(OpCode::kAdd, {In(1), Expr::Const(1, DType::F32)}));
  auto d = Kernel2("add", DType::F32, DType::F32, DType::F32, Op(OpCode::kAdd, {In(1), Expr::Const(2, DType::F32)}));
  std::vector<PointwiseKey> keys = {KeyOf(a, kVec4), KeyOf(b, kVec4), KeyOf(c, kVec4), KeyOf(d, kVec4),
                                    KeyOf(a, PointwiseLayout{2, 1, true}), KeyOf(a, PointwiseLayout{2, 1, false})};
  for (size_t i = 0; i < keys.size(); ++i)
    for (size_t j = i + 1; j < keys.size(); ++j) EXPECT_FALSE(keys[i] == keys[j]) << i << " " << j;
  EXPECT_TRUE(KeyOf(a, kVec4) == KeyOf(Kernel2("add", DType::F32, DType::F32, DType::F32,
                                               Op(OpCode::kAdd, {In(1), In(2)})), kVec4));
}

// The strided kernels' division: exact for every divisor and dividend they see (below 2^31).
TEST(NvptxCodegen, FastDivisionIsExact) {
  std::vector<uint32_t> divisors = {1, 2, 3, 5, 7, 10, 48, 64, 100, 127, 129, 1000, 4097, 65535, 65536, 1u << 20,
                                    (1u << 31) - 1, 1u << 30, 3000017};
  std::vector<uint32_t> xs = {0, 1, 2, 63, 64, 65, 999, 1000, 1001, 65535, 65536, 1u << 24, (1u << 31) - 1,
                              (1u << 31) - 2, 123456789, 2000000000};
  for (uint32_t d : divisors) {
    FastDivisor f = MakeFastDivisor(d);
    for (uint32_t x : xs) {
      uint32_t hi = static_cast<uint32_t>((uint64_t(x) * f.magic) >> 32);
      EXPECT_EQ((hi + x) >> f.shift, x / d) << x << " / " << d;
    }
  }
}

TEST(NvptxCodegen, MalformedKernelsAreValueErrors) {
  auto loads_output = Kernel1("bad", DType::F32, DType::F32, In(0));
  EXPECT_THROW(PointwisePTX(loads_output, kVec4), ValueError);
  auto out_of_range = Kernel1("bad", DType::F32, DType::F32, In(2));
  EXPECT_THROW(PointwisePTX(out_of_range, kVec4), ValueError);
  auto index = Kernel1("bad", DType::F32, DType::F32, Expr::LoopIndex(-1));
  EXPECT_THROW(PointwisePTX(index, kVec4), ValueError);
  auto ok = Kernel1("neg", DType::F32, DType::F32, Op(OpCode::kNeg, {In(1)}));
  EXPECT_THROW(PointwisePTX(ok, PointwiseLayout{0, 3, true}), ValueError);
  EXPECT_THROW(PointwisePTX(ok, PointwiseLayout{2, 4, true}), ValueError);
  EXPECT_THROW(PointwisePTX(ok, PointwiseLayout{9, 1, true}), ValueError);
  auto scalar_out = ok;
  scalar_out.scalar[0] = true;
  EXPECT_THROW(PointwisePTX(scalar_out, kVec4), ValueError);
}

}  // namespace
}  // namespace kiln::codegen
