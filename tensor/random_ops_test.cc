// tensor/random_ops_test.cc: tensor/ops/random.cc: seed reproducibility (also across thread
// counts), distribution moments, integer ranges, permutations, views, meta tensors and errors.
#include <algorithm>
#include <set>

#include "runtime/thread_pool.h"
#include "tensor/testing/op_test_util.h"

namespace kiln {
namespace {

using namespace ::kiln::optest;  // NOLINT: test helpers

// --- random.cc ------------------------------------------------------------------------------


Tensor Randn(const SL& size, OptGen g = std::nullopt, ScalarType dtype = ScalarType::Float32, Device dev = Device()) {
  return Call("aten::randn.generator", size, g, OptDtype(dtype), OptLayout(), OptDevice(dev), OptBool());
}
Tensor Rand(const SL& size, OptGen g = std::nullopt, ScalarType dtype = ScalarType::Float32) {
  return Call("aten::rand.generator", size, g, OptDtype(dtype), OptLayout(), OptDevice(), OptBool());
}
std::pair<double, double> MeanVar(const std::vector<double>& v) {
  double m = 0, q = 0;
  for (double x : v) m += x;
  m /= v.size();
  for (double x : v) q += (x - m) * (x - m);
  return {m, q / v.size()};
}

TEST(RandomOps, ManualSeedReproduces) {
  DefaultCPUGenerator()->manual_seed(42);
  std::vector<float> a = FV(Call("aten::randn", SL{1000}, OptDtype(), OptLayout(), OptDevice(), OptBool()));
  std::vector<float> a2 = FV(Call("aten::randn", SL{1000}, OptDtype(), OptLayout(), OptDevice(), OptBool()));
  DefaultCPUGenerator()->manual_seed(42);
  std::vector<float> b = FV(Call("aten::randn", SL{1000}, OptDtype(), OptLayout(), OptDevice(), OptBool()));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, a2);
  // An explicit generator is its own stream and leaves the default one alone.
  uint64_t before = DefaultCPUGenerator()->offset();
  Generator g1 = std::make_shared<GeneratorImpl>(7), g2 = std::make_shared<GeneratorImpl>(7);
  EXPECT_EQ(FV(Rand({64}, g1)), FV(Rand({64}, g2)));
  EXPECT_EQ(DefaultCPUGenerator()->offset(), before);
  EXPECT_GT(g1->offset(), 0u);
}

TEST(RandomOps, ParallelResultsDependOnlyOnSeed) {
  const int saved = GetNumThreads();
  std::vector<std::vector<float>> runs;
  for (int threads : {1, 2, 3}) {
    SetNumThreads(threads);
    Generator g = std::make_shared<GeneratorImpl>(123);
    Tensor x = Randn({1 << 18}, g);
    Tensor u = Rand({1 << 18}, g);
    std::vector<float> v = FV(x), w = FV(u);
    v.insert(v.end(), w.begin(), w.end());
    runs.push_back(v);
  }
  SetNumThreads(saved);
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_EQ(runs[0], runs[2]);
}

TEST(RandomOps, Distributions) {
  Generator g = std::make_shared<GeneratorImpl>(2024);
  for (ScalarType t : {ScalarType::Float32, ScalarType::Float64}) {
    auto [m, v] = MeanVar(Vec<double>(Randn({200000}, g, t)));
    EXPECT_NEAR(m, 0.0, 0.01);
    EXPECT_NEAR(v, 1.0, 0.02);
  }
  Tensor u = Call("aten::uniform_", ops::empty({SymInt(100000)}, ScalarType::Float32), 2.0, 5.0, OptGen(g));
  std::vector<double> uv = Vec<double>(u);
  EXPECT_GE(*std::min_element(uv.begin(), uv.end()), 2.0);
  EXPECT_LT(*std::max_element(uv.begin(), uv.end()), 5.0);
  EXPECT_NEAR(MeanVar(uv).first, 3.5, 0.02);
  Tensor n = Call("aten::normal_", ops::empty({SymInt(100000)}, ScalarType::Float64), 3.0, 2.0, OptGen(g));
  auto [nm, nv] = MeanVar(Vec<double>(n));
  EXPECT_NEAR(nm, 3.0, 0.03);
  EXPECT_NEAR(nv, 4.0, 0.1);
  Tensor b = Call("aten::bernoulli.p", ops::empty({SymInt(100000)}, ScalarType::Float32), 0.3, OptGen(g));
  EXPECT_NEAR(MeanVar(Vec<double>(b)).first, 0.3, 0.01);
  EXPECT_EQ(FV(Call("aten::bernoulli", F({0, 1, 0, 1}), OptGen(g))), (std::vector<float>{0, 1, 0, 1}));
  Tensor hb = Call("aten::rand.generator", SL{1000}, OptGen(g), OptDtype(ScalarType::BFloat16), OptLayout(),
                   OptDevice(), OptBool());
  EXPECT_EQ(hb.dtype(), ScalarType::BFloat16);
}

TEST(RandomOps, IntegersAndPermutations) {
  Generator g = std::make_shared<GeneratorImpl>(5);
  Tensor r = Call("aten::randint.low_generator", SymInt(3), SymInt(7), SL{1000}, OptGen(g), OptDtype(), OptLayout(),
                  OptDevice(), OptBool());
  EXPECT_EQ(r.dtype(), ScalarType::Int64);
  std::vector<int64_t> rv = LV(r);
  std::set<int64_t> seen(rv.begin(), rv.end());
  EXPECT_EQ(seen, (std::set<int64_t>{3, 4, 5, 6}));
  Tensor r2 = Call("aten::randint", SymInt(2), SL{2, 3}, OptDtype(ScalarType::Int32), OptLayout(), OptDevice(),
                   OptBool());
  EXPECT_EQ(r2.dtype(), ScalarType::Int32);
  EXPECT_EQ(r2.sizes(), Shape({2, 3}));
  ExpectError<Error>([] { Call("aten::randint.low", SymInt(5), SymInt(3), SL{2}, OptDtype(), OptLayout(), OptDevice(),
                               OptBool()); },
                     "random_ expects 'from' to be less than 'to', but got from=5 >= to=3");
  Tensor bits = Call("aten::random_", ops::empty({SymInt(100)}, ScalarType::Bool), OptGen(g));
  std::vector<int64_t> bv = LV(bits);
  EXPECT_EQ(std::set<int64_t>(bv.begin(), bv.end()), (std::set<int64_t>{0, 1}));
  std::vector<int64_t> tv = LV(Call("aten::random_.to", ops::empty({SymInt(100)}, ScalarType::Int32), int64_t(5), OptGen(g)));
  EXPECT_LT(*std::max_element(tv.begin(), tv.end()), 5);
  EXPECT_GE(*std::min_element(tv.begin(), tv.end()), 0);
  Generator p1 = std::make_shared<GeneratorImpl>(9), p2 = std::make_shared<GeneratorImpl>(9);
  std::vector<int64_t> perm = LV(Call("aten::randperm.generator", SymInt(10), OptGen(p1), OptDtype(), OptLayout(),
                                      OptDevice(), OptBool()));
  std::vector<int64_t> perm2 = LV(Call("aten::randperm.generator", SymInt(10), OptGen(p2), OptDtype(), OptLayout(),
                                       OptDevice(), OptBool()));
  EXPECT_EQ(perm, perm2);
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, LV(Arange(10, ScalarType::Int64)));
  EXPECT_NE(perm, sorted);
  ExpectError<Error>([] { Call("aten::randperm", SymInt(-1), OptDtype(), OptLayout(), OptDevice(), OptBool()); },
                     "n must be non-negative, got-1");
}

