// codegen/nvptx_reduce_test.cc: ReduceKernel -> PTX, checked without a GPU: every layout and
// combine the launcher uses assembles with the local ptxas for sm_90 without local memory or
// spills; row layouts read with vector loads and combine lanes through shared memory between
// barriers; symbols and keys tell kernels apart; malformed descriptions are ValueErrors. The
// kernels' results are checked on the GPU by tests/cuda/test_cuda_reduce.py.
#include <gtest/gtest.h>

#include <set>

#include "codegen/nvptx_reduce.h"
#include "codegen/ptxas_testing.h"
#include "runtime/error.h"

namespace kiln::codegen {
namespace {

ExprPtr In(int b) { return Expr::Load(b, Index{}); }
ExprPtr AccValue(DType to) { return Expr::Cast(Expr::Acc(0), to); }

// out = sum(cast(in, acc)) or another combine, one input.
ReduceKernel Simple(const std::string& name, ReduceKind kind, DType out, DType in, DType acc) {
  return ReduceKernel{name, {{"out", out}, {"in", in}}, {false, false}, kind, acc, Expr::Cast(In(1), acc),
                      AccValue(out)};
}

ReduceKernel Arg(const std::string& name, ReduceKind kind, DType in, bool second_pass) {
  ReduceKernel k{name, {{"out", in}, {"index", DType::I64}, {"in", in}}, {false, false, false}, kind,
                 ComputeDType(in), Expr::Cast(In(2), ComputeDType(in)), AccValue(in)};
  if (second_pass) {
    k.operands.push_back({"in_index", DType::I64});
    k.scalar.push_back(false);
    k.index_input = 3;
  }
  return k;
}

ReduceLayout Row(int bx, int by, int vec, int out_ndim = 1, int red_ndim = 1) {
  return ReduceLayout{true, bx, by, vec, out_ndim, red_ndim, true};
}
ReduceLayout Column(int bx, int by, int out_ndim = 1, int red_ndim = 1, bool index32 = true) {
  return ReduceLayout{false, bx, by, 1, out_ndim, red_ndim, index32};
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

TEST(NvptxReduce, RowSumReadsVectorsAndCombinesInSharedMemory) {
  auto k = Simple("sum_f32", ReduceKind::kSum, DType::F32, DType::F32, DType::F32);
  std::string ptx = ReducePTX(k, Row(512, 1, 4));
  EXPECT_GE(Count(ptx, "ld.global.v4.f32"), 4) << ptx;  // the unrolled loop keeps four vector loads in flight
  EXPECT_EQ(Count(ptx, "bar.sync"), 9) << ptx;           // log2(512) combine steps
  EXPECT_NE(ptx.find(".shared"), std::string::npos);
  EXPECT_NE(ptx.find(".maxntid 512"), std::string::npos);
  Assemble(ptx, "sum_f32_row");
}

TEST(NvptxReduce, NarrowTypesReadWordsAndAccumulateInFloat) {
  auto k = Simple("sum_bf16", ReduceKind::kSum, DType::BF16, DType::BF16, DType::F32);
  std::string ptx = ReducePTX(k, Row(128, 2, 8));
  EXPECT_NE(ptx.find("ld.global.v4.u32"), std::string::npos) << ptx;  // 8 bf16 as 4 words
  Assemble(ptx, "sum_bf16_row");
  auto h = Simple("sum_i8", ReduceKind::kSum, DType::I64, DType::I8, DType::I64);
  Assemble(ReducePTX(h, Row(64, 4, 16)), "sum_i8_row");
}

TEST(NvptxReduce, ColumnAndMultiDimLayoutsAssemble) {
  auto k = Simple("sum_f32", ReduceKind::kSum, DType::F32, DType::F32, DType::F32);
  Assemble(ReducePTX(k, Column(32, 8)), "sum_col");
  std::string ptx = ReducePTX(k, Column(32, 16, 2, 2));
  EXPECT_NE(ptx.find("div.u32"), std::string::npos) << ptx;  // 32-bit coordinate division
  EXPECT_EQ(Count(ptx, "bar.sync"), 4);
  Assemble(ptx, "sum_col_2x2");
  std::string ptx64 = ReducePTX(k, Column(32, 4, 3, 2, /*index32=*/false));
  EXPECT_NE(ptx64.find("div.u64"), std::string::npos);
  Assemble(ptx64, "sum_col_64");
  Assemble(ReducePTX(k, Row(4, 64, 1, 2, 3)), "sum_row_small");
}

TEST(NvptxReduce, EveryCombineAssembles) {
  std::set<std::string> seen;
  for (ReduceKind kind : {ReduceKind::kSum, ReduceKind::kProd, ReduceKind::kMax, ReduceKind::kMin,
                          ReduceKind::kMaxLast, ReduceKind::kMinLast}) {
    for (DType t : {DType::F32, DType::F64, DType::I64, DType::F16, DType::U8, DType::Bool}) {
      DType acc = t == DType::F16 ? DType::F32 : ComputeDType(t) == DType::Bool ? DType::I64 : ComputeDType(t);
      auto k = Simple(std::string("r_") + ReduceName(kind) + "_" + DTypeName(t), kind, t, t, acc);
      std::string ptx = ReducePTX(k, Row(32, 8, 1));
      EXPECT_EQ(ptx.find("call"), std::string::npos) << ptx;
      Assemble(ptx, k.name);
      seen.insert(ReduceSymbol(k, Row(32, 8, 1)));
    }
  }
  EXPECT_EQ(seen.size(), 36u);
  for (bool second : {false, true})
    for (ReduceKind kind : {ReduceKind::kArgmax, ReduceKind::kArgmin})
      for (DType t : {DType::F32, DType::BF16, DType::I32})
        Assemble(ReducePTX(Arg("arg", kind, t, second), second ? Column(32, 8) : Row(64, 4, 1)),
                 std::string("arg_") + ReduceName(kind) + DTypeName(t) + (second ? "_2" : "_1"));
}

TEST(NvptxReduce, MathInPreAndScalarsInPost) {
  // a 3-norm: pre |x|^3 through libdevice's pow, post acc^(1/p) with p a scalar operand
  ReduceKernel k{"norm3", {{"out", DType::F32}, {"in", DType::F32}, {"inv_p", DType::F32}}, {false, false, true},
                 ReduceKind::kSum, DType::F32,
                 Expr::Op(OpCode::kPow, {Expr::Op(OpCode::kAbs, {In(1)}), Expr::Const(3.0, DType::F32)}),
                 Expr::Op(OpCode::kPow, {Expr::Acc(0), In(2)})};
  std::string ptx = ReducePTX(k, Row(256, 1, 4));
  EXPECT_EQ(ptx.find("call"), std::string::npos) << ptx;
  Assemble(ptx, "norm3");
  // a mean: sum of bf16 in float, times a scale number
  ReduceKernel mean{"mean_bf16", {{"out", DType::BF16}, {"in", DType::BF16}, {"scale", DType::F32}},
                    {false, false, true}, ReduceKind::kSum, DType::F32, Expr::Cast(In(1), DType::F32),
                    Expr::Op(OpCode::kMul, {Expr::Acc(0), In(2)})};
  Assemble(ReducePTX(mean, Column(32, 8, 2, 1)), "mean_bf16");
}

TEST(NvptxReduce, SymbolsAndKeysDifferByEverythingThatChangesCode) {
  auto k = Simple("sum_f32", ReduceKind::kSum, DType::F32, DType::F32, DType::F32);
  auto prod = Simple("sum_f32", ReduceKind::kProd, DType::F32, DType::F32, DType::F32);
  auto f64 = Simple("sum_f32", ReduceKind::kSum, DType::F32, DType::F32, DType::F64);
  std::vector<std::pair<ReduceKernel, ReduceLayout>> variants = {
      {k, Row(512, 1, 4)}, {k, Row(256, 2, 4)}, {k, Row(512, 1, 2)}, {k, Column(32, 8)}, {k, Column(32, 8, 2)},
      {k, Column(32, 8, 1, 2)}, {k, Column(32, 8, 1, 1, false)}, {prod, Row(512, 1, 4)}, {f64, Row(512, 1, 4)}};
  std::set<std::string> symbols;
  std::set<std::pair<uint64_t, uint64_t>> keys;
  for (auto& [kernel, layout] : variants) {
    symbols.insert(ReduceSymbol(kernel, layout));
    PointwiseKey key = KeyOf(kernel, layout);
    keys.insert({key.a, key.b});
  }
  EXPECT_EQ(symbols.size(), variants.size());
  EXPECT_EQ(keys.size(), variants.size());
  EXPECT_EQ(ReduceSymbol(k, Row(512, 1, 4)), ReduceSymbol(k, Row(512, 1, 4)));
  EXPECT_EQ(ReduceSymbol(k, Row(512, 1, 4)).rfind("sum_f32_", 0), 0u);
}

TEST(NvptxReduce, MalformedKernelsAreValueErrors) {
  auto good = Simple("sum_f32", ReduceKind::kSum, DType::F32, DType::F32, DType::F32);
  auto expect_error = [&](ReduceKernel k, ReduceLayout layout, const std::string& what) {
    try {
      ValidateReduce(k, layout);
      ADD_FAILURE() << "no error for " << what;
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  auto k = good;
  k.post = Expr::Op(OpCode::kAdd, {Expr::Acc(0), In(1)});
  expect_error(k, Row(32, 1, 1), "not a scalar input");
  k = good;
  k.acc = DType::BF16;
  expect_error(k, Row(32, 1, 1), "the accumulator must be");
  expect_error(good, Row(48, 1, 1), "powers of two");
  expect_error(good, Row(8, 2, 1), "powers of two");
  ReduceLayout column_vector = Column(32, 8);
  column_vector.vector = 4;
  expect_error(good, column_vector, "vector loads need a row layout");
  k = good;
  k.pre = Expr::Acc(0);
  expect_error(k, Row(32, 1, 1), "reads inputs only");
  auto arg = Arg("argmax", ReduceKind::kArgmax, DType::F32, false);
  arg.operands[1].dtype = DType::I32;
  expect_error(arg, Row(32, 1, 1), "the index output must be i64");
  ValidateReduce(good, Column(32, 8, 2, 3));  // and a good one passes
}

}  // namespace
}  // namespace kiln::codegen
