// codegen/codegen_test.cc: kernel IR -> LLVM -> machine code, checked against C++ references:
// pointwise ops on several layouts and every dtype, reductions (NaN and ties included), a
// reduction feeding a pointwise loop (RMSNorm + SiLU), tails, the cache, and invalid IR.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>

#include <unistd.h>

#include "codegen/float_math.h"
#include "codegen/llvm_codegen.h"
#include "runtime/error.h"
#include "runtime/thread_pool.h"

namespace kiln::codegen {
namespace {

using E = ExprPtr;
E Ld(int b, int64_t off, std::vector<int64_t> outer, int64_t inner) { return Expr::Load(b, Index{off, outer, inner}); }
E Op(OpCode op, E a) { return Expr::Op(op, {a}); }
E Op(OpCode op, E a, E b) { return Expr::Op(op, {a, b}); }
E F(double v) { return Expr::Const(v, DType::F32); }
Stmt Store(int b, Index ix, E e) {
  Stmt s;
  s.kind = Stmt::Kind::kStore; s.buffer = b; s.index = std::move(ix); s.expr = e;
  return s;
}
Stmt Reduce(int acc, ReduceKind k, E e) {
  Stmt s;
  s.kind = Stmt::Kind::kReduce; s.acc_id = acc; s.reduce = k; s.expr = e;
  return s;
}
Stmt Welford(int acc, E e) {
  Stmt s;
  s.kind = Stmt::Kind::kWelford; s.acc_id = acc; s.expr = e;
  return s;
}

std::vector<float> Random(int64_t n, int seed, float lo = -2, float hi = 2) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

void RunK(const CompiledKernel& k, std::vector<void*> ptrs) {
  k.Run(reinterpret_cast<char**>(ptrs.data()));
}

class CodegenTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char dir[] = "/tmp/kiln_codegen_test_cache_XXXXXX";  // a fresh disk cache per run
    ASSERT_NE(::mkdtemp(dir), nullptr);
    setenv("KILN_INDUCTOR_CACHE_DIR", dir, 1);
  }
};

// relu(a * b + c) on [M, N]: a transposed (stored [N, M]), b broadcast along rows, c contiguous.
TEST_F(CodegenTest, PointwiseLayouts) {
  for (auto [M, N] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 5}, {7, 33}, {64, 100}, {513, 257}}) {
    Kernel k;
    k.name = "cpp_fused_add_mul_relu_0";
    k.buffers = {{"in_ptr0", DType::F32}, {"in_ptr1", DType::F32}, {"in_ptr2", DType::F32}, {"out_ptr0", DType::F32}};
    k.outer = {M};
    E e = Op(OpCode::kRelu, Op(OpCode::kAdd, Op(OpCode::kMul, Ld(0, 0, {1}, M), Ld(1, 0, {0}, 1)), Ld(2, 0, {N}, 1)));
    k.loops = {Loop{N, {Store(3, Index{0, {N}, 1}, e)}}};
    auto ck = Compile(k);
    auto a = Random(M * N, 1), b = Random(N, 2), c = Random(M * N, 3);
    std::vector<float> out(M * N, -7);
    RunK(*ck, {a.data(), b.data(), c.data(), out.data()});
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        float ref = std::max(a[j * M + i] * b[j] + c[i * N + j], 0.0f);
        ASSERT_NEAR(out[i * N + j], ref, 1e-6 * std::max(1.0f, std::fabs(ref))) << M << "x" << N << " at " << i << "," << j;
      }
  }
}

TEST_F(CodegenTest, VectorisesWithTail) {
  Kernel k;
  k.name = "cpp_fused_add_1";
  k.buffers = {{"in_ptr0", DType::F32}, {"out_ptr0", DType::F32}};
  k.outer = {};
  k.loops = {Loop{1001, {Store(1, Index{0, {}, 1}, Op(OpCode::kAdd, Ld(0, 0, {}, 1), F(1)))}}};
  auto ck = Compile(k);
  std::string ir = ck->llvm_ir();
  EXPECT_TRUE(ir.find("x float>") != std::string::npos) << ir;
  for (int64_t n : {1, 7, 15, 17, 31, 33, 1001}) {
    k.loops[0].extent = n;
    auto ck2 = Compile(k);
    std::vector<float> a = Random(n, 4), out(n + 1, 99);
    RunK(*ck2, {a.data(), out.data()});
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], a[i] + 1) << n;
    EXPECT_EQ(out[n], 99) << "wrote past the end, n=" << n;
  }
}

// x + y (then max with 0) stored back in every dtype.
template <typename T>
void CheckDType(DType dt, std::vector<T> a, std::vector<T> b, std::vector<T> ref) {
  Kernel k;
  k.name = std::string("cpp_fused_add_relu_") + DTypeName(dt);
  k.buffers = {{"in_ptr0", dt}, {"in_ptr1", dt}, {"out_ptr0", dt}};
  int64_t n = a.size();
  k.outer = {n};
  E sum = Op(OpCode::kAdd, Ld(0, 0, {1}, 0), Ld(1, 0, {1}, 0));
  if (dt != DType::Bool) sum = Op(OpCode::kRelu, sum);
  k.loops = {Loop{1, {Store(2, Index{0, {1}, 0}, sum)}}};
  auto ck = Compile(k);
  std::vector<T> out(n);
  RunK(*ck, {a.data(), b.data(), out.data()});
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(std::memcmp(&out[i], &ref[i], sizeof(T)), 0) << DTypeName(dt) << " at " << i;
}

uint16_t ToBF16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

TEST_F(CodegenTest, EveryDType) {
  CheckDType<float>(DType::F32, {1.5f, -3, 2}, {1, 1, 0.25f}, {2.5f, 0, 2.25f});
  CheckDType<double>(DType::F64, {1.5, -3, 1e300}, {1e-300, 1, 1e300}, {1.5, 0, 2e300});
  CheckDType<int64_t>(DType::I64, {int64_t(1) << 40, -5, 3}, {1, 2, 4}, {(int64_t(1) << 40) + 1, 0, 7});
  CheckDType<int32_t>(DType::I32, {2147483647, -5, 3}, {1, 2, 4}, {std::numeric_limits<int32_t>::min(), 0, 7});  // computed in i64, wraps on store
  CheckDType<uint8_t>(DType::Bool, {0, 1, 0, 1}, {0, 0, 1, 1}, {0, 1, 1, 1});
  // bf16: 1 + 2^-8 rounds to even (1), 1 + 3*2^-8 rounds up.
  CheckDType<uint16_t>(DType::BF16, {ToBF16(1.0f), ToBF16(1.0f), ToBF16(-2.0f)},
                       {ToBF16(0.00390625f), ToBF16(0.01171875f), ToBF16(1.0f)},
                       {ToBF16(1.0f), ToBF16(1.015625f), ToBF16(0.0f)});
}

