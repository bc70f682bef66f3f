// tensor/ops/conv_pool.cc: convolution (im2col + Gemm) and 2-D pooling (max, avg, adaptive avg).
//
// convolution handles 1-D and 2-D inputs, plain and transposed, with stride, padding, dilation
// and groups; 1-D runs as 2-D with a height of 1. Plain float32 convolutions run on oneDNN where
// it is loaded (conv_onednn.cc); otherwise, and for other dtypes, the plain form unfolds each image into a
// [C*kh*kw, oh*ow] column matrix (im2col, skipped for 1x1 stride-1 kernels) and multiplies each
// group's weights by it; the transposed form multiplies the transposed weights by the input and
// scatters the columns back into the image (col2im). Pooling kernels run one (batch, channel)
// plane per task. float16/bfloat16 convolutions compute in float32. Shape checks and messages
// follow PyTorch's ConvUtils.h and Pool.h; unsupported dtypes raise NotImplementedError like its
// dispatch macros. Integer convolutions use Gemm's plain loop. On CUDA each op calls its kernel in
// conv_pool_cuda.cc after the same checks.
#include <cmath>
#include <limits>

#include "tensor/memory_format.h"
#include "tensor/ops/conv_cudnn.h"
#include "tensor/ops/conv_onednn.h"
#include "tensor/ops/conv_pool.h"
#include "tensor/ops/gemm.h"

