// tensor/ops/norm.cc: normalization layers: batch norm, layer norm and group norm.
//
// Each native_* op views its (contiguous) input as [outer, channels, inner] or [rows, elems].
// Batch and group norm compute per-slice statistics in double with two passes (mean, then
// centred squares, so large offsets do not cancel) and apply y = x * scale + shift with
// per-channel scale = rstd * weight and shift = bias - mean * scale. Layer norm repeats PyTorch's
// CPU kernel rounding for rounding (Note [Layer norm as aten's CPU kernel]): a vectorized,
// cascaded Welford in the op-math type (float for float32/float16/bfloat16, double for float64)
// and y = (x - mean) * rstd * weight + bias with PyTorch's fused multiply-adds, so its float32
// results are PyTorch's bit for bit. Parameters and statistics may be float32 when the input is
// float16/bfloat16 (PyTorch's "mixed type"); the saved statistics then come out in float32.
// native_batch_norm in training mode writes running_mean/running_var in place
// (momentum update, unbiased variance) and bumps their versions: its PyTorch schema carries no
// alias annotation for them, so the dispatcher cannot know. The _native_batch_norm_legit family
// runs the same kernel under schemas that do say it (Tensor(a!) running_mean), plus a functional
// form returning the updated statistics, for functionalization and export. batch_norm,
// layer_norm and group_norm are composites returning the first output of their native op.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>

#include "tensor/memory_format.h"
#include "tensor/ops/common.h"
#include "tensor/ops/reduce_cuda.h"

namespace kiln {
namespace {

using OptTensor = std::optional<Tensor>;
using SymList = std::vector<SymInt>;
using Tensor3 = std::tuple<Tensor, Tensor, Tensor>;
using Meta3 = std::tuple<TensorMeta, TensorMeta, TensorMeta>;

bool Defined(const OptTensor& t) { return t && t->defined(); }

struct NamedParam {
  const char* name;
  const OptTensor* t;
};

// The dtype of saved statistics; checks the input and parameter dtypes and devices in PyTorch's
// order (its is_mixed_type / check_mixed_data_type come before the kernel's dtype dispatch): a
// parameter whose dtype differs from the input's makes the call "mixed", which needs float32
// parameters, then a 16-bit input; only then is a non-floating input refused.
ScalarType NormStatDtype(const char* op, const Tensor& input, std::initializer_list<NamedParam> params) {
  const Tensor* first = nullptr;
  bool mixed = false;
  for (const NamedParam& p : params) {
    if (!Defined(*p.t)) continue;
    CheckSameDevice(op, input, **p.t);
    if (!first) first = &**p.t;
    mixed = mixed || (**p.t).dtype() != input.dtype();
  }
  if (mixed) {
    constexpr const char* kFloatParams = "mixed dtype (CPU): expect parameter to have scalar type of Float";
    KILN_CHECK(first->dtype() == ScalarType::Float32, kFloatParams);
    for (const NamedParam& p : params) {
      if (!Defined(*p.t)) continue;
      const ScalarType t = (**p.t).dtype();
      if (IsReducedFloat(input.dtype())) {
        KILN_CHECK(t == ScalarType::Float32, kFloatParams);
      } else {
        KILN_CHECK(t == input.dtype(), "mixed dtype (CPU): all inputs must share same datatype. (", op, ": input is ",
                   ScalarTypeDisplayName(input.dtype()), ", ", p.name, " is ", ScalarTypeDisplayName(t), ")");
      }
    }
    return ScalarType::Float32;
  }
  KILN_CHECK_NOT_IMPLEMENTED(IsFloating(input.dtype()), "\"", op, "\" not implemented for '",
                             ScalarTypeDisplayName(input.dtype()), "'");
  return input.dtype();
}

// The n values of a 1-D parameter (any stride, any floating dtype), or `dflt` when absent.
std::vector<double> ReadVector(const OptTensor& t, int64_t n, double dflt) {
  std::vector<double> v(n, dflt);
  if (!Defined(t) || n == 0) return v;
  const Tensor& x = *t;
  const int64_t stride = x.dim() == 0 ? 0 : x.stride(-1);
  if (x.dim() > 1) return ReadVector(ops::reshape(x, {SymInt(-1)}), n, dflt);  // layer_norm's N-D weight
  KILN_DISPATCH_FLOATING(x.dtype(), "norm", [&] {
    const scalar_t* p = x.data_ptr<scalar_t>();
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>(static_cast<opmath_t<scalar_t>>(p[i * stride]));
  });
  return v;
}

// Writes v into a 1-D (any stride) or contiguous tensor of any floating dtype.
void WriteVector(const Tensor& t, const std::vector<double>& v) {
  if (v.empty()) return;
  const int64_t stride = t.dim() == 1 ? t.stride(0) : 1;
  KILN_DISPATCH_FLOATING(t.dtype(), "norm", [&] {
    scalar_t* p = t.data_ptr<scalar_t>();
    for (size_t i = 0; i < v.size(); ++i) p[i * stride] = static_cast<scalar_t>(static_cast<opmath_t<scalar_t>>(v[i]));
  });
}

// sum(p[i]) and sum((p[i] - m)^2) over a run of n values, in double with 8 independent partial
// sums, so the loop vectorises (one running sum is a chain of dependent adds the compiler may not
// reorder): batch norm's statistics over a 16x64x32x32 batch went 4x faster.
template <typename T>
double RunSum(const T* p, int64_t n) {
  constexpr int kLanes = 8;
  double acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] += static_cast<double>(static_cast<opmath_t<T>>(p[i + j]));
  double s = 0;
  for (; i < n; ++i) s += static_cast<double>(static_cast<opmath_t<T>>(p[i]));
  for (int j = 0; j < kLanes; ++j) s += acc[j];
  return s;
}
template <typename T>
double RunSquaredDeviations(const T* p, int64_t n, double m) {
  constexpr int kLanes = 8;
  double acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      const double d = static_cast<double>(static_cast<opmath_t<T>>(p[i + j])) - m;
      acc[j] += d * d;
    }
  }
  double q = 0;
  for (; i < n; ++i) {
    const double d = static_cast<double>(static_cast<opmath_t<T>>(p[i])) - m;
    q += d * d;
  }
  for (int j = 0; j < kLanes; ++j) q += acc[j];
  return q;
}