// fmod (C's), hypot, copysign and signbit on floats; the bitwise ops and shifts on int64, with
// PyTorch's out-of-range shifts; bitwise_not on bool and int64.
TEST_F(CodegenTest, FmodHypotCopysignBitwiseShifts) {
  auto run_f = [](OpCode op, std::vector<float> a, std::vector<float> b, DType out_dt) {
    Kernel k;
    k.name = std::string("cpp_") + OpName(op);
    k.buffers = {{"a", DType::F32}, {"b", DType::F32}, {"out", out_dt}};
    int64_t n = a.size();
    E e = op == OpCode::kSignbit ? Op(op, Ld(0, 0, {}, 1)) : Op(op, Ld(0, 0, {}, 1), Ld(1, 0, {}, 1));
    k.loops = {Loop{n, {Store(2, Index{0, {}, 1}, e)}}};
    std::vector<float> out(n);
    RunK(*Compile(k), {a.data(), b.data(), out.data()});
    return out;
  };
  std::vector<float> a = {5.5f, -5.5f, 3.0f, -0.0f, 1e30f}, b = {2.0f, 2.0f, -4.0f, 1.0f, 1e30f};
  auto fm = run_f(OpCode::kFmod, a, b, DType::F32);
  auto hy = run_f(OpCode::kHypot, a, b, DType::F32);
  auto cs = run_f(OpCode::kCopysign, a, b, DType::F32);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(fm[i], std::fmod(a[i], b[i])) << i;
    EXPECT_EQ(hy[i], std::hypot(a[i], b[i])) << i;  // no overflow at 1e30
    EXPECT_EQ(cs[i], std::copysign(a[i], b[i])) << i;
  }
  Kernel sb;
  sb.name = "cpp_signbit";
  sb.buffers = {{"a", DType::F32}, {"out", DType::Bool}};
  sb.loops = {Loop{4, {Store(1, Index{0, {}, 1}, Op(OpCode::kSignbit, Ld(0, 0, {}, 1)))}}};
  std::vector<float> sa = {-0.0f, 0.0f, -std::numeric_limits<float>::quiet_NaN(), -2.0f};
  std::vector<uint8_t> sbo(4);
  RunK(*Compile(sb), {sa.data(), sbo.data()});
  EXPECT_EQ(sbo, (std::vector<uint8_t>{1, 0, 1, 1}));

  std::vector<int64_t> x = {12, -12, 7, -1, 5, 1}, y = {3, 2, 64, 70, -1, 63};
  for (OpCode op : {OpCode::kBitAnd, OpCode::kBitOr, OpCode::kBitXor, OpCode::kShl, OpCode::kShr}) {
    Kernel k;
    k.name = std::string("cpp_") + OpName(op);
    k.buffers = {{"a", DType::I64}, {"b", DType::I64}, {"out", DType::I64}};
    k.loops = {Loop{6, {Store(2, Index{0, {}, 1}, Op(op, Ld(0, 0, {}, 1), Ld(1, 0, {}, 1)))}}};
    std::vector<int64_t> out(6);
    RunK(*Compile(k), {x.data(), y.data(), out.data()});
    for (int i = 0; i < 6; ++i) {
      int64_t ref = 0;
      bool in_range = y[i] >= 0 && y[i] < 64;
      switch (op) {
        case OpCode::kBitAnd: ref = x[i] & y[i]; break;
        case OpCode::kBitOr: ref = x[i] | y[i]; break;
        case OpCode::kBitXor: ref = x[i] ^ y[i]; break;
        case OpCode::kShl: ref = in_range ? int64_t(uint64_t(x[i]) << y[i]) : 0; break;
        default: ref = in_range ? x[i] >> y[i] : (x[i] < 0 ? -1 : 0); break;
      }
      EXPECT_EQ(out[i], ref) << OpName(op) << " " << x[i] << ", " << y[i];
    }
  }
  Kernel bn;
  bn.name = "cpp_bitwise_not";
  bn.buffers = {{"a", DType::I64}, {"b", DType::Bool}, {"out", DType::I64}, {"out_b", DType::Bool}};
  bn.loops = {Loop{2, {Store(2, Index{0, {}, 1}, Op(OpCode::kBitNot, Ld(0, 0, {}, 1))),
                       Store(3, Index{0, {}, 1}, Op(OpCode::kBitNot, Ld(1, 0, {}, 1)))}}};
  std::vector<int64_t> ni = {0, -6}, no(2);
  std::vector<uint8_t> nb = {0, 1}, nbo(2);
  RunK(*Compile(bn), {ni.data(), nb.data(), no.data(), nbo.data()});
  EXPECT_EQ(no, (std::vector<int64_t>{-1, 5}));
  EXPECT_EQ(nbo, (std::vector<uint8_t>{1, 0}));
}

TEST_F(CodegenTest, CastsAndIndex) {
  // out[i] = (f32)(i64)(x * 10) + index(i) ; out2[i] = x > 0 (bool)
  Kernel k;
  k.name = "cpp_fused_cast_2";
  k.buffers = {{"in_ptr0", DType::F32}, {"out_ptr0", DType::F32}, {"out_ptr1", DType::Bool}};
  k.outer = {5};
  E x = Ld(0, 0, {1}, 0);
  k.loops = {Loop{1, {Store(1, Index{0, {1}, 0}, Op(OpCode::kAdd, Expr::Cast(Op(OpCode::kMul, x, F(10)), DType::I64),
                                                     Expr::LoopIndex(0))),
                      Store(2, Index{0, {1}, 0}, Op(OpCode::kGt, x, F(0)))}}};
  auto ck = Compile(k);
  std::vector<float> a = {0.19f, -0.25f, 1.0f, 0.0f, 2.57f}, out(5);
  std::vector<uint8_t> pos(5);
  RunK(*ck, {a.data(), out.data(), pos.data()});
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(out[i], static_cast<float>(static_cast<int64_t>(a[i] * 10) + i));
    EXPECT_EQ(pos[i], a[i] > 0 ? 1 : 0);
  }
}