namespace kiln {
namespace {

using IntList = std::vector<int64_t>;
using SymList = std::vector<SymInt>;
using OptTensor = std::optional<Tensor>;

// The types convolution computes in: float16/bfloat16 run in float32.
#define KILN_CASES_CONV(...)                                                                 \
  KILN_CASE_TYPE(float, Float32, __VA_ARGS__) KILN_CASE_TYPE(double, Float64, __VA_ARGS__) \
  KILN_CASES_INTEGRAL(__VA_ARGS__)

std::string ListStr(const IntList& v) { return SizesToString(DimVector(v.begin(), v.end())); }

// A per-dimension parameter of length 1 (repeated) or `n`.
IntList ExpandParam(const char* name, const SymList& v, int64_t n) {
  KILN_CHECK(v.size() == 1 || static_cast<int64_t>(v.size()) == n, "expected ", name,
             " to be a single integer value or a list of ", n, " values to match the convolution dimensions, but got ",
             name, "=", SizesToString(SymDimVector(v.begin(), v.end())));
  IntList out(n);
  for (int64_t i = 0; i < n; ++i) out[i] = (v.size() == 1 ? v[0] : v[i]).expect_int();
  return out;
}

}  // namespace

// --- convolution -----------------------------------------------------------------------------------

ConvParams CheckConv(const Tensor& input, const Tensor& weight, const OptTensor& bias, const SymList& stride,
                     const SymList& padding, const SymList& dilation, bool transposed, const SymList& output_padding,
                     const SymInt& groups_sym) {
  KILN_CHECK(weight.dim() >= 3, "weight should have at least three dimensions");
  const int64_t wd = weight.dim(), dims = wd - 2;
  // PyTorch expands the per-dimension parameters before it compares the input's rank.
  ConvParams p{dims, ExpandParam("stride", stride, dims), ExpandParam("padding", padding, dims),
               ExpandParam("dilation", dilation, dims), ExpandParam("output_padding", output_padding, dims),
               transposed, groups_sym.expect_int()};
  KILN_CHECK(input.dim() == wd, "Expected ", wd, "-dimensional input for ", wd, "-dimensional weight ",
             ShapeStr(weight), ", but got ", input.dim(), "-dimensional input of size ", ShapeStr(input), " instead");
  KILN_CHECK_NOT_IMPLEMENTED(dims <= 2, "convolution: only 1-D and 2-D convolutions are implemented, got a ", dims,
                             "-D convolution (weight of size ", ShapeStr(weight), ")");
  for (int64_t d = 0; d < dims; ++d) {
    KILN_CHECK(p.stride[d] > 0, "non-positive stride is not supported");
    KILN_CHECK(p.padding[d] >= 0, "negative padding is not supported");
    KILN_CHECK(p.output_padding[d] >= 0, "negative output_padding is not supported");
    KILN_CHECK(p.dilation[d] > 0, "dilation should be greater than zero, but got ", ListStr(p.dilation));
  }
  if (transposed) {
    bool ok = true;
    std::string got;
    const char* names[2] = {dims == 2 ? "height" : "width", "width"};
    for (const auto& [what, v] : {std::pair<const char*, const IntList*>{"output_padding", &p.output_padding},
                                  {"stride", &p.stride}, {"dilation", &p.dilation}}) {
      for (int64_t d = 0; d < dims; ++d) got += StrCat(" ", what, "_", names[d], ": ", (*v)[d]);
    }
    for (int64_t d = 0; d < dims; ++d)
      ok = ok && (p.output_padding[d] < p.stride[d] || p.output_padding[d] < p.dilation[d]);
    KILN_CHECK(ok, "output padding must be smaller than either stride or dilation, but got", got);
  }
  const int64_t g = p.groups;
  KILN_CHECK(g > 0, "non-positive groups is not supported");
  KILN_CHECK(input.dtype() == weight.dtype(), "expected scalar type ", ScalarTypeDisplayName(input.dtype()),
             " but found ", ScalarTypeDisplayName(weight.dtype()));
  if (bias && bias->defined()) {
    KILN_CHECK(input.dtype() == bias->dtype(), "Input type (", CppTypeName(input.dtype()), ") and bias type (",
               CppTypeName(bias->dtype()), ") should be the same");
    CheckSameDevice("convolution", input, *bias);
  }
  CheckSameDevice("convolution", input, weight);
  KILN_CHECK_NOT_IMPLEMENTED(input.dtype() != ScalarType::Bool, "\"slow_conv2d_cpu\" not implemented for 'Bool'");
  const SymDimVector& in = input->sym_sizes();
  const SymDimVector& w = weight->sym_sizes();
  KILN_CHECK(w[0] >= g, "Given groups=", g, ", expected weight to be at least ", g,
             " at dimension 0, but got weight of size ", ShapeStr(weight), " instead");
  // (PyTorch prints this one's size in double brackets.)
  KILN_CHECK(w[0].mod(g) == 0, "Given groups=", g, ", expected weight to be divisible by ", g,
             " at dimension 0, but got weight of size [", ShapeStr(weight), "] instead");
  const SymInt out_channels = transposed ? w[1] * g : w[0];
  if (!transposed) {
    KILN_CHECK(in[1] == w[1] * g, "Given groups=", g, ", weight of size ", ShapeStr(weight), ", expected input",
               ShapeStr(input), " to have ", (w[1] * g).str(), " channels, but got ", in[1].str(),
               " channels instead");
  } else {
    KILN_CHECK(in[1] == w[0], "Given transposed=1, weight of size ", ShapeStr(weight), ", expected input",
               ShapeStr(input), " to have ", w[0].str(), " channels, but got ", in[1].str(), " channels instead");
  }
  if (bias && bias->defined()) {
    KILN_CHECK(bias->dim() == 1 && (*bias)->sym_sizes()[0] == out_channels, "Given ",
               transposed ? "transposed=1, " : "", "weight of size ", ShapeStr(weight),
               ", expected bias to be 1-dimensional with ", out_channels.str(), " elements, but got bias of size ",
               ShapeStr(*bias), " instead");
  }
  if (!transposed) {
    bool fits = true;
    std::string padded, kernel;
    for (int64_t d = 0; d < dims; ++d) {
      SymInt ip = in[d + 2] + 2 * p.padding[d];
      SymInt k = (w[d + 2] - 1) * p.dilation[d] + 1;
      fits = fits && ip >= k;
      padded += (d ? " x " : "") + ip.str();
      kernel += (d ? " x " : "") + k.str();
    }
    KILN_CHECK(fits, "Calculated padded input size per channel: (", padded, "). Kernel size: (", kernel,
               "). Kernel size can't be greater than actual input size");
  }
  return p;
}

Geom ConvGeom(const ConvParams& p, const Tensor& x, const Tensor& w, const Tensor& y) {
  const bool one_d = p.dims == 1;
  auto dim2 = [&](const IntList& v, int64_t i, int64_t one) { return one_d ? (i == 0 ? one : v[0]) : v[i]; };
  auto plane = [&](const Tensor& t, int64_t* h, int64_t* wd) {
    *h = one_d ? 1 : t.size(2);
    *wd = t.size(one_d ? 2 : 3);
  };
  Geom g{};
  int64_t xh, xw, yh, yw;
  plane(x, &xh, &xw);
  plane(y, &yh, &yw);
  plane(w, &g.kh, &g.kw);
  g.sh = dim2(p.stride, 0, 1), g.sw = dim2(p.stride, 1, 1);
  g.ph = dim2(p.padding, 0, 0), g.pw = dim2(p.padding, 1, 0);
  g.dh = dim2(p.dilation, 0, 1), g.dw = dim2(p.dilation, 1, 1);
  if (!p.transposed) {
    g.C = x.size(1), g.H = xh, g.W = xw, g.oh = yh, g.ow = yw;
  } else {
    g.C = y.size(1), g.H = yh, g.W = yw, g.oh = xh, g.ow = xw;
  }
  return g;
}

TensorMeta ConvolutionMeta(const Tensor& input, const Tensor& weight, const OptTensor& bias, const SymList& stride,
                           const SymList& padding, const SymList& dilation, bool transposed,
                           const SymList& output_padding, const SymInt& groups) {
  ConvParams p = CheckConv(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups);
  const SymDimVector& in = input->sym_sizes();
  const SymDimVector& w = weight->sym_sizes();
  SymDimVector sizes = {in[0], transposed ? w[1] * p.groups : w[0]};
  for (int64_t d = 0; d < p.dims; ++d) {
    SymInt k = w[d + 2];
    if (transposed) {
      sizes.push_back((in[d + 2] - 1) * p.stride[d] - 2 * p.padding[d] + (k - 1) * p.dilation[d] +
                      p.output_padding[d] + 1);
    } else {
      sizes.push_back((in[d + 2] + 2 * p.padding[d] - (k - 1) * p.dilation[d] - 1).floordiv(p.stride[d]) + 1);
    }
  }
  if (transposed) {  // PyTorch's message, a 1-D convolution spoken of as 2-D with a height of 1
    bool positive = true;
    std::string given = p.dims == 1 ? "1 x " : "", calculated = given;
    for (int64_t d = 0; d < p.dims; ++d) {
      positive = positive && sizes[d + 2] > 0;
      given += (d ? " x " : "") + in[d + 2].str();
      calculated += (d ? " x " : "") + sizes[d + 2].str();
    }
    KILN_CHECK(positive, "Given input size per channel: (", given, "). Calculated output size per channel: (",
               calculated, "). Output size is too small");
  }
  // a channels-last input or weight gives a channels-last result, as PyTorch's CPU convolution
  SymDimVector strides;
  if (sizes.size() == 4 && (SuggestsChannelsLast(input) || SuggestsChannelsLast(weight)))
    strides = ChannelsLastStrides(sizes);
  return TensorMeta{sizes, strides, input.dtype(), input.device()};
}

namespace {

// out[n, o, :] += bias[o]
template <typename T>
void AddBias(T* out, const T* bias, int64_t N, int64_t C, int64_t L) {
  ParallelFor(0, N * C, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(L, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const T v = bias[r % C];
      T* row = out + r * L;
      for (int64_t i = 0; i < L; ++i) row[i] += v;
    }
  });
}

// 2-D convolution on contiguous float/double tensors x [N,C,H,W], w, out (shapes from the meta).
template <typename T>
void Conv2dTyped(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& out, const Geom& g,
                 int64_t groups, bool transposed) {
  const int64_t N = x.size(0), O = out.size(1);
  const T* px = x.data_ptr<T>();
  const T* pw = w.data_ptr<T>();
  T* po = out.data_ptr<T>();
  if (!transposed) {
    // g describes image -> output: C = in channels, (H, W) input, (oh, ow) output. Batched im2col
    // (Note [Batched im2col]): one GEMM per group and block of samples, each task with its own
    // buffers (Note [Sample-parallel convolution]).
    const int64_t Cg = g.C / groups, Og = O / groups, K = Cg * g.kh * g.kw, L = g.oh * g.ow;
    const ConvBlocks plan = PlanConvBlocks(N, g.C * g.kh * g.kw, L, sizeof(T), Og * K * L);
    const int64_t cols_size = g.C * g.kh * g.kw * plan.block * L, prod_size = O * plan.block * L;
    Scratch<T> cols(plan.tasks * cols_size), prod(plan.tasks * prod_size);
    const T* pb = bias ? bias->data_ptr<T>() : nullptr;
    ForEachConvBlock(N, plan, [&](int64_t task, int64_t n0, int64_t nb) {
      T* c = cols.data() + task * cols_size;
      T* pr = prod.data() + task * prod_size;
      const int64_t cols_ld = nb * L;
      Im2ColBatch(px + n0 * g.C * g.H * g.W, nb, g, c);
      for (int64_t gi = 0; gi < groups; ++gi)
        Gemm<T>(false, false, Og, cols_ld, K, 1, pw + gi * Og * K, K, c + gi * K * cols_ld, cols_ld, 0,
                pr + gi * Og * cols_ld, cols_ld);
      ChannelMajorToBatch(pr, nb, O, L, pb, po + n0 * O * L);
    });
    return;
  } else {
    // g describes output image <- input grid: C = out channels, (H, W) output, (oh, ow) input.
    const int64_t Cin = x.size(1), Cg = Cin / groups, Og = O / groups, M = Og * g.kh * g.kw, L = g.oh * g.ow;
    std::vector<T> cols(O * g.kh * g.kw * L);
    std::fill(po, po + out.numel(), T(0));
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t gi = 0; gi < groups; ++gi) {
        Gemm<T>(true, false, M, L, Cg, 1, pw + gi * Cg * M, M, px + (n * Cin + gi * Cg) * L, L, 0,
                cols.data() + gi * M * L, L);
      }
      Col2Im(cols.data(), g, po + n * O * g.H * g.W);
    }
  }
  if (bias) AddBias(po, bias->data_ptr<T>(), N, O, out.numel() / std::max<int64_t>(N * O, 1));
}

