// tensor/cuda/kernels/row_args.h: the constants and parameter blocks of the row kernels (rows.cuh:
// softmax.cu, layer_norm.cu), shared with the host code that fills them (tensor/ops/reduce_cuda.cc,
// tensor/ops/norm_cuda.cc; launched by tensor/cuda/embedded_kernels.h's LaunchRowKernel). Plain data,
// passed by value.
#pragma once

#include <stdint.h>

namespace kiln {

// Each thread holds this many of its row's elements in registers, and a row has at most 1024 threads
// (512 for float64, whose kernels would otherwise spill registers): rows of up to 8192 (4096)
// elements are read once.
constexpr int kRowPerThread = 8;
constexpr int kRowMaxThreads = 1024;
constexpr int kRowMaxThreads64 = 512;

// Rows of n contiguous elements, row r at r * n in each tensor. Forward: x = the input, y unused;
// backward: x = grad_output, y = the forward's output.
struct SoftmaxArgs {
  const void* x;
  const void* y;
  void* out;
  int64_t rows, n;
  int32_t log;  // log_softmax (and its backward)
};

// layer_norm over rows of n contiguous elements. Forward: out = (x - mean) * rstd * w + b, with each
// row's mean and rstd (the accumulator's dtype) written; backward (g = grad_output): out = grad_input
// from the saved mean and rstd. weight and bias (the input's dtype) may be null.
struct LayerNormArgs {
  const void* x;
  const void* g;
  const void* weight;
  const void* bias;
  void* out;
  void* mean;
  void* rstd;
  int64_t rows, n;
  double eps;
};

}  // namespace kiln
