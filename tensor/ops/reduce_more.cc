// tensor/ops/reduce_more.cc: order and logical reductions (prod, amax/amin, max/min with indices,
// argmax/argmin, any/all, count_nonzero).
//
// Every op here is a meta function (sizes over SymInt, the empty-input checks PyTorch makes) plus
// a CPU kernel on ForEachOutput (reduce_utils.h). max/min/amax/amin propagate NaN: the first NaN
// met wins, and its index is reported. Ties report the first index, as PyTorch's CPU kernels do.
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstring>

#include "tensor/dim_order.h"
#include "tensor/ops/reduce_cuda.h"
#include "tensor/ops/reduce_utils.h"
#include "tensor/ops/scalar_t_math.h"

namespace kiln {

void ZeroNumelCheckDim(const char* fn, const Tensor& self, int64_t dim) {
  if (self.dim() == 0) {
    KILN_CHECK_INDEX(dim == 0 || dim == -1, fn, ": Expected reduction dim -1 or 0 for scalar but got ", dim);
    return;
  }
  KILN_CHECK_INDEX(!(self->sym_sizes()[WrapDim(dim, self.dim())] == SymInt(0)), fn, ": Expected reduction dim ",
                   dim, " to have non-zero size.");
}

void ZeroNumelCheckDims(const char* fn, const Tensor& self, const std::vector<int64_t>& dims) {
  KILN_CHECK(!dims.empty(), fn, ": Expected reduction dim to be specified for input.numel() == 0. ",
             "Specify the reduction dim with the 'dim' argument.");
  for (int64_t d : dims) ZeroNumelCheckDim(fn, self, d);
}

TensorMeta ReduceMetaOf(const char* op, const Tensor& self, const OptDims& dims, bool keepdim, ScalarType out) {
  std::vector<bool> mask = ReduceMask(op, dims, self.dim());
  return TensorMeta{ReducedSizes(self, mask, keepdim), {}, out, self.device()};
}

namespace {

// --- prod ----------------------------------------------------------------------------------

ScalarType ProdResultType(ScalarType in, std::optional<ScalarType> dtype) {
  if (dtype) return *dtype;
  return IsIntegral(in, /*include_bool=*/true) ? ScalarType::Int64 : in;
}

TensorMeta ProdDimMeta(const Tensor& self, int64_t dim, bool keepdim, std::optional<ScalarType> dtype) {
  return ReduceMetaOf("prod", self, std::vector<int64_t>{dim}, keepdim, ProdResultType(self.dtype(), dtype));
}
TensorMeta ProdAllMeta(const Tensor& self, std::optional<ScalarType> dtype) {
  return ReduceMetaOf("prod", self, std::nullopt, false, ProdResultType(self.dtype(), dtype));
}

// One step of a floating product, rounded to T as PyTorch's scalar_t multiply rounds it.
template <typename T>
T ProdStep(T a, T b) {
  return static_cast<T>(static_cast<opmath_t<T>>(a) * static_cast<opmath_t<T>>(b));
}

// The product of a contiguous row in the order of PyTorch's vectorised inner reduction
// (binary_kernel_reduce_vec, reduction128): from 4 vectors of elements on, 4 vectors of partial
// products, multiplied block by block; then acc0 * acc1 and acc2 * acc3 lane by lane and the two
// together, the lanes one after another, and the remaining tail one element at a time. A row
// shorter than 4 vectors is multiplied one element after another. The vectors are AVX2's even on
// AVX-512 machines, where PyTorch does not register its reductions for AVX-512 (a float32 row of
// 63 matches 8 lanes, not 16).
template <typename T>
T ProdContiguousRow(const T* x, int64_t n) {
  constexpr int64_t kLanes = kTorchVectorBytes / static_cast<int64_t>(sizeof(T));
  constexpr int64_t kBlock = 4 * kLanes;
  const int64_t blocks = n / kBlock;
  T result = T(1);
  if (blocks > 0) {
    T acc[kBlock];
    std::copy(x, x + kBlock, acc);
    for (int64_t b = 1; b < blocks; ++b)
      for (int64_t j = 0; j < kBlock; ++j) acc[j] = ProdStep(acc[j], x[b * kBlock + j]);
    T lanes = T(1);
    for (int64_t l = 0; l < kLanes; ++l) {
      T lane = ProdStep(ProdStep(acc[l], acc[kLanes + l]), ProdStep(acc[2 * kLanes + l], acc[3 * kLanes + l]));
      lanes = l == 0 ? lane : ProdStep(lanes, lane);
    }
    result = ProdStep(result, lanes);
  }
  for (int64_t i = blocks * kBlock; i < n; ++i) result = ProdStep(result, x[i]);
  return result;
}

// `t` with its reduced dims in the order PyTorch's TensorIterator walks them, after the kept dims
// in their own order (mask permuted alike), so a transposed input is multiplied as the contiguous
// row it is in memory. TensorIterator sorts dims innermost-first by stride with an insertion sort
// that leaves a pair alone where either stride is 0 (a broadcast dim orders nothing) and puts the
// smaller of two equal-strided dims inside: an expanded (4, 4, 4) float16 input of strides (0, 1, 0)
// is walked row-major, and kiln's plain sort by stride put the stride-1 dim outside, multiplying
// each distinct element 16 times in a row (2.75^16 overflowed where PyTorch's product is 163.25:
// fuzz seed 1671, program 4524). The kept dims keep their order, so output o is still row-major
// over them.
Tensor ReducedDimsInMemoryOrder(const Tensor& t, std::vector<bool>& mask) {
  std::vector<int64_t> kept, inner_first;
  for (int64_t d = t.dim() - 1; d >= 0; --d)
    if (mask[d]) inner_first.push_back(d);
  for (int64_t d = 0; d < t.dim(); ++d)
    if (!mask[d]) kept.push_back(d);
  // > 0: `a` (now inside `b`) belongs outside it; < 0: it stays; 0: this pair does not say
  auto should_swap = [&](int64_t a, int64_t b) -> int {
    const int64_t sa = t.stride(a), sb = t.stride(b);
    if (sa == 0 || sb == 0) return 0;
    if (sa != sb) return sa > sb ? 1 : -1;
    return t.size(a) > t.size(b) ? 1 : 0;
  };
  InsertionSortDims(inner_first, should_swap);
  const std::vector<int64_t> reduced(inner_first.rbegin(), inner_first.rend());
  std::vector<int64_t> order = kept;
  order.insert(order.end(), reduced.begin(), reduced.end());
  if (std::is_sorted(order.begin(), order.end())) return t;  // already in that order
  std::vector<bool> permuted(mask.size());
  for (size_t i = 0; i < order.size(); ++i) permuted[i] = mask[order[i]];
  mask = permuted;
  return ops::permute(t, order);
}

Tensor ProdImpl(const Tensor& self, const OptDims& dims, bool keepdim, std::optional<ScalarType> dtype) {
  TensorMeta m = ReduceMetaOf("prod", self, dims, keepdim, ProdResultType(self.dtype(), dtype));
  Tensor out = EmptyFromMeta(m);
  // Like PyTorch, the input is converted to the result dtype and multiplied in that dtype (its
  // prod kernel's `a * b` on scalar_t, no wider accumulator: a float32 product is rounded to
  // float32 at every step, a float16 one to float16), in its order (ProdContiguousRow).
  std::vector<bool> mask = ReduceMask("prod", dims, self.dim());
  if (self.device().is_cuda()) {
    ProdCUDA(CastTo(self, m.dtype), mask, out);
    return out;
  }
  const Tensor input = ReducedDimsInMemoryOrder(CastTo(self, m.dtype), mask);  // iter reads its storage
  ReduceIter iter(input, mask);
  KILN_DISPATCH_ALL(m.dtype, "prod", [&] {
    using T = scalar_t;
    T* dst = out.data_ptr<T>();
    ForEachOutput<T>(iter, [&](int64_t o, auto&& visit) {
      if constexpr (std::is_integral_v<T>) {
        using Acc = acc_t<T>;  // integers wrap alike in a wider type, then cut to T
        Acc p = 1;
        visit([&](T x) { p = static_cast<Acc>(p * static_cast<Acc>(x)); });
        dst[o] = FromAcc<T>(p);
      } else if (iter.inner_contiguous()) {
        dst[o] = T(1);  // an empty reduction has no run
        iter.ForEachRun(o, [&](const char* p, int64_t n, int64_t) {
          dst[o] = ProdContiguousRow(reinterpret_cast<const T*>(p), n);
        });
      } else {
        T p = T(1);
        visit([&](T x) { p = ProdStep(p, x); });
        dst[o] = p;
      }
    });
  });
  return out;
}
Tensor ProdDim(const Tensor& self, int64_t dim, bool keepdim, std::optional<ScalarType> dtype) {
  return ProdImpl(self, std::vector<int64_t>{dim}, keepdim, dtype);
}
Tensor ProdAll(const Tensor& self, std::optional<ScalarType> dtype) {
  return ProdImpl(self, std::nullopt, false, dtype);
}

// --- max / min / amax / amin / argmax / argmin -----------------------------------------------

// values[o] / indices[o] (either may be null) = the extreme element of output o and its index.
// Of equal elements the first wins, except for kTieLast: PyTorch's max()/min() over all elements
// fold max_impl(acc, x), which keeps x on a tie, so [0., -0.].max() is -0. (its max(dim)/amax keep
// the first).
//
// Note [Vectorised extrema]: a float or double reduction takes the extreme of a contiguous run in
// vector lanes (GCC's vector extension: the compare-and-select loop does not auto-vectorise), and
// max(dim)/argmax its index, the first element equal to it, found 8 at a time; without indices,
// the extreme of an outer reduction comes down whole rows (Note [Outer sums]), in order: a
// scalar fold with a branch per element made amax(-1) 17x and amax(0) 34x PyTorch's time. Lanes
// change which of equal elements is kept, which shows only for signed zeros and NaN payloads, so a
// run whose extreme is a zero or a NaN is folded again in order: the results are the scalar
// fold's, bit for bit.
template <bool kMax, bool kTieLast, typename T>
[[gnu::always_inline]] inline T Pick(T best, T x) {  // a NaN best stays; a NaN x wins
  const bool take = (kMax ? x > best : x < best) || x != x || (kTieLast && x == best);
  return take && best == best ? x : best;
}

// 32-byte vectors, AVX2's registers (the attribute is lost on a dependent type)
using Floats8 = float __attribute__((vector_size(32)));
using Doubles4 = double __attribute__((vector_size(32)));

template <bool kMax, bool kTieLast, typename T>
T RunExtreme(const T* x, int64_t n) {  // n >= 1
  auto in_order = [&] {
    T best = x[0];
    for (int64_t i = 1; i < n; ++i) best = Pick<kMax, kTieLast>(best, x[i]);
    return best;
  };
  using V = std::conditional_t<std::is_same_v<T, float>, Floats8, Doubles4>;
  constexpr int64_t kLanes = sizeof(V) / sizeof(T), kVecs = 4, kStep = kLanes * kVecs;
  if (n < 2 * kStep) return in_order();
  // NaNs are only noted here (a NaN result is folded again in order), so each lane is the
  // select `v > m ? v : m`, one vmaxps
  V m[kVecs];
  decltype(V{} != V{}) nans{};
  std::memcpy(m, x, sizeof m);
  int64_t i = kStep;
  for (; i + kStep <= n; i += kStep) {
    for (int j = 0; j < kVecs; ++j) {
      V v;
      std::memcpy(&v, x + i + j * kLanes, sizeof(V));
      auto take = [&] {
        if constexpr (kMax && kTieLast) return v >= m[j];
        else if constexpr (kMax) return v > m[j];
        else if constexpr (kTieLast) return v <= m[j];
        else return v < m[j];
      }();
      m[j] = take ? v : m[j];
      nans |= v != v;
    }
  }
  for (int j = 0; j < kVecs; ++j)
    for (int64_t l = 0; l < kLanes; ++l)
      if (m[j][l] != m[j][l] || nans[l]) return in_order();
  T best = m[0][0];
  for (int j = 0; j < kVecs; ++j)
    for (int64_t l = 0; l < kLanes; ++l) best = Pick<kMax, kTieLast>(best, m[j][l]);
  for (; i < n; ++i) best = Pick<kMax, kTieLast>(best, x[i]);
  return best == T(0) || best != best ? in_order() : best;
}

// The first i with x[i] == m (x[i] a NaN when m is one), which the run holds; 8 or 4 at a time.
template <typename T>
int64_t FirstIndexOf(const T* x, int64_t n, T m) {
  using V = std::conditional_t<std::is_same_v<T, float>, Floats8, Doubles4>;
  constexpr int64_t kLanes = sizeof(V) / sizeof(T);
  const bool nan = m != m;
  const V mv = V{} + m;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    V v;
    std::memcpy(&v, x + i, sizeof(V));
    const auto hit = nan ? (v != v) : (v == mv);
    int bits;
    if constexpr (std::is_same_v<T, float>) bits = _mm256_movemask_ps(std::bit_cast<__m256>(hit));
    else bits = _mm256_movemask_pd(std::bit_cast<__m256d>(hit));
    if (bits != 0) return i + __builtin_ctz(bits);
  }
  for (; i < n; ++i)
    if (nan ? x[i] != x[i] : x[i] == m) return i;
  return n - 1;  // not reached: m is one of x
}

// values[p, k] = the extreme over r of x[p, r, k], rows in order, in blocks of columns.
template <bool kMax, bool kTieLast, typename T>
void OuterExtreme(const T* x, const OuterShape& s, T* values) {
  constexpr int64_t kCols = 512;
  const int64_t blocks = (s.K + kCols - 1) / kCols;
  ParallelFor(0, s.P * blocks, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(s.R * kCols, 1)),
              [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t p = t / blocks, k0 = (t % blocks) * kCols, n = std::min(kCols, s.K - k0);
      T* out = values + p * s.K + k0;
      const T* row = x + p * s.R * s.K + k0;
      std::copy(row, row + n, out);
      for (int64_t r = 1; r < s.R; ++r) {
        row += s.K;
        for (int64_t j = 0; j < n; ++j) out[j] = Pick<kMax, kTieLast>(out[j], row[j]);
      }
    }
  });
}

