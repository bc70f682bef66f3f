// tensor/ops/binary_kernels_compare.cc: the CPU loops of the comparisons and of maximum/minimum/
// fmax/fmin, compiled apart from binary.cc (Note [Binary kernels in several files] in
// binary_kernels.h).
#define KILN_BINARY_KERNELS_TU
#include "tensor/ops/binary_kernels.h"

namespace kiln::binary {

KILN_BINARY_COMPARE_OPS(KILN_BINARY_INSTANTIATE)

}  // namespace kiln::binary
