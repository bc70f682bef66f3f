// tensor/ops/activation_backward_kernels_b.cc: the CPU loops of the backward ops of hardtanh, elu (both), softplus, hardsigmoid, hardswish, mish, logit,
// compiled apart from activation_backward.cc (activation_backward_kernels.h).
#define KILN_ACTIVATION_BW_KERNELS_TU
#include "tensor/ops/activation_backward_kernels.h"

namespace kiln::activation_backward {

KILN_ACTIVATION_BW_OPS_B(KILN_ACTIVATION_BW_INSTANTIATE)

}  // namespace kiln::activation_backward