template <bool kMax, bool kTieLast = false, typename T>
void MinMaxKernel(const Tensor& input, const std::vector<bool>& mask, T* values, int64_t* indices) {
  using M = opmath_t<T>;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (input.numel() > 0 && (!indices || !kTieLast)) {  // Note [Vectorised extrema]
      if (const std::optional<OuterShape> outer = AsOuterSum(input, mask); outer && !indices) {
        return OuterExtreme<kMax, kTieLast>(input.data_ptr<T>(), *outer, values);
      }
      ReduceIter iter(input, mask);
      if (iter.inner_contiguous() && iter.reduce_size() > 0) {
        const int64_t work = std::max<int64_t>(iter.reduce_size(), 1);
        ParallelFor(0, iter.num_outputs(), std::max<int64_t>(1, kGrainSize / work), [&](int64_t b, int64_t e) {
          for (int64_t o = b; o < e; ++o) {
            iter.ForEachRun(o, [&](const char* p, int64_t n, int64_t) {
              const T* x = reinterpret_cast<const T*>(p);
              const T m = RunExtreme<kMax, kTieLast>(x, n);
              if (!indices) {
                values[o] = m;
                return;
              }
              // the fold keeps the first element equal to the extreme (the first NaN)
              const int64_t i = FirstIndexOf(x, n, m);
              indices[o] = i;
              if (values) values[o] = x[i];
            });
          }
        });
        return;
      }
    }
  }
  ReduceIter iter(input, mask);
  ForEachOutput<T>(iter, [&](int64_t o, auto&& visit) {
    T best{};
    M best_m{};
    int64_t best_i = -1, i = 0;
    bool done = false;  // a NaN was met: it is the result
    visit([&](T raw) {
      if (!done) {
        const M x = static_cast<M>(raw);
        if (best_i < 0 || IsNan(x) || (kMax ? x > best_m : x < best_m) || (kTieLast && x == best_m)) {
          best = raw;
          best_m = x;
          best_i = i;
          done = IsNan(x);
        }
      }
      ++i;
    });
    if (values) values[o] = best;
    if (indices) indices[o] = best_i;
  });
}

