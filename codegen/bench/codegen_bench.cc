// codegen/bench/codegen_bench.cc: generated kernels against the eager kiln ops they replace (called
// through the dispatcher) and against a memcpy of the same bytes (//codegen/bench:codegen_bench).
// Bytes processed count what the kernel must move at least (inputs read once + outputs written),
// so bytes_per_second compares directly with the memcpy's copy bandwidth.
#include <cstring>

#include "benchmark/benchmark.h"
#include "codegen/llvm_codegen.h"
#include "runtime/thread_pool.h"
#include "tensor/ops.h"

namespace kiln::codegen {
namespace {

using E = ExprPtr;
E Ld(int b, Index ix) { return Expr::Load(b, std::move(ix)); }
E Op(OpCode op, E a) { return Expr::Op(op, {a}); }
E Op(OpCode op, E a, E b) { return Expr::Op(op, {a, b}); }
E F(double v) { return Expr::Const(v, DType::F32); }

constexpr int64_t kM = 2048, kN = 4096;

Kernel RmsNormSilu() {
  Kernel k;
  k.name = "cpp_fused_add_mean_mul_pow_rsqrt_silu_0";
  k.buffers = {{"in_ptr0", DType::F32}, {"in_ptr1", DType::F32}, {"out_ptr0", DType::F32}};
  k.outer = {kM};
  E x = Ld(0, Index{0, {kN}, 1});
  E inv = Op(OpCode::kRsqrt, Op(OpCode::kAdd, Op(OpCode::kDiv, Expr::Acc(0), F(kN)), F(1e-6)));
  E y = Op(OpCode::kMul, Op(OpCode::kMul, x, inv), Ld(1, Index{0, {0}, 1}));
  Stmt red;
  red.kind = Stmt::Kind::kReduce; red.acc_id = 0; red.reduce = ReduceKind::kSum; red.expr = Op(OpCode::kMul, x, x);
  Stmt st;
  st.kind = Stmt::Kind::kStore; st.buffer = 2; st.index = Index{0, {kN}, 1};
  st.expr = Op(OpCode::kMul, y, Op(OpCode::kSigmoid, y));
  k.loops = {Loop{kN, {red}}, Loop{kN, {st}}};
  return k;
}

// relu(x * 2 + 1) * y over kM*kN elements (outer [kM], inner kN).
Kernel PointwiseChain() {
  Kernel k;
  k.name = "cpp_fused_add_mul_relu_0";
  k.buffers = {{"in_ptr0", DType::F32}, {"in_ptr1", DType::F32}, {"out_ptr0", DType::F32}};
  k.outer = {kM};
  Index ix{0, {kN}, 1};
  Stmt st;
  st.kind = Stmt::Kind::kStore; st.buffer = 2; st.index = ix;
  st.expr = Op(OpCode::kMul, Op(OpCode::kRelu, Op(OpCode::kAdd, Op(OpCode::kMul, Ld(0, ix), F(2)), F(1))), Ld(1, ix));
  k.loops = {Loop{kN, {st}}};
  return k;
}

// sigmoid(x): exp-bound, to measure the vector math library.
Kernel Sigmoid() {
  Kernel k;
  k.name = "cpp_fused_sigmoid_0";
  k.buffers = {{"in_ptr0", DType::F32}, {"out_ptr0", DType::F32}};
  k.outer = {kM};
  Index ix{0, {kN}, 1};
  Stmt st;
  st.kind = Stmt::Kind::kStore; st.buffer = 1; st.index = ix; st.expr = Op(OpCode::kSigmoid, Ld(0, ix));
  k.loops = {Loop{kN, {st}}};
  return k;
}

Tensor Randn(std::vector<SymInt> size) { return ops::randn(size, ScalarType::Float32); }
Tensor Call1(const char* name, const Tensor& t) { return CallOp<Tensor>(Registry::Get().FindOrThrow(name), t); }

void SetBytes(benchmark::State& state, int64_t bytes) { state.SetBytesProcessed(state.iterations() * bytes); }

void BM_RmsNormSilu_Fused(benchmark::State& state) {
  CodegenOptions o;
  o.inline_exp = state.range(0) == 0;
  o.prefer_vector_width = state.range(1);
  auto ck = Compile(RmsNormSilu(), o);
  state.SetLabel(std::string(o.inline_exp ? "inline exp" : "libmvec exp") +
                 (o.prefer_vector_width ? ", prefer-vector-width=" + std::to_string(o.prefer_vector_width)
                                        : ", default width"));
  Tensor x = Randn({kM, kN}), w = Randn({kN}), out = ops::empty({kM, kN}, ScalarType::Float32);
  std::vector<char*> p = {static_cast<char*>(x.raw_data()), static_cast<char*>(w.raw_data()),
                          static_cast<char*>(out.raw_data())};
  for (auto _ : state) ck->Run(p.data());
  SetBytes(state, 2 * kM * kN * 4);
}
BENCHMARK(BM_RmsNormSilu_Fused)->Args({0, 0})->Args({0, 256})->Args({1, 256})->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_RmsNormSilu_Eager(benchmark::State& state) {
  Tensor x = Randn({kM, kN}), w = Randn({kN});
  for (auto _ : state) {
    Tensor ms = CallOp<Tensor>(KILN_OP("aten::mean.dim"), ops::mul(x, x), std::optional<ops::IntList>(ops::IntList{-1}), true,
                               std::optional<ScalarType>());
    Tensor inv = Call1("aten::rsqrt", ops::add(ms, Scalar(1e-6)));
    Tensor y = ops::mul(ops::mul(x, inv), w);
    benchmark::DoNotOptimize(ops::mul(y, Call1("aten::sigmoid", y)));
  }
  SetBytes(state, 2 * kM * kN * 4);
}
BENCHMARK(BM_RmsNormSilu_Eager)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_PointwiseChain_Fused(benchmark::State& state) {
  CodegenOptions o;
  o.prefer_vector_width = state.range(0);
  auto ck = Compile(PointwiseChain(), o);
  Tensor x = Randn({kM, kN}), y = Randn({kM, kN}), out = ops::empty({kM, kN}, ScalarType::Float32);
  std::vector<char*> p = {static_cast<char*>(x.raw_data()), static_cast<char*>(y.raw_data()),
                          static_cast<char*>(out.raw_data())};
  for (auto _ : state) ck->Run(p.data());
  SetBytes(state, 3 * kM * kN * 4);
}
BENCHMARK(BM_PointwiseChain_Fused)->Arg(0)->Arg(256)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_PointwiseChain_Eager(benchmark::State& state) {
  Tensor x = Randn({kM, kN}), y = Randn({kM, kN});
  for (auto _ : state)
    benchmark::DoNotOptimize(ops::mul(Call1("aten::relu", ops::add(ops::mul(x, Scalar(2.0)), Scalar(1.0))), y));
  SetBytes(state, 3 * kM * kN * 4);
}
BENCHMARK(BM_PointwiseChain_Eager)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Sigmoid_Fused(benchmark::State& state) {
  CodegenOptions o;
  o.vector_library = state.range(0) != 0;
  o.inline_exp = state.range(0) == 2;
  auto ck = Compile(Sigmoid(), o);
  Tensor x = Randn({kM, kN}), out = ops::empty({kM, kN}, ScalarType::Float32);
  std::vector<char*> p = {static_cast<char*>(x.raw_data()), static_cast<char*>(out.raw_data())};
  for (auto _ : state) ck->Run(p.data());
  state.SetLabel(o.inline_exp ? "inline exp" : o.vector_library ? "libmvec" : "no vector library");
  SetBytes(state, 2 * kM * kN * 4);
}
BENCHMARK(BM_Sigmoid_Fused)->Arg(0)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Sigmoid_Eager(benchmark::State& state) {
  Tensor x = Randn({kM, kN});
  for (auto _ : state) benchmark::DoNotOptimize(Call1("aten::sigmoid", x));
  SetBytes(state, 2 * kM * kN * 4);
}
BENCHMARK(BM_Sigmoid_Eager)->UseRealTime()->Unit(benchmark::kMillisecond);

// Copy bandwidth: read kM*kN floats, write kM*kN floats.
void BM_Memcpy(benchmark::State& state) {
  Tensor x = Randn({kM, kN}), out = ops::empty({kM, kN}, ScalarType::Float32);
  for (auto _ : state) {
    std::memcpy(out.raw_data(), x.raw_data(), kM * kN * 4);
    benchmark::ClobberMemory();
  }
  SetBytes(state, 2 * kM * kN * 4);
}
BENCHMARK(BM_Memcpy)->UseRealTime()->Unit(benchmark::kMillisecond);

// The same copy split over kiln's thread pool by rows, as the generated kernels are.
void BM_Memcpy_ThreadPool(benchmark::State& state) {
  Tensor x = Randn({kM, kN}), out = ops::empty({kM, kN}, ScalarType::Float32);
  char* src = static_cast<char*>(x.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  for (auto _ : state) {
    ParallelFor(0, kM, 4, [&](int64_t b, int64_t e) { std::memcpy(dst + b * kN * 4, src + b * kN * 4, (e - b) * kN * 4); });
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::to_string(GetNumThreads()) + " threads");
  SetBytes(state, 2 * kM * kN * 4);
}
BENCHMARK(BM_Memcpy_ThreadPool)->UseRealTime()->Unit(benchmark::kMillisecond);

// Cold compile (no cache): IR generation, O3, machine code, JIT link.
void BM_CompileCold_RmsNormSilu(benchmark::State& state) {
  CodegenOptions o;
  o.use_cache = false;
  Kernel k = RmsNormSilu();
  for (auto _ : state) benchmark::DoNotOptimize(Compile(k, o));
}
BENCHMARK(BM_CompileCold_RmsNormSilu)->Unit(benchmark::kMillisecond);

void BM_CompileCached_RmsNormSilu(benchmark::State& state) {
  Kernel k = RmsNormSilu();
  Compile(k);
  for (auto _ : state) benchmark::DoNotOptimize(Compile(k));
}
BENCHMARK(BM_CompileCached_RmsNormSilu)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kiln::codegen
