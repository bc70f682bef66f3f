// tensor/ops/norm_backward.cc: the backward ops of the normalization layers
// (native_batch_norm_backward, native_layer_norm_backward, native_group_norm_backward).
//
// Each takes the statistics its forward saved (norm.cc: save_mean/save_invstd, mean/rstd of
// shape [*, 1...], or [N, group]) and an output_mask saying which of (grad_input, grad_weight,
// grad_bias) to compute; an unmasked output is an undefined tensor (None in Python), in the meta
// function too. The inputs are made contiguous and viewed as [outer, channels, inner] (batch
// norm), [rows, elems] (layer norm) or [N, group, D, HxW] (group norm), with PyTorch's CPU formulas:
//
//   batch norm (train): dx = (dy - mean(dy) - (x - mean) * dot(dy, x - mean) * invstd^2 / M) * invstd * w
//   layer/group norm:   dx = rstd * w * dy + b * x + c,  b = (db * mean - ds) * rstd^3 / M,
//                       c = -b * mean - db * rstd / M,   ds = sum(dy * w * x), db = sum(dy * w)
//
// Batch and group norm take their per-slice sums in double, in parallel over channels or
// (n, group) pairs. Layer norm repeats PyTorch's kernel rounding for rounding (Note [Layer norm as
// aten's CPU kernel], norm.cc): sums in the op-math type as aten's vectorized reductions take
// them, and the weight and bias gradients from per-thread partials.
//
// Parameter gradients have the parameter's dtype (float32 for a float16/bfloat16 input with
// float32 parameters or statistics, PyTorch's "mixed type").
#include <algorithm>
#include <cmath>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tensor/ops/common.h"
#include "tensor/ops/reduce_cuda.h"

namespace kiln {
namespace {

using OptTensor = std::optional<Tensor>;
using SymList = std::vector<SymInt>;
using OptMeta = std::optional<TensorMeta>;
using OptMeta3 = std::tuple<OptMeta, OptMeta, OptMeta>;

// batch/group norm backward outputs: grad_input like input, weight and bias grads [C] in pdt.
OptMeta3 PerChannelGradMetas(const Tensor& input, const SymInt& C, ScalarType pdt, const std::vector<bool>& mask) {
  OptMeta3 out;
  if (mask[0]) std::get<0>(out) = TensorMeta{input->sym_sizes(), {}, input.dtype(), input.device()};
  if (mask[1]) std::get<1>(out) = TensorMeta{{C}, {}, pdt, input.device()};
  if (mask[2]) std::get<2>(out) = TensorMeta{{C}, {}, pdt, input.device()};
  return out;
}
using Tensor3 = std::tuple<Tensor, Tensor, Tensor>;

bool Defined(const OptTensor& t) { return t && t->defined(); }

// All values of a tensor (any strides, any floating dtype) as doubles, row-major.
std::vector<double> ReadAll(const Tensor& t) {
  std::vector<double> v(t.numel());
  if (v.empty()) return v;
  Tensor c = ops::contiguous(t);
  KILN_DISPATCH_FLOATING(c.dtype(), "norm_backward", [&] {
    const scalar_t* p = c.data_ptr<scalar_t>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(static_cast<opmath_t<scalar_t>>(p[i]));
  });
  return v;
}
std::vector<double> ReadOr(const OptTensor& t, int64_t n, double dflt) {
  return Defined(t) ? ReadAll(*t) : std::vector<double>(n, dflt);
}

void WriteAll(const Tensor& t, const std::vector<double>& v) {
  if (!t.defined() || v.empty()) return;
  KILN_DISPATCH_FLOATING(t.dtype(), "norm_backward", [&] {
    scalar_t* p = t.data_ptr<scalar_t>();
    for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<scalar_t>(static_cast<opmath_t<scalar_t>>(v[i]));
  });
}

void CheckMask(const char* op, const std::vector<bool>& mask) {
  KILN_CHECK(mask.size() == 3, "[", op, "] output_mask must have 3 elements, got ", mask.size());
}

void CheckGradShape(const char* op, const Tensor& grad, const Tensor& input) {
  KILN_CHECK(grad->sym_sizes() == input->sym_sizes(), "[", op, "] expected grad_out of size ", ShapeStr(input),
             " (the input's), but got ", ShapeStr(grad));
  KILN_CHECK_NOT_IMPLEMENTED(IsFloating(input.dtype()), "\"", op, "\" not implemented for '",
                             ScalarTypeDisplayName(input.dtype()), "'");
  KILN_CHECK(grad.dtype() == input.dtype(), "[", op, "] expected scalar type ", ScalarTypeDisplayName(input.dtype()),
             " for grad_out but found ", ScalarTypeDisplayName(grad.dtype()));
  CheckSameDevice(op, grad, input);
}

// A 1-D-or-any tensor argument must hold `n` elements.
void CheckNumel(const char* op, const char* what, const OptTensor& t, const SymInt& n) {
  if (!Defined(t)) return;
  KILN_CHECK((*t)->sym_numel() == n, "[", op, "] expected ", what, " to have ", n.str(), " elements, but got ",
             what, " of size ", ShapeStr(*t));
}

// Parameter-gradient dtype: float32 when a 16-bit input comes with any float32 parameter or statistic.
ScalarType ParamDtype(const Tensor& input, std::initializer_list<const OptTensor*> params) {
  if (!IsReducedFloat(input.dtype())) return input.dtype();
  for (const OptTensor* p : params)
    if (Defined(*p) && (*p)->dtype() == ScalarType::Float32) return ScalarType::Float32;
  return input.dtype();
}

Tensor3 Allocate(const OptMeta3& m) {
  auto make = [](const OptMeta& x) { return x ? EmptyFromMeta(*x) : Tensor(); };
  return {make(std::get<0>(m)), make(std::get<1>(m)), make(std::get<2>(m))};
}

// Adds sum(g[i]) and sum(g[i] * (x[i] - center)) over n elements to *sg and *sgx: kLanes partial
// sums in the opmath type, which the compiler keeps in vector registers, then combined in double.
template <typename T>
void LaneSums(const T* g, const T* x, int64_t n, double center, double* sg, double* sgx) {
  using M = opmath_t<T>;
  constexpr int kLanes = 16;
  M a[kLanes] = {}, b[kLanes] = {};
  const M cm = static_cast<M>(center);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const M gv = static_cast<M>(g[i + l]);
      a[l] += gv;
      b[l] += gv * (static_cast<M>(x[i + l]) - cm);
    }
  }
  double s = 0, t = 0;
  for (int l = 0; l < kLanes; ++l) s += a[l], t += b[l];
  for (; i < n; ++i) {
    const double gv = static_cast<double>(static_cast<M>(g[i]));
    s += gv;
    t += gv * (static_cast<double>(static_cast<M>(x[i])) - center);
  }
  *sg += s;
  *sgx += t;
}

