// tensor/ops/lapack.cc: the matrix factorizations, through the LAPACK inside OpenBLAS: LU (getrf)
// and what reads it (the inverse, determinants, solve), Cholesky (potrf), QR (geqrf + orgqr), the
// SVD (gesdd) and the symmetric eigendecomposition (syevd), with PyTorch's aten schemas
// (linalg_inv_ex, _linalg_det, _linalg_solve_ex, ...). CUDA tensors take the same layouts through
// cuSOLVER (lapack_cuda.h) after the same checks.
//
// Each kernel copies its input into a fresh batch of column-major matrices, LAPACK's layout, which
// is also the layout of PyTorch's results (strides (..., 1, rows)), factors each matrix in place and
// keeps LAPACK's `info` per matrix. float32 and float64, as PyTorch's CPU kernels (16-bit floats are
// refused with PyTorch's message; complex waits for complex dtypes). The public functions
// (kiln.linalg.inv, det, solve, svd, ...) compose these ops in Python, so autograd and tracing
// record the factorization; compiled code calls these kernels (Inductor's fallback).
//
// Note [check_errors names the public function]: with check_errors=True a kernel raises
// kiln.linalg.LinAlgError for a failed matrix, naming the public function ("linalg.inv: The
// diagonal element 2 is zero, ..."), and prefixed "(Batch element b): " for batches, as PyTorch's
// messages. The public functions pass check_errors=True, so compiled code raises the same error
// as eager; only a direct linalg.inv_ex(A, check_errors=True) reads "linalg.inv" where PyTorch
// writes "linalg.inv_ex".
#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <vector>

#include "tensor/ops/common.h"
#include "tensor/ops/lapack_cuda.h"

extern "C" {
// Fortran LAPACK (32-bit integers, as Debian's OpenBLAS); the trailing size_t are the hidden
// lengths of character arguments that gfortran-compiled routines expect.
void sgetrf_(const int* m, const int* n, float* a, const int* lda, int* ipiv, int* info);
void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info);
void sgetri_(const int* n, float* a, const int* lda, const int* ipiv, float* work, const int* lwork, int* info);
void dgetri_(const int* n, double* a, const int* lda, const int* ipiv, double* work, const int* lwork, int* info);
void sgetrs_(const char* trans, const int* n, const int* nrhs, const float* a, const int* lda, const int* ipiv,
             float* b, const int* ldb, int* info, size_t);
void dgetrs_(const char* trans, const int* n, const int* nrhs, const double* a, const int* lda, const int* ipiv,
             double* b, const int* ldb, int* info, size_t);
void spotrf_(const char* uplo, const int* n, float* a, const int* lda, int* info, size_t);
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info, size_t);
void sgeqrf_(const int* m, const int* n, float* a, const int* lda, float* tau, float* work, const int* lwork,
             int* info);
void dgeqrf_(const int* m, const int* n, double* a, const int* lda, double* tau, double* work, const int* lwork,
             int* info);
void sorgqr_(const int* m, const int* n, const int* k, float* a, const int* lda, const float* tau, float* work,
             const int* lwork, int* info);
void dorgqr_(const int* m, const int* n, const int* k, double* a, const int* lda, const double* tau, double* work,
             const int* lwork, int* info);
void sgesdd_(const char* jobz, const int* m, const int* n, float* a, const int* lda, float* s, float* u,
             const int* ldu, float* vt, const int* ldvt, float* work, const int* lwork, int* iwork, int* info,
             size_t);
void dgesdd_(const char* jobz, const int* m, const int* n, double* a, const int* lda, double* s, double* u,
             const int* ldu, double* vt, const int* ldvt, double* work, const int* lwork, int* iwork, int* info,
             size_t);
void ssyevd_(const char* jobz, const char* uplo, const int* n, float* a, const int* lda, float* w, float* work,
             const int* lwork, int* iwork, const int* liwork, int* info, size_t, size_t);
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w, double* work,
             const int* lwork, int* iwork, const int* liwork, int* info, size_t, size_t);
}

