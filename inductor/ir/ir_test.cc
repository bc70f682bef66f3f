// inductor/ir/ir_test.cc: affine arithmetic, and bodies traced, inlined and placed into kernels,
// compared as text (Note [Bodies]).
#include <gtest/gtest.h>

#include <map>

#include "inductor/ir/affine.h"
#include "inductor/ir/body.h"
#include "runtime/error.h"

namespace kiln::inductor::ir {
namespace {

using codegen::DType;
using codegen::Expr;
using codegen::ExprPtr;
using codegen::OpCode;

TEST(Affine, ArithmeticKeepsTermsSortedAndDropsZeros) {
  Affine a = Affine::Var(1).Scaled(3) + Affine::Var(kReduced) + Affine(2);
  EXPECT_EQ(a.ToString(), "2 + r + 3*d1");
  EXPECT_EQ(a.Coeff(1), 3);
  EXPECT_EQ(a.Coeff(0), 0);
  Affine b = a + Affine::Var(1).Scaled(-3);
  EXPECT_EQ(b.ToString(), "2 + r");
  EXPECT_EQ(Affine(0).ToString(), "0");
  EXPECT_EQ((Affine::Var(0).Scaled(-2)).ToString(), "-2*d0");
  EXPECT_TRUE(Affine(5).IsConst());
  EXPECT_TRUE(a.Scaled(0).IsConst());
  EXPECT_EQ(a.Hash(), (Affine(2) + Affine::Var(kReduced) + Affine::Var(1).Scaled(3)).Hash());
}

TEST(Affine, ComposeSubstitutesVariables) {
  // d0 -> 2*d1 + 1, d1 -> r: (3 + d0 + 4*d1) becomes 4 + 2*d1 + 4*r
  Placement at{{Affine::Var(1).Scaled(2) + Affine(1), Affine::Var(kReduced)}, Affine(), false};
  Affine a = Affine(3) + Affine::Var(0) + Affine::Var(1).Scaled(4);
  EXPECT_EQ(a.Compose(at).ToString(), "4 + 4*r + 2*d1");
  EXPECT_EQ(ElementOffset({Affine::Var(0), Affine::Var(1)}, {16, 1}).ToString(), "16*d0 + d1");
}

TEST(Affine, KernelIndexSplitsOuterAndInner) {
  codegen::Index ix = KernelIndex(Affine(7) + Affine::Var(1).Scaled(4) + Affine::Var(kReduced).Scaled(2), 2);
  EXPECT_EQ(ix.offset, 7);
  EXPECT_EQ(ix.outer_strides, (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(ix.inner_stride, 2);
  EXPECT_THROW(KernelIndex(Affine::Var(2), 2), ValueError);
}

// A reader that loads every value from a buffer numbered by first use, laid out row-major with
// the strides given per value.
class BufferReader : public Reader {
 public:
  std::map<int64_t, std::vector<int64_t>> strides;
  std::vector<int64_t> order;  // values in the order they were first read
  std::vector<int64_t> as_ofs;
  int n_outer = 1;
  ExprPtr ReadValue(int64_t value, const std::vector<Affine>& index, int64_t as_of) override {
    size_t k = 0;
    while (k < order.size() && order[k] != value) ++k;
    if (k == order.size()) order.push_back(value);
    as_ofs.push_back(as_of);
    return Expr::Load(static_cast<int>(k), KernelIndex(ElementOffset(index, strides.at(value)), n_outer));
  }
};

TEST(Body, TracingRecordsEachDistinctReadOnceInOrder) {
  Tracer t;
  ExprPtr x = t.Read(7, {Affine::Var(0), Affine::Var(1)});
  ExprPtr y = t.Read(3, {Affine::Var(1), Affine(0)});
  ExprPtr x2 = t.Read(7, {Affine::Var(0), Affine::Var(1)});
  Body b = t.Finish(Expr::Op(OpCode::kAdd, {Expr::Op(OpCode::kMul, {x, x2}), y}));
  ASSERT_EQ(b.reads.size(), 2u);
  EXPECT_EQ(b.ToString(),
            "read0 = v7[d0, d1]\n"
            "read1 = v3[d1, 0]\n" +
                codegen::SerializeExpr(*b.expr));
  Tracer again;
  ExprPtr a0 = again.Read(7, {Affine::Var(0), Affine::Var(1)});
  ExprPtr a1 = again.Read(3, {Affine::Var(1), Affine(0)});
  Body same = again.Finish(Expr::Op(OpCode::kAdd, {Expr::Op(OpCode::kMul, {a0, a0}), a1}));
  EXPECT_TRUE(same == b);
  EXPECT_EQ(same.Hash(), b.Hash());
}

TEST(Body, InstantiateComposesIndicesAndAsksTheReaderInOrder) {
  // body over (d0, d1): v1[d1, d0] * v2[d0] -- a transpose times a broadcast row
  Tracer t;
  ExprPtr a = t.Read(1, {Affine::Var(1), Affine::Var(0)});
  ExprPtr b = t.Read(2, {Affine::Var(0)});
  Body body = t.Finish(Expr::Op(OpCode::kMul, {a, b}));
  // placed in a kernel whose outer variable d0 walks dim 0 and inner r walks dim 1, offset by 1
  Placement at{{Affine::Var(0), Affine::Var(kReduced) + Affine(1)}, Affine(), false};
  BufferReader reader;
  reader.strides = {{1, {8, 1}}, {2, {1}}};
  ExprPtr e = Instantiate(body, at, reader, 5);
  EXPECT_EQ(reader.order, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(reader.as_ofs, (std::vector<int64_t>{5, 5}));
  codegen::Index first{8, {1}, 8}, second{0, {1}, 0};
  ExprPtr want = Expr::Op(OpCode::kMul, {Expr::Load(0, first), Expr::Load(1, second)});
  EXPECT_EQ(codegen::SerializeExpr(*e), codegen::SerializeExpr(*want));
}

TEST(Body, InlineJoinsTheInnerReadsAndPlacesLoopIndices) {
  // inner body over (d0): v4[2*d0] + d0 (its own index as a value)
  Tracer t;
  ExprPtr r = t.Read(4, {Affine::Var(0).Scaled(2)});
  Body inner = t.Finish(Expr::Op(OpCode::kAdd, {r, Expr::LoopIndex(0)}));
  // outer body over (d0, d1): inner at d1 + 1, times v4[2*d1 + 2] (the same read, shared)
  Tracer outer;
  ExprPtr again = outer.Read(4, {Affine::Var(1).Scaled(2) + Affine(2)});
  ExprPtr placed = outer.Inline(inner, Placement{{Affine::Var(1) + Affine(1)}, Affine(), false}, 9);
  Body b = outer.Finish(Expr::Op(OpCode::kMul, {placed, again}));
  ASSERT_EQ(b.reads.size(), 2u) << b.ToString();
  EXPECT_EQ(b.reads[1].as_of, 9) << "the inlined read takes the snapshot";
  EXPECT_EQ(b.reads[0].as_of, -1);
  ExprPtr index_value = Expr::Op(OpCode::kAdd, {Expr::ConstInt(1, DType::I64), Expr::LoopIndex(1)});
  ExprPtr want = Expr::Op(OpCode::kMul, {Expr::Op(OpCode::kAdd, {Expr::Load(1, {}), index_value}), Expr::Load(0, {})});
  EXPECT_EQ(codegen::SerializeExpr(*b.expr), codegen::SerializeExpr(*want));
}

TEST(Body, SharedSubtreesAreRewrittenOnce) {
  Tracer t;
  ExprPtr x = t.Read(1, {Affine::Var(0)});
  ExprPtr e = x;
  for (int i = 0; i < 60; ++i) e = Expr::Op(OpCode::kMul, {e, e});  // 2^60 paths, 61 nodes
  Body b = t.Finish(e);
  BufferReader reader;
  reader.strides = {{1, {1}}};
  ExprPtr placed = Instantiate(b, Placement{{Affine::Var(0)}, Affine(), false}, reader);
  EXPECT_EQ(placed->args[0], placed->args[1]) << "operands stay shared";
}

TEST(Body, ReadingAnUnplacedVariableIsAValueError) {
  Tracer t;
  Body b = t.Finish(t.Read(1, {Affine::Var(kReduced)}));
  BufferReader reader;
  reader.strides = {{1, {1}}};
  EXPECT_THROW(Instantiate(b, Placement{{Affine::Var(0)}, Affine(), false}, reader), ValueError);
  EXPECT_THROW(Instantiate(t.Finish(Expr::LoopIndex(3)), Placement{{Affine::Var(0)}, Affine(), false}, reader),
               ValueError);
}

}  // namespace
}  // namespace kiln::inductor::ir
