// tensor/loops.h: iteration over elementwise ops (with broadcasting) and over reductions.
//
// ElementwiseIter lines up an output and its inputs on the output's shape (inputs broadcast with
// stride 0), merges dimensions that are contiguous in every operand, and calls an inner loop
// `loop(char* const* ptrs, const int64_t* byte_strides, int64_t n)` over the innermost dimension,
// in parallel over the outer ones for large tensors. CpuKernel builds that inner loop from a
// scalar lambda with fast paths for contiguous operands and broadcast scalars, which the C++
// compiler vectorises.
#pragma once

#include <algorithm>
#include <array>
#include <complex>
#include <cstring>
#include <type_traits>
#include <utility>

#include "runtime/function_ref.h"
#include "runtime/thread_pool.h"
#include "tensor/cpu_capability.h"
#include "tensor/tensor_impl.h"

namespace kiln {

constexpr int64_t kGrainSize = 32768;

// One operand of an elementwise loop: a tensor, or one value broadcast everywhere (a Python
// number converted to the compute type, so `x + 1` allocates no tensor for the 1).
struct Operand {
  Operand(const Tensor& t) : tensor(&t) {}  // NOLINT
  static Operand Broadcast(const void* value) { Operand o; o.value = value; return o; }
  const Tensor* tensor = nullptr;
  const void* value = nullptr;
 private:
  Operand() = default;
};

class ElementwiseIter {
 public:
  static constexpr int kMaxOperands = 6;
  // operands[0] is the output; all inputs must broadcast to its shape.
  ElementwiseIter(std::initializer_list<Operand> operands);

  int ntensors() const { return n_; }
  int64_t numel() const { return numel_; }
  int ndim() const { return static_cast<int>(shape_.size()); }

  // loop(ptrs, byte_strides, n) over innermost runs; parallel when numel >= grain. Compiled once
  // (loops.cc), not per kernel: see Note [One ElementwiseIter::Run].
  using InnerLoop = FunctionRef<void(char* const* ptrs, const int64_t* byte_strides, int64_t n)>;
  void Run(InnerLoop loop, int64_t grain = kGrainSize) const;