TEST_F(CodegenTest, UnaryMath) {
  struct Case { OpCode op; double (*ref)(double); float lo, hi; };
  std::vector<Case> cases = {
      {OpCode::kExp, [](double x) { return std::exp(x); }, -80, 80},
      {OpCode::kLog, [](double x) { return std::log(x); }, 1e-6f, 1e6f},
      {OpCode::kLog1p, [](double x) { return std::log1p(x); }, -0.9f, 10},
      {OpCode::kExpm1, [](double x) { return std::expm1(x); }, -10, 10},
      {OpCode::kSqrt, [](double x) { return std::sqrt(x); }, 0, 100},
      {OpCode::kRsqrt, [](double x) { return 1 / std::sqrt(x); }, 1e-3f, 100},
      {OpCode::kSin, [](double x) { return std::sin(x); }, -10, 10},
      {OpCode::kCos, [](double x) { return std::cos(x); }, -10, 10},
      {OpCode::kTanh, [](double x) { return std::tanh(x); }, -10, 10},
      {OpCode::kSigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }, -30, 30},
      {OpCode::kErf, [](double x) { return std::erf(x); }, -4, 4},
      // Abramowitz and Stegun's erf inside (Note [Gelu's erf]): 1.5e-7 absolute
      {OpCode::kGelu, [](double x) { return x * 0.5 * (1 + std::erf(x * M_SQRT1_2)); }, -8, 8},
      {OpCode::kNormalCdf, [](double x) { return 0.5 * (1 + std::erf(x * M_SQRT1_2)); }, -8, 8},
      {OpCode::kFloor, [](double x) { return std::floor(x); }, -10, 10},
      {OpCode::kCeil, [](double x) { return std::ceil(x); }, -10, 10},
      {OpCode::kRound, [](double x) { return std::nearbyint(x); }, -10, 10},
      {OpCode::kTrunc, [](double x) { return std::trunc(x); }, -10, 10},
      {OpCode::kAbs, [](double x) { return std::fabs(x); }, -10, 10},
      {OpCode::kReciprocal, [](double x) { return 1 / x; }, 0.1f, 10},
      {OpCode::kTan, [](double x) { return std::tan(x); }, -1.5f, 1.5f},
      {OpCode::kAsin, [](double x) { return std::asin(x); }, -1, 1},
      {OpCode::kAcos, [](double x) { return std::acos(x); }, -1, 1},
      {OpCode::kAtan, [](double x) { return std::atan(x); }, -10, 10},
      {OpCode::kSinh, [](double x) { return std::sinh(x); }, -10, 10},
      {OpCode::kCosh, [](double x) { return std::cosh(x); }, -10, 10},
      {OpCode::kAsinh, [](double x) { return std::asinh(x); }, -10, 10},
      {OpCode::kAcosh, [](double x) { return std::acosh(x); }, 1, 10},
      {OpCode::kAtanh, [](double x) { return std::atanh(x); }, -0.99f, 0.99f},
      {OpCode::kErfc, [](double x) { return std::erfc(x); }, -4, 4},
      {OpCode::kLgamma, [](double x) { return std::lgamma(x); }, 0.1f, 20},
      {OpCode::kExp2, [](double x) { return std::exp2(x); }, -20, 20},
      {OpCode::kLog2, [](double x) { return std::log2(x); }, 1e-3f, 1e3f},
      {OpCode::kLog10, [](double x) { return std::log10(x); }, 1e-3f, 1e3f},
  };
  const int64_t n = 1003;
  for (const Case& c : cases) {
    Kernel k;
    k.name = std::string("cpp_fused_") + OpName(c.op) + "_3";
    k.buffers = {{"in_ptr0", DType::F32}, {"out_ptr0", DType::F32}};
    k.loops = {Loop{n, {Store(1, Index{0, {}, 1}, Op(c.op, Ld(0, 0, {}, 1)))}}};
    auto ck = Compile(k);
    auto x = Random(n, 5, c.lo, c.hi);
    x[0] = c.lo;
    x[1] = 2.5f;  // round half to even
    x[2] = 1e-5f * (c.lo < 0 ? 1 : c.hi);
    std::vector<float> out(n);
    RunK(*ck, {x.data(), out.data()});
    for (int64_t i = 0; i < n; ++i) {
      double ref = c.ref(x[i]);
      if (std::isnan(ref) && std::isnan(out[i])) continue;  // asin(2.5)
      ASSERT_NEAR(out[i], ref, 4e-6 * std::max(1.0, std::fabs(ref)) + 1e-37) << OpName(c.op) << "(" << x[i] << ")";
    }
  }
}

// exp and sigmoid at their edges, inline (the default) and through libmvec, over a loop long
// enough to be interleaved (Note [Vector width and interleaving]) with a remainder.
TEST_F(CodegenTest, ExpAndSigmoidEdges) {
  const int64_t n = 2003;
  for (bool inline_exp : {true, false}) {
    CodegenOptions o;
    o.inline_exp = inline_exp;
    for (OpCode op : {OpCode::kExp, OpCode::kSigmoid}) {
      Kernel k;
      k.name = std::string("cpp_fused_") + OpName(op) + (inline_exp ? "_inline_3" : "_libmvec_3");
      k.buffers = {{"in_ptr0", DType::F32}, {"out_ptr0", DType::F32}};
      k.loops = {Loop{n, {Store(1, Index{0, {}, 1}, Op(op, Ld(0, 0, {}, 1)))}}};
      auto ck = Compile(k, o);
      auto x = Random(n, 15, -100, 90);
      x[0] = std::numeric_limits<float>::infinity();
      x[1] = -x[0];
      x[2] = std::nanf("");
      x[3] = 88.7f;
      x[4] = -87.0f;
      x[5] = -88.5f;
      x[6] = 87.5f;
      x[7] = 20.0f;  // sigmoid rounds to exactly 1
      x[8] = 1e30f;  // beyond the clamps
      x[9] = -1e30f;
      x[10] = 17.3287f;  // just above 25 ln 2: 1 / (1 + e^-x) rounds to 1
      x[11] = 17.3286f;
      std::vector<float> out(n);
      RunK(*ck, {x.data(), out.data()});
      const bool is_exp = op == OpCode::kExp;
      EXPECT_EQ(out[0], is_exp ? x[0] : 1.0f) << OpName(op);
      EXPECT_EQ(out[1], 0.0f) << OpName(op);
      EXPECT_TRUE(std::isnan(out[2])) << OpName(op);
      if (!is_exp) {
        EXPECT_EQ(out[7], 1.0f);
        EXPECT_EQ(out[8], 1.0f);
        EXPECT_EQ(out[9], 0.0f);
        EXPECT_EQ(out[10], 1.0f);
      }
      for (int64_t i = 3; i < n; ++i) {
        const double e = std::exp(double(is_exp ? x[i] : -x[i]));
        const double ref = is_exp ? e : 1 / (1 + e);
        if (ref > 3.4028234e38) { EXPECT_TRUE(std::isinf(out[i])) << x[i]; continue; }
        // sigmoid is 0 where e^-x overflows (x < -88.72), as eager's and PyTorch's: within 1.2e-38
        ASSERT_NEAR(out[i], ref, 3e-7 * ref + (is_exp ? 1e-44 : 1.2e-38)) << OpName(op) << "(" << x[i] << ")";
      }
    }
  }
}

