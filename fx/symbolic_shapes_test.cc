// fx/symbolic_shapes_test.cc: the expression algebra's canonical forms and printing, value ranges,
// ShapeEnv's symbols, guards, replacements and guard simplification, unbacked symbols, and
// meta functions running over symbolic sizes.
#include "fx/symbolic_shapes.h"

#include <limits>
#include <map>
#include <string>

#include "gtest/gtest.h"
#include "tensor/fake_tensor.h"
#include "tensor/ops/common.h"

namespace kiln::fx {
namespace {

Expr s0() { return Symbol("s0"); }
Expr s1() { return Symbol("s1"); }

TEST(SymExpr, CanonicalFormsAreTheSameNode) {
  EXPECT_EQ(Add(s0(), s0()), Mul(Int(2), s0()));
  EXPECT_EQ(Mul(s0(), Int(1)), s0());
  EXPECT_EQ(Add(s0(), Int(0)), s0());
  EXPECT_EQ(Sub(s0(), s0()), Int(0));
  EXPECT_EQ(Add(s0(), s1()), Add(s1(), s0()));
  EXPECT_EQ(Mul(s0(), s1()), Mul(s1(), s0()));
  EXPECT_EQ(Sub(Mul(Int(2), s0()), s0()), s0());
  EXPECT_EQ(Mul(Add(s0(), Int(1)), Int(2)), Add(Mul(Int(2), s0()), Int(2)));
  EXPECT_EQ(Add(Int(2), Int(3)), Int(5));
}

TEST(SymExpr, FloorDivAndModDivideOutConstants) {
  EXPECT_EQ(FloorDiv(Mul(Int(4), s0()), Int(4)), s0());
  EXPECT_EQ(FloorDiv(Add(Mul(Int(4), s0()), Int(8)), Int(4)), Add(s0(), Int(2)));
  EXPECT_EQ(Mod(Mul(Int(4), s0()), Int(4)), Int(0));
  EXPECT_EQ(Mod(Add(Mul(Int(4), s0()), s1()), Int(4)), Mod(s1(), Int(4)));
  EXPECT_EQ(FloorDiv(FloorDiv(s0(), Int(2)), Int(3)), FloorDiv(s0(), Int(6)));
  EXPECT_EQ(FloorDiv(Mul(s0(), s1()), s1()), s0());
  EXPECT_EQ(Mod(Mul(s0(), s1()), s0()), Int(0));
  EXPECT_EQ(FloorDiv(Mul(s0(), s1()), Mul(Int(2), s0())), FloorDiv(s1(), Int(2)));
  EXPECT_EQ(Mod(Mul(s0(), s1()), Mul(Int(2), s0())), Mul(s0(), Mod(s1(), Int(2))));
  EXPECT_EQ(FloorDiv(Int(-7), Int(2)), Int(-4));  // Python semantics
  EXPECT_EQ(Mod(Int(-7), Int(2)), Int(1));
  EXPECT_THROW(FloorDiv(s0(), Int(0)), Error);
}

TEST(SymExpr, PrintsLikeSympy) {
  EXPECT_EQ(Str(Mul(Int(2), s0())), "2*s0");
  EXPECT_EQ(Str(Add(s0(), s1())), "s0 + s1");
  EXPECT_EQ(Str(Add(Mul(Int(2), s0()), Int(1))), "2*s0 + 1");
  EXPECT_EQ(Str(Sub(Int(3), s0())), "3 - s0");
  EXPECT_EQ(Str(Sub(s0(), Int(3))), "s0 - 3");
  EXPECT_EQ(Str(Sub(s1(), s0())), "-s0 + s1");
  EXPECT_EQ(Str(Add(Mul(s0(), s1()), s0())), "s0*s1 + s0");
  EXPECT_EQ(Str(Add(Mul(s0(), s0()), s0())), "s0**2 + s0");
  EXPECT_EQ(Str(FloorDiv(s0(), Int(2))), "(s0//2)");
  EXPECT_EQ(Str(Add(Add(s0(), FloorDiv(s1(), Int(2))), Int(1))), "s0 + ((s1//2)) + 1");
  EXPECT_EQ(Str(Mul(Int(2), FloorDiv(s0(), Int(2)))), "2*((s0//2))");
  EXPECT_EQ(Str(Eq(Mod(s0(), Int(4)), Int(0))), "Eq(Mod(s0, 4), 0)");
  EXPECT_EQ(Str(Gt(s0(), Int(2))), "s0 > 2");
  EXPECT_EQ(Str(Lt(Int(2), s0())), "2 < s0");
  EXPECT_EQ(Str(Ne(s0(), Int(1))), "Ne(s0, 1)");
  EXPECT_EQ(Str(Le(s0(), s1())), "s0 <= s1");
  EXPECT_EQ(Str(Max(s0(), Int(3))), "Max(3, s0)");
  EXPECT_EQ(Str(Not(Eq(s0(), Int(3)))), "Ne(s0, 3)");
}

// PythonStr: the same value as Python source, each symbol as the caller's text, parenthesised
// where Python's precedence differs from sympy's (% binds as * does; `not`, `and` below ==).
TEST(SymExpr, PrintsAsPython) {
  const std::map<std::string, std::string> src = {{"s0", "x.size()[0]"}, {"s1", "y.size()[1]"}};
  EXPECT_EQ(PythonStr(Eq(s0(), s1()), src), "x.size()[0] == y.size()[1]");
  EXPECT_EQ(PythonStr(Ne(s0(), Int(1)), {}), "s0 != 1");
  EXPECT_EQ(PythonStr(Eq(Mod(s0(), Int(4)), Int(0)), src), "(x.size()[0] % 4) == 0");
  EXPECT_EQ(PythonStr(Eq(Mod(Mul(s0(), s1()), Mul(Int(2), s1())), Int(0)), {}), "s1*(s0 % 2) == 0");
  EXPECT_EQ(PythonStr(Eq(Mod(Add(s0(), s1()), Int(3)), Int(1)), {}), "((s0 + s1) % 3) == 1");
  EXPECT_EQ(PythonStr(Gt(Add(Mul(Int(2), s0()), Int(1)), s1()), src), "2*x.size()[0] + 1 > y.size()[1]");
  EXPECT_EQ(PythonStr(Max(s0(), Int(3)), {}), "max(3, s0)");
  EXPECT_EQ(PythonStr(Add(Min(s0(), s1()), Int(1)), {}), "min(s0, s1) + 1");
  EXPECT_EQ(PythonStr(Mul(Int(2), FloorDiv(s0(), Int(2))), {}), "2*(s0//2)");
  EXPECT_EQ(PythonStr(And(Gt(s0(), Int(2)), Lt(s1(), Int(5))), {}), "((s1 < 5) and (s0 > 2))");
  EXPECT_EQ(PythonStr(Or(Eq(s0(), Int(2)), Eq(s1(), Int(5))), {}), "((s0 == 2) or (s1 == 5))");
  EXPECT_EQ(PythonStr(Gt(ToFloat(s0()), Float(2.5)), {}), "float(s0) > 2.5");
  EXPECT_EQ(PythonStr(Lt(ToFloat(s0()), Float(std::numeric_limits<double>::infinity())), {}),
            "float(s0) < float('inf')");
  // sympy's spelling is unchanged by the Python printer beside it
  EXPECT_EQ(Str(Eq(Mod(s0(), Int(4)), Int(0))), "Eq(Mod(s0, 4), 0)");
}

TEST(SymExpr, RangesDecideRelations) {
  RangeMap r{{s0(), {2, kPosInf}}, {s1(), {0, 9}}};
  EXPECT_EQ(StaticEval(Ge(s0(), Int(2)), r), std::optional<bool>(true));
  EXPECT_EQ(StaticEval(Eq(s0(), Int(1)), r), std::optional<bool>(false));
  EXPECT_EQ(StaticEval(Gt(s0(), Int(2)), r), std::nullopt);
  EXPECT_EQ(StaticEval(Lt(s1(), Int(10)), r), std::optional<bool>(true));
  EXPECT_EQ(StaticEval(Ge(Mul(s0(), s1()), Int(0)), r), std::optional<bool>(true));
  // A common factor: s0*s0 - 2*s0 = s0*(s0 - 2) >= 0 for s0 >= 2 (plain interval sums cannot tell).
  EXPECT_EQ(StaticEval(Ge(Mul(s0(), s0()), Mul(Int(2), s0())), r), std::optional<bool>(true));
  EXPECT_EQ(StaticEval(Ne(Mul(s0(), Symbol("s2")), Symbol("s2")), {{s0(), {2, kPosInf}}, {Symbol("s2"), {2, kPosInf}}}),
            std::optional<bool>(true));
  ValueRange m = Bound(Mod(s0(), Int(4)), r);
  EXPECT_EQ(m.lo, 0);
  EXPECT_EQ(m.hi, 3);
}

TEST(ShapeEnv, DuckSizingAndZeroOneSpecialisation) {
  auto env = ShapeEnv::Create();
  auto layout = env->CreateSymbolicSizesStridesOffset(DimVector{5, 1, 5, 3}, DimVector{15, 15, 3, 1}, 0);
  EXPECT_EQ(layout.sizes[0].str(), "s0");
  EXPECT_FALSE(layout.sizes[1].is_symbolic());  // size 1 stays a constant
  EXPECT_EQ(layout.sizes[2].str(), "s0");       // equal sizes share one symbol
  EXPECT_EQ(layout.sizes[3].str(), "s1");
  EXPECT_EQ(layout.strides[0].str(), "s0*s1");
  EXPECT_EQ(layout.strides[1].str(), "s0*s1");
  EXPECT_EQ(layout.strides[2].str(), "s1");
  EXPECT_EQ(layout.strides[3].str(), "1");
  EXPECT_EQ(env->var_to_val().at(s0()), 5);
  EXPECT_EQ(env->var_to_range().at(s0()).lo, 2);
  EXPECT_TRUE(env->guards().empty());
}

TEST(ShapeEnv, GuardsRecordTheHintsAnswer) {
  auto env = ShapeEnv::Create();
  SymInt a = env->CreateSymbol(5), b = env->CreateSymbol(6);
  EXPECT_TRUE(a.sym_gt(2).guard_bool(__FILE__, __LINE__));
  EXPECT_FALSE(a.sym_eq(b).guard_bool(__FILE__, __LINE__));
  EXPECT_TRUE(a.sym_ge(2).guard_bool(__FILE__, __LINE__));  // implied by the range: no guard
  EXPECT_TRUE(a.sym_ne(1).guard_bool(__FILE__, __LINE__));
  auto g = env->FormatGuards();
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0], "s0 > 2");
  EXPECT_EQ(g[1], "Ne(s0, s1)");
  EXPECT_NE(env->guards()[0].location.find("symbolic_shapes_test.cc"), std::string::npos);
  EXPECT_TRUE(env->EvaluateGuards({{"s0", 7}, {"s1", 8}}));
  EXPECT_FALSE(env->EvaluateGuards({{"s0", 2}, {"s1", 8}}));
  EXPECT_FALSE(env->EvaluateGuards({{"s0", 7}, {"s1", 7}}));
}

