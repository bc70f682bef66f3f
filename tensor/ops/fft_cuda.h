// tensor/ops/fft_cuda.h: the FFT primitives on CUDA through cuFFT (fft_cuda.cc), called by fft.cc's
// ops after their checks; `out` is the op's output (its meta's shape and dtype).
#pragma once

#include <vector>

#include "tensor/tensor_impl.h"

namespace kiln {

void FftC2CCUDA(const Tensor& self, const std::vector<int64_t>& dims, double scale, bool forward, const Tensor& out);
void FftR2CCUDA(const Tensor& self, const std::vector<int64_t>& dims, double scale, bool onesided, const Tensor& out);
void FftC2RCUDA(const Tensor& self, const std::vector<int64_t>& dims, double scale, int64_t last_dim_size,
                const Tensor& out);

}  // namespace kiln
