// tensor/nn_ops_test.cc: the linalg, conv/pool and norm op families against hand-computed values,
// naive reference loops, meta shapes, and PyTorch's error classes and messages.
#include <cmath>
#include <string>
#include <typeinfo>
#include <vector>

#include "gtest/gtest.h"
#include "tensor/ops/common.h"

namespace kiln {
namespace {

using Vec = std::vector<double>;
using SymList = std::vector<SymInt>;
using OptTensor = std::optional<Tensor>;
using Tensor3 = std::tuple<Tensor, Tensor, Tensor>;

Tensor T(const Vec& v, DimVector sizes, ScalarType dt = ScalarType::Float32) {
  Tensor t = EmptyTensor(sizes, dt, Device());
  EXPECT_EQ(static_cast<int64_t>(v.size()), t.numel());
  KILN_DISPATCH_ALL(dt, "test", [&] {
    scalar_t* p = t.data_ptr<scalar_t>();
    for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<scalar_t>(static_cast<opmath_t<scalar_t>>(v[i]));
  });
  return t;
}

// Deterministic pseudo-random values in [-1, 1).
Vec Seq(int64_t n, int seed = 1) {
  Vec v(n);
  uint32_t s = 2654435761u * seed + 12345;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = ((s >> 8) & 0xffff) / 32768.0 - 1.0;
  }
  return v;
}

Tensor Rand(DimVector sizes, int seed = 1, ScalarType dt = ScalarType::Float32) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return T(Seq(n, seed), sizes, dt);
}

Vec Values(const Tensor& t) {
  Tensor c = ops::contiguous(t);
  Vec v(c.numel());
  KILN_DISPATCH_ALL(c.dtype(), "test", [&] {
    const scalar_t* p = c.data_ptr<scalar_t>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(static_cast<opmath_t<scalar_t>>(p[i]));
  });
  return v;
}

void ExpectValues(const Tensor& t, const Vec& expected, double tol = 1e-5) {
  Vec got = Values(t);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(expected[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i;
    } else {
      EXPECT_NEAR(got[i], expected[i], tol * std::max(1.0, std::fabs(expected[i]))) << "at " << i;
    }
  }
}

void ExpectSizes(const Tensor& t, DimVector sizes) { EXPECT_EQ(t.sizes(), sizes); }

// Runs f, expects it to throw exactly error class E with a message containing `needle`.
template <typename E, typename F>
void ExpectError(F f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected an error containing: " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(typeid(e), typeid(E)) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

Tensor Call(const char* name, const Tensor& a, const Tensor& b) { return CallOp<Tensor>(Registry::Get().FindOrThrow(name), a, b); }
Tensor Mm(const Tensor& a, const Tensor& b) { return Call("aten::mm", a, b); }
Tensor Bmm(const Tensor& a, const Tensor& b) { return Call("aten::bmm", a, b); }
Tensor Matmul(const Tensor& a, const Tensor& b) { return Call("aten::matmul", a, b); }
Tensor Dot(const Tensor& a, const Tensor& b) { return Call("aten::dot", a, b); }
Tensor Addmm(const Tensor& s, const Tensor& a, const Tensor& b, Scalar beta = 1, Scalar alpha = 1) {
  return CallOp<Tensor>(KILN_OP("aten::addmm"), s, a, b, beta, alpha);
}
Tensor Baddbmm(const Tensor& s, const Tensor& a, const Tensor& b, Scalar beta = 1, Scalar alpha = 1) {
  return CallOp<Tensor>(KILN_OP("aten::baddbmm"), s, a, b, beta, alpha);
}
Tensor Linear(const Tensor& x, const Tensor& w, OptTensor b) { return CallOp<Tensor>(KILN_OP("aten::linear"), x, w, b); }
Tensor Meta(DimVector sizes, ScalarType dt = ScalarType::Float32) {
  return EmptyTensor(SymDimVector(sizes.begin(), sizes.end()), dt, Device(DeviceType::Meta));
}

// Naive [.., m, k] @ [.., k, n] over contiguous batches of equal count.
Vec NaiveBmm(const Tensor& a, const Tensor& b) {
  Vec x = Values(a), y = Values(b);
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1), batch = a.numel() / (m * k);
  Vec out(batch * m * n, 0.0);
  for (int64_t t = 0; t < batch; ++t)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += x[t * m * k + i * k + p] * y[t * k * n + p * n + j];
        out[t * m * n + i * n + j] = s;
      }
  return out;
}

// --- linalg ----------------------------------------------------------------------------------------

TEST(Linalg, MmHandComputed) {
  Tensor a = T({1, 2, 3, 4, 5, 6}, {2, 3}), b = T({7, 8, 9, 10, 11, 12}, {3, 2});
  Tensor c = Mm(a, b);
  ExpectSizes(c, {2, 2});
  EXPECT_EQ(c.dtype(), ScalarType::Float32);
  ExpectValues(c, {58, 64, 139, 154});
  for (ScalarType dt : {ScalarType::Float64, ScalarType::Int64, ScalarType::Int32, ScalarType::Float16,
                        ScalarType::BFloat16, ScalarType::UInt8}) {
    Tensor r = Mm(CastTo(a, dt), CastTo(b, dt));
    EXPECT_EQ(r.dtype(), dt);
    ExpectValues(r, {58, 64, 139, 154}, dt == ScalarType::BFloat16 ? 1e-2 : 1e-6);
  }
}

TEST(Linalg, MmStridedOperands) {
  // Transposed views, sliced rows/cols and expanded (stride-0) operands all match the naive product.
  Tensor a = Rand({40, 30}, 1), b = Rand({30, 20}, 2);
  Vec ref = NaiveBmm(a, b);
  Tensor at = ops::transpose(ops::contiguous(ops::transpose(a, 0, 1)), 0, 1);  // column-major a
  Tensor bt = ops::transpose(ops::contiguous(ops::transpose(b, 0, 1)), 0, 1);
  ExpectValues(Mm(at, b), ref, 1e-4);
  ExpectValues(Mm(a, bt), ref, 1e-4);
  ExpectValues(Mm(at, bt), ref, 1e-4);
  ExpectValues(Mm(CastTo(at, ScalarType::Float64), CastTo(bt, ScalarType::Float64)), ref, 1e-10);
  Tensor big = Rand({40, 60}, 3);
  Tensor every_other = ops::slice(big, 1, 0, 60, 2);  // col stride 2: needs a copy
  ExpectValues(Mm(every_other, b), NaiveBmm(ops::contiguous(every_other), b), 1e-4);
  Tensor row = ops::expand(Rand({1, 30}, 4), {SymInt(5), SymInt(30)});
  ExpectValues(Mm(row, b), NaiveBmm(ops::contiguous(row), b), 1e-4);
  // Integer loop path, with a transposed operand.
  Tensor ai = T({1, 2, 3, 4, 5, 6}, {3, 2}, ScalarType::Int64);
  ExpectValues(Mm(ops::transpose(ai, 0, 1), ai), {35, 44, 44, 56});
}

