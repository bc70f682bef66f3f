// tensor/ops/unary_kernels_exp_log.cc: the CPU loops of the unary ops exponentials, logarithms, roots, sigmoid, tanh, reciprocal,
// compiled apart from unary.cc (Note [Unary kernels in several files] in unary_kernels.h).
#define KILN_UNARY_KERNELS_TU
#include "tensor/ops/unary_kernels.h"

namespace kiln::unary {

KILN_UNARY_EXP_LOG_OPS(KILN_UNARY_INSTANTIATE)

}  // namespace kiln::unary