// --- batch norm ----------------------------------------------------------------------------------

constexpr const char* kBn = "native_batch_norm_backward";

OptMeta3 BatchNormBwMeta(const Tensor& grad, const Tensor& input, const OptTensor& weight,
                         const OptTensor& running_mean, const OptTensor& running_var, const OptTensor& save_mean,
                         const OptTensor& save_invstd, bool train, double eps, std::vector<bool> mask) {
  (void)eps;
  CheckMask(kBn, mask);
  KILN_CHECK(input.dim() >= 2, "[", kBn, "] expected an input with at least 2 dimensions (N, C, ...), but got ",
             "input of size ", ShapeStr(input));
  CheckGradShape(kBn, grad, input);
  const SymInt& C = input->sym_sizes()[1];
  CheckNumel(kBn, "weight", weight, C);
  if (train) {
    KILN_CHECK(Defined(save_mean) && Defined(save_invstd), "[", kBn,
               "] save_mean and save_invstd must be defined in training mode");
    CheckNumel(kBn, "save_mean", save_mean, C);
    CheckNumel(kBn, "save_invstd", save_invstd, C);
  } else {
    KILN_CHECK(Defined(running_mean) && Defined(running_var), "[", kBn,
               "] running_mean and running_var must be defined in evaluation mode");
    CheckNumel(kBn, "running_mean", running_mean, C);
    CheckNumel(kBn, "running_var", running_var, C);
  }
  const ScalarType pdt = ParamDtype(input, {&weight, &running_mean, &running_var, &save_mean, &save_invstd});
  return PerChannelGradMetas(input, C, pdt, mask);
}