TEST(Linalg, MmEmptyAndZeroInner) {
  Tensor c = Mm(EmptyTensor(DimVector{2, 0}, ScalarType::Float32, Device()),
                EmptyTensor(DimVector{0, 3}, ScalarType::Float32, Device()));
  ExpectSizes(c, {2, 3});
  ExpectValues(c, Vec(6, 0.0));
  ExpectSizes(Mm(Rand({0, 4}), Rand({4, 3})), {0, 3});
}

TEST(Linalg, MmErrors) {
  ExpectError<Error>([] { Mm(Rand({2, 3}), Rand({4, 5})); }, "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)");
  ExpectError<Error>([] { Mm(Rand({3}), Rand({3, 2})); }, "self must be a matrix");
  ExpectError<Error>([] { Mm(Rand({2, 3}), Rand({3, 2}, 1, ScalarType::Float64)); },
                     "expected m1 and m2 to have the same dtype, but got: float != double");
  ExpectError<NotImplementedError>([] { Mm(Rand({2, 3}, 1, ScalarType::Bool), Rand({3, 2}, 1, ScalarType::Bool)); },
                                   "\"addmm_impl_cpu_\" not implemented for 'Bool'");
}

TEST(Linalg, BmmAndBaddbmm) {
  Tensor a = Rand({3, 4, 5}, 1), b = Rand({3, 5, 2}, 2);
  Tensor c = Bmm(a, b);
  ExpectSizes(c, {3, 4, 2});
  ExpectValues(c, NaiveBmm(a, b), 1e-5);
  // A batch of transposed matrices.
  Tensor bt = ops::transpose(ops::contiguous(ops::transpose(b, 1, 2)), 1, 2);
  ExpectValues(Bmm(a, bt), NaiveBmm(a, b), 1e-5);
  Tensor self = T({1, 2}, {2});  // broadcasts over [3, 4, 2]
  Tensor r = Baddbmm(self, a, b, 0.5, 2);
  Vec ref = NaiveBmm(a, b);
  for (size_t i = 0; i < ref.size(); ++i) ref[i] = 0.5 * (i % 2 == 0 ? 1 : 2) + 2 * ref[i];
  ExpectValues(r, ref, 1e-5);
  ExpectError<Error>([&] { Bmm(a, Rand({3, 4, 2})); },
                     "Expected size for first two dimensions of batch2 tensor to be: [3, 5] but got: [3, 4].");
  ExpectError<Error>([&] { Bmm(Rand({4, 5}), b); }, "batch1 must be a 3D tensor");
}

TEST(Linalg, AddmmBetaAlpha) {
  Tensor a = T({1, 2, 3, 4}, {2, 2}), b = T({1, 0, 0, 1}, {2, 2});
  Tensor bias = T({10, 20}, {2});
  ExpectValues(Addmm(bias, a, b), {11, 22, 13, 24});
  ExpectValues(Addmm(bias, a, b, 2, 3), {23, 46, 29, 52});
  // beta = 0 ignores self entirely, NaN included.
  Tensor nan = T({NAN, NAN, NAN, NAN}, {2, 2});
  ExpectValues(Addmm(nan, a, b, 0, 1), {1, 2, 3, 4});
  Tensor ai = CastTo(a, ScalarType::Int64), bi = CastTo(b, ScalarType::Int64);
  ExpectValues(Addmm(CastTo(bias, ScalarType::Int64), ai, bi, 1, 2), {12, 24, 16, 28});
  ExpectError<Error>([&] { Addmm(T({1, 2, 3}, {3}), a, b); },
                     "The expanded size of the tensor (2) must match the existing size (3) at non-singleton dimension "
                     "1.  Target sizes: [2, 2].  Tensor sizes: [3]");
  ExpectError<Error>([&] { Addmm(CastTo(bias, ScalarType::Float64), a, b); },
                     "self and mat2 must have the same dtype, but got Double and Float");
  ExpectError<Error>([&] { Addmm(bias, a, T({1, 2, 3}, {1, 3})); }, "mat1 and mat2 shapes cannot be multiplied (2x2 and 1x3)");
}

TEST(Linalg, Dot) {
  Tensor d = Dot(T({1, 2, 3}, {3}), T({4, 5, 6}, {3}));
  EXPECT_EQ(d.dim(), 0);
  ExpectValues(d, {32});
  ExpectValues(Dot(T({1, 2, 3}, {3}, ScalarType::Int32), T({4, 5, 6}, {3}, ScalarType::Int32)), {32});
  Tensor strided = ops::slice(T({1, 9, 2, 9, 3, 9}, {6}), 0, 0, 6, 2);
  ExpectValues(Dot(strided, T({4, 5, 6}, {3})), {32});
  ExpectError<Error>([] { Dot(Rand({3}), Rand({4})); },
                     "inconsistent tensor size, expected tensor [3] and src [4] to have the same number of elements");
  ExpectError<Error>([] { Dot(Rand({2, 3}), Rand({3})); }, "1D tensors expected, but got 2D and 1D tensors");
}