Tensor ConvolutionKernel(const Tensor& input, const Tensor& weight, const OptTensor& bias, const SymList& stride,
                         const SymList& padding, const SymList& dilation, bool transposed,
                         const SymList& output_padding, const SymInt& groups) {
  TensorMeta m = ConvolutionMeta(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups);
  ConvParams p = CheckConv(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups);
  Tensor out = EmptyFromMeta(m);
  if (out.numel() == 0) return out;
  if (input.device().is_cuda()) {
    const Tensor* b = bias && bias->defined() ? &*bias : nullptr;
    // through cuDNN where it applies, in any layout (Note [cuDNN convolutions])
    if (!ConvolutionCudnn(input, weight, b, out, p)) ConvolutionCUDA(input, weight, b, out, p);
    return out;
  }
  const ScalarType compute = OpMathType(input.dtype());
  Tensor x = CastTo(input, compute), w = CastTo(weight, compute);
  Tensor b;
  if (bias && bias->defined()) b = ops::contiguous(CastTo(*bias, compute));
  // float32 through oneDNN where it applies, in any layout (Note [oneDNN convolutions])
  Tensor o = compute == out.dtype() ? out : EmptyTensor(out.sizes(), compute, out.device());
  if (ConvolutionOneDnn(x, w, b.defined() ? &b : nullptr, o, p)) {
    if (!o.is_same(out)) ops::copy_(out, o);
    return out;
  }
  x = ops::contiguous(x), w = ops::contiguous(w);
  // the kernels write row-major: a channels-last result is copied into place
  if (!o.is_contiguous()) o = EmptyTensor(out.sizes(), compute, out.device());
  const Geom g = ConvGeom(p, x, w, o);
  KILN_DISPATCH_SWITCH(compute, "convolution", KILN_CASES_CONV, [&] {
    Conv2dTyped<scalar_t>(x, w, b.defined() ? &b : nullptr, o, g, p.groups, transposed);
  });
  if (!o.is_same(out)) ops::copy_(out, o);
  return out;
}

