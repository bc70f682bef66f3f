// tensor/ops/reduce_stats.cc: statistical reductions (var, std, var_mean, std_mean, logsumexp,
// linalg_vector_norm and norm).
//
// var/std use two passes over each output's elements (mean, then the sum of squared deviations)
// in acc_t (double for float32/64, float for float16/bfloat16), which is as stable as Welford
// and simpler. The divisor is max(0, N - correction): N <= correction gives inf or NaN, as in
// PyTorch. A float32/float64 var or std down to one value follows PyTorch's all-reduce instead
// (VarAllReduce: deviations from the mean rounded to the input dtype). The `unbiased` overloads
// are composites over the `.correction` kernels.
// logsumexp shifts by the max (0 when the max is infinite) before exponentiating.
#include "tensor/ops/reduce_cuda.h"
#include "tensor/ops/reduce_utils.h"

namespace kiln {
namespace {

// --- var / std / var_mean / std_mean ----------------------------------------------------------

void CheckVarDtype(const char* what, ScalarType t) {
  KILN_CHECK(IsFloating(t), what, " only support floating point and complex dtypes");
}

// var[o] (or its sqrt) and mean[o]; either output may be null.
template <typename T>
void VarMeanKernel(const Tensor& input, const std::vector<bool>& mask, double correction, bool take_sqrt, T* var,
                   T* mean) {
  using Acc = acc_t<T>;
  ReduceIter iter(input, mask);
  ForEachOutput<T>(iter, [&](int64_t o, auto&& visit) {
    Acc sum = 0;
    int64_t n = 0;
    visit([&](T x) {
      sum += static_cast<Acc>(x);
      ++n;
    });
    const Acc mu = n > 0 ? sum / static_cast<Acc>(n) : std::numeric_limits<Acc>::quiet_NaN();
    Acc m2 = 0;
    visit([&](T x) {
      const Acc d = static_cast<Acc>(x) - mu;
      m2 += d * d;
    });
    const double divisor = std::max(0.0, static_cast<double>(n) - correction);
    Acc v = static_cast<Acc>(m2 / divisor);
    if (take_sqrt) v = std::sqrt(v);
    if (var) var[o] = FromAcc<T>(v);
    if (mean) mean[o] = FromAcc<T>(mu);
  });
}

// PyTorch's var/std of a float32 or float64 tensor down to one value (std_var_all_cpu): the
// mean as self.mean() gives it, rounded to the input dtype, then the squared deviations from it
// summed in double. n equal float32 values whose rounded mean is an ulp away from them have a
// variance of ~1e-15 there, not 0 (fuzz seed 221, program 6068: 5 equal values of 0.955).
template <typename T>
double VarAllReduce(const Tensor& input, double correction, bool take_sqrt) {
  Tensor mean = CallOp<Tensor>(KILN_OP("aten::mean"), input, std::optional<ScalarType>());
  const double mu = static_cast<double>(mean.data_ptr<T>()[0]);
  double m2 = 0;
  ReduceIter iter(input, std::vector<bool>(input.dim(), true));
  ForEachOutput<T>(iter, [&](int64_t, auto&& visit) {
    visit([&](T x) {
      const double d = static_cast<double>(x) - mu;
      m2 += d * d;
    });
  });
  const double var = m2 / std::max(0.0, static_cast<double>(input.numel()) - correction);
  return take_sqrt ? std::sqrt(var) : var;
}

double CorrectionValue(const std::optional<Scalar>& correction) {
  return correction ? correction->to_double() : 1.0;
}

template <bool kStd>
TensorMeta VarCorrectionMeta(const Tensor& self, OptDims dims, std::optional<Scalar>, bool keepdim) {
  CheckVarDtype("std and var", self.dtype());
  return ReduceMetaOf(kStd ? "std" : "var", self, dims, keepdim, self.dtype());
}
template <bool kStd>
Tensor VarCorrection(const Tensor& self, OptDims dims, std::optional<Scalar> correction, bool keepdim) {
  Tensor out = EmptyFromMeta(VarCorrectionMeta<kStd>(self, dims, correction, keepdim));
  std::vector<bool> mask = ReduceMask(kStd ? "std" : "var", dims, self.dim());
  if (self.device().is_cuda()) {
    VarMeanCUDA(self, mask, CorrectionValue(correction), kStd, out, nullptr);
    return out;
  }
  const bool all_reduce = out.numel() == 1 && self.numel() > 0 &&
                          (self.dtype() == ScalarType::Float32 || self.dtype() == ScalarType::Float64);
  KILN_DISPATCH_FLOATING(self.dtype(), kStd ? "std" : "var", [&] {
    const double c = CorrectionValue(correction);
    if (all_reduce) out.data_ptr<scalar_t>()[0] = static_cast<scalar_t>(VarAllReduce<scalar_t>(self, c, kStd));
    else VarMeanKernel<scalar_t>(self, mask, c, kStd, out.data_ptr<scalar_t>(), nullptr);
  });
  return out;
}

template <bool kStd>
std::tuple<TensorMeta, TensorMeta> VarMeanCorrectionMeta(const Tensor& self, OptDims dims,
                                                         std::optional<Scalar>, bool keepdim) {
  CheckVarDtype(kStd ? "std_mean" : "var_mean", self.dtype());
  TensorMeta m = ReduceMetaOf(kStd ? "std_mean" : "var_mean", self, dims, keepdim, self.dtype());
  return {m, m};
}
template <bool kStd>
std::tuple<Tensor, Tensor> VarMeanCorrection(const Tensor& self, OptDims dims, std::optional<Scalar> correction,
                                             bool keepdim) {
  auto [vm, mm] = VarMeanCorrectionMeta<kStd>(self, dims, correction, keepdim);
  Tensor var = EmptyFromMeta(vm), mean = EmptyFromMeta(mm);
  std::vector<bool> mask = ReduceMask(kStd ? "std_mean" : "var_mean", dims, self.dim());
  if (self.device().is_cuda()) {
    VarMeanCUDA(self, mask, CorrectionValue(correction), kStd, var, &mean);
    return {var, mean};
  }
  KILN_DISPATCH_FLOATING(self.dtype(), kStd ? "std_mean" : "var_mean", [&] {
    VarMeanKernel<scalar_t>(self, mask, CorrectionValue(correction), kStd, var.data_ptr<scalar_t>(),
                            mean.data_ptr<scalar_t>());
  });
  return {var, mean};
}

// The `unbiased` overloads: composites over `.correction`.
template <bool kStd>
Tensor VarUnbiased(const Tensor& self, bool unbiased) {
  return CallOp<Tensor>(KILN_OP(kStd ? "aten::std.correction" : "aten::var.correction"), self, OptDims(),
                        std::optional<Scalar>(Scalar(int64_t(unbiased ? 1 : 0))), false);
}
template <bool kStd>
Tensor VarDim(const Tensor& self, OptDims dims, bool unbiased, bool keepdim) {
  return CallOp<Tensor>(KILN_OP(kStd ? "aten::std.correction" : "aten::var.correction"), self, dims,
                        std::optional<Scalar>(Scalar(int64_t(unbiased ? 1 : 0))), keepdim);
}
template <bool kStd>
std::tuple<Tensor, Tensor> VarMeanUnbiased(const Tensor& self, bool unbiased) {
  return CallOp<std::tuple<Tensor, Tensor>>(KILN_OP(kStd ? "aten::std_mean.correction" : "aten::var_mean.correction"),
                                            self, OptDims(), std::optional<Scalar>(Scalar(int64_t(unbiased ? 1 : 0))),
                                            false);
}
template <bool kStd>
std::tuple<Tensor, Tensor> VarMeanDim(const Tensor& self, OptDims dims, bool unbiased, bool keepdim) {
  return CallOp<std::tuple<Tensor, Tensor>>(KILN_OP(kStd ? "aten::std_mean.correction" : "aten::var_mean.correction"),
                                            self, dims, std::optional<Scalar>(Scalar(int64_t(unbiased ? 1 : 0))),
                                            keepdim);
}

// --- logsumexp -----------------------------------------------------------------------------

ScalarType FloatResultType(ScalarType in) { return IsIntegral(in, /*include_bool=*/true) ? GetDefaultDtype() : in; }

TensorMeta LogsumexpMeta(const Tensor& self, std::vector<int64_t> dims, bool keepdim) {
  return ReduceMetaOf("logsumexp", self, dims, keepdim, FloatResultType(self.dtype()));
}
// PyTorch's composite, op by op in the result dtype: the max (where infinite, 0), exp(x - max)
// summed, its log, plus the max. Each op rounds as PyTorch's does: a float32 sum accumulated in
// double and rounded once gave log(1 + 4e-11) = 4e-11 where PyTorch's float32 sum is 1 and the
// log 0 (fuzz seed 211, program 2015).
Tensor Logsumexp(const Tensor& self, std::vector<int64_t> dims, bool keepdim) {
  TensorMeta m = LogsumexpMeta(self, dims, keepdim);
  const Tensor input = CastTo(self, m.dtype);
  if (input.numel() == 0) {  // no max to take: log(sum(exp(x))), -inf for each empty row
    return CallOp<Tensor>(KILN_OP("aten::log"), ops::sum(CallOp<Tensor>(KILN_OP("aten::exp"), input), dims, keepdim));
  }
  Tensor maxes = CallOp<Tensor>(KILN_OP("aten::amax"), input, dims, true);
  maxes = ops::masked_fill(maxes, CallOp<Tensor>(KILN_OP("aten::isinf"), maxes), Scalar(0.0));
  const Tensor sum = ops::sum(CallOp<Tensor>(KILN_OP("aten::exp"), ops::sub(input, maxes)), dims, keepdim);
  return ops::add(CallOp<Tensor>(KILN_OP("aten::log"), sum), ops::reshape(maxes, {m.sizes.begin(), m.sizes.end()}));
}

// --- linalg_vector_norm / norm -------------------------------------------------------------

// The ord as PyTorch prints it in messages: "inf", "-inf", "-1", "0.5".
std::string OrdStr(const Scalar& ord) {
  if (!ord.is_floating()) return std::to_string(ord.to_int());
  const double p = ord.to_double();
  if (std::isinf(p)) return p > 0 ? "inf" : "-inf";
  return StrCat(p);
}

TensorMeta VectorNormMeta(const Tensor& self, const Scalar& ord, OptDims dims, bool keepdim,
                          std::optional<ScalarType> dtype) {
  KILN_CHECK(IsFloating(self.dtype()), "linalg.vector_norm: Expected a floating point or complex tensor as input. "
             "Got ", ScalarTypeDisplayName(self.dtype()));
  if (dtype) {
    KILN_CHECK(IsFloating(*dtype), "linalg.vector_norm: dtype should be floating point or complex. Got ",
               ScalarTypeDisplayName(*dtype));
  }
  const double p = ord.to_double();
  if (SymNumelIsZero(self) && (p < 0 || p == INFINITY)) {
    KILN_CHECK(dims && !dims->empty(), "linalg.vector_norm cannot compute the ", OrdStr(ord),
               " norm on an empty tensor because the operation does not have an identity");
    for (int64_t d : *dims) {
      KILN_CHECK(!(self->sym_sizes()[WrapDim(d, self.dim())] == SymInt(0)), "linalg.vector_norm cannot compute the ",
                 OrdStr(ord), " norm on the dimension ", d,
                 " because this dimension is empty and the operation does not have an identity");
    }
  }
  return ReduceMetaOf("linalg.vector_norm", self, dims, keepdim, dtype.value_or(self.dtype()));
}

Tensor VectorNorm(const Tensor& self, const Scalar& ord, OptDims dims, bool keepdim, std::optional<ScalarType> dtype) {
  TensorMeta m = VectorNormMeta(self, ord, dims, keepdim, dtype);
  Tensor out = EmptyFromMeta(m);
  Tensor input = CastTo(self, m.dtype);
  const double p = ord.to_double();
  if (out.device().is_cuda()) {
    VectorNormCUDA(input, p, ReduceMask("linalg.vector_norm", dims, self.dim()), out);
    return out;
  }
  ReduceIter iter(input, ReduceMask("linalg.vector_norm", dims, self.dim()));
  KILN_DISPATCH_FLOATING(m.dtype, "linalg_vector_norm", [&] {
    using T = scalar_t;
    // double for every float dtype: a 16-bit tensor's float accumulator, added to element by element,
    // drifted 2% on 21M elements (PyTorch's vectorised float sum does not)
    using Acc = double;
    T* dst = out.data_ptr<T>();
    const bool lane_sum = iter.inner_contiguous() && (p == 0 || p == 1 || p == 2);
    ForEachOutput<T>(iter, [&](int64_t o, auto&& visit) {
      Acc acc = 0;
      if (lane_sum) {
        iter.ForEachRun(o, [&](const char* ptr, int64_t n, int64_t) {
          const T* x = reinterpret_cast<const T*>(ptr);
          if (p == 0) acc = LaneSumRun(x, n, [](T v) { return static_cast<Acc>(static_cast<Acc>(v) != Acc(0)); });
          else if (p == 1) acc = LaneSumRun(x, n, [](T v) { return std::abs(static_cast<Acc>(v)); });
          else acc = LaneSumRun(x, n, [](T v) { return static_cast<Acc>(v) * static_cast<Acc>(v); });
        });
        if (p == 2) acc = std::sqrt(acc);
      } else if (p == INFINITY || p == -INFINITY) {
        const bool want_max = p > 0;
        bool first = true;
        visit([&](T x) {
          const Acc a = std::abs(static_cast<Acc>(x));
          if (IsNan(acc)) return;
          if (first || IsNan(a) || (want_max ? a > acc : a < acc)) acc = a;
          first = false;
        });
      } else if (p == 0) {
        visit([&](T x) { acc += static_cast<Acc>(x) != Acc(0); });
      } else if (p == 1) {
        visit([&](T x) { acc += std::abs(static_cast<Acc>(x)); });
      } else if (p == 2) {
        visit([&](T x) { acc += static_cast<Acc>(x) * static_cast<Acc>(x); });
        acc = std::sqrt(acc);
      } else {
        const Acc pa = static_cast<Acc>(p);
        visit([&](T x) { acc += std::pow(std::abs(static_cast<Acc>(x)), pa); });
        acc = std::pow(acc, Acc(1) / pa);
      }
      dst[o] = FromAcc<T>(acc);
    });
  });
  return out;
}

// What norm's vector norm reads: self, or a complex tensor's moduli (every p-norm is theirs).
Tensor NormInput(const Tensor& self) {
  if (IsComplex(self.dtype())) return CallOp<Tensor>(KILN_OP("aten::abs"), self);
  KILN_CHECK(IsFloating(self.dtype()), "norm(): input dtype should be either floating point or complex. Got ",
             ScalarTypeDisplayName(self.dtype()), " instead.");
  return self;
}
Tensor CallVectorNorm(const Tensor& self, const Scalar& p, OptDims dims, bool keepdim,
                      std::optional<ScalarType> dtype) {
  return CallOp<Tensor>(KILN_OP("aten::linalg_vector_norm"), self, p, dims, keepdim, dtype);
}
Tensor NormScalar(const Tensor& self, const Scalar& p) {
  return CallVectorNorm(NormInput(self), p, std::nullopt, false, std::nullopt);
}
Tensor NormScalarOptDim(const Tensor& self, std::optional<Scalar> p, std::vector<int64_t> dims, bool keepdim) {
  return CallVectorNorm(NormInput(self), p.value_or(Scalar(int64_t(2))), dims, keepdim, std::nullopt);
}
Tensor NormScalarOptDimDtype(const Tensor& self, std::optional<Scalar> p, std::vector<int64_t> dims, bool keepdim,
                             ScalarType dtype) {
  return CallVectorNorm(NormInput(self), p.value_or(Scalar(int64_t(2))), dims, keepdim, dtype);
}
Tensor NormScalarOptDtype(const Tensor& self, std::optional<Scalar> p, ScalarType dtype) {
  return CallVectorNorm(NormInput(self), p.value_or(Scalar(int64_t(2))), std::nullopt, false, dtype);
}

}  // namespace

void RegisterReduceStatsOps(Registry& r) {
  std::initializer_list<Tag> tags = {Tag::reduction, Tag::core};
  std::initializer_list<Tag> red = {Tag::reduction};
  // var / std (and _mean): PyTorch's argument parser tries `.dim`, then `.correction`, then the
  // `unbiased` form, so `x.var()` is var.correction(x) with no correction in a traced graph and
  // `x.var(True)` the `unbiased` form (kiln's parser takes the first overload that binds).
  r.Def("var.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> Tensor", red,
        kFunctionAndMethod)
      .Composite<&VarDim<false>>();
  r.Def("var.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor",
        tags, kFunctionAndMethod)
      .CPUAndCUDA<&VarCorrection<false>>().Meta<&VarCorrectionMeta<false>>();
  r.Def("var(Tensor self, bool unbiased=True) -> Tensor", red, kFunctionAndMethod).Composite<&VarUnbiased<false>>();
  r.Def("std.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> Tensor", red,
        kFunctionAndMethod)
      .Composite<&VarDim<true>>();
  r.Def("std.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor",
        tags, kFunctionAndMethod)
      .CPUAndCUDA<&VarCorrection<true>>().Meta<&VarCorrectionMeta<true>>();
  r.Def("std(Tensor self, bool unbiased=True) -> Tensor", red, kFunctionAndMethod).Composite<&VarUnbiased<true>>();
  r.Def("var_mean.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> (Tensor, Tensor)", red,
        kFunction)
      .Composite<&VarMeanDim<false>>();
  r.Def("var_mean.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> "
        "(Tensor, Tensor)", red, kFunction)
      .CPUAndCUDA<&VarMeanCorrection<false>>().Meta<&VarMeanCorrectionMeta<false>>();
  r.Def("var_mean(Tensor self, bool unbiased=True) -> (Tensor, Tensor)", red, kFunction)
      .Composite<&VarMeanUnbiased<false>>();
  r.Def("std_mean.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> (Tensor, Tensor)", red,
        kFunction)
      .Composite<&VarMeanDim<true>>();
  r.Def("std_mean.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> "
        "(Tensor, Tensor)", red, kFunction)
      .CPUAndCUDA<&VarMeanCorrection<true>>().Meta<&VarMeanCorrectionMeta<true>>();
  r.Def("std_mean(Tensor self, bool unbiased=True) -> (Tensor, Tensor)", red, kFunction)
      .Composite<&VarMeanUnbiased<true>>();

  r.Def("logsumexp(Tensor self, int[1] dim, bool keepdim=False) -> Tensor", red, kFunctionAndMethod)
      .CPUAndCUDA<&Logsumexp>().Meta<&LogsumexpMeta>();
  r.Alias("special_logsumexp", "logsumexp", kModuleOnly);  // Note [Op aliases] in dispatcher.h

  r.Def("linalg_vector_norm(Tensor self, Scalar ord=2, int[1]? dim=None, bool keepdim=False, *, "
        "ScalarType? dtype=None) -> Tensor", tags, kFunction)
      .CPUAndCUDA<&VectorNorm>().Meta<&VectorNormMeta>();
  r.Def("norm.ScalarOpt_dtype(Tensor self, Scalar? p, *, ScalarType dtype) -> Tensor", red, kFunctionAndMethod)
      .Composite<&NormScalarOptDtype>();
  r.Def("norm.Scalar(Tensor self, Scalar p=2) -> Tensor", red, kFunctionAndMethod).Composite<&NormScalar>();
  r.Def("norm.ScalarOpt_dim_dtype(Tensor self, Scalar? p, int[1] dim, bool keepdim, *, ScalarType dtype) -> Tensor",
        red, kFunctionAndMethod)
      .Composite<&NormScalarOptDimDtype>();
  r.Def("norm.ScalarOpt_dim(Tensor self, Scalar? p, int[1] dim, bool keepdim=False) -> Tensor", red,
        kFunctionAndMethod)
      .Composite<&NormScalarOptDim>();
}

}  // namespace kiln
