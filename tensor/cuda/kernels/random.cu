// tensor/cuda/kernels/random.cu: random sampling on the GPU (uniform_, normal_, bernoulli_, random_,
// native_dropout), value for value the CPU kernels' (tensor/ops/random.cc, Note [Reproducible
// parallel sampling]): value i of a contiguous output comes from Philox block base + i / per_block
// alone, with the same conversions, so one seed and offset give the same numbers on either device.
// A thread computes one block (4 floats, 2 doubles, 2 integers) per step of a grid-stride loop.
#include "tensor/cuda/kernels/common.cuh"
#include "tensor/cuda/kernels/philox.cuh"

namespace kiln {

constexpr double kTwoPi = 6.283185307179586476925286766559;

// A block's N consecutive values, loaded or stored as one vector where the pointer is BlockAligned
// (and, for StoreBlock, the block whole): 16 bytes per thread in one instruction, not four.
template <typename T, int N>
struct alignas(N * sizeof(T)) BlockOf {
  T v[N];
};
template <typename T, int N>
__device__ void StoreBlock(T* out, int64_t n, int64_t b, const BlockOf<T, N>& block, bool vector) {
  if (vector && (b + 1) * N <= n) {
    reinterpret_cast<BlockOf<T, N>*>(out)[b] = block;
    return;
  }
#pragma unroll
  for (int k = 0; k < N; ++k)
    if (b * N + k < n) out[b * N + k] = block.v[k];
}
template <typename T, int N>
__device__ bool BlockAligned(const T* p) {
  return reinterpret_cast<uintptr_t>(p) % sizeof(BlockOf<T, N>) == 0;
}

template <typename T>
__device__ void Uniform(T* out, int64_t n, uint64_t seed, uint64_t base, double from, double range) {
  constexpr int kPer = sizeof(T) == 8 ? 2 : 4;
  const bool vector = BlockAligned<T, kPer>(out);
  KILN_GRID_STRIDE_LOOP(b, (n + kPer - 1) / kPer) {
    const PhiloxWords r = PhiloxBlock(seed, base + static_cast<uint64_t>(b));
    BlockOf<T, kPer> block;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      // fma: GCC contracts the CPU kernel's from + u * range (tensor/ops/random.cc) into one
      if constexpr (kPer == 2) block.v[k] = Cast<T>(fma(Uniform53(r.w[2 * k], r.w[2 * k + 1]), range, from));
      else block.v[k] = Cast<T>(static_cast<opmath_t<T>>(fma(static_cast<double>(Uniform24(r.w[k])), range, from)));
    }
    StoreBlock(out, n, b, block, vector);
  }
}

// Box-Muller pairs: two doubles from a block's 4 words, or two pairs of floats. sincos shares
// one argument reduction between the pair's cosine and sine (the same values as cos and sin).
template <typename T>
__device__ void Normal(T* out, int64_t n, uint64_t seed, uint64_t base, double mean, double std) {
  constexpr int kPer = sizeof(T) == 8 ? 2 : 4;
  const bool vector = BlockAligned<T, kPer>(out);
  KILN_GRID_STRIDE_LOOP(b, (n + kPer - 1) / kPer) {
    const PhiloxWords r = PhiloxBlock(seed, base + static_cast<uint64_t>(b));
    double z[4];
    if constexpr (kPer == 2) {
      const double u1 = 1.0 - Uniform53(r.w[0], r.w[1]), u2 = Uniform53(r.w[2], r.w[3]);
      const double radius = sqrt(-2.0 * log(u1));
      double s, c;
      sincos(kTwoPi * u2, &s, &c);
      z[0] = radius * c;
      z[1] = radius * s;
    } else {
#pragma unroll
      for (int p = 0; p < 2; ++p) {
        const double u1 = 1.0 - Uniform24(r.w[2 * p]), u2 = Uniform24(r.w[2 * p + 1]);
        const double radius = sqrt(-2.0 * log(u1));
        double s, c;
        sincos(kTwoPi * u2, &s, &c);
        z[2 * p] = radius * c;
        z[2 * p + 1] = radius * s;
      }
    }
    BlockOf<T, kPer> block;
#pragma unroll
    for (int k = 0; k < kPer; ++k)
      block.v[k] = Cast<T>(static_cast<opmath_t<T>>(fma(std, z[k], mean)));  // contracted on the CPU too
    StoreBlock(out, n, b, block, vector);
  }
}

// out[i] = u_i < p[i] (p: float64, contiguous, out's shape), or u_i < p_scalar where p is null.
template <typename T>
__device__ void Bernoulli(T* out, int64_t n, uint64_t seed, uint64_t base, const double* p, double p_scalar) {
  KILN_GRID_STRIDE_LOOP(b, (n + 3) / 4) {
    const PhiloxWords r = PhiloxBlock(seed, base + static_cast<uint64_t>(b));
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int64_t i = b * 4 + k;
      if (i >= n) break;
      const double q = p != nullptr ? p[i] : p_scalar;
      out[i] = Cast<T>(static_cast<int64_t>(Uniform24(r.w[k]) < q ? 1 : 0));
    }
  }
}