template <typename T>
void BatchNormBwKernel(const T* g, const T* x, T* gi, int64_t N, int64_t C, int64_t S, bool train,
                       const std::vector<double>& mean, const std::vector<double>& invstd, const std::vector<double>& w,
                       std::vector<double>& gw, std::vector<double>& gb) {
  using M = opmath_t<T>;
  const int64_t count = N * S;
  ParallelFor(0, C, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(count, 1)), [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c) {
      // sum(dy) and dot(dy, x - mean) over the channel.
      double sum = 0, dot = 0;
      for (int64_t n = 0; n < N; ++n) {
        const T* gp = g + (n * C + c) * S;
        const T* xp = x + (n * C + c) * S;
        LaneSums<T>(gp, xp, S, mean[c], &sum, &dot);
      }
      gw[c] = dot * invstd[c];
      gb[c] = sum;
      if (!gi) continue;
      const double k = count > 0 ? dot * invstd[c] * invstd[c] / count : 0.0;
      const double gm = count > 0 ? sum / count : 0.0;
      const double scale = invstd[c] * w[c];
      // dx = dy * a + x * b + c0 (train), dy * a (eval)
      const M a = static_cast<M>(scale), b = static_cast<M>(train ? -k * scale : 0.0);
      const M c0 = static_cast<M>(train ? (mean[c] * k - gm) * scale : 0.0);
      for (int64_t n = 0; n < N; ++n) {
        const T* gp = g + (n * C + c) * S;
        const T* xp = x + (n * C + c) * S;
        T* op = gi + (n * C + c) * S;
        for (int64_t s = 0; s < S; ++s)
          op[s] = static_cast<T>(static_cast<M>(gp[s]) * a + static_cast<M>(xp[s]) * b + c0);
      }
    }
  });
}

Tensor3 BatchNormBw(const Tensor& grad, const Tensor& input, const OptTensor& weight, const OptTensor& running_mean,
                    const OptTensor& running_var, const OptTensor& save_mean, const OptTensor& save_invstd, bool train,
                    double eps, std::vector<bool> mask) {
  auto [gi, gw, gb] = Allocate(BatchNormBwMeta(grad, input, weight, running_mean, running_var, save_mean, save_invstd,
                                               train, eps, mask));
  const int64_t N = input.size(0), C = input.size(1), S = input.numel() / std::max<int64_t>(N * C, 1);
  if (input.device().is_cuda()) {
    if (input.numel() == 0) {  // nothing to sum: zero parameter gradients
      if (gw.defined()) ops::fill_(gw, Scalar(int64_t(0)));
      if (gb.defined()) ops::fill_(gb, Scalar(int64_t(0)));
      return {gi, gw, gb};
    }
    BatchNormBackwardCUDA(grad, input, Defined(weight) ? &*weight : nullptr, train ? *save_mean : *running_mean,
                          train ? *save_invstd : *running_var, train, eps, gi.defined() ? &gi : nullptr,
                          gw.defined() ? &gw : nullptr, gb.defined() ? &gb : nullptr);
    return {gi, gw, gb};
  }
  std::vector<double> mean, invstd;
  if (train) {
    mean = ReadAll(*save_mean);
    invstd = ReadAll(*save_invstd);
  } else {
    mean = ReadAll(*running_mean);
    invstd = ReadAll(*running_var);
    for (double& v : invstd) v = 1.0 / std::sqrt(v + eps);
  }
  const std::vector<double> w = ReadOr(weight, C, 1.0);
  std::vector<double> dw(C, 0.0), db(C, 0.0);
  Tensor g = ops::contiguous(grad), x = ops::contiguous(input);
  if (input.numel() > 0) {
    KILN_DISPATCH_FLOATING(input.dtype(), kBn, [&] {
      BatchNormBwKernel<scalar_t>(g.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(),
                                  gi.defined() ? gi.data_ptr<scalar_t>() : nullptr, N, C, S, train, mean, invstd, w,
                                  dw, db);
    });
  }
  WriteAll(gw, dw);
  WriteAll(gb, db);
  return {gi, gw, gb};
}

// --- layer norm ----------------------------------------------------------------------------------

constexpr const char* kLn = "native_layer_norm_backward";