// Note [One float math]: Inductor's f32 exp, sigmoid, erf, gelu, normal_cdf and gelu_backward
// are float_math.inc's algorithms as IR; eager's element functions instantiate the same ones for
// one float. Every 251st bit pattern (all signs, exponents, subnormals, infinities, NaNs) gives
// the same bits from both, over a vectorised, interleaved loop with a remainder.
TEST_F(CodegenTest, FloatMathMatchesTheScalarAlgorithmsBitForBit) {
  std::vector<float> x;
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 251) {
    const auto u = static_cast<uint32_t>(bits);
    float v;
    std::memcpy(&v, &u, 4);
    x.push_back(v);
  }
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> g(n);
  for (int64_t i = 0; i < n; ++i) g[i] = static_cast<float>(i % 7) * 0.75f - 2.0f;
  fmath::ScalarF32 s;
  struct Case {
    OpCode op;
    float (*ref)(const fmath::ScalarF32&, float, float);
  };
  const Case cases[] = {
      {OpCode::kExp, [](const fmath::ScalarF32& b, float, float v) { return fmath::Exp(b, v); }},
      {OpCode::kSigmoid, [](const fmath::ScalarF32& b, float, float v) { return fmath::Sigmoid(b, v); }},
      {OpCode::kErf, [](const fmath::ScalarF32& b, float, float v) { return fmath::Erf(b, v); }},
      {OpCode::kGelu, [](const fmath::ScalarF32& b, float, float v) { return fmath::Gelu(b, v); }},
      {OpCode::kNormalCdf, [](const fmath::ScalarF32& b, float, float v) { return fmath::NormalCdf(b, v); }},
      {OpCode::kGeluBackward, [](const fmath::ScalarF32& b, float gv, float v) { return fmath::GeluBackward(b, gv, v); }},
  };
  for (const Case& c : cases) {
    Kernel k;
    k.name = std::string("cpp_fused_float_math_") + OpName(c.op);
    k.buffers = {{"in_ptr0", DType::F32}, {"in_ptr1", DType::F32}, {"out_ptr0", DType::F32}};
    const E v = Ld(1, 0, {}, 1);
    const E e = OpArity(c.op) == 2 ? Op(c.op, Ld(0, 0, {}, 1), v) : Op(c.op, v);
    k.loops = {Loop{n, {Store(2, Index{0, {}, 1}, e)}}};
    auto ck = Compile(k);
    std::vector<float> out(n);
    RunK(*ck, {g.data(), x.data(), out.data()});
    int64_t differ = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float want = c.ref(s, g[i], x[i]);
      if (std::isnan(want) && std::isnan(out[i])) continue;
      uint32_t a, b;
      std::memcpy(&a, &out[i], 4);
      std::memcpy(&b, &want, 4);
      if (a != b && differ++ < 3) ADD_FAILURE() << OpName(c.op) << "(" << x[i] << "): " << out[i] << " vs " << want;
    }
    EXPECT_EQ(differ, 0) << OpName(c.op);
  }
}

// f32 erf (Note [Inline erff]) against libm's double erf: a dense sweep through both branches
// and the clamp, tiny and subnormal inputs, and the specials.
TEST_F(CodegenTest, ErfWithinTwoUlp) {
  std::vector<float> x;
  for (int i = -400000; i <= 400000; ++i) x.push_back(i * 1.25e-5f);  // [-5, 5]
  for (float v = 1e-38f; v < 5; v *= 1.001f) { x.push_back(v); x.push_back(-v); }
  const float specials[] = {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::nanf(""), 0.0f, -0.0f, 0.921875f, 4.0f, 1e-45f};
  x.insert(x.begin(), std::begin(specials), std::end(specials));
  const int64_t n = static_cast<int64_t>(x.size());
  Kernel k;
  k.name = "cpp_fused_erf_6";
  k.buffers = {{"in_ptr0", DType::F32}, {"out_ptr0", DType::F32}};
  k.loops = {Loop{n, {Store(1, Index{0, {}, 1}, Op(OpCode::kErf, Ld(0, 0, {}, 1)))}}};
  auto ck = Compile(k);
  std::vector<float> out(n);
  RunK(*ck, {x.data(), out.data()});
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -1.0f);
  EXPECT_TRUE(std::isnan(out[2]));
  EXPECT_EQ(out[3], 0.0f);
  EXPECT_TRUE(std::signbit(out[4])) << "erf(-0) is -0";
  EXPECT_EQ(out[6], 1.0f);
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) continue;
    const double ref = std::erf(double(x[i]));
    const float r = static_cast<float>(std::fabs(ref));
    const double ulp = r == 0 ? std::numeric_limits<float>::denorm_min()
                              : std::nextafter(r, std::numeric_limits<float>::infinity()) - r;
    const double err = std::fabs(out[i] - ref) / ulp;
    worst = std::max(worst, err);
    ASSERT_LE(err, 2.0) << "erf(" << x[i] << ") = " << out[i] << ", expected " << ref;
  }
  EXPECT_GT(worst, 0.0);
  EXPECT_EQ(ck->llvm_ir().find("erff"), std::string::npos) << "no libm call";
}

