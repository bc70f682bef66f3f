// tensor/ops/random.cc: random sampling (uniform_, normal_, bernoulli, random_, randperm) and the
// factories built on them (rand, randn, randint, *_like), each taking `Generator? generator`.
//
// Note [Reproducible parallel sampling]: a kernel reserves the Philox counter blocks it needs
// from the generator (GeneratorImpl::Reserve, under the generator's mutex), then value i of
// the output is computed from block `base + i / per_block` alone. Which thread computes which
// block never changes a value, so results depend only on the seed and the generator's offset:
// kiln.manual_seed(s) reproduces a sequence whatever the thread count. Non-contiguous outputs
// are sampled into a contiguous buffer (row-major order) and copied back.
//
// Per block (four 32-bit words): float uniforms use 24 bits each (4 per block), double uniforms
// 53 bits (2 per block); normals are Box-Muller pairs (4 floats or 2 doubles per block);
// integers use 64 bits modulo the range (2 per block).
//
// CUDA tensors are sampled by tensor/cuda/kernels/random.cu with the same blocks and conversions,
// from the device's own generator (DefaultCUDAGenerator, or a Generator(device="cuda")): one seed and
// offset give the same values on either device (up to the last bit of the normals' log and cos).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "tensor/cuda/embedded_kernels.h"
#include "tensor/empty.h"
#include "tensor/ops/common.h"

