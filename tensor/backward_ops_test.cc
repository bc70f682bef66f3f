// tensor/backward_ops_test.cc: the backward ops (activation_backward.cc, norm_backward.cc,
// conv_pool_backward.cc, loss_backward.cc) against central differences of their forward ops,
// hand-computed values, output_mask and meta results, and errors that name the op.
#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tensor/testing/value_test_util.h"

namespace kiln {
namespace {

using namespace valuetest;  // NOLINT
using Vec = std::vector<double>;
using Mask = std::vector<bool>;

// Deterministic values in [lo, hi).
Tensor Rand(std::vector<int64_t> shape, int seed, double lo = -2.0, double hi = 2.0) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  Vec v(n);
  uint32_t s = 2654435761u * seed + 12345;
  for (double& x : v) {
    s = s * 1664525u + 1013904223u;
    x = lo + (hi - lo) * (((s >> 8) & 0xffff) / 65536.0);
  }
  return Make<double>(v, shape);
}

double Dot(const Tensor& a, const Tensor& b) {
  Vec x = Values<double>(a), y = Values<double>(b);
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += x[i] * y[i];
  return s;
}

// `grad` must be d/dx of sum(g * f(x)), checked by central differences at every element of x.
void ExpectGradient(const std::function<Tensor(const Tensor&)>& f, const Tensor& x, const Tensor& g,
                    const Tensor& grad, double tol = 1e-6) {
  ASSERT_EQ(Sizes(grad), Sizes(x));
  const Vec analytic = Values<double>(grad);
  const double h = 1e-6;
  for (int64_t i = 0; i < x.numel(); ++i) {
    Tensor xp = ops::clone(ops::contiguous(x)), xm = ops::clone(ops::contiguous(x));
    xp.data_ptr<double>()[i] += h;
    xm.data_ptr<double>()[i] -= h;
    const double numeric = (Dot(f(xp), g) - Dot(f(xm), g)) / (2 * h);
    EXPECT_NEAR(analytic[i], numeric, tol * std::max(1.0, std::abs(numeric))) << "element " << i;
  }
}

template <typename F>
void ExpectErrorNaming(F fn, const std::string& op) {
  try {
    fn();
    ADD_FAILURE() << "expected an error naming " << op;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(op), std::string::npos) << e.what();
  }
}

TEST(BackwardOps, PointwiseMatchCentralDifferences) {
  // Away from the kinks of the piecewise functions.
  Tensor x = Make<double>({-2.5, -1.2, -0.4, 0.3, 0.9, 1.7, 2.6}, {7});
  Tensor g = Rand({7}, 3);
  auto unary = [](const char* name) { return [name](const Tensor& t) { return Call(name, t); }; };
  ExpectGradient(unary("aten::silu"), x, g, ops::silu_backward(g, x));
  ExpectGradient(unary("aten::mish"), x, g, ops::mish_backward(g, x));
  ExpectGradient(unary("aten::hardswish"), x, g, ops::hardswish_backward(g, x));
  ExpectGradient(unary("aten::hardsigmoid"), x, g, ops::hardsigmoid_backward(g, x));
  ExpectGradient(unary("aten::sigmoid"), x, g, ops::sigmoid_backward(g, Call("aten::sigmoid", x)));
  ExpectGradient(unary("aten::tanh"), x, g, ops::tanh_backward(g, Call("aten::tanh", x)));
  for (std::string approx : {"none", "tanh"}) {
    ExpectGradient([&](const Tensor& t) { return Call("aten::gelu", t, approx); }, x, g,
                   ops::gelu_backward(g, x, approx));
  }
  ExpectGradient([](const Tensor& t) { return Call("aten::leaky_relu", t, Scalar(0.1)); }, x, g,
                 ops::leaky_relu_backward(g, x, Scalar(0.1), false));
  ExpectGradient([](const Tensor& t) { return Call("aten::hardtanh", t, Scalar(-1.0), Scalar(1.5)); }, x, g,
                 ops::hardtanh_backward(g, x, Scalar(-1.0), Scalar(1.5)));
  ExpectGradient([](const Tensor& t) { return Call("aten::softplus", t, Scalar(2.0), Scalar(3.0)); }, x, g,
                 ops::softplus_backward(g, x, Scalar(2.0), Scalar(3.0)));
  ExpectGradient([](const Tensor& t) { return Call("aten::threshold", t, Scalar(0.5), Scalar(-1.0)); }, x, g,
                 ops::threshold_backward(g, x, Scalar(0.5)));
  auto elu = [](const Tensor& t) { return Call("aten::elu", t, Scalar(1.5), Scalar(1.2), Scalar(0.8)); };
  ExpectGradient(elu, x, g, ops::elu_backward(g, Scalar(1.5), Scalar(1.2), Scalar(0.8), false, x));
  ExpectGradient(elu, x, g, ops::elu_backward(g, Scalar(1.5), Scalar(1.2), Scalar(0.8), true, elu(x)));
  Tensor p = Make<double>({0.1, 0.25, 0.5, 0.7, 0.95}, {5});
  Tensor gp = Rand({5}, 4);
  ExpectGradient([](const Tensor& t) { return Call("aten::logit", t, std::optional<double>()); }, p, gp,
                 ops::logit_backward(gp, p));
}