// Row reductions of a [M, N] f32 matrix (N odd for a tail), one kernel per kind.
TEST_F(CodegenTest, Reductions) {
  const int64_t M = 37, N = 1001;
  auto x = Random(M * N, 6);
  x[5 * N + 17] = 3.0f;  // tie for max at 17 and 400: first wins
  x[5 * N + 400] = 3.0f;
  struct Case { ReduceKind kind; bool arg; };
  for (Case c : {Case{ReduceKind::kSum, false}, Case{ReduceKind::kMax, false}, Case{ReduceKind::kMin, false},
                 Case{ReduceKind::kProd, false}, Case{ReduceKind::kArgmax, true}, Case{ReduceKind::kArgmin, true}}) {
    Kernel k;
    k.name = std::string("cpp_fused_") + ReduceName(c.kind) + "_4";
    DType out_t = c.arg ? DType::I64 : DType::F32;
    k.buffers = {{"in_ptr0", DType::F32}, {"out_ptr0", out_t}};
    k.outer = {M};
    E v = Ld(0, 0, {N}, 1);
    if (c.kind == ReduceKind::kProd) v = Op(OpCode::kAdd, F(1), Op(OpCode::kMul, v, F(0.001)));
    k.loops = {Loop{N, {Reduce(0, c.kind, v)}}, Loop{1, {Store(1, Index{0, {1}, 0}, Expr::Acc(0))}}};
    auto ck = Compile(k);
    std::vector<float> out(M);
    std::vector<int64_t> idx(M);
    RunK(*ck, {x.data(), c.arg ? static_cast<void*>(idx.data()) : out.data()});
    for (int64_t i = 0; i < M; ++i) {
      const float* row = &x[i * N];
      double acc = c.kind == ReduceKind::kProd ? 1 : 0;
      float best = row[0];
      int64_t at = 0;
      for (int64_t j = 0; j < N; ++j) {
        if (c.kind == ReduceKind::kSum) acc += row[j];
        if (c.kind == ReduceKind::kProd) acc *= 1 + row[j] * 0.001f;
        bool better = (c.kind == ReduceKind::kMax || c.kind == ReduceKind::kArgmax) ? row[j] > best : row[j] < best;
        if (better) { best = row[j]; at = j; }
      }
      switch (c.kind) {
        case ReduceKind::kSum: EXPECT_NEAR(out[i], acc, 1e-4 * N); break;
        case ReduceKind::kProd: EXPECT_NEAR(out[i], acc, 1e-4 * std::fabs(acc)); break;
        case ReduceKind::kMax: case ReduceKind::kMin: EXPECT_EQ(out[i], best); break;
        default: EXPECT_EQ(idx[i], at) << ReduceName(c.kind) << " row " << i;
      }
    }
    if (c.kind == ReduceKind::kArgmax) {
      EXPECT_EQ(idx[5], 17);
    }
  }
}

// Which of two equal values a max/min keeps shows in the sign of a zero: kMax/kMin keep the first
// (amax), kMaxLast/kMinLast the last (PyTorch's max()); a NaN wins wherever it is.
TEST_F(CodegenTest, ExtremumTies) {
  const float nan = std::nanf("");
  const std::vector<std::vector<float>> rows = {{0.0f, -0.0f}, {-0.0f, 0.0f}, {-0.0f, 0.0f, -0.0f}, {nan, 0.0f},
                                                {0.0f, nan}, {-1.0f, -0.0f, 0.0f}};
  for (ReduceKind kind : {ReduceKind::kMax, ReduceKind::kMin, ReduceKind::kMaxLast, ReduceKind::kMinLast}) {
    const bool last = kind == ReduceKind::kMaxLast || kind == ReduceKind::kMinLast;
    const bool mx = kind == ReduceKind::kMax || kind == ReduceKind::kMaxLast;
    for (const auto& row : rows) {
      const int64_t n = static_cast<int64_t>(row.size());
      Kernel k;
      k.name = std::string("cpp_fused_tie_") + ReduceName(kind) + "_" + std::to_string(n);
      k.buffers = {{"in_ptr0", DType::F32}, {"out_ptr0", DType::F32}};
      k.outer = {1};
      k.loops = {Loop{n, {Reduce(0, kind, Ld(0, 0, {0}, 1))}}, Loop{1, {Store(1, Index{0, {0}, 0}, Expr::Acc(0))}}};
      auto ck = Compile(k);
      float out = 0;
      std::vector<float> in = row;
      RunK(*ck, {in.data(), &out});
      float best = row[0];
      for (float v : row) {
        if (std::isnan(best)) break;
        if (std::isnan(v) || (mx ? v > best : v < best) || (last && v == best)) best = v;
      }
      if (std::isnan(best)) {
        EXPECT_TRUE(std::isnan(out)) << ReduceName(kind);
      } else {
        EXPECT_EQ(out, best) << ReduceName(kind);
        EXPECT_EQ(std::signbit(out), std::signbit(best)) << ReduceName(kind) << " of " << n << " values";
      }
    }
  }
}

TEST_F(CodegenTest, NaNInMaxAndArgmax) {
  const int64_t N = 41;
  std::vector<float> x = Random(3 * N, 7);
  float nan = std::numeric_limits<float>::quiet_NaN();
  x[0 * N + 0] = nan;   // NaN first
  x[1 * N + 20] = nan;  // NaN in the middle
  x[1 * N + 30] = nan;
  Kernel k;
  k.name = "cpp_fused_max_argmax_min_5";
  k.buffers = {{"in_ptr0", DType::F32}, {"out_ptr0", DType::F32}, {"out_ptr1", DType::I64}, {"out_ptr2", DType::F32}};
  k.outer = {3};
  E v = Ld(0, 0, {N}, 1);
  k.loops = {Loop{N, {Reduce(0, ReduceKind::kMax, v), Reduce(1, ReduceKind::kArgmax, v), Reduce(2, ReduceKind::kMin, v)}},
             Loop{1, {Store(1, Index{0, {1}, 0}, Expr::Acc(0)), Store(2, Index{0, {1}, 0}, Expr::Acc(1)),
                      Store(3, Index{0, {1}, 0}, Expr::Acc(2))}}};
  auto ck = Compile(k);
  std::vector<float> mx(3), mn(3);
  std::vector<int64_t> am(3);
  RunK(*ck, {x.data(), mx.data(), am.data(), mn.data()});
  EXPECT_TRUE(std::isnan(mx[0]) && std::isnan(mn[0]));
  EXPECT_TRUE(std::isnan(mx[1]) && std::isnan(mn[1]));
  EXPECT_FALSE(std::isnan(mx[2]) || std::isnan(mn[2]));
  EXPECT_EQ(am[0], 0);
  EXPECT_EQ(am[1], 20);
  // pointwise max/min propagate NaN too
  Kernel p;
  p.name = "cpp_fused_maximum_6";
  p.buffers = {{"in_ptr0", DType::F32}, {"out_ptr0", DType::F32}};
  p.loops = {Loop{N, {Store(1, Index{0, {}, 1}, Op(OpCode::kMax, Ld(0, 0, {}, 1), F(0.5)))}}};
  std::vector<float> out(N);
  RunK(*Compile(p), {x.data(), out.data()});
  EXPECT_TRUE(std::isnan(out[0]));
  for (int j = 1; j < N; ++j) EXPECT_EQ(out[j], std::max(x[j], 0.5f));
}