// Mean and biased variance of rows [outer, inner] at `x + c * inner` for outer in [0, nouter)
// with row pitch `pitch` (elements): batch norm's channel c, or one layer/group norm row.
template <typename T>
void Moments(const T* x, int64_t nouter, int64_t pitch, int64_t inner, double* mean, double* var) {
  const int64_t count = nouter * inner;
  double s = 0;
  for (int64_t o = 0; o < nouter; ++o) s += RunSum(x + o * pitch, inner);
  const double m = count > 0 ? s / count : std::nan("");
  double q = 0;
  for (int64_t o = 0; o < nouter; ++o) q += RunSquaredDeviations(x + o * pitch, inner, m);
  *mean = m;
  *var = count > 0 ? q / count : std::nan("");
}

// y[o, c, i] = x[o, c, i] * scale[o * C + c] + shift[o * C + c] over [outer, C, inner] (the
// per-(o, c) coefficient vectors repeat with period C when they hold only C values).
template <typename T>
void ApplyAffine(const T* x, T* y, int64_t outer, int64_t C, int64_t inner, const std::vector<double>& scale,
                 const std::vector<double>& shift) {
  using M = opmath_t<T>;
  const int64_t period = static_cast<int64_t>(scale.size());
  ParallelFor(0, outer * C, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(inner, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const M a = static_cast<M>(scale[r % period]), s = static_cast<M>(shift[r % period]);
      const T* px = x + r * inner;
      T* py = y + r * inner;
      for (int64_t i = 0; i < inner; ++i) py[i] = static_cast<T>(static_cast<M>(px[i]) * a + s);
    }
  });
}

// Mean and biased variance of each column of a row-major [rows, C] matrix (a channels-last batch
// norm's channels), two passes in double as Moments; columns split among threads in blocks, each
// block's sums kept in a vector across the rows so the inner loop runs along memory.
template <typename T>
void ColumnMoments(const T* x, int64_t rows, int64_t C, double* mean, double* var) {
  constexpr int64_t kBlock = 64;
  ParallelFor(0, (C + kBlock - 1) / kBlock, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(rows * kBlock, 1)),
              [&](int64_t b, int64_t e) {
    for (int64_t blk = b; blk < e; ++blk) {
      const int64_t c0 = blk * kBlock, n = std::min(kBlock, C - c0);
      double acc[kBlock] = {};
      for (int64_t r = 0; r < rows; ++r) {
        const T* p = x + r * C + c0;
        for (int64_t c = 0; c < n; ++c) acc[c] += static_cast<double>(static_cast<opmath_t<T>>(p[c]));
      }
      for (int64_t c = 0; c < n; ++c) mean[c0 + c] = rows > 0 ? acc[c] / rows : std::nan("");
      std::fill(acc, acc + kBlock, 0.0);
      for (int64_t r = 0; r < rows; ++r) {
        const T* p = x + r * C + c0;
        for (int64_t c = 0; c < n; ++c) {
          const double d = static_cast<double>(static_cast<opmath_t<T>>(p[c])) - mean[c0 + c];
          acc[c] += d * d;
        }
      }
      for (int64_t c = 0; c < n; ++c) var[c0 + c] = rows > 0 ? acc[c] / rows : std::nan("");
    }
  });
}

// y[r, c] = x[r, c] * scale[c] + shift[c] over row-major [rows, C] (channels-last batch norm).
template <typename T>
void ApplyAffineRows(const T* x, T* y, int64_t rows, int64_t C, const std::vector<double>& scale,
                     const std::vector<double>& shift) {
  using M = opmath_t<T>;
  const std::vector<M> a(scale.begin(), scale.end()), s(shift.begin(), shift.end());
  ParallelFor(0, rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(C, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const T* px = x + r * C;
      T* py = y + r * C;
      for (int64_t c = 0; c < C; ++c) py[c] = static_cast<T>(static_cast<M>(px[c]) * a[c] + s[c]);
    }
  });
}

// --- batch norm ------------------------------------------------------------------------------------

