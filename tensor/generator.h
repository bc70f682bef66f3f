// tensor/generator.h: random number generators (kiln.Generator, manual_seed).
//
// Generators are Philox4x32-10 counter-based streams: a seed and an offset fully describe the
// state, so get_state/set_state are two numbers and parallel kernels can split a stream. CPU and
// CUDA kernels draw the same values from the same state (tensor/cuda/kernels/random.cu); each
// device has its own default generator, as in PyTorch (kiln.manual_seed seeds them all).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>

#include "runtime/device.h"

namespace kiln {

class GeneratorImpl {
 public:
  static constexpr uint64_t kDefaultSeed = 67280421310721ull;  // PyTorch's default_rng_seed_val
  explicit GeneratorImpl(uint64_t seed = kDefaultSeed, Device device = Device(DeviceType::CPU))
      : seed_(seed), device_(device) {}
  // cpu, or cuda:N: the device whose tensors it samples (random ops check it).
  Device device() const { return device_; }
  void manual_seed(uint64_t seed) { std::lock_guard<std::mutex> l(mu_); seed_ = seed; offset_ = 0; }
  uint64_t initial_seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_state(uint64_t seed, uint64_t offset) { std::lock_guard<std::mutex> l(mu_); seed_ = seed; offset_ = offset; }
  // Reserves `n` 128-bit blocks of the stream and returns the first block's counter.
  uint64_t Reserve(uint64_t n) { std::lock_guard<std::mutex> l(mu_); uint64_t o = offset_; offset_ += n; return o; }
  // Reserve, also returning the seed read under the same lock: {seed, first block's counter}.
  // Kernels use this so a concurrent manual_seed cannot pair one seed with another's offsets.
  std::pair<uint64_t, uint64_t> ReserveWithSeed(uint64_t n) {
    std::lock_guard<std::mutex> l(mu_);
    uint64_t o = offset_;
    offset_ += n;
    return {seed_, o};
  }
  std::mutex& mutex() { return mu_; }

 private:
  uint64_t seed_;
  uint64_t offset_ = 0;
  Device device_;
  std::mutex mu_;
};

using Generator = std::shared_ptr<GeneratorImpl>;

Generator DefaultCPUGenerator();
// The default generator of CUDA device `index` (made on first use; no CUDA call).
Generator DefaultCUDAGenerator(int index);
// Seeds every CUDA device's default generator, made or not (torch.cuda.manual_seed_all).
void ManualSeedAllCUDA(uint64_t seed);

// Philox4x32-10: four 32-bit random words for (seed, counter).
struct Philox {
  static void Block(uint64_t seed, uint64_t counter, uint32_t out[4]);
};

}  // namespace kiln
