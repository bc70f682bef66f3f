// runtime/cuda/cublas.h: cuBLAS loaded at run time (libcublas.so.13, through loader.h's search),
// with kiln's own declarations of the few entry points it uses, and one handle per device and
// thread bound to the current stream — what PyTorch's getCurrentCUDABlasHandle gives.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/cuda/stream.h"

namespace kiln::cuda {

// Values of CUDA 13's cublas_api.h / library_types.h.
enum class BlasDataType : int { kF32 = 0, kF64 = 1, kF16 = 2, kBF16 = 14 };
enum class BlasCompute : int { k32F = 68, k32FFastTF32 = 77, k64F = 70 };

bool CublasAvailable();  // loads cuBLAS on first call; never throws
const std::string& CublasUnavailableReason();

// TF32 for float32 matmuls (torch.backends.cuda.matmul.allow_tf32; off by default, as PyTorch's).
void SetAllowTF32(bool allow);
bool AllowTF32();
// TF32 for float32 convolutions' GEMMs (torch.backends.cudnn.allow_tf32; on by default, as PyTorch's).
void SetConvAllowTF32(bool allow);
bool ConvAllowTF32();

// Column-major C = alpha op(A) op(B) + beta C on the current stream, batched with strides (batch 1:
// a plain GEMM). trans_a/trans_b: the operand is stored transposed. beta 0 ignores C's values
// (NaN included), as BLAS does.
struct GemmArgs {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  int64_t lda = 0, stride_a = 0;
  const void* b = nullptr;
  int64_t ldb = 0, stride_b = 0;
  void* c = nullptr;
  int64_t ldc = 0, stride_c = 0;
  int64_t batch = 1;
  BlasDataType dtype = BlasDataType::kF32;
  double alpha = 1, beta = 0;  // passed in float for every dtype but float64 (the compute type's)
  bool convolution = false;    // a convolution's GEMM: ConvAllowTF32 decides TF32, not AllowTF32
};
void Gemm(const Stream& stream, const GemmArgs& args);

}  // namespace kiln::cuda