Meta3 NativeBatchNormMeta(const Tensor& input, const OptTensor& weight, const OptTensor& bias,
                          const OptTensor& running_mean, const OptTensor& running_var, bool training, double momentum,
                          double eps) {
  (void)momentum;
  (void)eps;
  WrapDim(1, input.dim());  // IndexError for 0-1 dims, as PyTorch's input.size(1)
  const SymInt& C = input->sym_sizes()[1];
  for (NamedParam p : {NamedParam{"weight", &weight}, NamedParam{"bias", &bias},
                       NamedParam{"running_mean", &running_mean}, NamedParam{"running_var", &running_var}}) {
    if (Defined(*p.t)) {
      KILN_CHECK((**p.t)->sym_numel() == C, p.name, " should contain ", C, " elements not ", (**p.t)->sym_numel());
    }
  }
  if (!training) {
    KILN_CHECK(Defined(running_mean) && Defined(running_var),
               "running_mean and running_var must be defined in evaluation mode");
  }
  // batch_norm's kernel refuses a non-floating input before its mixed-dtype check (layer_norm's and
  // group_norm's after it)
  KILN_CHECK_NOT_IMPLEMENTED(IsFloating(input.dtype()), "\"batch_norm\" not implemented for '",
                             ScalarTypeDisplayName(input.dtype()), "'");
  ScalarType stat = NormStatDtype("batch_norm", input,
                                  {{"weight", &weight}, {"bias", &bias}, {"running_mean", &running_mean},
                                   {"running_var", &running_var}});
  SymDimVector stat_sizes = {training ? C : SymInt(0)};
  // a channels-last input gives a channels-last result, as PyTorch's
  const SymDimVector strides = SuggestsChannelsLast(input) ? ChannelsLastStrides(input->sym_sizes()) : SymDimVector{};
  return {TensorMeta{input->sym_sizes(), strides, input.dtype(), input.device()},
          TensorMeta{stat_sizes, {}, stat, input.device()}, TensorMeta{stat_sizes, {}, stat, input.device()}};
}

Tensor3 NativeBatchNormCPU(const Tensor& input, const OptTensor& weight, const OptTensor& bias,
                           const OptTensor& running_mean, const OptTensor& running_var, bool training,
                           double momentum, double eps) {
  auto [om, mm, vm] = NativeBatchNormMeta(input, weight, bias, running_mean, running_var, training, momentum, eps);
  KILN_CHECK(!training || input.numel() > 0, "input tensor must have at least one element, but got input_sizes = ",
             ShapeStr(input));
  Tensor out = EmptyFromMeta(om), save_mean = EmptyFromMeta(mm), save_invstd = EmptyFromMeta(vm);
  const int64_t N = input.size(0), C = input.size(1), S = input.numel() / std::max<int64_t>(N * C, 1);
  if (input.device().is_cuda()) {
    auto ptr = [](const OptTensor& t) { return Defined(t) ? &*t : nullptr; };
    if (input.numel() > 0) {  // an empty batch leaves the running statistics alone
      // the CUDA kernel writes row-major: a channels-last result is copied into place
      Tensor o = out.is_contiguous() ? out : EmptyTensor(out.sizes(), out.dtype(), out.device());
      BatchNormCUDA(input, ptr(weight), ptr(bias), ptr(running_mean), ptr(running_var), training, momentum, eps, o,
                    save_mean, save_invstd);
      if (!o.is_same(out)) ops::copy_(out, o);
      for (const OptTensor* stat : {&running_mean, &running_var}) {
        if (training && Defined(*stat)) (**stat)->bump_version();
      }
    }
    return {out, save_mean, save_invstd};
  }
  // channels-last (the meta's choice): read and written in (N, H, W, C) order, as rows of C
  const bool channels_last = !out.is_contiguous();
  Tensor x = channels_last ? ChannelsLastCopy(input) : ops::contiguous(input);
  std::vector<double> mean(C), var(C);
  if (training) {
    KILN_DISPATCH_FLOATING(x.dtype(), "batch_norm", [&] {
      const scalar_t* px = x.data_ptr<scalar_t>();
      if (channels_last) {
        ColumnMoments(px, N * S, C, mean.data(), var.data());
        return;
      }
      ParallelFor(0, C, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(N * S, 1)), [&](int64_t b, int64_t e) {
        for (int64_t c = b; c < e; ++c) Moments(px + c * S, N, C * S, S, &mean[c], &var[c]);
      });
    });
  } else {
    mean = ReadVector(running_mean, C, 0);
    var = ReadVector(running_var, C, 1);
  }
  std::vector<double> invstd(C), scale(C), shift(C);
  const std::vector<double> w = ReadVector(weight, C, 1), b = ReadVector(bias, C, 0);
  for (int64_t c = 0; c < C; ++c) {
    invstd[c] = 1.0 / std::sqrt(var[c] + eps);
    scale[c] = invstd[c] * w[c];
    shift[c] = b[c] - mean[c] * scale[c];
  }
  KILN_DISPATCH_FLOATING(x.dtype(), "batch_norm", [&] {
    if (channels_last) ApplyAffineRows(x.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), N * S, C, scale, shift);
    else ApplyAffine(x.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), N, C, S, scale, shift);
  });
  if (training && input.numel() > 0) {  // an empty batch leaves the running statistics alone
    WriteVector(save_mean, mean);
    WriteVector(save_invstd, invstd);
    const int64_t n = N * S;
    if (Defined(running_mean)) {
      std::vector<double> rm = ReadVector(running_mean, C, 0);
      for (int64_t c = 0; c < C; ++c) rm[c] = momentum * mean[c] + (1 - momentum) * rm[c];
      WriteVector(*running_mean, rm);
      (*running_mean)->bump_version();
    }
    if (Defined(running_var)) {
      std::vector<double> rv = ReadVector(running_var, C, 1);
      for (int64_t c = 0; c < C; ++c) rv[c] = momentum * (var[c] * n / static_cast<double>(n - 1)) + (1 - momentum) * rv[c];
      WriteVector(*running_var, rv);
      (*running_var)->bump_version();
    }
  }
  return {out, save_mean, save_invstd};
}

