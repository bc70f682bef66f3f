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

// The geometry of a convolution of x [N, C, (H,) W] by w giving y, a 1-D one as 2-D with a height
// of 1: a plain convolution's image is x and its grid y's; a transposed one's image is y (its
// output) and its grid x's.
Geom ConvGeom(const ConvParams& p, const Tensor& x, const Tensor& w, const Tensor& y);

// out += bias[c] along dim 1 (the CUDA convolutions' bias, cuDNN's and im2col's, as one op).
inline void AddChannelBias(const Tensor& out, const Tensor& bias) {
  std::vector<SymInt> shape(out.dim(), SymInt(1));
  shape[1] = SymInt(bias.numel());
  Tensor o = out;
  ops::add_(o, ops::view(bias, shape));
}

// The outputs o whose input position o*stride + off lies inside [0, in): [lo, hi), within [0, out).
inline void ValidOutputs(int64_t off, int64_t stride, int64_t in, int64_t out, int64_t* lo, int64_t* hi) {
  auto ceil_div = [](int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); };
  *lo = std::clamp<int64_t>(ceil_div(-off, stride), 0, out);
  *hi = std::clamp<int64_t>(ceil_div(in - off, stride), *lo, out);
}

// Note [Flat im2col rows]: with unit strides and an output as wide as the image (a "same"
// padded width), row y of an im2col row reads image row y + di from column dj on, so the whole
// row is one shifted copy of the flattened image plane: dst[p] = plane[p + di*W + dj]. The few
// elements that wrap across an image row's end are exactly the invalid columns; they are zeroed
// afterwards, column by column (strided stores: a run of one element per row is not worth a
// memset call). Small images (8x8) then copy one run of 64 elements instead of eight runs of 8,
// where the per-run overhead cost more than the copy.
inline bool FlatRows(const Geom& g) { return g.sh == 1 && g.sw == 1 && g.ow == g.W; }

// Where im2col row r = (c*kh + i)*kw + j reads its image, worked out once for every sample.
struct ColRow {
  int64_t c, i, j;
  int64_t x0, x1;  // valid output columns (input column inside the image)
  int64_t y0, y1;  // valid output rows
  // Flat rows only: dst[p] = plane[p + shift] for p in [lo, hi), the copy clamped to the plane.
  int64_t shift, lo, hi;
};

inline ColRow MakeColRow(const Geom& g, int64_t r) {
  ColRow cr;
  cr.c = r / (g.kh * g.kw), cr.i = (r / g.kw) % g.kh, cr.j = r % g.kw;
  const int64_t row_off = cr.i * g.dh - g.ph, col_off = cr.j * g.dw - g.pw;  // iy = y*sh + row_off
  ValidOutputs(col_off, g.sw, g.W, g.ow, &cr.x0, &cr.x1);
  ValidOutputs(row_off, g.sh, g.H, g.oh, &cr.y0, &cr.y1);
  cr.shift = row_off * g.W + col_off;
  cr.lo = std::max(cr.y0 * g.ow, -cr.shift);
  cr.hi = std::min(cr.y1 * g.ow, g.H * g.W - cr.shift);
  return cr;
}

// Zeroes the invalid columns of the valid rows of one flat [oh, ow] row.
template <typename T>
inline void ZeroInvalidColumns(const Geom& g, const ColRow& cr, T* dst) {
  for (int64_t x = 0; x < cr.x0; ++x)
    for (int64_t y = cr.y0; y < cr.y1; ++y) dst[y * g.ow + x] = T(0);
  for (int64_t x = cr.x1; x < g.ow; ++x)
    for (int64_t y = cr.y0; y < cr.y1; ++y) dst[y * g.ow + x] = T(0);
}

// One row of im2col for one image: dst[y*ow + x] = image[c, y*sh - ph + i*dh, x*sw - pw + j*dw]
// (0 outside).
template <typename T>
inline void Im2ColRow(const T* img, const Geom& g, const ColRow& cr, T* dst) {
  const int64_t L = g.oh * g.ow;
  if (FlatRows(g)) {  // Note [Flat im2col rows]
    const T* plane = img + cr.c * g.H * g.W;
    std::fill(dst, dst + cr.y0 * g.ow, T(0));
    std::fill(dst + cr.y1 * g.ow, dst + L, T(0));
    for (int64_t p = cr.lo; p < cr.hi; ++p) dst[p] = plane[p + cr.shift];
    ZeroInvalidColumns(g, cr, dst);
    return;
  }
  const int64_t off = cr.j * g.dw - g.pw;
  for (int64_t y = 0; y < g.oh; ++y) {
    const int64_t iy = y * g.sh - g.ph + cr.i * g.dh;
    T* row = dst + y * g.ow;
    if (iy < 0 || iy >= g.H) {
      for (int64_t x = 0; x < g.ow; ++x) row[x] = T(0);
      continue;
    }
    const T* src = img + (cr.c * g.H + iy) * g.W + off;
    // Plain loops, not std::copy/fill: rows of small images are a few elements, where a memmove
    // call costs more than the copy.
    for (int64_t x = 0; x < cr.x0; ++x) row[x] = T(0);
    if (g.sw == 1) for (int64_t x = cr.x0; x < cr.x1; ++x) row[x] = src[x];
    else for (int64_t x = cr.x0; x < cr.x1; ++x) row[x] = src[x * g.sw];
    for (int64_t x = cr.x1; x < g.ow; ++x) row[x] = T(0);
  }
}

