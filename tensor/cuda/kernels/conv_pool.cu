// tensor/cuda/kernels/conv_pool.cu: convolution's unfolding (im2col) and folding (col2im), and 2-D
// max / average / adaptive average pooling with their backward, as tensor/ops/conv_pool_cuda.cc
// launches them.
//
// Pooling: one thread per element written, grid-stride. Every backward gathers: a grad_input element sums
// the outputs whose windows hold it, in output order (the CPU kernels' order), so results are
// deterministic and need no atomics; col2im likewise sums a pixel's columns in row order. Index
// arithmetic is 32-bit (the *_i32 kernels) when every index the kernel forms fits, as integer
// division is several times cheaper there.
#include <cuda/std/limits>

#include "tensor/cuda/kernels/common.cuh"
#include "tensor/cuda/kernels/conv_pool_args.h"

namespace kiln {

// --- convolution -----------------------------------------------------------------------------------

// Both kernels run on a 2-D grid: x over an image's pixels (im2col: the L output positions; col2im:
// the H * W image pixels), y striding over the (image, channel) planes. A thread handles one pixel of
// one plane and loops over the kh * kw taps, so the index arithmetic (divisions) is done once per
// pixel, not per element, and each tap's loads and stores are coalesced across the block.

template <typename T, typename I>
__device__ void Im2Col(const ConvColsArgs& a) {
  const T* image = static_cast<const T*>(a.src);
  T* cols = static_cast<T*>(a.dst);
  const I C = a.C, H = a.H, W = a.W, kh = a.kh, kw = a.kw, ow = a.ow, nb = a.batch;
  const I L = I(a.oh) * ow, width = nb * L, p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= L) return;
  const I y = p / ow, x = p - y * ow;
  const I iy0 = y * I(a.sh) - I(a.ph), ix0 = x * I(a.sw) - I(a.pw);
  for (I plane = blockIdx.y; plane < nb * C; plane += gridDim.y) {
    const I n = plane / C, c = plane - n * C;
    const T* src = image + plane * H * W;
    T* dst = cols + c * kh * kw * width + n * L + p;
    for (I ki = 0; ki < kh; ++ki) {
      const I iy = iy0 + ki * I(a.dh);
      const bool row_inside = iy >= 0 && iy < H;
      for (I kj = 0; kj < kw; ++kj, dst += width) {
        const I ix = ix0 + kj * I(a.dw);
        *dst = row_inside && ix >= 0 && ix < W ? src[iy * W + ix] : T{};
      }
    }
  }
}

// Strides of 1 need no divisibility test: output (y, x) = (h + ph - ki * dh, w + pw - kj * dw).
template <typename T, typename I, bool kUnitStride>
__device__ void Col2Im(const ConvColsArgs& a) {
  using M = opmath_t<T>;
  const T* cols = static_cast<const T*>(a.src);
  T* image = static_cast<T*>(a.dst);
  const I C = a.C, H = a.H, W = a.W, kh = a.kh, kw = a.kw, sh = a.sh, sw = a.sw, oh = a.oh, ow = a.ow;
  const I nb = a.batch, L = oh * ow, width = nb * L, p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= H * W) return;
  const I h = p / W, w = p - h * W;
  for (I plane = blockIdx.y; plane < nb * C; plane += gridDim.y) {
    const I n = plane / C, c = plane - n * C;
    const T* src = cols + c * kh * kw * width + n * L;
    M acc = M(0);
    for (I ki = 0; ki < kh; ++ki) {
      I y = h + I(a.ph) - ki * I(a.dh);  // = y * sh for the output row y that reads it
      if (!kUnitStride) {
        if (y < 0 || y % sh != 0) continue;
        y /= sh;
      }
      if (y < 0 || y >= oh) continue;
      for (I kj = 0; kj < kw; ++kj) {
        I x = w + I(a.pw) - kj * I(a.dw);
        if (!kUnitStride) {
          if (x < 0 || x % sw != 0) continue;
          x /= sw;
        }
        if (x < 0 || x >= ow) continue;
        acc += Cast<M>(src[(ki * kw + kj) * width + y * ow + x]);
      }
    }
    image[plane * H * W + p] = Cast<T>(acc);
  }
}

