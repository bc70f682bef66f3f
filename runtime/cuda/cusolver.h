// runtime/cuda/cusolver.h: cuSOLVER's dense LAPACK (libcusolver.so.12) loaded at run time through
// loader.h's search, with kiln's own declarations of the entry points it uses (the float32 and
// float64 "S"/"D" routines of cusolverDn.h, 32-bit LAPACK indexing, 1-based pivots), one handle
// per device and thread bound to the stream of each call, as cuBLAS's (cublas.h).
//
// Every routine works on one column-major matrix in device memory and writes LAPACK's `info` to a
// device int: nothing synchronises. Each asks cuSOLVER for its workspace size and takes the memory
// from the caller's `scratch` (a growing device buffer the caller keeps alive while the stream runs).
#pragma once

#include <functional>
#include <string>

#include "runtime/cuda/stream.h"

namespace kiln::cuda {

bool CusolverAvailable();  // loads cuSOLVER on first call; never throws
const std::string& CusolverUnavailableReason();

// Device memory of at least `bytes`, valid for the routines queued after it on the same stream.
using SolverScratch = std::function<void*(size_t bytes)>;

struct SolverCall {
  const Stream& stream;
  bool f64;  // float64 (the "D" routines), else float32 ("S")
  const SolverScratch& scratch;
};

// The LAPACK routines of the same names (cusolverDn<t><name>); uplo/trans as booleans.
void Getrf(const SolverCall& c, int m, int n, void* a, int lda, int* ipiv, int* info);
void Getrs(const SolverCall& c, bool transpose, int n, int nrhs, const void* a, int lda, const int* ipiv, void* b,
           int ldb, int* info);
void Potrf(const SolverCall& c, bool upper, int n, void* a, int lda, int* info);
void Geqrf(const SolverCall& c, int m, int n, void* a, int lda, void* tau, int* info);
void Orgqr(const SolverCall& c, int m, int n, int k, void* a, int lda, const void* tau, int* info);
void Syevd(const SolverCall& c, bool vectors, bool upper, int n, void* a, int lda, void* w, int* info);
// jobu/jobvt: 'A', 'S' or 'N'; needs m >= n (cuSOLVER's gesvd does not take wide matrices).
void Gesvd(const SolverCall& c, char jobu, char jobvt, int m, int n, void* a, int lda, void* s, void* u, int ldu,
           void* vt, int ldvt, int* info);

}  // namespace kiln::cuda
