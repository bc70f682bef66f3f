// tensor/ops/unary_kernels_other.cc: the CPU loops of the unary ops silu, mish, sign and rounding ops, relu, logical/bitwise not and the predicates,
// compiled apart from unary.cc (Note [Unary kernels in several files] in unary_kernels.h).
#define KILN_UNARY_KERNELS_TU
#include "tensor/ops/unary_kernels.h"

namespace kiln::unary {

KILN_UNARY_OTHER_OPS(KILN_UNARY_INSTANTIATE)

}  // namespace kiln::unary
