// runtime/thread_pool_bench.cc: what one ParallelFor costs its caller, inline and across the pool.
//
// The callback captures five references, as ElementwiseIter::Run's do: more than std::function
// keeps without a heap allocation, which a FunctionRef never makes. `Inline` is the path of every
// small eager op (one chunk, run on the caller); `Pool` enters a region of two chunks with two
// threads (with work this small the caller often runs both before the worker wakes: it times
// what entering a region costs the caller).
#include <benchmark/benchmark.h>

#include <cstdint>

#include "runtime/thread_pool.h"

namespace kiln {
namespace {

void RunRegions(benchmark::State& state, int64_t grain) {
  SetNumThreads(static_cast<int>(state.range(0)));
  int64_t a = 0, b = 0, c = 0, d = 0, e = 0;
  for (auto _ : state) {
    ParallelFor(0, 1 << 16, grain, [&](int64_t begin, int64_t end) {
      benchmark::DoNotOptimize(a += end - begin);
      benchmark::DoNotOptimize(b + c + d + e);
    });
  }
}

void BM_ParallelForInline(benchmark::State& state) { RunRegions(state, int64_t{1} << 20); }
BENCHMARK(BM_ParallelForInline)->Arg(1);

void BM_ParallelForPool(benchmark::State& state) { RunRegions(state, 1); }
BENCHMARK(BM_ParallelForPool)->Arg(2)->UseRealTime();

}  // namespace
}  // namespace kiln