OptMeta3 LayerNormBwMeta(const Tensor& grad, const Tensor& input, const SymList& normalized_shape,
                         const Tensor& mean, const Tensor& rstd, const OptTensor& weight, const OptTensor& bias,
                         std::vector<bool> mask) {
  CheckMask(kLn, mask);
  const int64_t nn = static_cast<int64_t>(normalized_shape.size()), nd = input.dim();
  const SymDimVector norm(normalized_shape.begin(), normalized_shape.end());
  const SymDimVector& s = input->sym_sizes();
  KILN_CHECK(nn >= 1 && nd >= nn && SymDimVector(s.end() - nn, s.end()) == norm, "[", kLn, "] Given normalized_shape=",
             SizesToString(norm), ", expected input with shape [*, ...normalized_shape], but got input of size ",
             ShapeStr(input));
  CheckGradShape(kLn, grad, input);
  SymInt rows = 1;
  for (int64_t d = 0; d < nd - nn; ++d) rows = rows * s[d];
  CheckNumel(kLn, "mean", mean, rows);
  CheckNumel(kLn, "rstd", rstd, rows);
  for (const auto& [what, t] : {std::pair<const char*, const OptTensor*>{"weight", &weight}, {"bias", &bias}}) {
    KILN_CHECK(!Defined(*t) || (**t)->sym_sizes() == norm, "[", kLn, "] Expected ", what, " to be of same shape as "
               "normalized_shape, but got ", what, " of shape ", ShapeStr(**t), " and normalized_shape = ",
               SizesToString(norm));
  }
  const OptTensor mean_opt = mean, rstd_opt = rstd;
  const ScalarType pdt = ParamDtype(input, {&mean_opt, &rstd_opt});
  OptMeta3 out;
  if (mask[0]) std::get<0>(out) = TensorMeta{s, {}, input.dtype(), input.device()};
  if (mask[1]) std::get<1>(out) = TensorMeta{norm, {}, Defined(weight) ? weight->dtype() : pdt, input.device()};
  if (mask[2]) std::get<2>(out) = TensorMeta{norm, {}, Defined(bias) ? bias->dtype() : pdt, input.device()};
  return out;
}

// Note [Layer norm as aten's CPU kernel] (norm.cc) covers the backward too. Per row, with
// a = rstd, ds = sum(dy * x * w) and db = sum(dy * w) reduced as aten's vec::map*_reduce_all
// reduce them (RowDots, RowDots16):
//   dx = fma(b, x, a * dy * w) + c,  b = fma(db, mean, -ds) * a * a * a / N,
//   c = fma(-b, mean, -(db * a / N)).
// The weight and bias gradients sum rows into per-thread partials held in the input's dtype (so
// in float16/bfloat16 they stop growing where PyTorch's do, 256 + 1 == 256), the rows split among
// GetNumThreads() threads in contiguous blocks as at::parallel_for splits them; the partials are
// then added in thread order. They are PyTorch's bit for bit when both run the same number of
// threads (at::get_num_threads() and kiln.get_num_threads()).
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")

template <typename A>
constexpr int kLanes = 32 / static_cast<int>(sizeof(A));  // values in one AVX2 register

// v[0] + v[1] + ... + v[n - 1] in order: vec_reduce_all given a count, for a part register.
template <typename A>
A SumInOrder(const A* v, int n) {
  A s = v[0];
  for (int l = 1; l < n; ++l) s = s + v[l];
  return s;
}

// The sum of one register's lanes as aten's vec_reduce_all takes it: a tree of lane pairs for 8
// floats (its AVX2 shuffles), lane after lane for 4 doubles (its generic path).
template <typename A>
A RegisterSum(const A* v) {
  if constexpr (kLanes<A> == 8) {
    A s4[4], s2[2];
    for (int l = 0; l < 4; ++l) s4[l] = v[l] + v[l + 4];
    for (int l = 0; l < 2; ++l) s2[l] = s4[l] + s4[l + 2];
    return s2[0] + s2[1];
  } else {
    return SumInOrder(v, kLanes<A>);
  }
}

// (ds, db) of a float32/float64 row, w == nullptr for no weight: a register of partial sums
// started from the first kLanes products, whole registers added to it, the part register at the
// end added with a fused multiply-add (GCC contracted that one), then RegisterSum. A row shorter
// than a register sums in order.
template <typename A>
std::pair<A, A> RowDots(const A* dy, const A* x, const A* w, int64_t N) {
  constexpr int L = kLanes<A>;
  auto ps = [&](int64_t j) { return w ? dy[j] * x[j] * w[j] : dy[j] * x[j]; };
  auto pb = [&](int64_t j) { return w ? dy[j] * w[j] : dy[j]; };
  A s[L], t[L];
  if (N < L) {
    for (int64_t j = 0; j < N; ++j) s[j] = ps(j), t[j] = pb(j);
    return {SumInOrder(s, static_cast<int>(N)), SumInOrder(t, static_cast<int>(N))};
  }
  for (int l = 0; l < L; ++l) s[l] = ps(l), t[l] = pb(l);
  int64_t d = L;
  for (; d + L <= N; d += L) {
    for (int l = 0; l < L; ++l) s[l] = s[l] + ps(d + l), t[l] = t[l] + pb(d + l);
  }
  for (int64_t j = d; j < N; ++j) {
    const int l = static_cast<int>(j - d);
    s[l] = w ? std::fma(dy[j] * x[j], w[j], s[l]) : std::fma(dy[j], x[j], s[l]);
    t[l] = w ? std::fma(dy[j], w[j], t[l]) : t[l] + dy[j];
  }
  return {RegisterSum(s), RegisterSum(t)};
}