// out[i] = from + bits % range (range 0 stands for 2^64), in 64-bit two's complement.
template <typename T>
__device__ void Random(T* out, int64_t n, uint64_t seed, uint64_t base, int64_t from, uint64_t range) {
  KILN_GRID_STRIDE_LOOP(b, (n + 1) / 2) {
    const PhiloxWords r = PhiloxBlock(seed, base + static_cast<uint64_t>(b));
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      const int64_t i = b * 2 + k;
      if (i >= n) break;
      const uint64_t bits = Bits64(r.w[2 * k], r.w[2 * k + 1]);
      const int64_t v = static_cast<int64_t>(static_cast<uint64_t>(from) + (range ? bits % range : bits));
      out[i] = Cast<T>(static_cast<opmath_t<T>>(v));  // bool: v != 0
    }
  }
}

// native_dropout: keep = u_i < 1 - p; out = x * keep * scale, in x's opmath type. A block's four
// elements move as one vector when the pointers allow (they do for fresh and contiguous tensors).
template <typename T>
__device__ void Dropout(const T* x, T* out, bool* mask, int64_t n, uint64_t seed, uint64_t base, double keep_p,
                        double scale) {
  using M = opmath_t<T>;
  const bool vector = BlockAligned<T, 4>(x) && BlockAligned<T, 4>(out) && BlockAligned<bool, 4>(mask);
  const M s = static_cast<M>(scale);
  KILN_GRID_STRIDE_LOOP(b, (n + 3) / 4) {
    const PhiloxWords r = PhiloxBlock(seed, base + static_cast<uint64_t>(b));
    if (vector && b * 4 + 3 < n) {
      const BlockOf<T, 4> xv = reinterpret_cast<const BlockOf<T, 4>*>(x)[b];
      BlockOf<T, 4> ov;
      BlockOf<bool, 4> mv;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        mv.v[k] = Uniform24(r.w[k]) < keep_p;
        ov.v[k] = Cast<T>(Cast<M>(xv.v[k]) * M(mv.v[k] ? 1 : 0) * s);
      }
      reinterpret_cast<BlockOf<T, 4>*>(out)[b] = ov;
      reinterpret_cast<BlockOf<bool, 4>*>(mask)[b] = mv;
      continue;
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int64_t i = b * 4 + k;
      if (i >= n) break;
      const bool keep = Uniform24(r.w[k]) < keep_p;
      mask[i] = keep;
      out[i] = Cast<T>(Cast<M>(x[i]) * M(keep ? 1 : 0) * s);
    }
  }
}

}  // namespace kiln

// multinomial with replacement (Note [multinomial] in tensor/ops/random.cc): draw k of row r is the
// first category whose running sum exceeds u * the row's total (the last category at most).
// cum: [rows, cats], u and out: [rows, n], all contiguous.
extern "C" __global__ void kiln_multinomial_search(const double* cum, const double* u, int64_t* out, int64_t rows,
                                                   int64_t cats, int64_t n) {
  KILN_GRID_STRIDE_LOOP(e, rows * n) {
    const double* row = cum + e / n * cats;
    const double x = u[e] * row[cats - 1];
    int64_t lo = 0, hi = cats;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (row[mid] <= x) lo = mid + 1;
      else hi = mid;
    }
    out[e] = lo < cats - 1 ? lo : cats - 1;
  }
}

#define KILN_UNIFORM(T, S)                                                                               \
  extern "C" __global__ void kiln_uniform_##S(T* out, int64_t n, uint64_t seed, uint64_t base, double a, double b) { \
    kiln::Uniform<T>(out, n, seed, base, a, b);                                                          \
  }                                                                                                      \
  extern "C" __global__ void kiln_normal_##S(T* out, int64_t n, uint64_t seed, uint64_t base, double a, double b) { \
    kiln::Normal<T>(out, n, seed, base, a, b);                                                           \
  }                                                                                                      \
  extern "C" __global__ void kiln_dropout_##S(const T* x, T* out, bool* mask, int64_t n, uint64_t seed,  \
                                              uint64_t base, double keep_p, double scale) {              \
    kiln::Dropout<T>(x, out, mask, n, seed, base, keep_p, scale);                                        \
  }
KILN_FOR_EACH_FLOATING(KILN_UNIFORM)

#define KILN_DISCRETE(T, S)                                                                              \
  extern "C" __global__ void kiln_bernoulli_##S(T* out, int64_t n, uint64_t seed, uint64_t base, const double* p, \
                                                double p_scalar) {                                       \
    kiln::Bernoulli<T>(out, n, seed, base, p, p_scalar);                                                 \
  }                                                                                                      \
  extern "C" __global__ void kiln_random_##S(T* out, int64_t n, uint64_t seed, uint64_t base, int64_t from, \
                                             uint64_t range) {                                           \
    kiln::Random<T>(out, n, seed, base, from, range);                                                    \
  }
KILN_FOR_EACH_TYPE(KILN_DISCRETE)
