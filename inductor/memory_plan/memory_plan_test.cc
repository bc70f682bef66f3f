// inductor/memory_plan/memory_plan_test.cc: golden-text tests of the memory plan (steps in, plan
// out, compared as text: Note [Memory plan]) and of the kernel analysis it takes.
#include "inductor/memory_plan/memory_plan.h"

#include <gtest/gtest.h>

#include <sstream>

#include "runtime/error.h"

namespace kiln::inductor {
namespace {

// Steps, one per line:
//   alloc NAME BYTES DTYPE | declare NAME BYTES DTYPE | view VIEW BASE | return NAMES...
//   kernel NAMES... [store=K at_store=P,Q]   (the access AnalyzeStoreAccess would give)
//   extern INPUTS... -> RESULTS... | extern_alias INPUTS... -> RESULTS...
MemoryPlanner Parse(const std::string& text, bool static_memory = false) {
  MemoryPlanner p(static_memory);
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string kind, w;
    if (!(words >> kind)) continue;
    std::vector<std::string> names, results;
    StoreAccess access;
    bool after_arrow = false;
    while (words >> w) {
      if (w == "->") {
        after_arrow = true;
      } else if (w.rfind("store=", 0) == 0) {
        access.store = std::stoi(w.substr(6));
      } else if (w.rfind("at_store=", 0) == 0) {
        std::istringstream ps(w.substr(9));
        for (std::string pos; std::getline(ps, pos, ',');) access.read_at_store.push_back(std::stoi(pos));
      } else {
        (after_arrow ? results : names).push_back(w);
      }
    }
    if (kind == "alloc" || kind == "declare") {
      p.Declare(names.at(0), std::stoll(names.at(1)), names.at(2));
      if (kind == "alloc") p.Alloc(names[0]);
    } else if (kind == "kernel") {
      p.Kernel(names, access);
    } else if (kind == "view") {
      p.View(names.at(0), names.at(1));
    } else if (kind == "extern" || kind == "extern_alias") {
      p.Extern(names, results, kind == "extern");
    } else if (kind == "return") {
      p.Return(names);
    } else {
      ADD_FAILURE() << "unknown step: " << line;
    }
  }
  return p;
}

std::string PlanText(const std::string& steps, bool static_memory = false) {
  return Parse(steps, static_memory).Plan().ToString();
}

TEST(MemoryPlan, DeadBuffersOfTheSameBytesAndDtypeAreReused) {
  // y = relu(x); z = y.exp() (not pointwise-in-place: it reads y elsewhere); w = z.sum(...)
  EXPECT_EQ(PlanText(R"(
alloc buf0 64 f32
kernel buf0 arg0 store=0 at_store=1
alloc buf1 64 f32
kernel buf1 buf0 store=0
alloc buf2 64 f32
kernel buf2 buf1 store=0
alloc buf3 32 f32
kernel buf3 buf2 store=0
return buf3
)"),
            "1: del arg0\n"     // an input dies at its last read; buf0 is pooled, not deleted
            "4: reuse buf0\n");  // buf0 is dead: buf2 takes its memory (buf1, buf2 pooled at 5, 7)
}

TEST(MemoryPlan, APointwiseKernelWritesOverAnInputThatDiesInIt) {
  EXPECT_EQ(PlanText(R"(
alloc buf0 64 f32
kernel buf0 arg0 store=0 at_store=1
alloc buf1 64 f32
kernel buf1 buf0 arg1 store=0 at_store=1,2
alloc buf2 32 f32
kernel buf2 buf1 store=0
return buf2
)"),
            "1: del arg0\n"
            "2: in place buf0 (step 3: buffer 1 -> 0)\n"
            "3: del arg1\n");  // buf0 is not named again: the kernel reads it through buf1
}

TEST(MemoryPlan, NoInPlaceWriteOverAnInputOfAnotherDtypeOrReadLater) {
  EXPECT_EQ(PlanText(R"(
alloc buf0 64 f64
kernel buf0 arg0 store=0 at_store=1
alloc buf1 64 f32
kernel buf1 buf0 store=0 at_store=1
alloc buf2 64 f32
kernel buf2 buf1 store=0 at_store=1
alloc buf3 64 f32
kernel buf3 buf1 buf2 store=0 at_store=1,2
alloc buf4 32 f32
kernel buf4 buf3 store=0
return buf4
)"),
            "1: del arg0\n"  // 2: buf0 is f64; 4: buf1 is read again at 7
            "6: in place buf1 (step 7: buffer 1 -> 0)\n");  // the first input that qualifies
}

TEST(MemoryPlan, OutputsNeverReuseNorDie) {
  EXPECT_EQ(PlanText(R"(
alloc buf0 64 f32
kernel buf0 arg0 store=0 at_store=1
alloc buf1 64 f32
kernel buf1 buf0 store=0
alloc buf2 64 f32
kernel buf2 buf1 store=0 at_store=1
return buf1 buf2
)"),
            "1: del arg0\n");  // 4: buf2 is returned: it does not take buf0, dead and pooled at 3
}

TEST(MemoryPlan, ABaseOfAViewIsNeverPooledAndLivesWhileTheViewIsRead) {
  // buf1 = buf0 viewed; buf2 = f(buf0) could overwrite buf0 but buf1, a view of it, is read later
  EXPECT_EQ(PlanText(R"(
alloc buf0 64 f32
kernel buf0 arg0 store=0 at_store=1
view buf1 buf0
alloc buf2 64 f32
kernel buf2 buf0 store=0 at_store=1
alloc buf3 64 f32
kernel buf3 buf1 buf2 store=0 at_store=2
alloc buf4 32 f32
kernel buf4 buf3 store=0
return buf4
)"),
            "1: del arg0\n"
            "4: del buf0\n"  // deleted (its view keeps the memory), never pooled
            "5: in place buf2 (step 6: buffer 2 -> 0)\n"
            "6: del buf1\n");
}

TEST(MemoryPlan, AnAliasingExternsInputsAreNeverPooled) {
  EXPECT_EQ(PlanText(R"(
alloc buf0 64 f32
kernel buf0 arg0 store=0 at_store=1
extern_alias buf0 -> buf1
alloc buf2 64 f32
kernel buf2 buf1 store=0
alloc buf3 64 f32
kernel buf3 buf2 store=0
return buf3
)"),
            "1: del arg0\n"
            "2: del buf0\n"
            "4: del buf1\n");  // buf2 is pooled at 6, after buf3 was allocated: nothing reuses it
}

TEST(MemoryPlan, FreshExternResultsCanBeOverwrittenButAreNotPooled) {
  EXPECT_EQ(PlanText(R"(
declare buf0 64 f32
extern arg0 -> buf0
alloc buf1 64 f32
kernel buf1 buf0 store=0 at_store=1
alloc buf2 64 f32
kernel buf2 buf1 store=0
return buf2
)"),
            "0: del arg0\n"
            "1: in place buf0 (step 2: buffer 1 -> 0)\n");
  EXPECT_EQ(PlanText(R"(
declare buf0 64 f32
extern arg0 -> buf0
alloc buf1 64 f32
kernel buf1 buf0 store=0
alloc buf2 64 f32
kernel buf2 buf1 store=0
return buf2
)"),
            "0: del arg0\n"
            "2: del buf0\n");  // not pooled: buf2 is fresh
}

TEST(MemoryPlan, ANameTwiceInOneStepDiesOnce) {
  EXPECT_EQ(PlanText(R"(
alloc buf0 64 f32
kernel buf0 arg0 arg1 arg0 store=0
return buf0
)"),
            "1: del arg0 arg1\n");
}

TEST(MemoryPlan, StaticMemoryKeepsWhatNoOutputCanSee) {
  EXPECT_EQ(PlanText(R"(
alloc buf0 64 f32
kernel buf0 arg0 store=0 at_store=1
alloc buf1 64 f32
kernel buf1 buf0 store=0 at_store=1
view buf2 buf1
alloc buf3 64 f32
kernel buf3 buf1 store=0
alloc buf4 64 f32
kernel buf4 buf3 store=0 at_store=1
return buf2 buf4
)",
                     /*static_memory=*/true),
            "static: buf0 buf3\n"  // buf1 is seen through the returned view buf2; buf4 is returned
            "0: static\n"
            "1: del arg0\n"
            "5: static\n"  // 2: buf1 never overwrites buf0, which is static
            "6: del buf1\n");
}

