// tensor/ops/conv_pool_backward.cc: the backward ops of convolution and 2-D pooling
// (convolution_backward, max_pool2d_with_indices_backward, avg_pool2d_backward,
// _adaptive_avg_pool2d_backward).
//
// convolution_backward reuses the forward's checks and geometry (conv_pool.h) and its GEMM:
// for a plain convolution, grad_input = col2im(W_g^T @ dY_g) and grad_weight_g += dY_g @
// im2col(X)_g^T, per block of images and group (Note [Sample-parallel convolution]); for a transposed one the roles swap (grad_input =
// W_g @ im2col(dY)_g, grad_weight_g += X_g @ im2col(dY)_g^T). 1-D runs as 2-D with a height of 1;
// float16/bfloat16 compute in float32. grad_bias sums dY over the batch and spatial dims.
// The pooling backward ops scatter each output gradient back over its window (max: to the saved
// index), one (batch, channel) plane per task, so no two tasks write one element.
#include <cmath>

#include "tensor/memory_format.h"
#include "tensor/ops/conv_cudnn.h"
#include "tensor/ops/conv_onednn.h"
#include "tensor/ops/conv_pool.h"
#include "tensor/ops/gemm.h"

namespace kiln {
namespace {

using IntList = std::vector<int64_t>;
using SymList = std::vector<SymInt>;
using OptMeta = std::optional<TensorMeta>;
using Tensor3 = std::tuple<Tensor, Tensor, Tensor>;

// --- convolution ---------------------------------------------------------------------------------

constexpr const char* kConv = "convolution_backward";

std::tuple<OptMeta, OptMeta, OptMeta> ConvBwMeta(const Tensor& grad, const Tensor& input, const Tensor& weight,
                                                 const std::optional<SymList>& bias_sizes, const SymList& stride,
                                                 const SymList& padding, const SymList& dilation, bool transposed,
                                                 const SymList& output_padding, const SymInt& groups,
                                                 std::vector<bool> mask) {
  KILN_CHECK(mask.size() == 3, "[", kConv, "] output_mask must have 3 elements, got ", mask.size());
  TensorMeta out = ConvolutionMeta(input, weight, std::nullopt, stride, padding, dilation, transposed, output_padding,
                                   groups);
  KILN_CHECK(grad->sym_sizes() == out.sizes, "[", kConv, "] expected grad_output of size ", SizesToString(out.sizes),
             " (the convolution's output for input ", ShapeStr(input), " and weight ", ShapeStr(weight),
             "), but got ", ShapeStr(grad));
  KILN_CHECK(grad.dtype() == input.dtype(), "[", kConv, "] expected grad_output of dtype ",
             ScalarTypeDisplayName(input.dtype()), ", but got ", ScalarTypeDisplayName(grad.dtype()));
  CheckSameDevice(kConv, grad, input);
  const SymInt& channels = out.sizes[1];
  SymDimVector bias = {channels};
  if (bias_sizes) {
    bias = SymDimVector(bias_sizes->begin(), bias_sizes->end());
    KILN_CHECK(bias.size() == 1 && bias[0] == channels, "[", kConv, "] expected bias_sizes [", channels.str(),
               "] (the output channels), but got ", SizesToString(bias));
  }
  std::tuple<OptMeta, OptMeta, OptMeta> r;
  // channels-last gradients when the forward's output is channels-last, as PyTorch's
  auto layout = [&](const Tensor& t) {
    return out.strides.empty() ? SymDimVector{} : ChannelsLastStrides(t->sym_sizes());
  };
  if (mask[0]) std::get<0>(r) = TensorMeta{input->sym_sizes(), layout(input), input.dtype(), input.device()};
  if (mask[1]) std::get<1>(r) = TensorMeta{weight->sym_sizes(), layout(weight), weight.dtype(), weight.device()};
  if (mask[2]) std::get<2>(r) = TensorMeta{bias, {}, grad.dtype(), grad.device()};
  return r;
}

// dx, dw (either may be null) from dy [N, O, oh*ow...], x and w, all contiguous in the compute type.
template <typename T>
void ConvBwTyped(const T* dy, const T* x, const T* w, T* dx, T* dw, int64_t N, int64_t Cin, int64_t O,
                 const Geom& g, int64_t groups, bool transposed) {
  if (!transposed) {
    // g: image = input [Cin, H, W], grid = output [oh, ow]. Batched im2col (Note [Batched im2col]),
    // in blocks of samples (Note [Sample-parallel convolution]): each task sums its own partial
    // grad_weight, added up in task order at the end, and scatters into its own samples of dx
    // (zeroing them first).
    const int64_t Cg = Cin / groups, Og = O / groups, K = Cg * g.kh * g.kw, L = g.oh * g.ow, HW = g.H * g.W;
    // A weight gradient past L2 (resnet18's 128- to 512-channel 3x3 layers: 0.6 to 9.4 MB) is not
    // split into per-task partials, nor summed through a transposed product: each task's partial
    // and the transposed add walked megabytes, and two threads took 7x PyTorch's time on 512
    // channels of 2x2 images (1 thread 1.9x). The blocks then run in sequence, the GEMMs parallel
    // inside, accumulating straight into grad_weight.
    const bool large_dw = dw && O * K * static_cast<int64_t>(sizeof(T)) > kL2WeightBytes;
    const ConvBlocks plan = large_dw ? SequentialConvBlocks(N, Cin * g.kh * g.kw, L, sizeof(T))
                                     : PlanConvBlocks(N, Cin * g.kh * g.kw, L, sizeof(T), Og * K * L);
    const int64_t cols_size = Cin * g.kh * g.kw * plan.block * L, dyt_size = O * plan.block * L, dw_size = O * K;
    Scratch<T> cols(plan.tasks * cols_size), dyt(plan.tasks * dyt_size);
    // Per task: its partial grad_weight. When a group has fewer output channels than columns
    // (Og < K), a block's product is taken transposed, dW_g^T = cols_g @ dY_g^T, from dY_g^T
    // copied out [nb*L, O]: both operands untransposed and beta = 0 is the form OpenBLAS multiplies
    // without packing (Note [Sample-parallel convolution]); the A @ B^T form packed cols and took
    // twice as long (16->32 channels, 3x3). With few columns (1->16 channels: K = 9) packing them
    // costs less than copying dY^T, and the product accumulates in place.
    const bool partials = dw && plan.tasks > 1;
    const bool transpose_dy = Og < K && !large_dw;
    const int64_t dw_slot = 2 * dw_size + (transpose_dy ? O * plan.block * L : 0);  // sum, product^T, dY^T
    Scratch<T> partial_dw(dw ? plan.tasks * dw_slot : 0);
    if (dw) std::fill(dw, dw + dw_size, T(0));
    if (partials)
      for (int64_t t = 0; t < plan.tasks; ++t) std::fill_n(partial_dw.data() + t * dw_slot, dw_size, T(0));
    ForEachConvBlock(N, plan, [&](int64_t task, int64_t n0, int64_t nb) {
      T* c = cols.data() + task * cols_size;
      T* d = dyt.data() + task * dyt_size;
      const int64_t ld = nb * L;
      BatchToChannelMajor(dy + n0 * O * L, nb, O, L, d);
      if (dw) {
        Im2ColBatch(x + n0 * Cin * HW, nb, g, c);
        T* sum = partials ? partial_dw.data() + task * dw_slot : dw;
        T* prod = partial_dw.data() + task * dw_slot + dw_size;
        if (transpose_dy) {
          T* dy_t = prod + dw_size;
          for (int64_t o = 0; o < O; ++o)
            for (int64_t l = 0; l < ld; ++l) dy_t[l * O + o] = d[o * ld + l];
        }
        for (int64_t gi = 0; gi < groups; ++gi) {
          T* sg = sum + gi * Og * K;
          if (transpose_dy) {
            Gemm<T>(false, false, K, Og, ld, 1, c + gi * K * ld, ld, prod + dw_size + gi * Og, O, 0, prod, Og);
            for (int64_t o = 0; o < Og; ++o)
              for (int64_t k = 0; k < K; ++k) sg[o * K + k] += prod[k * Og + o];
          } else {
            Gemm<T>(false, true, Og, K, ld, 1, d + gi * Og * ld, ld, c + gi * K * ld, ld, 1, sg, K);
          }
        }
      }
      if (dx) {
        std::fill(dx + n0 * Cin * HW, dx + (n0 + nb) * Cin * HW, T(0));
        for (int64_t gi = 0; gi < groups; ++gi)
          Gemm<T>(true, false, K, ld, Og, 1, w + gi * Og * K, K, d + gi * Og * ld, ld, 0, c + gi * K * ld, ld);
        Col2ImBatch(c, nb, g, dx + n0 * Cin * HW);
      }
    });
    if (partials) {
      for (int64_t t = 0; t < plan.tasks; ++t)
        for (int64_t i = 0; i < dw_size; ++i) dw[i] += partial_dw.data()[t * dw_slot + i];
    }
  } else {
    // g: image = output [O, H, W], grid = input [oh, ow]; weight [Cin, Og, kh, kw].
    const int64_t Cg = Cin / groups, M = (O / groups) * g.kh * g.kw, L = g.oh * g.ow, HW = g.H * g.W;
    std::vector<T> cols(O * g.kh * g.kw * L);
    if (dw) std::fill(dw, dw + Cin * M, T(0));
    for (int64_t n = 0; n < N; ++n) {
      Im2Col(dy + n * O * HW, g, cols.data());
      for (int64_t gi = 0; gi < groups; ++gi) {
        if (dx)
          Gemm<T>(false, false, Cg, L, M, 1, w + gi * Cg * M, M, cols.data() + gi * M * L, L, 0,
                  dx + (n * Cin + gi * Cg) * L, L);
        if (dw)
          Gemm<T>(false, true, Cg, M, L, 1, x + (n * Cin + gi * Cg) * L, L, cols.data() + gi * M * L, L, 1,
                  dw + gi * Cg * M, M);
      }
    }
  }
}

Tensor3 ConvBw(const Tensor& grad, const Tensor& input, const Tensor& weight, const std::optional<SymList>& bias_sizes,
               const SymList& stride, const SymList& padding, const SymList& dilation, bool transposed,
               const SymList& output_padding, const SymInt& groups, std::vector<bool> mask) {
  auto [im, wm, bm] = ConvBwMeta(grad, input, weight, bias_sizes, stride, padding, dilation, transposed,
                                 output_padding, groups, mask);
  KILN_CHECK_NOT_IMPLEMENTED(IsFloating(input.dtype()), "\"", kConv, "\" not implemented for '",
                             ScalarTypeDisplayName(input.dtype()), "'");
  ConvParams p = CheckConv(input, weight, std::nullopt, stride, padding, dilation, transposed, output_padding, groups);
  Tensor gi = im ? EmptyFromMeta(*im) : Tensor(), gw = wm ? EmptyFromMeta(*wm) : Tensor();
  Tensor gb = bm ? EmptyFromMeta(*bm) : Tensor();
  if (gb.defined()) {
    std::vector<int64_t> dims = {0};
    for (int64_t d = 2; d < grad.dim(); ++d) dims.push_back(d);
    ops::copy_(gb, ops::sum(grad, dims, false, OpMathType(grad.dtype())));
  }
  if (!gi.defined() && !gw.defined()) return {gi, gw, gb};
  // Work buffers in the compute type and, for the kernels that write row-major (CUDA's and the
  // im2col one), contiguous; the results are copied out when they differ.
  const ScalarType compute = OpMathType(input.dtype());
  auto work = [&](const Tensor& g, bool row_major) {
    if (!g.defined() || (compute == g.dtype() && (!row_major || g.is_contiguous()))) return g;
    return EmptyTensor(g.sizes(), compute, g.device());
  };
  auto copy_out = [&](const Tensor& dx, const Tensor& dw) {
    if (dx.defined() && !dx.is_same(gi)) ops::copy_(gi, dx);
    if (dw.defined() && !dw.is_same(gw)) ops::copy_(gw, dw);
  };
  if (input.device().is_cuda() && input.numel() > 0 && grad.numel() > 0 && weight.numel() > 0) {
    // through cuDNN where it applies, in any layout (Note [cuDNN convolutions])
    if (ConvolutionBackwardCudnn(grad, input, weight, p, gi.defined() ? &gi : nullptr, gw.defined() ? &gw : nullptr)) {
      return {gi, gw, gb};
    }
    auto contiguous = [](const Tensor& g) {  // the CUDA kernel computes in the tensors' own dtype
      return !g.defined() || g.is_contiguous() ? g : EmptyTensor(g.sizes(), g.dtype(), g.device());
    };
    Tensor dx = contiguous(gi), dw = contiguous(gw);
    ConvolutionBackwardCUDA(grad, input, weight, p, dx.defined() ? &dx : nullptr, dw.defined() ? &dw : nullptr);
    copy_out(dx, dw);
    return {gi, gw, gb};
  }
  if (input.numel() > 0 && grad.numel() > 0 && weight.numel() > 0 && compute == ScalarType::Float32) {
    // float32 through oneDNN where it applies, in any layout (Note [oneDNN convolutions])
    Tensor dx = work(gi, false), dw = work(gw, false);
    if (ConvolutionBackwardOneDnn(CastTo(grad, compute), CastTo(input, compute), CastTo(weight, compute), p,
                                  dx.defined() ? &dx : nullptr, dw.defined() ? &dw : nullptr)) {
      copy_out(dx, dw);
      return {gi, gw, gb};
    }
  }
  Tensor dx = work(gi, true), dw = work(gw, true);
  if (input.numel() == 0 || grad.numel() == 0 || weight.numel() == 0) {
    if (dx.defined()) ops::fill_(dx, 0);
    if (dw.defined()) ops::fill_(dw, 0);
  } else {
    Tensor x = ops::contiguous(CastTo(input, compute)), w = ops::contiguous(CastTo(weight, compute));
    Tensor dy = ops::contiguous(CastTo(grad, compute));
    const Geom g = ConvGeom(p, x, w, dy);
    auto run = [&](auto tag) {
      using T = decltype(tag);
      ConvBwTyped<T>(dy.data_ptr<T>(), x.data_ptr<T>(), w.data_ptr<T>(), dx.defined() ? dx.data_ptr<T>() : nullptr,
                     dw.defined() ? dw.data_ptr<T>() : nullptr, x.size(0), x.size(1), dy.size(1), g, p.groups,
                     transposed);
    };
    if (compute == ScalarType::Float64) run(double{});
    else run(float{});
  }
  copy_out(dx, dw);
  return {gi, gw, gb};
}

// --- pooling -------------------------------------------------------------------------------------

// grad_output must have the pooling's output size for `self`, and self's dtype.
void CheckPoolGrad(const char* op, const Tensor& grad, const Tensor& self, const SymDimVector& out) {
  KILN_CHECK(grad->sym_sizes() == out, "[", op, "] expected grad_output of size ", SizesToString(out),
             " (the pooling's output for input ", ShapeStr(self), "), but got ", ShapeStr(grad));
  KILN_CHECK(grad.dtype() == self.dtype(), "[", op, "] expected dtype ", ScalarTypeDisplayName(self.dtype()),
             " for grad_output but got dtype ", ScalarTypeDisplayName(grad.dtype()));
  CheckSameDevice(op, grad, self);
}

constexpr const char* kMaxBw = "max_pool2d_with_indices_backward";

TensorMeta MaxPoolBwMeta(const Tensor& grad, const Tensor& self, const IntList& kernel_size, const IntList& stride,
                         const IntList& padding, const IntList& dilation, bool ceil_mode, const Tensor& indices) {
  PoolParams p = ParsePool(kMaxBw, kernel_size, stride, padding, &dilation);
  KILN_CHECK(self.dim() == 3 || self.dim() == 4, "[", kMaxBw, "] non-empty 3D or 4D (batch mode) tensor expected "
             "for input, but got ", ShapeStr(self));
  SymDimVector out = PoolShape(self, p, ceil_mode);
  CheckPoolGrad(kMaxBw, grad, self, out);
  KILN_CHECK(indices->sym_sizes() == out, "[", kMaxBw, "] expected indices of size ", SizesToString(out),
             ", but got ", ShapeStr(indices));
  KILN_CHECK(indices.dtype() == ScalarType::Int64, "[", kMaxBw, "] expected indices of dtype Long, but got ",
             ScalarTypeDisplayName(indices.dtype()));
  KILN_CHECK_NOT_IMPLEMENTED(IsFloating(self.dtype()), "\"max_pool2d_backward_out_frame\" not implemented for '",
                             ScalarTypeDisplayName(self.dtype()), "'");
  return TensorMeta{self->sym_sizes(), {}, self.dtype(), self.device()};
}

Tensor MaxPoolBw(const Tensor& grad, const Tensor& self, const IntList& kernel_size, const IntList& stride,
                 const IntList& padding, const IntList& dilation, bool ceil_mode, const Tensor& indices) {
  Tensor out = EmptyFromMeta(MaxPoolBwMeta(grad, self, kernel_size, stride, padding, dilation, ceil_mode, indices));
  if (out.numel() == 0) return out;
  if (self.device().is_cuda()) {
    MaxPool2dBackwardCUDA(grad, indices, ParsePool(kMaxBw, kernel_size, stride, padding, &dilation), out);
    return out;
  }
  Tensor g = ops::contiguous(grad), idx = ops::contiguous(indices);
  const int64_t H = self.size(-2), W = self.size(-1), L = grad.size(-2) * grad.size(-1);
  const int64_t* ip = idx.data_ptr<int64_t>();
  for (int64_t i = 0, n = idx.numel(); i < n; ++i)
    KILN_CHECK_INDEX(ip[i] >= 0 && ip[i] < H * W, "[", kMaxBw, "] index ", ip[i], " of indices is out of bounds for ",
                     "a plane of ", H, "x", W, " elements");
  KILN_DISPATCH_FLOATING(self.dtype(), kMaxBw, [&] {
    using T = scalar_t;
    using M = opmath_t<T>;
    const T* gp = g.data_ptr<T>();
    T* op = out.data_ptr<T>();
    std::fill(op, op + out.numel(), T(0));
    ForEachPlane(out, L, [&](int64_t pl) {
      T* dst = op + pl * H * W;
      for (int64_t k = 0; k < L; ++k) {
        const int64_t at = ip[pl * L + k];
        dst[at] = static_cast<T>(static_cast<M>(dst[at]) + static_cast<M>(gp[pl * L + k]));
      }
    });
  });
  return out;
}

constexpr const char* kAvgBw = "avg_pool2d_backward";

TensorMeta AvgPoolBwMeta(const Tensor& grad, const Tensor& self, const IntList& kernel_size, const IntList& stride,
                         const IntList& padding, bool ceil_mode, bool count_include_pad,
                         std::optional<int64_t> divisor_override) {
  (void)count_include_pad;
  KILN_CHECK(!divisor_override || *divisor_override != 0, "[", kAvgBw, "] divisor must be not zero");
  PoolParams p = ParsePool(kAvgBw, kernel_size, stride, padding, nullptr);
  SymDimVector out = PoolShape(self, p, ceil_mode);
  CheckPoolGrad(kAvgBw, grad, self, out);
  KILN_CHECK_NOT_IMPLEMENTED(IsFloating(self.dtype()) || self.dtype() == ScalarType::Int64,
                             "\"avg_pool2d_backward_out_frame\" not implemented for '",
                             ScalarTypeDisplayName(self.dtype()), "'");
  return TensorMeta{self->sym_sizes(), {}, self.dtype(), self.device()};
}

Tensor AvgPoolBw(const Tensor& grad, const Tensor& self, const IntList& kernel_size, const IntList& stride,
                 const IntList& padding, bool ceil_mode, bool count_include_pad,
                 std::optional<int64_t> divisor_override) {
  Tensor out = EmptyFromMeta(AvgPoolBwMeta(grad, self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                           divisor_override));
  if (out.numel() == 0) return out;
  PoolParams p = ParsePool(kAvgBw, kernel_size, stride, padding, nullptr);
  if (self.device().is_cuda()) {
    AvgPool2dBackwardCUDA(grad, p, count_include_pad, divisor_override, out);
    return out;
  }
  Tensor g = ops::contiguous(grad);
  const int64_t H = self.size(-2), W = self.size(-1), oh = grad.size(-2), ow = grad.size(-1);
  KILN_DISPATCH_NUMERIC(self.dtype(), kAvgBw, [&] {
    using T = scalar_t;
    using M = opmath_t<T>;
    const T* gp = g.data_ptr<T>();
    T* op = out.data_ptr<T>();
    ForEachPlane(out, oh * ow * p.kh * p.kw, [&](int64_t pl) {
      const T* src = gp + pl * oh * ow;
      T* dst = op + pl * H * W;
      std::vector<M> acc(H * W, M(0));
      for (int64_t y = 0; y < oh; ++y) {
        for (int64_t xo = 0; xo < ow; ++xo) {
          int64_t h0 = y * p.sh - p.ph, w0 = xo * p.sw - p.pw;
          int64_t h1 = std::min(h0 + p.kh, H + p.ph), w1 = std::min(w0 + p.kw, W + p.pw);
          const int64_t pool_size = (h1 - h0) * (w1 - w0);
          h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0);
          h1 = std::min(h1, H), w1 = std::min(w1, W);
          if (h0 >= h1 || w0 >= w1) continue;
          const int64_t div = divisor_override ? *divisor_override
                              : count_include_pad ? pool_size : (h1 - h0) * (w1 - w0);
          const M v = static_cast<M>(src[y * ow + xo]) / static_cast<M>(div);
          for (int64_t iy = h0; iy < h1; ++iy)
            for (int64_t ix = w0; ix < w1; ++ix) acc[iy * W + ix] += v;
        }
      }
      for (int64_t i = 0; i < H * W; ++i) dst[i] = static_cast<T>(acc[i]);
    });
  });
  return out;
}

constexpr const char* kAdaptBw = "_adaptive_avg_pool2d_backward";

TensorMeta AdaptiveAvgPoolBwMeta(const Tensor& grad, const Tensor& self) {
  const int64_t nd = self.dim();
  KILN_CHECK(nd == 3 || nd == 4, "[", kAdaptBw, "] expected a 3D or 4D input, but got ", ShapeStr(self));
  KILN_CHECK(grad.dim() == nd, "[", kAdaptBw, "] expected grad_output with ", nd, " dimensions (the input's), but "
             "got ", ShapeStr(grad));
  for (int64_t d = 0; d < nd - 2; ++d) {
    KILN_CHECK(grad->sym_sizes()[d] == self->sym_sizes()[d], "[", kAdaptBw, "] grad_output of size ", ShapeStr(grad),
               " does not match the batch and channel sizes of input ", ShapeStr(self));
  }
  KILN_CHECK(grad.dtype() == self.dtype(), "[", kAdaptBw, "] Expected dtype ", ScalarTypeDisplayName(self.dtype()),
             " for `grad_output` but got dtype ", ScalarTypeDisplayName(grad.dtype()));
  KILN_CHECK_NOT_IMPLEMENTED(IsFloating(self.dtype()), "\"adaptive_avg_pool2d_backward_cpu\" not implemented for '",
                             ScalarTypeDisplayName(self.dtype()), "'");
  return TensorMeta{self->sym_sizes(), {}, self.dtype(), self.device()};
}

Tensor AdaptiveAvgPoolBw(const Tensor& grad, const Tensor& self) {
  Tensor out = EmptyFromMeta(AdaptiveAvgPoolBwMeta(grad, self));
  if (out.numel() == 0) return out;
  if (self.device().is_cuda()) {
    AdaptiveAvgPool2dBackwardCUDA(grad, out);
    return out;
  }
  Tensor g = ops::contiguous(grad);
  const int64_t H = self.size(-2), W = self.size(-1), oh = grad.size(-2), ow = grad.size(-1);
  KILN_DISPATCH_FLOATING(self.dtype(), kAdaptBw, [&] {
    using T = scalar_t;
    using M = opmath_t<T>;
    const T* gp = g.data_ptr<T>();
    T* op = out.data_ptr<T>();
    ForEachPlane(out, H * W + oh * ow, [&](int64_t pl) {
      const T* src = gp + pl * oh * ow;
      std::vector<M> acc(H * W, M(0));
      for (int64_t y = 0; y < oh; ++y) {
        const int64_t h0 = (y * H) / oh, h1 = ((y + 1) * H + oh - 1) / oh;
        for (int64_t xo = 0; xo < ow; ++xo) {
          const int64_t w0 = (xo * W) / ow, w1 = ((xo + 1) * W + ow - 1) / ow;
          const M v = static_cast<M>(src[y * ow + xo]) / static_cast<M>((h1 - h0) * (w1 - w0));
          for (int64_t iy = h0; iy < h1; ++iy)
            for (int64_t ix = w0; ix < w1; ++ix) acc[iy * W + ix] += v;
        }
      }
      T* dst = op + pl * H * W;
      for (int64_t i = 0; i < H * W; ++i) dst[i] = static_cast<T>(acc[i]);
    });
  });
  return out;
}

}  // namespace

