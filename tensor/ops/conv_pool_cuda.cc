// tensor/ops/conv_pool_cuda.cc: convolution and 2-D pooling on CUDA, called by the ops in
// conv_pool.cc and conv_pool_backward.cc after their checks and allocation.
//
// Note [CUDA convolution]: im2col + cuBLAS, in the layout the CPU kernels use (Note [Batched
// im2col]): a block of nb images unfolds into one column matrix [C*kh*kw, nb*L] (L output pixels an
// image), so each group is one GEMM over the whole block rather than nb small ones. With the
// "channel-major" form of a batch, X_cm [C, nb*L] (one permuting copy of [nb, C, L]):
//   plain:      Y_cm = W_g @ cols(X)            dX = col2im(W_g^T @ dY_cm)   dW_g += dY_cm @ cols(X)^T
//   transposed: Y = col2im(W_g^T @ X_cm)        dX_cm = W_g @ cols(dY)       dW_g += X_cm @ cols(dY)^T
// (a transposed convolution's image is its output, its grid its input). The forward's last copy,
// from channel-major back to [nb, O, L], adds the bias in the same kernel. Blocks hold as many images
// as keep the column matrix under kColsBytes, so memory stays bounded for large batches. The GEMMs
// run in the tensors' dtype (16-bit floats accumulate in float in cuBLAS; float32 in TF32 unless
// kiln.backends.cudnn.allow_tf32 is False, PyTorch's default for its cuDNN convolutions); col2im sums
// in float.
#include <algorithm>
#include <limits>

#include "runtime/cuda/device_errors.h"
#include "runtime/cuda/module.h"
#include "runtime/cuda/stream.h"
#include "tensor/cuda/cuda_ops.h"
#include "tensor/cuda/embedded_kernels.h"
#include "tensor/cuda/kernels/conv_pool_args.h"
#include "tensor/cuda/pointwise.h"
#include "tensor/ops/conv_pool.h"

