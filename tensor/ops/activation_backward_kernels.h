// tensor/ops/activation_backward_kernels.h: the activations' backward ops' table, element
// functions and CPU loops (activation_backward.cc), shared with the files that compile the loops
// (activation_backward_kernels_*.cc).
//
// As Note [Unary kernels in several files] (unary_kernels.h): each op's loop is instantiated per
// numeric dtype, per instruction set and per fast path, which made activation_backward.cc one of
// the slowest files to build (91 s here, -O3, two jobs). The loops are declared here and
// instantiated in activation_backward_kernels_a.cc and activation_backward_kernels_b.cc (extern
// templates keep activation_backward.cc from instantiating them again).
#pragma once

#include <cmath>
#include <limits>
#include <type_traits>

#include "tensor/ops/common.h"
#include "tensor/ops/scalar_t_math.h"
#include "tensor/vec_avx512.h"
#include "tensor/vec_math.h"

namespace kiln::activation_backward {

enum BwOp : int {
  kThresholdBw, kGeluBw, kGeluTanhBw, kSigmoidBw, kTanhBw, kSiluBw, kLeakyReluBw, kHardtanhBw, kEluBw,
  kEluResultBw, kSoftplusBw, kHardsigmoidBw, kHardswishBw, kMishBw, kLogitBw, kNumBwOps,
};

struct BwSpec {
  const char* op;      // the aten name, for messages
  const char* kernel;  // PyTorch's kernel name in its "not implemented for" message
  bool integral;       // integer dtypes allowed (threshold_backward)
};

inline constexpr BwSpec kBw[] = {
    {"threshold_backward", "threshold_backward", true},
    {"gelu_backward", "GeluBackwardKernelImpl", false},
    {"gelu_backward", "GeluBackwardKernelImpl", false},
    {"sigmoid_backward", "sigmoid_backward_cpu", false},
    {"tanh_backward", "tanh_backward_cpu", false},
    {"silu_backward", "silu_backward_cpu", false},
    {"leaky_relu_backward", "leaky_relu_backward_cpu", false},
    {"hardtanh_backward", "hardshrink_backward_cpu", false},
    {"elu_backward", "elu_backward_cpu", false},
    {"elu_backward", "elu_backward_cpu", false},
    {"softplus_backward", "softplus_backward_cpu", false},
    {"hardsigmoid_backward", "hardsigmoid_backward", false},
    {"hardswish_backward", "hardswish_backward_cpu", false},
    {"mish_backward", "mish_backward_cpu", false},
    {"logit_backward", "logit_backward_cpu", false},
};

// The Scalar arguments, as doubles, in schema order.
struct BwParams {
  double a = 0, b = 0, c = 0;
};

// d(loss)/dx given g = d(loss)/dy and x (the input, or the output for sigmoid/tanh/elu-on-result).
template <typename M>
[[gnu::always_inline]] inline M ApplyBw(int op, M g, M x, const BwParams& p) {
  if constexpr (std::is_floating_point_v<M>) {
    switch (op) {
      case kThresholdBw: return x <= M(p.a) ? M(0) : g;
      case kGeluBw: {
        if constexpr (std::is_same_v<M, float>) return GeluBackwardF(g, x);  // one exp for both
        const M cdf = NormalCdf(x);
        const M pdf = Exp(M(-0.5) * x * x) * M(M_2_SQRTPI * M_SQRT1_2 * 0.5);  // 1 / sqrt(2 pi)
        return g * (cdf + x * pdf);
      }
      case kGeluTanhBw: {
        const M beta = M(M_SQRT2 * M_2_SQRTPI * 0.5), kappa = M(0.044715);
        const M x2 = x * x;
        const M t = Tanh(beta * (x + kappa * x2 * x));
        const M left = M(0.5) * x, right = M(1) + t;
        const M dleft = M(0.5) * right;
        const M dright = left * (M(1) - t * t) * beta * (M(1) + M(3) * kappa * x2);
        return g * (dleft + dright);
      }
      case kSigmoidBw: return g * (M(1) - x) * x;
      case kTanhBw: return g * (M(1) - x * x);
      case kSiluBw: {
        const M s = M(1) / (M(1) + Exp(-x));
        return g * s * (M(1) + x * (M(1) - s));
      }
      case kLeakyReluBw: return x > M(0) ? g : g * M(p.a);
      case kHardtanhBw: return x <= M(p.a) || x >= M(p.b) ? M(0) : g;
      case kEluBw:  // p = (alpha * scale, scale, input_scale); x is the input
        return x <= M(0) ? g * M(p.c) * M(p.a) * std::exp(x * M(p.c)) : g * M(p.b);
      case kEluResultBw:  // x is the result
        return x <= M(0) ? g * M(p.c) * (x + M(p.a)) : g * M(p.b);
      case kSoftplusBw: {
        const M z = std::exp(x * M(p.a));
        return x * M(p.a) > M(p.b) ? g : g * z / (z + M(1));
      }
      case kHardsigmoidBw: return x > M(-3) && x < M(3) ? g * M(1.0f / 6.0f) : M(0);  // PyTorch's float 1/6
      case kHardswishBw:  // PyTorch's kernel: 0 at x = -3, g at x = 3
        if (x <= M(-3)) return M(0);
        return x < M(3) ? g * (x / M(3) + M(0.5)) : g;
      case kMishBw: {
        const M s = M(1) / (M(1) + std::exp(-x));
        const M t = std::tanh(std::log1p(std::exp(x)));
        return g * (t + x * s * (M(1) - t * t));
      }
      case kLogitBw: {
        // p.c < 0: no eps (NaN outside [0, 1]); else zero outside [lo, hi] = [eps, 1 - eps] (in p.a, p.b).
        const bool outside = p.c < 0 ? (x < M(0) || x > M(1)) : (x < M(p.a) || x > M(p.b));
        if (outside) return p.c < 0 ? std::numeric_limits<M>::quiet_NaN() : M(0);
        if (x == M(0) || x == M(1)) return g * std::numeric_limits<M>::infinity();
        return g / (x * (M(1) - x));
      }
    }
  } else {
    if (op == kThresholdBw) return x <= static_cast<M>(p.a) ? M(0) : g;
  }
  return g;
}

// PyTorch's vectorised lambdas where they differ from its scalar ones (ApplyBw's) at NaN (Note
// [PyTorch's two lambdas]): each tests x the other way round, so a NaN takes the other branch.
template <typename M>
[[gnu::always_inline]] inline M ApplyBwVectorized(int op, M g, M x, const BwParams& p) {
  switch (op) {
    case kHardtanhBw: return x > M(p.a) && x < M(p.b) ? g : M(0);
    case kEluBw: return x > M(0) ? g * M(p.b) : g * M(p.c) * M(p.a) * std::exp(x * M(p.c));
    case kEluResultBw: return x > M(0) ? g * M(p.b) : g * M(p.c) * (x + M(p.a));
    case kHardswishBw:
      if (x <= M(-3)) return M(0);
      return x >= M(3) ? g : g * (x / M(3) + M(0.5));
    case kLogitBw:  // with eps (p.c >= 0): zero unless lo <= x <= hi, NaN included; without, one behaviour
      if (p.c >= 0) return x >= M(p.a) && x <= M(p.b) ? g / (x * (M(1) - x)) : M(0);
      break;
  }
  return ApplyBw<M>(op, g, x, p);
}

// The ops that take ApplyBwVectorized on PyTorch's vectorised blocks (floating types).
template <int kOp, typename C>
constexpr bool kTwoLambdas = std::is_floating_point_v<opmath_t<C>> &&
    (kOp == kHardtanhBw || kOp == kEluBw || kOp == kEluResultBw || kOp == kHardswishBw || kOp == kLogitBw);

template <int kOp>
void RunBw(const ElementwiseIter& iter, ScalarType dtype, const BwParams& p) {
  KILN_DISPATCH_NUMERIC(dtype, kBw[kOp].kernel, [&] {
    using C = scalar_t;
    using M = opmath_t<C>;
    BwParams q = p;
    // Bounds compared with x are PyTorch's Scalars converted to the tensor's dtype.
    auto round = [](double v) { return static_cast<double>(static_cast<M>(static_cast<C>(static_cast<M>(v)))); };
    if constexpr (kOp == kThresholdBw || kOp == kHardtanhBw) q.a = round(p.a), q.b = round(p.b);
    if constexpr (kOp == kHardtanhBw && std::is_same_v<C, BFloat16>) {
      q.a = static_cast<float>(p.a), q.b = static_cast<float>(p.b);  // its bfloat16 kernel: float bounds
    }
    if constexpr (kOp == kLogitBw) {
      if (p.a >= 0) q.a = round(p.a), q.b = round(1.0 - q.a);
      q.c = p.a;
    }
    auto scalar_f = [p = q](C g, C x) -> C {
      return static_cast<C>(ApplyBw<M>(kOp, static_cast<M>(g), static_cast<M>(x), p));
    };
    if constexpr (kTwoLambdas<kOp, C>) {
      // e.g. hardtanh's vectorised lambda keeps g where min < x < max, its scalar one zeroes it
      // where x <= min or x >= max: a NaN input's gradient passes in one and not in the other
      // (fuzz seed 211, program 5436)
      auto vec_f = [p = q](C g, C x) -> C {
        return static_cast<C>(ApplyBwVectorized<M>(kOp, static_cast<M>(g), static_cast<M>(x), p));
      };
      CpuKernelTwoLambdas<C, C, C>(iter, vec_f, scalar_f,
                                   kOp == kHardtanhBw ? kTorchVectorBytes : TorchAvx512VectorBytes());
    } else if constexpr (kOp == kGeluBw && std::is_same_v<C, float>) {
      CpuKernelVec<float, float, float>(iter, scalar_f, avx512::GeluBackwardRun);
    } else {
      CpuKernel<C, C, C>(iter, scalar_f);
    }
  });
}

// The ops whose loops each activation_backward_kernels_*.cc compiles (every op in one list).
#define KILN_ACTIVATION_BW_OPS_A(X) \
  X(kThresholdBw) X(kGeluBw) X(kGeluTanhBw) X(kSigmoidBw) X(kTanhBw) X(kSiluBw) X(kLeakyReluBw)
#define KILN_ACTIVATION_BW_OPS_B(X) \
  X(kHardtanhBw) X(kEluBw) X(kEluResultBw) X(kSoftplusBw) X(kHardsigmoidBw) X(kHardswishBw) X(kMishBw) X(kLogitBw)
#define KILN_ACTIVATION_BW_DECLARE(op) \
  extern template void RunBw<op>(const ElementwiseIter&, ScalarType, const BwParams&);
#define KILN_ACTIVATION_BW_INSTANTIATE(op) template void RunBw<op>(const ElementwiseIter&, ScalarType, const BwParams&);
#ifndef KILN_ACTIVATION_BW_KERNELS_TU
KILN_ACTIVATION_BW_OPS_A(KILN_ACTIVATION_BW_DECLARE)
KILN_ACTIVATION_BW_OPS_B(KILN_ACTIVATION_BW_DECLARE)
#endif

}  // namespace kiln::activation_backward
