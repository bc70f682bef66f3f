// tensor/ops/reduce.cc: reductions over any set of dims (sum, mean, ...).
//
// ReduceIter views the input as [kept dims..., reduced dims...]; each output element is reduced
// independently (in parallel over outputs), with a contiguous fast path when the reduced
// elements of an output form one run, and rows added into column accumulators when the reduced dims
// are outer to kept ones (Note [Outer sums]). Float sums accumulate in double (acc_t), so 16M-element
// float32 sums stay exact to float precision, over runs of float partial sums where that is
// what keeps the loop vectorised (SumRun; Note [Outer sums in float]).
#include <algorithm>

#include "tensor/ops/common.h"
#include "tensor/ops/reduce_cuda.h"
#include "tensor/ops/reduce_utils.h"

namespace kiln {
namespace {

ScalarType SumResultType(ScalarType in, std::optional<ScalarType> dtype) {
  if (dtype) return *dtype;
  return IsIntegral(in, /*include_bool=*/true) ? ScalarType::Int64 : in;
}

TensorMeta ReduceMeta(const char* op, const Tensor& self, const OptDims& dims, bool keepdim, ScalarType out) {
  std::vector<bool> mask = ReduceMask(op, dims, self.dim());
  return TensorMeta{ReducedSizes(self, mask, keepdim), {}, out, self.device()};
}

// Sum of a contiguous run. Float types add 64 lanes in their own precision within blocks of 16384
// elements (vectorised), and the block sums in acc_t (double), so long runs keep float32 sums
// accurate without paying for double arithmetic per element.
template <typename In>
acc_t<In> SumRun(const In* x, int64_t n) {
  using Acc = acc_t<In>;
  if constexpr (std::is_same_v<In, float> || std::is_same_v<In, double>) {
    constexpr int kLanes = 64;  // 8 AVX2 accumulators: enough independent adds to hide latency
    constexpr int64_t kBlock = 16384;
    Acc total = 0;
    for (int64_t b = 0; b < n; b += kBlock) {
      const int64_t e = std::min(n, b + kBlock);
      In lanes[kLanes] = {};
      int64_t i = b;
      for (; i + kLanes <= e; i += kLanes)
        for (int j = 0; j < kLanes; ++j) lanes[j] += x[i + j];
      In tail = 0;
      for (; i < e; ++i) tail += x[i];
      for (int w = kLanes / 2; w > 0; w /= 2)
        for (int j = 0; j < w; ++j) lanes[j] += lanes[j + w];
      total += static_cast<Acc>(lanes[0]) + static_cast<Acc>(tail);
    }
    return total;
  } else {
    Acc a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
      a0 += static_cast<Acc>(x[i]);
      a1 += static_cast<Acc>(x[i + 1]);
      a2 += static_cast<Acc>(x[i + 2]);
      a3 += static_cast<Acc>(x[i + 3]);
    }
    for (; i < n; ++i) a0 += static_cast<Acc>(x[i]);
    return (a0 + a1) + (a2 + a3);
  }
}

// out[o] = sum of the reduced elements of output o, computed in acc_t of the input type.
template <typename In, typename Out>
void SumKernel(const Tensor& input, const std::vector<bool>& mask, const Tensor& out, double scale) {
  using Acc = acc_t<In>;
  ReduceIter iter(input, mask);
  Out* dst = out.data_ptr<Out>();
  const int64_t work_per_output = std::max<int64_t>(iter.reduce_size(), 1);
  ParallelFor(0, iter.num_outputs(), std::max<int64_t>(1, kGrainSize / work_per_output), [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      Acc total = 0;
      iter.ForEachRun(o, [&](const char* p, int64_t n, int64_t stride) {
        if (stride == sizeof(In)) {
          total += SumRun(reinterpret_cast<const In*>(p), n);
        } else {
          for (int64_t i = 0; i < n; ++i) total += static_cast<Acc>(detail::Load<In>(p + i * stride));
        }
      });
      if (scale != 1.0) total = static_cast<Acc>(total * scale);
      dst[o] = static_cast<Out>(static_cast<opmath_t<Out>>(total));
    }
  });
}