TEST(BackwardOps, PointwiseLayoutsAndEdgeValues) {
  // A transposed view and a broadcast grad give the contiguous result.
  Tensor x = ops::transpose(Rand({3, 4}, 5), 0, 1);
  Tensor g = Rand({3}, 6);
  Tensor want = ops::silu_backward(ops::contiguous(ops::expand(g, Shape({4, 3}))), ops::contiguous(x));
  ExpectNear(Values<double>(ops::silu_backward(g, x)), Values<double>(want), 1e-12);
  // logit_backward: NaN outside [0, 1] without eps, 0 outside [eps, 1 - eps] with it.
  Tensor p = Make<float>({-0.5f, 0.05f, 0.5f, 1.5f}, {4});
  Tensor one = Make<float>({1, 1, 1, 1}, {4});
  ExpectNear(Values<float>(ops::logit_backward(one, p)), {kNaN, 1 / (0.05f * 0.95f), 4.0f, kNaN}, 1e-3);
  ExpectNear(Values<float>(ops::logit_backward(one, p, 0.1)), {0, 0, 4.0f, 0});
  // native_dropout_backward: grad * mask * scale, bool mask.
  Tensor mask = CastTo(Make<float>({1, 0, 1, 0}, {4}), ScalarType::Bool);
  ExpectNear(Values<float>(ops::native_dropout_backward(Make<float>({1, 2, 3, 4}, {4}), mask, 2.0)), {2, 0, 6, 0});
}

TEST(BackwardOps, SoftmaxMatchesCentralDifferences) {
  Tensor x = Rand({2, 3, 4}, 7);
  Tensor g = Rand({2, 3, 4}, 8);
  for (int64_t dim : {0, 1, -1}) {
    Tensor y = Call("aten::_softmax", x, dim, false);
    ExpectGradient([&](const Tensor& t) { return Call("aten::_softmax", t, dim, false); }, x, g,
                   ops::_softmax_backward_data(g, y, dim, ScalarType::Float64));
    Tensor ly = Call("aten::_log_softmax", x, dim, false);
    ExpectGradient([&](const Tensor& t) { return Call("aten::_log_softmax", t, dim, false); }, x, g,
                   ops::_log_softmax_backward_data(g, ly, dim, ScalarType::Float64));
  }
}

using Tensor3 = std::tuple<Tensor, Tensor, Tensor>;