// (ds, db) of a float16/bfloat16 row in float. aten reads 16 values per register as two float
// halves with their own partial sums, and adds the halves before the final RegisterSum. With
// float32 weights ("mixed type") its hand-written loop forms the products as x * (dy * w) and
// fuses only the ds additions; otherwise every addition of a product is fused. A row of 9 to 15
// values folds its upper half into the lower one and sums the 8 lanes in order (as a tree, in
// the mixed loop); a shorter row sums in order.
template <typename T>
std::pair<float, float> RowDots16(const T* dy, const T* x, const float* w, bool mixed, int64_t N) {
  constexpr int L = 8, K = 16;
  const bool hand = w && mixed;
  auto f = [](T v) { return static_cast<float>(v); };
  // product j as a partial sum's first term, and its fused addition to a partial sum
  auto ps = [&](int64_t j) {
    return hand ? f(x[j]) * (f(dy[j]) * w[j]) : w ? f(dy[j]) * f(x[j]) * w[j] : f(dy[j]) * f(x[j]);
  };
  auto pb = [&](int64_t j) { return w ? f(dy[j]) * w[j] : f(dy[j]); };
  auto add_s = [&](int64_t j, float acc) {
    if (hand) return std::fma(f(x[j]), f(dy[j]) * w[j], acc);
    return w ? std::fma(f(dy[j]) * f(x[j]), w[j], acc) : std::fma(f(dy[j]), f(x[j]), acc);
  };
  auto add_b = [&](int64_t j, float acc) {
    if (hand) return acc + f(dy[j]) * w[j];
    return w ? std::fma(f(dy[j]), w[j], acc) : acc + f(dy[j]);
  };
  float s[2][L], t[2][L];
  const int first = static_cast<int>(std::min<int64_t>(N, K));
  for (int j = 0; j < first; ++j) s[j / L][j % L] = ps(j), t[j / L][j % L] = pb(j);
  if (N <= L) return {SumInOrder(s[0], first), SumInOrder(t[0], first)};
  if (N < K) {  // the upper half folds into the lower one
    for (int l = 0; l < N - L; ++l) s[0][l] = add_s(L + l, s[0][l]), t[0][l] = add_b(L + l, t[0][l]);
    if (hand) return {RegisterSum(s[0]), RegisterSum(t[0])};
    return {SumInOrder(s[0], L), SumInOrder(t[0], L)};
  }
  int64_t d = K;
  for (; d + K <= N; d += K) {
    for (int h = 0; h < 2; ++h) {
      for (int l = 0; l < L; ++l) {
        s[h][l] = add_s(d + h * L + l, s[h][l]);
        t[h][l] = add_b(d + h * L + l, t[h][l]);
      }
    }
  }
  for (int64_t j = d; j < N; ++j) {
    const int h = static_cast<int>(j - d) / L, l = static_cast<int>(j - d) % L;
    s[h][l] = add_s(j, s[h][l]);
    t[h][l] = add_b(j, t[h][l]);
  }
  for (int l = 0; l < L; ++l) s[0][l] = s[0][l] + s[1][l], t[0][l] = t[0][l] + t[1][l];
  return {RegisterSum(s[0]), RegisterSum(t[0])};
}

