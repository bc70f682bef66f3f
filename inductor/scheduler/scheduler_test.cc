// inductor/scheduler/scheduler_test.cc: probes, realized values and snapshots, and the fusion
// decisions (Note [Recompute or realize], Note [Sibling reductions]).
#include <gtest/gtest.h>

#include "inductor/scheduler/fusion.h"
#include "inductor/scheduler/probe.h"
#include "inductor/scheduler/realization.h"
#include "inductor/scheduler/scheduler.h"
#include "runtime/error.h"

namespace kiln::inductor::scheduler {
namespace {

using codegen::DType;
using codegen::Expr;
using codegen::ExprPtr;
using codegen::OpCode;
using ir::Affine;
using ir::Pointwise;
using ir::Traced;

std::shared_ptr<Buffer> Buf(const char* name, std::vector<int64_t> shape, Buffer::Source source = Buffer::Source::kInput) {
  return std::make_shared<Buffer>(name, ScalarType::Float32, shape, ir::ContiguousStrides(shape), 0, source);
}

std::vector<Affine> Own(size_t n) {
  std::vector<Affine> idx;
  for (size_t d = 0; d < n; ++d) idx.push_back(Affine::Var(static_cast<int>(d)));
  return idx;
}

// A traced body: make(reads) over the reads of `inputs` at `index` each.
template <typename Make>
std::shared_ptr<Traced> Trace(const std::vector<std::shared_ptr<Value>>& inputs, const std::vector<Affine>& index,
                              Make make, int64_t as_of = -1) {
  ir::Tracer t;
  std::vector<ExprPtr> reads;
  for (const auto& v : inputs)
    reads.push_back(t.Read(v->handle(), index, v->kind() == Value::Kind::kPointwise ? as_of : -1));
  auto traced = std::make_shared<Traced>();
  traced->body = std::make_shared<ir::Body>(t.Finish(make(reads)));
  traced->inputs = inputs;
  return traced;
}

std::shared_ptr<Pointwise> Elementwise(OpCode op, const std::vector<std::shared_ptr<Value>>& inputs, int64_t as_of = -1) {
  const std::vector<int64_t> shape = inputs.front()->shape();
  auto traced = Trace(inputs, Own(shape.size()), [&](const std::vector<ExprPtr>& r) {
    return r.size() == 1 ? Expr::Op(op, {r[0]}) : Expr::Op(op, {r[0], r[1]});
  }, as_of);
  return std::make_shared<Pointwise>(ScalarType::Float32, shape, traced);
}

// sum over the last axis of a 2-d value of source(reads).
std::shared_ptr<Reduction> RowSum(const std::vector<std::shared_ptr<Value>>& inputs, OpCode op = OpCode::kMul) {
  const int64_t rows = inputs.front()->shape()[0], cols = inputs.front()->shape()[1];
  auto traced = Trace(inputs, {Affine::Var(0), Affine::Var(ir::kReduced)}, [&](const std::vector<ExprPtr>& r) {
    return r.size() == 1 ? r[0] : Expr::Op(op, {r[0], r[1]});
  });
  auto red = std::make_shared<Reduction>(ScalarType::Float32, std::vector<int64_t>{rows}, cols, "sum", traced,
                                         std::vector<int64_t>{rows, 1}, nullptr);
  red->axis = 1;
  return red;
}

TEST(Probe, InlinesLazyValuesAndRecordsLoadsByTheirRoots) {
  auto x = Buf("x", {4, 6});
  auto xt = std::make_shared<Buffer>(std::nullopt, ScalarType::Float32, std::vector<int64_t>{6, 4},
                                     std::vector<int64_t>{1, 6}, 0, x);
  auto y = Buf("y", {6, 4});
  auto e = Elementwise(OpCode::kExp, {xt});
  auto sum = Elementwise(OpCode::kAdd, {e, y});
  ProbeResult p = Probe(*sum, nullptr);
  ASSERT_EQ(p.loads.size(), 2u);
  EXPECT_EQ(p.loads[0].ToString(), "d0 + 6*d1") << "x.t() read through its strides";
  EXPECT_EQ(p.loads[1].ToString(), "4*d0 + d1");
  EXPECT_EQ(p.buffers, (std::vector<const Buffer*>{x.get(), y.get()})) << "the view counts as x";
  EXPECT_TRUE(p.Loads(*xt));
  EXPECT_FALSE(p.reads_reduction);
  EXPECT_EQ(codegen::ExprCost(*p.expr), codegen::OpCost(OpCode::kExp) + 1);
}

TEST(Probe, ARealizedValueIsLoadedFromItsBufferAsOfTheReadsSnapshot) {
  auto x = Buf("x", {4, 6});
  auto e = Elementwise(OpCode::kExp, {x});
  auto e_buf = Buf("buf0", {4, 6}, Buffer::Source::kKernel);
  Realization state;
  const int64_t before = state.Snapshot(state.now);
  state.now.Set(e, e_buf);
  auto now = Elementwise(OpCode::kNeg, {e});
  ProbeResult p = Probe(*now, &state);
  EXPECT_EQ(p.buffers, (std::vector<const Buffer*>{e_buf.get()}));
  EXPECT_EQ(codegen::ExprCost(*p.expr), 1) << "exp is computed by e's kernel";
  auto then = Elementwise(OpCode::kNeg, {e}, before);
  ProbeResult q = Probe(*then, &state);
  EXPECT_EQ(q.buffers, (std::vector<const Buffer*>{x.get()})) << "not realized as of the snapshot: recomputed";
  EXPECT_THROW(state.AsOf(5), ValueError);
}

TEST(Probe, AReductionsSourceIsPlacedOverItsKeptDimsAndR) {
  auto x = Buf("x", {4, 6});
  auto red = RowSum({x});
  ProbeResult p = Probe(*red, nullptr);
  ASSERT_EQ(p.loads.size(), 1u);
  EXPECT_EQ(p.loads[0].ToString(), "r + 6*d0");
  auto scaled = Elementwise(OpCode::kMul, {x, red});
  EXPECT_TRUE(Probe(*scaled, nullptr).reads_reduction);
}

TEST(Fusion, CheapValuesAreRecomputedAndOthersRealized) {
  auto x = Buf("x", {8, 8});
  auto y = Buf("y", {8, 8});
  auto centred = Elementwise(OpCode::kSub, {x, y});
  EXPECT_TRUE(CheapToRecompute(*centred, nullptr)) << "one subtraction per read";
  auto e = Elementwise(OpCode::kExp, {centred});  // 4 + 1
  EXPECT_FALSE(CheapToRecompute(*e, nullptr));
  Realization state;
  state.now.Set(centred, Buf("buf0", {8, 8}, Buffer::Source::kKernel));
  EXPECT_TRUE(CheapToRecompute(*e, &state)) << "centred is loaded: exp alone costs the budget";
  auto red = RowSum({x});
  EXPECT_FALSE(CheapToRecompute(*Elementwise(OpCode::kMul, {x, red}), nullptr)) << "reads a reduction";
  EXPECT_FALSE(CheapToRecompute(*red, nullptr)) << "a reduction is no plain pointwise value";
  auto epilogue = Elementwise(OpCode::kNeg, {x});
  epilogue->space = ir::LoopSpace{{8}, 8, 1};
  EXPECT_FALSE(CheapToRecompute(*epilogue, nullptr)) << "a reduction loop's value";
}

TEST(Fusion, SiblingReductionsShareASpaceAndABufferAndNothingPending) {
  auto dy = Buf("dy", {4, 6});
  auto x = Buf("x", {4, 6});
  auto other = Buf("other", {4, 6});
  Realization state;
  auto first = RowSum({dy});
  auto second = RowSum({dy, x});            // sum(dy * x): reads dy too
  auto unrelated = RowSum({other});         // same space, no shared buffer
  auto wide = RowSum({Buf("dy_t", {6, 4})}); // another space
  state.reductions = {first, second, unrelated, wide};
  std::vector<std::shared_ptr<Reduction>> want{second};
  EXPECT_EQ(SiblingReductions(*first, state, {}, {}), want);

  // a reduction already computed does not join; one deferred (its kernel not formed) does
  auto second_buf = Buf("buf1", {4, 1}, Buffer::Source::kKernel);
  state.now.Set(second, second_buf);
  EXPECT_TRUE(SiblingReductions(*first, state, {}, {}).empty());
  EXPECT_EQ(SiblingReductions(*first, state, {"buf1"}, {}), want);

  // no sibling reads a buffer no kernel has written yet (one being built)
  auto built = Buf("buf2", {4, 6}, Buffer::Source::kKernel);
  auto reads_built = RowSum({dy, built});
  state.reductions.push_back(reads_built);
  EXPECT_EQ(SiblingReductions(*first, state, {"buf1"}, {built.get()}), want);
  EXPECT_EQ(SiblingReductions(*first, state, {"buf1"}, {}),
            (std::vector<std::shared_ptr<Reduction>>{second, reads_built}));

  // nor one that reads a reduction's value
  auto reads_sum = Elementwise(OpCode::kMul, {dy, first});
  auto nested = RowSum({reads_sum});
  state.reductions = {first, nested};
  EXPECT_TRUE(SiblingReductions(*first, state, {}, {}).empty());
}

}  // namespace
}  // namespace kiln::inductor::scheduler

