// tensor/ops/norm.cc: normalization layers: batch norm, layer norm and group norm.
//
// Each native_* op views its (contiguous) input as [outer, channels, inner] or [rows, elems],
// computes per-slice statistics in double with two passes (mean, then centred squares, so large
// offsets do not cancel), and applies y = x * scale + shift with per-channel scale = rstd * weight
// and shift = bias - mean * scale (batch and group norm), or y = (x - mean) * rstd * weight + bias
// (layer norm), as PyTorch's CPU kernels do. Parameters and statistics may be
// float32 when the input is float16/bfloat16 (PyTorch's "mixed type"); the saved statistics then
// come out in float32. native_batch_norm in training mode writes running_mean/running_var in place
// (momentum update, unbiased variance) and bumps their versions: its PyTorch schema carries no
// alias annotation for them, so the dispatcher cannot know. The _native_batch_norm_legit family
// runs the same kernel under schemas that do say it (Tensor(a!) running_mean), plus a functional
// form returning the updated statistics, for functionalization and export. batch_norm,
// layer_norm and group_norm are composites returning the first output of their native op.
#include <cmath>

#include "tensor/ops/common.h"

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

// The dtype of saved statistics; checks the input and parameter dtypes and devices.
ScalarType NormStatDtype(const char* op, const Tensor& input, std::initializer_list<NamedParam> params) {
  KILN_CHECK_NOT_IMPLEMENTED(IsFloating(input.dtype()), "\"", op, "\" not implemented for '",
                             ScalarTypeDisplayName(input.dtype()), "'");
  bool mixed = false;
  for (const NamedParam& p : params) {
    if (!Defined(*p.t)) continue;
    const Tensor& t = **p.t;
    CheckSameDevice(op, input, t);
    if (t.dtype() == input.dtype()) continue;
    if (IsReducedFloat(input.dtype())) {
      KILN_CHECK(t.dtype() == ScalarType::Float32, "mixed dtype (CPU): expect parameter to have scalar type of Float");
      mixed = true;
    } else {
      KILN_CHECK(false, "mixed dtype (CPU): all inputs must share same datatype. (", op, ": input is ",
                 ScalarTypeDisplayName(input.dtype()), ", ", p.name, " is ", ScalarTypeDisplayName(t.dtype()), ")");
    }
  }
  return mixed ? ScalarType::Float32 : input.dtype();
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

// Mean and biased variance of rows [outer, inner] at `x + c * inner` for outer in [0, nouter)
// with row pitch `pitch` (elements): batch norm's channel c, or one layer/group norm row.
template <typename T>
void Moments(const T* x, int64_t nouter, int64_t pitch, int64_t inner, double* mean, double* var) {
  const int64_t count = nouter * inner;
  double s = 0;
  for (int64_t o = 0; o < nouter; ++o) {
    const T* p = x + o * pitch;
    for (int64_t i = 0; i < inner; ++i) s += static_cast<double>(static_cast<opmath_t<T>>(p[i]));
  }
  const double m = count > 0 ? s / count : std::nan("");
  double q = 0;
  for (int64_t o = 0; o < nouter; ++o) {
    const T* p = x + o * pitch;
    for (int64_t i = 0; i < inner; ++i) {
      const double d = static_cast<double>(static_cast<opmath_t<T>>(p[i])) - m;
      q += d * d;
    }
  }
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
  ScalarType stat = NormStatDtype("batch_norm", input,
                                  {{"weight", &weight}, {"bias", &bias}, {"running_mean", &running_mean},
                                   {"running_var", &running_var}});
  SymDimVector stat_sizes = {training ? C : SymInt(0)};
  return {TensorMeta{input->sym_sizes(), {}, input.dtype(), input.device()},
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
  Tensor x = ops::contiguous(input);
  std::vector<double> mean(C), var(C);
  if (training) {
    KILN_DISPATCH_FLOATING(x.dtype(), "batch_norm", [&] {
      const scalar_t* px = x.data_ptr<scalar_t>();
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
    ApplyAffine(x.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), N, C, S, scale, shift);
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
  int64_t N = 1;
  for (const SymInt& x : normalized_shape) N *= x.expect_int();
  const int64_t M = N == 0 ? 0 : input.numel() / N;
  Tensor x = ops::contiguous(input);
  std::vector<double> mean(M), rstd(M);
  const std::vector<double> w = ReadVector(weight, N, 1), b = ReadVector(bias, N, 0);
  KILN_DISPATCH_FLOATING(x.dtype(), "layer_norm", [&] {
    using T = scalar_t;
    using Mt = opmath_t<T>;
    const T* px = x.data_ptr<T>();
    T* py = out.data_ptr<T>();
    std::vector<Mt> wm(w.begin(), w.end()), bm(b.begin(), b.end());
    ParallelFor(0, M, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(N, 1)), [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        double var;
        Moments(px + r * N, 1, N, N, &mean[r], &var);
        rstd[r] = 1.0 / std::sqrt(var + eps);
        // (x - mean) * rstd, as PyTorch's kernel: a row of equal values normalizes to exactly 0
        // (x * rstd - mean * rstd left a rounding error times 1/sqrt(eps): -3e-5 for [3, 3, 3])
        const Mt m = static_cast<Mt>(mean[r]), a = static_cast<Mt>(rstd[r]);
        const T* xr = px + r * N;
        T* yr = py + r * N;
        for (int64_t j = 0; j < N; ++j) yr[j] = static_cast<T>((static_cast<Mt>(xr[j]) - m) * a * wm[j] + bm[j]);
      }
    });
  });
  WriteVector(mean_t, mean);
  WriteVector(rstd_t, rstd);
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
      .Impl<&NativeBatchNormCPU>(DispatchKey::CPU).Meta<&NativeBatchNormMeta>();
  r.Def("_native_batch_norm_legit(Tensor input, Tensor? weight, Tensor? bias, Tensor(a!) running_mean, "
        "Tensor(b!) running_var, bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor)",
        {Tag::core}, kFunction)
      .Impl<&LegitCPU>(DispatchKey::CPU).Meta<&LegitMeta>();
  r.Def("_native_batch_norm_legit.no_stats(Tensor input, Tensor? weight, Tensor? bias, bool training, "
        "float momentum, float eps) -> (Tensor, Tensor, Tensor)", {Tag::core}, kFunction)
      .Impl<&LegitNoStatsCPU>(DispatchKey::CPU).Meta<&LegitNoStatsMeta>();
  r.Def("_native_batch_norm_legit_no_training(Tensor input, Tensor? weight, Tensor? bias, Tensor running_mean, "
        "Tensor running_var, float momentum, float eps) -> (Tensor, Tensor, Tensor)", {Tag::core}, kFunction)
      .Impl<&LegitNoTrainingCPU>(DispatchKey::CPU).Meta<&LegitNoTrainingMeta>();
  r.Def("_native_batch_norm_legit_functional(Tensor input, Tensor? weight, Tensor? bias, Tensor running_mean, "
        "Tensor running_var, bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor, "
        "Tensor running_mean_out, Tensor running_var_out)", {}, kFunction)
      .Impl<&LegitFunctionalCPU>(DispatchKey::CPU).Meta<&LegitFunctionalMeta>();
  r.Def("batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var, "
        "bool training, float momentum, float eps, bool cudnn_enabled) -> Tensor", {}, kFunction)
      .Composite<&BatchNorm>();
  r.Def("native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias, float eps) -> "
        "(Tensor, Tensor, Tensor)", {Tag::core}, kFunction)
      .Impl<&NativeLayerNormCPU>(DispatchKey::CPU).Meta<&NativeLayerNormMeta>();
  r.Def("layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
        "float eps=1e-05, bool cudnn_enable=True) -> Tensor", {}, kFunction)
      .Composite<&LayerNorm>();
  r.Def("native_group_norm(Tensor input, Tensor? weight, Tensor? bias, SymInt N, SymInt C, SymInt HxW, int group, "
        "float eps) -> (Tensor, Tensor, Tensor)", {Tag::core}, kFunction)
      .Impl<&NativeGroupNormCPU>(DispatchKey::CPU).Meta<&NativeGroupNormMeta>();
  r.Def("group_norm(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None, float eps=1e-05, "
        "bool cudnn_enabled=True) -> Tensor", {}, kFunction)
      .Composite<&GroupNorm>();
}

}  // namespace kiln
