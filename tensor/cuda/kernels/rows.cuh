// tensor/cuda/kernels/rows.cuh: what the row kernels share (softmax.cu, layer_norm.cu): a row of
// up to blockDim.x * kRowPerThread contiguous elements held in the registers of the blockDim.x
// threads that own it (threadIdx.y: the row within the block), loaded and stored with coalesced
// (vector) accesses, and reduced across those threads with warp shuffles and shared memory.
#pragma once

#include "tensor/cuda/kernels/common.cuh"
#include "tensor/cuda/kernels/row_args.h"

namespace kiln {

// The max (kMax) or sum of v over the blockDim.x threads of this thread's row (threadIdx.y), given
// to all of them. `shared` holds 32 partial results for each row of the block.
template <bool kMax, typename M>
__device__ __forceinline__ M RowReduce(M v, M* shared) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const M other = __shfl_xor_sync(0xffffffffu, v, offset);
    v = kMax ? (other > v ? other : v) : v + other;
  }
  if (blockDim.x <= 32) return v;
  M* row = shared + threadIdx.y * 32;
  const int warp = threadIdx.x / 32, warps = blockDim.x / 32;
  __syncthreads();  // the previous use of `shared` is over
  if (threadIdx.x % 32 == 0) row[warp] = v;
  __syncthreads();
  v = row[0];
  for (int w = 1; w < warps; ++w) v = kMax ? (row[w] > v ? row[w] : v) : v + row[w];
  return v;
}

// Elements a vector access moves: 4, or 1 for float64 (whose 2-wide backward spilled registers).
template <typename T>
__host__ __device__ constexpr int VecWidth() {
  return sizeof(T) == 8 ? 1 : 4;
}

// kVec consecutive elements of a row, one vector access (the row's length a multiple of kVec).
template <typename T, int kVec>
struct alignas(sizeof(T) * kVec) Pack {
  T v[kVec];
};

// The row's slice this thread holds: element (threadIdx.x + k * blockDim.x) * kVec + j of the row
// is held[k * kVec + j], for k < kRowPerThread / kVec; `fill` outside the row.
template <int kVec, typename T, typename M>
__device__ __forceinline__ void LoadRow(const T* row, int64_t n, bool active, M fill, M* held) {
#pragma unroll
  for (int k = 0; k < kRowPerThread / kVec; ++k) {
    const int64_t i = (threadIdx.x + int64_t(k) * blockDim.x) * kVec;
    Pack<T, kVec> p;
    const bool in = active && i < n;
    if (in) p = *reinterpret_cast<const Pack<T, kVec>*>(row + i);
#pragma unroll
    for (int j = 0; j < kVec; ++j) held[k * kVec + j] = in ? Cast<M>(p.v[j]) : fill;
  }
}

template <int kVec, typename O, typename M>
__device__ __forceinline__ void StoreRow(O* row, int64_t n, const M* held) {
#pragma unroll
  for (int k = 0; k < kRowPerThread / kVec; ++k) {
    const int64_t i = (threadIdx.x + int64_t(k) * blockDim.x) * kVec;
    if (i >= n) continue;
    Pack<O, kVec> p;
#pragma unroll
    for (int j = 0; j < kVec; ++j) p.v[j] = Cast<O>(held[k * kVec + j]);
    *reinterpret_cast<Pack<O, kVec>*>(row + i) = p;
  }
}

// Calls fn(r, active) for the rows of this thread (threadIdx.y of each of its block's turns, block-
// strided), active when r < rows. Every thread of the block makes the same calls, so fn may reduce
// across the block (RowReduce); an inactive thread takes part with fill values and writes nothing.
template <typename Fn>
__device__ __forceinline__ void ForEachRow(int64_t rows, const Fn& fn) {
  const int64_t per_block = blockDim.y;
  for (int64_t base = int64_t(blockIdx.x) * per_block; base < rows; base += int64_t(gridDim.x) * per_block) {
    const int64_t r = base + threadIdx.y;
    fn(r, r < rows);
  }
}

// Whether held element `h` (= k * kVec + j) of this thread lies inside a row of n.
template <int kVec>
__device__ __forceinline__ bool InRow(int h, int64_t n) {
  return (threadIdx.x + int64_t(h / kVec) * blockDim.x) * kVec + h % kVec < n;
}

}  // namespace kiln
