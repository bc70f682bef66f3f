// tensor/ops/binary_kernels_math.cc: the CPU loops of fmod, pow, floor_divide, atan2, hypot,
// copysign and xlogy, compiled apart from binary.cc (Note [Binary kernels in several files] in
// binary_kernels.h).
#define KILN_BINARY_KERNELS_TU
#include "tensor/ops/binary_kernels.h"

namespace kiln::binary {

KILN_BINARY_MATH_OPS(KILN_BINARY_INSTANTIATE)

}  // namespace kiln::binary
