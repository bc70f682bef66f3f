// tensor/ops/fft_cuda.cc: _fft_c2c, _fft_r2c and _fft_c2r on CUDA (fft_cuda.h).
//
// Note [CUDA FFT]: one dim at a time, as the CPU kernels: the dim is moved innermost and made
// contiguous, so a transform is one cuFFT call over a batch of contiguous signals
// (runtime/cuda/cufft.h), in the tensor's own precision (complex64 in float32, as PyTorch's CUDA
// FFTs; the CPU kernels work in complex128). r2c transforms the last of its dims real-to-complex
// first, then the others complex-to-complex; c2r the others first, then complex-to-real along the
// last, from exactly last_dim_size / 2 + 1 entries (cut, or padded with zeros). A two-sided r2c
// completes the spectrum by Hermitian symmetry. Complex values are moved as (real, imag) float
// pairs (view_as_real), which every CUDA copy supports.
#include "tensor/ops/fft_cuda.h"

#include "runtime/cuda/cufft.h"
#include "runtime/cuda/stream.h"
#include "tensor/empty.h"
#include "tensor/ops/common.h"

namespace kiln {
namespace {

Tensor AsReal(const Tensor& t) { return CallOp<Tensor>(KILN_OP("aten::view_as_real"), t); }
Tensor AsComplex(const Tensor& t) { return CallOp<Tensor>(KILN_OP("aten::view_as_complex"), t); }
Tensor MoveDim(const Tensor& t, int64_t from, int64_t to) {
  return CallOp<Tensor>(KILN_OP("aten::movedim.int"), t, from, to);
}

// A fresh contiguous copy of `t` with dim d moved innermost (for a complex t, innermost before its
// (real, imag) pairs).
Tensor InnermostCopy(const Tensor& t, int64_t d) {
  if (!IsComplex(t.dtype())) return ops::clone(ops::contiguous(MoveDim(t, d, -1)));
  const Tensor pairs = MoveDim(AsReal(t), d, -2);
  return AsComplex(ops::clone(ops::contiguous(pairs)));
}

// out := src for complex (or real) tensors of the same shape, through float views.
void CopyInto(const Tensor& out, const Tensor& src) {
  Tensor o = IsComplex(out.dtype()) ? AsReal(out) : out;
  ops::copy_(o, IsComplex(src.dtype()) ? AsReal(src) : src);
}

void Scale(const Tensor& out, double scale) {
  if (scale == 1.0 || out.numel() == 0) return;
  Tensor o = IsComplex(out.dtype()) ? AsReal(out) : out;
  CallOp<Tensor>(KILN_OP("aten::mul_.Scalar"), o, Scalar(scale));
}

void Run(cuda::FftType type, int64_t n, const Tensor& in, const Tensor& out, bool forward) {
  const int64_t batch = n == 0 ? 0 : out.numel() / (type == cuda::FftType::kR2C || type == cuda::FftType::kD2Z
                                                       ? n / 2 + 1 : n);
  cuda::Fft1d(cuda::CurrentStream(in.device().index), type, n, batch, in.raw_data(), out.raw_data(), forward);
}

// A complex-to-complex transform of `x` along d: a new tensor (d moved back into place, a view).
Tensor TransformAlong(const Tensor& x, int64_t d, bool forward) {
  const Tensor in = InnermostCopy(x, d);
  Tensor out = EmptyTensor(in.sizes(), in.dtype(), in.device());
  Run(x.dtype() == ScalarType::ComplexDouble ? cuda::FftType::kZ2Z : cuda::FftType::kC2C, in.size(-1), in, out,
      forward);
  return MoveDim(out, -1, d);
}

}  // namespace

void FftC2CCUDA(const Tensor& self, const std::vector<int64_t>& dims, double scale, bool forward, const Tensor& out) {
  Tensor x = self;
  for (int64_t d : dims) x = TransformAlong(x, d, forward);
  CopyInto(out, x);
  Scale(out, scale);
}

void FftR2CCUDA(const Tensor& self, const std::vector<int64_t>& dims, double scale, bool onesided, const Tensor& out) {
  const int64_t last = dims.back(), n = self.size(last);
  const Tensor in = InnermostCopy(self, last);
  DimVector half_sizes = in.sizes();
  half_sizes.back() = n / 2 + 1;
  const ScalarType complex = ToComplexType(self.dtype());
  Tensor half = EmptyTensor(half_sizes, complex, self.device());
  Run(self.dtype() == ScalarType::Float64 ? cuda::FftType::kD2Z : cuda::FftType::kR2C, n, in, half, true);
  Tensor x = half;
  if (!onesided && n > 1) {  // Y[n - k] = conj(Y[k]): the entries past n / 2, from Y[1 .. (n - 1) / 2] reversed
    const Tensor pairs = AsReal(half);
    const Tensor mirrored = CallOp<Tensor>(KILN_OP("aten::flip"), ops::slice(pairs, -2, 1, n - n / 2),
                                           std::vector<int64_t>{-2});
    const Tensor tail = ops::cat({ops::slice(mirrored, -1, 0, 1), ops::mul(ops::slice(mirrored, -1, 1, 2), Scalar(-1.0))},
                                 -1);
    x = AsComplex(ops::contiguous(ops::cat({pairs, tail}, -2)));
  }
  x = MoveDim(x, -1, last);
  for (size_t i = 0; i + 1 < dims.size(); ++i) x = TransformAlong(x, dims[i], true);
  CopyInto(out, x);
  Scale(out, scale);
}

void FftC2RCUDA(const Tensor& self, const std::vector<int64_t>& dims, double scale, int64_t last_dim_size,
                const Tensor& out) {
  Tensor x = self;
  for (size_t i = 0; i + 1 < dims.size(); ++i) x = TransformAlong(x, dims[i], false);
  const int64_t last = dims.back(), need = last_dim_size / 2 + 1, have = std::min(need, self.size(last));
  // the first `need` entries along the last dim (zeros past the given ones), innermost, contiguous
  const Tensor given = MoveDim(AsReal(x), last, -2);
  DimVector sizes = given.sizes();
  sizes[sizes.size() - 2] = need;
  Tensor pairs = ops::full(std::vector<SymInt>(sizes.begin(), sizes.end()), Scalar(0.0), given.dtype(), self.device());
  Tensor kept = ops::slice(pairs, -2, 0, have);
  ops::copy_(kept, ops::slice(given, -2, 0, have));
  const Tensor in = AsComplex(pairs);
  DimVector real_sizes = in.sizes();
  real_sizes.back() = last_dim_size;
  Tensor real = EmptyTensor(real_sizes, out.dtype(), self.device());
  Run(out.dtype() == ScalarType::Float64 ? cuda::FftType::kZ2D : cuda::FftType::kC2R, last_dim_size, in, real, false);
  CopyInto(out, MoveDim(real, -1, last));
  Scale(out, scale);
}

}  // namespace kiln
