// tensor/ops/register.cc: the list of op families, registered once when the Registry is first used.
#include "tensor/ops/common.h"

namespace kiln {

void RegisterBuiltinOps(Registry& r) {
  RegisterCreationOps(r);
  RegisterViewOps(r);
  RegisterCopyOps(r);
  RegisterBinaryOps(r);
  RegisterUnaryOps(r);
  RegisterReduceOps(r);
  RegisterReduceMoreOps(r);
  RegisterReduceStatsOps(r);
  RegisterActivationOps(r);
  RegisterLossOps(r);
  RegisterLinalgOps(r);
  RegisterConvPoolOps(r);
  RegisterNormOps(r);
}

}  // namespace kiln
