// tensor/ops/conv_cudnn.cc: CUDA convolutions through cuDNN (conv_cudnn.h).
//
// Note [cuDNN convolutions]: PyTorch runs CUDA convolutions through cuDNN, whose implicit-GEMM
// kernels read the images where they lie. kiln's own path (Note [CUDA convolution]) unfolds them
// into a column matrix first: on the H200 a ResNet-sized 3x3 convolution (64 channels, 32x56x56)
// took 0.69 ms forward and backward against PyTorch's 0.37, most of it writing and reading columns.
// So cuDNN (dlopen'ed like cuBLAS, runtime/cuda/cudnn.h) runs every convolution it takes, and the
// im2col path remains for what it does not: cuDNN missing (a machine without PyTorch's wheels or
// the toolkit's library), kiln.backends.cudnn.enabled = False, integer dtypes, no algorithm.
//
// As PyTorch's cudnn_convolution:
// - The layout is channels-last (NHWC) when the input or the weight suggests it, else NCHW
//   (cudnn_conv_suggest_memory_format); operands in another layout are copied into it and results
//   computed elsewhere are copied out, so any strides work and the common ones copy nothing.
// - A transposed convolution is the backward-data pass of the plain convolution whose input is
//   the transposed one's output; its gradients are that convolution's forward and weight passes.
// - A 1-D convolution is a 2-D one with a height of 1.
// - float32 runs on tensor cores in TF32 unless kiln.backends.cudnn.allow_tf32 is False (then
//   CUDNN_FMA_MATH); 16-bit floats on tensor cores, accumulating in float32; float64 in double.
// - Algorithms come from cuDNN's heuristic (the _v7 query), the first usable one whose workspace
//   can be allocated; with kiln.backends.cudnn.deterministic or use_deterministic_algorithms, only
//   those cuDNN marks deterministic. kiln.backends.cudnn.benchmark (timing every algorithm) is
//   accepted and not acted on: the heuristic's choice is what runs.
// - The bias is added by a pointwise kernel after the convolution.
#include "tensor/ops/conv_cudnn.h"

#include <atomic>
#include <optional>

#include "runtime/cuda/cublas.h"
#include "runtime/cuda/cudnn.h"
#include "runtime/cuda/stream.h"
#include "tensor/deterministic.h"
#include "tensor/memory_format.h"

