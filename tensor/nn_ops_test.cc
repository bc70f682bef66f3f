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
  ExpectError<Error>([] { Mm(Rand({2, 3}, 1, ScalarType::Bool), Rand({3, 2}, 1, ScalarType::Bool)); },
                     "not implemented for 'Bool'");
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
  ExpectError<Error>([&] { Addmm(T({1, 2, 3}, {3}), a, b); }, "The size of tensor a (3) must match");
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

}  // namespace
}  // namespace kiln
