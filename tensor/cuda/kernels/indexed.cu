// tensor/cuda/kernels/indexed.cu: the indexed walk (indexed_args.h) behind advanced indexing
// (index, index_put_ with and without accumulate), gather and scatter (src, value, add) on CUDA.
// A thread per element of the walk, grid-stride: its coordinates from the linear position, its
// offsets from the strides and the index values. Reads and writes copy elements by size (one
// kernel serves every dtype of that size); accumulation adds with atomics per dtype. An index out
// of range is reported through the device's error word (runtime/cuda/device_errors.h) with its
// value, and its element skipped (a read writes 0).
#include "runtime/cuda/device_error_codes.h"
#include "tensor/cuda/kernels/common.cuh"
#include "tensor/cuda/kernels/indexed_args.h"

namespace kiln {

// self's and the other operand's offsets of walk position e; false (reported) for a bad index.
// The other operand's offset is set either way: a read writes 0 there for a bad index (it was left
// unset, and the zero went to whatever address the register held: an illegal address on an H100,
// silently somewhere on the GPUs before).
__device__ __forceinline__ bool Offsets(const IndexedLaunch& l, int64_t e, int64_t* self_off, int64_t* other_off) {
  int64_t rest = e, s = 0, o = 0;
  int64_t at[kIndexedMaxIndices] = {0};
  for (int d = l.ndim - 1; d >= 0; --d) {
    const int64_t c = rest % l.shape[d];
    rest /= l.shape[d];
    s += c * l.self_stride[d];
    o += c * l.other_stride[d];
    for (int j = 0; j < l.nindices; ++j) at[j] += c * l.index_stride[j][d];
  }
  *other_off = o;
  for (int j = 0; j < l.nindices; ++j) {
    int64_t i = l.index[j][at[j]];
    const int64_t n = l.indexed_size[j];
    if (i < (l.wrap_negative ? -n : 0) || i >= n) {
      ReportDeviceError(l.error_word, l.error_code, i);
      return false;
    }
    if (i < 0) i += n;
    s += i * l.indexed_stride[j];
  }
  *self_off = s;
  return true;
}

template <typename E>
__device__ void Read(const IndexedLaunch& l) {  // other = self[indices]
  KILN_GRID_STRIDE_LOOP(e, l.numel) {
    int64_t s, o;
    const bool ok = Offsets(l, e, &s, &o);
    static_cast<E*>(l.other)[o] = ok ? static_cast<const E*>(l.self)[s] : E{};
  }
}

template <typename E>
__device__ void Write(const IndexedLaunch& l) {  // self[indices] = other
  KILN_GRID_STRIDE_LOOP(e, l.numel) {
    int64_t s, o;
    if (Offsets(l, e, &s, &o)) static_cast<E*>(l.self)[s] = static_cast<const E*>(l.other)[o];
  }
}

template <typename T>
__device__ void Add(const IndexedLaunch& l) {  // self[indices] += other
  KILN_GRID_STRIDE_LOOP(e, l.numel) {
    int64_t s, o;
    if (Offsets(l, e, &s, &o)) AtomicAdd(static_cast<T*>(l.self) + s, static_cast<const T*>(l.other)[o]);
  }
}

struct alignas(16) Bytes16 {
  uint64_t lo, hi;
};

}  // namespace kiln

#define KILN_INDEXED_COPY(E, S)                                                                   \
  extern "C" __global__ void kiln_indexed_read_##S(const kiln::IndexedLaunch l) { kiln::Read<E>(l); } \
  extern "C" __global__ void kiln_indexed_write_##S(const kiln::IndexedLaunch l) { kiln::Write<E>(l); }
KILN_INDEXED_COPY(uint8_t, b1)
KILN_INDEXED_COPY(uint16_t, b2)
KILN_INDEXED_COPY(uint32_t, b4)
KILN_INDEXED_COPY(uint64_t, b8)
KILN_INDEXED_COPY(kiln::Bytes16, b16)

#define KILN_INDEXED_ADD(T, S) \
  extern "C" __global__ void kiln_indexed_add_##S(const kiln::IndexedLaunch l) { kiln::Add<T>(l); }
KILN_INDEXED_ADD(float, f32)
KILN_INDEXED_ADD(double, f64)
KILN_INDEXED_ADD(__half, f16)
KILN_INDEXED_ADD(__nv_bfloat16, bf16)
KILN_INDEXED_ADD(int32_t, i32)
KILN_INDEXED_ADD(int64_t, i64)
