// runtime/cuda/cusolver.cc: the cuSOLVER loader, per-thread handles, and the dense routines.
#include "runtime/cuda/cusolver.h"

#include <array>

#include "runtime/cuda/driver.h"
#include "runtime/cuda/loader.h"
#include "runtime/error.h"

namespace kiln::cuda {
namespace {

using Status = int;
struct HandleSt;
using Handle = HandleSt*;
// cublasFillMode_t, cublasOperation_t and cusolverEigMode_t values of CUDA 13's headers.
constexpr int kLower = 0, kUpper = 1, kOpN = 0, kOpT = 1, kNoVectors = 0, kVectors = 1;

// One precision's routines; matrices are float* or double* (void* here: the same ABI).
struct Routines {
  Status (*getrf_size)(Handle, int, int, void*, int, int*) = nullptr;
  Status (*getrf)(Handle, int, int, void*, int, void*, int*, int*) = nullptr;
  Status (*getrs)(Handle, int, int, int, const void*, int, const int*, void*, int, int*) = nullptr;
  Status (*potrf_size)(Handle, int, int, void*, int, int*) = nullptr;
  Status (*potrf)(Handle, int, int, void*, int, void*, int, int*) = nullptr;
  Status (*geqrf_size)(Handle, int, int, void*, int, int*) = nullptr;
  Status (*geqrf)(Handle, int, int, void*, int, void*, void*, int, int*) = nullptr;
  Status (*orgqr_size)(Handle, int, int, int, const void*, int, const void*, int*) = nullptr;
  Status (*orgqr)(Handle, int, int, int, void*, int, const void*, void*, int, int*) = nullptr;
  Status (*syevd_size)(Handle, int, int, int, const void*, int, const void*, int*) = nullptr;
  Status (*syevd)(Handle, int, int, int, void*, int, void*, void*, int, int*) = nullptr;
  Status (*gesvd_size)(Handle, int, int, int*) = nullptr;
  Status (*gesvd)(Handle, signed char, signed char, int, int, void*, int, void*, void*, int, void*, int, void*, int,
                  void*, int*) = nullptr;
};

struct Cusolver {
  bool available = false;
  std::string reason;
  Status (*create)(Handle*) = nullptr;
  Status (*set_stream)(Handle, CUstream) = nullptr;
  Routines s, d;
};

void ResolveRoutines(const Library& lib, char t, Routines& r, std::string* reason) {
  auto find = [&](auto& fn, const char* name) {
    ResolveSymbol(lib, fn, (std::string("cusolverDn") + t + name).c_str(), reason);
  };
  find(r.getrf_size, "getrf_bufferSize");
  find(r.getrf, "getrf");
  find(r.getrs, "getrs");
  find(r.potrf_size, "potrf_bufferSize");
  find(r.potrf, "potrf");
  find(r.geqrf_size, "geqrf_bufferSize");
  find(r.geqrf, "geqrf");
  find(r.orgqr_size, "orgqr_bufferSize");
  find(r.orgqr, "orgqr");
  find(r.syevd_size, "syevd_bufferSize");
  find(r.syevd, "syevd");
  find(r.gesvd_size, "gesvd_bufferSize");
  find(r.gesvd, "gesvd");
}

Cusolver* Load() {
  auto* c = new Cusolver();
  Library lib = OpenLibraryWithDriver("cuSOLVER", "libcusolver.so.12", &c->reason);
  if (lib.handle == nullptr) return c;
  ResolveSymbol(lib, c->create, "cusolverDnCreate", &c->reason);
  ResolveSymbol(lib, c->set_stream, "cusolverDnSetStream", &c->reason);
  ResolveRoutines(lib, 'S', c->s, &c->reason);
  ResolveRoutines(lib, 'D', c->d, &c->reason);
  c->available = c->reason.empty();
  return c;
}

Cusolver& Lib() {
  static Cusolver* lib = Load();
  return *lib;
}

// cuSOLVER's status values (cusolver_common.h) as its documentation names them.
const char* StatusName(Status s) {
  switch (s) {
    case 1: return "CUSOLVER_STATUS_NOT_INITIALIZED";
    case 2: return "CUSOLVER_STATUS_ALLOC_FAILED";
    case 3: return "CUSOLVER_STATUS_INVALID_VALUE";
    case 4: return "CUSOLVER_STATUS_ARCH_MISMATCH";
    case 6: return "CUSOLVER_STATUS_EXECUTION_FAILED";
    case 7: return "CUSOLVER_STATUS_INTERNAL_ERROR";
    case 8: return "CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED";
    default: return "CUSOLVER_STATUS_UNKNOWN";
  }
}

void CheckSolver(Status s, const char* what) {
  if (s == 0) return;
  throw NamedError("kiln", "AcceleratorError",
                   std::string("cuSOLVER error: ") + StatusName(s) + " (" + std::to_string(s) + ") when calling `" +
                       what + "`");
}

// The calling thread's handle on the call's device, bound to its stream, and its routines.
std::pair<Handle, const Routines*> Begin(const SolverCall& c) {
  KILN_CHECK(CusolverAvailable(), Lib().reason);
  thread_local std::array<Handle, 64> handles{};
  Handle& h = handles[c.stream.device];
  if (h == nullptr) {
    EnsureContext(c.stream.device);
    CheckSolver(Lib().create(&h), "cusolverDnCreate");
  }
  CheckSolver(Lib().set_stream(h, c.stream.handle), "cusolverDnSetStream");
  return {h, c.f64 ? &Lib().d : &Lib().s};
}

// Workspace of `elements` values of the call's type.
void* Work(const SolverCall& c, int elements) {
  return c.scratch(static_cast<size_t>(elements > 0 ? elements : 1) * (c.f64 ? 8 : 4));
}

}  // namespace

bool CusolverAvailable() { return Lib().available; }
const std::string& CusolverUnavailableReason() { return Lib().reason; }

void Getrf(const SolverCall& c, int m, int n, void* a, int lda, int* ipiv, int* info) {
  auto [h, r] = Begin(c);
  int lwork = 0;
  CheckSolver(r->getrf_size(h, m, n, a, lda, &lwork), "cusolverDn<t>getrf_bufferSize");
  CheckSolver(r->getrf(h, m, n, a, lda, Work(c, lwork), ipiv, info), "cusolverDn<t>getrf");
}

void Getrs(const SolverCall& c, bool transpose, int n, int nrhs, const void* a, int lda, const int* ipiv, void* b,
           int ldb, int* info) {
  auto [h, r] = Begin(c);
  CheckSolver(r->getrs(h, transpose ? kOpT : kOpN, n, nrhs, a, lda, ipiv, b, ldb, info), "cusolverDn<t>getrs");
}

void Potrf(const SolverCall& c, bool upper, int n, void* a, int lda, int* info) {
  auto [h, r] = Begin(c);
  int lwork = 0;
  const int uplo = upper ? kUpper : kLower;
  CheckSolver(r->potrf_size(h, uplo, n, a, lda, &lwork), "cusolverDn<t>potrf_bufferSize");
  CheckSolver(r->potrf(h, uplo, n, a, lda, Work(c, lwork), lwork, info), "cusolverDn<t>potrf");
}

void Geqrf(const SolverCall& c, int m, int n, void* a, int lda, void* tau, int* info) {
  auto [h, r] = Begin(c);
  int lwork = 0;
  CheckSolver(r->geqrf_size(h, m, n, a, lda, &lwork), "cusolverDn<t>geqrf_bufferSize");
  CheckSolver(r->geqrf(h, m, n, a, lda, tau, Work(c, lwork), lwork, info), "cusolverDn<t>geqrf");
}

void Orgqr(const SolverCall& c, int m, int n, int k, void* a, int lda, const void* tau, int* info) {
  auto [h, r] = Begin(c);
  int lwork = 0;
  CheckSolver(r->orgqr_size(h, m, n, k, a, lda, tau, &lwork), "cusolverDn<t>orgqr_bufferSize");
  CheckSolver(r->orgqr(h, m, n, k, a, lda, tau, Work(c, lwork), lwork, info), "cusolverDn<t>orgqr");
}

void Syevd(const SolverCall& c, bool vectors, bool upper, int n, void* a, int lda, void* w, int* info) {
  auto [h, r] = Begin(c);
  int lwork = 0;
  const int jobz = vectors ? kVectors : kNoVectors, uplo = upper ? kUpper : kLower;
  CheckSolver(r->syevd_size(h, jobz, uplo, n, a, lda, w, &lwork), "cusolverDn<t>syevd_bufferSize");
  CheckSolver(r->syevd(h, jobz, uplo, n, a, lda, w, Work(c, lwork), lwork, info), "cusolverDn<t>syevd");
}

void Gesvd(const SolverCall& c, char jobu, char jobvt, int m, int n, void* a, int lda, void* s, void* u, int ldu,
           void* vt, int ldvt, int* info) {
  auto [h, r] = Begin(c);
  int lwork = 0;
  CheckSolver(r->gesvd_size(h, m, n, &lwork), "cusolverDn<t>gesvd_bufferSize");
  CheckSolver(r->gesvd(h, static_cast<signed char>(jobu), static_cast<signed char>(jobvt), m, n, a, lda, s, u, ldu, vt, ldvt,
                 Work(c, lwork), lwork, nullptr, info),
        "cusolverDn<t>gesvd");
}

}  // namespace kiln::cuda
