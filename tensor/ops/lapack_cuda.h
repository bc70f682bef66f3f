// tensor/ops/lapack_cuda.h: the matrix factorizations of lapack.cc on CUDA, through cuSOLVER
// (runtime/cuda/cusolver.h), called by lapack.cc's ops after their checks and allocation. Each takes
// the same column-major batches as the CPU kernels and loops over the batch on the current stream;
// `info` stays on the device until an op needs to read it (check_errors, non-convergence).
#pragma once

#include <tuple>

#include "tensor/tensor_impl.h"

namespace kiln {

// getrf over the batch `lu` in place: pivots (int32, 1-based) and info per matrix.
void LuInPlaceCUDA(const Tensor& lu, const Tensor& pivots, const Tensor& info);
// The inverses (a new column-major batch like lu) from the LU factors: getrs against the identity.
Tensor InvertLuCUDA(const Tensor& lu, const Tensor& pivots);
// det, sign and log|det| (each [batch]) from the LU factors: the diagonal's product and the pivots'
// parity, as the CPU's DetFromLu; sign 0 and log|det| -inf for a singular matrix.
std::tuple<Tensor, Tensor, Tensor> DetFromLuCUDA(const Tensor& lu, const Tensor& pivots);
// x := A^-1 x (A^-T x when transpose) for each matrix of the batch, x column-major [.., n, k].
void SolveWithLuCUDA(const Tensor& lu, const Tensor& pivots, const Tensor& x, bool transpose);
// potrf over the batch `l` in place (the other triangle zeroed) and info per matrix.
void CholeskyInPlaceCUDA(const Tensor& l, const Tensor& info, bool upper);
// Q (when compute_q) and R of the column-major batch `factors` ([.., m, n]): geqrf, then orgqr.
void QrCUDA(const Tensor& factors, const Tensor& q, const Tensor& r, bool compute_q);
// U, S, Vh of the column-major batch `src` (gesvd; wide matrices through their transpose). Raises
// LinAlgError for non-finite input or no convergence, as the CPU kernel.
void SvdCUDA(const Tensor& src, const Tensor& u, const Tensor& sv, const Tensor& vh, bool full, bool compute_uv);
// Eigenvalues (ascending) into w and, when compute_v, eigenvectors over the column-major batch `a`
// (syevd); LinAlgError when it does not converge.
void EighCUDA(const Tensor& a, const Tensor& w, bool upper, bool compute_v);

}  // namespace kiln
