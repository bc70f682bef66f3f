// tensor/cuda/kernels/sort.cu: sorting rows (Note [CUDA sort] in tensor/ops/sort_cuda.cc). The
// input is contiguous [rows, n]; each row is sorted stably, ascending or descending, NaN counting
// as the largest value (last ascending, first descending), as the CPU kernel and PyTorch do.
//
// Every comparison is of (key, position in the row) pairs: equal keys order by position, so the
// order is total and the sort stable whatever network does it.
//
//   kiln_sort_tile_*: a block sorts 2048 slots in shared memory by a bitonic network, as
//     independent chunks of `chunk` slots (a power of two up to 2048): whole short rows, several to
//     a block, or the 2048-element pieces of long rows. Slots past a row's end sort last.
//   kiln_sort_merge_*: merges neighbouring sorted runs of `run` elements within each row, one
//     thread per element: its place in the merged run is its place in its own run plus the number
//     of the other run's elements before it (a binary search). log2(n / 2048) passes finish a row.
//
// Keys are compared as K: float for the 16-bit floats and float32, double for float64, int64 for
// integers and bool; each converts back to T exactly.
#include <stdint.h>

#include "tensor/cuda/kernels/common.cuh"

namespace kiln {

constexpr int kSortTile = 2048;  // slots a tile block sorts (1024 threads, 32 KiB of shared memory)
constexpr int64_t kNoSlot = INT64_MAX;

template <typename T> struct SortKey { using type = int64_t; };
template <> struct SortKey<__half> { using type = float; };
template <> struct SortKey<__nv_bfloat16> { using type = float; };
template <> struct SortKey<float> { using type = float; };
template <> struct SortKey<double> { using type = double; };

template <typename K> __device__ __forceinline__ bool IsNan(K v) { return v != v; }

// Whether (ka, pa) comes before (kb, pb). Position kNoSlot (past a row's end) comes after all else.
template <typename K>
__device__ __forceinline__ bool Before(K ka, int64_t pa, K kb, int64_t pb, bool descending) {
  if (pa == kNoSlot || pb == kNoSlot) return pa < pb;
  const bool an = IsNan(ka), bn = IsNan(kb);
  if (an || bn) return an && bn ? pa < pb : (descending ? an : bn);
  if (ka != kb) return descending ? ka > kb : ka < kb;
  return pa < pb;
}

// Tile t holds chunks t * (2048 / chunk) ...; chunk c is piece c % pieces of row c / pieces.
template <typename T>
__device__ void SortTile(const T* in, int64_t rows, int64_t n, int chunk, int64_t pieces, int descending,
                         typename SortKey<T>::type* keys_out, T* values_out, int64_t* indices_out) {
  using K = typename SortKey<T>::type;
  __shared__ K keys[kSortTile];
  __shared__ int64_t pos[kSortTile];
  const int64_t chunks = rows * pieces, per_tile = kSortTile / chunk;
  for (int64_t tile = blockIdx.x; tile * per_tile < chunks; tile += gridDim.x) {
    // The row and position of slot j, or -1 past the row's end (or past the last chunk).
    auto place = [&](int j, int64_t* row) -> int64_t {
      const int64_t c = tile * per_tile + j / chunk;
      *row = c / pieces;
      const int64_t p = (c % pieces) * chunk + j % chunk;
      return c < chunks && p < n ? p : -1;
    };
    for (int j = threadIdx.x; j < kSortTile; j += blockDim.x) {
      int64_t row;
      const int64_t p = place(j, &row);
      keys[j] = p >= 0 ? Cast<K>(in[row * n + p]) : K(0);
      pos[j] = p >= 0 ? p : kNoSlot;
    }
    __syncthreads();
    for (int k = 2; k <= chunk; k *= 2) {
      for (int stride = k / 2; stride > 0; stride /= 2) {
        for (int i = threadIdx.x; i < kSortTile; i += blockDim.x) {
          const int other = i ^ stride;
          if (other <= i) continue;
          // the last merge sorts each chunk ascending (in Before's order); below it, alternate
          const bool up = k == chunk || (i & k) == 0;
          const bool swap = up ? Before(keys[other], pos[other], keys[i], pos[i], descending)
                               : Before(keys[i], pos[i], keys[other], pos[other], descending);
          if (swap) {
            const K kt = keys[i];
            keys[i] = keys[other];
            keys[other] = kt;
            const int64_t pt = pos[i];
            pos[i] = pos[other];
            pos[other] = pt;
          }
        }
        __syncthreads();
      }
    }
    // A chunk's valid slots come first after sorting, as many as it had, so slot j's place is the
    // sorted element's destination.
    for (int j = threadIdx.x; j < kSortTile; j += blockDim.x) {
      int64_t row;
      const int64_t p = place(j, &row);
      if (p < 0) continue;
      if (keys_out != nullptr) keys_out[row * n + p] = keys[j];
      else values_out[row * n + p] = Cast<T>(keys[j]);
      indices_out[row * n + p] = pos[j];
    }
    __syncthreads();  // the next tile reuses the shared arrays
  }
}

template <typename T>
__device__ void SortMerge(const typename SortKey<T>::type* keys_in, const int64_t* indices_in, int64_t rows,
                          int64_t n, int64_t run, int descending, typename SortKey<T>::type* keys_out, T* values_out,
                          int64_t* indices_out) {
  using K = typename SortKey<T>::type;
  KILN_GRID_STRIDE_LOOP(e, rows * n) {
    const int64_t row = e / n, p = e - row * n;
    const K* rk = keys_in + row * n;
    const int64_t* rp = indices_in + row * n;
    const K key = rk[p];
    const int64_t at = rp[p];
    const int64_t mine = p / run * run, theirs = (p / run ^ 1) * run;
    int64_t lo = theirs, hi = theirs + run < n ? theirs + run : n;
    if (theirs >= n) hi = lo;  // the row's last run has no partner
    while (lo < hi) {  // the first of theirs not before (key, at)
      const int64_t mid = lo + (hi - lo) / 2;
      if (Before(rk[mid], rp[mid], key, at, descending)) lo = mid + 1;
      else hi = mid;
    }
    const int64_t dest = row * n + (mine < theirs ? mine : theirs) + (p - mine) + (lo - theirs);
    if (keys_out != nullptr) keys_out[dest] = key;
    else values_out[dest] = Cast<T>(key);
    indices_out[dest] = at;
  }
}

}  // namespace kiln

#define KILN_SORT(T, S)                                                                                         \
  extern "C" __global__ void __launch_bounds__(1024) kiln_sort_tile_##S(                                        \
      const T* in, int64_t rows, int64_t n, int chunk, int64_t pieces, int descending,                          \
      kiln::SortKey<T>::type* keys_out, T* values_out, int64_t* indices_out) {                                  \
    kiln::SortTile<T>(in, rows, n, chunk, pieces, descending, keys_out, values_out, indices_out);               \
  }                                                                                                             \
  extern "C" __global__ void kiln_sort_merge_##S(const kiln::SortKey<T>::type* keys_in, const int64_t* indices_in, \
                                                 int64_t rows, int64_t n, int64_t run, int descending,          \
                                                 kiln::SortKey<T>::type* keys_out, T* values_out,                \
                                                 int64_t* indices_out) {                                        \
    kiln::SortMerge<T>(keys_in, indices_in, rows, n, run, descending, keys_out, values_out, indices_out);       \
  }
KILN_FOR_EACH_TYPE(KILN_SORT)