void RegisterConvPoolBackwardOps(Registry& r) {
  r.Def("convolution_backward(Tensor grad_output, Tensor input, Tensor weight, SymInt[]? bias_sizes, "
        "SymInt[] stride, SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding, "
        "SymInt groups, bool[3] output_mask) -> (Tensor, Tensor, Tensor)", {Tag::core, Tag::compute_intensive})
      .CPUAndCUDA<&ConvBw>().Meta<&ConvBwMeta>();
  r.Def("max_pool2d_with_indices_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, "
        "int[2] padding, int[2] dilation, bool ceil_mode, Tensor indices) -> Tensor", {Tag::core})
      .CPUAndCUDA<&MaxPoolBw>().Meta<&MaxPoolBwMeta>();
  r.Def("avg_pool2d_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, int[2] padding, "
        "bool ceil_mode, bool count_include_pad, int? divisor_override) -> Tensor", {Tag::core})
      .CPUAndCUDA<&AvgPoolBw>().Meta<&AvgPoolBwMeta>();
  r.Def("_adaptive_avg_pool2d_backward(Tensor grad_output, Tensor self) -> Tensor", {Tag::core})
      .CPUAndCUDA<&AdaptiveAvgPoolBw>().Meta<&AdaptiveAvgPoolBwMeta>();
}

}  // namespace kiln
