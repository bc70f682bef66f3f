// tensor/generator.cc: the default CPU generator and the Philox block function.
#include "tensor/generator.h"

#include <map>

#include "runtime/error.h"

namespace kiln {

Generator DefaultCPUGenerator() {
  static Generator g = std::make_shared<GeneratorImpl>();
  return g;
}

namespace {

// CUDA default generators by device index, and the seed of those not made yet.
struct CUDAGenerators {
  std::mutex mu;
  std::map<int, Generator> by_device;
  uint64_t seed = GeneratorImpl::kDefaultSeed;
};
CUDAGenerators& GetCUDAGenerators() {
  static CUDAGenerators* g = new CUDAGenerators;  // kernels may sample during static destruction
  return *g;
}

}  // namespace

Generator DefaultCUDAGenerator(int index) {
  KILN_CHECK(index >= 0, "DefaultCUDAGenerator: a device index, got ", index);
  CUDAGenerators& g = GetCUDAGenerators();
  std::lock_guard<std::mutex> lock(g.mu);
  Generator& gen = g.by_device[index];
  if (!gen) gen = std::make_shared<GeneratorImpl>(g.seed, Device(DeviceType::CUDA, static_cast<int16_t>(index)));
  return gen;
}

void ManualSeedAllCUDA(uint64_t seed) {
  CUDAGenerators& g = GetCUDAGenerators();
  std::lock_guard<std::mutex> lock(g.mu);
  g.seed = seed;
  for (auto& [index, gen] : g.by_device) gen->manual_seed(seed);
}

void Philox::Block(uint64_t seed, uint64_t counter, uint32_t out[4]) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32);
  uint32_t c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t(0xD2511F53) * c0, p1 = uint64_t(0xCD9E8D57) * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c0 = n0;
    c1 = static_cast<uint32_t>(p1);
    c2 = n2;
    c3 = static_cast<uint32_t>(p0);
    k0 += 0x9E3779B9;  // Weyl sequence bumps of the key
    k1 += 0xBB67AE85;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

}  // namespace kiln