// The _native_batch_norm_legit family: the same kernel under schemas that say what it writes.
Tensor3 LegitCPU(const Tensor& input, const OptTensor& weight, const OptTensor& bias, const Tensor& running_mean,
                 const Tensor& running_var, bool training, double momentum, double eps) {
  return NativeBatchNormCPU(input, weight, bias, running_mean, running_var, training, momentum, eps);
}
Meta3 LegitMeta(const Tensor& input, const OptTensor& weight, const OptTensor& bias, const Tensor& running_mean,
                const Tensor& running_var, bool training, double momentum, double eps) {
  return NativeBatchNormMeta(input, weight, bias, running_mean, running_var, training, momentum, eps);
}
Tensor3 LegitNoStatsCPU(const Tensor& input, const OptTensor& weight, const OptTensor& bias, bool training,
                        double momentum, double eps) {
  return NativeBatchNormCPU(input, weight, bias, std::nullopt, std::nullopt, training, momentum, eps);
}
Meta3 LegitNoStatsMeta(const Tensor& input, const OptTensor& weight, const OptTensor& bias, bool training,
                       double momentum, double eps) {
  return NativeBatchNormMeta(input, weight, bias, std::nullopt, std::nullopt, training, momentum, eps);
}
Tensor3 LegitNoTrainingCPU(const Tensor& input, const OptTensor& weight, const OptTensor& bias,
                           const Tensor& running_mean, const Tensor& running_var, double momentum, double eps) {
  return NativeBatchNormCPU(input, weight, bias, running_mean, running_var, false, momentum, eps);
}
Meta3 LegitNoTrainingMeta(const Tensor& input, const OptTensor& weight, const OptTensor& bias,
                          const Tensor& running_mean, const Tensor& running_var, double momentum, double eps) {
  return NativeBatchNormMeta(input, weight, bias, running_mean, running_var, false, momentum, eps);
}
// Functional form: the updated running statistics come back as new tensors.
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> LegitFunctionalCPU(
    const Tensor& input, const OptTensor& weight, const OptTensor& bias, const Tensor& running_mean,
    const Tensor& running_var, bool training, double momentum, double eps) {
  Tensor rm = ops::clone(running_mean), rv = ops::clone(running_var);
  auto [out, mean, invstd] = NativeBatchNormCPU(input, weight, bias, rm, rv, training, momentum, eps);
  return {out, mean, invstd, rm, rv};
}
std::tuple<TensorMeta, TensorMeta, TensorMeta, TensorMeta, TensorMeta> LegitFunctionalMeta(
    const Tensor& input, const OptTensor& weight, const OptTensor& bias, const Tensor& running_mean,
    const Tensor& running_var, bool training, double momentum, double eps) {
  auto [out, mean, invstd] = NativeBatchNormMeta(input, weight, bias, running_mean, running_var, training, momentum,
                                                 eps);
  return {out, mean, invstd, TensorMeta{running_mean->sym_sizes(), {}, running_mean.dtype(), running_mean.device()},
          TensorMeta{running_var->sym_sizes(), {}, running_var.dtype(), running_var.device()}};
}

Tensor BatchNorm(const Tensor& input, const OptTensor& weight, const OptTensor& bias, const OptTensor& running_mean,
                 const OptTensor& running_var, bool training, double momentum, double eps, bool cudnn_enabled) {
  (void)cudnn_enabled;
  if (training && input.dim() >= 2) {
    SymInt per_channel = input->sym_sizes()[0];
    for (int64_t d = 2; d < input.dim(); ++d) per_channel = per_channel * input->sym_sizes()[d];
    KILN_CHECK_VALUE(per_channel != 1, "Expected more than 1 value per channel when training, got input size ",
                     ShapeStr(input));
  }
  if (input->sym_numel() == 0) {
    // As PyTorch's _batch_norm_impl_index: no statistics, no dtype check, a copy scaled by the first
    // weight/bias element so the result stays connected to them.
    Tensor out = ops::clone(input);
    if (Defined(weight)) out = ops::mul(out, ops::select(*weight, 0, 0));
    if (Defined(bias)) out = ops::add(out, ops::select(*bias, 0, 0));
    return out;
  }
  auto result = CallOp<Tensor3>(KILN_OP("aten::native_batch_norm"), input, weight, bias, running_mean, running_var,
                                training, momentum, eps);
  return std::get<0>(result);
}

// --- layer norm ------------------------------------------------------------------------------------
//
// Note [Layer norm as aten's CPU kernel]
// native_layer_norm and native_layer_norm_backward (norm_backward.cc) repeat the arithmetic of
// PyTorch's CPU kernels (aten/src/ATen/native/cpu/layer_norm_kernel.cpp and moments_utils.h) as
// built for AVX2, one rounding at a time, so float32 results are bit-identical to PyTorch's:
//  - Everything runs in the op-math type A: float for float32/float16/bfloat16, double for
//    float64. aten's Vectorized<A> register holds kLanes<A> values (8 floats, 4 doubles); a
//    16-bit row is read 16 values at a time, as two float registers.
//  - A row's moments: Welford's update over whole registers, one running (mean, M2) per lane,
//    16 registers per chunk; chunks merge pairwise in a cascade (Chan's formula: as pairwise
//    summation, so the error grows with log N); the elements after the last whole register run
//    a scalar Welford, and the lanes merge into that last. var = M2 / N.
//  - rstd = 1 / sqrt(max(var, 0) + eps), eps rounded to A;
//    y = fma((x - mean) * rstd, w, b) for float32/float64, fma(x - mean, rstd, b) without a weight
//    (GCC folded aten's `* 1` there), and fma(fma(x, rstd, -rstd * mean), w, b) for the 16-bit
//    types; an absent w or b counts as 1 or 0.
// Each std::fma below stands where aten fuses a multiply-add: its explicit fmadd calls, and the
// contractions GCC made when it compiled PyTorch (found by comparing results bit for bit against
// PyTorch 2.13 over many shapes). The kernels compile with contraction off (the pragma below),
// so GCC adds no fused multiply-add of its own here. A register is a value of GCC's vector
// extension (Reg), so the Welford updates run as AVX2 instructions in aten's lane order; the
// elementwise loops are plain loops GCC vectorizes. Double statistics in two passes were the
// previous scheme: more exact, but not PyTorch's values where cancellation magnifies the last
// bits (a two-element row, a constant row, a large offset), and 2.9x slower than PyTorch.
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")

