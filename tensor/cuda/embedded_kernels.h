// tensor/cuda/embedded_kernels.h: the CUDA kernels compiled ahead of time by nvcc and embedded in
// the module (tensor/cuda/kernels/*.cu, third_party/cuda_fatbin.bzl): for what the loop IR does not
// express (RNG, scatter with atomics, ...). A fat binary is loaded into a device's context on its
// first use; its kernels are found by name and kept.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/cuda/driver_api.h"
#include "tensor/scalar_type.h"
#include "tensor/tensor_impl.h"

namespace kiln::cuda {

// One embedded fat binary: `file` names its source in errors; size 0 when kiln was built without nvcc.
struct EmbeddedFatbin {
  const char* file;
  const unsigned char* data;
  size_t size;
};

// The fat binaries (tensor/cuda/kernels/<file>.cu).
const EmbeddedFatbin& RandomKernels();
const EmbeddedFatbin& IndexKernels();
const EmbeddedFatbin& IndexedKernels();
const EmbeddedFatbin& OptimKernels();
const EmbeddedFatbin& LossKernels();
const EmbeddedFatbin& ConvPoolKernels();
const EmbeddedFatbin& SoftmaxKernels();
const EmbeddedFatbin& LayerNormKernels();
const EmbeddedFatbin& ScanKernels();
const EmbeddedFatbin& SortKernels();

// `kernel` (an extern "C" name) of `fatbin` on `device`; `op` names the caller in errors.
CUfunction EmbeddedKernel(const EmbeddedFatbin& fatbin, int device, const char* kernel, const char* op);

// The dtype suffix of the kernels' names (tensor/cuda/kernels/common.cuh): f16, bf16, f32, f64, b8, u8,
// i8, i16, i32, i64. Callers dispatch on the dtype first (an internal error for any other).
const char* KernelSuffix(ScalarType t);

// Launches a grid-stride kernel (KILN_GRID_STRIDE_LOOP) over `n` work items on the device's current
// stream: 256 threads a block, enough blocks to fill the device (capped so each thread loops when n
// is large). Does nothing for n == 0. `args` point at each parameter's value.
void LaunchGrid(CUfunction fn, int device, int64_t n, std::vector<void*>& args);

// The row kernels (kernels/rows.cuh), over `rows` rows of n elements: whether a row of n `dtype`
// elements fits one (the row held in registers by at most kRowMaxThreads threads); whether their
// _vec variant serves the tensors (null: skipped; the first's dtype sets the width): n a multiple of
// the width, each tensor's data aligned to width elements; and the launch: blockDim.x threads a row
// (a power of two from 32), rows of the block filling 256 threads.
bool RowKernelFits(ScalarType dtype, int64_t n);
bool RowKernelVectorizable(int64_t n, const std::vector<const Tensor*>& tensors);
void LaunchRowKernel(CUfunction fn, int device, int64_t rows, int64_t n, std::vector<void*>& args);

}  // namespace kiln::cuda