// conv2d: batched [N,C,H,W] or unbatched [C,H,W] input, over convolution.
Tensor Conv2d(const Tensor& input, const Tensor& weight, const OptTensor& bias, const SymList& stride,
              const SymList& padding, const SymList& dilation, const SymInt& groups) {
  const int64_t nd = input.dim();
  KILN_CHECK(nd == 3 || nd == 4, "Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: ",
             ShapeStr(input));
  const bool batched = nd == 4;
  Tensor out = CallOp<Tensor>(KILN_OP("aten::convolution"), batched ? input : ops::unsqueeze(input, 0), weight,
                              bias, stride, padding, dilation, false, SymList{SymInt(0), SymInt(0)}, groups);
  return batched ? out : ops::squeeze(out, 0);
}

}  // namespace

// --- pooling -----------------------------------------------------------------------------------------

PoolParams ParsePool(const char* op, const IntList& kernel, const IntList& stride, const IntList& padding,
                     const IntList* dilation) {
  KILN_CHECK(kernel.size() == 1 || kernel.size() == 2, op,
             ": kernel_size must either be a single int, or a tuple of two ints");
  KILN_CHECK(stride.size() <= 2, op, ": stride must either be omitted, a single int, or a tuple of two ints");
  KILN_CHECK(padding.size() == 1 || padding.size() == 2, op,
             ": padding must either be a single int, or a tuple of two ints");
  if (dilation) {
    KILN_CHECK(dilation->size() == 1 || dilation->size() == 2, op,
               ": dilation must be either a single int, or a tuple of two ints");
  }
  auto second = [](const IntList& v) { return v.size() == 1 ? v[0] : v[1]; };
  PoolParams p;
  p.kh = kernel[0], p.kw = second(kernel);
  p.sh = stride.empty() ? p.kh : stride[0], p.sw = stride.empty() ? p.kw : second(stride);
  p.ph = padding[0], p.pw = second(padding);
  p.dh = dilation ? (*dilation)[0] : 1, p.dw = dilation ? second(*dilation) : 1;
  return p;
}

// PyTorch's pooling_output_shape (symmetric padding), with its checks.
static SymInt PoolOutSize(const SymInt& in, int64_t k, int64_t pad, int64_t stride, int64_t dil, bool ceil_mode) {
  KILN_CHECK(stride != 0, "stride should not be zero");
  KILN_CHECK(pad >= 0, "pad must be non-negative, but got pad: ", pad);
  KILN_CHECK(pad <= ((k - 1) * dil + 1) / 2, "pad should be at most half of effective kernel size, but got pad=", pad,
             ", kernel_size=", k, " and dilation=", dil);
  SymInt out = (in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0)).floordiv(stride) + 1;
  // The last window must start inside the input or the left padding.
  if (ceil_mode && (out - 1) * stride >= in + pad) out = out - 1;
  return out;
}

