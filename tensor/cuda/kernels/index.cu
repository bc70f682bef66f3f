// tensor/cuda/kernels/index.cu: gathering and scattering rows by an index tensor: index_select and
// embedding (out row r = src row idx[r]), index_add_ (dst row idx[r] += src row r, with atomics:
// several r may name one row) and embedding_dense_backward (the same sum, deterministic, from the
// sorted indices).
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
// rounds alpha * source to the dtype).
template <typename S, typename I>
__device__ void IndexAddRows(S* dst, const S* src, const I* idx, int64_t outer, int64_t n, int64_t rows, int64_t inner,
                             double alpha, int32_t* error_word, int32_t code) {
  using M = opmath_t<S>;
  const M a = static_cast<M>(alpha);
  for (int64_t r = blockIdx.x; r < outer * n; r += gridDim.x) {
    const int64_t o = r / n, j = static_cast<int64_t>(idx[r - o * n]);
    if (j < 0 || j >= rows) {
      if (threadIdx.x == 0) ReportDeviceError(error_word, code, j);
      continue;
    }
    const S* from = src + r * inner;
    S* to = dst + (o * rows + j) * inner;
    for (int64_t k = threadIdx.x; k < inner; k += blockDim.x) AtomicAdd(to + k, Cast<S>(Cast<M>(from[k]) * a));
  }
}

// Note [Deterministic embedding backward]: out[j, :] = the sum of grad rows r with idx[r] == j, from
// the indices sorted stably (`sorted`, and `order`: each sorted entry's position in idx). The block at
// the first position of each run of equal indices sums that run's rows in order, in opmath, so the
// result is the same every run and equals the CPU's summation order (PyTorch's CUDA kernel is
// sort-based too). Runs of padding_idx (`skip`) are left out; scale_grad_by_freq divides by the run's
// length. Rows no index names are not written (the host zeroes out).
template <typename T>
__device__ void EmbeddingBackwardSorted(const int64_t* sorted, const int64_t* order, const T* grad, T* out, int64_t n,
                                        int64_t rows, int64_t inner, int64_t skip, int scale_by_freq,
                                        int32_t* error_word, int32_t code) {
  using M = opmath_t<T>;
  for (int64_t k = blockIdx.x; k < n; k += gridDim.x) {
    const int64_t j = sorted[k];
    if (k > 0 && sorted[k - 1] == j) continue;  // not a run's first position
    if (j < 0 || j >= rows) {
      if (threadIdx.x == 0) ReportDeviceError(error_word, code, j);
      continue;
    }
    if (j == skip) continue;
    int64_t end = k + 1;
    while (end < n && sorted[end] == j) ++end;
    const M scale = scale_by_freq ? M(1) / static_cast<M>(end - k) : M(1);
    for (int64_t c = threadIdx.x; c < inner; c += blockDim.x) {
      M sum = M(0);
      for (int64_t r = k; r < end; ++r) sum += Cast<M>(grad[order[r] * inner + c]);
      out[j * inner + c] = Cast<T>(sum * scale);
    }
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

#define KILN_INDEX_ADD_IDX(S, SS, I, IS)                                                                      \
  extern "C" __global__ void kiln_index_add_##SS##_##IS(S* dst, const S* src, const I* idx, int64_t outer, int64_t n, \
                                                        int64_t rows, int64_t inner, double alpha, int32_t* err,      \
                                                        int32_t code) {                                               \
    kiln::IndexAddRows<S, I>(dst, src, idx, outer, n, rows, inner, alpha, err, code);                                 \
  }
#define KILN_INDEX_ADD(S, SS) KILN_INDEX_ADD_IDX(S, SS, int64_t, i64) KILN_INDEX_ADD_IDX(S, SS, int32_t, i32)
KILN_INDEX_ADD(float, f32)
KILN_INDEX_ADD(double, f64)
KILN_INDEX_ADD(__half, f16)
KILN_INDEX_ADD(__nv_bfloat16, bf16)
KILN_INDEX_ADD(int32_t, i32)
KILN_INDEX_ADD(int64_t, i64)

#define KILN_EMBEDDING_BACKWARD(T, S)                                                                         \
  extern "C" __global__ void kiln_embedding_backward_##S(const int64_t* sorted, const int64_t* order, const T* grad, \
                                                         T* out, int64_t n, int64_t rows, int64_t inner, int64_t skip, \
                                                         int scale_by_freq, int32_t* err, int32_t code) {            \
    kiln::EmbeddingBackwardSorted<T>(sorted, order, grad, out, n, rows, inner, skip, scale_by_freq, err, code);      \
  }
KILN_FOR_EACH_FLOATING(KILN_EMBEDDING_BACKWARD)