// One AVX2 register of A as aten's Vectorized<A> holds it (8 floats, 4 doubles), in GCC's vector
// extension: + - * / act lane by lane, a scalar operand stands for a register of copies.
template <typename A>
using Reg [[gnu::vector_size(32)]] = A;
template <typename A>
constexpr int kLanes = 32 / static_cast<int>(sizeof(A));

// a * b + c with one rounding, lane by lane (GCC emits one vfmadd).
template <typename A>
inline Reg<A> Fma(Reg<A> a, Reg<A> b, Reg<A> c) {
  Reg<A> r;
  for (int l = 0; l < kLanes<A>; ++l) r[l] = std::fma(a[l], b[l], c[l]);
  return r;
}

// kLanes<A> values of p as a register of A.
template <typename A, typename T>
inline Reg<A> Load(const T* p) {
  Reg<A> r;
  if constexpr (std::is_same_v<T, A>) {
    std::memcpy(&r, p, sizeof(r));
  } else {
    for (int l = 0; l < kLanes<A>; ++l) r[l] = static_cast<A>(p[l]);
  }
  return r;
}

// Running Welford moments of kLanes<A> interleaved lanes: n values per lane.
template <typename A>
struct LaneMoments {
  int64_t n;
  Reg<A> mean;
  Reg<A> m2;  // sum of squared deviations from the mean
  void Reset() {
    n = 0;
    mean = m2 = Reg<A>{};
  }
  // Chan's update: this becomes the moments of this and o together (aten's AddMomentsVec).
  void Merge(const LaneMoments& o) {
    const int64_t total = n + o.n;
    const A c = total == 0 ? A(0) : static_cast<A>(o.n) / static_cast<A>(total);
    const Reg<A> delta = o.mean - mean;
    const Reg<A> cd = c * delta;
    m2 = Fma<A>(delta * static_cast<A>(n), cd, m2 + o.m2);
    mean = mean + cd;
    n = total;
  }
};

// aten's scalar Welford step for the elements after the last whole register: GCC contracted
// `m2 += delta * (x - mean)` into an FMA in its float16 instantiation only.
template <typename T>
constexpr bool kTailFma = std::is_same_v<T, Half>;