namespace kiln {
namespace {

using OptGen = std::optional<Generator>;
using OptDtype = std::optional<ScalarType>;
using OptLayout = std::optional<Layout>;
using OptDevice = std::optional<Device>;
using OptBool = std::optional<bool>;
using OptMemoryFormat = std::optional<MemoryFormat>;
using SymList = std::vector<SymInt>;

constexpr double kTwoPi = 6.283185307179586476925286766559;

// The generator for a tensor on `device`: the one given, which must be of the device's type, else the
// device's default.
GeneratorImpl& GenOf(const OptGen& g, Device device) {
  if (g && *g) {
    KILN_CHECK((*g)->device().type == device.type, "Expected a '", DeviceTypeName(device.type),
               "' device type for generator but found '", DeviceTypeName((*g)->device().type), "'");
    return **g;
  }
  return device.is_cuda() ? *DefaultCUDAGenerator(device.index) : *DefaultCPUGenerator();
}

inline float Uniform24(uint32_t x) { return static_cast<float>(x >> 8) * (1.0f / 16777216.0f); }
inline double Uniform53(uint32_t lo, uint32_t hi) {
  return static_cast<double>(((static_cast<uint64_t>(hi) << 32) | lo) >> 11) * (1.0 / 9007199254740992.0);
}
inline uint64_t Bits64(uint32_t lo, uint32_t hi) { return (static_cast<uint64_t>(hi) << 32) | lo; }

// Fills out[0, n) block by block (see the Note): fill(words, dst, count) writes `count` <=
// per_block values for one Philox block. `device`: whose generator, when none is given.
template <typename T, typename Fill>
void SampleBlocks(const OptGen& gen, T* out, int64_t n, int per_block, const Fill& fill,
                  Device device = Device(DeviceType::CPU)) {
  if (n == 0) return;
  const int64_t nblocks = (n + per_block - 1) / per_block;
  const auto [seed, base] = GenOf(gen, device).ReserveWithSeed(static_cast<uint64_t>(nblocks));
  ParallelFor(0, nblocks, std::max<int64_t>(1, kGrainSize / 8), [&](int64_t b, int64_t e) {
    uint32_t w[4];
    for (int64_t blk = b; blk < e; ++blk) {
      Philox::Block(seed, base + static_cast<uint64_t>(blk), w);
      const int64_t start = blk * per_block;
      fill(w, out + start, static_cast<int>(std::min<int64_t>(per_block, n - start)));
    }
  });
}

// The CUDA form of SampleBlocks: kernel kiln_<kernel>_<dtype> of random.cu fills `dst` (contiguous, on
// a CUDA device) from the next blocks of the device's generator; a and b are its last two parameters.
template <typename A, typename B>
void SampleBlocksCUDA(const OptGen& gen, const Tensor& dst, int per_block, const char* kernel, const char* op, A a,
                      B b) {
  int64_t n = dst.numel();
  if (n == 0) return;
  const int64_t nblocks = (n + per_block - 1) / per_block;
  auto [seed, base] = GenOf(gen, dst.device()).ReserveWithSeed(static_cast<uint64_t>(nblocks));
  const int device = dst.device().index;
  cuda::CUfunction fn = cuda::EmbeddedKernel(cuda::RandomKernels(), device,
                                       StrCat("kiln_", kernel, "_", cuda::KernelSuffix(dst.dtype())).c_str(), op);
  void* out = dst.raw_data();
  std::vector<void*> args = {&out, &n, &seed, &base, &a, &b};
  cuda::LaunchGrid(fn, device, nblocks, args);
}

// Runs sample(dst) on a contiguous tensor shaped like self, then writes it into self.
template <typename Sample>
Tensor SampleInto(Tensor self, const Sample& sample) {
  if (self.numel() == 0) return self;
  Tensor dst = self.is_contiguous() ? self : EmptyLike(self);
  sample(dst);
  if (!dst.is_same(self)) ops::copy_(self, dst);
  return self;
}

// --- uniform_ / normal_ --------------------------------------------------------------------

void CheckUniform(double from, double to) {
  KILN_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from, " > to=", to);
  KILN_CHECK(std::isfinite(to - from), "uniform_ expects to-from <= std::numeric_limits<double>::max(), but found "
             "to=", to, " and from=", from, " which result in to-from to exceed the limit");
}

// Complex tensors sample their (real, imag) pairs as reals, as PyTorch's uniform_/normal_ do; normal_
// divides std by sqrt(2) so that E|z - mean|^2 = std^2.
Tensor AsReal(const Tensor& t) { return CallOp<Tensor>(KILN_OP("aten::view_as_real"), t); }

Tensor Uniform_(Tensor self, double from, double to, OptGen gen) {
  CheckUniform(from, to);
  if (IsComplex(self.dtype())) {
    Uniform_(AsReal(self), from, to, gen);
    return self;
  }
  return SampleInto(self, [&](const Tensor& dst) {
    KILN_DISPATCH_FLOATING(dst.dtype(), "check_uniform_bounds", [&] {
      using M = opmath_t<scalar_t>;
      const double range = to - from;
      if (dst.device().is_cuda()) {
        SampleBlocksCUDA(gen, dst, sizeof(scalar_t) == 8 ? 2 : 4, "uniform", "uniform_", from, range);
      } else if constexpr (std::is_same_v<scalar_t, double>) {
        SampleBlocks(gen, dst.data_ptr<double>(), dst.numel(), 2, [&](const uint32_t* w, double* o, int c) {
          for (int k = 0; k < c; ++k) o[k] = from + Uniform53(w[2 * k], w[2 * k + 1]) * range;
        });
      } else {
        SampleBlocks(gen, dst.data_ptr<scalar_t>(), dst.numel(), 4, [&](const uint32_t* w, scalar_t* o, int c) {
          for (int k = 0; k < c; ++k) o[k] = static_cast<scalar_t>(static_cast<M>(from + Uniform24(w[k]) * range));
        });
      }
    });
  });
}
Tensor UniformMeta_(Tensor self, double from, double to, OptGen) {
  CheckUniform(from, to);
  return self;
}

Tensor Normal_(Tensor self, double mean, double std, OptGen gen) {
  KILN_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  if (IsComplex(self.dtype())) {
    Normal_(AsReal(self), mean, std / std::sqrt(2.0), gen);
    return self;
  }
  return SampleInto(self, [&](const Tensor& dst) {
    KILN_DISPATCH_FLOATING(dst.dtype(), self.device().is_cuda() ? "normal_kernel_cuda" : "normal_kernel_cpu", [&] {
      using M = opmath_t<scalar_t>;
      if (dst.device().is_cuda()) {
        SampleBlocksCUDA(gen, dst, sizeof(scalar_t) == 8 ? 2 : 4, "normal", "normal_", mean, std);
      } else if constexpr (std::is_same_v<scalar_t, double>) {
        SampleBlocks(gen, dst.data_ptr<double>(), dst.numel(), 2, [&](const uint32_t* w, double* o, int c) {
          const double u1 = 1.0 - Uniform53(w[0], w[1]), u2 = Uniform53(w[2], w[3]);
          const double r = std::sqrt(-2.0 * std::log(u1));
          const double z[2] = {r * std::cos(kTwoPi * u2), r * std::sin(kTwoPi * u2)};
          for (int k = 0; k < c; ++k) o[k] = mean + std * z[k];
        });
      } else {
        SampleBlocks(gen, dst.data_ptr<scalar_t>(), dst.numel(), 4, [&](const uint32_t* w, scalar_t* o, int c) {
          double z[4];
          for (int p = 0; p < 2; ++p) {
            const double u1 = 1.0 - Uniform24(w[2 * p]), u2 = Uniform24(w[2 * p + 1]);
            const double r = std::sqrt(-2.0 * std::log(u1));
            z[2 * p] = r * std::cos(kTwoPi * u2);
            z[2 * p + 1] = r * std::sin(kTwoPi * u2);
          }
          for (int k = 0; k < c; ++k) o[k] = static_cast<scalar_t>(static_cast<M>(mean + std * z[k]));
        });
      }
    });
  });
}
Tensor NormalMeta_(Tensor self, double, double std, OptGen) {
  KILN_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  return self;
}

// --- bernoulli -----------------------------------------------------------------------------

// self[i] = (u_i < p[i]) for p broadcast to self's shape (p: float64, contiguous, same shape).
Tensor BernoulliFromProbs(Tensor self, const Tensor& p, const OptGen& gen) {
  const double* pp = p.data_ptr<double>();
  return SampleInto(self, [&](const Tensor& dst) {
    KILN_DISPATCH_ALL(dst.dtype(), "bernoulli_tensor_cpu_self_", [&] {
      scalar_t* base = dst.data_ptr<scalar_t>();
      SampleBlocks(gen, base, dst.numel(), 4, [&](const uint32_t* w, scalar_t* o, int c) {
        const double* q = pp + (o - base);
        for (int k = 0; k < c; ++k) o[k] = static_cast<scalar_t>(Uniform24(w[k]) < q[k] ? 1 : 0);
      });
    });
  });
}

void CheckProbsDtype(const Tensor& p) {
  KILN_CHECK(IsFloating(p.dtype()), "bernoulli_: expected p to be a floating point tensor, but got ",
             ScalarTypeDisplayName(p.dtype()));
}

Tensor ProbsLike(const Tensor& self, const Tensor& p) {
  CheckProbsDtype(p);
  Tensor q = ops::contiguous(ops::to_dtype(ops::expand(p, SymList(self->sym_sizes().begin(), self->sym_sizes().end())),
                                           ScalarType::Float64));
  const double* d = q.data_ptr<double>();
  for (int64_t i = 0; i < q.numel(); ++i)
    KILN_CHECK(d[i] >= 0 && d[i] <= 1, "Expected p_in >= 0 && p_in <= 1 to be true, but got false.");
  return q;
}

// self[i] = (u_i < p[i]) on a CUDA device: p (float64, contiguous, self's shape, on self's device) or,
// where it is null, the number p_scalar.
Tensor BernoulliCUDA(Tensor self, const Tensor* p, double p_scalar, const OptGen& gen) {
  const void* probs = p ? p->raw_data() : nullptr;
  return SampleInto(self, [&](const Tensor& dst) {
    KILN_DISPATCH_ALL(dst.dtype(), "bernoulli_tensor_cuda_self_", [&] {
      SampleBlocksCUDA(gen, dst, 4, "bernoulli", "bernoulli_", probs, p_scalar);
    });
  });
}

// p broadcast to a CUDA self's shape as float64 on self's device, checked to be in [0, 1] there (one
// synchronising read of the verdict; PyTorch asserts in the kernel).
Tensor ProbsOnDevice(const Tensor& self, const Tensor& p) {
  CheckProbsDtype(p);
  Tensor q = EmptyTensor(self.sizes(), ScalarType::Float64, self.device());
  ops::copy_(q, ops::expand(p, SymList(self->sym_sizes().begin(), self->sym_sizes().end())));
  Tensor in_range = CallOp<Tensor>(KILN_OP("aten::logical_and"), CallOp<Tensor>(KILN_OP("aten::ge.Scalar"), q, Scalar(0.0)),
                                   CallOp<Tensor>(KILN_OP("aten::le.Scalar"), q, Scalar(1.0)));
  KILN_CHECK(ItemScalar("bernoulli_", CallOp<Tensor>(KILN_OP("aten::all"), in_range)).to_bool(),
             "Expected p_in >= 0 && p_in <= 1 to be true, but got false.");
  return q;
}

Tensor BernoulliTensor_(Tensor self, const Tensor& p, OptGen gen) {
  if (self.numel() == 0) return self;
  if (self.device().is_cuda()) {
    const Tensor q = ProbsOnDevice(self, p);
    return BernoulliCUDA(self, &q, 0.0, gen);
  }
  return BernoulliFromProbs(self, ProbsLike(self, p), gen);
}
Tensor BernoulliTensorMeta_(Tensor self, const Tensor& p, OptGen) {
  CheckProbsDtype(p);
  BroadcastShapes("bernoulli_", self->sym_sizes(), p->sym_sizes());
  return self;
}
Tensor BernoulliFloat_(Tensor self, double p, OptGen gen) {
  KILN_CHECK(p >= 0 && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  if (self.numel() == 0) return self;
  if (self.device().is_cuda()) return BernoulliCUDA(self, nullptr, p, gen);
  Tensor q = ops::full(SymList(self->sym_sizes().begin(), self->sym_sizes().end()), Scalar(p), ScalarType::Float64);
  return BernoulliFromProbs(self, q, gen);
}
Tensor BernoulliFloatMeta_(Tensor self, double p, OptGen) {
  KILN_CHECK(p >= 0 && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  return self;
}
// bernoulli(self): self holds the probabilities; the result has self's dtype.
Tensor Bernoulli(const Tensor& self, OptGen gen) {
  Tensor out = EmptyLike(self);
  return CallOp<Tensor>(KILN_OP("aten::bernoulli_.Tensor"), out, self, gen);
}
Tensor BernoulliP(const Tensor& self, double p, OptGen gen) {
  Tensor out = EmptyLike(self);
  return CallOp<Tensor>(KILN_OP("aten::bernoulli_.float"), out, p, gen);
}

// --- random_ -------------------------------------------------------------------------------

// The largest value random_ draws by default: int max, or 2^digits for floats (every integer
// up to it is exact), 1 for bool.
int64_t RandomMaxInclusive(ScalarType t) {
  switch (t) {
    case ScalarType::Bool: return 1;
    case ScalarType::UInt8: return 255;
    case ScalarType::Int8: return 127;
    case ScalarType::Int16: return 32767;
    case ScalarType::Int32: return 2147483647;
    case ScalarType::Int64: return std::numeric_limits<int64_t>::max();
    case ScalarType::Float16: return int64_t(1) << 11;
    case ScalarType::BFloat16: return int64_t(1) << 8;
    case ScalarType::Float32: return int64_t(1) << 24;
    case ScalarType::Float64: return int64_t(1) << 53;
    default: return 0;
  }
}

// Values from + (bits % range); range == 0 stands for 2^64.
Tensor RandomRange(Tensor self, int64_t from, uint64_t range, const OptGen& gen) {
  return SampleInto(self, [&](const Tensor& dst) {
    KILN_DISPATCH_ALL(dst.dtype(), "random_from_to", [&] {
      if (dst.device().is_cuda()) return SampleBlocksCUDA(gen, dst, 2, "random", "random_", from, range);
      SampleBlocks(gen, dst.data_ptr<scalar_t>(), dst.numel(), 2, [&](const uint32_t* w, scalar_t* o, int c) {
        for (int k = 0; k < c; ++k) {
          const uint64_t bits = Bits64(w[2 * k], w[2 * k + 1]);
          const int64_t v = static_cast<int64_t>(static_cast<uint64_t>(from) + (range ? bits % range : bits));
          if constexpr (std::is_same_v<scalar_t, bool>) o[k] = v != 0;
          else o[k] = static_cast<scalar_t>(static_cast<opmath_t<scalar_t>>(v));
        }
      });
    });
  });
}

void CheckFromTo(int64_t from, int64_t to) {
  KILN_CHECK(from < to, "random_ expects 'from' to be less than 'to', but got from=", from, " >= to=", to);
}
Tensor RandomFromImpl(Tensor self, int64_t from, std::optional<int64_t> to, const OptGen& gen, bool run) {
  if (to) {
    CheckFromTo(from, *to);
    // PyTorch's check_from_to_in_range: randint(5, dtype=bool) or random_(0, 300) on uint8 would wrap.
    if (IsIntegral(self.dtype(), true))
      KILN_CHECK(*to - 1 <= RandomMaxInclusive(self.dtype()), "to - 1 is out of bounds for ",
                 ScalarTypeName(self.dtype()));
    return run ? RandomRange(self, from, static_cast<uint64_t>(*to) - static_cast<uint64_t>(from), gen) : self;
  }
  const int64_t max = RandomMaxInclusive(self.dtype());
  KILN_CHECK(from <= max, "random_ expects 'from' casted to dtype to be less than or equal to 'to_inc' casted to "
             "dtype, but got from=", from, " > to_inc=", max);
  return run ? RandomRange(self, from, static_cast<uint64_t>(max) - static_cast<uint64_t>(from) + 1, gen) : self;
}
Tensor RandomFrom_(Tensor self, int64_t from, std::optional<int64_t> to, OptGen gen) {
  return RandomFromImpl(self, from, to, gen, true);
}
Tensor RandomFromMeta_(Tensor self, int64_t from, std::optional<int64_t> to, OptGen gen) {
  return RandomFromImpl(self, from, to, gen, false);
}
Tensor RandomTo_(Tensor self, int64_t to, OptGen gen) { return RandomFromImpl(self, 0, to, gen, true); }
Tensor RandomToMeta_(Tensor self, int64_t to, OptGen gen) { return RandomFromImpl(self, 0, to, gen, false); }
Tensor Random_(Tensor self, OptGen gen) { return RandomFromImpl(self, 0, std::nullopt, gen, true); }
Tensor RandomMeta_(Tensor self, OptGen gen) { return RandomFromImpl(self, 0, std::nullopt, gen, false); }

// --- factories -----------------------------------------------------------------------------

Tensor EmptyFor(const SymList& size, ScalarType dtype, const OptDevice& device) {
  return ops::empty(size, dtype, device.value_or(Device()));
}
Tensor EmptyLikeFor(const Tensor& self, OptDtype dtype, OptLayout layout, OptDevice device, OptBool pin,
                    OptMemoryFormat mf) {
  return CallOp<Tensor>(KILN_OP("aten::empty_like"), self, dtype, layout, device, pin, mf);
}
Tensor FillUniform(Tensor t, const OptGen& gen) {
  return Fresh(CallOp<Tensor>(KILN_OP("aten::uniform_"), t, 0.0, 1.0, gen));
}
Tensor FillNormal(Tensor t, const OptGen& gen) {
  return Fresh(CallOp<Tensor>(KILN_OP("aten::normal_"), t, 0.0, 1.0, gen));
}
Tensor FillInt(Tensor t, const SymInt& low, const SymInt& high, const OptGen& gen) {
  return Fresh(CallOp<Tensor>(KILN_OP("aten::random_.from"), t, low.expect_int(),
                              std::optional<int64_t>(high.expect_int()), gen));
}

Tensor RandGen(const SymList& size, OptGen gen, OptDtype dtype, OptLayout, OptDevice device, OptBool) {
  return FillUniform(EmptyFor(size, dtype.value_or(GetDefaultDtype()), device), gen);
}
Tensor Rand(const SymList& size, OptDtype dtype, OptLayout layout, OptDevice device, OptBool pin) {
  return RandGen(size, std::nullopt, dtype, layout, device, pin);
}
Tensor RandnGen(const SymList& size, OptGen gen, OptDtype dtype, OptLayout, OptDevice device, OptBool) {
  return FillNormal(EmptyFor(size, dtype.value_or(GetDefaultDtype()), device), gen);
}
Tensor Randn(const SymList& size, OptDtype dtype, OptLayout layout, OptDevice device, OptBool pin) {
  return RandnGen(size, std::nullopt, dtype, layout, device, pin);
}
Tensor RandintLowGen(const SymInt& low, const SymInt& high, const SymList& size, OptGen gen, OptDtype dtype, OptLayout,
                     OptDevice device, OptBool) {
  return FillInt(EmptyFor(size, dtype.value_or(ScalarType::Int64), device), low, high, gen);
}
Tensor RandintLow(const SymInt& low, const SymInt& high, const SymList& size, OptDtype dtype, OptLayout layout,
                  OptDevice device, OptBool pin) {
  return RandintLowGen(low, high, size, std::nullopt, dtype, layout, device, pin);
}
Tensor RandintGen(const SymInt& high, const SymList& size, OptGen gen, OptDtype dtype, OptLayout layout,
                  OptDevice device, OptBool pin) {
  return RandintLowGen(0, high, size, gen, dtype, layout, device, pin);
}
Tensor Randint(const SymInt& high, const SymList& size, OptDtype dtype, OptLayout layout, OptDevice device,
               OptBool pin) {
  return RandintLowGen(0, high, size, std::nullopt, dtype, layout, device, pin);
}

Tensor RandLikeGen(const Tensor& self, OptGen gen, OptDtype dtype, OptLayout layout, OptDevice device, OptBool pin,
                   OptMemoryFormat mf) {
  return FillUniform(EmptyLikeFor(self, dtype, layout, device, pin, mf), gen);
}
Tensor RandLike(const Tensor& self, OptDtype dtype, OptLayout layout, OptDevice device, OptBool pin,
                OptMemoryFormat mf) {
  return RandLikeGen(self, std::nullopt, dtype, layout, device, pin, mf);
}
Tensor RandnLikeGen(const Tensor& self, OptGen gen, OptDtype dtype, OptLayout layout, OptDevice device, OptBool pin,
                    OptMemoryFormat mf) {
  return FillNormal(EmptyLikeFor(self, dtype, layout, device, pin, mf), gen);
}
Tensor RandnLike(const Tensor& self, OptDtype dtype, OptLayout layout, OptDevice device, OptBool pin,
                 OptMemoryFormat mf) {
  return RandnLikeGen(self, std::nullopt, dtype, layout, device, pin, mf);
}
Tensor RandintLikeLowGen(const Tensor& self, const SymInt& low, const SymInt& high, OptGen gen, OptDtype dtype,
                         OptLayout layout, OptDevice device, OptBool pin, OptMemoryFormat mf) {
  return FillInt(EmptyLikeFor(self, dtype, layout, device, pin, mf), low, high, gen);
}
Tensor RandintLikeLow(const Tensor& self, const SymInt& low, const SymInt& high, OptDtype dtype, OptLayout layout,
                      OptDevice device, OptBool pin, OptMemoryFormat mf) {
  return RandintLikeLowGen(self, low, high, std::nullopt, dtype, layout, device, pin, mf);
}
Tensor RandintLikeGen(const Tensor& self, const SymInt& high, OptGen gen, OptDtype dtype, OptLayout layout,
                      OptDevice device, OptBool pin, OptMemoryFormat mf) {
  return RandintLikeLowGen(self, 0, high, gen, dtype, layout, device, pin, mf);
}
Tensor RandintLike(const Tensor& self, const SymInt& high, OptDtype dtype, OptLayout layout, OptDevice device,
                   OptBool pin, OptMemoryFormat mf) {
  return RandintLikeLowGen(self, 0, high, std::nullopt, dtype, layout, device, pin, mf);
}

// Fisher-Yates over 0..n-1; draw i (64 bits) picks the partner of position n-1-i.
Tensor RandpermGen(const SymInt& n_sym, OptGen gen, OptDtype dtype, OptLayout, OptDevice device, OptBool) {
  const int64_t n = n_sym.expect_int();
  KILN_CHECK(n >= 0, "n must be non-negative, got", n);
  const ScalarType dt = dtype.value_or(ScalarType::Int64);
  KILN_CHECK(dt != ScalarType::Bool && n - 1 <= RandomMaxInclusive(dt), "randperm expects n to be representable by "
             "dtype ", ScalarTypeDisplayName(dt), ", but got n=", n);
  Tensor out = EmptyFor({n_sym}, dt, device);
  if (!out->has_storage() || n == 0) return out;
  std::vector<int64_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  std::vector<uint64_t> draws(std::max<int64_t>(n - 1, 0));
  SampleBlocks(gen, draws.data(), static_cast<int64_t>(draws.size()), 2, [](const uint32_t* w, uint64_t* o, int c) {
    for (int k = 0; k < c; ++k) o[k] = Bits64(w[2 * k], w[2 * k + 1]);
  }, out.device());  // drawn on the host, from the output device's generator
  for (int64_t i = n - 1; i > 0; --i) std::swap(perm[i], perm[draws[n - 1 - i] % static_cast<uint64_t>(i + 1)]);
  Tensor p = EmptyTensor(DimVector{n}, ScalarType::Int64, Device());
  std::memcpy(p.raw_data(), perm.data(), n * sizeof(int64_t));
  return ops::copy_(out, p);
}
Tensor Randperm(const SymInt& n, OptDtype dtype, OptLayout layout, OptDevice device, OptBool pin) {
  return RandpermGen(n, std::nullopt, dtype, layout, device, pin);
}

// --- multinomial ---------------------------------------------------------------------------

// Shape and argument checks, in PyTorch's order (the values are the CPU kernel's to check).
TensorMeta MultinomialMeta(const Tensor& self, int64_t n, bool replacement, OptGen) {
  KILN_CHECK(self.dim() == 1 || self.dim() == 2, "prob_dist must be 1 or 2 dim");
  const SymInt categories = self->sym_sizes().back();
  KILN_CHECK(replacement || categories >= n, "cannot sample n_sample > prob_dist.size(-1) samples without "
             "replacement");
  KILN_CHECK(IsFloating(self.dtype()), "multinomial only supports floating-point dtypes for input, got: ",
             ScalarTypeDisplayName(self.dtype()));
  KILN_CHECK(n > 0, "cannot sample n_sample <= 0 samples");
  KILN_CHECK(categories <= (int64_t{1} << 24), "number of categories cannot exceed 2^24");
  SymDimVector sizes(self->sym_sizes().begin(), self->sym_sizes().end() - 1);
  sizes.push_back(n);
  return TensorMeta{sizes, {}, ScalarType::Int64, self.device()};
}

// The CUDA form of Note [multinomial], draw for draw the CPU's (the same uniforms from the
// device's generator, the same keys and order): the checks read back three numbers (the smallest
// and largest probability and the smallest row total; one synchronisation, where PyTorch's kernel
// asserts on the device), so a bad row is reported as on the CPU but rows are not told apart. The
// race is a stable sort of the keys (Note [CUDA sort]); with replacement, running sums (a scan) and
// random.cu's binary search.
Tensor MultinomialCUDA(const Tensor& self, int64_t n, bool replacement, OptGen gen, const Tensor& out) {
  const int64_t cats = self.size(-1), rows = self.dim() == 2 ? self.size(0) : 1;
  const bool race = !replacement || n == 1;
  const Tensor p = ops::reshape(ops::contiguous(ops::to_dtype(self, ScalarType::Float64)), {SymInt(rows), SymInt(cats)});
  const Tensor checks = CopyToDevice(
      ops::stack({CallOp<Tensor>(KILN_OP("aten::min"), p), CallOp<Tensor>(KILN_OP("aten::max"), p),
                  CallOp<Tensor>(KILN_OP("aten::min"), ops::sum(p, ops::IntList{1}))}),
      Device());
  const double lo = checks.data_ptr<double>()[0], hi = checks.data_ptr<double>()[1];
  if (race) {
    KILN_CHECK(lo >= 0 && hi < INFINITY, "probability tensor contains either `inf`, `nan` or element < 0");
  } else {
    KILN_CHECK(lo >= 0, "invalid multinomial distribution (encountering probability entry < 0)");
    KILN_CHECK(hi < INFINITY, "invalid multinomial distribution (encountering probability entry = infinity or NaN)");
  }
  KILN_CHECK(checks.data_ptr<double>()[2] > 0, "invalid multinomial distribution (sum of probabilities <= 0)");
  const int64_t per_row = race ? cats : n;
  Tensor u = EmptyTensor(DimVector{rows, per_row}, ScalarType::Float64, self.device());
  SampleBlocksCUDA(gen, u, 2, "uniform", "multinomial", 0.0, 1.0);  // Uniform53, as SampleBlocks on the CPU
  Tensor o = out;
  if (race) {
    const Tensor e = ops::mul(CallOp<Tensor>(KILN_OP("aten::log1p"), ops::mul(u, Scalar(-1.0))), Scalar(-1.0));
    const Tensor keys = ops::masked_fill(ops::div(e, p), CallOp<Tensor>(KILN_OP("aten::le.Scalar"), p, Scalar(0.0)),
                                         Scalar(INFINITY));  // E_i / p_i; +inf where p_i == 0
    const Tensor first = ops::slice(std::get<1>(ops::sort(keys, 1)), 1, 0, n);
    const DimVector sizes = out.sizes();
    ops::copy_(o, ops::reshape(first, std::vector<SymInt>(sizes.begin(), sizes.end())));
    return out;
  }
  const Tensor cum = ops::cumsum(p, 1);
  const void *cp = cum.raw_data(), *up = u.raw_data();
  void* op = o.raw_data();
  int64_t r = rows, c = cats, k = n;
  std::vector<void*> args = {&cp, &up, &op, &r, &c, &k};
  const int device = self.device().index;
  cuda::LaunchGrid(cuda::EmbeddedKernel(cuda::RandomKernels(), device, "kiln_multinomial_search", "multinomial"), device,
                   rows * n, args);
  return out;
}

// Note [multinomial]: with replacement, each draw is a uniform u scaled by the row's total and
// found by binary search in the row's running sums (a category of probability 0 never owns a
// range). Without replacement (and for one draw, as PyTorch), the exponential-race form of
// sequential sampling: category i gets the key E_i / p_i with E_i ~ Exp(1), and the n smallest
// keys are the draws in order; a category of probability 0 has key +inf, so it comes only after
// every positive one (PyTorch's topk of p / E returns them then too). Rows are independent: the
// counter blocks of row r are a fixed range, so results do not depend on the thread count.
Tensor MultinomialCPU(const Tensor& self, int64_t n, bool replacement, OptGen gen) {
  TensorMeta m = MultinomialMeta(self, n, replacement, gen);
  const int64_t cats = self.size(-1), rows = self.dim() == 2 ? self.size(0) : 1;
  Tensor out = EmptyFromMeta(m);
  if (out.numel() == 0) return out;
  KILN_CHECK(cats > 0, "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity.");
  if (self.device().is_cuda()) return MultinomialCUDA(self, n, replacement, gen, out);
  Tensor p = ops::contiguous(ops::to_dtype(self, ScalarType::Float64));
  const double* pp = p.data_ptr<double>();
  const bool race = !replacement || n == 1;
  for (int64_t r = 0; r < rows; ++r) {  // the checks see every row before any sampling
    double total = 0;
    for (int64_t i = 0; i < cats; ++i) {
      const double v = pp[r * cats + i];
      if (race) {
        KILN_CHECK(v >= 0 && v < INFINITY, "probability tensor contains either `inf`, `nan` or element < 0");
      } else {
        KILN_CHECK(v >= 0, "invalid multinomial distribution (encountering probability entry < 0)");
        KILN_CHECK(std::isfinite(v), "invalid multinomial distribution (encountering probability entry = "
                   "infinity or NaN)");
      }
      total += v;
    }
    KILN_CHECK(total > 0, "invalid multinomial distribution (sum of probabilities <= 0)");
  }
  const int64_t per_row = race ? cats : n;  // uniforms per row
  std::vector<double> u(static_cast<size_t>(rows * per_row));
  SampleBlocks(gen, u.data(), static_cast<int64_t>(u.size()), 2, [](const uint32_t* w, double* o, int c) {
    for (int k = 0; k < c; ++k) o[k] = Uniform53(w[2 * k], w[2 * k + 1]);
  });
  int64_t* o = out.data_ptr<int64_t>();
  ParallelFor(0, rows, 1, [&](int64_t b, int64_t e) {
    std::vector<double> work(static_cast<size_t>(cats));
    std::vector<int64_t> order(static_cast<size_t>(cats));
    for (int64_t r = b; r < e; ++r) {
      const double* row = pp + r * cats;
      const double* ur = u.data() + r * per_row;
      if (race) {
        for (int64_t i = 0; i < cats; ++i)
          work[i] = row[i] > 0 ? -std::log1p(-ur[i]) / row[i] : INFINITY;  // E_i / p_i
        std::iota(order.begin(), order.end(), 0);
        std::partial_sort(order.begin(), order.begin() + n, order.end(),
                          [&](int64_t a, int64_t c) { return work[a] < work[c] || (work[a] == work[c] && a < c); });
        std::copy(order.begin(), order.begin() + n, o + r * n);
      } else {
        std::partial_sum(row, row + cats, work.begin());
        const double total = work[cats - 1];
        for (int64_t k = 0; k < n; ++k) {
          const double x = ur[k] * total;
          int64_t i = std::upper_bound(work.begin(), work.end(), x) - work.begin();
          o[r * n + k] = std::min(i, cats - 1);
        }
      }
    }
  });
  return out;
}

}  // namespace

#define KILN_FACTORY_KWARGS "ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None"
#define KILN_LONG_FACTORY_KWARGS "ScalarType? dtype=long, Layout? layout=None, Device? device=None, bool? pin_memory=None"
#define KILN_LIKE_KWARGS KILN_FACTORY_KWARGS ", MemoryFormat? memory_format=None"

void RegisterRandomOps(Registry& r) {
  const std::initializer_list<Tag> kSeeded = {Tag::nondeterministic_seeded};
  r.Def("uniform_(Tensor(a!) self, float from=0, float to=1, *, Generator? generator=None) -> Tensor(a!)", kSeeded,
        kMethod)
      .CPUAndCUDA<&Uniform_>().Impl<&UniformMeta_>(DispatchKey::Meta).Impl<&UniformMeta_>(DispatchKey::Fake);
  r.Def("normal_(Tensor(a!) self, float mean=0, float std=1, *, Generator? generator=None) -> Tensor(a!)", kSeeded,
        kMethod)
      .CPUAndCUDA<&Normal_>().Impl<&NormalMeta_>(DispatchKey::Meta).Impl<&NormalMeta_>(DispatchKey::Fake);
  r.Def("bernoulli_.Tensor(Tensor(a!) self, Tensor p, *, Generator? generator=None) -> Tensor(a!)", kSeeded, kMethod)
      .CPUAndCUDA<&BernoulliTensor_>().Impl<&BernoulliTensorMeta_>(DispatchKey::Meta)
      .Impl<&BernoulliTensorMeta_>(DispatchKey::Fake);
  r.Def("bernoulli_.float(Tensor(a!) self, float p=0.5, *, Generator? generator=None) -> Tensor(a!)", kSeeded, kMethod)
      .CPUAndCUDA<&BernoulliFloat_>().Impl<&BernoulliFloatMeta_>(DispatchKey::Meta)
      .Impl<&BernoulliFloatMeta_>(DispatchKey::Fake);
  r.Def("multinomial(Tensor self, int num_samples, bool replacement=False, *, Generator? generator=None) -> Tensor",
        kSeeded, kFunctionAndMethod)
      .CPUAndCUDA<&MultinomialCPU>().Meta<&MultinomialMeta>();
  r.Def("bernoulli(Tensor self, *, Generator? generator=None) -> Tensor", kSeeded, kFunctionAndMethod)
      .CompositeExplicit<&Bernoulli>();
  r.Def("bernoulli.p(Tensor self, float p, *, Generator? generator=None) -> Tensor", kSeeded, kFunctionAndMethod)
      .CompositeExplicit<&BernoulliP>();
  r.Def("random_.from(Tensor(a!) self, int from, int? to, *, Generator? generator=None) -> Tensor(a!)", kSeeded,
        kMethod)
      .CPUAndCUDA<&RandomFrom_>().Impl<&RandomFromMeta_>(DispatchKey::Meta)
      .Impl<&RandomFromMeta_>(DispatchKey::Fake);
  r.Def("random_.to(Tensor(a!) self, int to, *, Generator? generator=None) -> Tensor(a!)", kSeeded, kMethod)
      .CPUAndCUDA<&RandomTo_>().Impl<&RandomToMeta_>(DispatchKey::Meta)
      .Impl<&RandomToMeta_>(DispatchKey::Fake);
  r.Def("random_(Tensor(a!) self, *, Generator? generator=None) -> Tensor(a!)", kSeeded, kMethod)
      .CPUAndCUDA<&Random_>().Impl<&RandomMeta_>(DispatchKey::Meta).Impl<&RandomMeta_>(DispatchKey::Fake);

  r.Def("rand(SymInt[] size, *, " KILN_FACTORY_KWARGS ") -> Tensor", kSeeded).CompositeExplicit<&Rand>();
  r.Def("rand.generator(SymInt[] size, *, Generator? generator, " KILN_FACTORY_KWARGS ") -> Tensor", kSeeded)
      .CompositeExplicit<&RandGen>();
  r.Def("randn(SymInt[] size, *, " KILN_FACTORY_KWARGS ") -> Tensor", kSeeded).CompositeExplicit<&Randn>();
  r.Def("randn.generator(SymInt[] size, *, Generator? generator, " KILN_FACTORY_KWARGS ") -> Tensor", kSeeded)
      .CompositeExplicit<&RandnGen>();
  r.Def("randint(SymInt high, SymInt[] size, *, " KILN_LONG_FACTORY_KWARGS ") -> Tensor", kSeeded)
      .CompositeExplicit<&Randint>();
  r.Def("randint.generator(SymInt high, SymInt[] size, *, Generator? generator, " KILN_LONG_FACTORY_KWARGS
        ") -> Tensor", kSeeded)
      .CompositeExplicit<&RandintGen>();
  r.Def("randint.low(SymInt low, SymInt high, SymInt[] size, *, " KILN_LONG_FACTORY_KWARGS ") -> Tensor", kSeeded)
      .CompositeExplicit<&RandintLow>();
  r.Def("randint.low_generator(SymInt low, SymInt high, SymInt[] size, *, Generator? generator, "
        KILN_LONG_FACTORY_KWARGS ") -> Tensor", kSeeded)
      .CompositeExplicit<&RandintLowGen>();
  r.Def("randperm(SymInt n, *, " KILN_LONG_FACTORY_KWARGS ") -> Tensor", kSeeded).AllBackends<&Randperm>();
  r.Def("randperm.generator(SymInt n, *, Generator? generator, " KILN_LONG_FACTORY_KWARGS ") -> Tensor", kSeeded)
      .AllBackends<&RandpermGen>();

  r.Def("rand_like(Tensor self, *, " KILN_LIKE_KWARGS ") -> Tensor", kSeeded).CompositeExplicit<&RandLike>();
  r.Def("rand_like.generator(Tensor self, *, Generator? generator, " KILN_LIKE_KWARGS ") -> Tensor", kSeeded)
      .CompositeExplicit<&RandLikeGen>();
  r.Def("randn_like(Tensor self, *, " KILN_LIKE_KWARGS ") -> Tensor", kSeeded).CompositeExplicit<&RandnLike>();
  r.Def("randn_like.generator(Tensor self, *, Generator? generator, " KILN_LIKE_KWARGS ") -> Tensor", kSeeded)
      .CompositeExplicit<&RandnLikeGen>();
  r.Def("randint_like(Tensor self, SymInt high, *, " KILN_LIKE_KWARGS ") -> Tensor", kSeeded)
      .CompositeExplicit<&RandintLike>();
  r.Def("randint_like.generator(Tensor self, SymInt high, *, Generator? generator, " KILN_LIKE_KWARGS ") -> Tensor",
        kSeeded)
      .CompositeExplicit<&RandintLikeGen>();
  r.Def("randint_like.low_dtype(Tensor self, SymInt low, SymInt high, *, " KILN_LIKE_KWARGS ") -> Tensor", kSeeded)
      .CompositeExplicit<&RandintLikeLow>();
  r.Def("randint_like.low_generator_dtype(Tensor self, SymInt low, SymInt high, *, Generator? generator, "
        KILN_LIKE_KWARGS ") -> Tensor", kSeeded)
      .CompositeExplicit<&RandintLikeLowGen>();
}

#undef KILN_LIKE_KWARGS
#undef KILN_LONG_FACTORY_KWARGS
#undef KILN_FACTORY_KWARGS

}  // namespace kiln