// Rows [lo, hi) of the layer norm backward. gi: dx (nullptr when not wanted); pw, pb: this
// thread's weight/bias partials (nullptr when not wanted); w: the weight or nullptr; mixed: w
// is float32 for a 16-bit input.
template <typename T>
void LayerNormBwRows(const T* g, const T* x, T* gi, int64_t lo, int64_t hi, int64_t N, const opmath_t<T>* mean,
                     const opmath_t<T>* rstd, const opmath_t<T>* w, bool mixed, T* pw, T* pb) {
  using A = opmath_t<T>;
  const A scale = A(1) / static_cast<A>(N);
  for (int64_t r = lo; r < hi; ++r) {
    const T* dy = g + r * N;
    const T* xr = x + r * N;
    const A a = rstd[r], mu = mean[r];
    if (pw) {
      const A shift = -a * mu;
      for (int64_t j = 0; j < N; ++j) {
        pw[j] = static_cast<T>(std::fma(static_cast<A>(dy[j]), std::fma(a, static_cast<A>(xr[j]), shift),
                                        static_cast<A>(pw[j])));
      }
    }
    if (pb) {
      for (int64_t j = 0; j < N; ++j) pb[j] = static_cast<T>(static_cast<A>(pb[j]) + static_cast<A>(dy[j]));
    }
    if (!gi) continue;
    A ds, db;
    if constexpr (std::is_same_v<T, A>) {
      std::tie(ds, db) = RowDots(dy, xr, w, N);
    } else {
      std::tie(ds, db) = RowDots16(dy, xr, w, mixed, N);
    }
    const A b = std::fma(db, mu, -ds) * a * a * a * scale;
    const A c = std::fma(-b, mu, -(db * a * scale));
    T* dx = gi + r * N;
    for (int64_t j = 0; j < N; ++j) {
      const A ady = a * static_cast<A>(dy[j]);
      dx[j] = static_cast<T>(std::fma(b, static_cast<A>(xr[j]), w ? ady * w[j] : ady) + c);
    }
  }
}

// The whole backward: rows in GetNumThreads() contiguous blocks (aten's parallel_for split),
// each with its own weight/bias partials, then the partials added in block order into gw, gb
// (N values each, nullptr when not wanted). mean, rstd: M values; w: N values or nullptr.
template <typename T>
void LayerNormBwKernel(const T* g, const T* x, T* gi, int64_t M, int64_t N, const opmath_t<T>* mean,
                       const opmath_t<T>* rstd, const opmath_t<T>* w, bool mixed, opmath_t<T>* gw,
                       opmath_t<T>* gb) {
  using A = opmath_t<T>;
  const int nthreads = GetNumThreads();
  const int64_t nblocks = M > 1 && nthreads > 1 && !InParallelRegion() ? std::min<int64_t>(nthreads, M) : 1;
  const int64_t per_block = (M + nblocks - 1) / nblocks;
  std::vector<T> partial_w(gw ? nthreads * N : 0, T(0.f)), partial_b(gb ? nthreads * N : 0, T(0.f));
  ParallelFor(0, nblocks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t k = lo; k < hi; ++k) {
      LayerNormBwRows(g, x, gi, k * per_block, std::min(M, (k + 1) * per_block), N, mean, rstd, w, mixed,
                      gw ? partial_w.data() + k * N : nullptr, gb ? partial_b.data() + k * N : nullptr);
    }
  });
  for (int64_t j = 0; j < N; ++j) {
    A sw = 0, sb = 0;
    for (int k = 0; k < nthreads; ++k) {
      if (gw) sw = sw + static_cast<A>(partial_w[k * N + j]);
      if (gb) sb = sb + static_cast<A>(partial_b[k * N + j]);
    }
    if (gw) gw[j] = sw;
    if (gb) gb[j] = sb;
  }
}

#pragma GCC pop_options

