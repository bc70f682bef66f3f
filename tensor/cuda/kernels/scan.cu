// tensor/cuda/kernels/scan.cu: cumsum and cumprod along one dim (Note [CUDA scans] in
// tensor/ops/scan_cuda.cc). The input is already in the output's dtype and both are contiguous,
// viewed as [outer, n, inner]; the scan runs along n in the accumulator's type A (float for the
// 16-bit floats and float32, double for float64, int64 for integers: PyTorch's CUDA acc types).
//
//   kiln_scan_lines_*: one thread per line (o, i), walking its n elements in order; neighbouring
//     threads hold neighbouring lines, so each step is one coalesced access when inner is large.
//   kiln_scan_rows_*: inner == 1, one block per row: the row goes by chunks of blockDim.x * 4
//     elements, each thread scanning its 4 in registers, the block combining the threads' totals
//     (warp shuffles, then one warp over the warps' totals), the chunk's total carried on.
#include "tensor/cuda/kernels/common.cuh"

namespace kiln {

template <typename A, bool kProd>
struct ScanOp {
  static __device__ __forceinline__ A Identity() { return kProd ? A(1) : A(0); }
  static __device__ __forceinline__ A Combine(A a, A b) { return kProd ? a * b : a + b; }
};

template <typename T>
struct ScanAcc { using type = int64_t; };
template <> struct ScanAcc<__half> { using type = float; };
template <> struct ScanAcc<__nv_bfloat16> { using type = float; };
template <> struct ScanAcc<float> { using type = float; };
template <> struct ScanAcc<double> { using type = double; };

template <typename T, bool kProd>
__device__ void ScanLines(const T* in, T* out, int64_t outer, int64_t n, int64_t inner) {
  using A = typename ScanAcc<T>::type;
  using Op = ScanOp<A, kProd>;
  KILN_GRID_STRIDE_LOOP(line, outer * inner) {
    const int64_t o = line / inner, i = line - o * inner;
    const int64_t base = o * n * inner + i;
    A acc = Op::Identity();
    for (int64_t k = 0; k < n; ++k) {
      acc = Op::Combine(acc, Cast<A>(in[base + k * inner]));
      out[base + k * inner] = Cast<T>(acc);
    }
  }
}

// The exclusive scan of v over the block's threads (in thread order), and the block's total.
// `warp_totals` is shared memory for 32 values; blockDim.x is a multiple of 32.
template <typename A, typename Op>
__device__ __forceinline__ A BlockExclusiveScan(A v, A* warp_totals, A* total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const A other = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v = Op::Combine(other, v);
  }
  A exclusive = __shfl_up_sync(0xffffffffu, v, 1);
  if (lane == 0) exclusive = Op::Identity();
  if (lane == 31) warp_totals[warp] = v;
  __syncthreads();
  if (warp == 0) {
    A w = lane < warps ? warp_totals[lane] : Op::Identity();
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const A other = __shfl_up_sync(0xffffffffu, w, d);
      if (lane >= d) w = Op::Combine(other, w);
    }
    warp_totals[lane] = w;  // inclusive over the warps
  }
  __syncthreads();
  const A before = warp > 0 ? warp_totals[warp - 1] : Op::Identity();
  *total = warp_totals[warps - 1];
  __syncthreads();  // every thread has read warp_totals before the next call writes it
  return Op::Combine(before, exclusive);
}

template <typename T, bool kProd>
__device__ void ScanRows(const T* in, T* out, int64_t rows, int64_t n) {
  using A = typename ScanAcc<T>::type;
  using Op = ScanOp<A, kProd>;
  constexpr int kPer = 4;
  __shared__ A warp_totals[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* x = in + r * n;
    T* y = out + r * n;
    A carry = Op::Identity();
    for (int64_t start = 0; start < n; start += int64_t(blockDim.x) * kPer) {
      const int64_t first = start + int64_t(threadIdx.x) * kPer;
      A held[kPer];
      A run = Op::Identity();
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        if (first + k < n) run = Op::Combine(run, Cast<A>(x[first + k]));
        held[k] = run;
      }
      A total;
      const A before = Op::Combine(carry, BlockExclusiveScan<A, Op>(run, warp_totals, &total));
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        if (first + k < n) y[first + k] = Cast<T>(Op::Combine(before, held[k]));
      }
      carry = Op::Combine(carry, total);
    }
  }
}

}  // namespace kiln

#define KILN_SCAN(T, S)                                                                                       \
  extern "C" __global__ void kiln_scan_lines_sum_##S(const T* in, T* out, int64_t outer, int64_t n, int64_t inner) { \
    kiln::ScanLines<T, false>(in, out, outer, n, inner);                                                     \
  }                                                                                                           \
  extern "C" __global__ void kiln_scan_lines_prod_##S(const T* in, T* out, int64_t outer, int64_t n, int64_t inner) { \
    kiln::ScanLines<T, true>(in, out, outer, n, inner);                                                      \
  }                                                                                                           \
  extern "C" __global__ void kiln_scan_rows_sum_##S(const T* in, T* out, int64_t rows, int64_t n) {           \
    kiln::ScanRows<T, false>(in, out, rows, n);                                                              \
  }                                                                                                           \
  extern "C" __global__ void kiln_scan_rows_prod_##S(const T* in, T* out, int64_t rows, int64_t n) {          \
    kiln::ScanRows<T, true>(in, out, rows, n);                                                               \
  }
KILN_FOR_EACH_FLOATING(KILN_SCAN)
KILN_SCAN(uint8_t, u8)
KILN_SCAN(int8_t, i8)
KILN_SCAN(int16_t, i16)
KILN_SCAN(int32_t, i32)
KILN_SCAN(int64_t, i64)
