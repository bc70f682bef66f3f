// tensor/ops/scalar_t_math.h: arithmetic as PyTorch's CPU kernels write it on scalar_t, and
// their split between a vectorised and a scalar lambda.
//
// A kernel written `diff * diff` on scalar_t computes each operation in float for float16 and
// bfloat16 and rounds it back to the 16-bit type (c10::Half's and c10::BFloat16's operators and
// their Vectorized<> ops round every step), where kiln's usual kernels compute the whole formula
// in opmath and round once. Kernels that must match such a PyTorch kernel bit for bit round each
// step with RoundTo<C>.
#pragma once

#include <cstring>
#include <type_traits>
#include <utility>

#include "tensor/loops.h"
#include "tensor/scalar_type.h"

namespace kiln {

// v rounded to C and back to its opmath type (v itself for float, double and integers).
template <typename C>
inline opmath_t<C> RoundTo(opmath_t<C> v) {
  if constexpr (std::is_same_v<C, Half> || std::is_same_v<C, BFloat16>) {
    return static_cast<opmath_t<C>>(static_cast<C>(v));
  } else {
    return v;
  }
}

// Note [PyTorch's two lambdas]: cpu_kernel_vec runs its Vectorized<> lambda on a row whose
// operands are all contiguous, or contiguous but for one broadcast input (stride 0), in blocks of
// two vectors, and its scalar lambda on the rest of such a row and on every other row. Where the
// two differ (smooth_l1_backward divides x by beta first in one, last in the other; hardtanh's
// backward tests a NaN input one way round in one and the other way in the other), a kernel that
// must match PyTorch takes both: CpuKernelTwoLambdas calls vec_f where PyTorch's vectorised lambda
// runs and scalar_f elsewhere (rows split across threads aside). The vectors are AVX2's (32 bytes)
// for most kernels, even on AVX-512 machines: only the kernels PyTorch registers for AVX-512
// (ALSO_REGISTER_AVX512_DISPATCH: elu's, hardswish's and logit's backward among them) run 64-byte
// vectors there (TorchAvx512VectorBytes). Measured with 2.13 on both kinds of machine.
constexpr int64_t kTorchVectorBytes = 32;  // AVX2's, which most of PyTorch's CPU kernels run

inline int64_t TorchAvx512VectorBytes() {
  static const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  return avx512 ? 64 : kTorchVectorBytes;
}

template <typename Out, typename... In, typename VecF, typename ScalarF>
void CpuKernelTwoLambdas(const ElementwiseIter& iter, const VecF& vec_f, const ScalarF& scalar_f,
                         int64_t vector_bytes = kTorchVectorBytes) {
  const int64_t block = 2 * vector_bytes / static_cast<int64_t>(sizeof(Out));
  constexpr int64_t kSizes[] = {sizeof(In)...};
  iter.Run([&](char* const* ptrs, const int64_t* strides, int64_t n) {
    int broadcast = 0;
    bool contiguous = strides[0] == static_cast<int64_t>(sizeof(Out));
    for (size_t k = 0; k < sizeof...(In); ++k) {
      if (strides[k + 1] == 0) ++broadcast;
      else contiguous = contiguous && strides[k + 1] == kSizes[k];
    }
    const int64_t vec_end = contiguous && broadcast <= 1 ? n / block * block : 0;
    [&]<size_t... I>(std::index_sequence<I...>) {
      for (int64_t j = 0; j < n; ++j) {
        const Out v = j < vec_end ? vec_f(detail::Load<In>(ptrs[I + 1] + j * strides[I + 1])...)
                                  : scalar_f(detail::Load<In>(ptrs[I + 1] + j * strides[I + 1])...);
        std::memcpy(ptrs[0] + j * strides[0], &v, sizeof(Out));
      }
    }(std::index_sequence_for<In...>{});
  });
}

}  // namespace kiln
