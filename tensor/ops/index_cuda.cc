// tensor/ops/index_cuda.cc: index_select, embedding, index_add_ and embedding_dense_backward on CUDA
// (index_cuda.h): each tensor as a contiguous [outer, rows, inner] view, then one launch of
// tensor/cuda/kernels/index.cu's row kernels.
#include "tensor/ops/index_cuda.h"

#include <algorithm>
#include <vector>

#include "runtime/cuda/device_errors.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/module.h"
#include "runtime/cuda/stream.h"
#include "tensor/cuda/embedded_kernels.h"
#include "tensor/empty.h"
#include "tensor/deterministic.h"
#include "tensor/ops/common.h"
#include "tensor/ops/sort_scan_cuda.h"

namespace kiln {
namespace {

// [outer, rows, inner] of a tensor's sizes around `dim` (a 0-d tensor is one row).
struct RowView {
  int64_t outer = 1, rows = 1, inner = 1;
};
RowView RowsAround(const Tensor& t, int64_t dim) {
  RowView v;
  if (t.dim() == 0) return v;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (d < dim) v.outer *= t.size(d);
    else if (d == dim) v.rows = t.size(d);
    else v.inner *= t.size(d);
  }
  return v;
}

// The launch: one block per row (grid-stride), its threads along the row: a warp at least, 256 at most.
void LaunchRows(cuda::CUfunction fn, int device, int64_t rows, int64_t inner, std::vector<void*>& args) {
  if (rows <= 0) return;
  const int64_t threads = std::clamp<int64_t>((inner + 31) / 32 * 32, 32, 256);
  const int64_t most = int64_t(cuda::GetDeviceProperties(device).multi_processor_count) * (2048 / threads);
  cuda::Launch(fn, static_cast<unsigned>(std::min(rows, std::max<int64_t>(most, 1))), static_cast<unsigned>(threads),
               0, cuda::CurrentStream(device), args);
}

const char* IndexSuffix(const Tensor& index) { return index.dtype() == ScalarType::Int32 ? "i32" : "i64"; }

cuda::CUfunction IndexKernel(int device, const std::string& name, const char* op) {
  return cuda::EmbeddedKernel(cuda::IndexKernels(), device, name.c_str(), op);
}

}  // namespace

void IndexSelectCUDA(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& out, const char* message) {
  if (out.numel() == 0) return;
  const int device = out.device().index;
  KILN_CHECK(self.device() == out.device() && index.device() == out.device(), "index_select(): expected self and "
             "index on ", out.device().str(), ", got ", self.device().str(), " and ", index.device().str());
  if (IsComplex(out.dtype())) {  // the (real, imag) pairs move as rows of two reals
    auto pairs = [](const Tensor& t) {
      return CallOp<Tensor>(KILN_OP("aten::view_as_real"), t.dim() == 0 ? ops::reshape(t, {SymInt(1)}) : t);
    };
    return IndexSelectCUDA(pairs(self), dim, index, pairs(out), message);
  }
  Tensor src = ops::contiguous(self), idx = ops::contiguous(index);
  Tensor dst = out.is_contiguous() ? out : EmptyTensor(out.sizes(), out.dtype(), out.device());
  RowView v = RowsAround(src, dim);
  int64_t outer = v.outer, n = idx.numel(), rows = v.rows, inner = v.inner;
  const void *sp = src.raw_data(), *ip = idx.raw_data();
  void* op = dst.raw_data();
  int32_t* word = cuda::DeviceErrorWord(device);
  int32_t code = cuda::DeviceErrorCode(KILN_DEVICE_ERROR_INDEX, message);
  std::vector<void*> args = {&sp, &ip, &op, &outer, &n, &rows, &inner, &word, &code};
  LaunchRows(IndexKernel(device, StrCat("kiln_index_select_", cuda::KernelSuffix(out.dtype()), "_", IndexSuffix(idx)),
                    "index_select"),
             device, outer * n, inner, args);
  if (Tensor o = out; !dst.is_same(o)) ops::copy_(o, dst);
}

