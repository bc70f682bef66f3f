// tensor/ops/lapack_functions.cc: the public linear-algebra functions over the factorizations of
// lapack.cc, as PyTorch's CompositeImplicitAutograd ops with its aten names and named results
// (linalg_inv, det, linalg_slogdet -> (sign, logabsdet), linalg_svd -> (U, S, Vh), svd -> (U, S, V),
// linalg_eigh, qr, ...). Autograd and tracing see the factorization op each one calls; the
// failures of a singular or indefinite input raise from that op (Note [check_errors names the
// public function] in lapack.cc), so compiled code raises them too.
#include <cmath>
#include <limits>
#include <string>

#include "tensor/ops/common.h"

namespace kiln {
namespace {

using Tensor2 = std::tuple<Tensor, Tensor>;
using Tensor3 = std::tuple<Tensor, Tensor, Tensor>;
using Tensor4 = std::tuple<Tensor, Tensor, Tensor, Tensor>;
using OptStr = std::optional<std::string>;

Tensor LinalgInv(const Tensor& a) { return std::get<0>(CallOp<Tensor2>(KILN_OP("aten::linalg_inv_ex"), a, true)); }
Tensor LinalgDet(const Tensor& a) { return std::get<0>(CallOp<Tensor3>(KILN_OP("aten::_linalg_det"), a)); }
Tensor2 LinalgSlogdet(const Tensor& a) {
  auto r = CallOp<Tensor4>(KILN_OP("aten::_linalg_slogdet"), a);
  return {std::get<0>(r), std::get<1>(r)};
}
// log(det): NaN for a negative determinant, -inf for 0 (log|det| is -inf there already)
Tensor Logdet(const Tensor& a) {
  auto [sign, logabs] = LinalgSlogdet(a);
  Tensor negative = CallOp<Tensor>(KILN_OP("aten::eq.Scalar"), sign, Scalar(-1));
  return ops::where(negative, ops::full({}, std::numeric_limits<double>::quiet_NaN(), a.dtype(), a.device()), logabs);
}
Tensor2 LinalgSolveEx(const Tensor& a, const Tensor& b, bool left, bool check_errors) {
  auto r = CallOp<Tensor4>(KILN_OP("aten::_linalg_solve_ex"), a, b, left, check_errors);
  return {std::get<0>(r), std::get<3>(r)};
}
Tensor LinalgSolve(const Tensor& a, const Tensor& b, bool left) { return std::get<0>(LinalgSolveEx(a, b, left, true)); }
Tensor LinalgCholesky(const Tensor& a, bool upper) {
  return std::get<0>(CallOp<Tensor2>(KILN_OP("aten::linalg_cholesky_ex"), a, upper, true));
}
Tensor2 LinalgLuFactor(const Tensor& a, bool pivot) {
  auto r = CallOp<Tensor3>(KILN_OP("aten::linalg_lu_factor_ex"), a, pivot, true);
  return {std::get<0>(r), std::get<1>(r)};
}
Tensor2 Qr(const Tensor& a, bool some) {
  return CallOp<Tensor2>(KILN_OP("aten::linalg_qr"), a, std::string(some ? "reduced" : "complete"));
}
Tensor3 LinalgSvd(const Tensor& a, bool full_matrices, OptStr driver) {
  return CallOp<Tensor3>(KILN_OP("aten::_linalg_svd"), a, full_matrices, true, driver);
}
// The singular values alone; the vectors too when A requires grad, since the gradient reads them.
Tensor LinalgSvdvals(const Tensor& a, OptStr driver) {
  return std::get<1>(CallOp<Tensor3>(KILN_OP("aten::_linalg_svd"), a, false, a->requires_grad(), driver));
}
// torch.svd: V rather than Vh; with compute_uv=False, U and V are zero matrices of full size.
Tensor3 Svd(const Tensor& a, bool some, bool compute_uv) {
  KILN_CHECK(a.dim() >= 2, "linalg.svd: The input tensor A must have at least 2 dimensions.");
  if (!compute_uv) {
    Tensor s = LinalgSvdvals(a, std::nullopt);
    SymDimVector batch(a->sym_sizes().begin(), a->sym_sizes().end() - 2);
    const SymInt m = a->sym_sizes()[a.dim() - 2], n = a->sym_sizes().back();
    auto zeros = [&](const SymInt& k) {
      std::vector<SymInt> sizes(batch.begin(), batch.end());
      sizes.push_back(k);
      sizes.push_back(k);
      return ops::full(sizes, 0, a.dtype(), a.device());
    };
    return {zeros(m), s, ops::transpose(zeros(n), -2, -1)};  // PyTorch's V is column-major
  }
  auto [u, s, vh] = LinalgSvd(a, !some, std::nullopt);
  return {u, s, ops::transpose(vh, -2, -1)};
}
Tensor2 LinalgEigh(const Tensor& a, std::string uplo) {
  return CallOp<Tensor2>(KILN_OP("aten::_linalg_eigh"), a, uplo, true);
}
Tensor LinalgEigvalsh(const Tensor& a, std::string uplo) {
  return std::get<0>(CallOp<Tensor2>(KILN_OP("aten::_linalg_eigh"), a, uplo, a->requires_grad()));
}

}  // namespace

void RegisterLapackFunctions(Registry& r) {
  r.Def("linalg_inv(Tensor A) -> Tensor", {}, kFunction).Composite<&LinalgInv>();
  r.Def("inverse(Tensor self) -> Tensor", {}, kFunctionAndMethod).Composite<&LinalgInv>();
  r.Def("linalg_det(Tensor A) -> Tensor", {}, kFunction).Composite<&LinalgDet>();
  r.Def("det(Tensor self) -> Tensor", {}, kFunctionAndMethod).Composite<&LinalgDet>();
  r.Def("linalg_slogdet(Tensor A) -> (Tensor sign, Tensor logabsdet)", {}, kFunction).Composite<&LinalgSlogdet>();
  r.Def("slogdet(Tensor self) -> (Tensor sign, Tensor logabsdet)", {}, kFunctionAndMethod)
      .Composite<&LinalgSlogdet>();
  r.Def("logdet(Tensor self) -> Tensor", {}, kFunctionAndMethod).Composite<&Logdet>();
  r.Def("linalg_solve_ex(Tensor A, Tensor B, *, bool left=True, bool check_errors=False) -> "
        "(Tensor result, Tensor info)", {}, kFunction)
      .Composite<&LinalgSolveEx>();
  r.Def("linalg_solve(Tensor A, Tensor B, *, bool left=True) -> Tensor", {}, kFunction).Composite<&LinalgSolve>();
  r.Def("linalg_cholesky(Tensor self, *, bool upper=False) -> Tensor", {}, kFunction).Composite<&LinalgCholesky>();
  r.Def("cholesky(Tensor self, bool upper=False) -> Tensor", {}, kFunctionAndMethod).Composite<&LinalgCholesky>();
  r.Def("linalg_lu_factor(Tensor A, *, bool pivot=True) -> (Tensor LU, Tensor pivots)", {}, kFunction)
      .Composite<&LinalgLuFactor>();
  r.Def("qr(Tensor self, bool some=True) -> (Tensor Q, Tensor R)", {}, kFunctionAndMethod).Composite<&Qr>();
  r.Def("linalg_svd(Tensor A, bool full_matrices=True, *, str? driver=None) -> (Tensor U, Tensor S, Tensor Vh)",
        {}, kFunction)
      .Composite<&LinalgSvd>();
  r.Def("linalg_svdvals(Tensor A, *, str? driver=None) -> Tensor", {}, kFunction).Composite<&LinalgSvdvals>();
  r.Def("svd(Tensor self, bool some=True, bool compute_uv=True) -> (Tensor U, Tensor S, Tensor V)", {},
        kFunctionAndMethod)
      .Composite<&Svd>();
  r.Def("linalg_eigh(Tensor self, str UPLO='L') -> (Tensor eigenvalues, Tensor eigenvectors)", {}, kFunction)
      .Composite<&LinalgEigh>();
  r.Def("linalg_eigvalsh(Tensor self, str UPLO='L') -> Tensor", {}, kFunction).Composite<&LinalgEigvalsh>();
}

}  // namespace kiln