TEST(ShapeEnv, SimplifiesTheGuardSet) {
  auto env = ShapeEnv::Create();
  SymInt a = env->CreateSymbol(10);
  EXPECT_TRUE(a.sym_gt(2).guard_bool("", 0));
  EXPECT_TRUE(a.sym_gt(4).guard_bool("", 0));   // tighter: replaces s0 > 2
  EXPECT_TRUE(a.sym_gt(3).guard_bool("", 0));   // implied by s0 > 4: not even recorded
  EXPECT_TRUE(a.sym_lt(100).guard_bool("", 0));
  EXPECT_TRUE(a.mod(5).sym_eq(0).guard_bool("", 0));
  EXPECT_TRUE(a.mod(5).sym_eq(0).guard_bool("", 0));  // known fact now
  EXPECT_EQ(env->FormatGuards(), (std::vector<std::string>{"s0 > 4", "s0 < 100", "Eq(Mod(s0, 5), 0)"}));
  EXPECT_EQ(env->raw_guards().size(), 4u);
}

TEST(ShapeEnv, EqGuardsSpecialiseAndUnify) {
  auto env = ShapeEnv::Create();
  SymInt a = env->CreateSymbol(3), b = env->CreateSymbol(4), c = env->CreateSymbol(7);
  SymInt sum = a + b;
  EXPECT_TRUE(a.sym_gt(2).guard_bool("", 0));
  EXPECT_TRUE(a.sym_eq(3).guard_bool("", 0));
  EXPECT_EQ(a.maybe_as_int(), std::optional<int64_t>(3));
  EXPECT_EQ(sum.str(), "s1 + 3");  // nodes made before see the replacement
  EXPECT_EQ(c.guard_int(__FILE__, __LINE__), 7);  // guard_int specialises
  EXPECT_EQ(env->FormatGuards(), (std::vector<std::string>{"Eq(s0, 3)", "Eq(s2, 7)"}));

  auto env2 = ShapeEnv::Create(ShapeEnv::Options{/*duck_shape=*/false, true});
  SymInt x = env2->CreateSymbol(4), y = env2->CreateSymbol(4);
  EXPECT_EQ(y.str(), "s1");
  EXPECT_TRUE(x.sym_eq(y).guard_bool("", 0));
  EXPECT_EQ(y.str(), "s0");
  EXPECT_EQ((x * 2 - y).str(), "s0");
  EXPECT_EQ(env2->FormatGuards(), (std::vector<std::string>{"Eq(s0, s1)"}));
}