template <bool kMax, bool kTieLast = false>
void RunMinMax(const Tensor& input, const std::vector<bool>& mask, const Tensor* values, const Tensor* indices,
               const char* name) {
  if (input.device().is_cuda()) return MinMaxCUDA(kMax, input, mask, values, indices);
  KILN_DISPATCH_ALL(input.dtype(), name, [&] {
    MinMaxKernel<kMax, kTieLast, scalar_t>(input, mask, values ? values->data_ptr<scalar_t>() : nullptr,
                                 indices ? indices->data_ptr<int64_t>() : nullptr);
  });
}

template <bool kMax> constexpr const char* kAllName = kMax ? "max()" : "min()";
template <bool kMax> constexpr const char* kAName = kMax ? "amax()" : "amin()";
template <bool kMax> constexpr const char* kArgName = kMax ? "argmax()" : "argmin()";

template <bool kMax>
TensorMeta MinMaxAllMeta(const Tensor& self) {
  KILN_CHECK(!SymNumelIsZero(self), kAllName<kMax>, ": Expected reduction dim to be specified for input.numel() == 0. "
             "Specify the reduction dim with the 'dim' argument.");
  return TensorMeta{{}, {}, self.dtype(), self.device()};
}
template <bool kMax>
Tensor MinMaxAll(const Tensor& self) {
  Tensor out = EmptyFromMeta(MinMaxAllMeta<kMax>(self));
  RunMinMax<kMax, true>(self, std::vector<bool>(self.dim(), true), &out, nullptr, kMax ? "max_all" : "min_all");
  return out;
}