template <typename T, typename I>
__device__ void Col2ImAnyStride(const ConvColsArgs& a) {
  if (a.sh == 1 && a.sw == 1) Col2Im<T, I, true>(a);
  else Col2Im<T, I, false>(a);
}

// --- pooling ---------------------------------------------------------------------------------------

template <typename M>
__device__ __forceinline__ M Lowest() {
  return cuda::std::numeric_limits<M>::has_infinity ? -cuda::std::numeric_limits<M>::infinity()
                                                    : cuda::std::numeric_limits<M>::lowest();
}

// Element i of [planes, rows, cols] planes: its column, row and plane.
template <typename I>
__device__ __forceinline__ void PlanePosition(I i, I cols, I rows, I* col, I* row, I* plane) {
  *col = i % cols;
  *row = (i / cols) % rows;
  *plane = i / (cols * rows);
}

// The sum of src[h0:h1, w0:w1] (a plane of width W) in M.
template <typename M, typename T, typename I>
__device__ __forceinline__ M WindowSum(const T* src, I W, I h0, I h1, I w0, I w1) {
  M sum = M(0);
  for (I iy = h0; iy < h1; ++iy)
    for (I ix = w0; ix < w1; ++ix) sum += Cast<M>(src[iy * W + ix]);
  return sum;
}

// The outputs [lo, hi) along one dim whose windows (start o * stride - pad, extent `span`) hold
// input position `at`.
template <typename I>
__device__ __forceinline__ void Holding(I at, I pad, I span, I stride, I out, I* lo, I* hi) {
  *lo = at + pad < span ? 0 : (at + pad - span) / stride + 1;
  *hi = min((at + pad) / stride + 1, out);
}

template <typename T, typename I>
__device__ void MaxPool(const PoolArgs& a) {
  using M = opmath_t<T>;
  const T* in = static_cast<const T*>(a.src);
  T* out = static_cast<T*>(a.dst);
  const I H = a.H, W = a.W, oh = a.oh, ow = a.ow, dh = a.dh, dw = a.dw;
  KILN_GRID_STRIDE_LOOP(e, a.planes * oh * ow) {
    const I i = I(e);
    I x, y, plane;
    PlanePosition<I>(i, ow, oh, &x, &y, &plane);
    I h0 = y * I(a.sh) - I(a.ph), w0 = x * I(a.sw) - I(a.pw);
    const I h1 = min(h0 + (I(a.kh) - 1) * dh + 1, H), w1 = min(w0 + (I(a.kw) - 1) * dw + 1, W);
    while (h0 < 0) h0 += dh;
    while (w0 < 0) w0 += dw;
    const T* src = in + plane * H * W;
    I best = h0 * W + w0;
    M best_v = Lowest<M>();
    for (I iy = h0; iy < h1; iy += dh) {
      for (I ix = w0; ix < w1; ix += dw) {
        const M v = Cast<M>(src[iy * W + ix]);
        if (v > best_v || v != v) {  // NaN wins, as in PyTorch's kernels
          best_v = v;
          best = iy * W + ix;
        }
      }
    }
    out[i] = Cast<T>(best_v);
    a.indices[i] = best;
  }
}

template <typename T, typename I>
__device__ void MaxPoolBackward(const PoolArgs& a) {
  using M = opmath_t<T>;
  const T* grad = static_cast<const T*>(a.src);
  T* gi = static_cast<T*>(a.dst);
  const I H = a.H, W = a.W, oh = a.oh, ow = a.ow;
  const int64_t outputs = a.planes * oh * ow, inputs = a.planes * H * W;
  KILN_GRID_STRIDE_LOOP(e, max(outputs, inputs)) {
    if (e < outputs) {  // an index outside its plane would be dropped silently: report it
      const int64_t at = a.indices[e];
      if (at < 0 || at >= int64_t(H) * W) ReportDeviceError(a.error_word, a.error_code, at);
    }
    if (e >= inputs) continue;
    const I i = I(e);
    I w, h, plane;
    PlanePosition<I>(i, W, H, &w, &h, &plane);
    I y0, y1, x0, x1;
    Holding<I>(h, I(a.ph), (I(a.kh) - 1) * I(a.dh) + 1, I(a.sh), oh, &y0, &y1);
    Holding<I>(w, I(a.pw), (I(a.kw) - 1) * I(a.dw) + 1, I(a.sw), ow, &x0, &x1);
    const int64_t* idx = a.indices + int64_t(plane) * oh * ow;
    const T* g = grad + plane * oh * ow;
    const int64_t target = int64_t(h) * W + w;
    M acc = M(0);
    for (I y = y0; y < y1; ++y)
      for (I x = x0; x < x1; ++x)
        if (idx[y * ow + x] == target) acc += Cast<M>(g[y * ow + x]);
    gi[i] = Cast<T>(acc);
  }
}