TEST_F(CodegenTest, WelfordMeanVar) {
  const int64_t M = 9, N = 777;
  auto x = Random(M * N, 8, 100, 101);  // large mean: the naive formula would lose digits
  Kernel k;
  k.name = "cpp_fused_var_mean_7";
  k.buffers = {{"in_ptr0", DType::F32}, {"out_ptr0", DType::F32}, {"out_ptr1", DType::F32}};
  k.outer = {M};
  k.loops = {Loop{N, {Welford(0, Ld(0, 0, {N}, 1))}},
             Loop{1, {Store(1, Index{0, {1}, 0}, Expr::Acc(0)),
                      Store(2, Index{0, {1}, 0}, Op(OpCode::kDiv, Expr::Acc(1), Expr::Acc(2)))}}};
  auto ck = Compile(k);
  std::vector<float> mean(M), var(M);
  RunK(*ck, {x.data(), mean.data(), var.data()});
  for (int64_t i = 0; i < M; ++i) {
    double m = 0, s = 0;
    for (int64_t j = 0; j < N; ++j) m += x[i * N + j];
    m /= N;
    for (int64_t j = 0; j < N; ++j) s += (x[i * N + j] - m) * (x[i * N + j] - m);
    EXPECT_NEAR(mean[i], m, 1e-4);
    EXPECT_NEAR(var[i], s / N, 1e-4);
  }
}

// RMSNorm followed by SiLU: one kernel, a sum reduction then a pointwise loop reading it.
Kernel RmsNormSilu(int64_t M, int64_t N) {
  Kernel k;
  k.name = "cpp_fused_add_mean_mul_pow_rsqrt_silu_8";
  k.buffers = {{"in_ptr0", DType::F32}, {"in_ptr1", DType::F32}, {"out_ptr0", DType::F32}};
  k.outer = {M};
  E x = Ld(0, 0, {N}, 1);
  E inv = Op(OpCode::kRsqrt, Op(OpCode::kAdd, Op(OpCode::kDiv, Expr::Acc(0), F(static_cast<double>(N))), F(1e-6)));
  E y = Op(OpCode::kMul, Op(OpCode::kMul, x, inv), Ld(1, 0, {0}, 1));
  E silu = Op(OpCode::kMul, y, Op(OpCode::kSigmoid, y));
  k.loops = {Loop{N, {Reduce(0, ReduceKind::kSum, Op(OpCode::kMul, x, x))}}, Loop{N, {Store(2, Index{0, {N}, 1}, silu)}}};
  return k;
}