TEST(Linalg, MatmulShapes) {
  ExpectValues(Matmul(T({1, 2, 3}, {3}), T({4, 5, 6}, {3})), {32});
  Tensor m = T({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor mv = Matmul(m, T({1, 0, -1}, {3}));
  ExpectSizes(mv, {2});
  ExpectValues(mv, {-2, -2});
  Tensor vm = Matmul(T({1, -1}, {2}), m);
  ExpectSizes(vm, {3});
  ExpectValues(vm, {-3, -3, -3});
  // [2, 4, 3] @ [3, 5] folds into one mm.
  Tensor a = Rand({2, 4, 3}, 1), b = Rand({3, 5}, 2);
  Tensor c = Matmul(a, b);
  ExpectSizes(c, {2, 4, 5});
  ExpectValues(c, NaiveBmm(ops::reshape(a, {SymInt(8), SymInt(3)}), b), 1e-5);
  // Broadcast batch dims: [2, 1, 4, 3] @ [3, 3, 2] -> [2, 3, 4, 2].
  Tensor x = Rand({2, 1, 4, 3}, 3), y = Rand({3, 3, 2}, 4);
  Tensor z = Matmul(x, y);
  ExpectSizes(z, {2, 3, 4, 2});
  Tensor xe = ops::contiguous(ops::expand(x, {SymInt(2), SymInt(3), SymInt(4), SymInt(3)}));
  Tensor ye = ops::contiguous(ops::expand(y, {SymInt(2), SymInt(3), SymInt(3), SymInt(2)}));
  ExpectValues(z, NaiveBmm(xe, ye), 1e-5);
  // 1-D with batched operands.
  ExpectSizes(Matmul(T({1, 2, 3}, {3}), Rand({4, 3, 2})), {4, 2});
  ExpectSizes(Matmul(Rand({4, 2, 3}), T({1, 2, 3}, {3})), {4, 2});
  ExpectSizes(Matmul(Rand({2, 3}), Rand({4, 3, 5})), {4, 2, 5});
  ExpectError<Error>([] { Matmul(T({1}, {}), Rand({2, 2})); },
                     "both arguments to matmul need to be at least 1D, but they are 0D and 2D");
  ExpectError<Error>([] { Matmul(Rand({2, 3}), Rand({4})); }, "size mismatch, got input (2), mat (2x3), vec (4)");
  ExpectError<Error>([] { Matmul(Rand({2, 2, 3}), Rand({3, 4, 5})); }, "must match the size of tensor b");
}

TEST(Linalg, LinearAndMeta) {
  Tensor x = T({1, 2, 3, 4, 5, 6}, {2, 3}), w = T({1, 0, 0, 0, 1, 1}, {2, 3}), b = T({0.5, -1}, {2});
  ExpectValues(Linear(x, w, b), {1.5, 4, 4.5, 10});
  ExpectValues(Linear(x, w, std::nullopt), {1, 5, 4, 11});
  Tensor x3 = ops::reshape(x, {SymInt(1), SymInt(2), SymInt(3)});
  Tensor y3 = Linear(x3, w, b);
  ExpectSizes(y3, {1, 2, 2});
  ExpectValues(y3, {1.5, 4, 4.5, 10});
  // Meta tensors: shapes and checks without data.
  Tensor mm = Mm(Meta({7, 3}), Meta({3, 9}));
  EXPECT_TRUE(mm.device().is_meta());
  ExpectSizes(mm, {7, 9});
  ExpectSizes(Matmul(Meta({5, 1, 7, 3}), Meta({4, 3, 2})), {5, 4, 7, 2});
  ExpectSizes(Linear(Meta({8, 3}), Meta({6, 3}), Meta({6})), {8, 6});
  ExpectError<Error>([] { Mm(Meta({2, 3}), Meta({4, 5})); }, "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)");
}

TEST(Linalg, LargeMatmulMatchesNaive) {
  Tensor a = Rand({3, 67, 45}, 5), b = Rand({3, 45, 53}, 6);
  ExpectValues(Matmul(a, b), NaiveBmm(a, b), 1e-4);
  Tensor ai = T(Values(a), {3, 67, 45}, ScalarType::Float64);
  ExpectValues(Matmul(ai, CastTo(b, ScalarType::Float64)), NaiveBmm(a, b), 1e-10);
}

// --- convolution -----------------------------------------------------------------------------------

using IntList = std::vector<int64_t>;

Tensor Conv(const Tensor& x, const Tensor& w, OptTensor b, IntList stride, IntList pad, IntList dil,
            bool transposed = false, IntList out_pad = {0}, int64_t groups = 1) {
  return CallOp<Tensor>(KILN_OP("aten::convolution"), x, w, b, stride, pad, dil, transposed, out_pad, SymInt(groups));
}
Tensor Conv2d(const Tensor& x, const Tensor& w, OptTensor b, IntList stride = {1}, IntList pad = {0},
              IntList dil = {1}, int64_t groups = 1) {
  return CallOp<Tensor>(KILN_OP("aten::conv2d"), x, w, b, stride, pad, dil, SymInt(groups));
}

struct Conv2dArgs {
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
};

// Direct 2-D convolution, one output element at a time.
Vec NaiveConv2d(const Tensor& x, const Tensor& w, const Vec& bias, const Conv2dArgs& a, int64_t oh, int64_t ow) {
  Vec in = Values(x), wt = Values(w);
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t O = w.size(0), Cg = w.size(1), kh = w.size(2), kw = w.size(3), Og = O / a.groups;
  Vec out(N * O * oh * ow, 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xo = 0; xo < ow; ++xo) {
          double s = bias.empty() ? 0 : bias[o];
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                int64_t iy = y * a.sh - a.ph + i * a.dh, ix = xo * a.sw - a.pw + j * a.dw;
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                int64_t ci = (o / Og) * Cg + c;
                s += in[((n * C + ci) * H + iy) * W + ix] * wt[((o * Cg + c) * kh + i) * kw + j];
              }
          out[((n * O + o) * oh + y) * ow + xo] = s;
        }
  return out;
}

// Transposed 2-D convolution by scattering each input element through the kernel.
Vec NaiveConvTranspose2d(const Tensor& x, const Tensor& w, const Conv2dArgs& a, int64_t oh, int64_t ow) {
  Vec in = Values(x), wt = Values(w);
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t Og = w.size(1), kh = w.size(2), kw = w.size(3), Cg = C / a.groups, O = Og * a.groups;
  Vec out(N * O * oh * ow, 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t y = 0; y < H; ++y)
        for (int64_t xi = 0; xi < W; ++xi)
          for (int64_t o = 0; o < Og; ++o)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                int64_t oy = y * a.sh - a.ph + i * a.dh, ox = xi * a.sw - a.pw + j * a.dw;
                if (oy < 0 || oy >= oh || ox < 0 || ox >= ow) continue;
                int64_t oc = (c / Cg) * Og + o;
                out[((n * O + oc) * oh + oy) * ow + ox] +=
                    in[((n * C + c) * H + y) * W + xi] * wt[((c * Og + o) * kh + i) * kw + j];
              }
  return out;
}

