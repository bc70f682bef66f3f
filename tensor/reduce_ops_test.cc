// tensor/reduce_ops_test.cc: hand-checked values and error cases for the reductions in
// tensor/ops/reduce_more.cc and reduce_stats.cc, through the dispatcher (CPU and meta).
#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "tensor/ops/common.h"
#include "tensor/testing/value_test_util.h"

namespace kiln {
namespace {

using namespace valuetest;  // NOLINT: test helpers

// --- prod ------------------------------------------------------------------------------------

TEST(ReduceOps, Prod) {
  Tensor x = Make({1, 2, 3, 4}, {2, 2});
  ExpectNear(Values(Call("aten::prod", x, OptSt())), {24});
  ExpectNear(Values(Call("aten::prod.dim_int", x, int64_t(1), false, OptSt())), {2, 12});
  EXPECT_EQ(Sizes(Call("aten::prod.dim_int", x, int64_t(0), true, OptSt())), (IntList{1, 2}));
  Tensor xi = Make<int32_t>({2, 3, 4}, {3});
  EXPECT_EQ(Values<int64_t>(Call("aten::prod", xi, OptSt())), (std::vector<int64_t>{24}));
  EXPECT_EQ(Values<double>(Call("aten::prod", xi, OptSt(ScalarType::Float64))), (std::vector<double>{24}));
  Tensor empty = Make<float>({}, {0, 3});
  ExpectNear(Values(Call("aten::prod.dim_int", empty, int64_t(0), false, OptSt())), {1, 1, 1});
  Tensor h = Make({2, 0.5f, 8}, {3}, ScalarType::Float16);
  EXPECT_EQ(Call("aten::prod", h, OptSt()).dtype(), ScalarType::Float16);
  ExpectNear(Values(CastTo(Call("aten::prod", h, OptSt()), ScalarType::Float32)), {8});
}

// --- max / min / amax / amin / argmax / argmin ------------------------------------------------

TEST(ReduceOps, MaxMinAll) {
  Tensor x = Make({3, -1, 7, 2}, {2, 2});
  ExpectNear(Values(Call("aten::max", x)), {7});
  ExpectNear(Values(Call("aten::min", x)), {-1});
  ExpectNear(Values(Call("aten::max", Make({1, kNaN, 5}, {3}))), {kNaN});
  ExpectNear(Values(Call("aten::min", Make({1, kNaN, -5}, {3}))), {kNaN});
  EXPECT_EQ(Values<bool>(Call("aten::max", Make<uint8_t>({0, 1}, {2}, ScalarType::Bool))), std::vector<bool>{true});
  ExpectError<Error>([&] { Call("aten::max", Make<float>({}, {0})); },
                     "max(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction "
                     "dim with the 'dim' argument.");
  ExpectError<Error>([&] { Call("aten::min", Meta({2, 0})); },
                     "min(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction "
                     "dim with the 'dim' argument.");
}

TEST(ReduceOps, ReducedFloatsAndOther) {
  Tensor h = Make({1.5f, -2, 4, 0.25f}, {2, 2}, ScalarType::Float16);
  auto [v, i] = Call2("aten::max.dim", h, int64_t(0), false);
  EXPECT_EQ(v.dtype(), ScalarType::Float16);
  ExpectNear(Values(CastTo(v, ScalarType::Float32)), {4, 0.25f});
  EXPECT_EQ(Values<int64_t>(i), (std::vector<int64_t>{1, 1}));
  Tensor b = Make({1, 2, 3, 4}, {4}, ScalarType::BFloat16);
  ExpectNear(Values(CastTo(Call("aten::var", b, true), ScalarType::Float32)), {5.0f / 3}, 1e-2);
  ExpectNear(Values(CastTo(Call("aten::amin", b, IntList{}, false), ScalarType::Float32)), {1});
  ExpectNear(Values(Call("aten::max.other", Make({1, 5}, {2}), Make({3, 2}, {2}))), {3, 5});
  ExpectNear(Values(Call("aten::min.other", Make({1, 5}, {2}), Make({3, 2}, {2}))), {1, 2});
}

TEST(ReduceOps, MaxDimValuesAndIndices) {
  Tensor x = Make({1, 5, 5, 9, 2, 9}, {2, 3});
  auto [v, i] = Call2("aten::max.dim", x, int64_t(1), false);
  ExpectNear(Values(v), {5, 9});
  EXPECT_EQ(Values<int64_t>(i), (std::vector<int64_t>{1, 0}));  // ties: first index
  auto [v0, i0] = Call2("aten::min.dim", x, int64_t(0), true);
  EXPECT_EQ(Sizes(v0), (IntList{1, 3}));
  ExpectNear(Values(v0), {1, 2, 5});
  EXPECT_EQ(Values<int64_t>(i0), (std::vector<int64_t>{0, 1, 0}));
  auto [vn, in] = Call2("aten::max.dim", Make({1, kNaN, 3, kNaN}, {4}), int64_t(0), false);
  ExpectNear(Values(vn), {kNaN});
  EXPECT_EQ(Values<int64_t>(in), (std::vector<int64_t>{1}));
  // Transposed (non-contiguous) input.
  auto [vt, it] = Call2("aten::max.dim", ops::transpose(x, 0, 1), int64_t(-1), false);
  ExpectNear(Values(vt), {9, 5, 9});
  EXPECT_EQ(Values<int64_t>(it), (std::vector<int64_t>{1, 0, 1}));
  ExpectError<IndexError>([&] { Call2("aten::max.dim", Make<float>({}, {2, 0}), int64_t(-1), false); },
                          "max(): Expected reduction dim 1 to have non-zero size.");
  auto [ve, ie] = Call2("aten::max.dim", Make<float>({}, {0, 2}), int64_t(1), false);
  EXPECT_EQ(Sizes(ve), (IntList{0}));
  auto [mv, mi] = Call2("aten::max.dim", Meta({4, 5}), int64_t(0), true);
  EXPECT_EQ(Sizes(mv), (IntList{1, 5}));
  EXPECT_EQ(mi.dtype(), ScalarType::Int64);
  EXPECT_TRUE(mv.device().is_meta());
}

TEST(ReduceOps, AmaxAmin) {
  Tensor x = Make({1, 4, -2, 8, 0, 3}, {2, 3});
  ExpectNear(Values(Call("aten::amax", x, IntList{}, false)), {8});
  ExpectNear(Values(Call("aten::amax", x, IntList{0}, false)), {8, 4, 3});
  ExpectNear(Values(Call("aten::amin", x, IntList{1}, false)), {-2, 0});
  ExpectNear(Values(Call("aten::amax", x, IntList{0, 1}, true)), {8});
  ExpectNear(Values(Call("aten::amax", Make({1, kNaN, 2, 3}, {2, 2}), IntList{1}, false)), {kNaN, 3});
  Tensor xi = Make<int64_t>({5, -7, 2}, {3});
  EXPECT_EQ(Values<int64_t>(Call("aten::amin", xi, IntList{}, false)), (std::vector<int64_t>{-7}));
  ExpectError<Error>([&] { Call("aten::amax", Make<float>({}, {0, 3}), IntList{}, false); },
                     "amax(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction "
                     "dim with the 'dim' argument.");
  ExpectError<IndexError>([&] { Call("aten::amin", Make<float>({}, {0, 3}), IntList{0}, false); },
                          "amin(): Expected reduction dim 0 to have non-zero size.");
  EXPECT_EQ(Sizes(Call("aten::amax", Make<float>({}, {0, 3}), IntList{1}, false)), (IntList{0}));
  EXPECT_EQ(Sizes(Call("aten::amax", Meta({2, 3, 4}), IntList{0, 2}, true)), (IntList{1, 3, 1}));
}

TEST(ReduceOps, ArgmaxArgmin) {
  Tensor x = Make({1, 9, 3, 9, 0, -4}, {2, 3});
  EXPECT_EQ(Values<int64_t>(Call("aten::argmax", x, std::optional<int64_t>(), false)), (std::vector<int64_t>{1}));
  EXPECT_EQ(Values<int64_t>(Call("aten::argmin", x, std::optional<int64_t>(), false)), (std::vector<int64_t>{5}));
  EXPECT_EQ(Values<int64_t>(Call("aten::argmax", x, std::optional<int64_t>(0), false)),
            (std::vector<int64_t>{1, 0, 0}));
  EXPECT_EQ(Sizes(Call("aten::argmax", x, std::optional<int64_t>(), true)), (IntList{1, 1}));
  EXPECT_EQ(Values<int64_t>(Call("aten::argmax", Make({1, kNaN, 3}, {3}), std::optional<int64_t>(), false)),
            (std::vector<int64_t>{1}));
  ExpectError<Error>([&] {
    Call("aten::argmax", Make<uint8_t>({1}, {1}, ScalarType::Bool), std::optional<int64_t>(), false);
  },
                     "\"argmax_cpu\" not implemented for 'Bool'");
  ExpectError<IndexError>([&] { Call("aten::argmin", Make<float>({}, {0}), std::optional<int64_t>(), false); },
                          "argmin(): Expected reduction dim to be specified for input.numel() == 0.");
  ExpectError<IndexError>([&] { Call("aten::argmax", x, std::optional<int64_t>(2), false); },
                          "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
}

// --- any / all / count_nonzero ---------------------------------------------------------------

TEST(ReduceOps, AnyAllCountNonzero) {
  Tensor x = Make({0, 1, 0, 0, 2, 3}, {2, 3});
  EXPECT_EQ(Values<bool>(Call("aten::any", x)), std::vector<bool>{true});
  EXPECT_EQ(Values<bool>(Call("aten::all", x)), std::vector<bool>{false});
  EXPECT_EQ(Values<bool>(Call("aten::all.dim", x, int64_t(0), false)), (std::vector<bool>{false, true, false}));
  EXPECT_EQ(Values<bool>(Call("aten::any.dim", x, int64_t(1), false)), (std::vector<bool>{true, true}));
  EXPECT_EQ(Values<bool>(Call("aten::any.dims", x, Dims(), false)), std::vector<bool>{true});
  EXPECT_EQ(Values<bool>(Call("aten::all", Make<float>({}, {0}))), std::vector<bool>{true});
  EXPECT_EQ(Values<bool>(Call("aten::any", Make<float>({}, {0}))), std::vector<bool>{false});
  EXPECT_EQ(Values<bool>(Call("aten::any", Make({kNaN}, {1}))), std::vector<bool>{true});
  EXPECT_EQ(Call("aten::all", Make<uint8_t>({1, 2}, {2})).dtype(), ScalarType::UInt8);
  EXPECT_EQ(Values<int64_t>(Call("aten::count_nonzero", x, std::optional<int64_t>())), (std::vector<int64_t>{3}));
  EXPECT_EQ(Values<int64_t>(Call("aten::count_nonzero", x, std::optional<int64_t>(0))),
            (std::vector<int64_t>{0, 2, 1}));
  EXPECT_EQ(Values<int64_t>(Call("aten::count_nonzero.dim_IntList", x, IntList{0, 1})), (std::vector<int64_t>{3}));
}

// --- var / std / var_mean ----------------------------------------------------------------------

TEST(ReduceOps, VarStd) {
  Tensor x = Make({1, 2, 3, 4}, {4});
  ExpectNear(Values(Call("aten::var", x, true)), {5.0f / 3});
  ExpectNear(Values(Call("aten::var", x, false)), {1.25f});
  ExpectNear(Values(Call("aten::std", x, true)), {std::sqrt(5.0f / 3)});
  ExpectNear(Values(Call("aten::var.correction", x, Dims(), std::optional<Scalar>(Scalar(int64_t(0))), false)),
             {1.25f});
  ExpectNear(Values(Call("aten::var.correction", x, Dims(), std::optional<Scalar>(Scalar(2.0)), false)), {2.5f});
  Tensor m = Make({1, 2, 3, 5, 7, 9}, {2, 3});
  ExpectNear(Values(Call("aten::var.dim", m, Dims(IntList{1}), true, false)), {1, 4});
  ExpectNear(Values(Call("aten::std.dim", m, Dims(IntList{0}), false, true)), {2, 2.5f, 3});
  EXPECT_EQ(Sizes(Call("aten::std.dim", m, Dims(IntList{0}), false, true)), (IntList{1, 3}));
  ExpectNear(Values(Call("aten::var", Make({3}, {1}), true)), {kNaN});       // N - 1 == 0
  ExpectNear(Values(Call("aten::var", Make<float>({}, {0}), false)), {kNaN});
  // Large offset: two-pass keeps precision.
  ExpectNear<double>(Values<double>(Call("aten::var", Make<double>({1e9 + 1, 1e9 + 2, 1e9 + 3}, {3}), true)), {1.0});
  auto [v, mean] = Call2("aten::var_mean", m, true);
  ExpectNear(Values(v), {9.5f});
  ExpectNear(Values(mean), {4.5f});
  auto [s, mean2] = Call2("aten::std_mean.dim", m, Dims(IntList{1}), true, true);
  ExpectNear(Values(s), {1, 2});
  ExpectNear(Values(mean2), {2, 7});
  EXPECT_EQ(Sizes(mean2), (IntList{2, 1}));
  ExpectError<Error>([&] { Call("aten::var", Make<int64_t>({1, 2}, {2}), true); },
                     "std and var only support floating point and complex dtypes");
  EXPECT_EQ(Sizes(Call("aten::var.correction", Meta({3, 4}), Dims(IntList{-1}), std::optional<Scalar>(), true)),
            (IntList{3, 1}));
}

// --- outer sums ------------------------------------------------------------------------------

// Note [Outer sums in float] (tensor/ops/reduce.cc): sums over leading dims of float32 go down rows
// in groups of 16 and column tiles of 32, 8 and 1. Shapes with a partial row group and columns left
// over for each tile width, and a leading kept dim; small integers, so every order sums exactly.
TEST(ReduceOps, OuterFloatSumsEveryTileAndRowGroup) {
  for (const IntList& shape : {IntList{37, 45}, IntList{16, 32}, IntList{3, 21, 77}, IntList{5, 1}}) {
    const bool three = shape.size() == 3;
    const int64_t P = three ? shape[0] : 1, R = shape[three ? 1 : 0], K = shape.back();
    std::vector<float> x(P * R * K);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int64_t>(i * 7919 % 23) - 11);
    std::vector<float> want(P * K, 0.f);
    for (int64_t p = 0; p < P; ++p)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t k = 0; k < K; ++k) want[p * K + k] += x[(p * R + r) * K + k];
    Tensor t = Make(x, shape);
    Tensor sum = Call("aten::sum.dim_IntList", t, Dims(IntList{three ? 1 : 0}), false, OptSt());
    EXPECT_EQ(Values(sum), want);
    std::vector<float> mean = want;
    for (float& m : mean) m /= static_cast<float>(R);
    ExpectNear(Values(Call("aten::mean.dim", t, Dims(IntList{three ? 1 : 0}), false, OptSt())), mean);
  }
}

// --- logsumexp ------------------------------------------------------------------------------

TEST(ReduceOps, Logsumexp) {
  ExpectNear(Values(Call("aten::logsumexp", Make({0, 0}, {2}), IntList{0}, false)), {std::log(2.0f)});
  ExpectNear(Values(Call("aten::logsumexp", Make({1000, 1000, -1000, 5}, {2, 2}), IntList{1}, false)),
             {1000 + std::log(2.0f), 5});
  ExpectNear(Values(Call("aten::logsumexp", Make({-kInf, -kInf}, {2}), IntList{0}, false)), {-kInf});
  ExpectNear(Values(Call("aten::logsumexp", Make({kInf, 1}, {2}), IntList{0}, false)), {kInf});
  ExpectNear(Values(Call("aten::logsumexp", Make({kNaN, 1}, {2}), IntList{0}, false)), {kNaN});
  Tensor li = Call("aten::logsumexp", Make<int64_t>({0, 0}, {2}), IntList{0}, false);
  EXPECT_EQ(li.dtype(), ScalarType::Float32);
  EXPECT_EQ(Sizes(Call("aten::logsumexp", Meta({2, 5}), IntList{1}, true)), (IntList{2, 1}));
}

// --- norms -----------------------------------------------------------------------------------

TEST(ReduceOps, VectorNorm) {
  Tensor x = Make({3, -4}, {2});
  auto norm = [&](Scalar p) { return Values(Call("aten::linalg_vector_norm", x, p, Dims(), false, OptSt()))[0]; };
  EXPECT_NEAR(norm(int64_t(2)), 5, 1e-6);
  EXPECT_NEAR(norm(int64_t(1)), 7, 1e-6);
  EXPECT_NEAR(norm(double(INFINITY)), 4, 1e-6);
  EXPECT_NEAR(norm(double(-INFINITY)), 3, 1e-6);
  EXPECT_NEAR(norm(int64_t(0)), 2, 1e-6);
  EXPECT_NEAR(norm(3.0), std::cbrt(91.0), 1e-5);
  Tensor m = Make({3, 4, 6, 8}, {2, 2});
  ExpectNear(Values(Call("aten::norm.ScalarOpt_dim", m, std::optional<Scalar>(), IntList{1}, false)), {5, 10});
  ExpectNear(Values(Call("aten::norm.Scalar", m, Scalar(int64_t(1)))), {21});
  ExpectNear(Values(Call("aten::linalg_vector_norm", Make<float>({}, {0}), Scalar(int64_t(2)), Dims(), false,
                         OptSt())), {0});
  ExpectError<Error>([&] { Call("aten::linalg_vector_norm", Make<float>({}, {0, 2}), Scalar(double(INFINITY)), Dims(),
                                false, OptSt()); },
                     "linalg.vector_norm cannot compute the inf norm on an empty tensor because the operation does "
                     "not have an identity");
  ExpectError<Error>([&] { Call("aten::norm.Scalar", Make<int64_t>({1}, {1}), Scalar(int64_t(2))); },
                     "norm(): input dtype should be either floating point or complex. Got Long instead.");
  ExpectError<Error>([&] { Call("aten::linalg_vector_norm", Make<int64_t>({1}, {1}), Scalar(int64_t(2)), Dims(),
                                false, OptSt()); },
                     "linalg.vector_norm: Expected a floating point or complex tensor as input. Got Long");
  Tensor h = Call("aten::linalg_vector_norm", Make({3, 4}, {2}, ScalarType::BFloat16), Scalar(int64_t(2)), Dims(),
                  false, OptSt());
  EXPECT_EQ(h.dtype(), ScalarType::BFloat16);
  ExpectNear(Values(CastTo(h, ScalarType::Float32)), {5});
}

}  // namespace
}  // namespace kiln