TEST(BackwardOps, NormsMatchCentralDifferences) {
  Tensor x = Rand({3, 4, 5}, 9), g = Rand({3, 4, 5}, 10), w = Rand({4}, 11), b = Rand({4}, 12);
  // batch norm, training: the saved statistics come from the forward.
  auto bn = [&](const Tensor& t) {
    return std::get<0>(CallOp<Tensor3>(OpNamed("aten::native_batch_norm"), t, std::optional<Tensor>(w),
                                       std::optional<Tensor>(b), std::optional<Tensor>(), std::optional<Tensor>(),
                                       true, 0.1, 1e-5));
  };
  auto [out, save_mean, save_invstd] = CallOp<Tensor3>(OpNamed("aten::native_batch_norm"), x, std::optional<Tensor>(w),
                                                        std::optional<Tensor>(b), std::optional<Tensor>(),
                                                        std::optional<Tensor>(), true, 0.1, 1e-5);
  auto [gi, gw, gb] = ops::native_batch_norm_backward(g, x, w, std::nullopt, std::nullopt, save_mean, save_invstd, true,
                                                      1e-5, {true, true, true});
  ExpectGradient(bn, x, g, gi, 1e-5);
  ExpectGradient([&](const Tensor& t) {
    return std::get<0>(CallOp<Tensor3>(OpNamed("aten::native_batch_norm"), x, std::optional<Tensor>(t),
                                       std::optional<Tensor>(b), std::optional<Tensor>(), std::optional<Tensor>(),
                                       true, 0.1, 1e-5));
  }, w, g, gw, 1e-5);

  // layer norm over the last two dims.
  Tensor lw = Rand({4, 5}, 13), lb = Rand({4, 5}, 14);
  std::vector<SymInt> norm = Shape({4, 5});
  auto ln = [&](const Tensor& t) {
    return std::get<0>(CallOp<Tensor3>(OpNamed("aten::native_layer_norm"), t, norm, std::optional<Tensor>(lw),
                                       std::optional<Tensor>(lb), 1e-5));
  };
  auto [lo, mean, rstd] = CallOp<Tensor3>(OpNamed("aten::native_layer_norm"), x, norm, std::optional<Tensor>(lw),
                                          std::optional<Tensor>(lb), 1e-5);
  auto [lgi, lgw, lgb] = ops::native_layer_norm_backward(g, x, norm, mean, rstd, lw, lb, {true, true, true});
  ExpectGradient(ln, x, g, lgi, 1e-5);
  Vec col_sums(20, 0.0);
  Vec gv = Values<double>(g);
  for (int64_t i = 0; i < 60; ++i) col_sums[i % 20] += gv[i];
  ExpectNear(Values<double>(lgb), col_sums, 1e-9);

  // group norm, 2 groups of 2 channels; a transposed (non-contiguous) input gives the same result.
  auto gn = [&](const Tensor& t) {
    return std::get<0>(CallOp<Tensor3>(OpNamed("aten::native_group_norm"), t, std::optional<Tensor>(w),
                                       std::optional<Tensor>(b), SymInt(3), SymInt(4), SymInt(5), int64_t(2), 1e-5));
  };
  auto [go, gmean, grstd] = CallOp<Tensor3>(OpNamed("aten::native_group_norm"), x, std::optional<Tensor>(w),
                                            std::optional<Tensor>(b), SymInt(3), SymInt(4), SymInt(5), int64_t(2),
                                            1e-5);
  auto [ggi, ggw, ggb] = ops::native_group_norm_backward(g, x, gmean, grstd, w, 3, 4, 5, 2, {true, true, true});
  ExpectGradient(gn, x, g, ggi, 1e-5);
  Tensor xt = ops::transpose(ops::contiguous(ops::transpose(x, 1, 2)), 1, 2);
  auto [tgi, tgw, tgb] = ops::native_group_norm_backward(g, xt, gmean, grstd, w, 3, 4, 5, 2, {true, true, true});
  ExpectNear(Values<double>(tgi), Values<double>(ggi), 1e-12);
  ExpectNear(Values<double>(tgw), Values<double>(ggw), 1e-12);
}