namespace kiln {
namespace {

constexpr int64_t kColsBytes = int64_t(1) << 28;

// Whether every index a kernel forms stays within int32 (its *_i32 variant), with room for the
// window arithmetic around them.
bool Fits32(int64_t largest) { return largest < (int64_t(1) << 30); }

cuda::CUfunction ConvPoolKernel(const char* what, ScalarType t, int device, bool fits32, const char* op) {
  const std::string name = StrCat("kiln_", what, "_", cuda::KernelSuffix(t), fits32 ? "_i32" : "");
  return cuda::EmbeddedKernel(cuda::ConvPoolKernels(), device, name.c_str(), op);
}

void CheckFloating(ScalarType t, const char* kernel) {
  KILN_CHECK_NOT_IMPLEMENTED(IsFloating(t), "\"", kernel, "\" not implemented for '", ScalarTypeDisplayName(t), "'");
}

// --- im2col / col2im and the channel-major copies ------------------------------------------------------

// im2col (to_columns) reads images and writes columns; col2im the reverse.
void LaunchCols(bool to_columns, const Tensor& src, const Tensor& dst, const Geom& g, int64_t nb) {
  ConvColsArgs a{src.raw_data(), dst.raw_data(), nb, g.C, g.H, g.W, g.kh, g.kw, g.sh, g.sw,
                 g.ph, g.pw, g.dh, g.dw, g.oh, g.ow};
  const int64_t cols = g.C * g.kh * g.kw * nb * g.oh * g.ow, image = nb * g.C * g.H * g.W;
  const int device = src.device().index;
  // conv_pool.cu's 2-D grid: x over an image's pixels (output positions for im2col), y over planes
  const int64_t pixels = to_columns ? g.oh * g.ow : g.H * g.W;
  const int64_t threads = std::min<int64_t>(256, (pixels + 31) / 32 * 32);
  const int64_t planes = std::min<int64_t>(nb * g.C, 65535);
  std::vector<void*> args = {&a};
  const cuda::LaunchDims dims{static_cast<unsigned>((pixels + threads - 1) / threads), static_cast<unsigned>(planes),
                              static_cast<unsigned>(threads)};
  const cuda::CUfunction fn = ConvPoolKernel(to_columns ? "im2col" : "col2im", src.dtype(), device,
                                             Fits32(std::max(cols, image)), "convolution");
  cuda::Launch(fn, dims, cuda::CurrentStream(device), args);
}

// cols [C*kh*kw, nb*L] of images [nb, C, H, W] (contiguous).
void Im2Col(const Tensor& images, const Geom& g, int64_t nb, const Tensor& cols) {
  LaunchCols(true, images, cols, g, nb);
}
// images [nb, C, H, W] = the sum of each pixel's columns.
void Col2Im(const Tensor& cols, const Geom& g, int64_t nb, const Tensor& images) {
  LaunchCols(false, cols, images, g, nb);
}

// [nb, C, ...] -> [C, nb * L] (L the product of the trailing dims).
Tensor ToChannelMajor(const Tensor& batch) {
  const int64_t nb = batch.size(0), C = batch.size(1), L = batch.numel() / std::max<int64_t>(nb * C, 1);
  Tensor cm = EmptyTensor(DimVector{C, nb * L}, batch.dtype(), batch.device());
  Tensor view = ops::view(cm, {SymInt(C), SymInt(nb), SymInt(L)});
  ops::copy_(view, ops::permute(ops::reshape(batch, {SymInt(nb), SymInt(C), SymInt(L)}), {1, 0, 2}));
  return cm;
}

// batch [nb, C, ...] (contiguous) = cm [C, nb * L] moved back, plus bias[c] when given.
void FromChannelMajor(const Tensor& cm, const Tensor& batch, const Tensor* bias) {
  const int64_t nb = batch.size(0), C = batch.size(1), L = batch.numel() / std::max<int64_t>(nb * C, 1);
  const Tensor out = ops::view(batch, {SymInt(nb), SymInt(C), SymInt(L)});
  const Tensor moved = ops::permute(ops::view(cm, {SymInt(C), SymInt(nb), SymInt(L)}), {1, 0, 2});
  if (!bias) {
    Tensor o = out;
    ops::copy_(o, moved);
    return;
  }
  const Tensor b = ops::view(*bias, {SymInt(1), SymInt(C), SymInt(1)});
  const codegen::DType acc = cuda::OpmathDType(batch.dtype(), "convolution");
  codegen::ExprPtr sum = codegen::Expr::Op(
      codegen::OpCode::kAdd, {codegen::Expr::Cast(cuda::Input(0), acc), codegen::Expr::Cast(cuda::Input(1), acc)});
  cuda::LaunchPointwise("convolution_bias", out, {cuda::PointwiseInput::Of(moved), cuda::PointwiseInput::Of(b)}, sum);
}

// The images of a block [n0, n0 + nb) of a contiguous batch.
Tensor Block(const Tensor& batch, int64_t n0, int64_t nb) { return ops::slice(batch, 0, SymInt(n0), SymInt(n0 + nb)); }

// Images per block: as many as keep `bytes_per_image` of columns under kColsBytes (at least one).
int64_t ImagesPerBlock(int64_t N, int64_t bytes_per_image) {
  return std::clamp<int64_t>(kColsBytes / std::max<int64_t>(bytes_per_image, 1), 1, std::max<int64_t>(N, 1));
}

// A [G * r, c] matrix as G matrices [r, c] (a view).
Tensor Groups(const Tensor& m, int64_t G) {
  return ops::view(m, {SymInt(G), SymInt(m.size(0) / G), SymInt(m.numel() / m.size(0))});
}

Tensor Transposed(const Tensor& batched) { return ops::transpose(batched, 1, 2); }

// Note [Pointwise convolution]: a 1x1 kernel with unit stride, no padding and one group reads each
// image as it is: out[n] = W @ x[n] ([O, C] @ [C, L]) and dx[n] = W^T @ dy[n], one batched GEMM each
// with W's batch stride 0, and no column matrix or channel-major copies.
bool Pointwise(const Geom& g, const ConvParams& p) {
  return !p.transposed && p.groups == 1 && g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 &&
         g.pw == 0;
}

// [N, c, L] views of a contiguous batch [N, c, ...].
Tensor Images(const Tensor& t) {
  return ops::view(t, {SymInt(t.size(0)), SymInt(t.size(1)), SymInt(t.numel() / std::max<int64_t>(t.size(0) * t.size(1), 1))});
}

void Gemm(const Tensor& out, const Tensor& a, const Tensor& b, bool accumulate) {
  cuda::GemmInto(out, a, b, Scalar(int64_t(accumulate ? 1 : 0)), Scalar(int64_t(1)), "convolution", true);
}

}  // namespace

void ConvolutionCUDA(const Tensor& input, const Tensor& weight, const Tensor* bias, const Tensor& out,
                     const ConvParams& p) {
  CheckFloating(input.dtype(), p.transposed ? "slow_conv_transpose2d_out_cuda" : "slow_conv2d_cuda");
  const Tensor x = ops::contiguous(input), w = ops::contiguous(weight);
  Tensor o = out.is_contiguous() ? out : EmptyTensor(out.sizes(), out.dtype(), out.device());
  const Geom g = ConvGeom(p, x, w, o);
  const int64_t N = x.size(0), G = p.groups, L = g.oh * g.ow, rows = g.C * g.kh * g.kw;
  const Tensor b = bias ? ops::contiguous(*bias) : Tensor();
  if (x.numel() == 0 || w.numel() == 0) {  // an empty contraction: the bias alone
    ops::fill_(o, Scalar(int64_t(0)));
    if (bias) AddChannelBias(o, b);
  } else if (Pointwise(g, p)) {  // Note [Pointwise convolution]
    const Tensor w2 = ops::reshape(w, {SymInt(w.size(0)), SymInt(w.size(1))});
    Gemm(Images(o), ops::expand(w2, {SymInt(N), SymInt(w.size(0)), SymInt(w.size(1))}), Images(x), false);
    if (bias) AddChannelBias(o, b);
  } else {
    const int64_t nb_max = ImagesPerBlock(N, rows * L * ElementSize(x.dtype()));
    const Tensor wg = Groups(ops::reshape(w, {SymInt(w.size(0)), SymInt(-1)}), G);  // [G, r, c]
    for (int64_t n0 = 0; n0 < N; n0 += nb_max) {
      const int64_t nb = std::min(nb_max, N - n0);
      Tensor cols = EmptyTensor(DimVector{rows, nb * L}, x.dtype(), x.device());
      if (!p.transposed) {  // Y_cm = W_g @ cols(X)
        Im2Col(Block(x, n0, nb), g, nb, cols);
        Tensor y_cm = EmptyTensor(DimVector{o.size(1), nb * L}, x.dtype(), x.device());
        Gemm(Groups(y_cm, G), wg, Groups(cols, G), false);
        FromChannelMajor(y_cm, Block(o, n0, nb), bias ? &b : nullptr);
      } else {  // Y = col2im(W_g^T @ X_cm)
        const Tensor x_cm = ToChannelMajor(Block(x, n0, nb));
        Gemm(Groups(cols, G), Transposed(wg), Groups(x_cm, G), false);
        Col2Im(cols, g, nb, Block(o, n0, nb));
      }
    }
    if (p.transposed && bias) AddChannelBias(o, b);
  }
  if (!o.is_same(out)) {
    Tensor dst = out;
    ops::copy_(dst, o);
  }
}

void ConvolutionBackwardCUDA(const Tensor& grad, const Tensor& input, const Tensor& weight, const ConvParams& p,
                             const Tensor* grad_input, const Tensor* grad_weight) {
  CheckFloating(input.dtype(),
                p.transposed ? "slow_conv_transpose2d_backward_out_cuda" : "slow_conv2d_backward_cuda");
  KILN_INTERNAL_ASSERT((!grad_input || grad_input->is_contiguous()) && (!grad_weight || grad_weight->is_contiguous()),
                       "convolution_backward's CUDA kernel writes contiguous gradients");
  const Tensor x = ops::contiguous(input), w = ops::contiguous(weight), dy = ops::contiguous(grad);
  const Geom g = ConvGeom(p, x, w, dy);
  const int64_t N = x.size(0), G = p.groups, L = g.oh * g.ow, rows = g.C * g.kh * g.kw;
  const Tensor wg = Groups(ops::reshape(w, {SymInt(w.size(0)), SymInt(-1)}), G);
  const Tensor dw = grad_weight ? Groups(ops::reshape(*grad_weight, {SymInt(w.size(0)), SymInt(-1)}), G) : Tensor();
  const bool pointwise = Pointwise(g, p);
  if (pointwise && grad_input) {  // Note [Pointwise convolution]
    const Tensor wt = ops::transpose(ops::reshape(w, {SymInt(w.size(0)), SymInt(w.size(1))}), 0, 1);
    Gemm(Images(*grad_input), ops::expand(wt, {SymInt(N), SymInt(wt.size(0)), SymInt(wt.size(1))}), Images(dy), false);
    if (!grad_weight) return;
  }
  const int64_t nb_max = ImagesPerBlock(N, rows * L * ElementSize(x.dtype()));
  for (int64_t n0 = 0; n0 < N; n0 += nb_max) {
    const int64_t nb = std::min(nb_max, N - n0);
    Tensor cols = EmptyTensor(DimVector{rows, nb * L}, x.dtype(), x.device());
    if (!p.transposed) {  // dX = col2im(W_g^T @ dY_cm), dW_g += dY_cm @ cols(X)^T
      const Tensor dy_cm = ToChannelMajor(Block(dy, n0, nb));
      if (grad_weight) {
        Im2Col(Block(x, n0, nb), g, nb, cols);
        Gemm(dw, Groups(dy_cm, G), Transposed(Groups(cols, G)), n0 > 0);
      }
      if (grad_input && !pointwise) {
        Gemm(Groups(cols, G), Transposed(wg), Groups(dy_cm, G), false);
        Col2Im(cols, g, nb, Block(*grad_input, n0, nb));
      }
    } else {  // dX_cm = W_g @ cols(dY), dW_g += X_cm @ cols(dY)^T
      Im2Col(Block(dy, n0, nb), g, nb, cols);
      if (grad_input) {
        Tensor dx_cm = EmptyTensor(DimVector{x.size(1), nb * L}, x.dtype(), x.device());
        Gemm(Groups(dx_cm, G), wg, Groups(cols, G), false);
        FromChannelMajor(dx_cm, Block(*grad_input, n0, nb), nullptr);
      }
      if (grad_weight) Gemm(dw, Groups(ToChannelMajor(Block(x, n0, nb)), G), Transposed(Groups(cols, G)), n0 > 0);
    }
  }
}

// --- pooling ---------------------------------------------------------------------------------------

namespace {

// The arguments of a pooling kernel reading src and writing dst: forward src = input, dst = output;
// backward src = grad_output, dst = grad_input. `input` and `output` give the planes' sizes.
PoolArgs MakePoolArgs(const Tensor& src, const Tensor& dst, const Tensor& input, const Tensor& output,
                      const PoolParams* p, bool count_include_pad = false,
                      std::optional<int64_t> divisor = std::nullopt) {
  PoolArgs a{};
  a.src = src.raw_data();
  a.dst = dst.raw_data();
  a.H = input.size(-2), a.W = input.size(-1), a.oh = output.size(-2), a.ow = output.size(-1);
  a.planes = input.numel() / std::max<int64_t>(a.H * a.W, 1);
  if (p) {
    a.kh = p->kh, a.kw = p->kw, a.sh = p->sh, a.sw = p->sw, a.ph = p->ph, a.pw = p->pw, a.dh = p->dh, a.dw = p->dw;
  }
  a.divisor = divisor.value_or(0);
  a.count_include_pad = count_include_pad;
  return a;
}

// Launches kiln_<what>_<dtype> over `work` elements, 32-bit where the planes' sizes allow.
void LaunchPool(const char* what, const char* op, ScalarType t, int device, PoolArgs& a, int64_t work) {
  const int64_t largest = std::max(a.planes * a.H * a.W, a.planes * a.oh * a.ow);
  std::vector<void*> args = {&a};
  cuda::LaunchGrid(ConvPoolKernel(what, t, device, Fits32(largest), op), device, work, args);
}

}  // namespace

void MaxPool2dCUDA(const Tensor& self, const PoolParams& p, const Tensor& out, const Tensor& indices) {
  const Tensor x = ops::contiguous(self);
  PoolArgs a = MakePoolArgs(x, out, x, out, &p);
  a.indices = static_cast<int64_t*>(indices.raw_data());
  LaunchPool("max_pool2d", "max_pool2d_with_indices", x.dtype(), x.device().index, a, out.numel());
}

void MaxPool2dBackwardCUDA(const Tensor& grad, const Tensor& indices, const PoolParams& p, const Tensor& grad_input) {
  const Tensor g = ops::contiguous(grad), idx = ops::contiguous(indices);
  const int device = g.device().index;
  PoolArgs a = MakePoolArgs(g, grad_input, grad_input, g, &p);
  a.indices = static_cast<int64_t*>(idx.raw_data());
  a.error_word = cuda::DeviceErrorWord(device);
  static const int32_t kBadIndex = cuda::DeviceErrorCode(
      KILN_DEVICE_ERROR_INDEX, "[max_pool2d_with_indices_backward] index {} of indices is out of bounds for the "
                               "input's plane");
  a.error_code = kBadIndex;
  LaunchPool("max_pool2d_backward", "max_pool2d_with_indices_backward", g.dtype(), device, a,
             std::max(grad_input.numel(), g.numel()));
}

void AvgPool2dCUDA(const Tensor& self, const PoolParams& p, bool count_include_pad, std::optional<int64_t> divisor,
                   const Tensor& out) {
  CheckFloating(self.dtype(), "avg_pool2d_out_cuda_frame");
  const Tensor x = ops::contiguous(self);
  PoolArgs a = MakePoolArgs(x, out, x, out, &p, count_include_pad, divisor);
  LaunchPool("avg_pool2d", "avg_pool2d", x.dtype(), x.device().index, a, out.numel());
}

void AvgPool2dBackwardCUDA(const Tensor& grad, const PoolParams& p, bool count_include_pad,
                           std::optional<int64_t> divisor, const Tensor& grad_input) {
  CheckFloating(grad.dtype(), "avg_pool2d_backward_out_cuda_frame");
  const Tensor g = ops::contiguous(grad);
  PoolArgs a = MakePoolArgs(g, grad_input, grad_input, g, &p, count_include_pad, divisor);
  LaunchPool("avg_pool2d_backward", "avg_pool2d_backward", g.dtype(), g.device().index, a, grad_input.numel());
}

void AdaptiveAvgPool2dCUDA(const Tensor& self, const Tensor& out) {
  const Tensor x = ops::contiguous(self);
  PoolArgs a = MakePoolArgs(x, out, x, out, nullptr);
  LaunchPool("adaptive_avg_pool2d", "adaptive_avg_pool2d", x.dtype(), x.device().index, a, out.numel());
}

void AdaptiveAvgPool2dBackwardCUDA(const Tensor& grad, const Tensor& grad_input) {
  const Tensor g = ops::contiguous(grad);
  PoolArgs a = MakePoolArgs(g, grad_input, grad_input, g, nullptr);
  LaunchPool("adaptive_avg_pool2d_backward", "_adaptive_avg_pool2d_backward", g.dtype(), g.device().index, a,
             grad_input.numel());
}

}  // namespace kiln
