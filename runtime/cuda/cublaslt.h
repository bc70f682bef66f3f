// runtime/cuda/cublaslt.h: cuBLASLt loaded at run time (libcublasLt.so.13, through loader.h's
// search) for the GEMMs whose epilogue cuBLAS cannot fuse: a bias added to every column and a ReLU
// or (tanh-approximated) GELU after it, in the GEMM's own kernel — what PyTorch's addmm and
// _addmm_activation call on CUDA.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/cuda/cublas.h"

namespace kiln::cuda {

bool CublasLtAvailable();  // loads cuBLASLt on first call; never throws
const std::string& CublasLtUnavailableReason();

enum class LtActivation { kNone, kRelu, kGelu };

// Column-major D = act(alpha op(A) op(B) + bias), bias a vector of D's m rows (or null: no bias),
// with GemmArgs' layout (batch 1; beta and c are ignored: D is written to g.c). Returns false,
// having launched nothing, when cuBLASLt is unavailable or has no algorithm for the problem (the
// caller then uses Gemm and separate ops); throws on a failing call.
bool LtGemm(const Stream& stream, const GemmArgs& g, const void* bias, LtActivation activation);

// GEMMs LtGemm has launched in this process (for tests: which path an op took).
int64_t LtGemmCount();

}  // namespace kiln::cuda