 private:
  int n_;
  int64_t numel_ = 1;
  DimVector shape_;  // coalesced, innermost last
  std::array<DimVector, kMaxOperands> strides_;  // bytes
  std::array<char*, kMaxOperands> base_;
};

namespace detail {
template <typename T> inline T Load(const char* p) { T v; std::memcpy(&v, p, sizeof(T)); return v; }

// Copies `bytes` from a cache-resident buffer to `dst` with non-temporal stores, which skip the
// read-for-ownership a normal store of a cold line costs (see Note [Streaming stores]). Out of
// line (loops.cc), as StoreFence: a call per 8 KB block costs nothing, and the intrinsics need
// <immintrin.h>, 55,000 lines that took a second of every kernel file's compile.
void StreamStore(char* dst, const char* src, int64_t bytes);
// Orders the streamed stores before later ones (sfence).
void StoreFence();
}  // namespace detail

// Note [Streaming stores]: an eager op writing a fresh output larger than the caches pays for
// each output line twice (the line is read before it is overwritten). Outputs of at least
// kStreamingBytes are computed in L1-sized blocks and streamed out, so `x * y + 1` on 16M floats
// moves only the bytes it must. Smaller outputs stay in cache for the next op to read.
constexpr int64_t kStreamingBytes = int64_t(16) << 20;

// Writes out[j] = value_at(j) for j < n: plainly, or in blocks streamed past the caches. One loop
// computes both (a plain run is one block, written in place), so each kernel's loop is compiled
// once per instruction set, not twice: the kernel files are most of the build (Note [Binary
// kernels in several files]), and binary_kernels_compare.cc took 53.5 s with two loops, 45.0 s with one.
template <typename Out, typename ValueAt>
inline void EmitRun(Out* out, int64_t n, bool stream, const ValueAt& value_at) {
  constexpr int64_t kBlock = 8192 / sizeof(Out);
  alignas(64) Out buffer[kBlock];
  const int64_t block = stream ? kBlock : n;
  for (int64_t j0 = 0; j0 < n; j0 += block) {
    const int64_t m = std::min(block, n - j0);
    Out* dst = stream ? buffer : out + j0;
    for (int64_t j = 0; j < m; ++j) dst[j] = value_at(j0 + j);
    if (stream)
      detail::StreamStore(reinterpret_cast<char*>(out + j0), reinterpret_cast<const char*>(buffer),
                          m * static_cast<int64_t>(sizeof(Out)));
  }
  if (stream) detail::StoreFence();
}

// Note [CPU instruction sets]: kiln builds for x86-64-v3 (AVX2), so the module runs on any recent
// x86 machine. The hot loops are also compiled for x86-64-v4 (AVX-512) and picked by the CPU they
// run on, as PyTorch picks its AVX512 kernels: the element functions (exp, erf, the activations)
// vectorise twice as wide there. RunForCpu(body) calls body through one of two wrappers, one with
// GCC's target("arch=x86-64-v4"); `flatten` inlines everything the body calls (the run, the
// element function, ExpF...) into each, so all of it is compiled for that wrapper's target. Both
// compute the same element function, so results do not depend on the machine
// (tests/test_cpu_capability.py compares the two on one machine); an element function writes out
// its multiply-adds (std::fma) where GCC might fuse a vector body and its remainder differently.
// Not target_clones: GCC 12 takes a cloned function's dispatcher for one that cannot throw, so
// an element function's error (binary_cross_entropy's range check) ended in std::terminate.
// Which one runs: GetCpuCapability() (cpu_capability.h; ATEN_CPU_CAPABILITY=avx2 forces AVX2).
// CpuKernel takes the AVX-512 one for real floating loops only (Note [AVX-512 for real floating
// loops]).
namespace detail {
template <typename Body>
[[gnu::flatten]] void RunBaseline(const Body& body) { body(); }
template <typename Body>
__attribute__((target("arch=x86-64-v4"), flatten)) void RunX86_64_V4(const Body& body) { body(); }
}  // namespace detail
template <typename Body>
inline void RunForCpu(const Body& body) {
  if (GetCpuCapability() == CpuCapability::kAvx512) detail::RunX86_64_V4(body);
  else detail::RunBaseline(body);
}

namespace detail {

// One run of CpuKernel's loop: n elements at ptrs with byte strides.
template <typename Out, typename... In, typename F>
[[gnu::always_inline]] inline void ElementwiseRun(char* const* ptrs, const int64_t* strides, int64_t n, bool stream,
                                                  const F& f) {
  constexpr int kN = sizeof...(In);
  bool contiguous = strides[0] == sizeof(Out);
  [&]<size_t... I>(std::index_sequence<I...>) {
    ((contiguous = contiguous && strides[I + 1] == sizeof(In)), ...);
  }(std::index_sequence_for<In...>{});
  Out* out = reinterpret_cast<Out*>(ptrs[0]);
  if (contiguous) {
    [&]<size_t... I>(std::index_sequence<I...>) {
      std::tuple<const In*...> typed{reinterpret_cast<const In*>(ptrs[I + 1])...};
      EmitRun(out, n, stream, [&](int64_t j) { return f(std::get<I>(typed)[j]...); });
    }(std::index_sequence_for<In...>{});
    return;
  }
  if constexpr (kN == 2) {
    // One contiguous operand and one broadcast scalar: the other common fast path.
    using A = std::tuple_element_t<0, std::tuple<In...>>;
    using B = std::tuple_element_t<1, std::tuple<In...>>;
    if (strides[0] == sizeof(Out) && strides[1] == sizeof(A) && strides[2] == 0) {
      const A* a = reinterpret_cast<const A*>(ptrs[1]);
      const B b = Load<B>(ptrs[2]);
      EmitRun(out, n, stream, [&](int64_t j) { return f(a[j], b); });
      return;
    }
    if (strides[0] == sizeof(Out) && strides[1] == 0 && strides[2] == sizeof(B)) {
      const A a = Load<A>(ptrs[1]);
      const B* b = reinterpret_cast<const B*>(ptrs[2]);
      EmitRun(out, n, stream, [&](int64_t j) { return f(a, b[j]); });
      return;
    }
  }
  [&]<size_t... I>(std::index_sequence<I...>) {
    for (int64_t j = 0; j < n; ++j) {
      Out v = f(Load<In>(ptrs[I + 1] + j * strides[I + 1])...);
      std::memcpy(ptrs[0] + j * strides[0], &v, sizeof(Out));
    }
  }(std::index_sequence_for<In...>{});
}

}  // namespace detail

// Note [AVX-512 for real floating loops]: CpuKernel compiles its loop for AVX-512 too (Note [CPU
// instruction sets]) only where an operand is a real floating type (float, double, half,
// bfloat16) and none is complex: there the element function (exp, erf, the activations, float
// compares and conversions) vectorises twice as wide. Integer and bool loops (bitwise ops,
// integer arithmetic, integer-to-integer copies) and complex ones (a libm call per element) run
// the AVX2 loop on every CPU. They were 60% of the instantiations of CpuKernel (10 dtypes, 12
// with complex, and copy's 132 dtype pairs), so compiling each twice cost build time (issue 20:
// a clean build in 15 minutes) for no float op's speed; their results are exact either way.
namespace detail {
template <typename T>
inline constexpr bool kRealFloating =
    std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
template <typename... T>
inline constexpr bool kAvx512Worthwhile = (kRealFloating<T> || ...) && !(is_complex_v<T> || ...);
}  // namespace detail

// out_t f(in_t...) applied elementwise. Inputs must already have the types the lambda takes.
template <typename Out, typename... In, typename F>
void CpuKernel(const ElementwiseIter& iter, const F& f) {
  const bool stream = iter.numel() * static_cast<int64_t>(sizeof(Out)) >= kStreamingBytes;
  iter.Run([&](char* const* ptrs, const int64_t* strides, int64_t n) {
    const auto run = [&] { detail::ElementwiseRun<Out, In...>(ptrs, strides, n, stream, f); };
    if constexpr (detail::kAvx512Worthwhile<Out, In...>) RunForCpu(run);
    else detail::RunBaseline(run);
  });
}

// CpuKernel, but where every operand of a run is contiguous on an AVX-512 CPU, the run goes to
// avx512_run(Out* out, const In*... in, int64_t n), a hand-vectorised loop that must return what
// f would, bit for bit (Note [Hand-vectorised runs], vec_avx512.h).
template <typename Out, typename... In, typename F, typename Avx512Run>
void CpuKernelVec(const ElementwiseIter& iter, const F& f, const Avx512Run& avx512_run) {
  if (GetCpuCapability() != CpuCapability::kAvx512) return CpuKernel<Out, In...>(iter, f);
  const bool stream = iter.numel() * static_cast<int64_t>(sizeof(Out)) >= kStreamingBytes;
  iter.Run([&](char* const* ptrs, const int64_t* strides, int64_t n) {
    bool contiguous = strides[0] == sizeof(Out);
    [&]<size_t... I>(std::index_sequence<I...>) {
      ((contiguous = contiguous && strides[I + 1] == sizeof(In)), ...);
    }(std::index_sequence_for<In...>{});
    if (!contiguous) {
      RunForCpu([&] { detail::ElementwiseRun<Out, In...>(ptrs, strides, n, stream, f); });
      return;
    }
    Out* out = reinterpret_cast<Out*>(ptrs[0]);
    [&]<size_t... I>(std::index_sequence<I...>) {
      if (!stream) return avx512_run(out, reinterpret_cast<const In*>(ptrs[I + 1])..., n);
      constexpr int64_t kBlock = 8192 / sizeof(Out);  // as EmitRun: computed in L1, streamed out
      alignas(64) Out buffer[kBlock];
      for (int64_t j0 = 0; j0 < n; j0 += kBlock) {
        const int64_t m = std::min(kBlock, n - j0);
        avx512_run(buffer, reinterpret_cast<const In*>(ptrs[I + 1]) + j0..., m);
        detail::StreamStore(reinterpret_cast<char*>(out + j0), reinterpret_cast<const char*>(buffer),
                            m * static_cast<int64_t>(sizeof(Out)));
      }
      detail::StoreFence();
    }(std::index_sequence_for<In...>{});
  });
}

// Reductions. The input is viewed as [outputs..., reduced...]; for each output element, `reduce`
// gets the element pointer run(s) of its reduced elements.
class ReduceIter {
 public:
  // `reduce_mask[d]` marks the dimensions of `input` that are reduced.
  ReduceIter(const Tensor& input, const std::vector<bool>& reduce_mask);
  int64_t num_outputs() const { return num_outputs_; }
  int64_t reduce_size() const { return reduce_size_; }
  // For output index o (row-major over the kept dims), calls
  // visit(const char* base, int64_t inner_n, int64_t inner_stride_bytes) for each inner run.
  template <typename Visit>
  void ForEachRun(int64_t o, const Visit& visit) const;
  // True when every output reads one contiguous run of reduce_size elements.
  bool inner_contiguous() const { return inner_contiguous_; }