namespace kiln::inductor::scheduler {
namespace {

// A Pointwise over `shape` computing make(reads of `inputs`, each at its own broadcast index).
template <typename Make>
std::shared_ptr<Pointwise> Over(std::vector<int64_t> shape, const std::vector<std::pair<std::shared_ptr<Value>, std::vector<Affine>>>& reads,
                                Make make, std::set<std::string> ops) {
  ir::Tracer t;
  std::vector<ExprPtr> loads;
  auto traced = std::make_shared<Traced>();
  for (const auto& [v, idx] : reads) {
    loads.push_back(t.Read(v->handle(), idx));
    traced->inputs.push_back(v);
  }
  traced->body = std::make_shared<ir::Body>(t.Finish(make(loads)));
  auto out = std::make_shared<Pointwise>(ScalarType::Float32, std::move(shape), traced);
  out->ops = std::move(ops);
  return out;
}

// A formed kernel's listing without its first line (the hash of its text).
std::string Code(const Step& s) {
  std::string code = codegen::PrintKernel(*s.kernel->ir);
  return code.substr(code.find('\n') + 1);
}

std::vector<std::string> Kinds(const std::vector<Step>& steps) {
  std::vector<std::string> out;
  for (const Step& s : steps)
    out.push_back(s.kind == Step::Kind::kAlloc ? "alloc " + *s.buf->name
                  : s.kind == Step::Kind::kView ? "view " + *s.buf->name + " of " + *s.base->name
                                                : "kernel " + s.kernel->ir->name);
  return out;
}

TEST(Scheduler, ANormAndItsReductionAreOneKernel) {
  Scheduler s;
  auto x = Buf("x", {4, 8});
  auto sq = Over({4, 8}, {{x, Own(2)}}, [](const std::vector<ExprPtr>& r) { return Expr::Op(OpCode::kMul, {r[0], r[0]}); }, {"pow"});
  auto sum = RowSum({sq});
  sum->ops = {"mean"};
  auto y = Over({4, 8}, {{x, Own(2)}, {sum, {Affine::Var(0), Affine(0)}}},
                [](const std::vector<ExprPtr>& r) { return Expr::Op(OpCode::kMul, {r[0], Expr::Op(OpCode::kRsqrt, {r[1]})}); },
                {"mul", "rsqrt"});
  std::shared_ptr<Buffer> out = s.Realize(y);
  std::vector<Step> steps = s.TakeSteps();
  // named by the ops of the values realized and of the reductions accumulated (a lowering's value
  // carries the ops of what it reads: sq's pow would be among y's)
  ASSERT_EQ(Kinds(steps), (std::vector<std::string>{"alloc buf0", "kernel cpp_fused_mean_mul_rsqrt_0"}));
  EXPECT_EQ(out, steps[0].buf);
  // outer loop over the 4 rows; the sum's loop, then the store's, reading x in both
  EXPECT_EQ(Code(steps[1]), R"(void cpp_fused_mean_mul_rsqrt_0(float* in_ptr0, float* out_ptr0) {
  #pragma omp parallel for
  for (int64_t i0 = 0; i0 < 4; ++i0) {
    acc0 = 0;
    #pragma omp simd
    for (int64_t r = 0; r < 8; ++r) {
      acc0 = sum(acc0, (in_ptr0[8*i0 + r] * in_ptr0[8*i0 + r]));
    }
    #pragma omp simd
    for (int64_t r = 0; r < 8; ++r) {
      out_ptr0[8*i0 + r] = (in_ptr0[8*i0 + r] * rsqrt(acc0));
    }
  }
}
)");
  EXPECT_EQ(s.state.now.Get(*y), out);
  EXPECT_EQ(s.Realize(y), out) << "realized once";
  EXPECT_TRUE(s.TakeSteps().empty());
}

TEST(Scheduler, ADeferredReductionsKernelTakesItsSiblings) {
  Scheduler s;
  auto dy = Buf("dy", {4, 6});
  auto x = Buf("x", {4, 6});
  auto first = RowSum({dy});
  first->ops = {"sum"};
  auto second = RowSum({dy, x});
  second->ops = {"mul", "sum"};
  s.state.reductions = {first, second};
  std::shared_ptr<Buffer> deferred = s.Defer(first);
  EXPECT_TRUE(s.TakeSteps().empty()) << "no kernel until the buffer is used";
  s.Define(deferred);
  std::vector<Step> steps = s.TakeSteps();
  ASSERT_EQ(Kinds(steps), (std::vector<std::string>{"alloc buf0", "alloc buf1", "kernel cpp_fused_mul_sum_0"}));
  const codegen::Kernel& k = *steps[2].kernel->ir;
  ASSERT_EQ(k.loops.size(), 3u) << "two reductions' loops and the stores";
  EXPECT_EQ(k.buffers.size(), 4u);
  EXPECT_EQ(k.buffers[0].name, "in_ptr0");
  EXPECT_EQ(k.buffers[1].name, "out_ptr0");
  EXPECT_EQ(k.buffers[2].name, "in_ptr2");
  EXPECT_EQ(k.buffers[3].name, "out_ptr1");
  EXPECT_EQ(s.state.now.Get(*second), steps[1].buf);
  EXPECT_EQ(s.Define(deferred), deferred);
  EXPECT_TRUE(s.TakeSteps().empty());
}

TEST(Scheduler, ViewsAreDefinedFromTheirBase) {
  Scheduler s;
  auto x = Buf("x", {4, 6});
  auto e = Elementwise(OpCode::kExp, {x});
  e->ops = {"exp"};
  std::shared_ptr<Buffer> buf = s.Realize(e);
  auto row = std::make_shared<Buffer>(std::nullopt, ScalarType::Float32, std::vector<int64_t>{6}, std::vector<int64_t>{1},
                                      6, buf);
  s.Define(row);
  std::vector<Step> steps = s.TakeSteps();
  EXPECT_EQ(Kinds(steps), (std::vector<std::string>{"alloc buf0", "kernel cpp_fused_exp_0", "view buf1 of buf0"}));
  EXPECT_TRUE(s.IsDefined("buf1"));
  // a view starting where its base does is read through the base (no wrapper view)
  auto t = std::make_shared<Buffer>(std::nullopt, ScalarType::Float32, std::vector<int64_t>{6, 4},
                                    std::vector<int64_t>{1, 6}, 0, buf);
  auto neg = Elementwise(OpCode::kNeg, {t});
  neg->ops = {"neg"};
  s.Realize(neg);
  steps = s.TakeSteps();
  ASSERT_EQ(Kinds(steps), (std::vector<std::string>{"alloc buf2", "kernel cpp_fused_neg_1"}));
  EXPECT_EQ(steps[1].kernel->buffers[0], buf);
  EXPECT_FALSE(t->name.has_value());
}

TEST(Scheduler, AnOutputLayoutIsStoredInMemoryOrder) {
  Scheduler s;
  auto x = Buf("x", {3, 5});
  auto e = Elementwise(OpCode::kExp, {x});
  e->ops = {"exp"};
  std::shared_ptr<Buffer> out = s.KernelForPointwise(e, std::vector<int64_t>{1, 3});  // column-major
  EXPECT_EQ(out->stride(), (std::vector<int64_t>{1, 3}));
  std::vector<Step> steps = s.TakeSteps();
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(Code(steps[1]), R"(void cpp_fused_exp_0(float* in_ptr0, float* out_ptr0) {
  #pragma omp parallel for
  for (int64_t i0 = 0; i0 < 5; ++i0) {
    #pragma omp simd
    for (int64_t r = 0; r < 3; ++r) {
      out_ptr0[3*i0 + r] = exp(in_ptr0[i0 + 5*r]);
    }
  }
}
)");
}