namespace kiln {
namespace {

template <typename T>
struct Lapack;
template <>
struct Lapack<float> {
  static constexpr auto getrf = sgetrf_;
  static constexpr auto getri = sgetri_;
  static constexpr auto getrs = sgetrs_;
  static constexpr auto potrf = spotrf_;
  static constexpr auto geqrf = sgeqrf_;
  static constexpr auto orgqr = sorgqr_;
  static constexpr auto gesdd = sgesdd_;
  static constexpr auto syevd = ssyevd_;
};
template <>
struct Lapack<double> {
  static constexpr auto getrf = dgetrf_;
  static constexpr auto getri = dgetri_;
  static constexpr auto getrs = dgetrs_;
  static constexpr auto potrf = dpotrf_;
  static constexpr auto geqrf = dgeqrf_;
  static constexpr auto orgqr = dorgqr_;
  static constexpr auto gesdd = dgesdd_;
  static constexpr auto syevd = dsyevd_;
};

using Tensor2 = std::tuple<Tensor, Tensor>;
using Tensor3 = std::tuple<Tensor, Tensor, Tensor>;
using Tensor4 = std::tuple<Tensor, Tensor, Tensor, Tensor>;
using Meta2 = std::tuple<TensorMeta, TensorMeta>;
using Meta3 = std::tuple<TensorMeta, TensorMeta, TensorMeta>;
using Meta4 = std::tuple<TensorMeta, TensorMeta, TensorMeta, TensorMeta>;

// Calls fn(T{}) for the LAPACK type T of a float32/float64 dtype (CheckInput refused the others).
template <typename F>
void DispatchReal(ScalarType dtype, const F& fn) {
  if (dtype == ScalarType::Float32) fn(float{});
  else fn(double{});
}

// --- shapes and layouts ----------------------------------------------------------------------

// PyTorch's checks on a linalg input, in its order and words. `kernel` names PyTorch's CPU kernel
// where a 16-bit float gets that kernel's NotImplementedError ("lu_cpu" not implemented for 'Half')
// rather than the RuntimeError of the functions that check dtypes first (inv, slogdet).
void CheckInput(const char* api, const Tensor& a, bool square, const char* kernel = nullptr) {
  KILN_CHECK(a.dim() >= 2, api, ": The input tensor A must have at least 2 dimensions.");
  if (square)
    KILN_CHECK(a->sym_sizes()[a.dim() - 1] == a->sym_sizes()[a.dim() - 2], api,
               ": A must be batches of square matrices, but they are ", a->sym_sizes()[a.dim() - 2], " by ",
               a->sym_sizes()[a.dim() - 1], " matrices");
  KILN_CHECK_NOT_IMPLEMENTED(!kernel || !IsReducedFloat(a.dtype()), "\"", kernel, "\" not implemented for '",
                             ScalarTypeDisplayName(a.dtype()), "'");
  KILN_CHECK(!IsReducedFloat(a.dtype()), api, ": Low precision dtypes not supported. Got ",
             ScalarTypeDisplayName(a.dtype()));
  KILN_CHECK(IsFloating(a.dtype()), api, ": Expected a floating point or complex tensor as input. Got ",
             ScalarTypeDisplayName(a.dtype()));
}

SymDimVector BatchOf(const SymDimVector& sizes, size_t trailing) {
  return SymDimVector(sizes.begin(), sizes.end() - static_cast<std::ptrdiff_t>(trailing));
}
SymDimVector With(SymDimVector sizes, std::initializer_list<SymInt> tail) {
  for (const SymInt& s : tail) sizes.push_back(s);
  return sizes;
}

// PyTorch's strides for a batch of column-major matrices (batched_matrix_contiguous_strides with
// f_contig): contiguous strides, then (1, max(rows, 1)) for the matrix dims.
SymDimVector ColumnMajorStrides(const SymDimVector& sizes) {
  SymDimVector strides = ContiguousStrides(sizes);
  const size_t d = sizes.size();
  if (d >= 2) {
    const SymInt& rows = sizes[d - 2];
    strides[d - 1] = rows.is_symbolic() ? sym_max(rows, SymInt(1)) : SymInt(std::max<int64_t>(rows.expect_int(), 1));
    strides[d - 2] = 1;
  }
  return strides;
}
TensorMeta ColumnMajor(const SymDimVector& sizes, ScalarType dtype, Device device) {
  return TensorMeta{sizes, ColumnMajorStrides(sizes), dtype, device};
}
TensorMeta Contiguous(const SymDimVector& sizes, ScalarType dtype, Device device) {
  return TensorMeta{sizes, {}, dtype, device};
}

// A fresh column-major copy of `a` (to `sizes` when given: a broadcast operand).
Tensor ColumnMajorCopy(const Tensor& a, const SymDimVector& sizes) {
  Tensor out = EmptyFromMeta(ColumnMajor(sizes, a.dtype(), a.device()));
  if (out.numel() > 0) ops::copy_(out, a);
  return out;
}
Tensor ColumnMajorCopy(const Tensor& a) { return ColumnMajorCopy(a, a->sym_sizes()); }

int64_t BatchCount(const Tensor& t) {
  int64_t n = 1;
  for (int64_t d = 0; d + 2 < t.dim(); ++d) n *= t.size(d);
  return n;
}

int AsLapackInt(const char* api, int64_t v) {
  KILN_CHECK(v <= INT32_MAX, api, ": matrix dimension ", v, " exceeds LAPACK's 32-bit index range");
  return static_cast<int>(v);
}

// The failure prefix of matrix b in a batch ("(Batch element 3): "); none for a single matrix.
std::string BatchPrefix(const Tensor& a, int64_t b) {
  return a.dim() > 2 ? StrCat("(Batch element ", b, "): ") : std::string();
}
[[noreturn]] void ThrowLinAlg(const std::string& msg) { throw NamedError("kiln.linalg", "LinAlgError", msg); }

// `info` where the host can read it: itself on the CPU, a copy of a CUDA one (a synchronisation).
Tensor HostInfo(const Tensor& info) { return info.device().is_cuda() ? CopyToDevice(info, Device()) : info; }

// --- LU ---------------------------------------------------------------------------------------

// Factors the column-major batch `lu` in place: pivots (1-based, int32) and info per matrix.
template <typename T>
void LuInPlace(Tensor& lu, Tensor& pivots, Tensor& info) {
  const int64_t m = lu.size(-2), n = lu.size(-1), k = std::min(m, n), count = BatchCount(lu);
  const int mi = AsLapackInt("linalg.lu_factor", m), ni = AsLapackInt("linalg.lu_factor", n);
  const int lda = std::max(mi, 1);
  T* a = lu.data_ptr<T>();
  int32_t* piv = pivots.data_ptr<int32_t>();
  int32_t* inf = info.data_ptr<int32_t>();
  for (int64_t b = 0; b < count; ++b) {
    int status = 0;
    if (m > 0 && n > 0) Lapack<T>::getrf(&mi, &ni, a + b * m * n, &lda, piv + b * k, &status);
    inf[b] = status;
  }
}

// The LU factorization of `a` (column-major), its pivots and info.
Tensor3 LuFactor(const Tensor& a) {
  const SymDimVector& s = a->sym_sizes();
  const SymDimVector batch = BatchOf(s, 2);
  Tensor lu = ColumnMajorCopy(a);
  Tensor pivots = EmptyFromMeta(Contiguous(With(batch, {sym_min(s[s.size() - 2], s.back())}), ScalarType::Int32,
                                           a.device()));
  Tensor info = EmptyFromMeta(Contiguous(batch, ScalarType::Int32, a.device()));
  if (a.device().is_cuda()) LuInPlaceCUDA(lu, pivots, info);
  else DispatchReal(a.dtype(), [&](auto t) { LuInPlace<decltype(t)>(lu, pivots, info); });
  return {lu, pivots, info};
}

Meta3 LuFactorExMeta(const Tensor& a, bool pivot, bool) {
  CheckInput("torch.linalg.lu_factor", a, false, "lu_cpu");
  KILN_CHECK_NOT_IMPLEMENTED(pivot, "linalg.lu_factor: LU without pivoting is not implemented on the CPU");
  const SymDimVector& s = a->sym_sizes();
  const SymDimVector batch = BatchOf(s, 2);
  return {ColumnMajor(s, a.dtype(), a.device()),
          Contiguous(With(batch, {sym_min(s[s.size() - 2], s.back())}), ScalarType::Int32, a.device()),
          Contiguous(batch, ScalarType::Int32, a.device())};
}
Tensor3 LuFactorExCPU(const Tensor& a, bool pivot, bool check_errors) {
  LuFactorExMeta(a, pivot, check_errors);
  Tensor3 r = LuFactor(a);
  if (check_errors) {
    const Tensor host_info = HostInfo(std::get<2>(r));
    const int32_t* inf = host_info.data_ptr<int32_t>();
    for (int64_t b = 0; b < std::get<2>(r).numel(); ++b)
      KILN_CHECK(inf[b] <= 0, "torch.linalg.lu_factor", a.dim() > 2 ? StrCat(": (Batch element ", b, "): ") : ": ",
                 "U[", inf[b], ",", inf[b], "] is zero and using it on lu_solve would result in a division by "
                 "zero. If you still want to perform the factorization, consider calling linalg.lu(A, pivot) or "
                 "linalg.lu_factor_ex(A, pivot)");
  }
  return r;
}

// --- inverse ----------------------------------------------------------------------------------

Meta2 InvExMeta(const Tensor& a, bool) {
  CheckInput("linalg.inv", a, true);
  return {ColumnMajor(a->sym_sizes(), a.dtype(), a.device()),
          Contiguous(BatchOf(a->sym_sizes(), 2), ScalarType::Int32, a.device())};
}
template <typename T>
void InvertLu(Tensor& lu, const Tensor& pivots, Tensor& info) {
  const int64_t n = lu.size(-1), count = BatchCount(lu);
  const int ni = AsLapackInt("linalg.inv", n), lda = std::max(ni, 1);
  int lwork = -1, status = 0;
  T query = 0;
  Lapack<T>::getri(&ni, nullptr, &lda, nullptr, &query, &lwork, &status);
  lwork = std::max(1, static_cast<int>(query));
  std::vector<T> work(static_cast<size_t>(lwork));
  int32_t* inf = info.data_ptr<int32_t>();
  for (int64_t b = 0; b < count; ++b) {
    if (inf[b] != 0 || n == 0) continue;  // singular: getri would divide by the zero pivot
    Lapack<T>::getri(&ni, lu.data_ptr<T>() + b * n * n, &lda, pivots.data_ptr<int32_t>() + b * n, work.data(),
                     &lwork, &status);
    inf[b] = status;
  }
}
Tensor2 InvExCPU(const Tensor& a, bool check_errors) {
  InvExMeta(a, check_errors);
  auto [lu, pivots, info] = LuFactor(a);
  if (a.device().is_cuda()) lu = InvertLuCUDA(lu, pivots);  // a singular matrix's inverse holds inf/NaN
  else DispatchReal(a.dtype(), [&](auto t) { InvertLu<decltype(t)>(lu, pivots, info); });
  const Tensor host_info = HostInfo(info);
  const int32_t* inf = host_info.data_ptr<int32_t>();
  for (int64_t b = 0; b < info.numel(); ++b) {
    if (inf[b] > 0 && check_errors)
      ThrowLinAlg(StrCat("linalg.inv: ", BatchPrefix(a, b), "The diagonal element ", inf[b],
                         " is zero, the inversion could not be completed because the input matrix is singular."));
  }
  return {lu, info};
}

// --- determinants -----------------------------------------------------------------------------

// det = (-1)^(row swaps) * prod(diag(U)), from the LU factors; slogdet's sign is 0 for a singular
// matrix and its log|det| then -inf.
template <typename T>
void DetFromLu(const Tensor& lu, const Tensor& pivots, T* det, T* sign, T* logabs) {
  const int64_t n = lu.size(-1), count = BatchCount(lu);
  const T* a = lu.data_ptr<T>();
  const int32_t* piv = pivots.data_ptr<int32_t>();
  for (int64_t b = 0; b < count; ++b) {
    T swaps = 1, sign_u = 1, prod = 1, log_sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      const T u = a[b * n * n + i * n + i];
      if (piv[b * n + i] != i + 1) swaps = -swaps;
      prod *= u;
      if (u < 0) sign_u = -sign_u;
      log_sum += std::log(std::abs(u));
    }
    if (det) det[b] = swaps * prod;
    if (sign) sign[b] = log_sum == -INFINITY ? T(0) : swaps * sign_u;
    if (logabs) logabs[b] = log_sum;
  }
}

Meta3 DetMeta(const Tensor& a) {
  CheckInput("linalg.det", a, true, "lu_cpu");
  const SymDimVector& s = a->sym_sizes();
  const SymDimVector batch = BatchOf(s, 2);
  return {Contiguous(batch, a.dtype(), a.device()), ColumnMajor(s, a.dtype(), a.device()),
          Contiguous(With(batch, {s.back()}), ScalarType::Int32, a.device())};
}
Tensor3 DetCPU(const Tensor& a) {
  auto [dm, lm, pm] = DetMeta(a);
  auto [lu, pivots, info] = LuFactor(a);
  Tensor det = EmptyFromMeta(dm);
  if (a.device().is_cuda()) {
    ops::copy_(det, std::get<0>(DetFromLuCUDA(lu, pivots)));
    return {det, lu, pivots};
  }
  DispatchReal(a.dtype(), [&](auto t) {
    using scalar_t = decltype(t);
    DetFromLu<scalar_t>(lu, pivots, det.data_ptr<scalar_t>(), nullptr, nullptr);
  });
  return {det, lu, pivots};
}

Meta4 SlogdetMeta(const Tensor& a) {
  CheckInput("linalg.slogdet", a, true);
  auto [dm, lm, pm] = DetMeta(a);
  return {dm, dm, lm, pm};
}
Tensor4 SlogdetCPU(const Tensor& a) {
  auto [sm, am, lm, pm] = SlogdetMeta(a);
  auto [lu, pivots, info] = LuFactor(a);
  Tensor sign = EmptyFromMeta(sm), logabs = EmptyFromMeta(am);
  if (a.device().is_cuda()) {
    auto [det, s, l] = DetFromLuCUDA(lu, pivots);
    ops::copy_(sign, s);
    ops::copy_(logabs, l);
    return {sign, logabs, lu, pivots};
  }
  DispatchReal(a.dtype(), [&](auto t) {
    using scalar_t = decltype(t);
    DetFromLu<scalar_t>(lu, pivots, nullptr, sign.data_ptr<scalar_t>(), logabs.data_ptr<scalar_t>());
  });
  return {sign, logabs, lu, pivots};
}

// --- solve ------------------------------------------------------------------------------------

// Whether B is a (batch of) vector(s) for A: PyTorch's linalg_solve_is_vector_rhs.
bool SolveVectorRhs(const Tensor& a, const Tensor& b) {
  if (b.dim() == 1) return true;
  if (b.dim() != a.dim() - 1) return false;
  const SymDimVector& as = a->sym_sizes();
  const SymDimVector& bs = b->sym_sizes();
  for (size_t i = 0; i < bs.size(); ++i)
    if (!(as[i] == bs[i])) return false;
  return true;
}

struct SolveShapes {
  bool vector;
  SymDimVector a_sizes, b_sizes;  // broadcast, B as a matrix (n x k)
  SymDimVector result;            // the result's sizes (B's, broadcast)
};
SolveShapes SolveShapesOf(const Tensor& a, const Tensor& b, bool left) {
  CheckInput("linalg.solve", a, true, "lu_cpu");
  KILN_CHECK(a.dtype() == b.dtype(), "linalg.solve: Expected A and B to have the same dtype, but found A of type ",
             ScalarTypeDisplayName(a.dtype()), " and B of type ", ScalarTypeDisplayName(b.dtype()), " instead");
  const bool vector = SolveVectorRhs(a, b);
  KILN_CHECK(left || !vector, "linalg.solve: Vector broadcasting of the left hand side is not supported for "
             "left=False. In this case linalg.solve is equivalent to B / A.squeeze(-1)");
  const SymDimVector& as = a->sym_sizes();
  SymDimVector bm = b->sym_sizes();
  if (vector) bm.push_back(SymInt(1));
  const SymInt& n = as.back();
  const SymInt rows = left ? bm[bm.size() - 2] : bm.back();
  KILN_CHECK(rows == n, "linalg.solve: Incompatible shapes of A and B for the equation ",
             left ? "AX = B" : "XA = B", " (", as[as.size() - 2], "x", n, " and ", bm[bm.size() - 2], "x",
             bm.back(), ")");
  const SymDimVector batch = BroadcastShapes("linalg.solve", BatchOf(as, 2), BatchOf(bm, 2));
  SolveShapes s{vector, With(batch, {n, n}), With(batch, {bm[bm.size() - 2], bm.back()}), {}};
  s.result = vector ? With(batch, {n}) : s.b_sizes;
  return s;
}

// A is factored as given (LU, pivots and info have A's batch, as PyTorch's); the solve broadcasts
// the factors against B's batch. The result is column-major for AX = B and row-major for XA = B
// (the transpose of the column-major solution of A^T X^T = B^T), as PyTorch lays them out.
Meta4 SolveExMeta(const Tensor& a, const Tensor& b, bool left, bool) {
  SolveShapes s = SolveShapesOf(a, b, left);
  const SymDimVector& as = a->sym_sizes();
  const SymDimVector batch = BatchOf(as, 2);
  TensorMeta result = left ? ColumnMajor(s.result, a.dtype(), a.device()) : Contiguous(s.result, a.dtype(), a.device());
  return {result, ColumnMajor(as, a.dtype(), a.device()),
          Contiguous(With(batch, {as.back()}), ScalarType::Int32, a.device()),
          Contiguous(batch, ScalarType::Int32, a.device())};
}

template <typename T>
void SolveWithLu(const Tensor& lu, const Tensor& pivots, Tensor& x, bool transpose) {
  const int64_t n = lu.size(-1), k = x.size(-1), count = BatchCount(lu);
  const int ni = AsLapackInt("linalg.solve", n), ki = AsLapackInt("linalg.solve", k), ld = std::max(ni, 1);
  const char trans = transpose ? 'T' : 'N';
  for (int64_t b = 0; b < count; ++b) {
    int status = 0;
    if (n > 0 && k > 0)
      Lapack<T>::getrs(&trans, &ni, &ki, lu.data_ptr<T>() + b * n * n, &ld, pivots.data_ptr<int32_t>() + b * n,
                       x.data_ptr<T>() + b * n * k, &ld, &status, 1);
  }
}

// AX = B through A's LU: X = U^-1 L^-1 P^T B. XA = B (left=False) is A^T X^T = B^T: the same
// factors, transposed (getrs 'T') on X^T, which is X's column-major storage read row-major.
Tensor4 SolveExCPU(const Tensor& a, const Tensor& b, bool left, bool check_errors) {
  auto [rm, lm, pm, im] = SolveExMeta(a, b, left, check_errors);
  SolveShapes s = SolveShapesOf(a, b, left);
  auto [lu, pivots, info] = LuFactor(a);
  const Tensor host_info = check_errors ? HostInfo(info) : Tensor();
  for (int64_t i = 0; check_errors && i < info.numel(); ++i)
    if (host_info.data_ptr<int32_t>()[i] > 0)
      ThrowLinAlg(StrCat("torch.linalg.solve: ", BatchPrefix(lu, i),
                         "The solver failed because the input matrix is singular."));
  Tensor lu_b = lu, pivots_b = pivots;  // the factors over the broadcast batch
  if (!(a->sym_sizes() == s.a_sizes)) {
    lu_b = ColumnMajorCopy(lu, s.a_sizes);
    SymDimVector ps = BatchOf(s.a_sizes, 1);
    pivots_b = ops::contiguous(ops::expand(pivots, std::vector<SymInt>(ps.begin(), ps.end())));
  }
  Tensor bm = s.vector ? ops::unsqueeze(b, -1) : b;
  // left: X (n x k) column-major; right: X^T (k x n) column-major, which is X row-major
  Tensor x;
  if (left) {
    x = ColumnMajorCopy(bm, s.b_sizes);
  } else {
    Tensor bt = ops::transpose(bm, -2, -1);
    SymDimVector ts = s.b_sizes;
    std::swap(ts[ts.size() - 1], ts[ts.size() - 2]);
    x = ColumnMajorCopy(bt, ts);
  }
  if (a.device().is_cuda()) SolveWithLuCUDA(lu_b, pivots_b, x, !left);
  else DispatchReal(a.dtype(), [&](auto t) { SolveWithLu<decltype(t)>(lu_b, pivots_b, x, !left); });
  if (!left) x = ops::transpose(x, -2, -1);
  Tensor result = EmptyFromMeta(rm);
  if (result.numel() > 0) ops::copy_(result, s.vector ? ops::squeeze(x, -1) : x);
  return std::make_tuple(result, lu, pivots, info);
}

// --- Cholesky ---------------------------------------------------------------------------------

Meta2 CholeskyExMeta(const Tensor& a, bool, bool) {
  CheckInput("linalg.cholesky", a, true, "cholesky_cpu");
  return {ColumnMajor(a->sym_sizes(), a.dtype(), a.device()),
          Contiguous(BatchOf(a->sym_sizes(), 2), ScalarType::Int32, a.device())};
}
template <typename T>
void CholeskyInPlace(Tensor& l, Tensor& info, bool upper) {
  const int64_t n = l.size(-1), count = BatchCount(l);
  const int ni = AsLapackInt("linalg.cholesky", n), lda = std::max(ni, 1);
  const char uplo = upper ? 'U' : 'L';
  T* a = l.data_ptr<T>();
  int32_t* inf = info.data_ptr<int32_t>();
  for (int64_t b = 0; b < count; ++b) {
    int status = 0;
    T* m = a + b * n * n;
    if (n > 0) Lapack<T>::potrf(&uplo, &ni, m, &lda, &status, 1);
    inf[b] = status;
    for (int64_t j = 0; j < n; ++j)  // zero the other triangle (potrf leaves A's values there)
      for (int64_t i = 0; i < n; ++i)
        if (upper ? i > j : i < j) m[j * n + i] = 0;
  }
}
Tensor2 CholeskyExCPU(const Tensor& a, bool upper, bool check_errors) {
  CholeskyExMeta(a, upper, check_errors);
  Tensor l = ColumnMajorCopy(a);
  Tensor info = EmptyFromMeta(Contiguous(BatchOf(a->sym_sizes(), 2), ScalarType::Int32, a.device()));
  if (a.device().is_cuda()) CholeskyInPlaceCUDA(l, info, upper);
  else DispatchReal(a.dtype(), [&](auto t) { CholeskyInPlace<decltype(t)>(l, info, upper); });
  const Tensor host_info = check_errors ? HostInfo(info) : info;
  const int32_t* inf = check_errors ? host_info.data_ptr<int32_t>() : nullptr;
  for (int64_t b = 0; check_errors && b < info.numel(); ++b)
    if (inf[b] > 0)
      ThrowLinAlg(StrCat("linalg.cholesky: ", BatchPrefix(a, b), "The factorization could not be completed because "
                         "the input is not positive-definite (the leading minor of order ", inf[b],
                         " is not positive-definite)."));
  return {l, info};
}

// --- QR ---------------------------------------------------------------------------------------

Meta2 QrMeta(const Tensor& a, std::string mode) {
  CheckInput("linalg.qr", a, false, "geqrf_cpu");
  KILN_CHECK(mode == "reduced" || mode == "r" || mode == "complete", "qr received unrecognized mode '", mode,
             "' but expected one of 'reduced' (default), 'r', or 'complete'");
  const SymDimVector& s = a->sym_sizes();
  const SymInt m = s[s.size() - 2], n = s.back(), k = sym_min(m, n);
  const SymDimVector batch = BatchOf(s, 2);
  const SymInt q_cols = mode == "complete" ? m : k;
  const SymInt r_rows = mode == "complete" ? m : k;
  TensorMeta q = mode == "r" ? Contiguous({SymInt(0)}, a.dtype(), a.device())
                             : ColumnMajor(With(batch, {m, q_cols}), a.dtype(), a.device());
  return {q, ColumnMajor(With(batch, {r_rows, n}), a.dtype(), a.device())};
}
template <typename T>
void QrInPlace(const Tensor& factors, Tensor& q, Tensor& r, bool compute_q) {
  const int64_t m = factors.size(-2), n = factors.size(-1), k = std::min(m, n), count = BatchCount(factors);
  const int64_t r_rows = r.size(-2), q_cols = compute_q ? q.size(-1) : 0;
  const int mi = AsLapackInt("linalg.qr", m), ni = AsLapackInt("linalg.qr", n), ki = static_cast<int>(k);
  const int lda = std::max(mi, 1), qc = static_cast<int>(q_cols);
  std::vector<T> tau(static_cast<size_t>(std::max<int64_t>(k, 1)));
  int status = 0, lwork = -1;
  T query = 0, query2 = 0;
  Lapack<T>::geqrf(&mi, &ni, nullptr, &lda, nullptr, &query, &lwork, &status);
  if (compute_q) Lapack<T>::orgqr(&mi, &qc, &ki, nullptr, &lda, nullptr, &query2, &lwork, &status);
  lwork = std::max({1, static_cast<int>(query), static_cast<int>(query2)});
  std::vector<T> work(static_cast<size_t>(lwork));
  std::vector<T> qbuf(static_cast<size_t>(m * std::max(n, q_cols)));
  const T* src = factors.data_ptr<T>();
  T* rd = r.data_ptr<T>();
  for (int64_t b = 0; b < count; ++b) {
    // geqrf needs room for q_cols columns when the complete Q has more columns than A
    std::copy(src + b * m * n, src + (b + 1) * m * n, qbuf.begin());
    if (m > 0 && n > 0) Lapack<T>::geqrf(&mi, &ni, qbuf.data(), &lda, tau.data(), work.data(), &lwork, &status);
    T* rb = rd + b * r_rows * n;
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < r_rows; ++i) rb[j * r_rows + i] = i <= j && i < m ? qbuf[j * m + i] : T(0);
    if (!compute_q) continue;
    if (m > 0 && q_cols > 0) {
      Lapack<T>::orgqr(&mi, &qc, &ki, qbuf.data(), &lda, tau.data(), work.data(), &lwork, &status);
    }
    std::copy(qbuf.begin(), qbuf.begin() + m * q_cols, q.data_ptr<T>() + b * m * q_cols);
  }
}
Tensor2 QrCPU(const Tensor& a, std::string mode) {
  auto [qm, rm] = QrMeta(a, mode);
  Tensor q = EmptyFromMeta(qm), r = EmptyFromMeta(rm);
  Tensor factors = ColumnMajorCopy(a);
  if (a.device().is_cuda()) QrCUDA(factors, q, r, mode != "r");
  else DispatchReal(a.dtype(), [&](auto t) { QrInPlace<decltype(t)>(factors, q, r, mode != "r"); });
  return {q, r};
}

