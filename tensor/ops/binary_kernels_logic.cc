// tensor/ops/binary_kernels_logic.cc: the CPU loops of the logical, bitwise and shift binary ops,
// compiled apart from binary.cc (Note [Binary kernels in several files] in binary_kernels.h).
#define KILN_BINARY_KERNELS_TU
#include "tensor/ops/binary_kernels.h"

namespace kiln::binary {

KILN_BINARY_LOGIC_OPS(KILN_BINARY_INSTANTIATE)

}  // namespace kiln::binary