TEST(MemoryPlan, StepsPrintAsTheTestsWriteThem) {
  const std::string steps =
      "alloc buf0 64 f32\n"
      "kernel buf0 arg0 store=0 at_store=1\n"
      "view buf1 buf0\n"
      "extern_alias buf1 -> buf2\n"
      "extern buf2 -> buf3\n"
      "return buf3\n";
  EXPECT_EQ(Parse(steps).StepsToString(), steps);
}

TEST(MemoryPlan, AnAllocationNeverDeclaredIsAValueError) {
  MemoryPlanner p;
  p.Alloc("buf0");
  p.Return({"buf0"});
  EXPECT_THROW(p.Plan(), ValueError);
  StoreAccess out_of_range;
  out_of_range.store = 3;
  EXPECT_THROW(p.Kernel({"buf0", "arg0"}, out_of_range), ValueError);
  EXPECT_THROW(p.Declare("buf1", -1, "f32"), ValueError);
}

TEST(SpanBytes, CountsTheGapsOfAStridedLayout) {
  EXPECT_EQ(SpanBytes({2, 2}, {4, 1}, 4), 24);  // 6 elements
  EXPECT_EQ(SpanBytes({2, 3}, {3, 1}, 8), 48);
  EXPECT_EQ(SpanBytes({}, {}, 2), 2);           // a scalar
  EXPECT_EQ(SpanBytes({4, 0}, {1, 1}, 4), 0);   // empty
  EXPECT_EQ(SpanBytes({3}, {-2}, 4), 20);       // a negative stride spans alike
  EXPECT_THROW(SpanBytes({3}, {}, 4), ValueError);
}

