// tensor/ops/unary_kernels_special.cc: the CPU loops of the unary ops trigonometric, hyperbolic and special functions (erf, lgamma, digamma, ndtr),
// compiled apart from unary.cc (Note [Unary kernels in several files] in unary_kernels.h).
#define KILN_UNARY_KERNELS_TU
#include "tensor/ops/unary_kernels.h"

namespace kiln::unary {

KILN_UNARY_SPECIAL_OPS(KILN_UNARY_INSTANTIATE)

}  // namespace kiln::unary
