// tensor/activation_loss_test.cc: hand-checked values and error cases for tensor/ops/activation.cc and
// tensor/ops/loss.cc (softmax, pointwise activations, nll/cross-entropy and other losses, embedding,
// dropout), through the dispatcher on CPU and meta.
#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "tensor/ops/common.h"
#include "tensor/testing/value_test_util.h"

namespace kiln {
namespace {

using namespace valuetest;  // NOLINT: test helpers

using OptT = std::optional<Tensor>;
constexpr int64_t kNone = 0, kMean = 1, kSum = 2;

// --- softmax ---------------------------------------------------------------------------------

TEST(ActivationOps, Softmax) {
  Tensor x = Make({1, 2, 3}, {3});
  ExpectNear(Values(Call("aten::_softmax", x, int64_t(0), false)), {0.0900306f, 0.2447285f, 0.6652410f});
  ExpectNear(Values(Call("aten::_log_softmax", x, int64_t(-1), false)), {-2.4076060f, -1.4076060f, -0.4076060f});
  ExpectNear(Values(Call("aten::softmax.int", Make({1000, 1000, 1, 1}, {2, 2}), int64_t(1), OptSt())),
             {0.5f, 0.5f, 0.5f, 0.5f});
  ExpectNear(Values(Call("aten::softmax.int", Make({0, 1, 0, 1}, {2, 2}), int64_t(0), OptSt())),
             {0.5f, 0.5f, 0.5f, 0.5f});
  Tensor d = Call("aten::log_softmax.int", x, int64_t(0), OptSt(ScalarType::Float64));
  EXPECT_EQ(d.dtype(), ScalarType::Float64);
  ExpectNear<double>(Values<double>(d), {-2.40760596444438, -1.40760596444438, -0.40760596444438}, 1e-12);
  ExpectNear(Values(Call("aten::_softmax", Make({5}, {}), int64_t(0), false)), {1});
  ExpectNear(Values(Call("aten::_softmax", Make({-kInf, -kInf}, {2}), int64_t(0), false)), {kNaN, kNaN});
  // Non-contiguous input along a middle dim.
  Tensor t = ops::transpose(Make({1, 1, 2, 2, 3, 3}, {3, 2}), 0, 1);
  ExpectNear(Values(Call("aten::_softmax", t, int64_t(1), false)),
             {0.0900306f, 0.2447285f, 0.6652410f, 0.0900306f, 0.2447285f, 0.6652410f});
  ExpectError<Error>([&] { Call("aten::softmax.int", Make<int64_t>({1, 2}, {2}), int64_t(0), OptSt()); },
                     "\"softmax_lastdim_kernel_impl\" not implemented for 'Long'");
  ExpectError<IndexError>([&] { Call("aten::_softmax", x, int64_t(1), false); },
                          "Dimension out of range (expected to be in range of [-1, 0], but got 1)");
  Tensor m = Call("aten::_log_softmax", Meta({2, 3}), int64_t(1), false);
  EXPECT_EQ(Sizes(m), (IntList{2, 3}));
  EXPECT_TRUE(m.device().is_meta());
}

// --- pointwise activations ---------------------------------------------------------------------

TEST(ActivationOps, Gelu) {
  Tensor x = Make({1, -1, 0}, {3});
  ExpectNear(Values(Call("aten::gelu", x, std::string("none"))), {0.8413447f, -0.1586553f, 0});
  ExpectNear(Values(Call("aten::gelu", x, std::string("tanh"))), {0.8411920f, -0.1588080f, 0});
  Tensor y = Make({1, -1}, {2});
  Call("aten::gelu_", y, std::string("none"));
  ExpectNear(Values(y), {0.8413447f, -0.1586553f});
  ExpectError<Error>([&] { Call("aten::gelu", x, std::string("fast")); },
                     "approximate argument must be either none or tanh.");
  ExpectError<Error>([&] { Call("aten::gelu", Make<int64_t>({1}, {1}), std::string("none")); },
                     "\"gelu\" not implemented for 'Long'");
  Tensor h = Call("aten::gelu", Make({1, -1}, {2}, ScalarType::BFloat16), std::string("none"));
  EXPECT_EQ(h.dtype(), ScalarType::BFloat16);
  ExpectNear(Values(CastTo(h, ScalarType::Float32)), {0.8413447f, -0.1586553f}, 1e-2);
}

TEST(ActivationOps, ClampLike) {
  Tensor x = Make({-2, 0.5f, 2}, {3});
  ExpectNear(Values(Call("aten::leaky_relu", x, Scalar(0.1))), {-0.2f, 0.5f, 2});
  ExpectNear(Values(Call("aten::hardtanh", x, Scalar(int64_t(-1)), Scalar(int64_t(1)))), {-1, 0.5f, 1});
  ExpectNear(Values(Call("aten::relu6", Make({-1, 3, 7, kNaN}, {4}))), {0, 3, 6, kNaN});
  EXPECT_EQ(Values<int64_t>(Call("aten::relu6", Make<int64_t>({-1, 3, 7}, {3}))), (std::vector<int64_t>{0, 3, 6}));
  ExpectNear(Values(Call("aten::threshold", Make({1, 2, 3}, {3}), Scalar(int64_t(2)), Scalar(int64_t(-1)))),
             {-1, -1, 3});
  Tensor y = Make({-3, 4}, {2});
  Call("aten::leaky_relu_", y, Scalar(0.5));
  ExpectNear(Values(y), {-1.5f, 4});
  Tensor z = Make({-3, 10}, {2});
  Call("aten::relu6_", z);
  ExpectNear(Values(z), {0, 6});
  ExpectError<Error>([&] { Call("aten::hardtanh", Make<uint8_t>({1}, {1}, ScalarType::Bool), Scalar(int64_t(0)),
                                Scalar(int64_t(1))); },
                     "Bool inputs not supported for hardtanh");
  ExpectError<Error>([&] { Call("aten::leaky_relu", Make<int64_t>({1}, {1}), Scalar(0.1)); },
                     "\"leaky_relu\" not implemented for 'Long'");
}

TEST(ActivationOps, SmoothActivations) {
  ExpectNear(Values(Call("aten::elu", Make({-1, 2}, {2}), Scalar(int64_t(1)), Scalar(int64_t(1)),
                         Scalar(int64_t(1)))), {-0.6321206f, 2});
  ExpectNear(Values(Call("aten::elu", Make({-1, 2}, {2}), Scalar(2.0), Scalar(1.5), Scalar(int64_t(1)))),
             {-0.6321206f * 3, 3});
  ExpectNear(Values(Call("aten::softplus", Make({0, 30, -30}, {3}), Scalar(int64_t(1)), Scalar(int64_t(20)))),
             {0.6931472f, 30, 9.357623e-14f});
  ExpectNear(Values(Call("aten::softplus", Make({1}, {1}), Scalar(int64_t(2)), Scalar(int64_t(20)))),
             {std::log1p(std::exp(2.0f)) / 2});
  ExpectNear(Values(Call("aten::hardsigmoid", Make({-4, 0, 1, 4}, {4}))), {0, 0.5f, 0.6666667f, 1});
  ExpectNear(Values(Call("aten::hardswish", Make({-4, 0, 1, 4}, {4}))), {0, 0, 0.6666667f, 4});
  Tensor x = Make({-4, 1}, {2});
  Call("aten::hardswish_", x);
  ExpectNear(Values(x), {0, 0.6666667f});
}

TEST(ActivationOps, LogitAndNanToNum) {
  ExpectNear(Values(Call("aten::logit", Make({0.25f, 0.5f}, {2}), std::optional<double>())), {-1.0986123f, 0});
  ExpectNear(Values(Call("aten::logit", Make({0, 1}, {2}), std::optional<double>(0.1))), {-2.1972246f, 2.1972246f});
  ExpectNear(Values(Call("aten::logit", Make({0}, {1}), std::optional<double>())), {-kInf});
  EXPECT_EQ(Call("aten::logit", Make<int64_t>({0}, {1}), std::optional<double>()).dtype(), ScalarType::Float32);
  using OptD = std::optional<double>;
  const float big = std::numeric_limits<float>::max();
  Tensor x = Make({kNaN, kInf, -kInf, 1}, {4});
  ExpectNear(Values(Call("aten::nan_to_num", x, OptD(), OptD(), OptD())), {0, big, -big, 1});
  ExpectNear(Values(Call("aten::nan_to_num", x, OptD(1.0), OptD(2.0), OptD())), {1, 2, -big, 1});
  Tensor h = Call("aten::nan_to_num", Make({kInf}, {1}, ScalarType::Float16), OptD(), OptD(), OptD());
  ExpectNear(Values(CastTo(h, ScalarType::Float32)), {65504});
  EXPECT_EQ(Values<int64_t>(Call("aten::nan_to_num", Make<int64_t>({3}, {1}), OptD(), OptD(), OptD())),
            std::vector<int64_t>{3});
  Call("aten::nan_to_num_", x, OptD(-5.0), OptD(), OptD());
  ExpectNear(Values(x), {-5, big, -big, 1});
}

// --- nll_loss / cross_entropy ----------------------------------------------------------------

TEST(LossOps, NllLoss) {
  Tensor x = Make({-1, -2, -3, -0.5f, -1.5f, -2.5f}, {2, 3});
  Tensor t = Make<int64_t>({0, 2}, {2});
  auto nll = [&](OptT w, int64_t red, int64_t ignore) { return Call("aten::nll_loss", x, t, w, red, SymInt(ignore)); };
  ExpectNear(Values(nll(OptT(), kMean, -100)), {1.75f});
  ExpectNear(Values(nll(OptT(), kSum, -100)), {3.5f});
  ExpectNear(Values(nll(OptT(), kNone, -100)), {1, 2.5f});
  ExpectNear(Values(nll(Make({1, 2, 3}, {3}), kMean, -100)), {2.125f});
  ExpectNear(Values(nll(OptT(), kMean, 2)), {1});
  ExpectNear(Values(nll(OptT(), kNone, 2)), {1, 0});
  ExpectNear(Values(nll(OptT(), kMean, 0)), {2.5f});
  auto [out, total] = Call2("aten::nll_loss_forward", x, t, OptT(Make({1, 2, 3}, {3})), kSum, SymInt(-100));
  ExpectNear(Values(total), {4});
  ExpectNear(Values(out), {8.5f});
  // All targets ignored: mean is 0 / 0.
  ExpectNear(Values(Call("aten::nll_loss", x, Make<int64_t>({1, 1}, {2}), OptT(), kMean, SymInt(1))), {kNaN});
  // Unbatched input.
  ExpectNear(Values(Call("aten::nll_loss", Make({-1, -2, -3}, {3}), Make<int64_t>({1}, {}), OptT(), kNone,
                         SymInt(-100))), {2});
  ExpectError<IndexError>([&] { Call("aten::nll_loss", x, Make<int64_t>({0, 3}, {2}), OptT(), kMean, SymInt(-100)); },
                          "Target 3 is out of bounds.");
  ExpectError<IndexError>([&] { Call("aten::nll_loss", x, Make<int64_t>({-1, 0}, {2}), OptT(), kMean,
                                     SymInt(-100)); },
                          "Target -1 is out of bounds.");
  ExpectError<Error>([&] { Call("aten::nll_loss", x, Make<int64_t>({0, 1, 2}, {3}), OptT(), kMean, SymInt(-100)); },
                     "size mismatch (got input: [2, 3], target: [3])");
  ExpectError<Error>([&] { Call("aten::nll_loss", x, t, OptT(Make({1, 2}, {2})), kMean, SymInt(-100)); },
                     "weight tensor should be defined either for all 3 classes or no classes but got weight tensor "
                     "of shape: [2]");
  ExpectError<Error>([&] { Call("aten::nll_loss", x, Make<int32_t>({0, 1}, {2}), OptT(), kMean, SymInt(-100)); },
                     "expected scalar type Long but found Int");
  auto [mo, mt] = Call2("aten::nll_loss_forward", Meta({4, 5}), Meta({4}, ScalarType::Int64), OptT(), kNone,
                        SymInt(-100));
  EXPECT_EQ(Sizes(mo), (IntList{4}));
  EXPECT_EQ(Sizes(mt), (IntList{}));
}

TEST(LossOps, NllLossSpatial) {
  // (N=1, C=2, 2): element 0 has classes [-1, -3], element 1 has [-2, -4].
  Tensor x = Make({-1, -2, -3, -4}, {1, 2, 2});
  Tensor t = Make<int64_t>({1, 0}, {1, 2});
  ExpectNear(Values(Call("aten::nll_loss_nd", x, t, OptT(), kNone, SymInt(-100))), {3, 2});
  EXPECT_EQ(Sizes(Call("aten::nll_loss_nd", x, t, OptT(), kNone, SymInt(-100))), (IntList{1, 2}));
  ExpectNear(Values(Call("aten::nll_loss_nd", x, t, OptT(), kMean, SymInt(-100))), {2.5f});
  Tensor x4 = ops::reshape(x, Shape({1, 2, 1, 2}));
  Tensor t3 = ops::reshape(t, Shape({1, 1, 2}));
  ExpectNear(Values(Call("aten::nll_loss2d", x4, t3, OptT(), kSum, SymInt(-100))), {5});
  ExpectError<Error>([&] { Call("aten::nll_loss2d", x, t, OptT(), kSum, SymInt(-100)); },
                     "only batches of spatial inputs supported (4D tensors), but got input of size: [1, 2, 2]");
  ExpectError<Error>([&] { Call("aten::nll_loss_nd", x, Make<int64_t>({1, 0, 0}, {1, 3}), OptT(), kSum,
                                SymInt(-100)); },
                     "Expected target size [1, 2], got [1, 3]");
}

TEST(LossOps, CrossEntropy) {
  Tensor x = Make({1, 2, 3}, {1, 3});
  auto ce = [&](const Tensor& target, double ls, OptT w = std::nullopt, int64_t red = kMean) {
    return Values(Call("aten::cross_entropy_loss", x, target, w, red, SymInt(-100), ls));
  };
  ExpectNear(ce(Make<int64_t>({2}, {1}), 0.0), {0.4076060f});
  ExpectNear(ce(Make<int64_t>({2}, {1}), 0.1), {0.9f * 0.4076060f + 0.1f / 3 * 4.2228179f});
  ExpectNear(ce(Make({0, 0, 1}, {1, 3}), 0.0), {0.4076060f});
  ExpectNear(ce(Make({0.5f, 0, 0.5f}, {1, 3}), 0.0), {1.4076060f});
  ExpectNear(ce(Make({0.5f, 0, 0.5f}, {1, 3}), 0.0, Make({2, 1, 1}, {3})), {0.5f * (2 * 2.4076060f + 0.4076060f)});
  // Two rows, one ignored, weighted, with smoothing: the mean divides by the kept weight.
  Tensor x2 = Make({1, 2, 3, 0, 0, 0}, {2, 3});
  Tensor t2 = Make<int64_t>({0, -100}, {2});
  Tensor w = Make({2, 1, 1}, {3});
  Tensor got = Call("aten::cross_entropy_loss", x2, t2, OptT(w), kMean, SymInt(-100), 0.3);
  const float nll = 2.4076060f;  // row 0, class 0 (weight 2 / total weight 2)
  const float smooth = (2 * 2.4076060f + 1.4076060f + 0.4076060f) / 2;
  ExpectNear(Values(got), {0.7f * nll + 0.1f * smooth});
  ExpectNear(Values(Call("aten::cross_entropy_loss", x2, t2, OptT(), kNone, SymInt(-100), 0.0)), {2.4076060f, 0});
  ExpectError<Error>([&] { ce(Make<int64_t>({2}, {1}), 1.5); },
                     "label_smoothing must be between 0.0 and 1.0. Got: 1.5");
  ExpectError<IndexError>([&] { ce(Make<int64_t>({3}, {1}), 0.0); }, "Target 3 is out of bounds.");
}

// --- pointwise losses ------------------------------------------------------------------------

TEST(LossOps, RegressionLosses) {
  Tensor a = Make({1, 2, 3}, {3});
  Tensor b = Make({1, 1, 1}, {3});
  ExpectNear(Values(Call("aten::mse_loss", a, b, kMean)), {5.0f / 3});
  ExpectNear(Values(Call("aten::mse_loss", a, b, kSum)), {5});
  ExpectNear(Values(Call("aten::mse_loss", a, b, kNone)), {0, 1, 4});
  ExpectNear(Values(Call("aten::l1_loss", a, b, kMean)), {1});
  ExpectNear(Values(Call("aten::smooth_l1_loss", a, b, kNone, 1.0)), {0, 0.5f, 1.5f});
  ExpectNear(Values(Call("aten::smooth_l1_loss", a, b, kSum, 0.0)), {3});
  ExpectNear(Values(Call("aten::huber_loss", a, b, kNone, 2.0)), {0, 0.5f, 2});
  ExpectNear(Values(Call("aten::huber_loss", a, b, kMean, 1.0)), {2.0f / 3});
  // Broadcasting target.
  ExpectNear(Values(Call("aten::mse_loss", Make({1, 2, 3, 4}, {2, 2}), Make({1, 2}, {2}), kNone)), {0, 0, 4, 4});
  ExpectError<Error>([&] { Call("aten::huber_loss", a, b, kMean, 0.0); },
                     "huber_loss does not support non-positive values for delta.");
  ExpectError<Error>([&] { Call("aten::smooth_l1_loss", a, b, kMean, -1.0); },
                     "smooth_l1_loss does not support negative values for beta.");
  ExpectError<ValueError>([&] { Call("aten::mse_loss", a, b, int64_t(5)); }, "5 is not a valid value for reduction");
  EXPECT_EQ(Sizes(Call("aten::mse_loss", Meta({2, 3}), Meta({3}), kNone)), (IntList{2, 3}));
  EXPECT_EQ(Sizes(Call("aten::mse_loss", Meta({2, 3}), Meta({3}), kMean)), (IntList{}));
}

TEST(LossOps, BinaryCrossEntropy) {
  Tensor x = Make({0.5f, 0.9f}, {2});
  Tensor y = Make({1, 0}, {2});
  ExpectNear(Values(Call("aten::binary_cross_entropy", x, y, OptT(), kNone)), {0.6931472f, 2.3025851f});
  ExpectNear(Values(Call("aten::binary_cross_entropy", x, y, OptT(Make({2, 1}, {2})), kSum)),
             {2 * 0.6931472f + 2.3025851f});
  ExpectNear(Values(Call("aten::binary_cross_entropy", Make({0}, {1}), Make({1}, {1}), OptT(), kMean)), {100});
  ExpectError<Error>([&] { Call("aten::binary_cross_entropy", Make({1.5f}, {1}), Make({1}, {1}), OptT(), kMean); },
                     "all elements of input should be between 0 and 1");
  ExpectError<Error>([&] { Call("aten::binary_cross_entropy", x, Make({1}, {1}), OptT(), kMean); },
                          "Using a target size ([1]) that is different to the input size ([2]) is deprecated. Please "
                          "ensure they have the same size.");
  Tensor z = Make({0, 2}, {2});
  ExpectNear(Values(Call("aten::binary_cross_entropy_with_logits", z, y, OptT(), OptT(), kNone)),
             {0.6931472f, 2.1269280f});
  ExpectNear(Values(Call("aten::binary_cross_entropy_with_logits", z, y, OptT(), OptT(Make({3}, {1})), kNone)),
             {3 * 0.6931472f, 2.1269280f});
  ExpectNear(Values(Call("aten::binary_cross_entropy_with_logits", Make({-200, 200}, {2}), Make({0, 1}, {2}), OptT(),
                         OptT(), kMean)), {0});
}

// --- embedding / dropout -----------------------------------------------------------------------

TEST(LossOps, Embedding) {
  Tensor w = Make({0, 1, 2, 3, 4, 5}, {3, 2});
  Tensor out = Call("aten::embedding", w, Make<int64_t>({2, 0}, {1, 2}), SymInt(-1), false, false);
  EXPECT_EQ(Sizes(out), (IntList{1, 2, 2}));
  ExpectNear(Values(out), {4, 5, 0, 1});
  ExpectNear(Values(Call("aten::embedding", w, Make<int32_t>({1}, {}), SymInt(-1), false, false)), {2, 3});
  ExpectError<IndexError>([&] { Call("aten::embedding", w, Make<int64_t>({3}, {1}), SymInt(-1), false, false); },
                          "index out of range in self");
  ExpectError<IndexError>([&] { Call("aten::embedding", w, Make<int64_t>({-1}, {1}), SymInt(-1), false, false); },
                          "index out of range in self");
  ExpectError<Error>([&] { Call("aten::embedding", Make({1}, {1}), Make<int64_t>({0}, {1}), SymInt(-1), false,
                                false); },
                     "'weight' must be 2-D");
  EXPECT_EQ(Sizes(Call("aten::embedding", Meta({10, 4}), Meta({2, 3}, ScalarType::Int64), SymInt(-1), false, false)),
            (IntList{2, 3, 4}));
}

TEST(LossOps, Dropout) {
  Tensor x = ops::full(Shape({10000}), Scalar(1.0), ScalarType::Float32);
  DefaultCPUGenerator()->manual_seed(7);
  auto [o1, m1] = Call2("aten::native_dropout", x, 0.3, std::optional<bool>(true));
  DefaultCPUGenerator()->manual_seed(7);
  auto [o2, m2] = Call2("aten::native_dropout", x, 0.3, std::optional<bool>(true));
  EXPECT_EQ(m1.dtype(), ScalarType::Bool);
  EXPECT_EQ(Values<bool>(m1), Values<bool>(m2));
  std::vector<float> v = Values(o1);
  std::vector<bool> keep = Values<bool>(m1);
  int kept = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    kept += keep[i];
    EXPECT_NEAR(v[i], keep[i] ? 1 / 0.7f : 0.0f, 1e-6);
  }
  EXPECT_NEAR(kept / 10000.0, 0.7, 0.03);
  // The next call continues the stream: a different mask.
  auto [o3, m3] = Call2("aten::native_dropout", x, 0.3, std::optional<bool>(true));
  EXPECT_NE(Values<bool>(m1), Values<bool>(m3));
  auto [oe, me] = Call2("aten::native_dropout", x, 0.3, std::optional<bool>(false));
  EXPECT_EQ(Values(oe), v.size() ? Values(x) : std::vector<float>{});
  EXPECT_EQ(Values<bool>(me), std::vector<bool>(10000, true));
  Tensor same = Call("aten::dropout", x, 0.5, false);
  EXPECT_TRUE(same.is_same(x));
  ExpectNear(Values(Call("aten::dropout", Make({2, 3}, {2}), 1.0, true)), {0, 0});
  Tensor y = ops::full(Shape({64}), Scalar(1.0), ScalarType::Float32);
  DefaultCPUGenerator()->manual_seed(7);
  Tensor r = Call("aten::dropout_", y, 0.3, true);
  EXPECT_TRUE(r.is_same(y));
  DefaultCPUGenerator()->manual_seed(7);
  auto [o4, m4] = Call2("aten::native_dropout", ops::full(Shape({64}), Scalar(1.0), ScalarType::Float32), 0.3,
                        std::optional<bool>(true));
  EXPECT_EQ(Values(y), Values(o4));
  ExpectError<Error>([&] { Call("aten::dropout", x, 1.5, true); },
                          "dropout probability has to be between 0 and 1, but got 1.5");
  auto [mo, mm] = Call2("aten::native_dropout", Meta({3, 4}), 0.5, std::optional<bool>(true));
  EXPECT_EQ(Sizes(mo), (IntList{3, 4}));
  EXPECT_EQ(mm.dtype(), ScalarType::Bool);
}

// Differences from PyTorch found by tests/test_reduce_ops.py, pinned here.
TEST(ActivationLossOps, MatchPyTorchEdgeCases) {
  // A 1-D input with an empty 1-D target is refused (it used to read past the target).
  ExpectError<ValueError>([&] { Call("aten::nll_loss", Make<float>({}, {0}), Make<int64_t>({}, {0}), OptT(), kMean,
                                     SymInt(-100)); },
                          "For 1D input, 1D target must have size 1, but got target size: 0");
  // total_weight is 0 for an unreduced batch.
  auto [out, total] = Call2("aten::nll_loss_forward", Make({-1, -2, -3, -4}, {2, 2}), Make<int64_t>({0, 1}, {2}),
                            OptT(), kNone, SymInt(-100));
  ExpectNear(Values(out), {1, 4});
  ExpectNear(Values(total), {0});
  // hardtanh is clamp(x, min, max): with min > max every element is max.
  ExpectNear(Values(Call("aten::hardtanh", Make({-3, 0.5f, 3}, {3}), Scalar(2.0), Scalar(1.0))), {1, 1, 1});
  // threshold's Scalars must fit an integer input's type.
  ExpectError<Error>([&] { Call("aten::threshold", Make<uint8_t>({1, 2}, {2}), Scalar(1.0), Scalar(-1.0)); },
                     "value cannot be converted to type uint8_t without overflow");
  // softmax of an empty integer tensor is that tensor; a non-empty one is NotImplementedError.
  EXPECT_EQ(Sizes(Call("aten::_softmax", Make<int64_t>({}, {0, 3}), int64_t(1), false)), (IntList{0, 3}));
  ExpectError<NotImplementedError>([&] { Call("aten::gelu", Make<int64_t>({1}, {1}), std::string("none")); },
                                   "\"gelu\" not implemented for 'Long'");
}

}  // namespace
}  // namespace kiln