// The adjoint of one im2col row: image[c, ...] += src[...]. `src` is a scratch column buffer:
// under Note [Flat im2col rows] its invalid columns are zeroed so the row adds as one run.
template <typename T>
inline void Col2ImRow(T* src, const Geom& g, const ColRow& cr, T* img) {
  if (FlatRows(g)) {
    ZeroInvalidColumns(g, cr, src);
    T* plane = img + cr.c * g.H * g.W;
    for (int64_t p = cr.lo; p < cr.hi; ++p) plane[p + cr.shift] += src[p];
    return;
  }
  const int64_t off = cr.j * g.dw - g.pw;
  for (int64_t y = cr.y0; y < cr.y1; ++y) {
    T* row = img + (cr.c * g.H + y * g.sh - g.ph + cr.i * g.dh) * g.W + off;
    const T* s = src + y * g.ow;
    if (g.sw == 1) for (int64_t x = cr.x0; x < cr.x1; ++x) row[x] += s[x];
    else for (int64_t x = cr.x0; x < cr.x1; ++x) row[x * g.sw] += s[x];
  }
}

// cols[(c*kh + i)*kw + j, y*ow + x] = image[c, y*sh - ph + i*dh, x*sw - pw + j*dw] (0 outside).
template <typename T>
void Im2Col(const T* img, const Geom& g, T* cols) {
  const int64_t L = g.oh * g.ow;
  ParallelFor(0, g.C * g.kh * g.kw, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(L, 1)),
              [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) Im2ColRow(img, g, MakeColRow(g, r), cols + r * L);
  });
}

// The adjoint of Im2Col: image[c, ...] += cols[...], one channel per task (image zeroed by caller;
// cols is scratch, see Col2ImRow).
template <typename T>
void Col2Im(T* cols, const Geom& g, T* img) {
  const int64_t L = g.oh * g.ow, R = g.kh * g.kw;
  ParallelFor(0, g.C, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(L * R, 1)), [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c)
      for (int64_t r = c * R; r < (c + 1) * R; ++r) Col2ImRow(cols + r * L, g, MakeColRow(g, r), img);
  });
}

// Note [Batched im2col]: small images make per-sample GEMMs tiny (a 3x3 convolution of 16
// channels on 8x8 is 32x144 @ 144x64), where a BLAS call costs more than its arithmetic. The
// batched forms lay `nb` samples side by side, cols[r, n*L + l], so one GEMM per group covers
// them all; PlanConvBlocks bounds the buffer (Note [Sample-parallel convolution]).
template <typename T>
void Im2ColBatch(const T* imgs, int64_t nb, const Geom& g, T* cols) {
  const int64_t L = g.oh * g.ow, rows = g.C * g.kh * g.kw, image = g.C * g.H * g.W;
  // One task per row r: its channel/offsets and valid columns are worked out once for all samples.
  ParallelFor(0, rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(L * nb, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const ColRow cr = MakeColRow(g, r);
      for (int64_t n = 0; n < nb; ++n) Im2ColRow(imgs + n * image, g, cr, cols + r * nb * L + n * L);
    }
  });
}

// The adjoint of Im2ColBatch (imgs zeroed by the caller; cols is scratch, see Col2ImRow).
template <typename T>
void Col2ImBatch(T* cols, int64_t nb, const Geom& g, T* imgs) {
  const int64_t L = g.oh * g.ow, R = g.kh * g.kw, image = g.C * g.H * g.W;
  // Tasks t = c*nb + n own image plane (n, c) alone. A chunk of them walks each of its channels'
  // rows across its samples, so it reads cols in runs of samples (a stream) rather than hopping
  // between rows nb*L apart.
  ParallelFor(0, g.C * nb, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(L * R, 1)), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e;) {
      const int64_t c = t / nb, n0 = t % nb, n1 = std::min(nb, n0 + (e - t));
      for (int64_t r = c * R; r < (c + 1) * R; ++r) {
        const ColRow cr = MakeColRow(g, r);
        for (int64_t n = n0; n < n1; ++n) Col2ImRow(cols + r * nb * L + n * L, g, cr, imgs + n * image);
      }
      t += n1 - n0;
    }
  });
}