// Average pooling's window for output (y, x): [h0, h1) x [w0, w1) clipped to the plane, and its divisor.
template <typename I>
__device__ __forceinline__ I AvgWindow(const PoolArgs& a, I y, I x, I* h0, I* h1, I* w0, I* w1) {
  const I H = a.H, W = a.W;
  *h0 = y * I(a.sh) - I(a.ph), *w0 = x * I(a.sw) - I(a.pw);
  *h1 = min(*h0 + I(a.kh), H + I(a.ph)), *w1 = min(*w0 + I(a.kw), W + I(a.pw));
  const I pool_size = (*h1 - *h0) * (*w1 - *w0);
  *h0 = max(*h0, I(0)), *w0 = max(*w0, I(0));
  *h1 = min(*h1, H), *w1 = min(*w1, W);
  return a.divisor > 0 ? I(a.divisor) : a.count_include_pad ? pool_size : (*h1 - *h0) * (*w1 - *w0);
}

template <typename T, typename I>
__device__ void AvgPool(const PoolArgs& a) {
  using M = opmath_t<T>;
  const T* in = static_cast<const T*>(a.src);
  T* out = static_cast<T*>(a.dst);
  const I H = a.H, W = a.W, oh = a.oh, ow = a.ow;
  KILN_GRID_STRIDE_LOOP(e, a.planes * oh * ow) {
    const I i = I(e);
    I x, y, plane;
    PlanePosition<I>(i, ow, oh, &x, &y, &plane);
    I h0, h1, w0, w1;
    const I div = AvgWindow<I>(a, y, x, &h0, &h1, &w0, &w1);
    if (h0 >= h1 || w0 >= w1) {
      out[i] = T{};
      continue;
    }
    out[i] = Cast<T>(WindowSum<M>(in + plane * H * W, W, h0, h1, w0, w1) / static_cast<M>(div));
  }
}

template <typename T, typename I>
__device__ void AvgPoolBackward(const PoolArgs& a) {
  using M = opmath_t<T>;
  const T* grad = static_cast<const T*>(a.src);
  T* gi = static_cast<T*>(a.dst);
  const I H = a.H, W = a.W, oh = a.oh, ow = a.ow;
  KILN_GRID_STRIDE_LOOP(e, a.planes * H * W) {
    const I i = I(e);
    I w, h, plane;
    PlanePosition<I>(i, W, H, &w, &h, &plane);
    I y0, y1, x0, x1;
    Holding<I>(h, I(a.ph), I(a.kh), I(a.sh), oh, &y0, &y1);
    Holding<I>(w, I(a.pw), I(a.kw), I(a.sw), ow, &x0, &x1);
    const T* g = grad + plane * oh * ow;
    M acc = M(0);
    for (I y = y0; y < y1; ++y) {
      for (I x = x0; x < x1; ++x) {
        I h0, h1, w0, w1;
        const I div = AvgWindow<I>(a, y, x, &h0, &h1, &w0, &w1);
        acc += Cast<M>(g[y * ow + x]) / static_cast<M>(div);
      }
    }
    gi[i] = Cast<T>(acc);
  }
}

// Adaptive pooling's window along one dim: [o * in / out, ceil((o + 1) * in / out)).
template <typename I>
__device__ __forceinline__ void AdaptiveWindow(I o, I in, I out, I* lo, I* hi) {
  *lo = (o * in) / out;
  *hi = ((o + 1) * in + out - 1) / out;
}