// The output sizes of a 2-D pooling, with PyTorch's checks in its order: the output shape of each
// dim, then pool2d_shape_check.
SymDimVector PoolShape(const Tensor& input, const PoolParams& p, bool ceil_mode) {
  const int64_t nd = input.dim();
  WrapDim(-3, nd);  // IndexError for 0-2 dims, as PyTorch's input.size(-3)
  const SymDimVector& s = input->sym_sizes();
  const SymInt &C = s[nd - 3], &H = s[nd - 2], &W = s[nd - 1];
  SymInt oh = PoolOutSize(H, p.kh, p.ph, p.sh, p.dh, ceil_mode);
  SymInt ow = PoolOutSize(W, p.kw, p.pw, p.sw, p.dw, ceil_mode);
  KILN_CHECK(p.kh > 0 && p.kw > 0, "kernel size should be greater than zero, but got kH: ", p.kh, " kW: ", p.kw);
  KILN_CHECK(p.sh > 0 && p.sw > 0, "stride should be greater than zero, but got dH: ", p.sh, " dW: ", p.sw);
  KILN_CHECK(p.dh > 0 && p.dw > 0, "dilation should be greater than zero, but got dilationH: ", p.dh,
             " dilationW: ", p.dw);
  const bool valid = (nd == 3 && s[0] != 0 && s[1] != 0 && s[2] != 0) ||
                     (nd == 4 && s[1] != 0 && s[2] != 0 && s[3] != 0);
  KILN_CHECK(valid, "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, but got:",
             ShapeStr(input));
  KILN_CHECK(p.kw / 2 >= p.pw && p.kh / 2 >= p.ph,
             "pad should be smaller than or equal to half of kernel size, but got padW = ", p.pw, ", padH = ", p.ph,
             ", kW = ", p.kw, ", kH = ", p.kh);
  KILN_CHECK(oh >= 1 && ow >= 1, "Given input size: (", C, "x", H, "x", W, "). Calculated output size: (", C, "x",
             oh, "x", ow, "). Output size is too small");
  SymDimVector out(s.begin(), s.end());
  out[nd - 2] = oh;
  out[nd - 1] = ow;
  return out;
}

namespace {

std::tuple<TensorMeta, TensorMeta> MaxPool2dWithIndicesMeta(const Tensor& self, const IntList& kernel_size,
                                                            const IntList& stride, const IntList& padding,
                                                            const IntList& dilation, bool ceil_mode) {
  PoolParams p = ParsePool("max_pool2d", kernel_size, stride, padding, &dilation);
  // PyTorch's max_pool2d_with_indices checks the rank before it reads input.size(-3).
  KILN_CHECK(self.dim() == 3 || self.dim() == 4, "non-empty 3D or 4D (batch mode) tensor expected for input");
  SymDimVector sizes = PoolShape(self, p, ceil_mode);
  KILN_CHECK_NOT_IMPLEMENTED(self.dtype() != ScalarType::Bool, "\"max_pool2d\" not implemented for 'Bool'");
  // a channels-last input gives channels-last results, as PyTorch's CPU kernel
  const SymDimVector strides =
      self.dim() == 4 && SuggestsChannelsLast(self) ? ChannelsLastStrides(sizes) : SymDimVector{};
  return {TensorMeta{sizes, strides, self.dtype(), self.device()},
          TensorMeta{sizes, strides, ScalarType::Int64, self.device()}};
}

// The window of output position o along one dim: input positions [lo, hi) in steps of the
// dilation, lo the first inside the input (padding skipped).
struct PoolWindow {
  int64_t lo, hi;
};
PoolWindow WindowOf(int64_t o, int64_t stride, int64_t pad, int64_t k, int64_t dil, int64_t size) {
  int64_t lo = o * stride - pad;
  const int64_t hi = std::min(lo + (k - 1) * dil + 1, size);
  while (lo < 0) lo += dil;
  return {lo, hi};
}

// Channels-last max pooling: x, out and indices dense in (N, H, W, C) order. Each output position
// takes the maximum over its window for all C channels at once, with the same window order, NaN
// rule and plane indices as the planar kernel below. The winner is tracked as its window slot in
// an integer as wide as the value, so the compare-and-select loop vectorises (a float with an
// int64 index would not); slots become plane indices once per window.
template <typename T>
void MaxPoolChannelsLast(const Tensor& x, const Tensor& out, const Tensor& indices, const PoolParams& p) {
  using M = opmath_t<T>;
  using Slot = std::conditional_t<sizeof(M) == 8, int64_t, int32_t>;
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), oh = out.size(2), ow = out.size(3);
  const T* in = x.data_ptr<T>();
  T* po = out.data_ptr<T>();
  int64_t* pi = indices.data_ptr<int64_t>();
  const M lowest = std::numeric_limits<M>::has_infinity ? -std::numeric_limits<M>::infinity()
                                                        : std::numeric_limits<M>::lowest();
  ParallelFor(0, N * oh, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(ow * C * p.kh * p.kw, 1)),
              [&](int64_t b, int64_t e) {
    std::vector<M> best(C);
    std::vector<Slot> slot(C);
    std::vector<int64_t> at;  // the plane index of each window slot
    for (int64_t row = b; row < e; ++row) {
      const int64_t n = row / oh, y = row % oh;
      const auto [h0, h1] = WindowOf(y, p.sh, p.ph, p.kh, p.dh, H);
      for (int64_t xo = 0; xo < ow; ++xo) {
        const auto [w0, w1] = WindowOf(xo, p.sw, p.pw, p.kw, p.dw, W);
        M* bp = best.data();
        Slot* sp = slot.data();
        std::fill(bp, bp + C, lowest);
        std::fill(sp, sp + C, Slot(0));
        at.assign(1, h0 * W + w0);  // slot 0: the first in-window position, as the planar kernel
        for (int64_t iy = h0; iy < h1; iy += p.dh) {
          for (int64_t ix = w0; ix < w1; ix += p.dw) {
            const T* src = in + ((n * H + iy) * W + ix) * C;
            const Slot k = static_cast<Slot>(at.size());
            at.push_back(iy * W + ix);
            for (int64_t c = 0; c < C; ++c) {
              const M v = static_cast<M>(src[c]);
              const bool take = v > bp[c] || v != v;  // v != v: NaN wins, as std::isnan below
              bp[c] = take ? v : bp[c];
              sp[c] = take ? k : sp[c];
            }
          }
        }
        T* dst = po + ((n * oh + y) * ow + xo) * C;
        int64_t* di = pi + ((n * oh + y) * ow + xo) * C;
        for (int64_t c = 0; c < C; ++c) dst[c] = static_cast<T>(bp[c]), di[c] = at[sp[c]];
      }
    }
  });
}