Tensor3 LayerNormBw(const Tensor& grad, const Tensor& input, const SymList& normalized_shape, const Tensor& mean,
                    const Tensor& rstd, const OptTensor& weight, const OptTensor& bias, std::vector<bool> mask) {
  auto [gi, gw, gb] = Allocate(LayerNormBwMeta(grad, input, normalized_shape, mean, rstd, weight, bias, mask));
  int64_t N = 1;
  for (const SymInt& v : normalized_shape) N *= v.expect_int();
  const int64_t M = N == 0 ? 0 : input.numel() / N;
  if (input.device().is_cuda()) {
    KILN_DISPATCH_FLOATING(input.dtype(), kLn, [] {});  // the CPU kernel's dtype error
    LayerNormBackwardCUDA(grad, input, static_cast<int64_t>(normalized_shape.size()), mean, rstd,
                          Defined(weight) ? &*weight : nullptr, gi.defined() ? &gi : nullptr,
                          gw.defined() ? &gw : nullptr, gb.defined() ? &gb : nullptr);
    return {gi, gw, gb};
  }
  Tensor g = ops::contiguous(grad), x = ops::contiguous(input);
  KILN_DISPATCH_FLOATING(input.dtype(), kLn, [&] {
    using A = opmath_t<scalar_t>;
    constexpr ScalarType kA = CppTypeToScalarType<A>::value;
    // statistics and weight in A (exact: they are A or narrower); the parameter gradients
    // written in place when they are A (a float16/bfloat16 input's without float32 parameters
    // are not)
    auto in_a = [&](const Tensor& t) { return ops::contiguous(CastTo(t, kA)); };
    const Tensor mu = in_a(mean), rs = in_a(rstd), w = Defined(weight) ? in_a(*weight) : Tensor();
    std::vector<A> dw_copy(gw.defined() && gw.dtype() != kA ? N : 0), db_copy(gb.defined() && gb.dtype() != kA ? N : 0);
    auto out_ptr = [&](const Tensor& t, std::vector<A>& copy) {
      return !t.defined() ? nullptr : copy.empty() ? t.data_ptr<A>() : copy.data();
    };
    A* dw = out_ptr(gw, dw_copy);
    A* db = out_ptr(gb, db_copy);
    if (input.numel() > 0) {
      LayerNormBwKernel<scalar_t>(g.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(),
                                  gi.defined() ? gi.data_ptr<scalar_t>() : nullptr, M, N, mu.data_ptr<A>(),
                                  rs.data_ptr<A>(), w.defined() ? w.data_ptr<A>() : nullptr,
                                  Defined(weight) && weight->dtype() != input.dtype(), dw, db);
    } else {
      if (dw) std::fill(dw, dw + N, A(0));
      if (db) std::fill(db, db + N, A(0));
    }
    if (!dw_copy.empty()) WriteAll(gw, std::vector<double>(dw_copy.begin(), dw_copy.end()));
    if (!db_copy.empty()) WriteAll(gb, std::vector<double>(db_copy.begin(), db_copy.end()));
  });
  return {gi, gw, gb};
}

// --- group norm ----------------------------------------------------------------------------------

constexpr const char* kGn = "native_group_norm_backward";

OptMeta3 GroupNormBwMeta(const Tensor& grad, const Tensor& input, const Tensor& mean, const Tensor& rstd,
                         const OptTensor& weight, const SymInt& N, const SymInt& C, const SymInt& HxW, int64_t group,
                         std::vector<bool> mask) {
  CheckMask(kGn, mask);
  KILN_CHECK(group > 0, "[", kGn, "] Expected num groups to be greater than 0, got ", group);
  KILN_CHECK(C.mod(group) == 0, "[", kGn, "] Expected number of channels in input to be divisible by num_groups, but "
             "got C=", C.str(), " and num_groups=", group);
  KILN_CHECK(input->sym_numel() == N * C * HxW, "[", kGn, "] Expected input of size ", ShapeStr(input),
             " to have N * C * HxW = ", N.str(), " * ", C.str(), " * ", HxW.str(), " elements");
  KILN_CHECK(input.dim() < 2 || input->sym_sizes()[1] == C, "[", kGn, "] Expected input of size ", ShapeStr(input),
             " to have C = ", C.str(), " channels");
  CheckGradShape(kGn, grad, input);
  CheckNumel(kGn, "mean", mean, N * group);
  CheckNumel(kGn, "rstd", rstd, N * group);
  CheckNumel(kGn, "weight", weight, C);
  const OptTensor mean_opt = mean, rstd_opt = rstd;
  const ScalarType pdt = Defined(weight) ? weight->dtype() : ParamDtype(input, {&mean_opt, &rstd_opt});
  return PerChannelGradMetas(input, C, pdt, mask);
}

template <typename T>
void GroupNormBwKernel(const T* g, const T* x, T* gi, int64_t N, int64_t C, int64_t HxW, int64_t G,
                       const std::vector<double>& mean, const std::vector<double>& rstd, const std::vector<double>& w,
                       std::vector<double>& ds, std::vector<double>& db) {
  using Mt = opmath_t<T>;
  const int64_t D = C / G;
  // ds[n, c] = sum_hw dy * x, db[n, c] = sum_hw dy.
  ParallelFor(0, N * C, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(HxW, 1)), [&](int64_t lo, int64_t hi) {
    for (int64_t nc = lo; nc < hi; ++nc) {
      double s = 0, b = 0;
      LaneSums<T>(g + nc * HxW, x + nc * HxW, HxW, 0.0, &b, &s);
      ds[nc] = s;
      db[nc] = b;
    }
  });
  if (!gi) return;
  const double inv = 1.0 / static_cast<double>(D * HxW);
  ParallelFor(0, N * G, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(D * HxW, 1)), [&](int64_t lo, int64_t hi) {
    for (int64_t ng = lo; ng < hi; ++ng) {
      const int64_t n = ng / G, gr = ng % G;
      double ds_val = 0, db_val = 0;
      for (int64_t d = 0; d < D; ++d) {
        const int64_t c = gr * D + d;
        ds_val += ds[n * C + c] * w[c];
        db_val += db[n * C + c] * w[c];
      }
      const double a = rstd[ng];
      const double b = (db_val * mean[ng] - ds_val) * a * a * a * inv;
      const double c0 = -b * mean[ng] - db_val * a * inv;
      for (int64_t d = 0; d < D; ++d) {
        const int64_t c = gr * D + d;
        const int64_t off = (n * C + c) * HxW;
        const Mt k = static_cast<Mt>(a * w[c]), bm = static_cast<Mt>(b), cm = static_cast<Mt>(c0);
        for (int64_t i = 0; i < HxW; ++i)
          gi[off + i] = static_cast<T>(k * static_cast<Mt>(g[off + i]) + bm * static_cast<Mt>(x[off + i]) + cm);
      }
    }
  });
}

