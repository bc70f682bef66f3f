// tensor/cuda/register.cc: adds the CUDA kernels to the ops tensor/ops defines; called by
// RegisterBuiltinOps after every op exists. Nothing here touches the driver: a machine without CUDA
// registers them and never reaches them, since no tensor can be made on a CUDA device there.
#include "runtime/error.h"
#include "tensor/cuda/cuda_ops.h"

namespace kiln::cuda {

void SetCUDAKernel(Registry& r, const char* op_name, Kernel kernel) {
  Op* op = r.Find(op_name);
  KILN_INTERNAL_ASSERT(op != nullptr, "CUDA kernel for an unregistered op: ", op_name);
  op->SetKernel(DispatchKey::CUDA, kernel);
}

void RegisterCUDAKernels(Registry& r) {
  RegisterCopyKernels(r);
  RegisterMatmulKernels(r);
}

}  // namespace kiln::cuda