TEST(ShapeEnv, MinMaxUseRanges) {
  auto env = ShapeEnv::Create();
  SymInt a = env->CreateSymbol(5);
  EXPECT_EQ(sym_max(a, 1).str(), "s0");
  EXPECT_EQ(sym_min(a, 1).str(), "1");
  EXPECT_EQ(sym_min(a, 3).str(), "Min(3, s0)");
  EXPECT_TRUE(env->guards().empty());
}

TEST(ShapeEnv, UnbackedSymbolsRaiseUnlessChecked) {
  auto env = ShapeEnv::Create();
  SymNodePtr n = env->NewUnbackedSymInt(0, std::nullopt, true);
  SymInt u(n);
  EXPECT_EQ(u.str(), "u0");
  EXPECT_FALSE(std::dynamic_pointer_cast<SymExprNode>(n)->has_hint());
  EXPECT_TRUE(u.sym_ge(0).guard_bool("", 0));  // the range decides it
  try {
    (void)u.sym_eq(1).guard_bool("f.cc", 3);
    FAIL() << "expected GuardOnDataDependentSymNode";
  } catch (const GuardOnDataDependentSymNode& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("Could not guard on data-dependent expression Eq(u0, 1) (unhinted: Eq(u0, 1))"),
              std::string::npos) << msg;
    EXPECT_NE(msg.find("kiln._check"), std::string::npos);
    EXPECT_EQ(e.python_class(), "GuardOnDataDependentSymNode");
  }
  EXPECT_THROW(u.guard_int("", 0), GuardOnDataDependentSymNode);
  env->Check(Gt(Symbol("u0"), Int(1)), "");
  EXPECT_FALSE(u.sym_eq(1).guard_bool("", 0));
  EXPECT_TRUE(u.sym_ge(2).guard_bool("", 0));
  Expr cond = Eq(Mod(Symbol("u0"), Int(4)), Int(0));
  env->Check(cond, "");
  EXPECT_TRUE(env->EvaluateExpr(cond, ""));
  EXPECT_TRUE(env->guards().empty());  // facts about unbacked values are not guards
  EXPECT_THROW(env->Check(Lt(Symbol("u0"), Int(0)), ""), Error);
  env->Check(Eq(Symbol("u0"), Int(8)), "");
  EXPECT_EQ(u.maybe_as_int(), std::optional<int64_t>(8));
}

