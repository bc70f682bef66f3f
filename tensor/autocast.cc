// tensor/autocast.cc: the Autocast dispatch layer and PyTorch's CPU cast policy (Note [Autocast]).
#include "tensor/autocast.h"

#include <string>
#include <unordered_map>

#include "tensor/ops.h"

namespace kiln {
namespace {

enum class CastPolicy { kNone, kLowerPrecision, kFloat32, kPromote };

// PyTorch's CPU autocast lists (aten/src/ATen/autocast_mode.cpp), by the names kiln's ops have.
// Functions kiln composes in Python (kl_div, cdist, ...) apply the float32 policy themselves
// (kiln/amp/autocast_mode.py).
CastPolicy PolicyOf(const std::string& name) {
  static const std::unordered_map<std::string, CastPolicy> policy = [] {
    std::unordered_map<std::string, CastPolicy> m;
    for (const char* n : {"conv1d", "conv2d", "conv3d", "convolution", "_convolution", "conv_transpose1d",
                          "conv_transpose2d", "conv_transpose3d", "bmm", "mm", "linalg_vecdot", "baddbmm",
                          "addmm", "addbmm", "linear", "matmul", "conv_tbc", "prelu",
                          "scaled_dot_product_attention", "_native_multi_head_attention"})
      m[n] = CastPolicy::kLowerPrecision;
    for (const char* n :
         {"avg_pool3d", "binary_cross_entropy", "grid_sampler", "polar", "prod", "quantile", "nanquantile", "stft",
          "cdist", "trace", "view_as_complex", "cholesky", "cholesky_inverse", "cholesky_solve", "inverse",
          "lu_solve", "orgqr", "ormqr", "pinverse", "max_pool3d", "max_unpool2d", "max_unpool3d",
          "adaptive_avg_pool3d", "reflection_pad1d", "reflection_pad2d", "replication_pad1d", "replication_pad2d",
          "replication_pad3d", "mse_loss", "cosine_embedding_loss", "nll_loss", "nll_loss2d", "nll_loss_nd",
          "nll_loss_forward", "nll_loss2d_forward", "hinge_embedding_loss", "poisson_nll_loss", "smooth_l1_loss",
          "cross_entropy_loss", "l1_loss", "huber_loss", "margin_ranking_loss", "soft_margin_loss",
          "triplet_margin_loss", "multi_margin_loss", "ctc_loss", "kl_div", "multilabel_margin_loss",
          "binary_cross_entropy_with_logits", "geqrf", "_lu_with_info", "qr", "svd", "triangular_solve",
          "fractional_max_pool2d", "fractional_max_pool3d", "adaptive_max_pool3d", "linalg_qr", "linalg_cholesky",
          "linalg_cholesky_ex", "linalg_svd", "_linalg_svd", "linalg_svdvals", "linalg_eig", "linalg_eigh",
          "_linalg_eigh", "linalg_eigvalsh", "linalg_lstsq", "linalg_inv", "linalg_inv_ex", "linalg_det",
          "_linalg_det", "det", "linalg_slogdet", "_linalg_slogdet", "slogdet", "logdet", "linalg_solve",
          "linalg_solve_ex", "_linalg_solve_ex", "linalg_lu_factor", "linalg_lu_factor_ex", "linalg_matrix_norm",
          "linalg_pinv", "linalg_matrix_rank", "linalg_cond", "linalg_matrix_power", "linalg_householder_product"})
      m[n] = CastPolicy::kFloat32;
    for (const char* n : {"cat", "stack", "index_copy"}) m[n] = CastPolicy::kPromote;
    return m;
  }();
  auto it = policy.find(name);
  return it == policy.end() ? CastPolicy::kNone : it->second;
}

thread_local AutocastState tls_autocast;

// Whether autocast may cast t: a floating tensor other than float64 (PyTorch's is_eligible).
bool Eligible(const Tensor& t) {
  return t.defined() && IsFloating(t.dtype()) && t.dtype() != ScalarType::Float64;
}

Tensor CastIfEligible(const Tensor& t, ScalarType to) {
  return Eligible(t) && t.dtype() != to ? ops::to_dtype(t, to) : t;
}

// promote's target, as PyTorch's at::autocast::prioritize: float32 when any eligible argument is
// float32, else the autocast dtype; float64 arguments are ignored, and another 16-bit dtype than
// the autocast one is PyTorch's error.
ScalarType Prioritize(const Stack& stack, ScalarType lower) {
  ScalarType current = lower;
  auto see = [&](const Tensor& t) {
    if (!Eligible(t)) return;
    if (current == ScalarType::Float32 || t.dtype() == ScalarType::Float32) current = ScalarType::Float32;
    else KILN_CHECK(t.dtype() == current, "Unexpected floating ScalarType in at::autocast::prioritize");
  };
  for (const IValue& v : stack) {
    if (v.is_tensor()) see(v.to_tensor());
    else if (v.is_tensor_list()) for (const Tensor& t : v.to_tensor_list()) see(t);
  }
  return current;
}

void AutocastFallback(const Op& op, DispatchKeySet keys, Stack& stack, void*) {
  const CastPolicy policy = PolicyOf(op.base_name());
  keys = keys.remove(DispatchKey::Autocast);
  if (policy == CastPolicy::kNone) {
    op.Redispatch(keys, stack);
    return;
  }
  // The casts and the op run outside autocast: the op's parts keep the precision chosen here.
  ExcludeDispatchKeyGuard no_autocast(DispatchKeySet(DispatchKey::Autocast));
  ScalarType to = policy == CastPolicy::kLowerPrecision ? tls_autocast.dtype : ScalarType::Float32;
  if (policy == CastPolicy::kPromote) to = Prioritize(stack, tls_autocast.dtype);
  for (IValue& v : stack) {
    if (v.is_tensor()) {
      const Tensor& t = v.to_tensor();
      if (policy == CastPolicy::kFloat32 && t.defined() && !IsReducedFloat(t.dtype())) continue;
      v = IValue(CastIfEligible(t, to));
    } else if (v.is_tensor_list()) {
      std::vector<Tensor> cast;
      for (const Tensor& t : v.to_tensor_list()) cast.push_back(CastIfEligible(t, to));
      v = IValue(std::move(cast));
    }
  }
  op.Redispatch(keys, stack);
}

}  // namespace

const AutocastState& TlsAutocast() { return tls_autocast; }

void SetAutocast(bool enabled, ScalarType dtype) {
  tls_autocast = AutocastState{enabled, dtype};
  LocalDispatchKeySet& tls = TlsLocalDispatchKeySet();
  tls.included = enabled ? tls.included.add(DispatchKey::Autocast) : tls.included.remove(DispatchKey::Autocast);
}

void InstallAutocast(Registry& r) { r.SetFallback(DispatchKey::Autocast, Kernel{&AutocastFallback, nullptr}); }

}  // namespace kiln