TEST(Conv, HandComputed) {
  Tensor x = T({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3}), w = T({1, 1, 1, 1}, {1, 1, 2, 2});
  Tensor y = Conv2d(x, w, T({1}, {1}));
  ExpectSizes(y, {1, 1, 2, 2});
  ExpectValues(y, {13, 17, 25, 29});
  // Padding 1, stride 2: the corners see one, two, or four inputs.
  ExpectValues(Conv2d(x, w, std::nullopt, {2}, {1}), {1, 5, 11, 28});
  // Integer convolution (PyTorch supports it on CPU).
  Tensor yi = Conv2d(CastTo(x, ScalarType::Int64), CastTo(w, ScalarType::Int64), T({1}, {1}, ScalarType::Int64));
  EXPECT_EQ(yi.dtype(), ScalarType::Int64);
  ExpectValues(yi, {13, 17, 25, 29});
  // Unbatched input.
  Tensor y3 = Conv2d(ops::reshape(x, {SymInt(1), SymInt(3), SymInt(3)}), w, std::nullopt);
  ExpectSizes(y3, {1, 2, 2});
  ExpectValues(y3, {12, 16, 24, 28});
}

TEST(Conv, StridePaddingDilationGroups) {
  Tensor x = Rand({2, 4, 7, 6}, 1), w = Rand({6, 2, 3, 2}, 2), b = Rand({6}, 3);
  Conv2dArgs a{2, 1, 1, 1, 1, 2, 2};
  Tensor y = Conv(x, w, b, {2, 1}, {1, 1}, {1, 2}, false, {0, 0}, 2);
  ExpectSizes(y, {2, 6, 4, 6});
  ExpectValues(y, NaiveConv2d(x, w, Values(b), a, 4, 6), 1e-5);
  ExpectValues(Conv(CastTo(x, ScalarType::Float64), CastTo(w, ScalarType::Float64), CastTo(b, ScalarType::Float64),
                    {2, 1}, {1, 1}, {1, 2}, false, {0, 0}, 2),
               NaiveConv2d(x, w, Values(b), a, 4, 6), 1e-10);
  // Depthwise, and a 1x1 kernel (the no-im2col path) on a non-contiguous input.
  Tensor wd = Rand({4, 1, 3, 3}, 4);
  ExpectValues(Conv2d(x, wd, std::nullopt, {1}, {1}, {1}, 4), NaiveConv2d(x, wd, {}, Conv2dArgs{1, 1, 1, 1, 1, 1, 4}, 7, 6),
               1e-5);
  Tensor xt = ops::transpose(Rand({2, 4, 6, 7}, 5), 2, 3);
  Tensor w1 = Rand({5, 4, 1, 1}, 6);
  ExpectValues(Conv2d(xt, w1, std::nullopt), NaiveConv2d(ops::contiguous(xt), w1, {}, Conv2dArgs{}, 7, 6), 1e-5);
  // float16 computes in float32.
  Tensor yh = Conv2d(CastTo(x, ScalarType::Float16), CastTo(wd, ScalarType::Float16), std::nullopt, {1}, {1}, {1}, 4);
  EXPECT_EQ(yh.dtype(), ScalarType::Float16);
  ExpectValues(yh, NaiveConv2d(CastTo(x, ScalarType::Float16), CastTo(wd, ScalarType::Float16), {},
                               Conv2dArgs{1, 1, 1, 1, 1, 1, 4}, 7, 6), 3e-3);
}

TEST(Conv, OneDimensional) {
  Tensor x = Rand({2, 2, 9}, 1), w = Rand({3, 2, 3}, 2), b = Rand({3}, 3);
  Tensor y = Conv(x, w, b, {2}, {1}, {2});
  ExpectSizes(y, {2, 3, 4});  // (9 + 2 - 2*2 - 1) / 2 + 1
  Tensor x4 = ops::unsqueeze(x, 2), w4 = ops::unsqueeze(w, 2);
  ExpectValues(y, NaiveConv2d(x4, w4, Values(b), Conv2dArgs{1, 2, 0, 1, 1, 2, 1}, 1, 4), 1e-5);
}

TEST(Conv, Transposed) {
  Tensor x = Rand({2, 4, 3, 3}, 1), w = Rand({4, 3, 3, 2}, 2), b = Rand({6}, 3);
  Conv2dArgs a{2, 2, 1, 0, 1, 2, 2};
  // oh = (3-1)*2 - 2 + 1*(3-1) + 1 + 1 = 6; ow = (3-1)*2 - 0 + 2*(2-1) + 0 + 1 = 7
  Tensor y = Conv(x, w, b, {2, 2}, {1, 0}, {1, 2}, true, {1, 0}, 2);
  ExpectSizes(y, {2, 6, 6, 7});
  Vec ref = NaiveConvTranspose2d(x, w, a, 6, 7);
  Vec bias = Values(b);
  for (size_t i = 0; i < ref.size(); ++i) ref[i] += bias[(i / 42) % 6];
  ExpectValues(y, ref, 1e-5);
  // 1-D transposed, as 2-D with a height of 1; meta shape; an empty batch.
  Tensor x1 = Rand({1, 2, 5}, 4), w1 = Rand({2, 3, 3}, 5);
  Tensor y1 = Conv(x1, w1, std::nullopt, {2}, {1}, {1}, true, {1});
  ExpectSizes(y1, {1, 3, 10});  // (5-1)*2 - 2 + 2 + 1 + 1
  ExpectValues(y1, NaiveConvTranspose2d(ops::unsqueeze(x1, 2), ops::unsqueeze(w1, 2), Conv2dArgs{1, 2, 0, 1, 1, 1, 1},
                                        1, 10), 1e-5);
  ExpectSizes(Conv(Meta({4, 8, 16, 16}), Meta({8, 4, 4, 4}), std::nullopt, {2}, {1}, {1}, true, {0}), {4, 4, 32, 32});
  ExpectSizes(Conv2d(Rand({0, 2, 5, 5}), Rand({3, 2, 3, 3}), Rand({3})), {0, 3, 3, 3});
}

