// tensor/shape_ops_test.cc: hand-checked cases for tensor/ops/shape_ops.cc and ternary.cc (tril,
// sort, topk, one_hot, padding, repeat, flip, roll, clamp, lerp, addcmul, cumsum, eye, linspace).
#include "tensor/testing/op_test_util.h"

namespace kiln {
namespace {

using namespace ::kiln::optest;  // NOLINT: test helpers

// --- shape_ops.cc ---------------------------------------------------------------------------


TEST(ShapeOps, TrilTriu) {
  Tensor x = ops::view(Arange(9), {3, 3});
  EXPECT_EQ(FV(Call("aten::tril", x, int64_t(0))), (std::vector<float>{0, 0, 0, 3, 4, 0, 6, 7, 8}));
  EXPECT_EQ(FV(Call("aten::triu", x, int64_t(1))), (std::vector<float>{0, 1, 2, 0, 0, 5, 0, 0, 0}));
  EXPECT_EQ(FV(Call("aten::tril", x, int64_t(-1))), (std::vector<float>{0, 0, 0, 3, 0, 0, 6, 7, 0}));
  Tensor y = ops::clone(x);
  Tensor yt = ops::transpose(y, 0, 1);
  Call("aten::triu_", yt, int64_t(0));  // upper of the transpose = lower of y
  EXPECT_EQ(FV(y), (std::vector<float>{0, 0, 0, 3, 4, 0, 6, 7, 8}));
  ExpectError<Error>([] { Call("aten::tril", F({1, 2}), int64_t(0)); },
                     "tril: input tensor must have at least 2 dimensions");
}

TEST(ShapeOps, SortIsStableWithNanLargest) {
  Tensor x = F({3, kNan, 1, 2, 1});
  auto [v, i] = Call<TT>("aten::sort", x, int64_t(-1), false);
  EXPECT_EQ(LV(i), (std::vector<int64_t>{2, 4, 3, 0, 1}));
  EXPECT_TRUE(std::isnan(FV(v)[4]));
  auto [vd, id] = Call<TT>("aten::sort", x, int64_t(0), true);
  EXPECT_EQ(LV(id), (std::vector<int64_t>{1, 0, 3, 2, 4}));
  Tensor m = F({3, 1, 2, 4}, {2, 2});
  auto [mv, mi] = Call<TT>("aten::sort", m, int64_t(0), false);
  EXPECT_EQ(FV(mv), (std::vector<float>{2, 1, 3, 4}));
  EXPECT_EQ(LV(mi), (std::vector<int64_t>{1, 0, 0, 1}));
  EXPECT_EQ(LV(Call("aten::argsort", F({2, 0, 1}), int64_t(-1), true)), (std::vector<int64_t>{0, 2, 1}));
  auto [sv, si] = Call<TT>("aten::sort.stable", L({5, 3, 5}), std::optional<bool>(true), int64_t(-1), false);
  EXPECT_EQ(LV(sv), (std::vector<int64_t>{3, 5, 5}));
  EXPECT_EQ(LV(si), (std::vector<int64_t>{1, 0, 2}));
}

TEST(ShapeOps, Topk) {
  Tensor x = F({1, 5, 3, 5});
  auto [v, i] = Call<TT>("aten::topk", x, SymInt(2), int64_t(-1), true, true);
  EXPECT_EQ(FV(v), (std::vector<float>{5, 5}));
  EXPECT_EQ(LV(i), (std::vector<int64_t>{1, 3}));
  auto [vs, is] = Call<TT>("aten::topk", x, SymInt(3), int64_t(0), false, true);
  EXPECT_EQ(FV(vs), (std::vector<float>{1, 3, 5}));
  EXPECT_EQ(LV(is), (std::vector<int64_t>{0, 2, 1}));
  ExpectError<Error>([&] { Call<TT>("aten::topk", x, SymInt(5), int64_t(-1), true, true); },
                     "selected index k out of range");
}

TEST(ShapeOps, OneHot) {
  Tensor out = Call("aten::one_hot", L({0, 2}), int64_t(-1));
  EXPECT_EQ(out.sizes(), Shape({2, 3}));
  EXPECT_EQ(LV(out), (std::vector<int64_t>{1, 0, 0, 0, 0, 1}));
  EXPECT_EQ(Call("aten::one_hot", L({1}, {1, 1}), int64_t(4)).sizes(), Shape({1, 1, 4}));
  ExpectError<Error>([] { Call("aten::one_hot", L({-1}), int64_t(3)); }, "Class values must be non-negative.");
  ExpectError<Error>([] { Call("aten::one_hot", L({3}), int64_t(3)); }, "Class values must be smaller than num_classes.");
  ExpectError<Error>([] { Call("aten::one_hot", F({1}), int64_t(3)); },
                     "one_hot is only applicable to index tensor of type LongTensor.");
}

TEST(ShapeOps, Padding) {
  Tensor x = F({1, 2, 3, 4}, {2, 2});
  Tensor c = Call("aten::constant_pad_nd", x, SL{1, 0, 0, 1}, Scalar(9.0));
  EXPECT_EQ(c.sizes(), Shape({3, 3}));
  EXPECT_EQ(FV(c), (std::vector<float>{9, 1, 2, 9, 3, 4, 9, 9, 9}));
  EXPECT_EQ(FV(Call("aten::constant_pad_nd", F({1, 2, 3}), SL{-1, 1}, Scalar(int64_t(0)))),
            (std::vector<float>{2, 3, 0}));
  Tensor v = F({1, 2, 3}, {1, 3});
  using OptD = std::optional<double>;
  EXPECT_EQ(FV(Call("aten::pad", v, SL{2, 1}, std::string("reflect"), OptD())), (std::vector<float>{3, 2, 1, 2, 3, 2}));
  EXPECT_EQ(FV(Call("aten::pad", v, SL{2, 1}, std::string("replicate"), OptD())), (std::vector<float>{1, 1, 1, 2, 3, 3}));
  EXPECT_EQ(FV(Call("aten::pad", v, SL{2, 1}, std::string("circular"), OptD())), (std::vector<float>{2, 3, 1, 2, 3, 1}));
  EXPECT_EQ(FV(Call("aten::pad", v, SL{1, 0}, std::string("constant"), OptD(-1.0))), (std::vector<float>{-1, 1, 2, 3}));
  // reflect over the last two dims
  Tensor r = Call("aten::pad", x, SL{1, 0, 1, 0}, std::string("reflect"), OptD());
  EXPECT_EQ(FV(r), (std::vector<float>{4, 3, 4, 2, 1, 2, 4, 3, 4}));
  ExpectError<Error>([&] { Call("aten::pad", v, SL{3, 0}, std::string("reflect"), OptD()); },
                     "Padding size should be less than the corresponding input dimension, but got: padding (3, 0) at "
                     "dimension 1 of input [1, 3]");
  ExpectError<Error>([&] { Call("aten::constant_pad_nd", x, SL{1}, Scalar(0.0)); },
                     "Length of pad must be even but instead it equals 1");
  ExpectError<Error>([&] { Call("aten::constant_pad_nd", x, SL{1, 1, 1, 1, 1, 1}, Scalar(0.0)); },
                     "Pad length is 6 while the input has 2 dimensions.");
  ExpectError<Error>([&] { Call("aten::constant_pad_nd", x, SL{-2, -1}, Scalar(0.0)); },
                     "The input size 2, plus negative padding -2 and -1 resulted in a negative output size");
  EXPECT_EQ(FV(Call("aten::pad", v, SL{1, 0}, std::string("replicate"), OptD(0.0))), (std::vector<float>{1, 1, 2, 3}));
  ExpectError<Error>([&] { Call("aten::pad", v, SL{1, 0}, std::string("replicate"), OptD(1.0)); },
                     "Padding mode \"replicate\" doesn't take in value argument.");
  ExpectError<NotImplementedError>([&] { Call("aten::pad", v, SL{1, 1}, std::string("wrap"), OptD()); },
                                   "Unrecognised padding mode wrap");
}

TEST(ShapeOps, RepeatFlipRoll) {
  Tensor r = Call("aten::repeat", F({1, 2}), SL{2, 2});
  EXPECT_EQ(r.sizes(), Shape({2, 4}));
  EXPECT_EQ(FV(r), (std::vector<float>{1, 2, 1, 2, 1, 2, 1, 2}));
  EXPECT_EQ(FV(Call("aten::repeat", ops::transpose(F({1, 2}, {1, 2}), 0, 1), SL{1, 2})),
            (std::vector<float>{1, 1, 2, 2}));
  ExpectError<Error>([] { Call("aten::repeat", F({1, 2}, {1, 2}), SL{2}); },
                     "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor");
  Tensor x = ops::view(Arange(6), {2, 3});
  EXPECT_EQ(FV(Call("aten::flip", x, std::vector<int64_t>{0, 1})), (std::vector<float>{5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(FV(Call("aten::flip", x, std::vector<int64_t>{-1})), (std::vector<float>{2, 1, 0, 5, 4, 3}));
  ExpectError<Error>([&] { Call("aten::flip", x, std::vector<int64_t>{0, -2}); },
                     "dim 0 appears multiple times in the list of dims");
  EXPECT_EQ(FV(Call("aten::roll", Arange(5), SL{2}, SL{})), (std::vector<float>{3, 4, 0, 1, 2}));
  EXPECT_EQ(FV(Call("aten::roll", x, SL{1}, SL{1})), (std::vector<float>{2, 0, 1, 5, 3, 4}));
  EXPECT_EQ(FV(Call("aten::roll", x, SL{-1}, SL{})), (std::vector<float>{1, 2, 3, 4, 5, 0}));
  EXPECT_EQ(FV(Call("aten::roll", x, SL{1, 1}, SL{0, 1})), (std::vector<float>{5, 3, 4, 2, 0, 1}));
  ExpectError<Error>([&] { Call("aten::roll", x, SL{1, 2}, SL{0}); }, "shifts and dimensions must align. shifts: 2, dims:1");
}

TEST(ShapeOps, Clamp) {
  Tensor x = F({-2, 0.5, 3, kNan});
  std::vector<float> c = FV(Call("aten::clamp", x, OptScalar(0.0), OptScalar(1.0)));
  EXPECT_EQ(c[0], 0);
  EXPECT_EQ(c[1], 0.5);
  EXPECT_EQ(c[2], 1);
  EXPECT_TRUE(std::isnan(c[3]));
  Tensor i = Call("aten::clamp", L({-5, 5}), OptScalar(0.5), OptScalar());
  EXPECT_EQ(i.dtype(), ScalarType::Float32);
  EXPECT_EQ(FV(i), (std::vector<float>{0.5, 5}));
  EXPECT_EQ(LV(Call("aten::clamp_max", L({-5, 5}), Scalar(int64_t(2)))), (std::vector<int64_t>{-5, 2}));
  EXPECT_EQ(FV(Call("aten::clamp_min", F({-1, 1}), Scalar(int64_t(0)))), (std::vector<float>{0, 1}));
  // min > max gives max
  EXPECT_EQ(FV(Call("aten::clamp", F({0, 5}), OptScalar(3.0), OptScalar(2.0))), (std::vector<float>{2, 2}));
  Tensor t = Call("aten::clamp.Tensor", F({0, 5, 10}), OptT(F({1}, {})), OptT(F({4, 4, 8})));
  EXPECT_EQ(FV(t), (std::vector<float>{1, 4, 8}));
  Tensor y = F({-1, 2});
  Call("aten::clamp_", y, OptScalar(0.0), OptScalar());
  EXPECT_EQ(FV(y), (std::vector<float>{0, 2}));
  ExpectError<NotImplementedError>([] { Call("aten::clamp", B({1}), OptScalar(Scalar(true)), OptScalar()); },
                                   "not implemented for 'Bool'");
  ExpectError<NotImplementedError>([] { Call("aten::lerp.Scalar", L({1}), L({2}), Scalar(0.5)); },
                                   "not implemented for 'Long'");
  ExpectError<Error>([] { Call("aten::clamp", F({1}), OptScalar(), OptScalar()); },
                     "torch.clamp: At least one of 'min' or 'max' must not be None");
  ExpectError<Error>([] { Call("aten::clamp_", L({1}), OptScalar(0.5), OptScalar()); },
                     "result type Float can't be cast to the desired output type Long");
}

TEST(ShapeOps, LerpAddcmulAddcdiv) {
  EXPECT_EQ(FV(Call("aten::lerp.Scalar", F({0, 4}), F({10, 8}), Scalar(0.25))), (std::vector<float>{2.5, 5}));
  EXPECT_EQ(FV(Call("aten::lerp.Tensor", F({0, 4}), F({10, 8}), F({0, 1}))), (std::vector<float>{0, 8}));
  ExpectError<Error>([] { Call("aten::lerp.Scalar", F({0}), ops::to_dtype(F({1}), ScalarType::Float64), Scalar(0.5)); },
                     "expected dtype Float for `end` but got dtype Double");
  Tensor s = F({1, 1});
  EXPECT_EQ(FV(Call("aten::addcmul", s, F({2, 3}), F({4, 5}), Scalar(0.5))), (std::vector<float>{5, 8.5}));
  EXPECT_EQ(FV(Call("aten::addcdiv", s, F({2, 3}), F({4, 5}), Scalar(0.5))), (std::vector<float>{1.25, 1.3f}));
  Call("aten::addcmul_", s, F({1}), F({2}), Scalar(int64_t(1)));
  EXPECT_EQ(FV(s), (std::vector<float>{3, 3}));
  EXPECT_EQ(LV(Call("aten::addcmul", L({1}), L({2}), L({3}), Scalar(int64_t(2)))), (std::vector<int64_t>{13}));
  ExpectError<Error>([] { Call("aten::addcdiv", L({1}), L({2}), L({3}), Scalar(int64_t(1))); },
                     "Integer division with addcdiv is no longer supported");
}

TEST(ShapeOps, CumsumCumprod) {
  EXPECT_EQ(FV(Call("aten::cumsum", F({1, 2, 3}), int64_t(0), OptDtype())), (std::vector<float>{1, 3, 6}));
  Tensor i = Call("aten::cumsum", ops::to_dtype(L({1, 2, 3}), ScalarType::Int32), int64_t(0), OptDtype());
  EXPECT_EQ(i.dtype(), ScalarType::Int64);
  Tensor m = ops::view(Arange(6), {2, 3});
  EXPECT_EQ(FV(Call("aten::cumsum", m, int64_t(0), OptDtype())), (std::vector<float>{0, 1, 2, 3, 5, 7}));
  EXPECT_EQ(FV(Call("aten::cumsum", ops::transpose(m, 0, 1), int64_t(1), OptDtype())),
            (std::vector<float>{0, 3, 1, 5, 2, 7}));
  EXPECT_EQ(FV(Call("aten::cumprod", F({1, 2, 3}), int64_t(-1), OptDtype())), (std::vector<float>{1, 2, 6}));
  Tensor d = Call("aten::cumsum", F({1, 2}), int64_t(0), OptDtype(ScalarType::Float64));
  EXPECT_EQ(d.dtype(), ScalarType::Float64);
  Tensor y = F({1, 2, 3});
  Call("aten::cumsum_", y, int64_t(0), OptDtype());
  EXPECT_EQ(FV(y), (std::vector<float>{1, 3, 6}));
  ExpectError<IndexError>([] { Call("aten::cumsum", F({1}), int64_t(1), OptDtype()); }, "Dimension out of range");
}

TEST(ShapeOps, EyeLinspace) {
  Tensor e = Call("aten::eye.m", SymInt(2), SymInt(3), OptDtype(), OptLayout(), OptDevice(), OptBool());
  EXPECT_EQ(e.sizes(), Shape({2, 3}));
  EXPECT_EQ(FV(e), (std::vector<float>{1, 0, 0, 0, 1, 0}));
  Tensor el = Call("aten::eye", SymInt(2), OptDtype(ScalarType::Int64), OptLayout(), OptDevice(), OptBool());
  EXPECT_EQ(LV(el), (std::vector<int64_t>{1, 0, 0, 1}));
  Tensor em = Call("aten::eye", SymInt(4), OptDtype(), OptLayout(), OptDevice(Device(DeviceType::Meta)), OptBool());
  EXPECT_TRUE(em.device().is_meta());
  ExpectError<Error>([] { Call("aten::eye", SymInt(-1), OptDtype(), OptLayout(), OptDevice(), OptBool()); },
                     "n must be greater or equal to 0, got -1");
  Tensor l = Call("aten::linspace", Scalar(0.0), Scalar(1.0), int64_t(5), OptDtype(), OptLayout(), OptDevice(), OptBool());
  EXPECT_EQ(FV(l), (std::vector<float>{0, 0.25, 0.5, 0.75, 1}));
  Tensor li = Call("aten::linspace", Scalar(int64_t(0)), Scalar(int64_t(10)), int64_t(3), OptDtype(ScalarType::Int64),
                   OptLayout(), OptDevice(), OptBool());
  EXPECT_EQ(LV(li), (std::vector<int64_t>{0, 5, 10}));
  ExpectError<Error>([] { Call("aten::linspace", Scalar(0.0), Scalar(1.0), int64_t(-1), OptDtype(), std::optional<Layout>(),
                               std::optional<Device>(), std::optional<bool>()); },
                     "number of steps must be non-negative");
}

}  // namespace
}  // namespace kiln