TEST(ShapeEnv, ViewOfSymbolicMetaTensorGuardsDivisibility) {
  auto env = ShapeEnv::Create();
  auto layout = env->CreateSymbolicSizesStridesOffset(DimVector{6, 4}, DimVector{4, 1}, 0);
  Tensor x = EmptyTensor(layout.sizes, ScalarType::Float32, Device(DeviceType::Meta), layout.strides);
  Tensor y = ops::view(x, {SymInt(-1), SymInt(8)});
  EXPECT_EQ(SizesToString(y->sym_sizes()), "[((s0*s1)//8), 8]");
  EXPECT_EQ(env->FormatGuards(), (std::vector<std::string>{"Eq(Mod(s0*s1, 8), 0)"}));
  Tensor z = ops::add(x, x);
  EXPECT_EQ(SizesToString(z->sym_sizes()), "[s0, s1]");
  EXPECT_EQ(SizesToString(z->sym_strides()), "[s1, 1]");
}

TEST(ShapeEnv, DataDependentOpsMintUnbackedSymbolsUnderAContext) {
  InstallDynamicShapeKernels();
  auto env = ShapeEnv::Create();
  Tensor m = EmptyTensor(DimVector{3, 4}, ScalarType::Bool, Device(DeviceType::Meta));
  EXPECT_THROW(CallOp<Tensor>(KILN_OP("aten::nonzero"), m), NotImplementedError);
  // A fake tensor (the Fake key) without a ShapeEnv: PyTorch's DynamicOutputShapeException naming the op.
  auto mode = std::make_shared<FakeTensorMode>();
  Tensor fake = mode->Empty(SymDimVector{3, 4}, {}, 0, ScalarType::Bool, Device(DeviceType::CPU));
  try {
    CallOp<Tensor>(KILN_OP("aten::nonzero"), fake);
    FAIL() << "expected DynamicOutputShapeException";
  } catch (const NamedError& e) {
    EXPECT_EQ(e.python_class(), "DynamicOutputShapeException");
    EXPECT_STREQ(e.what(), "aten.nonzero.default");
  }
  Tensor scalar = mode->Empty(SymDimVector{}, {}, 0, ScalarType::Float32, Device(DeviceType::CPU));
  try {
    CallOp<Scalar>(KILN_OP("aten::_local_scalar_dense"), scalar);
    FAIL() << "expected DataDependentOutputException";
  } catch (const NamedError& e) {
    EXPECT_EQ(e.python_class(), "DataDependentOutputException");
  }
  SymbolicContextGuard guard(env);
  Tensor nz = CallOp<Tensor>(KILN_OP("aten::nonzero"), m);
  EXPECT_EQ(SizesToString(nz->sym_sizes()), "[u0, 2]");
  EXPECT_EQ(env->var_to_range().at(Symbol("u0")).hi, 12);
}

}  // namespace
}  // namespace kiln::fx