TEST(Scheduler, TrailingDimensionsMergeWhereEveryLoadWalksThemAsOne) {
  Scheduler s;
  auto x = Buf("x", {2, 3, 4});
  auto e = Elementwise(OpCode::kExp, {x});
  std::optional<Merged> m = MergeDims(e, {1, 2}, &s.state);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->value->shape(), (std::vector<int64_t>{2, 12}));
  EXPECT_EQ(m->runs, (std::vector<std::vector<int>>{{0}, {1, 2}}));
  EXPECT_EQ(m->reduced, (std::vector<bool>{false, true}));
  // a buffer merges into a strided view of itself where its own strides walk the run as one
  std::optional<Merged> mb = MergeDims(x, {1, 2}, &s.state);
  ASSERT_TRUE(mb.has_value());
  auto view = std::static_pointer_cast<Buffer>(mb->value);
  EXPECT_EQ(view->shape(), (std::vector<int64_t>{2, 12}));
  EXPECT_EQ(view->stride(), (std::vector<int64_t>{12, 1}));
  EXPECT_EQ(view->base(), x);
  // x.transpose(1, 2) walks them apart: nothing merges
  auto xt = std::make_shared<Buffer>(std::nullopt, ScalarType::Float32, std::vector<int64_t>{2, 4, 3},
                                     std::vector<int64_t>{12, 1, 4}, 0, x);
  EXPECT_FALSE(MergeDims(Elementwise(OpCode::kExp, {xt}), {1, 2}, &s.state).has_value());
  EXPECT_FALSE(MergeDims(xt, {1, 2}, &s.state).has_value());
  // realized, a (2, 3, 4) value is one loop of 12 per row
  s.Realize(e);
  std::vector<Step> steps = s.TakeSteps();
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[1].kernel->ir->outer, (std::vector<int64_t>{2}));
  EXPECT_EQ(steps[1].kernel->ir->loops[0].extent, 12);
}

TEST(Scheduler, AKernelOfAnUnsupportedDtypeIsNotImplemented) {
  Scheduler s;
  auto x = std::make_shared<Buffer>("x", ScalarType::Float16, std::vector<int64_t>{3}, std::vector<int64_t>{1}, 0,
                                    Buffer::Source::kInput);
  EXPECT_THROW(s.Realize(Elementwise(OpCode::kNeg, {x})), NotImplementedError);
}

}  // namespace
}  // namespace kiln::inductor::scheduler