TEST(Conv, MetaAndErrors) {
  Tensor y = Conv2d(Meta({8, 3, 32, 32}), Meta({16, 3, 5, 5}), Meta({16}), {2}, {2});
  EXPECT_TRUE(y.device().is_meta());
  ExpectSizes(y, {8, 16, 16, 16});
  ExpectError<Error>([] { Conv2d(Rand({1, 4, 5, 5}), Rand({2, 3, 3, 3}), std::nullopt); },
                     "Given groups=1, weight of size [2, 3, 3, 3], expected input[1, 4, 5, 5] to have 3 channels, "
                     "but got 4 channels instead");
  ExpectError<Error>([] { Conv2d(Rand({1, 1, 2, 2}), Rand({1, 1, 3, 3}), std::nullopt); },
                     "Calculated padded input size per channel: (2 x 2). Kernel size: (3 x 3). Kernel size can't be "
                     "greater than actual input size");
  ExpectError<Error>([] { Conv2d(Rand({3, 3}), Rand({1, 1, 3, 3}), std::nullopt); },
                     "Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [3, 3]");
  ExpectError<Error>([] { Conv2d(Rand({1, 1, 3, 3}), Rand({1, 1, 3, 3}, 1, ScalarType::Float64), std::nullopt); },
                     "expected scalar type Float but found Double");
  ExpectError<Error>([] { Conv2d(Rand({1, 1, 3, 3}), Rand({1, 1, 1, 1}), Rand({1}, 1, ScalarType::Float64)); },
                     "Input type (float) and bias type (double) should be the same");
  ExpectError<Error>([] { Conv(Rand({1, 2, 3, 3}), Rand({2, 1, 2, 2}), std::nullopt, {1}, {0}, {1}, true, {0, 1}); },
                     "output padding must be smaller than either stride or dilation, but got output_padding_height: 0 "
                     "output_padding_width: 1 stride_height: 1 stride_width: 1 dilation_height: 1 dilation_width: 1");
  ExpectError<NotImplementedError>(
      [] { Conv2d(Rand({1, 1, 3, 3}, 1, ScalarType::Bool), Rand({1, 1, 1, 1}, 1, ScalarType::Bool), std::nullopt); },
      "\"slow_conv2d_cpu\" not implemented for 'Bool'");
  ExpectError<Error>([] { Conv2d(Rand({1, 4, 3, 3}), Rand({3, 2, 1, 1}), std::nullopt, {1}, {0}, {1}, 2); },
                     "Given groups=2, expected weight to be divisible by 2 at dimension 0, but got weight of size "
                     "[[3, 2, 1, 1]] instead");
  ExpectError<Error>([] { Conv2d(Rand({1, 1, 3, 3}), Rand({2, 1, 1, 1}), Rand({3})); },
                     "expected bias to be 1-dimensional with 2 elements, but got bias of size [3] instead");
  ExpectError<Error>([] { Conv2d(Rand({1, 1, 3, 3}), Rand({1, 1, 1, 1}), std::nullopt, {0}); },
                     "non-positive stride is not supported");
  ExpectError<Error>([] { Conv(Rand({1, 1, 3, 3}), Rand({1, 1, 1, 1}), std::nullopt, {1, 1, 1}, {0}, {1}); },
                     "expected stride to be a single integer value or a list of 2 values");
  ExpectError<NotImplementedError>(
      [] { Conv(Rand({1, 1, 3, 3, 3}), Rand({1, 1, 1, 1, 1}), std::nullopt, {1}, {0}, {1}); }, "only 1-D and 2-D");
}

// --- pooling ---------------------------------------------------------------------------------------

std::tuple<Tensor, Tensor> MaxPoolIdx(const Tensor& x, IntList k, IntList s = {}, IntList p = {0}, IntList d = {1},
                                      bool ceil = false) {
  return CallOp<std::tuple<Tensor, Tensor>>(KILN_OP("aten::max_pool2d_with_indices"), x, k, s, p, d, ceil);
}
Tensor MaxPool(const Tensor& x, IntList k, IntList s = {}, IntList p = {0}, IntList d = {1}, bool ceil = false) {
  return CallOp<Tensor>(KILN_OP("aten::max_pool2d"), x, k, s, p, d, ceil);
}
Tensor AvgPool(const Tensor& x, IntList k, IntList s = {}, IntList p = {0}, bool ceil = false, bool include = true,
               std::optional<int64_t> div = std::nullopt) {
  return CallOp<Tensor>(KILN_OP("aten::avg_pool2d"), x, k, s, p, ceil, include, div);
}
Tensor AdaptiveAvg(const Tensor& x, IntList size) {
  return CallOp<Tensor>(KILN_OP("aten::adaptive_avg_pool2d"), x, size);
}

// A [1, 1, n, n] tensor whose values are their flat indices.
Tensor Iota(int64_t n) {
  Vec v(n * n);
  for (int64_t i = 0; i < n * n; ++i) v[i] = static_cast<double>(i);
  return T(v, {1, 1, n, n});
}

TEST(Pool, MaxPoolValuesAndIndices) {
  Tensor x = T({1, 5, 2, 0, 3, 4, 8, 7, 6, 0, 1, 2, 9, 3, 4, 5}, {1, 1, 4, 4});
  auto [y, idx] = MaxPoolIdx(x, {2});
  ExpectSizes(y, {1, 1, 2, 2});
  ExpectValues(y, {5, 8, 9, 5});
  EXPECT_EQ(idx.dtype(), ScalarType::Int64);
  ExpectValues(idx, {1, 6, 12, 15});
  ExpectValues(MaxPool(x, {2}), {5, 8, 9, 5});
  ExpectValues(MaxPool(CastTo(x, ScalarType::Int64), {2}), {5, 8, 9, 5});
  ExpectValues(MaxPool(CastTo(x, ScalarType::BFloat16), {2}), {5, 8, 9, 5});
  // ceil_mode keeps the partial last window; padding and dilation.
  auto [yc, ic] = MaxPoolIdx(Iota(5), {2}, {2}, {0}, {1}, true);
  ExpectSizes(yc, {1, 1, 3, 3});
  ExpectValues(yc, {6, 8, 9, 16, 18, 19, 21, 23, 24});
  ExpectValues(ic, {6, 8, 9, 16, 18, 19, 21, 23, 24});
  ExpectSizes(MaxPool(Iota(5), {2}, {2}), {1, 1, 2, 2});
  ExpectValues(MaxPool(Iota(4), {3}, {2}, {1}), {5, 7, 13, 15});
  ExpectValues(MaxPool(Iota(4), {2}, {1}, {0}, {2}), {10, 11, 14, 15});
  // NaN wins, as in PyTorch; 3-D (unbatched) input.
  Tensor xn = T({1, NAN, 2, 3}, {1, 2, 2});
  auto [yn, in] = MaxPoolIdx(xn, {2});
  ExpectSizes(yn, {1, 1, 1});
  ExpectValues(yn, {NAN});
  ExpectValues(in, {1});
}