// Mean and biased variance of each of R rows x[r][0, N), as aten's RowwiseMoments (0 and NaN for
// N == 0). The rows' updates are interleaved, each row's in aten's order: a row's Welford steps
// form one chain of dependent adds and multiply-adds, so one row alone ran at the latency of that
// chain (layer norm's forward was 1.06x PyTorch's on 1024 rows of 256); R independent chains fill
// the pipeline, and every row's values are what it alone would give.
template <typename T, int R>
void RowMoments(const T* const* x, int64_t N, opmath_t<T>* mean_out, opmath_t<T>* var_out) {
  using A = opmath_t<T>;
  constexpr int L = kLanes<A>;
  constexpr int H = std::is_same_v<T, A> ? 1 : 2;  // float registers per aten register of T
  constexpr int K = H * L;                         // values per aten register of T
  constexpr int64_t kChunk = 16;                   // registers per chunk
  static const auto kInv = [] {                    // 1 / (j + 1), the Welford weights
    std::array<A, kChunk> w;
    for (int64_t j = 0; j < kChunk; ++j) w[j] = A(1) / static_cast<A>(j + 1);
    return w;
  }();
  const int64_t nreg = N / K, nchunk = (nreg + kChunk - 1) / kChunk;
  int depth = 1;  // aten's CeilLog2(nchunk), at least 1
  while ((int64_t{1} << depth) < nchunk) ++depth;
  // level[r][d] holds the merge of 2^d chunks of row r until a pair completes (the cascade's
  // binary counter)
  LaneMoments<A> level[R][64];
  for (int r = 0; r < R; ++r)
    for (int d = 0; d < depth; ++d) level[r][d].Reset();
  for (int64_t i = 0; i < nchunk; ++i) {
    const int64_t nr = std::min(kChunk, nreg - i * kChunk);
    LaneMoments<A> part[R][H];  // a 16-bit register's two float halves, merged one after the other
    for (int r = 0; r < R; ++r)
      for (int h = 0; h < H; ++h) part[r][h].Reset(), part[r][h].n = nr;
    for (int64_t j = 0; j < nr; ++j) {
      for (int r = 0; r < R; ++r) {
        const T* p = x[r] + (i * kChunk + j) * K;
        for (int h = 0; h < H; ++h) {
          const Reg<A> v = Load<A>(p + h * L);
          const Reg<A> delta = v - part[r][h].mean;
          part[r][h].mean = Fma<A>(delta, Reg<A>{} + kInv[j], part[r][h].mean);
          part[r][h].m2 = Fma<A>(delta, v - part[r][h].mean, part[r][h].m2);
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int h = 0; h < H; ++h) level[r][0].Merge(part[r][h]);
      for (int64_t d = 1, carry = i + 1; d < depth && (carry & 1) == 0; ++d, carry >>= 1) {
        level[r][d].Merge(level[r][d - 1]);
        level[r][d - 1].Reset();
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int d = 1; d < depth; ++d) level[r][0].Merge(level[r][d]);
    int64_t n = 0;
    A mean = 0, m2 = 0;
    for (int64_t i = nreg * K; i < N; ++i) {
      const A v = static_cast<A>(x[r][i]);
      const A delta = v - mean;
      ++n;
      mean = mean + delta / static_cast<A>(n);
      m2 = kTailFma<T> ? std::fma(delta, v - mean, m2) : m2 + delta * (v - mean);
    }
    const int64_t per_lane = nreg * K / L;
    for (int l = 0; l < L; ++l) {  // aten's scalar AddMoments, lane by lane
      const int64_t total = n + per_lane;
      const A c = total == 0 ? A(0) : static_cast<A>(per_lane) / static_cast<A>(total);
      const A delta = level[r][0].mean[l] - mean;
      mean = std::fma(c, delta, mean);
      m2 = m2 + std::fma(delta * delta * c, static_cast<A>(n), level[r][0].m2[l]);
      n = total;
    }
    mean_out[r] = mean;
    var_out[r] = m2 / static_cast<A>(N);
  }
}

// Normalizes rows [lo, hi) of x [M, N] into y; w and b hold N values, or are nullptr when the
// op has no weight or bias (taken as 1 and 0). mean and rstd receive one value per row.
template <typename T>
void LayerNormRows(const T* x, T* y, int64_t lo, int64_t hi, int64_t N, const opmath_t<T>* w,
                   const opmath_t<T>* b, opmath_t<T> eps, opmath_t<T>* mean, opmath_t<T>* rstd) {
  using A = opmath_t<T>;
  constexpr int kRows = 4;  // rows whose moments are computed together (RowMoments)
  A mus[kRows], vars[kRows];
  for (int64_t r = lo; r < hi; ++r) {
    const int64_t k = (r - lo) % kRows;
    if (k == 0) {
      const T* rows[kRows];
      for (int i = 0; i < kRows; ++i) rows[i] = x + std::min(r + i, hi - 1) * N;
      if (hi - r >= kRows) RowMoments<T, kRows>(rows, N, mus, vars);
      else for (int i = 0; i < hi - r; ++i) RowMoments<T, 1>(rows + i, N, mus + i, vars + i);
    }
    const T* xr = x + r * N;
    T* yr = y + r * N;
    const A mu = mus[k], var = vars[k];
    const A rs = A(1) / std::sqrt(std::max(var, A(0)) + eps);
    const A shift = -rs * mu;
    for (int64_t j = 0; j < N; ++j) {
      const A v = static_cast<A>(xr[j]), bj = b ? b[j] : A(0);
      if constexpr (std::is_same_v<T, A>) {
        yr[j] = w ? std::fma((v - mu) * rs, w[j], bj) : std::fma(v - mu, rs, bj);
      } else {
        yr[j] = static_cast<T>(std::fma(std::fma(v, rs, shift), w ? w[j] : A(1), bj));
      }
    }
    mean[r] = mu;
    rstd[r] = rs;
  }
}

#pragma GCC pop_options

std::string ListStr(const SymList& v) { return SizesToString(SymDimVector(v.begin(), v.end())); }

Meta3 NativeLayerNormMeta(const Tensor& input, const SymList& normalized_shape, const OptTensor& weight,
                          const OptTensor& bias, double eps) {
  (void)eps;
  const int64_t nn = static_cast<int64_t>(normalized_shape.size()), nd = input.dim();
  KILN_CHECK(nn >= 1, "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one "
             "element, but got normalized_shape = ", ListStr(normalized_shape));
  const SymDimVector norm(normalized_shape.begin(), normalized_shape.end());
  KILN_CHECK(!Defined(weight) || (*weight)->sym_sizes() == norm, "Expected weight to be of same shape as "
             "normalized_shape, but got weight of shape ", ShapeStr(*weight), " and normalized_shape = ",
             ListStr(normalized_shape));
  KILN_CHECK(!Defined(bias) || (*bias)->sym_sizes() == norm, "Expected bias to be of same shape as "
             "normalized_shape, but got bias of shape ", ShapeStr(*bias), " and normalized_shape = ",
             ListStr(normalized_shape));
  const SymDimVector& s = input->sym_sizes();
  if (nd < nn || SymDimVector(s.end() - nn, s.end()) != norm) {
    std::string expected = "[*";
    for (const SymInt& x : normalized_shape) expected += ", " + x.str();
    KILN_CHECK(false, "Given normalized_shape=", ListStr(normalized_shape), ", expected input with shape ", expected,
               "], but got input of size", ShapeStr(input));
  }
  ScalarType stat = NormStatDtype("layer_norm", input, {{"weight", &weight}, {"bias", &bias}});
  SymDimVector stat_sizes(s.begin(), s.end() - nn);
  stat_sizes.insert(stat_sizes.end(), nn, SymInt(1));
  return {TensorMeta{s, {}, input.dtype(), input.device()}, TensorMeta{stat_sizes, {}, stat, input.device()},
          TensorMeta{stat_sizes, {}, stat, input.device()}};
}

Tensor3 NativeLayerNormCPU(const Tensor& input, const SymList& normalized_shape, const OptTensor& weight,
                           const OptTensor& bias, double eps) {
  auto [om, mm, rm] = NativeLayerNormMeta(input, normalized_shape, weight, bias, eps);
  Tensor out = EmptyFromMeta(om), mean_t = EmptyFromMeta(mm), rstd_t = EmptyFromMeta(rm);
  int64_t N = 1, M = 1;  // M rows of N values; an empty row has mean 0 and rstd NaN, as in PyTorch
  for (const SymInt& x : normalized_shape) N *= x.expect_int();
  for (int64_t d = 0; d < input.dim() - static_cast<int64_t>(normalized_shape.size()); ++d) M *= input.size(d);
  if (input.device().is_cuda()) {
    KILN_DISPATCH_FLOATING(input.dtype(), "layer_norm", [] {});  // the CPU kernel's dtype error
    LayerNormCUDA(input, static_cast<int64_t>(normalized_shape.size()), Defined(weight) ? &*weight : nullptr,
                  Defined(bias) ? &*bias : nullptr, eps, out, mean_t, rstd_t);
    return {out, mean_t, rstd_t};
  }
  Tensor x = ops::contiguous(input);
  KILN_DISPATCH_FLOATING(x.dtype(), "layer_norm", [&] {
    using A = opmath_t<scalar_t>;
    constexpr ScalarType kA = CppTypeToScalarType<A>::value;
    // the parameters in A (exact: they are A or narrower), and the statistics written in place
    // when they are A (a float16/bfloat16 input's without float32 parameters are not)
    const Tensor w = Defined(weight) ? ops::contiguous(CastTo(*weight, kA)) : Tensor();
    const Tensor b = Defined(bias) ? ops::contiguous(CastTo(*bias, kA)) : Tensor();
    const bool stats_in_a = mean_t.dtype() == kA;
    std::vector<A> mean(stats_in_a ? 0 : M), rstd(stats_in_a ? 0 : M);
    A* mp = stats_in_a ? mean_t.data_ptr<A>() : mean.data();
    A* rp = stats_in_a ? rstd_t.data_ptr<A>() : rstd.data();
    const scalar_t* px = x.data_ptr<scalar_t>();
    scalar_t* py = out.data_ptr<scalar_t>();
    ParallelFor(0, M, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(N, 1)), [&](int64_t lo, int64_t hi) {
      LayerNormRows(px, py, lo, hi, N, w.defined() ? w.data_ptr<A>() : nullptr, b.defined() ? b.data_ptr<A>() : nullptr,
                    static_cast<A>(eps), mp, rp);
    });
    for (int64_t i = 0; i < static_cast<int64_t>(mean.size()); ++i) {
      mean_t.data_ptr<scalar_t>()[i] = static_cast<scalar_t>(mean[i]);
      rstd_t.data_ptr<scalar_t>()[i] = static_cast<scalar_t>(rstd[i]);
    }
  });
  return {out, mean_t, rstd_t};
}

Tensor LayerNorm(const Tensor& input, const SymList& normalized_shape, const OptTensor& weight, const OptTensor& bias,
                 double eps, bool cudnn_enable) {
  (void)cudnn_enable;
  auto result = CallOp<Tensor3>(KILN_OP("aten::native_layer_norm"), input, normalized_shape, weight, bias, eps);
  return std::get<0>(result);
}

// --- group norm ------------------------------------------------------------------------------------

void CheckGroupNormInputs(const Tensor& input, const OptTensor& weight, const OptTensor& bias, const SymInt& C,
                          int64_t group) {
  KILN_CHECK(group > 0, "Expected num groups to be greater than 0, got ", group);
  KILN_CHECK(C.mod(group) == 0, "Expected number of channels in input to be divisible by num_groups, but got input "
             "of shape ", ShapeStr(input), " and num_groups=", group);
  KILN_CHECK(!Defined(weight) || ((*weight).dim() == 1 && (*weight)->sym_numel() == C), "Expected weight to be a "
             "vector of size equal to the number of channels in input, but got weight of shape ", ShapeStr(*weight),
             " and input of shape ", ShapeStr(input));
  KILN_CHECK(!Defined(bias) || ((*bias).dim() == 1 && (*bias)->sym_numel() == C), "Expected bias to be a vector of "
             "size equal to the number of channels in input, but got bias of shape ", ShapeStr(*bias),
             " and input of shape ", ShapeStr(input));
}

Meta3 NativeGroupNormMeta(const Tensor& input, const OptTensor& weight, const OptTensor& bias, const SymInt& N,
                          const SymInt& C, const SymInt& HxW, int64_t group, double eps) {
  (void)eps;
  CheckGroupNormInputs(input, weight, bias, C, group);
  KILN_CHECK(input->sym_numel() == N * C * HxW, "Expected input of size ", ShapeStr(input), " to have N * C * HxW = ",
             N, " * ", C, " * ", HxW, " elements");
  ScalarType stat = NormStatDtype("group_norm", input, {{"weight", &weight}, {"bias", &bias}});
  return {TensorMeta{input->sym_sizes(), {}, input.dtype(), input.device()},
          TensorMeta{{N, SymInt(group)}, {}, stat, input.device()},
          TensorMeta{{N, SymInt(group)}, {}, stat, input.device()}};
}

Tensor3 NativeGroupNormCPU(const Tensor& input, const OptTensor& weight, const OptTensor& bias, const SymInt& N_sym,
                           const SymInt& C_sym, const SymInt& HxW_sym, int64_t group, double eps) {
  auto [om, mm, rm] = NativeGroupNormMeta(input, weight, bias, N_sym, C_sym, HxW_sym, group, eps);
  Tensor out = EmptyFromMeta(om), mean_t = EmptyFromMeta(mm), rstd_t = EmptyFromMeta(rm);
  const int64_t N = N_sym.expect_int(), C = C_sym.expect_int(), HxW = HxW_sym.expect_int();
  const int64_t D = C / group;  // channels per group
  if (input.device().is_cuda()) {
    KILN_DISPATCH_FLOATING(input.dtype(), "group_norm", [] {});  // the CPU kernel's dtype error
    GroupNormCUDA(input, Defined(weight) ? &*weight : nullptr, Defined(bias) ? &*bias : nullptr, N, C, HxW, group,
                  eps, out, mean_t, rstd_t);
    return {out, mean_t, rstd_t};
  }
  Tensor x = ops::contiguous(input);
  std::vector<double> mean(N * group), rstd(N * group), scale(N * C), shift(N * C);
  const std::vector<double> w = ReadVector(weight, C, 1), b = ReadVector(bias, C, 0);
  KILN_DISPATCH_FLOATING(x.dtype(), "group_norm", [&] {
    const scalar_t* px = x.data_ptr<scalar_t>();
    ParallelFor(0, N * group, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(D * HxW, 1)),
                [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        double var;
        Moments(px + r * D * HxW, 1, D * HxW, D * HxW, &mean[r], &var);
        if (D * HxW == 0) mean[r] = 0;  // an empty group: mean 0 and rstd NaN, as PyTorch's
        rstd[r] = 1.0 / std::sqrt(var + eps);
        for (int64_t d = 0; d < D; ++d) {
          const int64_t c = (r % group) * D + d, nc = (r / group) * C + c;
          scale[nc] = rstd[r] * w[c];
          shift[nc] = b[c] - mean[r] * scale[nc];
        }
      }
    });
    ApplyAffine(px, out.data_ptr<scalar_t>(), 1, N * C, HxW, scale, shift);
  });
  WriteVector(mean_t, mean);
  WriteVector(rstd_t, rstd);
  return {out, mean_t, rstd_t};
}

