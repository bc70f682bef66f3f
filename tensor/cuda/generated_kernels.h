// tensor/cuda/generated_kernels.h: what the launchers of generated kernels share (pointwise.h,
// reduce.h): the per-device cache of compiled kernels (memory and disk) and by-value parameters.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "codegen/kernel_ir.h"
#include "codegen/nvptx_codegen.h"
#include "runtime/cuda/driver_api.h"
#include "tensor/scalar.h"

namespace kiln::cuda {

// The kernel for `key` on `device`: from memory, else from the disk cache (by symbol()), else
// generated (ptx()) and compiled with nvJitLink, then kept. `name` names the op in errors.
CUfunction FindOrCompileKernel(int device, const codegen::PointwiseKey& key, const std::string& name,
                               const std::function<std::string()>& symbol, const std::function<std::string()>& ptx);

// A number's kernel parameter (float, double or int64, per the dtype's compute type).
union ScalarArg {
  float f;
  double d;
  int64_t i;
};
ScalarArg ScalarValue(const Scalar& s, codegen::DType t);

}  // namespace kiln::cuda
