// tensor/cuda/kernels/philox.cuh: Philox4x32-10 on the device, the same function as the CPU's
// (tensor/generator.cc): block `counter` of the stream keyed by `seed` is four 32-bit words.
#pragma once

#include <stdint.h>

namespace kiln {

struct PhiloxWords {
  uint32_t w[4];
};

__device__ __forceinline__ PhiloxWords PhiloxBlock(uint64_t seed, uint64_t counter) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    const uint32_t hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const uint32_t hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return PhiloxWords{{c0, c1, c2, c3}};
}

// The CPU sampler's conversions (tensor/ops/random.cc): 24 bits to a float in [0, 1), 53 bits to a
// double in [0, 1), two words to 64 bits.
__device__ __forceinline__ float Uniform24(uint32_t x) { return static_cast<float>(x >> 8) * (1.0f / 16777216.0f); }
__device__ __forceinline__ double Uniform53(uint32_t lo, uint32_t hi) {
  return static_cast<double>(((static_cast<uint64_t>(hi) << 32) | lo) >> 11) * (1.0 / 9007199254740992.0);
}
__device__ __forceinline__ uint64_t Bits64(uint32_t lo, uint32_t hi) { return (static_cast<uint64_t>(hi) << 32) | lo; }

}  // namespace kiln
