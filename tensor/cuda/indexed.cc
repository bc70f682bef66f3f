// tensor/cuda/indexed.cc: filling the indexed walk's parameter block and launching it (indexed.h).
#include "tensor/cuda/indexed.h"

#include <cstring>

#include "runtime/cuda/device_errors.h"
#include "runtime/error.h"
#include "tensor/cuda/embedded_kernels.h"
#include "tensor/cuda/kernels/indexed_args.h"

namespace kiln::cuda {

void LaunchIndexed(IndexedMode mode, const Tensor& self, const Tensor& other, const IndexedWalk& w, const char* op,
                   bool index_error, const std::string& message) {
  const int64_t nd = static_cast<int64_t>(w.shape.size()), ni = static_cast<int64_t>(w.indices.size());
  KILN_CHECK_NOT_IMPLEMENTED(nd <= kIndexedMaxDims && ni <= kIndexedMaxIndices, "[", op, "] kiln's CUDA kernel walks at "
                             "most ", kIndexedMaxDims, " dims with ", kIndexedMaxIndices, " index tensors (got ", nd,
                             " and ", ni, ")");
  KILN_CHECK(self.device() == other.device(), "[", op, "] expected ", self.device().str(), ", got ", other.device().str());
  const ScalarType t = self.dtype();
  std::string kernel;
  if (mode == IndexedMode::kAdd) {
    KILN_CHECK_NOT_IMPLEMENTED(t == ScalarType::Float32 || t == ScalarType::Float64 || t == ScalarType::Float16 ||
                                   t == ScalarType::BFloat16 || t == ScalarType::Int32 || t == ScalarType::Int64,
                               "\"", op, "\" with accumulation is not implemented for '", ScalarTypeDisplayName(t),
                               "' on CUDA in kiln (atomics: float, double, half, bfloat16, int and long)");
    kernel = StrCat("kiln_indexed_add_", KernelSuffix(t));
  } else {
    kernel = StrCat(mode == IndexedMode::kRead ? "kiln_indexed_read_b" : "kiln_indexed_write_b", self->itemsize());
  }
  IndexedLaunch l;
  std::memset(&l, 0, sizeof(l));
  l.ndim = static_cast<int32_t>(nd);
  l.nindices = static_cast<int32_t>(ni);
  l.wrap_negative = w.wrap_negative;
  l.numel = 1;
  for (int64_t d = 0; d < nd; ++d) {
    l.shape[d] = w.shape[d];
    l.self_stride[d] = w.self_strides[d];
    l.other_stride[d] = w.other_strides[d];
    l.numel *= w.shape[d];
  }
  if (l.numel == 0) return;
  for (int64_t j = 0; j < ni; ++j) {
    KILN_CHECK(w.indices[j].device() == self.device() && w.indices[j].dtype() == ScalarType::Int64,
               "[", op, "] indices must be int64 on ", self.device().str());
    l.index[j] = static_cast<const int64_t*>(w.indices[j].raw_data());
    for (int64_t d = 0; d < nd; ++d) l.index_stride[j][d] = w.index_strides[j][d];
    l.indexed_size[j] = w.indexed_sizes[j];
    l.indexed_stride[j] = w.indexed_strides[j];
  }
  l.self = self.raw_data();
  l.other = other.raw_data();
  const int device = self.device().index;
  l.error_word = DeviceErrorWord(device);
  l.error_code = DeviceErrorCode(index_error ? KILN_DEVICE_ERROR_INDEX : KILN_DEVICE_ERROR_RUNTIME, message);
  std::vector<void*> args = {&l};
  LaunchGrid(EmbeddedKernel(IndexedKernels(), device, kernel.c_str(), op), device, l.numel, args);
}

}  // namespace kiln::cuda