Tensor GroupNorm(const Tensor& input, int64_t num_groups, const OptTensor& weight, const OptTensor& bias, double eps,
                 bool cudnn_enabled) {
  (void)cudnn_enabled;
  KILN_CHECK(input.dim() >= 2, "Expected at least 2 dimensions for input tensor but received ", input.dim());
  const SymDimVector& s = input->sym_sizes();
  CheckGroupNormInputs(input, weight, bias, s[1], num_groups);
  SymInt hxw = 1;
  for (int64_t d = 2; d < input.dim(); ++d) hxw = hxw * s[d];
  auto result = CallOp<Tensor3>(KILN_OP("aten::native_group_norm"), input, weight, bias, s[0], s[1], hxw,
                                num_groups, eps);
  return std::get<0>(result);
}

}  // namespace

void RegisterNormOps(Registry& r) {
  r.Def("native_batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var, "
        "bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor)", {Tag::core}, kFunction)
      .CPUAndCUDA<&NativeBatchNormCPU>().Meta<&NativeBatchNormMeta>();
  r.Def("_native_batch_norm_legit(Tensor input, Tensor? weight, Tensor? bias, Tensor(a!) running_mean, "
        "Tensor(b!) running_var, bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor)",
        {Tag::core}, kFunction)
      .CPUAndCUDA<&LegitCPU>().Meta<&LegitMeta>();
  r.Def("_native_batch_norm_legit.no_stats(Tensor input, Tensor? weight, Tensor? bias, bool training, "
        "float momentum, float eps) -> (Tensor, Tensor, Tensor)", {Tag::core}, kFunction)
      .CPUAndCUDA<&LegitNoStatsCPU>().Meta<&LegitNoStatsMeta>();
  r.Def("_native_batch_norm_legit_no_training(Tensor input, Tensor? weight, Tensor? bias, Tensor running_mean, "
        "Tensor running_var, float momentum, float eps) -> (Tensor, Tensor, Tensor)", {Tag::core}, kFunction)
      .CPUAndCUDA<&LegitNoTrainingCPU>().Meta<&LegitNoTrainingMeta>();
  r.Def("_native_batch_norm_legit_functional(Tensor input, Tensor? weight, Tensor? bias, Tensor running_mean, "
        "Tensor running_var, bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor, "
        "Tensor running_mean_out, Tensor running_var_out)", {}, kFunction)
      .CPUAndCUDA<&LegitFunctionalCPU>().Meta<&LegitFunctionalMeta>();
  r.Def("batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var, "
        "bool training, float momentum, float eps, bool cudnn_enabled) -> Tensor", {}, kFunction)
      .Composite<&BatchNorm>();
  r.Def("native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias, float eps) -> "
        "(Tensor, Tensor, Tensor)", {Tag::core}, kFunction).Cost(CostClass::kMemoryBound)
      .CPUAndCUDA<&NativeLayerNormCPU>().Meta<&NativeLayerNormMeta>();
  r.Def("layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
        "float eps=1e-05, bool cudnn_enable=True) -> Tensor", {}, kFunction)
      .Composite<&LayerNorm>();
  r.Def("native_group_norm(Tensor input, Tensor? weight, Tensor? bias, SymInt N, SymInt C, SymInt HxW, int group, "
        "float eps) -> (Tensor, Tensor, Tensor)", {Tag::core}, kFunction)
      .CPUAndCUDA<&NativeGroupNormCPU>().Meta<&NativeGroupNormMeta>();
  r.Def("group_norm(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None, float eps=1e-05, "
        "bool cudnn_enabled=True) -> Tensor", {}, kFunction)
      .Composite<&GroupNorm>();
}

}  // namespace kiln
