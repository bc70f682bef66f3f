// tensor/ops/conv_pool.h: what convolution/pooling forward (conv_pool.cc) and backward
// (conv_pool_backward.cc) share: the parameter checks and output shapes, the im2col/col2im
// unfolding, and the per-plane loop of the pooling kernels.
#pragma once

#include <algorithm>
#include <optional>
#include <vector>

#include "tensor/empty.h"
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

// The output columns x whose input column x*sw - pw + j*dw lies inside [0, W): [x0, x1).
inline void ValidColumns(const Geom& g, int64_t j, int64_t* x0, int64_t* x1) {
  const int64_t off = j * g.dw - g.pw;  // ix = x*sw + off
  auto ceil_div = [](int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); };
  *x0 = std::clamp<int64_t>(ceil_div(-off, g.sw), 0, g.ow);
  *x1 = std::clamp<int64_t>(ceil_div(g.W - off, g.sw), *x0, g.ow);
}

// One row of im2col: dst[y*ow + x] = image[c, y*sh - ph + i*dh, x*sw - pw + j*dw] (0 outside),
// for row r = (c*kh + i)*kw + j. The valid columns are computed once, so the inner loop is a
// branch-free copy (a memcpy at stride 1).
template <typename T>
inline void Im2ColRow(const T* img, const Geom& g, int64_t r, T* dst) {
  const int64_t c = r / (g.kh * g.kw), i = (r / g.kw) % g.kh, j = r % g.kw;
  int64_t x0, x1;
  ValidColumns(g, j, &x0, &x1);
  const int64_t off = j * g.dw - g.pw;
  for (int64_t y = 0; y < g.oh; ++y) {
    const int64_t iy = y * g.sh - g.ph + i * g.dh;
    T* row = dst + y * g.ow;
    if (iy < 0 || iy >= g.H) {
      for (int64_t x = 0; x < g.ow; ++x) row[x] = T(0);
      continue;
    }
    const T* src = img + (c * g.H + iy) * g.W + off;
    // Plain loops, not std::copy/fill: rows of small images are a few elements, where a memmove
    // call costs more than the copy.
    for (int64_t x = 0; x < x0; ++x) row[x] = T(0);
    if (g.sw == 1) for (int64_t x = x0; x < x1; ++x) row[x] = src[x];
    else for (int64_t x = x0; x < x1; ++x) row[x] = src[x * g.sw];
    for (int64_t x = x1; x < g.ow; ++x) row[x] = T(0);
  }
}

// The adjoint of one im2col row: image[c, ...] += src[...].
template <typename T>
inline void Col2ImRow(const T* src, const Geom& g, int64_t r, T* img) {
  const int64_t c = r / (g.kh * g.kw), i = (r / g.kw) % g.kh, j = r % g.kw;
  int64_t x0, x1;
  ValidColumns(g, j, &x0, &x1);
  const int64_t off = j * g.dw - g.pw;
  for (int64_t y = 0; y < g.oh; ++y) {
    const int64_t iy = y * g.sh - g.ph + i * g.dh;
    if (iy < 0 || iy >= g.H) continue;
    T* row = img + (c * g.H + iy) * g.W + off;
    const T* s = src + y * g.ow;
    if (g.sw == 1) for (int64_t x = x0; x < x1; ++x) row[x] += s[x];
    else for (int64_t x = x0; x < x1; ++x) row[x * g.sw] += s[x];
  }
}

// cols[(c*kh + i)*kw + j, y*ow + x] = image[c, y*sh - ph + i*dh, x*sw - pw + j*dw] (0 outside).
template <typename T>
void Im2Col(const T* img, const Geom& g, T* cols) {
  const int64_t L = g.oh * g.ow;
  ParallelFor(0, g.C * g.kh * g.kw, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(L, 1)),
              [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) Im2ColRow(img, g, r, cols + r * L);
  });
}

// The adjoint of Im2Col: image[c, ...] += cols[...], one channel per task (image zeroed by caller).
template <typename T>
void Col2Im(const T* cols, const Geom& g, T* img) {
  const int64_t L = g.oh * g.ow, R = g.kh * g.kw;
  ParallelFor(0, g.C, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(L * R, 1)), [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c)
      for (int64_t r = c * R; r < (c + 1) * R; ++r) Col2ImRow(cols + r * L, g, r, img);
  });
}

// Note [Batched im2col]: small images make per-sample GEMMs tiny (a 3x3 convolution of 16
// channels on 8x8 is 32x144 @ 144x64), where a BLAS call costs more than its arithmetic. The
// batched forms lay `nb` samples side by side, cols[r, n*L + l], so one GEMM per group covers
// them all; ConvBatchChunk bounds the buffer.
template <typename T>
void Im2ColBatch(const T* imgs, int64_t nb, const Geom& g, T* cols) {
  const int64_t L = g.oh * g.ow, rows = g.C * g.kh * g.kw, image = g.C * g.H * g.W;
  // One task per row r: its channel/offsets and valid columns are worked out once for all samples.
  ParallelFor(0, rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(L * nb, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r)
      for (int64_t n = 0; n < nb; ++n) Im2ColRow(imgs + n * image, g, r, cols + r * nb * L + n * L);
  });
}

template <typename T>
void Col2ImBatch(const T* cols, int64_t nb, const Geom& g, T* imgs) {
  const int64_t L = g.oh * g.ow, R = g.kh * g.kw, image = g.C * g.H * g.W;
  // One task per (sample, channel): the channel's image plane is written by this task alone.
  ParallelFor(0, g.C * nb, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(L * R, 1)), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t n = t / g.C, c = t % g.C;
      for (int64_t r = c * R; r < (c + 1) * R; ++r) Col2ImRow(cols + r * nb * L + n * L, g, r, imgs + n * image);
    }
  });
}

// Samples per batched-im2col chunk: the column buffer stays near 16 MB.
inline int64_t ConvBatchChunk(int64_t N, int64_t rows, int64_t L, int64_t itemsize) {
  const int64_t per_sample = std::max<int64_t>(rows * L * itemsize, 1);
  return std::max<int64_t>(1, std::min<int64_t>(N, (int64_t(16) << 20) / per_sample));
}

// Scratch memory from the CPU allocator's cache (a std::vector would page-fault and zero megabytes
// on every call).
template <typename T>
struct Scratch {
  Tensor buffer;
  explicit Scratch(int64_t n) : buffer(EmptyTensor(DimVector{n}, CppTypeToScalarType<T>::value, Device())) {}
  T* data() const { return buffer.data_ptr<T>(); }
};

// [nb, C, L] <-> [C, nb, L] (GEMM's sample-interleaved layout), plus an optional per-channel bias.
template <typename T>
void BatchToChannelMajor(const T* src, int64_t nb, int64_t C, int64_t L, T* dst) {
  ParallelFor(0, C * nb, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(L, 1)), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t c = t / nb, n = t % nb;
      std::copy(src + (n * C + c) * L, src + (n * C + c + 1) * L, dst + (c * nb + n) * L);
    }
  });
}
template <typename T>
void ChannelMajorToBatch(const T* src, int64_t nb, int64_t C, int64_t L, const T* bias, T* dst) {
  ParallelFor(0, C * nb, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(L, 1)), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t c = t / nb, n = t % nb;
      const T* in = src + (c * nb + n) * L;
      T* out = dst + (n * C + c) * L;
      const T add = bias ? bias[c] : T(0);
      for (int64_t l = 0; l < L; ++l) out[l] = in[l] + add;
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