// Note [Outer sums in float]: float32 columns are summed in float over groups of 16 rows -- four
// rows at a time, (a + b) + (c + d), into a partial kept in registers for a tile of 32 columns --
// and each group's partial is added into a double accumulator per column. Converting every element
// to double (8 lanes a vector instead of 16, the accumulators loaded and stored once per row) made
// g.sum(0) of 1024x1024 1.46x PyTorch's time; this is PyTorch's speed (it sums in float, by a
// cascade), and the error stays that of summing 16 floats, not 1024 or a million: within 1.7 ulp
// where PyTorch's reaches 2.3-2.7 (tests/test_reduce_ops.py). Partials over a 512-column array
// in memory instead of registers were 10-15% slower; groups of 64 rows ~5% faster but 2.7 ulp off
// on 200 rows. A column's sum does not depend on which task or tile holds it (the order is the
// rows', in groups), so results are the same at any thread count. Other types add each row in
// acc_t, r ascending, as the per-output path does.
constexpr int64_t kOuterRowGroup = 16;
constexpr int64_t kOuterTile = 32;

// acc[j] += the float sum of `rows` rows (at most a group) of W columns starting at p.
template <int W>
[[gnu::always_inline]] inline void AddFloatRowGroup(const float* p, int64_t K, int64_t rows, double* acc) {
  float part[W] = {};
  int64_t q = 0;
  for (; q + 4 <= rows; q += 4, p += 4 * K)
    for (int j = 0; j < W; ++j) part[j] += (p[j] + p[K + j]) + (p[2 * K + j] + p[3 * K + j]);
  for (; q < rows; ++q, p += K)
    for (int j = 0; j < W; ++j) part[j] += p[j];
  for (int j = 0; j < W; ++j) acc[j] += static_cast<double>(part[j]);
}

// acc[j] += column j's sum over `rows` rows of n columns, rows K apart.
template <typename In, typename Acc>
void AddRows(const In* x, int64_t K, int64_t rows, int64_t n, Acc* acc) {
  if constexpr (std::is_same_v<In, float>) {
    const auto group = [&](const float* base, int64_t g) {  // inlined twice: g a constant 16, or the rest
      int64_t c = 0;
      for (; c + kOuterTile <= n; c += kOuterTile) AddFloatRowGroup<kOuterTile>(base + c, K, g, acc + c);
      for (; c + 8 <= n; c += 8) AddFloatRowGroup<8>(base + c, K, g, acc + c);
      for (; c < n; ++c) AddFloatRowGroup<1>(base + c, K, g, acc + c);
    };
    int64_t r = 0;
    for (; r + kOuterRowGroup <= rows; r += kOuterRowGroup) group(x + r * K, kOuterRowGroup);
    if (r < rows) group(x + r * K, rows - r);
  } else {
    for (int64_t r = 0; r < rows; ++r, x += K)
      for (int64_t j = 0; j < n; ++j) acc[j] += static_cast<Acc>(x[j]);
  }
}

template <typename In, typename Out>
void OuterSumKernel(const Tensor& input, const OuterShape& s, const Tensor& out, double scale) {
  using Acc = acc_t<In>;
  // columns a task sums: up to 1024 (8 KiB of double accumulators, in L1; longer runs down each
  // row read faster than 512), fewer where that leaves a thread without a task
  constexpr int64_t kMaxCols = 1024;
  const int64_t slices = std::max<int64_t>(s.P, 1), tasks_per_slice = (GetNumThreads() + slices - 1) / slices;
  const int64_t cols = std::clamp<int64_t>(
      ((s.K + tasks_per_slice - 1) / tasks_per_slice + kOuterTile - 1) / kOuterTile * kOuterTile, kOuterTile, kMaxCols);
  const In* x = input.data_ptr<In>();
  Out* dst = out.data_ptr<Out>();
  const int64_t blocks = (s.K + cols - 1) / cols;
  ParallelFor(0, s.P * blocks, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(s.R * cols, 1)),
              [&](int64_t b, int64_t e) {
    Acc acc[kMaxCols];
    for (int64_t t = b; t < e; ++t) {
      const int64_t p = t / blocks, k0 = (t % blocks) * cols, n = std::min(cols, s.K - k0);
      std::fill(acc, acc + n, Acc(0));
      AddRows(x + p * s.R * s.K + k0, s.K, s.R, n, acc);
      Out* o = dst + p * s.K + k0;
      for (int64_t j = 0; j < n; ++j) {
        const Acc v = scale != 1.0 ? static_cast<Acc>(acc[j] * scale) : acc[j];
        o[j] = static_cast<Out>(static_cast<opmath_t<Out>>(v));
      }
    }
  });
}