namespace kiln {
namespace {

std::atomic<bool> g_enabled{true};
std::atomic<bool> g_deterministic{false};

std::optional<cuda::CudnnType> CudnnTypeOf(ScalarType t) {
  switch (t) {
    case ScalarType::Float32: return cuda::CudnnType::kF32;
    case ScalarType::Float64: return cuda::CudnnType::kF64;
    case ScalarType::Float16: return cuda::CudnnType::kF16;
    case ScalarType::BFloat16: return cuda::CudnnType::kBF16;
    default: return std::nullopt;
  }
}

// t's sizes and strides as [N, C, H, W] (a 1-D convolution's [N, C, W] with H = 1, its stride
// that of a packed row).
void As4d(const Tensor& t, int64_t sizes[4], int64_t strides[4]) {
  if (t.dim() == 4) {
    for (int i = 0; i < 4; ++i) {
      sizes[i] = t.size(i);
      strides[i] = t.stride(i);
    }
    return;
  }
  const int64_t idx[4] = {0, 1, -1, 2};
  for (int i = 0; i < 4; ++i) {
    sizes[i] = idx[i] < 0 ? 1 : t.size(idx[i]);
    strides[i] = idx[i] < 0 ? t.size(2) * t.stride(2) : t.stride(idx[i]);
  }
}

// Whether t is packed in the layout (a 1-D convolution's 3-D tensors only as rows).
bool InLayout(const Tensor& t, bool nhwc) {
  return nhwc ? IsChannelsLastContiguous(t) : t.is_contiguous();
}

// t packed in the layout: itself, or a copy.
Tensor Packed(const Tensor& t, bool nhwc) {
  if (InLayout(t, nhwc)) return t;
  return nhwc ? ChannelsLastCopy(t) : ops::contiguous(t);
}

// A tensor to write a result of `dst`'s shape into in the layout: dst itself, or a new one.
Tensor Destination(const Tensor& dst, bool nhwc) {
  if (InLayout(dst, nhwc)) return dst;
  if (!nhwc) return EmptyTensor(dst.sizes(), dst.dtype(), dst.device());
  return EmptyTensor(dst->sym_sizes(), dst.dtype(), dst.device(), ChannelsLastStrides(dst->sym_sizes()));
}

void CopyBack(const Tensor& computed, const Tensor& dst) {
  if (computed.is_same(dst)) return;
  Tensor d = dst;
  ops::copy_(d, computed);
}

// The plain convolution the call computes a pass of: `image` in x's place (the transposed
// convolution's output), `grid` in y's (its input).
cuda::CudnnConvProblem Problem(cuda::CudnnType type, const Tensor& image, const Tensor& w, const Tensor& grid,
                               const ConvParams& p, bool nhwc) {
  cuda::CudnnConvProblem pr;
  pr.dtype = type;
  As4d(image, pr.x_sizes, pr.x_strides);
  As4d(grid, pr.y_sizes, pr.y_strides);
  int64_t w_strides[4];
  As4d(w, pr.w_sizes, w_strides);
  pr.w_nhwc = nhwc;
  const bool one_d = p.dims == 1;
  for (int i = 0; i < 2; ++i) {
    const bool unit = one_d && i == 0;  // the added height
    const size_t d = one_d ? 0 : i;
    pr.pad[i] = unit ? 0 : static_cast<int>(p.padding[d]);
    pr.stride[i] = unit ? 1 : static_cast<int>(p.stride[d]);
    pr.dilation[i] = unit ? 1 : static_cast<int>(p.dilation[d]);
  }
  pr.groups = static_cast<int>(p.groups);
  pr.allow_tf32 = cuda::ConvAllowTF32();
  pr.deterministic = g_deterministic.load() || DeterministicAlgorithms();
  return pr;
}

// Whether cuDNN may take a convolution of these tensors at all; the layout it runs in.
bool Applies(const Tensor& x, const Tensor& w, const ConvParams& p, std::optional<cuda::CudnnType>* type, bool* nhwc) {
  if (!g_enabled.load() || !x.device().is_cuda() || p.dims > 2 || x.numel() == 0 || w.numel() == 0) return false;
  *type = CudnnTypeOf(x.dtype());
  if (!*type || w.dtype() != x.dtype() || !cuda::CudnnAvailable()) return false;
  *nhwc = x.dim() == 4 && (SuggestsChannelsLast(x) || SuggestsChannelsLast(w));
  return true;
}

}  // namespace

void SetCudnnEnabled(bool enabled) { g_enabled = enabled; }
void SetCudnnDeterministic(bool deterministic) { g_deterministic = deterministic; }

bool ConvolutionCudnn(const Tensor& input, const Tensor& weight, const Tensor* bias, const Tensor& out,
                      const ConvParams& p) {
  std::optional<cuda::CudnnType> type;
  bool nhwc = false;
  if (!Applies(input, weight, p, &type, &nhwc) || out.dtype() != input.dtype()) return false;
  const Tensor x = Packed(input, nhwc), w = Packed(weight, nhwc);
  const Tensor o = Destination(out, nhwc);
  const cuda::Stream stream = cuda::CurrentStream(input.device().index);
  const bool ran = p.transposed
                       ? cuda::CudnnConvolution(stream, Problem(*type, o, w, x, p, nhwc), cuda::CudnnPass::kBackwardData,
                                                x.raw_data(), w.raw_data(), o.raw_data())
                       : cuda::CudnnConvolution(stream, Problem(*type, x, w, o, p, nhwc), cuda::CudnnPass::kForward,
                                                x.raw_data(), w.raw_data(), o.raw_data());
  if (!ran) return false;
  if (bias) AddChannelBias(o, *bias);
  CopyBack(o, out);
  return true;
}

bool ConvolutionBackwardCudnn(const Tensor& grad, const Tensor& input, const Tensor& weight, const ConvParams& p,
                              const Tensor* gi, const Tensor* gw) {
  std::optional<cuda::CudnnType> type;
  bool nhwc = false;
  if (!Applies(input, weight, p, &type, &nhwc) || grad.dtype() != input.dtype()) return false;
  if ((gi && gi->dtype() != input.dtype()) || (gw && gw->dtype() != input.dtype())) return false;
  const Tensor dy = Packed(grad, nhwc), x = Packed(input, nhwc), w = Packed(weight, nhwc);
  const cuda::Stream stream = cuda::CurrentStream(input.device().index);
  // A pass cuDNN has no algorithm for sends the whole backward to the caller's kernels, which
  // overwrite whatever an earlier pass wrote.
  const Tensor dx = gi ? Destination(*gi, nhwc) : Tensor(), dw = gw ? Destination(*gw, nhwc) : Tensor();
  // plain: image x, grid dy; transposed: image dy (its output's gradient), grid x
  const Tensor& image = p.transposed ? dy : x;
  const Tensor& grid = p.transposed ? x : dy;
  if (dx.defined()) {
    const bool ran = p.transposed
                         ? cuda::CudnnConvolution(stream, Problem(*type, image, w, dx, p, nhwc), cuda::CudnnPass::kForward,
                                                  dy.raw_data(), w.raw_data(), dx.raw_data())
                         : cuda::CudnnConvolution(stream, Problem(*type, dx, w, grid, p, nhwc),
                                                  cuda::CudnnPass::kBackwardData, dy.raw_data(), w.raw_data(), dx.raw_data());
    if (!ran) return false;
  }
  if (dw.defined()) {
    const bool ran = cuda::CudnnConvolution(stream, Problem(*type, image, dw, grid, p, nhwc),
                                            cuda::CudnnPass::kBackwardFilter, image.raw_data(), grid.raw_data(),
                                            dw.raw_data());
    if (!ran) return false;
  }
  if (dx.defined()) CopyBack(dx, *gi);
  if (dw.defined()) CopyBack(dw, *gw);
  return true;
}

}  // namespace kiln
