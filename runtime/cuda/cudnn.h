// runtime/cuda/cudnn.h: cuDNN loaded at run time (libcudnn.so.9, through loader.h's search; PyTorch's
// wheels keep it in site-packages/nvidia/cudnn/lib) for the convolutions PyTorch runs through it:
// forward, backward data and backward filter of a 2-D cross-correlation in NCHW or NHWC, with
// kiln's own declarations of cuDNN's legacy convolution API (no cuDNN headers to build), one handle
// per device and thread bound to the current stream, and the heuristic's algorithm cached per
// problem (Note [cuDNN convolutions] in tensor/ops/conv_pool_cuda.cc).
#pragma once

#include <cstdint>
#include <string>

#include "runtime/cuda/stream.h"

namespace kiln::cuda {

bool CudnnAvailable();  // loads cuDNN on first call; never throws
const std::string& CudnnUnavailableReason();
int64_t CudnnVersion();  // cudnnGetVersion() (91000 for 9.10.0), 0 when not loaded

// Values of cuDNN 9's cudnnDataType_t.
enum class CudnnType : int { kF32 = 0, kF64 = 1, kF16 = 2, kBF16 = 9 };

// One 2-D convolution y = x (*) w (cross-correlation, PyTorch's), as cuDNN sees it: sizes
// [N, C, H, W] for x and y with any strides cuDNN accepts (packed NCHW or NHWC), w [O, C/groups,
// kh, kw] packed NCHW or NHWC (w_nhwc).
struct CudnnConvProblem {
  CudnnType dtype = CudnnType::kF32;
  int64_t x_sizes[4] = {}, x_strides[4] = {};
  int64_t w_sizes[4] = {};
  bool w_nhwc = false;
  int64_t y_sizes[4] = {}, y_strides[4] = {};
  int pad[2] = {}, stride[2] = {}, dilation[2] = {};
  int groups = 1;
  bool allow_tf32 = true;      // float32 on tensor cores in TF32 (kiln.backends.cudnn.allow_tf32)
  bool deterministic = false;  // only algorithms cuDNN marks deterministic
};

// The passes over one problem, and what CudnnConvolution's a and b are for each.
enum class CudnnPass {
  kForward,         // out y = conv(a x, b w)
  kBackwardData,    // out dx = conv_transpose(a dy, b w)
  kBackwardFilter,  // out dw = the weight gradient from a x and b dy
};

// Runs one pass on the stream: out = pass(a, b).
// Returns false, having launched nothing, when cuDNN is unavailable or has no algorithm for the
// problem (the caller then runs its own kernels); throws on a failing call.
bool CudnnConvolution(const Stream& stream, const CudnnConvProblem& problem, CudnnPass pass, const void* a,
                      const void* b, void* out);

// Convolution passes cuDNN has run in this process (for tests: which path an op took).
int64_t CudnnConvolutionCount();

}  // namespace kiln::cuda