// Sums large contiguous inputs in parallel over the reduced run itself (one output).
template <typename In>
acc_t<In> SumContiguousParallel(const In* x, int64_t n) {
  using Acc = acc_t<In>;
  const int threads = GetNumThreads();
  std::vector<Acc> partial(threads, 0);
  const int64_t per = (n + threads - 1) / threads;
  ParallelFor(0, threads, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      int64_t lo = std::min(n, t * per), hi = std::min(n, lo + per);
      partial[t] = SumRun(x + lo, hi - lo);
    }
  });
  Acc total = 0;
  for (Acc p : partial) total += p;
  return total;
}

Tensor SumImpl(const char* op, const Tensor& self, const OptDims& dims, bool keepdim, std::optional<ScalarType> dtype,
               bool mean) {
  ScalarType out_type = SumResultType(self.dtype(), dtype);
  if (mean) {
    KILN_CHECK(IsFloating(out_type) || IsComplex(out_type), "mean(): could not infer output dtype. Input dtype must be either a floating "
               "point or complex dtype. Got: ", ScalarTypeDisplayName(self.dtype()));
  }
  std::vector<bool> mask = ReduceMask(op, dims, self.dim());
  Tensor out = EmptyFromMeta(TensorMeta{ReducedSizes(self, mask, keepdim), {}, out_type, self.device()});
  Tensor input = dtype && *dtype != self.dtype() ? CastTo(self, *dtype) : self;
  int64_t count = 1;
  for (size_t d = 0; d < mask.size(); ++d) if (mask[d]) count *= self.size(d);
  double scale = mean ? (count == 0 ? std::numeric_limits<double>::quiet_NaN() : 1.0 / count) : 1.0;
  if (input.device().is_cuda()) {
    SumCUDA(input, mask, out, scale);
    return out;
  }
  if (IsComplex(input.dtype()) || IsComplex(out_type)) {  // complex sums: in complex128, into the input's type
    KILN_CHECK(input.dtype() == out_type, op, "(): a complex sum into ", ScalarTypeDisplayName(out_type),
               " needs dtype=", ScalarTypeName(out_type), " input; got ", ScalarTypeDisplayName(input.dtype()));
    KILN_DISPATCH_COMPLEX(input.dtype(), op, [&] { SumKernel<scalar_t, scalar_t>(input, mask, out, scale); });
    return out;
  }
  // Note [A mean as PyTorch's]: PyTorch's CPU mean is sum(...).div_(n): the sum rounded to the
  // output dtype (float32 for float16/bfloat16, cast at the end), then divided in it. The sum
  // scaled by 1 / n in double and rounded once differed in the last bit: mean() of an expanded
  // float32 value was that value, where PyTorch's is 3 * v rounded, over 3 (an ulp below v), and
  // floor(mean / x) was 1, not 0 (fuzz seed 981, program 2376).
  if (mean && IsReducedFloat(out_type)) {
    Tensor in_float = CastTo(input, ScalarType::Float32);
    return CastTo(SumImpl(op, in_float, dims, keepdim, std::nullopt, true), out_type);
  }
  if (mean) scale = 1.0;
  if (out.numel() == 1 && input.is_contiguous() && input.numel() >= 4 * kGrainSize) {
    KILN_DISPATCH_ALL(input.dtype(), op, [&] {
      using In = scalar_t;
      auto total = SumContiguousParallel(input.data_ptr<In>(), input.numel());
      KILN_DISPATCH_ALL(out_type, op, [&] {
        out.data_ptr<scalar_t>()[0] = static_cast<scalar_t>(static_cast<opmath_t<scalar_t>>(total * scale));
      });
    });
  } else {
    const std::optional<OuterShape> outer = AsOuterSum(input, mask);  // Note [Outer sums]
    KILN_DISPATCH_ALL(input.dtype(), op, [&] {
      using In = scalar_t;
      KILN_DISPATCH_ALL(out_type, op, [&] {
        if (outer) OuterSumKernel<In, scalar_t>(input, *outer, out, scale);
        else SumKernel<In, scalar_t>(input, mask, out, scale);
      });
    });
  }
  if (mean) {
    KILN_DISPATCH_FLOATING(out_type, op, [&] {
      using Op = opmath_t<scalar_t>;
      scalar_t* p = out.data_ptr<scalar_t>();
      const Op n = static_cast<Op>(count);
      for (int64_t i = 0, e = out.numel(); i < e; ++i) p[i] = static_cast<scalar_t>(static_cast<Op>(p[i]) / n);
    });
  }
  return out;
}