template <bool kMax>
std::tuple<TensorMeta, TensorMeta> MinMaxDimMeta(const Tensor& self, int64_t dim, bool keepdim) {
  const int64_t wrapped = WrapDim(dim, self.dim());
  ZeroNumelCheckDim(kAllName<kMax>, self, wrapped);
  TensorMeta values = ReduceMetaOf(kAllName<kMax>, self, std::vector<int64_t>{wrapped}, keepdim, self.dtype());
  TensorMeta indices = values;
  indices.dtype = ScalarType::Int64;
  return {values, indices};
}
template <bool kMax>
std::tuple<Tensor, Tensor> MinMaxDim(const Tensor& self, int64_t dim, bool keepdim) {
  auto [vm, im] = MinMaxDimMeta<kMax>(self, dim, keepdim);
  Tensor values = EmptyFromMeta(vm), indices = EmptyFromMeta(im);
  RunMinMax<kMax>(self, ReduceMask(kAllName<kMax>, std::vector<int64_t>{dim}, self.dim()), &values, &indices,
                  kMax ? "max" : "min");
  return {values, indices};
}

template <bool kMax>
TensorMeta AMinMaxMeta(const Tensor& self, std::vector<int64_t> dims, bool keepdim) {
  if (SymNumelIsZero(self)) ZeroNumelCheckDims(kAName<kMax>, self, dims);
  return ReduceMetaOf(kMax ? "amax" : "amin", self, dims, keepdim, self.dtype());
}
template <bool kMax>
Tensor AMinMax(const Tensor& self, std::vector<int64_t> dims, bool keepdim) {
  Tensor out = EmptyFromMeta(AMinMaxMeta<kMax>(self, dims, keepdim));
  RunMinMax<kMax>(self, ReduceMask(kAName<kMax>, dims, self.dim()), &out, nullptr, kMax ? "amax" : "amin");
  return out;
}

