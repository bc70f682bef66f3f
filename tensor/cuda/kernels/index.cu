// tensor/cuda/kernels/index.cu: gathering and scattering rows by an index tensor: index_select and
// embedding (out row r = src row idx[r]), index_add_ and embedding_dense_backward (dst row idx[r] +=
// src row r, with atomics: several r may name one row).
//
// The tensors are viewed as [outer, rows, inner], contiguous: the host makes them so. A block
// copies or adds whole rows (its threads stride along `inner`), stepping over rows grid-stride. An
// index out of range is reported through the device's error word (runtime/cuda/device_errors.h) and
// its row is skipped (index_select writes zeros there): nothing is read or written out of bounds.
#include "runtime/cuda/device_error_codes.h"
#include "tensor/cuda/kernels/common.cuh"

namespace kiln {

// out[o, r, :] = src[o, idx[r], :]
template <typename T, typename I>
__device__ void IndexSelectRows(const T* src, const I* idx, T* out, int64_t outer, int64_t n, int64_t rows,
                                int64_t inner, int32_t* error_word, int32_t code) {
  for (int64_t r = blockIdx.x; r < outer * n; r += gridDim.x) {
    const int64_t o = r / n, j = static_cast<int64_t>(idx[r - o * n]);
    const bool bad = j < 0 || j >= rows;
    if (bad && threadIdx.x == 0) ReportDeviceError(error_word, code, j);
    const T* from = src + (o * rows + (bad ? 0 : j)) * inner;
    T* to = out + r * inner;
    for (int64_t k = threadIdx.x; k < inner; k += blockDim.x) to[k] = bad ? T{} : from[k];
  }
}

// dst[o, idx[r], :] += src[o, r, :] * alpha, each product rounded to S first (index_add_'s CPU kernel
// rounds alpha * source to the dtype). Rows whose index equals `skip` are left out (embedding's
// padding_idx; -1 skips none); with `counts`, each product is divided by counts[idx[r]]
// (scale_grad_by_freq).
template <typename D, typename S, typename I>
__device__ void IndexAddRows(D* dst, const S* src, const I* idx, int64_t outer, int64_t n, int64_t rows, int64_t inner,
                             double alpha, int64_t skip, const int32_t* counts, int32_t* error_word, int32_t code) {
  using M = opmath_t<S>;
  const M a = static_cast<M>(alpha);
  for (int64_t r = blockIdx.x; r < outer * n; r += gridDim.x) {
    const int64_t o = r / n, j = static_cast<int64_t>(idx[r - o * n]);
    if (j < 0 || j >= rows) {
      if (threadIdx.x == 0) ReportDeviceError(error_word, code, j);
      continue;
    }
    if (j == skip) continue;
    const S* from = src + r * inner;
    D* to = dst + (o * rows + j) * inner;
    const M scale = counts != nullptr ? M(1) / static_cast<M>(counts[j]) : M(1);
    for (int64_t k = threadIdx.x; k < inner; k += blockDim.x) {
      const S product = Cast<S>(Cast<M>(from[k]) * a * scale);
      AtomicAdd(to + k, Cast<D>(Cast<M>(product)));
    }
  }
}

// counts[idx[i]] += 1 (in-range indices only; the add kernel reports the others).
template <typename I>
__device__ void CountIndices(const I* idx, int64_t n, int64_t rows, int32_t* counts) {
  KILN_GRID_STRIDE_LOOP(i, n) {
    const int64_t j = static_cast<int64_t>(idx[i]);
    if (j >= 0 && j < rows) atomicAdd(counts + j, 1);
  }
}

}  // namespace kiln

#define KILN_INDEX_SELECT(T, S)                                                                           \
  extern "C" __global__ void kiln_index_select_##S##_i64(const T* src, const int64_t* idx, T* out, int64_t outer, \
                                                        int64_t n, int64_t rows, int64_t inner, int32_t* err,   \
                                                        int32_t code) {                                       \
    kiln::IndexSelectRows<T, int64_t>(src, idx, out, outer, n, rows, inner, err, code);                       \
  }                                                                                                           \
  extern "C" __global__ void kiln_index_select_##S##_i32(const T* src, const int32_t* idx, T* out, int64_t outer, \
                                                        int64_t n, int64_t rows, int64_t inner, int32_t* err,   \
                                                        int32_t code) {                                       \
    kiln::IndexSelectRows<T, int32_t>(src, idx, out, outer, n, rows, inner, err, code);                       \
  }
KILN_FOR_EACH_TYPE(KILN_INDEX_SELECT)

#define KILN_INDEX_ADD_IDX(D, DS, S, SS, I, IS)                                                                \
  extern "C" __global__ void kiln_index_add_##DS##_##SS##_##IS(D* dst, const S* src, const I* idx, int64_t outer, \
                                                               int64_t n, int64_t rows, int64_t inner, double alpha, \
                                                               int64_t skip, const int32_t* counts, int32_t* err, \
                                                               int32_t code) {                                 \
    kiln::IndexAddRows<D, S, I>(dst, src, idx, outer, n, rows, inner, alpha, skip, counts, err, code);          \
  }
#define KILN_INDEX_ADD(D, DS, S, SS) KILN_INDEX_ADD_IDX(D, DS, S, SS, int64_t, i64) KILN_INDEX_ADD_IDX(D, DS, S, SS, int32_t, i32)
KILN_INDEX_ADD(float, f32, float, f32)
KILN_INDEX_ADD(double, f64, double, f64)
KILN_INDEX_ADD(__half, f16, __half, f16)
KILN_INDEX_ADD(__nv_bfloat16, bf16, __nv_bfloat16, bf16)
KILN_INDEX_ADD(int32_t, i32, int32_t, i32)
KILN_INDEX_ADD(int64_t, i64, int64_t, i64)
KILN_INDEX_ADD(float, f32, __half, f16)          // embedding_dense_backward of 16-bit floats sums in float
KILN_INDEX_ADD(float, f32, __nv_bfloat16, bf16)

extern "C" __global__ void kiln_count_indices_i64(const int64_t* idx, int64_t n, int64_t rows, int32_t* counts) {
  kiln::CountIndices<int64_t>(idx, n, rows, counts);
}
extern "C" __global__ void kiln_count_indices_i32(const int32_t* idx, int64_t n, int64_t rows, int32_t* counts) {
  kiln::CountIndices<int32_t>(idx, n, rows, counts);
}