// --- SVD --------------------------------------------------------------------------------------

Meta3 SvdMeta(const Tensor& a, bool full_matrices, bool compute_uv, std::optional<std::string>) {
  CheckInput("linalg.svd", a, false, "linalg_svd_cpu");
  const SymDimVector& s = a->sym_sizes();
  const SymInt m = s[s.size() - 2], n = s.back(), k = sym_min(m, n);
  const SymDimVector batch = BatchOf(s, 2);
  TensorMeta sv = Contiguous(With(batch, {k}), a.dtype(), a.device());
  if (!compute_uv) {
    TensorMeta none = Contiguous({SymInt(0)}, a.dtype(), a.device());
    return {none, sv, none};
  }
  return {ColumnMajor(With(batch, {m, full_matrices ? m : k}), a.dtype(), a.device()), sv,
          ColumnMajor(With(batch, {full_matrices ? n : k, n}), a.dtype(), a.device())};
}

template <typename T>
void SvdInPlace(const Tensor& src, Tensor& u, Tensor& sv, Tensor& vh, bool full, bool compute_uv) {
  const int64_t m = src.size(-2), n = src.size(-1), k = std::min(m, n), count = BatchCount(src);
  const int mi = AsLapackInt("linalg.svd", m), ni = AsLapackInt("linalg.svd", n), lda = std::max(mi, 1);
  const char jobz = !compute_uv ? 'N' : full ? 'A' : 'S';
  const int64_t u_cols = compute_uv ? u.size(-1) : 0, vh_rows = compute_uv ? vh.size(-2) : 0;
  const int ldu = std::max(mi, 1), ldvt = std::max(static_cast<int>(vh_rows), 1);
  std::vector<int> iwork(static_cast<size_t>(8 * std::max<int64_t>(k, 1)));
  std::vector<T> a(static_cast<size_t>(m * n));
  int status = 0, lwork = -1;
  T query = 0, dummy = 0;
  Lapack<T>::gesdd(&jobz, &mi, &ni, nullptr, &lda, nullptr, nullptr, &ldu, nullptr, &ldvt, &query, &lwork,
                   iwork.data(), &status, 1);
  lwork = std::max(1, static_cast<int>(query));
  std::vector<T> work(static_cast<size_t>(lwork));
  for (int64_t b = 0; b < count; ++b) {
    const T* mat = src.data_ptr<T>() + b * m * n;
    for (int64_t i = 0; i < m * n; ++i)
      if (!std::isfinite(mat[i]))
        ThrowLinAlg(StrCat("linalg.svd: ", BatchPrefix(src, b),
                           "The algorithm failed to converge because the input matrix contained non-finite values."));
    if (k == 0) {  // nothing to factor; a full U or Vh of an empty matrix is the identity
      if (compute_uv && full) {
        T* ub = u.data_ptr<T>() + b * m * u_cols;
        T* vb = vh.data_ptr<T>() + b * vh_rows * n;
        std::fill(ub, ub + m * u_cols, T(0));
        std::fill(vb, vb + vh_rows * n, T(0));
        for (int64_t i = 0; i < m; ++i) ub[i * m + i] = 1;
        for (int64_t i = 0; i < n; ++i) vb[i * n + i] = 1;
      }
      continue;
    }
    std::copy(mat, mat + m * n, a.begin());
    Lapack<T>::gesdd(&jobz, &mi, &ni, a.data(), &lda, sv.data_ptr<T>() + b * k,
                     compute_uv ? u.data_ptr<T>() + b * m * u_cols : &dummy, &ldu,
                     compute_uv ? vh.data_ptr<T>() + b * vh_rows * n : &dummy, &ldvt, work.data(), &lwork,
                     iwork.data(), &status, 1);
    if (status > 0)
      ThrowLinAlg(StrCat("linalg.svd: ", BatchPrefix(src, b), "The algorithm failed to converge because the input "
                         "matrix is ill-conditioned or has too many repeated singular values (error code: ",
                         status, ")."));
  }
}
Tensor3 SvdCPU(const Tensor& a, bool full_matrices, bool compute_uv, std::optional<std::string> driver) {
  auto [um, sm, vm] = SvdMeta(a, full_matrices, compute_uv, driver);
  KILN_CHECK(!driver.has_value() || a.device().is_cuda(), "torch.linalg.svd: keyword argument `driver=` is only "
             "supported on CUDA inputs with cuSOLVER backend.");
  KILN_CHECK(!driver.has_value() || *driver == "gesvd" || *driver == "gesvdj" || *driver == "gesvda",
             "torch.linalg.svd: unknown driver '", driver.value_or(""), "'; expected one of 'gesvd', 'gesvdj', "
             "'gesvda'");
  Tensor u = EmptyFromMeta(um), sv = EmptyFromMeta(sm), vh = EmptyFromMeta(vm);
  Tensor src = ColumnMajorCopy(a);
  if (a.device().is_cuda()) {  // every driver runs cuSOLVER's gesvd
    SvdCUDA(src, u, sv, vh, full_matrices, compute_uv);
    return {u, sv, vh};
  }
  DispatchReal(a.dtype(), [&](auto t) { SvdInPlace<decltype(t)>(src, u, sv, vh, full_matrices, compute_uv); });
  return {u, sv, vh};
}

