// tensor/complex_fft_test.cc: complex dtypes (promotion, conversions, the views between complex
// numbers and pairs of reals, arithmetic) and the FFT primitives against a direct O(n^2) DFT, for
// power-of-two lengths (radix-2) and others (Bluestein), over several dims and normalizations.
#include <cmath>
#include <complex>

#include "tensor/ops/common.h"
#include "tensor/testing/op_test_util.h"
#include "tensor/type_promotion.h"

namespace kiln {
namespace {

using namespace ::kiln::optest;  // NOLINT: test helpers
using Cd = std::complex<double>;
using Cf = std::complex<float>;

TEST(Complex, Promotion) {
  using S = ScalarType;
  EXPECT_EQ(PromoteTypes(S::Float32, S::ComplexFloat), S::ComplexFloat);
  EXPECT_EQ(PromoteTypes(S::Float64, S::ComplexFloat), S::ComplexDouble);
  EXPECT_EQ(PromoteTypes(S::Int64, S::ComplexFloat), S::ComplexFloat);
  EXPECT_EQ(PromoteTypes(S::BFloat16, S::ComplexDouble), S::ComplexDouble);
  EXPECT_EQ(ToRealValueType(S::ComplexDouble), S::Float64);
  EXPECT_EQ(ToComplexType(S::Float32), S::ComplexFloat);
  EXPECT_FALSE(CanCast(S::ComplexFloat, S::Float64));
  EXPECT_TRUE(CanCast(S::Float64, S::ComplexFloat));
  EXPECT_EQ(ElementSize(S::ComplexDouble), 16);
  // a Python complex number is weak: float32 tensor * 1j stays complex64
  EXPECT_EQ(ResultType(F({1, 2}), Scalar(Cd(0, 1))), S::ComplexFloat);
  EXPECT_EQ(ResultType(ops::to_dtype(F({1}), S::Float64), Scalar(Cd(0, 1))), S::ComplexDouble);
}

TEST(Complex, ConversionsKeepTheRealPart) {
  Tensor z = ops::to_dtype(F({1.5f, -2.f}), ScalarType::ComplexFloat);
  EXPECT_EQ(Vec<Cf>(z), (std::vector<Cf>{{1.5f, 0}, {-2.f, 0}}));
  Tensor w = Make<Cf>({{1, 2}, {-3, 4}}, {2});
  EXPECT_EQ(FV(w), (std::vector<float>{1, -3}));  // a complex -> real cast drops the imaginary part
  EXPECT_EQ(ItemScalar("item", Make<Cd>({{2, -1}}, {1})).to_complex(), Cd(2, -1));
}

TEST(Complex, ViewsShareMemory) {
  Tensor z = Make<Cf>({{1, 2}, {3, 4}, {5, 6}, {7, 8}, {9, 10}, {11, 12}}, {2, 3});
  Tensor pairs = Call("aten::view_as_real", z);
  EXPECT_EQ(pairs.sizes(), Shape({2, 3, 2}));
  EXPECT_EQ(pairs.strides(), Shape({6, 2, 1}));
  EXPECT_EQ(pairs.dtype(), ScalarType::Float32);
  EXPECT_EQ(FV(Call("aten::imag", ops::transpose(z, 0, 1))), (std::vector<float>{2, 8, 4, 10, 6, 12}));
  Tensor back = Call("aten::view_as_complex", pairs);
  EXPECT_EQ(back.sizes(), z.sizes());
  Tensor real = Call("aten::real", z);
  ops::fill_(real, 0.5);  // writes through the view
  EXPECT_EQ(Vec<Cf>(z)[4], Cf(0.5f, 10));
  ExpectError<Error>([&] { Call("aten::view_as_complex", F({1, 2, 3})); }, "last dimension of size 2");
  ExpectError<Error>([&] { Call("aten::view_as_real", F({1})); }, "only supported for complex tensors");
}

TEST(Complex, Arithmetic) {
  Tensor a = Make<Cd>({{1, 2}, {3, -1}}, {2});
  Tensor b = Make<Cd>({{0, 1}, {2, 2}}, {2});
  EXPECT_EQ(Vec<Cd>(ops::mul(a, b)), (std::vector<Cd>{Cd(1, 2) * Cd(0, 1), Cd(3, -1) * Cd(2, 2)}));
  EXPECT_EQ(Vec<Cd>(Call("aten::div.Tensor", a, b))[1], Cd(3, -1) / Cd(2, 2));
  EXPECT_EQ(Vec<Cd>(Call("aten::conj_physical", a))[0], Cd(1, -2));
  Tensor magnitude = Call("aten::abs", a);
  EXPECT_EQ(magnitude.dtype(), ScalarType::Float64);
  EXPECT_DOUBLE_EQ(Vec<double>(magnitude)[1], std::sqrt(10.0));
  EXPECT_EQ(Vec<Cd>(Call("aten::sum", a, OptDtype()))[0], Cd(4, 1));
  ExpectError<NotImplementedError>([&] { Call("aten::floor", a); }, "not implemented for 'ComplexDouble'");
}

// The direct DFT of x along its only dim: sum_j x_j e^{sign 2 pi i jk/n}.
std::vector<Cd> Dft(const std::vector<Cd>& x, int sign) {
  const size_t n = x.size();
  std::vector<Cd> out(n);
  for (size_t k = 0; k < n; ++k)
    for (size_t j = 0; j < n; ++j) out[k] += x[j] * std::polar(1.0, sign * 2 * M_PI * double(j * k % n) / n);
  return out;
}

void ExpectNear(const std::vector<Cd>& got, const std::vector<Cd>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_LT(std::abs(got[i] - want[i]), tol) << "at " << i;
}

std::vector<Cd> Signal(size_t n) {
  std::vector<Cd> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = Cd(std::sin(1.3 * i + 0.2), std::cos(0.7 * i * i));
  return x;
}

TEST(Fft, C2CMatchesTheDirectTransform) {
  for (int64_t n : {1, 2, 8, 64, 3, 12, 97, 100}) {
    std::vector<Cd> x = Signal(n);
    Tensor t = Make<Cd>(x, {n});
    ExpectNear(Vec<Cd>(Call("aten::_fft_c2c", t, std::vector<int64_t>{0}, int64_t(0), true)), Dft(x, -1), 1e-9 * n);
    std::vector<Cd> inverse = Dft(x, 1);
    for (Cd& v : inverse) v /= double(n);
    ExpectNear(Vec<Cd>(Call("aten::_fft_c2c", t, std::vector<int64_t>{0}, int64_t(2), false)), inverse, 1e-9 * n);
  }
}

TEST(Fft, R2COnesidedAndC2RInvert) {
  for (int64_t n : {5, 8, 9}) {
    std::vector<double> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = std::sin(0.9 * i) + 0.1 * i;
    Tensor t = Make<double>(x, {n});
    Tensor half = Call("aten::_fft_r2c", t, std::vector<int64_t>{0}, int64_t(0), true);
    EXPECT_EQ(half.sizes(), Shape({n / 2 + 1}));
    std::vector<Cd> full = Dft(std::vector<Cd>(x.begin(), x.end()), -1);
    ExpectNear(Vec<Cd>(half), std::vector<Cd>(full.begin(), full.begin() + n / 2 + 1), 1e-9 * n);
    Tensor back = Call("aten::_fft_c2r", half, std::vector<int64_t>{0}, int64_t(2), n);
    EXPECT_EQ(back.dtype(), ScalarType::Float64);
    std::vector<double> got = Vec<double>(back);
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(got[i], x[i], 1e-12);
  }
}

TEST(Fft, SeveralDimsAndOrthoScale) {
  // a 2-D transform is the 1-D transform of each row, then of each column
  Tensor t = Make<Cd>(Signal(12), {3, 4});
  Tensor both = Call("aten::_fft_c2c", t, std::vector<int64_t>{0, 1}, int64_t(1), true);
  Tensor rows = Call("aten::_fft_c2c", t, std::vector<int64_t>{1}, int64_t(0), true);
  Tensor cols = Call("aten::_fft_c2c", rows, std::vector<int64_t>{0}, int64_t(0), true);
  std::vector<Cd> want = Vec<Cd>(cols);
  for (Cd& v : want) v /= std::sqrt(12.0);
  ExpectNear(Vec<Cd>(both), want, 1e-12);
  ExpectError<Error>([&] { Call("aten::_fft_c2c", F({1, 2}), std::vector<int64_t>{0}, int64_t(0), true); },
                     "expected a complex input tensor");
}

}  // namespace
}  // namespace kiln