Tensor3 GroupNormBw(const Tensor& grad, const Tensor& input, const Tensor& mean, const Tensor& rstd,
                    const OptTensor& weight, const SymInt& N_sym, const SymInt& C_sym, const SymInt& HxW_sym,
                    int64_t group, std::vector<bool> mask) {
  auto [gi, gw, gb] = Allocate(GroupNormBwMeta(grad, input, mean, rstd, weight, N_sym, C_sym, HxW_sym, group, mask));
  const int64_t N = N_sym.expect_int(), C = C_sym.expect_int(), HxW = HxW_sym.expect_int(), G = group;
  if (input.device().is_cuda()) {
    KILN_DISPATCH_FLOATING(input.dtype(), kGn, [] {});  // the CPU kernel's dtype error
    GroupNormBackwardCUDA(grad, input, mean, rstd, Defined(weight) ? &*weight : nullptr, N, C, HxW, G,
                          gi.defined() ? &gi : nullptr, gw.defined() ? &gw : nullptr, gb.defined() ? &gb : nullptr);
    return {gi, gw, gb};
  }
  std::vector<double> dw(C, 0.0), dbeta(C, 0.0);
  if (input.numel() > 0) {
    const std::vector<double> mu = ReadAll(mean), rs = ReadAll(rstd), w = ReadOr(weight, C, 1.0);
    std::vector<double> ds(N * C), db(N * C);
    Tensor g = ops::contiguous(grad), x = ops::contiguous(input);
    KILN_DISPATCH_FLOATING(input.dtype(), kGn, [&] {
      GroupNormBwKernel<scalar_t>(g.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(),
                                  gi.defined() ? gi.data_ptr<scalar_t>() : nullptr, N, C, HxW, G, mu, rs, w, ds, db);
    });
    const int64_t D = C / G;
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t c = 0; c < C; ++c) {
        const int64_t ng = n * G + c / D;
        dw[c] += (ds[n * C + c] - db[n * C + c] * mu[ng]) * rs[ng];
        dbeta[c] += db[n * C + c];
      }
    }
  }
  WriteAll(gw, dw);
  WriteAll(gb, dbeta);
  return {gi, gw, gb};
}

}  // namespace

void RegisterNormBackwardOps(Registry& r) {
  r.Def("native_batch_norm_backward(Tensor grad_out, Tensor input, Tensor? weight, Tensor? running_mean, "
        "Tensor? running_var, Tensor? save_mean, Tensor? save_invstd, bool train, float eps, bool[3] output_mask) -> "
        "(Tensor, Tensor, Tensor)")
      .CPUAndCUDA<&BatchNormBw>().Meta<&BatchNormBwMeta>();
  r.Def("native_layer_norm_backward(Tensor grad_out, Tensor input, SymInt[] normalized_shape, Tensor mean, "
        "Tensor rstd, Tensor? weight, Tensor? bias, bool[3] output_mask) -> (Tensor, Tensor, Tensor)", {Tag::core})
      .CPUAndCUDA<&LayerNormBw>().Meta<&LayerNormBwMeta>();
  r.Def("native_group_norm_backward(Tensor grad_out, Tensor input, Tensor mean, Tensor rstd, Tensor? weight, "
        "SymInt N, SymInt C, SymInt HxW, int group, bool[3] output_mask) -> (Tensor, Tensor, Tensor)", {Tag::core})
      .CPUAndCUDA<&GroupNormBw>().Meta<&GroupNormBwMeta>();
}

}  // namespace kiln
