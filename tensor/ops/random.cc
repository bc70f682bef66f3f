// tensor/ops/random.cc: placeholder.
#include "tensor/ops/common.h"

namespace kiln {
void RegisterRandomOps(Registry& r) { (void)r; }
}  // namespace kiln