// --- symmetric eigendecomposition --------------------------------------------------------------

Meta2 EighMeta(const Tensor& a, std::string uplo, bool compute_v) {
  KILN_CHECK_NOT_IMPLEMENTED(a.dim() < 2 || IsFloating(a.dtype()), "\"linalg_eigh_cpu\" not implemented for '",
                             ScalarTypeDisplayName(a.dtype()), "'");
  CheckInput("linalg.eigh", a, true, "linalg_eigh_cpu");
  KILN_CHECK(uplo == "L" || uplo == "U" || uplo == "l" || uplo == "u",
             "Expected UPLO argument to be 'L' or 'U', but got ", uplo);
  const SymDimVector& s = a->sym_sizes();
  TensorMeta w = Contiguous(BatchOf(s, 1), a.dtype(), a.device());
  return {w, compute_v ? ColumnMajor(s, a.dtype(), a.device()) : Contiguous({SymInt(0)}, a.dtype(), a.device())};
}
// Factors the column-major batch `a` in place: eigenvalues ascending into w, eigenvectors (the
// columns) over a when compute_v.
template <typename T>
void EighInPlace(Tensor& a, Tensor& w, char uplo, bool compute_v) {
  const int64_t n = a.size(-1), count = BatchCount(a);
  const int ni = AsLapackInt("linalg.eigh", n), lda = std::max(ni, 1);
  const char jobz = compute_v ? 'V' : 'N';
  int status = 0, lwork = -1, liwork = -1, iquery = 0;
  T query = 0;
  Lapack<T>::syevd(&jobz, &uplo, &ni, nullptr, &lda, nullptr, &query, &lwork, &iquery, &liwork, &status, 1, 1);
  lwork = std::max(1, static_cast<int>(query));
  liwork = std::max(1, iquery);
  std::vector<T> work(static_cast<size_t>(lwork));
  std::vector<int> iwork(static_cast<size_t>(liwork));
  for (int64_t b = 0; b < count && n > 0; ++b) {
    Lapack<T>::syevd(&jobz, &uplo, &ni, a.data_ptr<T>() + b * n * n, &lda, w.data_ptr<T>() + b * n, work.data(),
                     &lwork, iwork.data(), &liwork, &status, 1, 1);
    if (status > 0)
      ThrowLinAlg(StrCat("linalg.eigh: ", BatchPrefix(a, b), "The algorithm failed to converge because the input "
                         "matrix is ill-conditioned or has too many repeated eigenvalues (error code: ", status,
                         ")."));
  }
}
Tensor2 EighCPU(const Tensor& a, std::string uplo, bool compute_v) {
  auto [wm, vm] = EighMeta(a, uplo, compute_v);
  Tensor w = EmptyFromMeta(wm), work = ColumnMajorCopy(a);
  const char ul = static_cast<char>(std::toupper(static_cast<unsigned char>(uplo[0])));
  if (a.device().is_cuda()) EighCUDA(work, w, ul == 'U', compute_v);
  else DispatchReal(a.dtype(), [&](auto t) { EighInPlace<decltype(t)>(work, w, ul, compute_v); });
  return {w, compute_v ? work : EmptyFromMeta(vm)};
}

}  // namespace