TEST_F(CodegenTest, RmsNormSilu) {
  // 1100 and 4096: long enough rows to prefetch the next one (Note [Prefetching the next row]),
  // 1100 with a tail past the last whole chunk.
  for (auto [M, N] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 17}, {130, 1000}, {7, 1100}, {4, 4096}}) {
    auto ck = Compile(RmsNormSilu(M, N));
    auto x = Random(M * N, 9), w = Random(N, 10);
    std::vector<float> out(M * N);
    RunK(*ck, {x.data(), w.data(), out.data()});
    for (int64_t i = 0; i < M; ++i) {
      double ss = 0;
      for (int64_t j = 0; j < N; ++j) ss += double(x[i * N + j]) * x[i * N + j];
      double inv = 1 / std::sqrt(ss / N + 1e-6);
      for (int64_t j = 0; j < N; ++j) {
        double y = x[i * N + j] * inv * w[j];
        double ref = y / (1 + std::exp(-y));
        ASSERT_NEAR(out[i * N + j], ref, 1e-5 * std::max(1.0, std::fabs(ref))) << M << "x" << N;
      }
    }
  }
  std::string ir = Compile(RmsNormSilu(130, 1000))->llvm_ir();
  // the sum of squares vectorises, contracted into fused multiply-adds (reassociation without
  // no-signed-zeros: Reassoc in llvm_emit.cc)
  EXPECT_NE(ir.find("fadd reassoc contract <"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("nsz"), std::string::npos) << ir;
  EXPECT_NE(ir.find("fmul contract <"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("llvm.prefetch"), std::string::npos) << "rows under 1024 are not prefetched";
  ir = Compile(RmsNormSilu(7, 1100))->llvm_ir();
  EXPECT_NE(ir.find("call void @llvm.prefetch"), std::string::npos) << ir;
  EXPECT_NE(ir.find("store <"), std::string::npos) << "the chunked loop should still vectorise";
}

// Note [Which loops unroll] (llvm_optimize.cc): a second outer loop stays a loop (its 16 rows were
// unrolled, and each copy of the row loop vectorised on its own), and a sum over rows of 64 is
// vectorised (it was unrolled first into one chain of 64 scalar adds).
int CountOf(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

int CountLabels(const std::string& ir, const std::string& prefix) {
  int n = 0;
  for (size_t at = ir.find("\n" + prefix); at != std::string::npos; at = ir.find("\n" + prefix, at + 1)) {
    size_t end = ir.find('\n', at + 1);
    std::string line = ir.substr(at + 1, end - at - 1);
    n += line.find(':') != std::string::npos && line.find(' ') > line.find(':');
  }
  return n;
}

TEST_F(CodegenTest, OuterLoopsStayRolledAndRowLoopsVectorise) {
  Kernel k;
  k.name = "cpp_fused_mul_sub_0";
  k.buffers = {{"in_ptr0", DType::F32}, {"in_ptr1", DType::F32}, {"in_ptr2", DType::F32}, {"out_ptr0", DType::F32}};
  k.outer = {8, 16};
  E e = Op(OpCode::kMul, Ld(0, 0, {1024, 64}, 1), Op(OpCode::kSub, Ld(1, 0, {1024, 64}, 1), Ld(2, 0, {0, 1}, 0)));
  k.loops = {Loop{64, {Store(3, Index{0, {1024, 64}, 1}, e)}}};
  auto ck = Compile(k);
  std::string ir = ck->llvm_ir();
  // one row's vector stores (the row loop may be unrolled whole; the 16 rows must not be)
  EXPECT_GE(CountOf(ir, "store <"), 1) << ir;
  EXPECT_LE(CountOf(ir, "store <"), 8) << ir;
  auto a = Random(8 * 1024, 20), b = Random(8 * 1024, 21), c = Random(16, 22);
  std::vector<float> out(8 * 1024);
  RunK(*ck, {a.data(), b.data(), c.data(), out.data()});
  for (int64_t i = 0; i < 8 * 1024; ++i) ASSERT_EQ(out[i], a[i] * (b[i] - c[(i / 64) % 16])) << i;

  Kernel sum;
  sum.name = "cpp_fused_sum_0";
  sum.buffers = {{"in_ptr0", DType::F32}, {"out_ptr0", DType::F32}};
  sum.outer = {100};
  sum.loops = {Loop{64, {Reduce(0, ReduceKind::kSum, Ld(0, 0, {64}, 1))}},
               Loop{1, {Store(1, Index{0, {1}, 0}, Expr::Acc(0))}}};
  ck = Compile(sum);
  ir = ck->llvm_ir();
  EXPECT_NE(ir.find("fadd reassoc <"), std::string::npos) << ir;
  auto x = Random(100 * 64, 23);
  std::vector<float> rows(100);
  RunK(*ck, {x.data(), rows.data()});
  for (int64_t i = 0; i < 100; ++i) {
    double ref = 0;
    for (int64_t j = 0; j < 64; ++j) ref += x[i * 64 + j];
    ASSERT_NEAR(rows[i], ref, 1e-5 * 64) << i;
  }
}

// Note [Alias scopes]: each buffer its own scope, so the row loop of a kernel with several
// inputs (batch norm's normalisation: per-channel broadcasts) vectorises without a run-time
// overlap test per row; BufferExtents says which buffers are written (callers check overlaps).
TEST_F(CodegenTest, BuffersHaveTheirOwnAliasScopes) {
  Kernel k;
  k.name = "cpp_fused_add_mul_sub_0";
  k.buffers = {{"in_ptr0", DType::F32}, {"in_ptr1", DType::F32}, {"in_ptr2", DType::F32}, {"out_ptr0", DType::F32}};
  k.outer = {4, 8};
  E e = Op(OpCode::kAdd, Op(OpCode::kMul, Op(OpCode::kSub, Ld(0, 0, {512, 64}, 1), Ld(1, 0, {0, 1}, 0)),
                            Ld(2, 0, {0, 1}, 0)), F(1.0));
  k.loops = {Loop{64, {Store(3, Index{0, {512, 64}, 1}, e)}}};
  auto ck = Compile(k);
  std::string ir = ck->llvm_ir();
  EXPECT_GE(CountOf(ir, "store <"), 1) << ir;
  EXPECT_EQ(ir.find("found.conflict"), std::string::npos) << "no run-time overlap test: " << ir;
  EXPECT_NE(ir.find("!alias.scope"), std::string::npos) << ir;
  EXPECT_NE(ir.find("!noalias"), std::string::npos) << ir;
  const std::vector<Extent>& ext = ck->extents();
  ASSERT_EQ(ext.size(), 4u);
  EXPECT_FALSE(ext[0].written);
  EXPECT_FALSE(ext[1].written);
  EXPECT_TRUE(ext[3].written);
  EXPECT_EQ(ext[3].min, 0);
  EXPECT_EQ(ext[3].max, 4 * 512 - 1);
  EXPECT_EQ(ext[1].max, 7);
  auto x = Random(4 * 512, 30), m = Random(8, 31), w = Random(8, 32);
  std::vector<float> out(4 * 512);
  RunK(*ck, {x.data(), m.data(), w.data(), out.data()});
  for (int64_t i = 0; i < 4 * 512; ++i) {
    int64_t c = (i / 64) % 8;
    ASSERT_NEAR(out[i], (x[i] - m[c]) * w[c] + 1.0f, 1e-6) << i;  // the C++ compiler may fuse the multiply-add
  }
}

// x^2 is a multiply (no pow call), exact for every float.
TEST_F(CodegenTest, SquareIsAMultiply) {
  const int64_t n = 1000;
  Kernel k;
  k.name = "cpp_fused_pow_5";
  k.buffers = {{"in_ptr0", DType::F32}, {"out_ptr0", DType::F32}};
  k.loops = {Loop{n, {Store(1, Index{0, {}, 1}, Op(OpCode::kPow, Ld(0, 0, {}, 1), F(2.0)))}}};
  auto ck = Compile(k);
  auto x = Random(n, 16, -1e19, 1e19);
  x[0] = std::numeric_limits<float>::infinity();
  x[1] = std::nanf("");
  x[2] = -0.0f;
  std::vector<float> out(n);
  RunK(*ck, {x.data(), out.data()});
  for (int64_t i = 0; i < n; ++i) {
    // x * x, rounded once: what pow(x, 2) is. Not std::pow, which GCC folds to x * x at -O2 but
    // at -O0 (the asan build) calls powf, whose result may be one ulp away.
    float ref = x[i] * x[i];
    if (std::isnan(ref)) EXPECT_TRUE(std::isnan(out[i]));
    else EXPECT_EQ(out[i], ref) << x[i];
  }
  EXPECT_EQ(ck->llvm_ir().find("llvm.pow"), std::string::npos);
}

TEST_F(CodegenTest, ParallelOuterDim) {
  int old = GetNumThreads();
  SetNumThreads(2);
  // N = 1100: each thread's last row prefetches a row it does not own (or past the buffer).
  for (auto [M, N] : std::vector<std::pair<int64_t, int64_t>>{{4096, 64}, {64, 1100}}) {
    auto ck = Compile(RmsNormSilu(M, N));
    auto x = Random(M * N, 11), w = Random(N, 12);
    std::vector<float> par(M * N), ser(M * N);
    RunK(*ck, {x.data(), w.data(), par.data()});
    std::vector<void*> ptrs = {x.data(), w.data(), ser.data()};
    ck->fn()(reinterpret_cast<char**>(ptrs.data()), 0, M);
    EXPECT_EQ(par, ser) << M << "x" << N;
  }
  SetNumThreads(old);
}

TEST_F(CodegenTest, CacheHits) {
  Kernel k = RmsNormSilu(5, 123);
  k.name = "cpp_fused_cache_probe_9";
  CacheStats s0 = GetCacheStats();
  auto a = Compile(k);
  CacheStats s1 = GetCacheStats();
  EXPECT_EQ(s1.compiled, s0.compiled + 1);
  auto b = Compile(k);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(GetCacheStats().memory_hits, s1.memory_hits + 1);
  ClearMemoryCache();
  auto c = Compile(k);
  CacheStats s2 = GetCacheStats();
  EXPECT_EQ(s2.disk_hits, s1.disk_hits + 1);
  EXPECT_EQ(s2.compiled, s1.compiled);
  EXPECT_TRUE(c->from_cache());
  auto x = Random(5 * 123, 13), w = Random(123, 14);
  std::vector<float> o1(5 * 123), o2(5 * 123);
  RunK(*a, {x.data(), w.data(), o1.data()});
  RunK(*c, {x.data(), w.data(), o2.data()});
  EXPECT_EQ(o1, o2);
  EXPECT_EQ(a->hash(), HashKernel(k));
  EXPECT_EQ(HashKernel(k).size(), 32u);
  EXPECT_NE(c->llvm_ir().find("define"), std::string::npos);  // regenerated on demand
}

// Note [Kernels keyed by body]: the same body under another name is a memory hit that runs the
// first one's code under its own name.
TEST_F(CodegenTest, SameBodyOtherNameCompilesOnce) {
  Kernel first = RmsNormSilu(6, 131);
  first.name = "cpp_fused_layer_3";
  Kernel repeat = first;
  repeat.name = "cpp_fused_layer_17";
  CacheStats s0 = GetCacheStats();
  auto a = Compile(first);
  auto b = Compile(repeat);
  CacheStats s1 = GetCacheStats();
  EXPECT_EQ(s1.compiled + s1.disk_hits, s0.compiled + s0.disk_hits + 1);
  EXPECT_EQ(s1.memory_hits, s0.memory_hits + 1);
  EXPECT_EQ(a->name(), "cpp_fused_layer_3");
  EXPECT_EQ(b->name(), "cpp_fused_layer_17");
  EXPECT_EQ(a->fn(), b->fn());
  EXPECT_EQ(b->hash(), HashKernel(repeat));
  EXPECT_NE(a->hash(), b->hash());  // HashKernel names the kernel (the listing's first line)
  EXPECT_NE(b->code().find("void cpp_fused_layer_17("), std::string::npos);
  Kernel other = first;
  other.outer = {7};  // another body: compiled
  auto c = Compile(other);
  EXPECT_NE(c->fn(), a->fn());
  auto x = Random(7 * 131, 21), w = Random(131, 22);
  std::vector<float> o1(6 * 131), o2(6 * 131), o3(7 * 131);
  RunK(*a, {x.data(), w.data(), o1.data()});
  RunK(*b, {x.data(), w.data(), o2.data()});
  RunK(*c, {x.data(), w.data(), o3.data()});
  EXPECT_EQ(o1, o2);
  EXPECT_EQ(std::vector<float>(o3.begin(), o3.begin() + 6 * 131), o1);
}

// CompileMany on several threads: each distinct body compiles once, every kernel keeps its name,
// results are those of kernels compiled one at a time, and an invalid kernel's error is rethrown
// after the others compiled.
TEST_F(CodegenTest, CompileManyInParallel) {
  std::vector<Kernel> kernels;
  for (int layer = 0; layer < 12; ++layer) {
    Kernel k = RmsNormSilu(3 + layer % 4, 211);  // four bodies, three times each
    k.name = "cpp_fused_block_" + std::to_string(layer);
    kernels.push_back(k);
  }
  CacheStats s0 = GetCacheStats();
  auto compiled = CompileMany(kernels, 4);
  CacheStats s1 = GetCacheStats();
  EXPECT_EQ(s1.compiled + s1.disk_hits, s0.compiled + s0.disk_hits + 4);
  EXPECT_EQ(s1.memory_hits, s0.memory_hits + 8);
  ASSERT_EQ(compiled.size(), kernels.size());
  auto x = Random(6 * 211, 23), w = Random(211, 24);
  for (size_t i = 0; i < kernels.size(); ++i) {
    EXPECT_EQ(compiled[i]->name(), kernels[i].name);
    EXPECT_EQ(compiled[i]->fn(), compiled[i % 4]->fn());
    const int64_t rows = kernels[i].outer[0];
    std::vector<float> got(rows * 211), want(rows * 211);
    RunK(*compiled[i], {x.data(), w.data(), got.data()});
    RunK(*Compile(kernels[i], CodegenOptions{.use_cache = false}), {x.data(), w.data(), want.data()});
    EXPECT_EQ(got, want) << kernels[i].name;
  }
  EXPECT_TRUE(CompileMany({}, 4).empty());
  std::vector<Kernel> with_bad = {RmsNormSilu(2, 97), RmsNormSilu(3, 97), RmsNormSilu(4, 97)};
  with_bad[1].loops[1].stmts[0].buffer = 7;
  CacheStats s2 = GetCacheStats();
  EXPECT_THROW(CompileMany(with_bad, 2), ValueError);
  CacheStats s3 = GetCacheStats();
  EXPECT_EQ(s3.compiled + s3.disk_hits, s2.compiled + s2.disk_hits + 2);  // the valid two compiled
}

TEST_F(CodegenTest, PrinterAndHash) {
  Kernel k = RmsNormSilu(4, 8);
  std::string code = PrintKernel(k);
  EXPECT_NE(code.find("void cpp_fused_add_mean_mul_pow_rsqrt_silu_8(float* in_ptr0, float* in_ptr1, float* out_ptr0)"),
            std::string::npos) << code;
  EXPECT_NE(code.find("acc0 = sum(acc0, (in_ptr0[8*i0 + r] * in_ptr0[8*i0 + r]));"), std::string::npos) << code;
  Kernel k2 = RmsNormSilu(4, 9);
  EXPECT_NE(HashKernel(k), HashKernel(k2));
  EXPECT_EQ(HashKernel(k), HashKernel(RmsNormSilu(4, 8)));
}

TEST_F(CodegenTest, InvalidIR) {
  Kernel k = RmsNormSilu(4, 8);
  k.loops[0].stmts[0].expr = Expr::Acc(0);  // read before any loop reduced it
  EXPECT_THROW(Compile(k), ValueError);
  Kernel k2 = RmsNormSilu(4, 8);
  k2.loops[1].stmts[0].buffer = 7;
  EXPECT_THROW(Compile(k2), ValueError);
  Kernel k3 = RmsNormSilu(4, 8);
  k3.loops[1].stmts[0].index.outer_strides = {};
  EXPECT_THROW(Compile(k3), ValueError);
  Kernel k4 = RmsNormSilu(4, 8);
  k4.name = "bad name";
  EXPECT_THROW(Compile(k4), ValueError);
}

TEST_F(CodegenTest, IntegerDivisionNeverTraps) {
  Kernel k;
  k.name = "cpp_fused_floordiv_mod_10";
  k.buffers = {{"in_ptr0", DType::I64}, {"in_ptr1", DType::I64}, {"out_ptr0", DType::I64}, {"out_ptr1", DType::I64}};
  k.outer = {6};
  E a = Ld(0, 0, {1}, 0), b = Ld(1, 0, {1}, 0);
  k.loops = {Loop{1, {Store(2, Index{0, {1}, 0}, Op(OpCode::kFloorDiv, a, b)),
                      Store(3, Index{0, {1}, 0}, Op(OpCode::kMod, a, b))}}};
  std::vector<int64_t> x = {7, -7, 7, -7, 5, std::numeric_limits<int64_t>::min()}, y = {2, 2, -2, -2, 0, -1};
  std::vector<int64_t> q(6), r(6);
  RunK(*Compile(k), {x.data(), y.data(), q.data(), r.data()});
  EXPECT_EQ(q, (std::vector<int64_t>{3, -4, -4, 3, 0, std::numeric_limits<int64_t>::min()}));
  EXPECT_EQ(r, (std::vector<int64_t>{1, 1, -1, -1, 0, 0}));
}

}  // namespace
}  // namespace kiln::codegen