void IndexAddCUDA(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha) {
  const ScalarType t = self.dtype();
  KILN_CHECK_NOT_IMPLEMENTED(t == ScalarType::Float32 || t == ScalarType::Float64 || t == ScalarType::Float16 ||
                                 t == ScalarType::BFloat16 || t == ScalarType::Int32 || t == ScalarType::Int64,
                             "\"index_add_cuda_\" not implemented for '", ScalarTypeDisplayName(t),
                             "' in kiln (atomics: float, double, half, bfloat16, int and long)");
  if (IsFloating(t)) AlertNotDeterministic("index_add_cuda_");  // float atomics: the sum's order varies
  const int device = self.device().index;
  Tensor dst = self.is_contiguous() ? self : ops::contiguous(self);
  Tensor src = ops::contiguous(source), idx = ops::contiguous(index);
  RowView v = RowsAround(dst, dim);
  int64_t outer = v.outer, n = idx.numel(), rows = v.rows, inner = v.inner;
  double a = alpha.to_double();
  void* dp = dst.raw_data();
  const void *sp = src.raw_data(), *ip = idx.raw_data();
  int32_t* word = cuda::DeviceErrorWord(device);
  static const int32_t kCode = cuda::DeviceErrorCode(KILN_DEVICE_ERROR_INDEX, "index_add_(): index out of range in self");
  int32_t code = kCode;
  std::vector<void*> args = {&dp, &sp, &ip, &outer, &n, &rows, &inner, &a, &word, &code};
  LaunchRows(IndexKernel(device, StrCat("kiln_index_add_", cuda::KernelSuffix(t), "_", IndexSuffix(idx)), "index_add_"),
             device, outer * n, inner, args);
  if (Tensor o = self; !dst.is_same(o)) ops::copy_(o, dst);
}

void EmbeddingBackwardCUDA(const Tensor& grad, const Tensor& indices, int64_t padding_idx, bool scale_grad_by_freq,
                           const Tensor& out) {
  const int device = out.device().index;
  const ScalarType t = out.dtype();
  KILN_CHECK_NOT_IMPLEMENTED(IsFloating(t), "\"embedding_dense_backward\" not implemented for '",
                             ScalarTypeDisplayName(t), "' on CUDA");
  Tensor o = out;
  ops::fill_(o, Scalar(0.0));
  int64_t n = indices.numel(), rows = out.size(0), inner = out.size(1), skip = padding_idx;
  if (n == 0 || inner == 0) return;
  // Note [Deterministic embedding backward]: the indices sorted (stably), then one block per run
  const Tensor idx = ops::reshape(ops::to_dtype(indices, ScalarType::Int64), {SymInt(n)});
  Tensor sorted = EmptyTensor(DimVector{n}, ScalarType::Int64, out.device());
  Tensor order = EmptyTensor(DimVector{n}, ScalarType::Int64, out.device());
  SortCUDA(idx, 0, false, sorted, order);
  const Tensor g = ops::contiguous(grad);
  int32_t* word = cuda::DeviceErrorWord(device);
  static const int32_t kCode = cuda::DeviceErrorCode(KILN_DEVICE_ERROR_INDEX, "embedding_dense_backward: index out of range");
  int32_t code = kCode;
  int scale = scale_grad_by_freq ? 1 : 0;
  const void *sp = sorted.raw_data(), *op = order.raw_data(), *gp = g.raw_data();
  void* dp = o.raw_data();
  std::vector<void*> args = {&sp, &op, &gp, &dp, &n, &rows, &inner, &skip, &scale, &word, &code};
  LaunchRows(IndexKernel(device, StrCat("kiln_embedding_backward_", cuda::KernelSuffix(t)), "embedding_dense_backward"),
             device, n, inner, args);
}

}  // namespace kiln