template <typename T>
void MaxPoolTyped(const Tensor& x, const Tensor& out, const Tensor& indices, const PoolParams& p) {
  using M = opmath_t<T>;
  const int64_t H = x.size(-2), W = x.size(-1), oh = out.size(-2), ow = out.size(-1);
  const T* in = x.data_ptr<T>();
  T* po = out.data_ptr<T>();
  int64_t* pi = indices.data_ptr<int64_t>();
  const M lowest = std::numeric_limits<M>::has_infinity ? -std::numeric_limits<M>::infinity()
                                                        : std::numeric_limits<M>::lowest();
  ForEachPlane(x, oh * ow * p.kh * p.kw, [&](int64_t pl) {
    const T* src = in + pl * H * W;
    T* dst = po + pl * oh * ow;
    int64_t* di = pi + pl * oh * ow;
    for (int64_t y = 0; y < oh; ++y) {
      const auto [h0, h1] = WindowOf(y, p.sh, p.ph, p.kh, p.dh, H);
      for (int64_t xo = 0; xo < ow; ++xo) {
        const auto [w0, w1] = WindowOf(xo, p.sw, p.pw, p.kw, p.dw, W);
        int64_t best = h0 * W + w0;
        M best_v = lowest;
        for (int64_t iy = h0; iy < h1; iy += p.dh) {
          for (int64_t ix = w0; ix < w1; ix += p.dw) {
            const M v = static_cast<M>(src[iy * W + ix]);
            bool nan = false;
            if constexpr (!std::is_integral_v<M>) nan = std::isnan(v);
            if (v > best_v || nan) {
              best_v = v;
              best = iy * W + ix;
            }
          }
        }
        dst[y * ow + xo] = static_cast<T>(best_v);
        di[y * ow + xo] = best;
      }
    }
  });
}

std::tuple<Tensor, Tensor> MaxPool2dWithIndicesKernel(const Tensor& self, const IntList& kernel_size,
                                                   const IntList& stride, const IntList& padding,
                                                   const IntList& dilation, bool ceil_mode) {
  auto [om, im] = MaxPool2dWithIndicesMeta(self, kernel_size, stride, padding, dilation, ceil_mode);
  PoolParams p = ParsePool("max_pool2d", kernel_size, stride, padding, &dilation);
  Tensor out = EmptyFromMeta(om), indices = EmptyFromMeta(im);
  if (out.numel() == 0) return {out, indices};
  // Channels-last: when the meta chose it, and for planar batches of 8 or more channels too, whose
  // window loop vectorises only across channels (16x64x32x32, 3x3 stride 2: 5.5 ms planar, 0.4
  // channels-last plus 0.5 for the copies in and out, one thread).
  if (self.device().is_cpu() && self.dim() == 4 && (!out.is_contiguous() || self.size(1) >= 8)) {
    Tensor x = ChannelsLastCopy(self);
    const bool direct = !out.is_contiguous();
    const SymDimVector strides = ChannelsLastStrides(out->sym_sizes());
    Tensor o = direct ? out : EmptyTensor(out->sym_sizes(), out.dtype(), out.device(), strides);
    Tensor oi = direct ? indices : EmptyTensor(out->sym_sizes(), ScalarType::Int64, out.device(), strides);
    KILN_DISPATCH_NUMERIC(self.dtype(), "max_pool2d", [&] { MaxPoolChannelsLast<scalar_t>(x, o, oi, p); });
    if (!o.is_same(out)) ops::copy_(out, o), ops::copy_(indices, oi);
    return {out, indices};
  }
  // the planar kernels write row-major; a channels-last result on CUDA is copied into place
  Tensor o = out.is_contiguous() ? out : EmptyTensor(out.sizes(), out.dtype(), out.device());
  Tensor oi = indices.is_contiguous() ? indices : EmptyTensor(indices.sizes(), indices.dtype(), indices.device());
  if (self.device().is_cuda()) {
    MaxPool2dCUDA(self, p, o, oi);
  } else {
    Tensor x = ops::contiguous(self);
    KILN_DISPATCH_NUMERIC(self.dtype(), "max_pool2d", [&] { MaxPoolTyped<scalar_t>(x, o, oi, p); });
  }
  if (!o.is_same(out)) ops::copy_(out, o), ops::copy_(indices, oi);
  return {out, indices};
}