void RegisterLapackOps(Registry& r) {
  r.Def("linalg_lu_factor_ex(Tensor A, *, bool pivot=True, bool check_errors=False) -> "
        "(Tensor LU, Tensor pivots, Tensor info)", {}, kFunction)
      .CPUAndCUDA<&LuFactorExCPU>().Meta<&LuFactorExMeta>();
  r.Def("linalg_inv_ex(Tensor A, *, bool check_errors=False) -> (Tensor inverse, Tensor info)", {}, kFunction)
      .CPUAndCUDA<&InvExCPU>().Meta<&InvExMeta>();
  r.Def("_linalg_det(Tensor A) -> (Tensor result, Tensor LU, Tensor pivots)", {}, kFunction)
      .CPUAndCUDA<&DetCPU>().Meta<&DetMeta>();
  r.Def("_linalg_slogdet(Tensor A) -> (Tensor sign, Tensor logabsdet, Tensor LU, Tensor pivots)", {}, kFunction)
      .CPUAndCUDA<&SlogdetCPU>().Meta<&SlogdetMeta>();
  r.Def("_linalg_solve_ex(Tensor A, Tensor B, *, bool left=True, bool check_errors=False) -> "
        "(Tensor result, Tensor LU, Tensor pivots, Tensor info)", {}, kFunction)
      .CPUAndCUDA<&SolveExCPU>().Meta<&SolveExMeta>();
  r.Def("linalg_cholesky_ex(Tensor self, *, bool upper=False, bool check_errors=False) -> (Tensor L, Tensor info)",
        {}, kFunction)
      .CPUAndCUDA<&CholeskyExCPU>().Meta<&CholeskyExMeta>();
  r.Def("linalg_qr(Tensor A, str mode='reduced') -> (Tensor Q, Tensor R)", {}, kFunction)
      .CPUAndCUDA<&QrCPU>().Meta<&QrMeta>();
  r.Def("_linalg_svd(Tensor A, bool full_matrices=False, bool compute_uv=True, *, str? driver=None) -> "
        "(Tensor U, Tensor S, Tensor Vh)", {}, kFunction)
      .CPUAndCUDA<&SvdCPU>().Meta<&SvdMeta>();
  r.Def("_linalg_eigh(Tensor A, str UPLO='L', bool compute_v=True) -> (Tensor eigenvalues, Tensor eigenvectors)",
        {}, kFunction)
      .CPUAndCUDA<&EighCPU>().Meta<&EighMeta>();
}

}  // namespace kiln
