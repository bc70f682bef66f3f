// tensor/ops/register.cc: the list of op families, registered once when the Registry is first used.
#include "tensor/ops/common.h"
#include "tensor/ops/core_ops.h"
#include "tensor/cuda/cuda_ops.h"
#include "tensor/ops/fft.h"

namespace kiln {

void RegisterBuiltinOps(Registry& r) {
  RegisterCreationOps(r);
  RegisterViewOps(r);
  RegisterCopyOps(r);
  RegisterBinaryOps(r);
  RegisterUnaryOps(r);
  RegisterReduceOps(r);
  RegisterLinalgOps(r);
  RegisterLapackOps(r);
  RegisterLapackFunctions(r);
  RegisterReinterpretOps(r);
  RegisterComplexOps(r);
  RegisterFftOps(r);
  RegisterConvPoolOps(r);
  RegisterNormOps(r);
  RegisterAttentionOps(r);
  RegisterReduceMoreOps(r);
  RegisterReduceStatsOps(r);
  RegisterActivationOps(r);
  RegisterLossOps(r);
  RegisterIndexOps(r);
  RegisterAdvancedIndexOps(r);
  RegisterShapeOps(r);
  RegisterTernaryOps(r);
  RegisterRandomOps(r);
  RegisterActivationBackwardOps(r);
  RegisterNormBackwardOps(r);
  RegisterConvPoolBackwardOps(r);
  RegisterLossBackwardOps(r);
  RegisterViewScatterOps(r);
  RegisterOutVariants(r);
  cuda::RegisterCUDAKernels(r);
  for (const std::string& name : CoreAtenOps())
    KILN_INTERNAL_ASSERT(r.Find(name) != nullptr, "core op list names an unregistered op: ", name);
}

}  // namespace kiln