template <typename T, typename I>
__device__ void AdaptiveAvgPool(const PoolArgs& a) {
  using M = opmath_t<T>;
  const T* in = static_cast<const T*>(a.src);
  T* out = static_cast<T*>(a.dst);
  const I H = a.H, W = a.W, oh = a.oh, ow = a.ow;
  KILN_GRID_STRIDE_LOOP(e, a.planes * oh * ow) {
    const I i = I(e);
    I x, y, plane;
    PlanePosition<I>(i, ow, oh, &x, &y, &plane);
    I h0, h1, w0, w1;
    AdaptiveWindow<I>(y, H, oh, &h0, &h1);
    AdaptiveWindow<I>(x, W, ow, &w0, &w1);
    out[i] = Cast<T>(WindowSum<M>(in + plane * H * W, W, h0, h1, w0, w1) / static_cast<M>((h1 - h0) * (w1 - w0)));
  }
}

template <typename T, typename I>
__device__ void AdaptiveAvgPoolBackward(const PoolArgs& a) {
  using M = opmath_t<T>;
  const T* grad = static_cast<const T*>(a.src);
  T* gi = static_cast<T*>(a.dst);
  const I H = a.H, W = a.W, oh = a.oh, ow = a.ow;
  KILN_GRID_STRIDE_LOOP(e, a.planes * H * W) {
    const I i = I(e);
    I w, h, plane;
    PlanePosition<I>(i, W, H, &w, &h, &plane);
    // the outputs whose windows hold (h, w): floor(h * oh / H) .. ceil((h + 1) * oh / H)
    const I y0 = (h * oh) / H, y1 = ((h + 1) * oh + H - 1) / H;
    const I x0 = (w * ow) / W, x1 = ((w + 1) * ow + W - 1) / W;
    const T* g = grad + plane * oh * ow;
    M acc = M(0);
    for (I y = y0; y < y1; ++y) {
      I h0, h1;
      AdaptiveWindow<I>(y, H, oh, &h0, &h1);
      for (I x = x0; x < x1; ++x) {
        I w0, w1;
        AdaptiveWindow<I>(x, W, ow, &w0, &w1);
        acc += Cast<M>(g[y * ow + x]) / static_cast<M>((h1 - h0) * (w1 - w0));
      }
    }
    gi[i] = Cast<T>(acc);
  }
}

}  // namespace kiln

// kiln_<what>_<dtype> (64-bit indices) and kiln_<what>_<dtype>_i32.
#define KILN_CONV_POOL_KERNEL(what, Fn, Args, T, S)                                               \
  extern "C" __global__ void kiln_##what##_##S(kiln::Args a) { kiln::Fn<T, int64_t>(a); }         \
  extern "C" __global__ void kiln_##what##_##S##_i32(kiln::Args a) { kiln::Fn<T, int32_t>(a); }

#define KILN_FLOATING_KERNELS(T, S)                                                      \
  KILN_CONV_POOL_KERNEL(im2col, Im2Col, ConvColsArgs, T, S)                              \
  KILN_CONV_POOL_KERNEL(col2im, Col2ImAnyStride, ConvColsArgs, T, S)                              \
  KILN_CONV_POOL_KERNEL(max_pool2d_backward, MaxPoolBackward, PoolArgs, T, S)            \
  KILN_CONV_POOL_KERNEL(avg_pool2d, AvgPool, PoolArgs, T, S)                             \
  KILN_CONV_POOL_KERNEL(avg_pool2d_backward, AvgPoolBackward, PoolArgs, T, S)            \
  KILN_CONV_POOL_KERNEL(adaptive_avg_pool2d, AdaptiveAvgPool, PoolArgs, T, S)            \
  KILN_CONV_POOL_KERNEL(adaptive_avg_pool2d_backward, AdaptiveAvgPoolBackward, PoolArgs, T, S)
KILN_FOR_EACH_FLOATING(KILN_FLOATING_KERNELS)

#define KILN_MAX_POOL_KERNEL(T, S) KILN_CONV_POOL_KERNEL(max_pool2d, MaxPool, PoolArgs, T, S)
KILN_FOR_EACH_FLOATING(KILN_MAX_POOL_KERNEL)
KILN_MAX_POOL_KERNEL(uint8_t, u8)
KILN_MAX_POOL_KERNEL(int8_t, i8)
KILN_MAX_POOL_KERNEL(int16_t, i16)
KILN_MAX_POOL_KERNEL(int32_t, i32)
KILN_MAX_POOL_KERNEL(int64_t, i64)