 private:
  const char* base_;
  int64_t num_outputs_ = 1, reduce_size_ = 1;
  DimVector out_shape_, out_strides_;   // kept dims (bytes)
  DimVector red_shape_, red_strides_;   // reduced dims, coalesced (bytes), innermost last
  bool inner_contiguous_ = false;
};

template <typename Visit>
void ReduceIter::ForEachRun(int64_t o, const Visit& visit) const {
  const char* p = base_;
  for (int d = static_cast<int>(out_shape_.size()) - 1; d >= 0; --d) {
    p += (o % out_shape_[d]) * out_strides_[d];
    o /= out_shape_[d];
  }
  const int nr = static_cast<int>(red_shape_.size());
  if (nr == 0) { visit(p, 1, 0); return; }
  const int64_t inner = red_shape_[nr - 1], inner_stride = red_strides_[nr - 1];
  int64_t outer = reduce_size_ / std::max<int64_t>(inner, 1);
  if (inner == 0) return;
  DimVector idx(nr > 1 ? nr - 1 : 0, 0);
  for (int64_t r = 0; r < outer; ++r) {
    const char* q = p;
    for (int d = 0; d < nr - 1; ++d) q += idx[d] * red_strides_[d];
    visit(q, inner, inner_stride);
    for (int d = nr - 2; d >= 0; --d) {
      if (++idx[d] < red_shape_[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace kiln
