// tensor/ops/fft.cc: discrete Fourier transforms, PyTorch's three spectral primitives.
//
//   _fft_c2c: complex -> complex, forward (e^-2πi jk/n) or backward (e^+2πi jk/n);
//   _fft_r2c: real -> complex, the whole spectrum or its first n/2+1 entries (onesided);
//   _fft_c2r: a onesided (Hermitian) spectrum -> real, of a given length along the last dim.
// Each runs over a list of dims, one 1-D transform after another, and scales the result by
// `normalization` (0: none, 1: 1/sqrt(n), 2: 1/n, n the product of the signal sizes). kiln.fft
// (python/kiln/fft) builds torch.fft's functions on these, as PyTorch does.
//
// A 1-D transform of a power-of-two length is the iterative radix-2 Cooley-Tukey FFT; any other
// length is Bluestein's: the DFT as a convolution with a chirp, computed by power-of-two FFTs of
// length >= 2n - 1. Both are O(n log n); the arithmetic is in complex128 whatever the dtype. CUDA
// tensors go through cuFFT instead (fft_cuda.cc, Note [CUDA FFT]).
#include "tensor/ops/fft.h"

#include <cmath>
#include <complex>
#include <vector>

#include "tensor/ops/common.h"
#include "tensor/ops/fft_cuda.h"

