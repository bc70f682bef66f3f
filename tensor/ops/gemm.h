// tensor/ops/gemm.h: row-major matrix multiply on raw buffers, shared by linalg.cc and conv_pool.cc.
//
// Gemm<T> computes C = alpha * op(A) @ op(B) + beta * C for row-major buffers. float32 and
// float64 call OpenBLAS; every other numeric type runs a plain loop over opmath_t<T> (float for
// float16/bfloat16, the type itself for integers), in parallel over rows of C. Callers hand in
// strided operands through MatrixLayout, which says whether a 2-D view can be passed with a
// trans flag and leading dimension instead of being copied.
#pragma once

#include <cstdint>

#include "tensor/ops/common.h"

namespace kiln {

// C[m,n] = alpha * op(A)[m,k] @ op(B)[k,n] + beta * C. A is stored [m,k] with row stride `lda`
// (or [k,m] when trans_a), likewise B ([k,n], or [n,k] when trans_b); C is [m,n] with row
// stride `ldc`. When beta == 0, C is only written (NaNs in it do not propagate), as in BLAS.
template <typename T>
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, opmath_t<T> alpha, const T* a, int64_t lda,
          const T* b, int64_t ldb, opmath_t<T> beta, T* c, int64_t ldc);

// How a [rows, cols] matrix with element strides (row_stride, col_stride) maps onto Gemm's
// arguments: `ok` false means it must be made contiguous first.
struct MatrixLayout {
  bool ok = false;
  bool trans = false;  // stored column-major: element (i, j) at i + j * ld
  int64_t ld = 1;
};
MatrixLayout BlasLayout(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride);

// The C++ type name PyTorch prints for a dtype in some messages ("float != double").
const char* CppTypeName(ScalarType t);

}  // namespace kiln
