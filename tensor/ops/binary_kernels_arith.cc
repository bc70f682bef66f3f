// tensor/ops/binary_kernels_arith.cc: the CPU loops of add, sub, mul, div (and its rounding modes)
// and remainder, compiled apart from binary.cc (Note [Binary kernels in several files] in binary_kernels.h).
#define KILN_BINARY_KERNELS_TU
#include "tensor/ops/binary_kernels.h"

namespace kiln::binary {

KILN_BINARY_ARITH_OPS(KILN_BINARY_INSTANTIATE)

}  // namespace kiln::binary