TEST(BackwardOps, OutputMaskGivesUndefinedTensors) {
  Tensor x = Rand({2, 3, 4}, 15), g = Rand({2, 3, 4}, 16), w = Rand({3}, 17);
  Tensor mean = Make<double>({0, 0, 0}, {3}), invstd = Make<double>({1, 1, 1}, {3});
  auto [gi, gw, gb] = ops::native_batch_norm_backward(g, x, w, std::nullopt, std::nullopt, mean, invstd, true, 1e-5,
                                                      {false, true, false});
  EXPECT_FALSE(gi.defined());
  EXPECT_TRUE(gw.defined());
  EXPECT_FALSE(gb.defined());
  // The same on meta tensors: undefined where masked, sizes and dtypes elsewhere.
  auto [mi, mw, mb] = ops::native_batch_norm_backward(Meta({2, 3, 4}, ScalarType::Float64), Meta({2, 3, 4},
                                                      ScalarType::Float64), Meta({3}, ScalarType::Float64),
                                                      std::nullopt, std::nullopt, Meta({3}, ScalarType::Float64),
                                                      Meta({3}, ScalarType::Float64), true, 1e-5, {true, false, true});
  EXPECT_TRUE(mi.defined() && mi.device().type == DeviceType::Meta);
  EXPECT_EQ(Sizes(mi), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_FALSE(mw.defined());
  EXPECT_EQ(Sizes(mb), (std::vector<int64_t>{3}));
  EXPECT_EQ(mb.dtype(), ScalarType::Float64);
}

TEST(BackwardOps, ConvolutionMatchesCentralDifferences) {
  struct Case {
    std::vector<int64_t> x, w;
    std::vector<int64_t> stride, padding, dilation;
    bool transposed;
    std::vector<int64_t> output_padding;
    int64_t groups;
  };
  for (const Case& c : {Case{{2, 4, 5, 4}, {4, 2, 3, 2}, {2, 1}, {1, 0}, {1, 2}, false, {0, 0}, 2},
                        Case{{1, 4, 3, 3}, {4, 1, 2, 2}, {2, 1}, {1, 0}, {1, 1}, true, {1, 0}, 2},
                        Case{{2, 3, 7}, {2, 3, 3}, {2}, {1}, {1}, false, {0}, 1}}) {
    Tensor x = Rand(c.x, 18), w = Rand(c.w, 19);
    auto conv = [&](const Tensor& in, const Tensor& wt) {
      return Call("aten::convolution", in, wt, std::optional<Tensor>(), Shape(c.stride), Shape(c.padding),
                  Shape(c.dilation), c.transposed, Shape(c.output_padding), SymInt(c.groups));
    };
    Tensor out = conv(x, w);
    Tensor g = Rand(Sizes(out), 20);
    auto [gi, gw, gb] = ops::convolution_backward(g, x, w, Shape({out.size(1)}), Shape(c.stride), Shape(c.padding),
                                                  Shape(c.dilation), c.transposed, Shape(c.output_padding),
                                                  SymInt(c.groups), {true, true, true});
    ExpectGradient([&](const Tensor& t) { return conv(t, w); }, x, g, gi, 1e-5);
    ExpectGradient([&](const Tensor& t) { return conv(x, t); }, w, g, gw, 1e-5);
    std::vector<int64_t> dims = {0};
    for (int64_t d = 2; d < g.dim(); ++d) dims.push_back(d);
    ExpectNear(Values<double>(gb), Values<double>(ops::sum(g, dims)), 1e-9);
  }
}

TEST(BackwardOps, PoolingMatchesCentralDifferences) {
  Tensor x = Rand({2, 2, 5, 6}, 21);
  auto avg = [](const Tensor& t) {
    return ops::avg_pool2d(t, {3, 2}, {2, 2}, {1, 1}, true, false, std::nullopt);
  };
  Tensor g = Rand(Sizes(avg(x)), 22);
  ExpectGradient(avg, x, g, ops::avg_pool2d_backward(g, x, {3, 2}, {2, 2}, {1, 1}, true, false, std::nullopt));
  auto adaptive = [](const Tensor& t) { return Call("aten::_adaptive_avg_pool2d", t, Shape({3, 4})); };
  Tensor ga = Rand({2, 2, 3, 4}, 23);
  ExpectGradient(adaptive, x, ga, ops::_adaptive_avg_pool2d_backward(ga, x));
  auto [out, idx] = Call2("aten::max_pool2d_with_indices", x, IntList{2, 3}, IntList{2, 2}, IntList{1, 1},
                          IntList{1, 1}, false);
  Tensor gm = Rand(Sizes(out), 24);
  ExpectGradient([](const Tensor& t) { return ops::max_pool2d(t, {2, 3}, {2, 2}, {1, 1}, {1, 1}, false); }, x, gm,
                 ops::max_pool2d_with_indices_backward(gm, x, {2, 3}, {2, 2}, {1, 1}, {1, 1}, false, idx));
}

TEST(BackwardOps, LossesByHand) {
  // nll_loss, mean over weights 2 + 3 (the ignored sample contributes nothing).
  Tensor lp = Rand({3, 4}, 25);
  Tensor target = Make<int64_t>({1, -100, 3}, {3});
  Tensor w = Make<double>({1, 2, 1, 3}, {4});
  Tensor gi = ops::nll_loss_backward(Make<double>({5.0}, {}), lp, target, w, 1, -100, Make<double>({5.0}, {}));
  ExpectNear(Values<double>(gi), {0, -2, 0, 0, 0, 0, 0, 0, 0, 0, 0, -3}, 1e-12);
  // mse_loss, sum: 2 * (x - y) * g.
  Tensor x = Make<double>({1, 2, 3}, {3}), y = Make<double>({0, 4, 3}, {3});
  ExpectNear(Values<double>(ops::mse_loss_backward(Make<double>({0.5}, {}), x, y, 2)), {1, -2, 0}, 1e-12);
  // huber (delta 1): clipped to +-delta beyond it.
  ExpectNear(Values<double>(ops::huber_loss_backward(Make<double>({1.0}, {}), x, y, 2, 1.0)), {1, -1, 0}, 1e-12);
  // binary_cross_entropy, none: g * (x - y) / (x (1 - x)).
  Tensor p = Make<double>({0.25, 0.5}, {2}), t = Make<double>({1, 0}, {2});
  ExpectNear(Values<double>(ops::binary_cross_entropy_backward(Make<double>({1, 2}, {2}), p, t, std::nullopt, 0)),
             {-4, 4}, 1e-12);
  // embedding_dense_backward: padding row stays 0, scale_grad_by_freq divides by the count.
  Tensor idx = Make<int64_t>({0, 2, 0, 1}, {4});
  Tensor ge = Make<double>({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2});
  ExpectNear(Values<double>(ops::embedding_dense_backward(ge, idx, 3, 1, false)), {6, 8, 0, 0, 3, 4}, 1e-12);
  ExpectNear(Values<double>(ops::embedding_dense_backward(ge, idx, 3, -1, true)), {3, 4, 7, 8, 3, 4}, 1e-12);
}

TEST(BackwardOps, BadInputNamesTheOp) {
  Tensor a = Rand({3, 4}, 26), b = Rand({4, 3}, 27);
  ExpectErrorNaming([&] { ops::gelu_backward(a, b); }, "gelu_backward");
  ExpectErrorNaming([&] { ops::_softmax_backward_data(a, b, 1, ScalarType::Float64); }, "_softmax_backward_data");
  ExpectErrorNaming([&] { ops::mse_loss_backward(Rand({2}, 1), a, b, 0); }, "mse_loss_backward");
  ExpectErrorNaming([&] {
    ops::native_layer_norm_backward(a, a, Shape({4}), Rand({2, 1}, 1), Rand({3, 1}, 2), std::nullopt, std::nullopt,
                                    {true, false, false});
  }, "native_layer_norm_backward");
  ExpectErrorNaming([&] {
    ops::convolution_backward(Rand({1, 2, 3, 3}, 1), Rand({1, 2, 4, 4}, 2), Rand({2, 2, 3, 3}, 3), std::nullopt,
                              Shape({1}), Shape({0}), Shape({1}), false, Shape({0}), 1, {true, true, false});
  }, "convolution_backward");
  ExpectErrorNaming([&] { ops::embedding_dense_backward(Rand({5, 2}, 1), Make<int64_t>({0, 1}, {2}), 3, -1, false); },
                    "embedding_dense_backward");
  EXPECT_THROW(ops::embedding_dense_backward(Rand({2, 2}, 1), Make<int64_t>({0, 7}, {2}), 3, -1, false), IndexError);
  EXPECT_THROW(ops::gelu_backward(Make<int64_t>({1}, {1}), Make<int64_t>({1}, {1})), NotImplementedError);
}

}  // namespace
}  // namespace kiln
