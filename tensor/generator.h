// tensor/generator.h: random number generators (kiln.Generator, manual_seed).
//
// CPU generators are Philox4x32-10 counter-based streams: a seed and an offset fully describe
// the state, so get_state/set_state are two numbers and parallel kernels can split a stream.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>

namespace kiln {

class GeneratorImpl {
 public:
  explicit GeneratorImpl(uint64_t seed = 67280421310721ull) : seed_(seed) {}
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
  std::mutex mu_;
};

using Generator = std::shared_ptr<GeneratorImpl>;

Generator DefaultCPUGenerator();

// Philox4x32-10: four 32-bit random words for (seed, counter).
struct Philox {
  static void Block(uint64_t seed, uint64_t counter, uint32_t out[4]);
};

}  // namespace kiln