codegen::Index At(int64_t offset, std::vector<int64_t> outer, int64_t inner) {
  codegen::Index ix;
  ix.offset = offset;
  ix.outer_strides = std::move(outer);
  ix.inner_stride = inner;
  return ix;
}

codegen::Kernel OneStore(codegen::ExprPtr value, codegen::Index where, int buffers) {
  codegen::Kernel k;
  k.name = "k";
  for (int b = 0; b < buffers; ++b) k.buffers.push_back({"b" + std::to_string(b), codegen::DType::F32});
  k.outer = {4};
  codegen::Stmt st;
  st.kind = codegen::Stmt::Kind::kStore;
  st.buffer = 0;
  st.index = where;
  st.expr = std::move(value);
  k.loops.push_back({8, {st}});
  return k;
}

TEST(AnalyzeStoreAccess, FindsTheInputsReadOnlyAtTheStoredElement) {
  using codegen::Expr;
  using codegen::OpCode;
  const codegen::Index here = At(0, {8}, 1);
  // b0[i] = b1[i] * b1[i] + b2[i + 1] + b3[i]
  auto value = Expr::Op(OpCode::kAdd, {Expr::Op(OpCode::kAdd, {Expr::Op(OpCode::kMul, {Expr::Load(1, here), Expr::Load(1, here)}),
                                                               Expr::Load(2, At(1, {8}, 1))}),
                                       Expr::Cast(Expr::Load(3, here), codegen::DType::F32)});
  StoreAccess a = AnalyzeStoreAccess(OneStore(value, here, 5));
  EXPECT_EQ(a.store, 0);
  EXPECT_EQ(a.read_at_store, (std::vector<int>{1, 3}));  // b2 read elsewhere, b4 never read

  // a load at the stored index and one elsewhere: not in place
  auto mixed = Expr::Op(OpCode::kSub, {Expr::Load(1, here), Expr::Load(1, At(0, {8}, 0))});
  EXPECT_TRUE(AnalyzeStoreAccess(OneStore(mixed, here, 2)).read_at_store.empty());

  codegen::Kernel two = OneStore(Expr::Load(1, here), here, 2);
  two.loops[0].stmts.push_back(two.loops[0].stmts[0]);
  EXPECT_EQ(AnalyzeStoreAccess(two).store, -1);
}

TEST(ReadThroughStore, LoadsOfTheVictimReadTheOutputAndTheVictimLeavesTheArguments) {
  // out_ptr0 (position 2) written over in_ptr1 (position 1): golden text in, golden text out
  codegen::Kernel k = codegen::ParseKernelText(
      "kernel cpp_fused_add_exp_0\n"
      "buffers in_ptr0:f32 in_ptr1:f32 out_ptr0:f32 in_ptr3:f32\n"
      "outer 4\n"
      "loop 8\n"
      "  store 2(0;8,;1) add(exp(L1(0;8,;1),),add(L0(0;0,;1),cast<f32>(L3(0;8,;1)),),)");
  EXPECT_EQ(codegen::Serialize(ReadThroughStore(k, 1, 2)),
            "kernel cpp_fused_add_exp_0\n"
            "buffers in_ptr0:f32 out_ptr0:f32 in_ptr3:f32\n"
            "outer 4\n"
            "loop 8\n"
            "  store 1(0;8,;1) add(exp(L1(0;8,;1),),add(L0(0;0,;1),cast<f32>(L2(0;8,;1)),),)");
  // a victim after the output: positions before it stay
  EXPECT_EQ(codegen::Serialize(ReadThroughStore(k, 3, 2)),
            "kernel cpp_fused_add_exp_0\n"
            "buffers in_ptr0:f32 in_ptr1:f32 out_ptr0:f32\n"
            "outer 4\n"
            "loop 8\n"
            "  store 2(0;8,;1) add(exp(L1(0;8,;1),),add(L0(0;0,;1),cast<f32>(L2(0;8,;1)),),)");
  EXPECT_THROW(ReadThroughStore(k, 2, 2), ValueError);
  EXPECT_THROW(ReadThroughStore(k, 4, 2), ValueError);
}

}  // namespace
}  // namespace kiln::inductor