template <bool kMax>
TensorMeta ArgMinMaxMeta(const Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  KILN_CHECK(self.dtype() != ScalarType::Bool, "\"", kMax ? "argmax_cpu" : "argmin_cpu",
             "\" not implemented for 'Bool'");
  if (dim) {
    ZeroNumelCheckDim(kArgName<kMax>, self, WrapDim(*dim, self.dim()));
  } else {
    KILN_CHECK_INDEX(!SymNumelIsZero(self), kArgName<kMax>,
                     ": Expected reduction dim to be specified for input.numel() == 0.");
  }
  return ReduceMetaOf(kArgName<kMax>, self, dim ? OptDims(std::vector<int64_t>{*dim}) : OptDims(), keepdim,
                      ScalarType::Int64);
}
template <bool kMax>
Tensor ArgMinMax(const Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  Tensor out = EmptyFromMeta(ArgMinMaxMeta<kMax>(self, dim, keepdim));
  RunMinMax<kMax>(self, ReduceMask(kArgName<kMax>, dim ? OptDims(std::vector<int64_t>{*dim}) : OptDims(), self.dim()),
                  nullptr, &out, kMax ? "argmax" : "argmin");
  return out;
}

Tensor MaxOther(const Tensor& self, const Tensor& other) {
  return CallOp<Tensor>(KILN_OP("aten::maximum"), self, other);
}
Tensor MinOther(const Tensor& self, const Tensor& other) {
  return CallOp<Tensor>(KILN_OP("aten::minimum"), self, other);
}

// --- any / all / count_nonzero ---------------------------------------------------------------

enum class Logical { kAny, kAll, kCount };

