// tensor/ops_bench.cc: Google Benchmark of dispatch cost and kernels by size (//tensor:ops_bench).
#include "benchmark/benchmark.h"
#include "tensor/ops.h"

namespace kiln {
namespace {

Tensor Filled(int64_t n, double v) {
  return ops::full({SymInt(n)}, Scalar(v), ScalarType::Float32);
}

void BM_DispatchAddScalar(benchmark::State& state) {
  Tensor x = Filled(1, 1.0);
  for (auto _ : state) benchmark::DoNotOptimize(ops::add(x, Scalar(int64_t(1))));
}
BENCHMARK(BM_DispatchAddScalar);

void BM_MulAdd(benchmark::State& state) {
  Tensor x = Filled(state.range(0), 1.5), y = Filled(state.range(0), 2.0);
  for (auto _ : state) benchmark::DoNotOptimize(ops::add(ops::mul(x, y), Scalar(int64_t(1))));
  state.SetBytesProcessed(state.iterations() * state.range(0) * 4 * 5);
}
BENCHMARK(BM_MulAdd)->Arg(1 << 10)->Arg(1 << 16)->Arg(1 << 24)->UseRealTime();

void BM_Sum(benchmark::State& state) {
  Tensor x = Filled(state.range(0), 1.0);
  for (auto _ : state) benchmark::DoNotOptimize(ops::sum(x, std::nullopt));
  state.SetBytesProcessed(state.iterations() * state.range(0) * 4);
}
BENCHMARK(BM_Sum)->Arg(1 << 10)->Arg(1 << 16)->Arg(1 << 24)->UseRealTime();

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

void BM_Sgemm(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor a = ops::full({SymInt(n), SymInt(n)}, Scalar(0.5), ScalarType::Float32);
  for (auto _ : state) benchmark::DoNotOptimize(ops::mm(a, a));
  state.SetItemsProcessed(state.iterations() * 2 * n * n * n);  // flops
}
BENCHMARK(BM_Sgemm)->Arg(128)->Arg(512)->Arg(1024)->UseRealTime();

void BM_ViewChain(benchmark::State& state) {
  Tensor x = ops::full({SymInt(64), SymInt(64)}, Scalar(1.0), ScalarType::Float32);
  for (auto _ : state) benchmark::DoNotOptimize(ops::unsqueeze(ops::transpose(ops::view(x, {SymInt(4096)}), 0, 0), 0));
}
BENCHMARK(BM_ViewChain);

}  // namespace
}  // namespace kiln