namespace kiln {
namespace {

using Cd = std::complex<double>;
constexpr double kPi = 3.14159265358979323846;

// In-place unnormalised FFT of a power-of-two length; sign -1 forward, +1 backward.
void Radix2(Cd* a, int64_t n, int sign) {
  for (int64_t i = 1, j = 0; i < n; ++i) {  // bit-reversal permutation
    int64_t bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) std::swap(a[i], a[j]);
  }
  for (int64_t len = 2; len <= n; len <<= 1) {
    const double angle = sign * 2 * kPi / static_cast<double>(len);
    const Cd step(std::cos(angle), std::sin(angle));
    for (int64_t i = 0; i < n; i += len) {
      Cd w(1, 0);
      for (int64_t k = 0; k < len / 2; ++k) {
        // recomputing the twiddle every 16 steps keeps long transforms accurate
        if ((k & 15) == 0) w = Cd(std::cos(angle * k), std::sin(angle * k));
        const Cd u = a[i + k], v = a[i + k + len / 2] * w;
        a[i + k] = u + v;
        a[i + k + len / 2] = u - v;
        w *= step;
      }
    }
  }
}

bool IsPowerOfTwo(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

// One length and direction's transform, set up once and run on many lines.
class Transform1d {
 public:
  Transform1d(int64_t n, bool forward) : n_(n), sign_(forward ? -1 : 1) {
    if (IsPowerOfTwo(n_) || n_ <= 1) return;
    // Bluestein: e^{s2πi jk/n} = c_j c_k conj(c_{k-j}) with c_j = e^{sπi j²/n}; j² is reduced
    // mod 2n first, so the angle stays exact for long transforms.
    m_ = 1;
    while (m_ < 2 * n_ - 1) m_ <<= 1;
    chirp_.resize(n_);
    for (int64_t j = 0; j < n_; ++j) {
      const int64_t jj = (j * j) % (2 * n_);
      const double angle = sign_ * kPi * static_cast<double>(jj) / static_cast<double>(n_);
      chirp_[j] = Cd(std::cos(angle), std::sin(angle));
    }
    filter_.assign(m_, Cd(0, 0));
    filter_[0] = std::conj(chirp_[0]);
    for (int64_t j = 1; j < n_; ++j) filter_[j] = filter_[m_ - j] = std::conj(chirp_[j]);
    Radix2(filter_.data(), m_, -1);
  }

  // In place on n contiguous values; `scratch` is reused across calls on one thread.
  void Run(Cd* x, std::vector<Cd>& scratch) const {
    if (n_ <= 1) return;
    if (chirp_.empty()) return Radix2(x, n_, sign_);
    scratch.assign(m_, Cd(0, 0));
    for (int64_t j = 0; j < n_; ++j) scratch[j] = x[j] * chirp_[j];
    Radix2(scratch.data(), m_, -1);
    for (int64_t j = 0; j < m_; ++j) scratch[j] *= filter_[j];
    Radix2(scratch.data(), m_, 1);
    const double inv_m = 1.0 / static_cast<double>(m_);
    for (int64_t k = 0; k < n_; ++k) x[k] = scratch[k] * inv_m * chirp_[k];
  }

 private:
  int64_t n_;
  int sign_;
  int64_t m_ = 0;
  std::vector<Cd> chirp_, filter_;
};

// Transforms every line of the contiguous complex128 tensor `work` along `dim`, in place.
void TransformAlong(Tensor& work, int64_t dim, bool forward) {
  const DimVector sizes = work.sizes();
  const int64_t n = sizes[dim];
  if (n <= 1 || work.numel() == 0) return;
  int64_t inner = 1;
  for (size_t d = dim + 1; d < sizes.size(); ++d) inner *= sizes[d];
  const int64_t outer = work.numel() / (n * inner);
  Cd* data = work.data_ptr<Cd>();
  const Transform1d plan(n, forward);
  ParallelFor(0, outer * inner, std::max<int64_t>(1, 4096 / n), [&](int64_t b, int64_t e) {
    std::vector<Cd> line(n), scratch;
    for (int64_t l = b; l < e; ++l) {
      Cd* base = data + (l / inner) * n * inner + (l % inner);
      for (int64_t j = 0; j < n; ++j) line[j] = base[j * inner];
      plan.Run(line.data(), scratch);
      for (int64_t j = 0; j < n; ++j) base[j * inner] = line[j];
    }
  });
}

std::vector<int64_t> WrappedDims(const char* op, const std::vector<int64_t>& dims, int64_t ndim) {
  std::vector<int64_t> out;
  for (int64_t d : dims) {
    const int64_t w = WrapDim(d, ndim);
    for (int64_t seen : out) KILN_CHECK(seen != w, op, ": dims must be unique");
    out.push_back(w);
  }
  return out;
}

double Scale(int64_t normalization, double signal_numel) {
  KILN_CHECK(normalization >= 0 && normalization <= 2, "fft: normalization must be 0, 1 or 2, got ", normalization);
  if (normalization == 0 || signal_numel == 0) return 1.0;
  return normalization == 1 ? 1.0 / std::sqrt(signal_numel) : 1.0 / signal_numel;
}

// self as a contiguous complex128 tensor (a fresh copy: the transforms write into it).
Tensor WorkCopy(const Tensor& self) {
  Tensor work = EmptyTensor(self.sizes(), ScalarType::ComplexDouble, self.device());
  return ops::copy_(work, self);
}

void ScaleInPlace(Tensor& work, double scale) {
  if (scale == 1.0) return;
  Cd* p = work.data_ptr<Cd>();
  for (int64_t i = 0; i < work.numel(); ++i) p[i] *= scale;
}

// --- meta functions ------------------------------------------------------------------------

TensorMeta C2CMeta(const Tensor& self, const std::vector<int64_t>& dim, int64_t, bool) {
  KILN_CHECK(IsComplex(self.dtype()), "_fft_c2c: expected a complex input tensor, but got ",
             ScalarTypeDisplayName(self.dtype()));
  WrappedDims("_fft_c2c", dim, self.dim());
  return TensorMeta{self->sym_sizes(), {}, self.dtype(), self.device()};
}

TensorMeta R2CMeta(const Tensor& self, const std::vector<int64_t>& dim, int64_t, bool onesided) {
  KILN_CHECK(self.dtype() == ScalarType::Float32 || self.dtype() == ScalarType::Float64,
             "_fft_r2c: expected a float or double input tensor, but got ", ScalarTypeDisplayName(self.dtype()));
  KILN_CHECK(!dim.empty(), "_fft_r2c: must transform at least one axis");
  std::vector<int64_t> dims = WrappedDims("_fft_r2c", dim, self.dim());
  SymDimVector sizes = self->sym_sizes();
  if (onesided) sizes[dims.back()] = sizes[dims.back()].floordiv(2) + 1;
  return TensorMeta{sizes, {}, ToComplexType(self.dtype()), self.device()};
}

TensorMeta C2RMeta(const Tensor& self, const std::vector<int64_t>& dim, int64_t, int64_t last_dim_size) {
  KILN_CHECK(IsComplex(self.dtype()), "_fft_c2r: expected a complex input tensor, but got ",
             ScalarTypeDisplayName(self.dtype()));
  KILN_CHECK(!dim.empty(), "_fft_c2r: must transform at least one axis");
  KILN_CHECK(last_dim_size >= 1, "Invalid number of data points (", last_dim_size, ") specified");
  std::vector<int64_t> dims = WrappedDims("_fft_c2r", dim, self.dim());
  SymDimVector sizes = self->sym_sizes();
  sizes[dims.back()] = SymInt(last_dim_size);
  return TensorMeta{sizes, {}, ToRealValueType(self.dtype()), self.device()};
}

// --- kernels -------------------------------------------------------------------------------

Tensor C2C(const Tensor& self, const std::vector<int64_t>& dim, int64_t normalization, bool forward) {
  TensorMeta m = C2CMeta(self, dim, normalization, forward);
  if (self.device().is_cuda()) {  // Note [CUDA FFT]
    const std::vector<int64_t> dims = WrappedDims("_fft_c2c", dim, self.dim());
    double n = 1;
    for (int64_t d : dims) n *= static_cast<double>(self.size(d));
    Tensor out = EmptyFromMeta(m);
    if (out.numel() > 0) FftC2CCUDA(self, dims, Scale(normalization, n), forward, out);
    return out;
  }
  Tensor work = WorkCopy(self);
  double n = 1;
  for (int64_t d : WrappedDims("_fft_c2c", dim, self.dim())) {
    TransformAlong(work, d, forward);
    n *= static_cast<double>(self.size(d));
  }
  ScaleInPlace(work, Scale(normalization, n));
  Tensor out = EmptyFromMeta(m);
  return ops::copy_(out, work);
}

Tensor R2C(const Tensor& self, const std::vector<int64_t>& dim, int64_t normalization, bool onesided) {
  TensorMeta m = R2CMeta(self, dim, normalization, onesided);
  std::vector<int64_t> dims = WrappedDims("_fft_r2c", dim, self.dim());
  if (self.device().is_cuda()) {  // Note [CUDA FFT]
    double n = 1;
    for (int64_t d : dims) n *= static_cast<double>(self.size(d));
    Tensor out = EmptyFromMeta(m);
    if (out.numel() > 0) FftR2CCUDA(self, dims, Scale(normalization, n), onesided, out);
    return out;
  }
  Tensor work = WorkCopy(self);
  double n = 1;
  for (int64_t d : dims) {
    TransformAlong(work, d, /*forward=*/true);
    n *= static_cast<double>(self.size(d));
  }
  ScaleInPlace(work, Scale(normalization, n));
  const int64_t last = dims.back();
  Tensor kept = onesided ? ops::slice(work, last, 0, self.size(last) / 2 + 1, 1) : work;
  Tensor out = EmptyFromMeta(m);
  return ops::copy_(out, kept);
}

// The leading dims are inverse complex transforms; along the last, each line of the onesided
// spectrum is completed by Hermitian symmetry (Y[n-k] = conj(Y[k]); entries past the given ones
// are zero) and inverse-transformed, and its real part kept (so the imaginary parts of the
// zero-frequency and Nyquist entries drop out, as in pocketfft).
Tensor C2R(const Tensor& self, const std::vector<int64_t>& dim, int64_t normalization, int64_t last_dim_size) {
  TensorMeta m = C2RMeta(self, dim, normalization, last_dim_size);
  std::vector<int64_t> dims = WrappedDims("_fft_c2r", dim, self.dim());
  if (self.device().is_cuda()) {  // Note [CUDA FFT]
    double n = static_cast<double>(last_dim_size);
    for (size_t i = 0; i + 1 < dims.size(); ++i) n *= static_cast<double>(self.size(dims[i]));
    Tensor out = EmptyFromMeta(m);
    if (out.numel() > 0) FftC2RCUDA(self, dims, Scale(normalization, n), last_dim_size, out);
    return out;
  }
  Tensor work = WorkCopy(self);
  double n = static_cast<double>(last_dim_size);
  for (size_t i = 0; i + 1 < dims.size(); ++i) {
    TransformAlong(work, dims[i], /*forward=*/false);
    n *= static_cast<double>(self.size(dims[i]));
  }
  const int64_t last = dims.back(), half = self.size(last), full = last_dim_size;
  DimVector full_sizes = work.sizes();
  full_sizes[last] = full;
  Tensor spectrum = EmptyTensor(full_sizes, ScalarType::ComplexDouble, self.device());
  int64_t inner = 1;
  for (size_t d = last + 1; d < full_sizes.size(); ++d) inner *= full_sizes[d];
  const int64_t outer = spectrum.numel() / std::max<int64_t>(1, full * inner);
  const Cd* src = work.data_ptr<Cd>();
  Cd* dst = spectrum.data_ptr<Cd>();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const Cd* s = src + o * half * inner + i;
      Cd* t = dst + o * full * inner + i;
      for (int64_t k = 0; k <= full / 2; ++k) t[k * inner] = k < half ? s[k * inner] : Cd(0, 0);
      for (int64_t k = full / 2 + 1; k < full; ++k) t[k * inner] = std::conj(t[(full - k) * inner]);
    }
  }
  TransformAlong(spectrum, last, /*forward=*/false);
  ScaleInPlace(spectrum, Scale(normalization, n));
  Tensor out = EmptyFromMeta(m);
  return ops::copy_(out, spectrum);  // the real part (complex -> real casts keep it)
}

}  // namespace

void RegisterFftOps(Registry& r) {
  r.Def("_fft_c2c(Tensor self, int[] dim, int normalization, bool forward) -> Tensor", {Tag::core})
      .CPUAndCUDA<&C2C>().Meta<&C2CMeta>();
  r.Def("_fft_r2c(Tensor self, int[] dim, int normalization, bool onesided) -> Tensor", {Tag::core})
      .CPUAndCUDA<&R2C>().Meta<&R2CMeta>();
  r.Def("_fft_c2r(Tensor self, int[] dim, int normalization, int last_dim_size) -> Tensor", {Tag::core})
      .CPUAndCUDA<&C2R>().Meta<&C2RMeta>();
}

}  // namespace kiln