TEST(RandomOps, InPlaceOnViewsLikeAndMeta) {
  // Sampling into a transposed view fills it in its own row-major order.
  Generator g1 = std::make_shared<GeneratorImpl>(11), g2 = std::make_shared<GeneratorImpl>(11);
  Tensor base = ops::empty({SymInt(3), SymInt(4)}, ScalarType::Float32);
  Tensor view = ops::transpose(base, 0, 1);
  Call("aten::normal_", view, 0.0, 1.0, OptGen(g1));
  EXPECT_EQ(FV(view), FV(Randn({4, 3}, g2)));
  Tensor like = Call("aten::randn_like.generator", view, OptGen(g1), OptDtype(ScalarType::Float64), OptLayout(),
                     OptDevice(), OptBool(), OptMF());
  EXPECT_EQ(like.sizes(), Shape({4, 3}));
  EXPECT_EQ(like.dtype(), ScalarType::Float64);
  Tensor ri = Call("aten::randint_like.low_dtype", L({0, 0, 0}), SymInt(10), SymInt(12), OptDtype(), OptLayout(),
                   OptDevice(), OptBool(), OptMF());
  for (int64_t v : LV(ri)) EXPECT_TRUE(v == 10 || v == 11);
  std::vector<float> rl = FV(Call("aten::rand_like", F({0, 0}), OptDtype(), OptLayout(), OptDevice(), OptBool(), OptMF()));
  for (float v : rl) EXPECT_TRUE(v >= 0 && v < 1);
  // Meta tensors get shapes and draw nothing.
  Generator gm = std::make_shared<GeneratorImpl>(1);
  Tensor m = Randn({5, 2}, gm, ScalarType::Float32, Device(DeviceType::Meta));
  EXPECT_TRUE(m.device().is_meta());
  EXPECT_EQ(m.sizes(), Shape({5, 2}));
  EXPECT_EQ(gm->offset(), 0u);
}

TEST(RandomOps, Errors) {
  ExpectError<Error>([] { Call("aten::uniform_", F({0}), 2.0, 1.0, OptGen()); },
                     "uniform_ expects to return a [from, to) range, but found from=2 > to=1");
  ExpectError<Error>([] { Call("aten::normal_", F({0}), 0.0, -1.0, OptGen()); },
                     "normal expects std >= 0.0, but found std -1");
  ExpectError<NotImplementedError>([] { Call("aten::rand", SL{2}, OptDtype(ScalarType::Int64), OptLayout(), OptDevice(),
                                              OptBool()); },
                     "\"check_uniform_bounds\" not implemented for 'Long'");
  ExpectError<Error>([] { Call("aten::bernoulli_.float", F({0}), 2.0, OptGen()); },
                     "bernoulli_ expects p to be in [0, 1], but got p=2");
  ExpectError<Error>([] { Call("aten::bernoulli", F({1.5}), OptGen()); },
                     "Expected p_in >= 0 && p_in <= 1 to be true, but got false.");
}

}  // namespace
}  // namespace kiln