constexpr const char* LogicalName(Logical k) {
  return k == Logical::kAny ? "any" : k == Logical::kAll ? "all" : "count_nonzero";
}
ScalarType LogicalResultType(Logical k, ScalarType in) {
  if (k == Logical::kCount) return ScalarType::Int64;
  return in == ScalarType::UInt8 ? ScalarType::UInt8 : ScalarType::Bool;  // PyTorch keeps uint8
}

template <Logical kKind>
Tensor LogicalImpl(const Tensor& self, const OptDims& dims, bool keepdim) {
  TensorMeta m = ReduceMetaOf(LogicalName(kKind), self, dims, keepdim, LogicalResultType(kKind, self.dtype()));
  Tensor out = EmptyFromMeta(m);
  if (self.device().is_cuda()) {
    constexpr LogicalReduce kCUDAKind =
        kKind == Logical::kAny ? LogicalReduce::kAny : kKind == Logical::kAll ? LogicalReduce::kAll : LogicalReduce::kCount;
    LogicalCUDA(kCUDAKind, self, ReduceMask(LogicalName(kKind), dims, self.dim()), out);
    return out;
  }
  ReduceIter iter(self, ReduceMask(LogicalName(kKind), dims, self.dim()));
  KILN_DISPATCH_ALL(self.dtype(), LogicalName(kKind), [&] {
    using T = scalar_t;
    using M = opmath_t<T>;
    int64_t* counts = kKind == Logical::kCount ? out.data_ptr<int64_t>() : nullptr;
    char* flags = kKind == Logical::kCount ? nullptr : static_cast<char*>(out.raw_data());  // bool or uint8
    ForEachOutput<T>(iter, [&](int64_t o, auto&& visit) {
      int64_t nonzero = 0, total = 0;
      visit([&](T x) {
        nonzero += static_cast<M>(x) != M(0);
        ++total;
      });
      if (counts) counts[o] = nonzero;
      else flags[o] = kKind == Logical::kAny ? nonzero > 0 : nonzero == total;
    });
  });
  return out;
}

template <Logical kKind> Tensor LogicalAll(const Tensor& self) { return LogicalImpl<kKind>(self, std::nullopt, false); }
template <Logical kKind> TensorMeta LogicalAllMeta(const Tensor& self) {
  return TensorMeta{{}, {}, LogicalResultType(kKind, self.dtype()), self.device()};
}
template <Logical kKind> Tensor LogicalDim(const Tensor& self, int64_t dim, bool keepdim) {
  return LogicalImpl<kKind>(self, std::vector<int64_t>{dim}, keepdim);
}
template <Logical kKind> TensorMeta LogicalDimMeta(const Tensor& self, int64_t dim, bool keepdim) {
  return ReduceMetaOf(LogicalName(kKind), self, std::vector<int64_t>{dim}, keepdim,
                      LogicalResultType(kKind, self.dtype()));
}
template <Logical kKind> Tensor LogicalDims(const Tensor& self, OptDims dims, bool keepdim) {
  return LogicalImpl<kKind>(self, dims, keepdim);
}
template <Logical kKind> TensorMeta LogicalDimsMeta(const Tensor& self, OptDims dims, bool keepdim) {
  return ReduceMetaOf(LogicalName(kKind), self, dims, keepdim, LogicalResultType(kKind, self.dtype()));
}

// count_nonzero.dim_IntList reduces over every dim when `dim` is empty, like PyTorch.
Tensor CountNonzeroDims(const Tensor& self, std::vector<int64_t> dims) {
  return LogicalImpl<Logical::kCount>(self, dims, false);
}
TensorMeta CountNonzeroDimsMeta(const Tensor& self, std::vector<int64_t> dims) {
  return ReduceMetaOf("count_nonzero", self, dims, false, ScalarType::Int64);
}
Tensor CountNonzero(const Tensor& self, std::optional<int64_t> dim) {
  return CallOp<Tensor>(KILN_OP("aten::count_nonzero.dim_IntList"), self,
                        dim ? std::vector<int64_t>{*dim} : std::vector<int64_t>{});
}

}  // namespace

