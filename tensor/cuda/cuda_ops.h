// tensor/cuda/cuda_ops.h: CUDA kernels for ops of the registry, added to the ops that tensor/ops
// defines (each op is defined once; a backend only adds its kernel under DispatchKey::CUDA).
#pragma once

#include "runtime/cuda/cublaslt.h"
#include "tensor/dispatcher.h"

namespace kiln::cuda {

// Sets `op_name`'s CUDA kernel; the op must exist (an internal error otherwise).
void SetCUDAKernel(Registry& r, const char* op_name, Kernel kernel);

// Every CUDA kernel (called once by RegisterBuiltinOps).
void RegisterCUDAKernels(Registry& r);
void RegisterCopyKernels(Registry& r);
void RegisterMatmulKernels(Registry& r);

// out (contiguous, [batch,] m x n) = alpha * (a @ b) + beta * out through cuBLAS (beta 0: out's
// values are not read); a and b are [batch,] m x k and k x n with k > 0, of out's dtype. A
// convolution's GEMM takes TF32 from cudnn.allow_tf32 (runtime/cuda/cublas.h).
void GemmInto(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha,
              const char* kernel, bool convolution = false);

// out (contiguous m x n, k > 0) = act(alpha * (a @ b) + bias) in one cuBLASLt GEMM, bias (or null)
// a contiguous vector of n in out's dtype added to every row. False (nothing done) when cuBLASLt
// cannot: the caller computes it another way.
bool GemmEpilogueInto(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor* bias, const Scalar& alpha,
                      LtActivation activation, const char* kernel);

// `bytes` from one place in device memory to another, in stream order on `device`'s current stream.
void CopyDeviceBytes(void* dst, const void* src, size_t bytes, int device);

// Tensor.pin_memory(): a contiguous copy of a CPU tensor in page-locked memory, which the copy
// engines read and write directly (non_blocking=True copies stay asynchronous).
Tensor PinMemory(const Tensor& t);

}  // namespace kiln::cuda