// Note [Sample-parallel convolution]: a batched im2col buffer of many small images is megabytes
// (16 channels, 3x3, 128 samples of 8x8: 4.7 MB), past L2, so writing it, multiplying it and
// scattering it back each ran at memory bandwidth, and the threads split every step three ways
// (im2col rows, GEMM columns, col2im planes) so each read what the other had written. When
// the batch has a sample per thread and a sample's columns are small, each thread instead takes
// its own run of samples and works through it in blocks whose columns stay in its L2, calling
// im2col, GEMM and col2im inline. Otherwise (a few large images) the blocks run one after another
// with each step parallel inside, bounded near 16 MB of columns.
//
// Blocks are small: a block's GEMMs do at most ~1e6 multiply-adds where a sample allows it, the
// size up to which OpenBLAS (0.3.21, Skylake-X kernels) multiplies in place without packing its
// operands. For the 16->32-channel 3x3 convolution of 8x8 images that is 3 samples a block, and
// the forward ran in 0.48 ms against 0.69 ms with 4 samples and 0.90 ms in one 16 MB block.
struct ConvBlocks {
  int64_t tasks;  // parallel runs of samples (1: blocks in sequence, steps parallel inside)
  int64_t block;  // most samples per block
};

// Blocks in sequence, each step parallel inside, bounded near 16 MB of columns.
inline ConvBlocks SequentialConvBlocks(int64_t N, int64_t rows, int64_t L, int64_t itemsize) {
  const int64_t per_sample = std::max<int64_t>(rows * L * itemsize, 1);
  return {1, std::max<int64_t>(1, std::min<int64_t>(N, (int64_t(16) << 20) / per_sample))};
}

// A weight gradient up to this size is summed per task and transposed cheaply (conv_pool_backward.cc).
constexpr int64_t kL2WeightBytes = int64_t(256) << 10;

// `rows` x `L` columns per sample; `macs` multiply-adds per sample in one group's GEMM.
inline ConvBlocks PlanConvBlocks(int64_t N, int64_t rows, int64_t L, int64_t itemsize, int64_t macs) {
  const int64_t per_sample = std::max<int64_t>(rows * L * itemsize, 1);
  const int64_t threads = GetNumThreads();
  constexpr int64_t kL2Columns = int64_t(1) << 20;  // leaves L2 room for GEMM's packed panels
  constexpr int64_t kUnpackedGemm = 1000000;
  if (threads > 1 && !InParallelRegion() && N >= threads && per_sample <= kL2Columns) {
    const int64_t fit = macs <= kUnpackedGemm ? kUnpackedGemm / std::max<int64_t>(macs, 1) : kL2Columns / per_sample;
    return {threads, std::clamp<int64_t>(fit, 1, kL2Columns / per_sample)};
  }
  return SequentialConvBlocks(N, rows, L, itemsize);
}

// Calls fn(task, n0, nb) for blocks [n0, n0 + nb) covering [0, N): task t's run of samples in
// blocks of near-equal size, the tasks in parallel.
template <typename Fn>
void ForEachConvBlock(int64_t N, const ConvBlocks& plan, const Fn& fn) {
  ParallelFor(0, plan.tasks, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t lo = N * t / plan.tasks, hi = N * (t + 1) / plan.tasks;
      const int64_t blocks = (hi - lo + plan.block - 1) / plan.block;
      for (int64_t k = 0; k < blocks; ++k) {
        const int64_t n0 = lo + (hi - lo) * k / blocks, n1 = lo + (hi - lo) * (k + 1) / blocks;
        fn(t, n0, n1 - n0);
      }
    }
  });
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

// CUDA (conv_pool_cuda.cc, Note [CUDA convolution]), after the ops' checks and allocation. The
// outputs are the ops' own; floating dtypes only (NotImplementedError with PyTorch's kernel names).
void ConvolutionCUDA(const Tensor& input, const Tensor& weight, const Tensor* bias, const Tensor& out,
                     const ConvParams& p);
// Either gradient may be null; both are contiguous.
void ConvolutionBackwardCUDA(const Tensor& grad, const Tensor& input, const Tensor& weight, const ConvParams& p,
                             const Tensor* grad_input, const Tensor* grad_weight);
void MaxPool2dCUDA(const Tensor& self, const PoolParams& p, const Tensor& out, const Tensor& indices);
// An index outside its plane raises IndexError at the next synchronisation.
void MaxPool2dBackwardCUDA(const Tensor& grad, const Tensor& indices, const PoolParams& p, const Tensor& grad_input);
void AvgPool2dCUDA(const Tensor& self, const PoolParams& p, bool count_include_pad, std::optional<int64_t> divisor,
                   const Tensor& out);
void AvgPool2dBackwardCUDA(const Tensor& grad, const PoolParams& p, bool count_include_pad,
                           std::optional<int64_t> divisor, const Tensor& grad_input);
void AdaptiveAvgPool2dCUDA(const Tensor& self, const Tensor& out);
void AdaptiveAvgPool2dBackwardCUDA(const Tensor& grad, const Tensor& grad_input);

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
