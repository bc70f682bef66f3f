// tensor/ops/activation_backward_kernels_a.cc: the CPU loops of the backward ops of threshold, gelu (both), sigmoid, tanh, silu, leaky_relu,
// compiled apart from activation_backward.cc (activation_backward_kernels.h).
#define KILN_ACTIVATION_BW_KERNELS_TU
#include "tensor/ops/activation_backward_kernels.h"

namespace kiln::activation_backward {

KILN_ACTIVATION_BW_OPS_A(KILN_ACTIVATION_BW_INSTANTIATE)

}  // namespace kiln::activation_backward