void RegisterReduceMoreOps(Registry& r) {
  std::initializer_list<Tag> tags = {Tag::reduction, Tag::core};
  std::initializer_list<Tag> red = {Tag::reduction};
  r.Def("prod(Tensor self, *, ScalarType? dtype=None) -> Tensor", tags, kFunctionAndMethod)
      .CPUAndCUDA<&ProdAll>().Meta<&ProdAllMeta>();
  r.Def("prod.dim_int(Tensor self, int dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor", tags,
        kFunctionAndMethod)
      .CPUAndCUDA<&ProdDim>().Meta<&ProdDimMeta>();

  r.Def("amax(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor", tags, kFunctionAndMethod)
      .CPUAndCUDA<&AMinMax<true>>().Meta<&AMinMaxMeta<true>>()
      .OuterReductionKernel({ScalarType::Float32, ScalarType::Float64});  // Note [Vectorised extrema]
  r.Def("amin(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor", tags, kFunctionAndMethod)
      .CPUAndCUDA<&AMinMax<false>>().Meta<&AMinMaxMeta<false>>()
      .OuterReductionKernel({ScalarType::Float32, ScalarType::Float64});  // Note [Vectorised extrema]
  r.Def("max(Tensor self) -> Tensor", red, kFunctionAndMethod)
      .CPUAndCUDA<&MinMaxAll<true>>().Meta<&MinMaxAllMeta<true>>();
  r.Def("max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)", tags,
        kFunctionAndMethod)
      .CPUAndCUDA<&MinMaxDim<true>>().Meta<&MinMaxDimMeta<true>>();
  r.Def("max.other(Tensor self, Tensor other) -> Tensor", {Tag::pointwise}, kFunctionAndMethod)
      .Composite<&MaxOther>();
  r.Def("min(Tensor self) -> Tensor", red, kFunctionAndMethod)
      .CPUAndCUDA<&MinMaxAll<false>>().Meta<&MinMaxAllMeta<false>>();
  r.Def("min.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)", tags,
        kFunctionAndMethod)
      .CPUAndCUDA<&MinMaxDim<false>>().Meta<&MinMaxDimMeta<false>>();
  r.Def("min.other(Tensor self, Tensor other) -> Tensor", {Tag::pointwise}, kFunctionAndMethod)
      .Composite<&MinOther>();
  r.Def("argmax(Tensor self, int? dim=None, bool keepdim=False) -> Tensor", tags, kFunctionAndMethod)
      .CPUAndCUDA<&ArgMinMax<true>>().Meta<&ArgMinMaxMeta<true>>();
  r.Def("argmin(Tensor self, int? dim=None, bool keepdim=False) -> Tensor", tags, kFunctionAndMethod)
      .CPUAndCUDA<&ArgMinMax<false>>().Meta<&ArgMinMaxMeta<false>>();

  r.Def("any(Tensor self) -> Tensor", tags, kFunctionAndMethod)
      .CPUAndCUDA<&LogicalAll<Logical::kAny>>().Meta<&LogicalAllMeta<Logical::kAny>>();
  r.Def("any.dim(Tensor self, int dim, bool keepdim=False) -> Tensor", tags, kFunctionAndMethod)
      .CPUAndCUDA<&LogicalDim<Logical::kAny>>().Meta<&LogicalDimMeta<Logical::kAny>>();
  r.Def("any.dims(Tensor self, int[1]? dim=None, bool keepdim=False) -> Tensor", tags, kFunctionAndMethod)
      .CPUAndCUDA<&LogicalDims<Logical::kAny>>().Meta<&LogicalDimsMeta<Logical::kAny>>();
  r.Def("all(Tensor self) -> Tensor", tags, kFunctionAndMethod)
      .CPUAndCUDA<&LogicalAll<Logical::kAll>>().Meta<&LogicalAllMeta<Logical::kAll>>();
  r.Def("all.dim(Tensor self, int dim, bool keepdim=False) -> Tensor", tags, kFunctionAndMethod)
      .CPUAndCUDA<&LogicalDim<Logical::kAll>>().Meta<&LogicalDimMeta<Logical::kAll>>();
  r.Def("all.dims(Tensor self, int[1]? dim=None, bool keepdim=False) -> Tensor", tags, kFunctionAndMethod)
      .CPUAndCUDA<&LogicalDims<Logical::kAll>>().Meta<&LogicalDimsMeta<Logical::kAll>>();
  r.Def("count_nonzero.dim_IntList(Tensor self, int[] dim) -> Tensor", red, kFunctionAndMethod)
      .CPUAndCUDA<&CountNonzeroDims>().Meta<&CountNonzeroDimsMeta>();
  r.Def("count_nonzero(Tensor self, int? dim=None) -> Tensor", red, kFunctionAndMethod)
      .Composite<&CountNonzero>();
}

}  // namespace kiln