Tensor SumDim(const Tensor& self, OptDims dims, bool keepdim, std::optional<ScalarType> dtype) {
  return SumImpl("sum", self, dims, keepdim, dtype, false);
}
TensorMeta SumDimMeta(const Tensor& self, OptDims dims, bool keepdim, std::optional<ScalarType> dtype) {
  return ReduceMeta("sum", self, dims, keepdim, SumResultType(self.dtype(), dtype));
}
// sum() and mean() of the whole tensor are ops of their own (PyTorch's CompositeExplicitAutograd
// kernels), so traced graphs record aten.sum.default for x.sum(), as PyTorch's do; their
// decompositions (kiln._decomp) turn them into the dim overloads for the core op set.
Tensor SumAll(const Tensor& self, std::optional<ScalarType> dtype) { return SumDim(self, std::nullopt, false, dtype); }
TensorMeta SumAllMeta(const Tensor& self, std::optional<ScalarType> dtype) {
  return SumDimMeta(self, std::nullopt, false, dtype);
}
Tensor MeanDim(const Tensor& self, OptDims dims, bool keepdim, std::optional<ScalarType> dtype) {
  return SumImpl("mean", self, dims, keepdim, dtype, true);
}
TensorMeta MeanDimMeta(const Tensor& self, OptDims dims, bool keepdim, std::optional<ScalarType> dtype) {
  ScalarType out = SumResultType(self.dtype(), dtype);
  KILN_CHECK(IsFloating(out) || IsComplex(out), "mean(): could not infer output dtype. Input dtype must be either a floating "
             "point or complex dtype. Got: ", ScalarTypeDisplayName(self.dtype()));
  return ReduceMeta("mean", self, dims, keepdim, out);
}
Tensor MeanAll(const Tensor& self, std::optional<ScalarType> dtype) {
  return MeanDim(self, std::nullopt, false, dtype);
}
TensorMeta MeanAllMeta(const Tensor& self, std::optional<ScalarType> dtype) {
  return MeanDimMeta(self, std::nullopt, false, dtype);
}

}  // namespace

void RegisterReduceOps(Registry& r) {
  std::initializer_list<Tag> tags = {Tag::reduction, Tag::core};
  r.Def("sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor", tags,
        kFunctionAndMethod)
      .CPUAndCUDA<&SumDim>().Meta<&SumDimMeta>().OuterReductionKernel();
  r.Def("sum(Tensor self, *, ScalarType? dtype=None) -> Tensor", {Tag::reduction}, kFunctionAndMethod)
      .CPUAndCUDA<&SumAll>().Meta<&SumAllMeta>();
  r.Def("mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor", tags,
        kFunctionAndMethod)
      .CPUAndCUDA<&MeanDim>().Meta<&MeanDimMeta>().OuterReductionKernel();
  r.Def("mean(Tensor self, *, ScalarType? dtype=None) -> Tensor", {Tag::reduction}, kFunctionAndMethod)
      .CPUAndCUDA<&MeanAll>().Meta<&MeanAllMeta>();
}

}  // namespace kiln