Tensor MaxPool2d(const Tensor& self, const IntList& kernel_size, const IntList& stride, const IntList& padding,
                 const IntList& dilation, bool ceil_mode) {
  KILN_CHECK(self.dim() == 3 || self.dim() == 4, "non-empty 3D or 4D (batch mode) tensor expected for input");
  auto result = CallOp<std::tuple<Tensor, Tensor>>(KILN_OP("aten::max_pool2d_with_indices"), self, kernel_size,
                                                   stride, padding, dilation, ceil_mode);
  return std::get<0>(result);
}

void CheckAvgPoolDtype(ScalarType t) {
  KILN_CHECK_NOT_IMPLEMENTED(IsFloating(t) || t == ScalarType::Int64, "\"avg_pool2d\" not implemented for '",
                             ScalarTypeDisplayName(t), "'");
}

TensorMeta AvgPool2dMeta(const Tensor& self, const IntList& kernel_size, const IntList& stride,
                         const IntList& padding, bool ceil_mode, bool count_include_pad,
                         std::optional<int64_t> divisor_override) {
  (void)count_include_pad;
  KILN_CHECK(!divisor_override || *divisor_override != 0, "divisor must be not zero");
  PoolParams p = ParsePool("avg_pool2d", kernel_size, stride, padding, nullptr);
  SymDimVector sizes = PoolShape(self, p, ceil_mode);
  CheckAvgPoolDtype(self.dtype());
  return TensorMeta{sizes, {}, self.dtype(), self.device()};
}

template <typename T>
void AvgPoolTyped(const Tensor& x, const Tensor& out, const PoolParams& p, bool count_include_pad,
                  std::optional<int64_t> divisor) {
  using M = opmath_t<T>;
  const int64_t H = x.size(-2), W = x.size(-1), oh = out.size(-2), ow = out.size(-1);
  const T* in = x.data_ptr<T>();
  T* po = out.data_ptr<T>();
  ForEachPlane(x, oh * ow * p.kh * p.kw, [&](int64_t pl) {
    const T* src = in + pl * H * W;
    T* dst = po + pl * oh * ow;
    for (int64_t y = 0; y < oh; ++y) {
      for (int64_t xo = 0; xo < ow; ++xo) {
        int64_t h0 = y * p.sh - p.ph, w0 = xo * p.sw - p.pw;
        int64_t h1 = std::min(h0 + p.kh, H + p.ph), w1 = std::min(w0 + p.kw, W + p.pw);
        const int64_t pool_size = (h1 - h0) * (w1 - w0);
        h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0);
        h1 = std::min(h1, H), w1 = std::min(w1, W);
        if (h0 >= h1 || w0 >= w1) {
          dst[y * ow + xo] = T(0);
          continue;
        }
        M sum = 0;
        for (int64_t iy = h0; iy < h1; ++iy)
          for (int64_t ix = w0; ix < w1; ++ix) sum += static_cast<M>(src[iy * W + ix]);
        const int64_t div = divisor ? *divisor : count_include_pad ? pool_size : (h1 - h0) * (w1 - w0);
        dst[y * ow + xo] = static_cast<T>(sum / static_cast<M>(div));
      }
    }
  });
}

Tensor AvgPool2dKernel(const Tensor& self, const IntList& kernel_size, const IntList& stride, const IntList& padding,
                    bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override) {
  Tensor out = EmptyFromMeta(
      AvgPool2dMeta(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override));
  if (out.numel() == 0) return out;
  PoolParams p = ParsePool("avg_pool2d", kernel_size, stride, padding, nullptr);
  if (self.device().is_cuda()) {
    AvgPool2dCUDA(self, p, count_include_pad, divisor_override, out);
    return out;
  }
  Tensor x = ops::contiguous(self);
  KILN_DISPATCH_NUMERIC(self.dtype(), "avg_pool2d", [&] {
    AvgPoolTyped<scalar_t>(x, out, p, count_include_pad, divisor_override);
  });
  return out;
}

TensorMeta AdaptiveAvgPool2dMeta(const Tensor& self, const SymList& output_size) {
  KILN_CHECK(output_size.size() == 2, "adaptive_avg_pool2d: output_size must be 2");
  KILN_CHECK(output_size[0] >= 0 && output_size[1] >= 0,
             "adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0 but received {",
             output_size[0], ", ", output_size[1], "}");
  const int64_t nd = self.dim();
  KILN_CHECK(nd == 3 || nd == 4, "adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got ", ShapeStr(self));
  for (int64_t d = 1; d < nd; ++d) {
    KILN_CHECK(self->sym_sizes()[d] != 0, "adaptive_avg_pool2d(): Expected input to have non-zero size for "
               "non-batch dimensions, but input has sizes ", ShapeStr(self), " with dimension ", d, " being empty");
  }
  SymDimVector sizes = self->sym_sizes();
  sizes[nd - 2] = output_size[0];
  sizes[nd - 1] = output_size[1];
  return TensorMeta{sizes, {}, self.dtype(), self.device()};
}