TEST(Pool, AvgPool) {
  Tensor x = T({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  ExpectValues(AvgPool(x, {2}, {1}), {3, 4, 6, 7});
  ExpectValues(AvgPool(x, {2}, {2}, {1}), {0.25, 1.25, 2.75, 7});
  ExpectValues(AvgPool(x, {2}, {2}, {1}, false, false), {1, 2.5, 5.5, 7});
  ExpectValues(AvgPool(x, {2}, {2}, {1}, false, true, 2), {0.5, 2.5, 5.5, 14});
  ExpectValues(AvgPool(x, {2}, {2}, {0}, true), {3, 4.5, 7.5, 9});
  ExpectValues(AvgPool(CastTo(x, ScalarType::Int64), {2}, {1}), {3, 4, 6, 7});
  ExpectValues(AvgPool(CastTo(x, ScalarType::Float64), {2, 3}, {1}), {3.5, 6.5});
  ExpectError<Error>([&] { AvgPool(x, {2}, {1}, {0}, false, true, 0); }, "divisor must be not zero");
  ExpectError<NotImplementedError>([&] { AvgPool(CastTo(x, ScalarType::Int32), {2}); },
                                   "\"avg_pool2d\" not implemented for 'Int'");
}

TEST(Pool, AdaptiveAvgPool) {
  Tensor x = T({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  Tensor y = AdaptiveAvg(x, {2, 2});
  ExpectSizes(y, {1, 1, 2, 2});
  ExpectValues(y, {3, 4, 6, 7});
  Tensor g = AdaptiveAvg(x, {1, 1});
  ExpectSizes(g, {1, 1, 1, 1});
  ExpectValues(g, {5});
  ExpectValues(CallOp<Tensor>(KILN_OP("aten::_adaptive_avg_pool2d"), x, IntList{1, 1}), {5});
  ExpectValues(AdaptiveAvg(x, {3, 1}), {2, 5, 8});
  // Overlapping, uneven windows (values from PyTorch 2.13).
  Vec iota(35);
  for (int i = 0; i < 35; ++i) iota[i] = i;
  ExpectValues(AdaptiveAvg(T(iota, {1, 5, 7}), {3, 4}), {4, 5.5, 7.5, 9, 14.5, 16, 18, 19.5, 25, 26.5, 28.5, 30});
  ExpectSizes(AdaptiveAvg(Meta({2, 3, 17, 9}), {4, 5}), {2, 3, 4, 5});
  ExpectError<Error>([&] { AdaptiveAvg(ops::reshape(x, {SymInt(9)}), {2, 2}); },
                     "adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got [9]");
  ExpectError<Error>([&] { AdaptiveAvg(x, {2}); }, "adaptive_avg_pool2d: output_size must be 2");
}

TEST(Pool, ShapesAndErrors) {
  ExpectSizes(MaxPool(Meta({4, 3, 32, 32}), {3}, {2}, {1}), {4, 3, 16, 16});
  ExpectSizes(AvgPool(Meta({3, 31, 31}), {2}, {2}, {0}, true), {3, 16, 16});
  ExpectError<Error>([] { MaxPool(Iota(4), {2}, {2}, {2}); },
                     "pad should be at most half of effective kernel size, but got pad=2, kernel_size=2 and dilation=1");
  ExpectError<Error>([] { MaxPool(Iota(9), {3}, {1}, {2}, {2}); },
                     "pad should be smaller than or equal to half of kernel size, but got padW = 2, padH = 2, kW = 3, "
                     "kH = 3");
  ExpectError<Error>([] { MaxPool(Iota(2), {3}); },
                     "Given input size: (1x2x2). Calculated output size: (1x0x0). Output size is too small");
  ExpectError<Error>([] { MaxPool(T({1, 2, 3, 4}, {2, 2}), {2}); },
                     "non-empty 3D or 4D (batch mode) tensor expected for input");
  ExpectError<IndexError>([] { AvgPool(T({1, 2, 3, 4}, {2, 2}), {2}); }, "Dimension out of range");
  ExpectError<Error>([] { AvgPool(Rand({1, 0, 4, 4}), {2}); },
                     "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, but got:[1, 0, 4, 4]");
  ExpectSizes(AvgPool(Rand({0, 1, 4, 4}), {2}), {0, 1, 2, 2});
  ExpectError<Error>([] { MaxPool(Iota(4), {2, 2, 2}); },
                     "max_pool2d: kernel_size must either be a single int, or a tuple of two ints");
  ExpectError<Error>([] { MaxPool(Iota(4), {0}, {1}); }, "kernel size should be greater than zero, but got kH: 0 kW: 0");
  ExpectError<Error>([] { MaxPool(Iota(4), {0}); }, "stride should not be zero");
  ExpectError<NotImplementedError>([] { MaxPool(CastTo(Iota(4), ScalarType::Bool), {2}); },
                                   "\"max_pool2d\" not implemented for 'Bool'");
}

// --- normalization ---------------------------------------------------------------------------------

Tensor3 NativeBatchNorm(const Tensor& x, OptTensor w, OptTensor b, OptTensor rm, OptTensor rv, bool training,
                        double momentum = 0.1, double eps = 1e-5) {
  return CallOp<Tensor3>(KILN_OP("aten::native_batch_norm"), x, w, b, rm, rv, training, momentum, eps);
}

TEST(Norm, BatchNormTraining) {
  Tensor x = T({1, 2, 3, 4, 5, 9}, {3, 2});
  Tensor w = T({1, 2}, {2}), b = T({0, 1}, {2});
  Tensor rm = T({0, 0}, {2}), rv = T({1, 1}, {2});
  const uint32_t version = rm->version();
  auto [y, mean, invstd] = NativeBatchNorm(x, w, b, rm, rv, true);
  const double is0 = 1 / std::sqrt(8.0 / 3 + 1e-5), is1 = 1 / std::sqrt(26.0 / 3 + 1e-5);
  ExpectValues(y, {-2 * is0, 2 * (-3) * is1 + 1, 0, 2 * (-1) * is1 + 1, 2 * is0, 2 * 4 * is1 + 1});
  ExpectValues(mean, {3, 5});
  ExpectValues(invstd, {is0, is1});
  // Running stats: momentum 0.1, unbiased variance (8/2 and 26/2).
  ExpectValues(rm, {0.3, 0.5});
  ExpectValues(rv, {0.9 + 0.4, 0.9 + 1.3});
  EXPECT_GT(rm->version(), version);
  // Spatial dims: statistics over N, H, W per channel.
  Tensor x4 = Rand({2, 3, 2, 2}, 7);
  auto [y4, m4, s4] = NativeBatchNorm(x4, std::nullopt, std::nullopt, std::nullopt, std::nullopt, true);
  Vec v = Values(x4), ym(24);
  for (int c = 0; c < 3; ++c) {
    double s = 0, q = 0;
    for (int n = 0; n < 2; ++n)
      for (int i = 0; i < 4; ++i) s += v[(n * 3 + c) * 4 + i];
    double mu = s / 8;
    for (int n = 0; n < 2; ++n)
      for (int i = 0; i < 4; ++i) q += (v[(n * 3 + c) * 4 + i] - mu) * (v[(n * 3 + c) * 4 + i] - mu);
    for (int n = 0; n < 2; ++n)
      for (int i = 0; i < 4; ++i) ym[(n * 3 + c) * 4 + i] = (v[(n * 3 + c) * 4 + i] - mu) / std::sqrt(q / 8 + 1e-5);
  }
  ExpectValues(y4, ym, 1e-4);
  ExpectSizes(m4, {3});
}

TEST(Norm, BatchNormEvalAndComposite) {
  Tensor x = T({1, 2, 3, 4}, {2, 2});
  Tensor rm = T({1, 2}, {2}), rv = T({4, 1}, {2});
  auto [y, mean, invstd] = NativeBatchNorm(x, std::nullopt, T({0, 10}, {2}), rm, rv, false, 0.1, 0);
  ExpectValues(y, {0, 10, 1, 12});
  ExpectSizes(mean, {0});
  ExpectSizes(invstd, {0});
  ExpectValues(rm, {1, 2});  // untouched in eval mode
  Tensor yc = CallOp<Tensor>(KILN_OP("aten::batch_norm"), x, OptTensor(), OptTensor(), OptTensor(rm), OptTensor(rv),
                             false, 0.1, 0.0, true);
  ExpectValues(yc, {0, 0, 1, 2});
  ExpectError<ValueError>(
      [&] {
        CallOp<Tensor>(KILN_OP("aten::batch_norm"), T({1, 2, 3}, {1, 3}), OptTensor(), OptTensor(), OptTensor(),
                       OptTensor(), true, 0.1, 1e-5, true);
      },
      "Expected more than 1 value per channel when training, got input size [1, 3]");
  ExpectError<Error>([&] { NativeBatchNorm(x, T({1, 2, 3}, {3}), std::nullopt, std::nullopt, std::nullopt, true); },
                     "weight should contain 2 elements not 3");
  ExpectError<Error>([&] { NativeBatchNorm(x, std::nullopt, std::nullopt, std::nullopt, std::nullopt, false); },
                     "running_mean and running_var must be defined in evaluation mode");
  ExpectError<NotImplementedError>(
      [&] { NativeBatchNorm(CastTo(x, ScalarType::Int64), std::nullopt, std::nullopt, rm, rv, false); },
      "\"batch_norm\" not implemented for 'Long'");
  ExpectError<Error>([&] { NativeBatchNorm(CastTo(x, ScalarType::Float64), rm, std::nullopt, rm, rv, false); },
                     "mixed dtype (CPU): all inputs must share same datatype.");
  ExpectError<Error>(
      [&] { NativeBatchNorm(CastTo(x, ScalarType::Float16), CastTo(rm, ScalarType::Float64), std::nullopt, rm, rv,
                            false); },
      "mixed dtype (CPU): expect parameter to have scalar type of Float");
  ExpectError<IndexError>([&] { NativeBatchNorm(T({1, 2}, {2}), std::nullopt, std::nullopt, rm, rv, false); },
                          "Dimension out of range");
  // A float16 input with float32 parameters keeps float32 statistics.
  auto [yh, mh, sh] = NativeBatchNorm(CastTo(x, ScalarType::Float16), rm, std::nullopt, std::nullopt, std::nullopt,
                                      true);
  EXPECT_EQ(yh.dtype(), ScalarType::Float16);
  EXPECT_EQ(mh.dtype(), ScalarType::Float32);
  auto [my, mm, ms] = NativeBatchNorm(Meta({4, 3, 5}), std::nullopt, std::nullopt, std::nullopt, std::nullopt, true);
  ExpectSizes(my, {4, 3, 5});
  ExpectSizes(mm, {3});
}

TEST(NnOps, TypedApi) {
  // The ops:: wrappers reach the same kernels.
  Tensor x = T({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3}), w = T({1, 1, 1, 1}, {1, 1, 2, 2});
  ExpectValues(ops::conv2d(x, w), {12, 16, 24, 28});
  ExpectValues(ops::max_pool2d(x, {2}, {1}), {5, 6, 8, 9});
  ExpectValues(ops::avg_pool2d(x, {2}, {1}), {3, 4, 6, 7});
  ExpectValues(ops::adaptive_avg_pool2d(x, {1, 1}), {5});
  Tensor m = T({1, 2, 3, 4}, {2, 2});
  ExpectValues(ops::mm(m, m), {7, 10, 15, 22});
  ExpectValues(ops::matmul(m, m), {7, 10, 15, 22});
  ExpectValues(ops::addmm(m, m, m, 1, 2), {15, 22, 33, 48});
  ExpectValues(ops::linear(m, m, T({1, 1}, {2})), {6, 12, 12, 26});
  ExpectSizes(ops::bmm(Rand({2, 3, 4}), Rand({2, 4, 5})), {2, 3, 5});
  ExpectValues(ops::layer_norm(T({1, 3}, {1, 2}), {2}, std::nullopt, std::nullopt, 0), {-1, 1});
  ExpectValues(ops::group_norm(T({1, 3}, {1, 2}), 1, std::nullopt, std::nullopt, 0), {-1, 1});
  ExpectValues(ops::batch_norm(T({1, 3}, {2, 1}), std::nullopt, std::nullopt, std::nullopt, std::nullopt, true, 0.1, 0),
               {-1, 1});
}

TEST(Norm, BatchNormLegitFamily) {
  Tensor x = T({1, 2, 3, 4, 5, 9}, {3, 2});
  Tensor rm = T({0, 0}, {2}), rv = T({1, 1}, {2});
  auto [y, mean, invstd, rm2, rv2] = CallOp<std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor>>(
      KILN_OP("aten::_native_batch_norm_legit_functional"), x, OptTensor(), OptTensor(), rm, rv, true, 0.1, 1e-5);
  ExpectValues(rm2, {0.3, 0.5});
  ExpectValues(rv2, {1.3, 2.2});
  ExpectValues(rm, {0, 0});  // the inputs are not written
  ExpectValues(mean, {3, 5});
  const Op& legit = KILN_OP("aten::_native_batch_norm_legit");
  EXPECT_EQ(legit.mutated_args(), (std::vector<int>{3, 4}));
  auto [y2, m2, s2] = CallOp<Tensor3>(legit, x, OptTensor(), OptTensor(), rm, rv, true, 0.1, 1e-5);
  ExpectValues(y2, Values(y));
  ExpectValues(rm, {0.3, 0.5});
  auto [y3, m3, s3] = CallOp<Tensor3>(KILN_OP("aten::_native_batch_norm_legit_no_training"), x, OptTensor(),
                                      OptTensor(), T({3, 5}, {2}), T({1, 4}, {2}), 0.1, 0.0);
  ExpectValues(y3, {-2, -1.5, 0, -0.5, 2, 2});
  auto [y4, m4, s4] = CallOp<Tensor3>(KILN_OP("aten::_native_batch_norm_legit.no_stats"), x, OptTensor(),
                                      OptTensor(), true, 0.1, 1e-5);
  ExpectValues(y4, Values(y));
}

TEST(Norm, LayerNorm) {
  Tensor x = T({1, 2, 3, 2, 4, 9}, {2, 3});
  auto [y, mean, rstd] = CallOp<Tensor3>(KILN_OP("aten::native_layer_norm"), x, IntList{3}, T({1, 1, 2}, {3}),
                                         T({0, 0, 1}, {3}), 1e-5);
  const double r0 = 1 / std::sqrt(2.0 / 3 + 1e-5), r1 = 1 / std::sqrt(26.0 / 3 + 1e-5);
  ExpectValues(y, {-r0, 0, 2 * r0 + 1, -3 * r1, -1 * r1, 2 * 4 * r1 + 1});
  ExpectSizes(mean, {2, 1});
  ExpectValues(mean, {2, 5});
  ExpectValues(rstd, {r0, r1});
  // Over the last two dims, as the composite.
  Tensor x3 = ops::reshape(x, {SymInt(1), SymInt(2), SymInt(3)});
  Tensor y3 = CallOp<Tensor>(KILN_OP("aten::layer_norm"), x3, IntList{2, 3}, OptTensor(), OptTensor(), 1e-5, true);
  Vec v = Values(x);
  double mu = (1 + 2 + 3 + 2 + 4 + 9) / 6.0, q = 0;
  for (double e : v) q += (e - mu) * (e - mu);
  Vec ref;
  for (double e : v) ref.push_back((e - mu) / std::sqrt(q / 6 + 1e-5));
  ExpectValues(y3, ref);
  auto [ym, mm, rm] = CallOp<Tensor3>(KILN_OP("aten::native_layer_norm"), Meta({4, 5, 6}), IntList{5, 6}, OptTensor(),
                                      OptTensor(), 1e-5);
  ExpectSizes(mm, {4, 1, 1});
  ExpectError<Error>(
      [&] { CallOp<Tensor3>(KILN_OP("aten::native_layer_norm"), x, IntList{4}, OptTensor(), OptTensor(), 1e-5); },
      "Given normalized_shape=[4], expected input with shape [*, 4], but got input of size[2, 3]");
  ExpectError<Error>(
      [&] { CallOp<Tensor3>(KILN_OP("aten::native_layer_norm"), x, IntList{3}, OptTensor(T({1, 2}, {2})),
                            OptTensor(), 1e-5); },
      "Expected weight to be of same shape as normalized_shape, but got weight of shape [2] and normalized_shape = [3]");
}

TEST(Norm, GroupNorm) {
  Tensor x = Rand({2, 4, 1, 3}, 9);
  Tensor w = T({1, 2, 3, 4}, {4}), b = T({0, 1, 0, -1}, {4});
  Tensor y = CallOp<Tensor>(KILN_OP("aten::group_norm"), x, int64_t(2), OptTensor(w), OptTensor(b), 1e-5, true);
  Vec v = Values(x), ref(24), wv = Values(w), bv = Values(b);
  for (int n = 0; n < 2; ++n)
    for (int g = 0; g < 2; ++g) {
      const int base = n * 12 + g * 6;
      double mu = 0, q = 0;
      for (int i = 0; i < 6; ++i) mu += v[base + i] / 6;
      for (int i = 0; i < 6; ++i) q += (v[base + i] - mu) * (v[base + i] - mu);
      for (int i = 0; i < 6; ++i) {
        int c = g * 2 + i / 3;
        ref[base + i] = (v[base + i] - mu) / std::sqrt(q / 6 + 1e-5) * wv[c] + bv[c];
      }
    }
  ExpectValues(y, ref, 1e-4);
  auto [yn, mean, rstd] = CallOp<Tensor3>(KILN_OP("aten::native_group_norm"), x, OptTensor(), OptTensor(), SymInt(2),
                                          SymInt(4), SymInt(3), int64_t(2), 1e-5);
  ExpectSizes(mean, {2, 2});
  ExpectSizes(rstd, {2, 2});
  ExpectError<Error>(
      [&] { CallOp<Tensor>(KILN_OP("aten::group_norm"), x, int64_t(3), OptTensor(), OptTensor(), 1e-5, true); },
      "Expected number of channels in input to be divisible by num_groups, but got input of shape [2, 4, 1, 3] and "
      "num_groups=3");
  ExpectError<Error>(
      [&] { CallOp<Tensor>(KILN_OP("aten::group_norm"), x, int64_t(2), OptTensor(T({1, 2}, {2})), OptTensor(), 1e-5,
                           true); },
      "Expected weight to be a vector of size equal to the number of channels in input, but got weight of shape [2]");
}

}  // namespace
}  // namespace kiln
