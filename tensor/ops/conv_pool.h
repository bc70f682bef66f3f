// tensor/ops/conv_pool.h: what convolution/pooling forward (conv_pool.cc) and backward
// (conv_pool_backward.cc) share: the parameter checks and output shapes, the im2col/col2im
// unfolding, and the per-plane loop of the pooling kernels.
#pragma once

#include <optional>
#include <vector>

#include "tensor/ops/common.h"

namespace kiln {

// convolution's per-dimension parameters, expanded to the spatial rank.
struct ConvParams {
  int64_t dims;  // spatial dims: 1 or 2
  std::vector<int64_t> stride, padding, dilation, output_padding;
  bool transposed;
  int64_t groups;
};

// PyTorch's convolution checks (ConvUtils.h), in its order and with its messages.
ConvParams CheckConv(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                     const std::vector<SymInt>& stride, const std::vector<SymInt>& padding,
                     const std::vector<SymInt>& dilation, bool transposed, const std::vector<SymInt>& output_padding,
                     const SymInt& groups);
// The output of convolution (checks included).
TensorMeta ConvolutionMeta(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                           const std::vector<SymInt>& stride, const std::vector<SymInt>& padding,
                           const std::vector<SymInt>& dilation, bool transposed,
                           const std::vector<SymInt>& output_padding, const SymInt& groups);

// Geometry of one 2-D convolution: image [C, H, W], kernel kh x kw, output grid oh x ow.
struct Geom {
  int64_t C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
};

// cols[(c*kh + i)*kw + j, y*ow + x] = image[c, y*sh - ph + i*dh, x*sw - pw + j*dw] (0 outside).
template <typename T>
void Im2Col(const T* img, const Geom& g, T* cols) {
  const int64_t L = g.oh * g.ow;
  ParallelFor(0, g.C * g.kh * g.kw, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(L, 1)),
              [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t c = r / (g.kh * g.kw), i = (r / g.kw) % g.kh, j = r % g.kw;
      T* dst = cols + r * L;
      for (int64_t y = 0; y < g.oh; ++y) {
        const int64_t iy = y * g.sh - g.ph + i * g.dh;
        T* row = dst + y * g.ow;
        if (iy < 0 || iy >= g.H) {
          std::fill(row, row + g.ow, T(0));
          continue;
        }
        const T* src = img + (c * g.H + iy) * g.W;
        for (int64_t x = 0; x < g.ow; ++x) {
          const int64_t ix = x * g.sw - g.pw + j * g.dw;
          row[x] = ix >= 0 && ix < g.W ? src[ix] : T(0);
        }
      }
    }
  });
}

// The adjoint of Im2Col: image[c, ...] += cols[...], one channel per task (image zeroed by caller).
template <typename T>
void Col2Im(const T* cols, const Geom& g, T* img) {
  const int64_t L = g.oh * g.ow;
  ParallelFor(0, g.C, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(L * g.kh * g.kw, 1)),
              [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      for (int64_t i = 0; i < g.kh; ++i) {
        for (int64_t j = 0; j < g.kw; ++j) {
          const T* src = cols + ((c * g.kh + i) * g.kw + j) * L;
          for (int64_t y = 0; y < g.oh; ++y) {
            const int64_t iy = y * g.sh - g.ph + i * g.dh;
            if (iy < 0 || iy >= g.H) continue;
            T* row = img + (c * g.H + iy) * g.W;
            for (int64_t x = 0; x < g.ow; ++x) {
              const int64_t ix = x * g.sw - g.pw + j * g.dw;
              if (ix >= 0 && ix < g.W) row[ix] += src[y * g.ow + x];
            }
          }
        }
      }
    }
  });
}

// 2-D pooling parameters, with the defaults filled (stride = kernel, dilation 1).
struct PoolParams {
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
};
PoolParams ParsePool(const char* op, const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
                     const std::vector<int64_t>& padding, const std::vector<int64_t>* dilation);
// The output sizes of a 2-D pooling of `input` (PyTorch's checks and messages).
SymDimVector PoolShape(const Tensor& input, const PoolParams& p, bool ceil_mode);

// Runs fn(plane) for each [H, W] plane of a contiguous input, in parallel.
template <typename Fn>
void ForEachPlane(const Tensor& x, int64_t work_per_plane, const Fn& fn) {
  const int64_t H = x.size(-2), W = x.size(-1);
  const int64_t planes = x.numel() / std::max<int64_t>(H * W, 1);
  ParallelFor(0, planes, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(work_per_plane, 1)),
              [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) fn(pl);
  });
}

}  // namespace kiln