template <typename T>
void AdaptiveAvgPoolTyped(const Tensor& x, const Tensor& out) {
  using M = opmath_t<T>;
  const int64_t H = x.size(-2), W = x.size(-1), oh = out.size(-2), ow = out.size(-1);
  const T* in = x.data_ptr<T>();
  T* po = out.data_ptr<T>();
  ForEachPlane(x, H * W + oh * ow, [&](int64_t pl) {
    const T* src = in + pl * H * W;
    T* dst = po + pl * oh * ow;
    for (int64_t y = 0; y < oh; ++y) {
      const int64_t h0 = (y * H) / oh, h1 = ((y + 1) * H + oh - 1) / oh;
      for (int64_t xo = 0; xo < ow; ++xo) {
        const int64_t w0 = (xo * W) / ow, w1 = ((xo + 1) * W + ow - 1) / ow;
        M sum = 0;
        for (int64_t iy = h0; iy < h1; ++iy)
          for (int64_t ix = w0; ix < w1; ++ix) sum += static_cast<M>(src[iy * W + ix]);
        dst[y * ow + xo] = static_cast<T>(sum / static_cast<M>((h1 - h0) * (w1 - w0)));
      }
    }
  });
}

Tensor AdaptiveAvgPool2dKernel(const Tensor& self, const SymList& output_size) {
  Tensor out = EmptyFromMeta(AdaptiveAvgPool2dMeta(self, output_size));
  if (out.numel() == 0) return out;  // any dtype: PyTorch dispatches on the dtype only when there is work
  KILN_CHECK_NOT_IMPLEMENTED(IsFloating(self.dtype()), "\"adaptive_avg_pool2d\" not implemented for '",
                             ScalarTypeDisplayName(self.dtype()), "'");
  if (self.device().is_cuda()) {
    AdaptiveAvgPool2dCUDA(self, out);
    return out;
  }
  Tensor x = ops::contiguous(self);
  KILN_DISPATCH_FLOATING(self.dtype(), "adaptive_avg_pool2d", [&] { AdaptiveAvgPoolTyped<scalar_t>(x, out); });
  return out;
}

// adaptive_avg_pool2d: a mean over H and W for a 1x1 output, else _adaptive_avg_pool2d.
Tensor AdaptiveAvgPool2d(const Tensor& self, const SymList& output_size) {
  KILN_CHECK(output_size.size() == 2, "adaptive_avg_pool2d: output_size must be 2");
  KILN_CHECK(output_size[0] >= 0 && output_size[1] >= 0,
             "adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0 but received {",
             output_size[0], ", ", output_size[1], "}");
  if (output_size[0] == 1 && output_size[1] == 1) {
    return CallOp<Tensor>(KILN_OP("aten::mean.dim"), self, std::optional<IntList>(IntList{-1, -2}), true,
                          std::optional<ScalarType>());
  }
  return CallOp<Tensor>(KILN_OP("aten::_adaptive_avg_pool2d"), self, output_size);
}

}  // namespace

void RegisterConvPoolOps(Registry& r) {
  r.Def("convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, "
        "SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor",
        {Tag::core, Tag::compute_intensive}, kFunction)
      .CPUAndCUDA<&ConvolutionKernel>().Meta<&ConvolutionMeta>();
  r.Def("conv2d(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=1, SymInt[2] padding=0, "
        "SymInt[2] dilation=1, SymInt groups=1) -> Tensor", {Tag::compute_intensive}, kFunction)
      .Composite<&Conv2d>();
  r.Def("max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, "
        "int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)", {Tag::core}, kFunction)
      .CPUAndCUDA<&MaxPool2dWithIndicesKernel>().Meta<&MaxPool2dWithIndicesMeta>();
  r.Def("max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1, "
        "bool ceil_mode=False) -> Tensor", {}, kFunction)
      .Composite<&MaxPool2d>();
  r.Def("avg_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, bool ceil_mode=False, "
        "bool count_include_pad=True, int? divisor_override=None) -> Tensor", {Tag::core}, kFunction)
      .CPUAndCUDA<&AvgPool2dKernel>().Meta<&AvgPool2dMeta>();
  r.Def("_adaptive_avg_pool2d(Tensor self, SymInt[2] output_size) -> Tensor", {Tag::core}, kFunction)
      .CPUAndCUDA<&AdaptiveAvgPool2dKernel>().Meta<&AdaptiveAvgPool2dMeta>();
  r.Def("adaptive_avg_pool2d(Tensor self, SymInt[2] output_size) -> Tensor", {}, kFunction)
      .Composite<&AdaptiveAvgPool2d>();
}

}  // namespace kiln
