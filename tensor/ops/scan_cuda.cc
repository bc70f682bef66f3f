// tensor/ops/scan_cuda.cc: cumsum and cumprod on CUDA (sort_scan_cuda.h).
//
// Note [CUDA scans]: the input, in the output's dtype and made contiguous, is [outer, n, inner]
// around the scanned dim. A scan along the innermost dim (inner == 1) of rows long enough to share
// takes kernels/scan.cu's block-per-row kernel; otherwise each thread walks one line, coalesced
// across neighbouring lines. Few long lines with inner > 1 (too few threads to fill the device)
// are moved innermost by a copy and take the row kernel, then copied back.
#include <algorithm>

#include "runtime/cuda/driver.h"
#include "runtime/cuda/module.h"
#include "runtime/cuda/stream.h"
#include "tensor/cuda/embedded_kernels.h"
#include "tensor/empty.h"
#include "tensor/ops/common.h"
#include "tensor/ops/sort_scan_cuda.h"

namespace kiln {
namespace {

constexpr int64_t kRowScanFrom = 32;     // rows shorter than a warp walk per thread
constexpr int64_t kFewLines = 4096;      // fewer lines than this leave most of an H200 idle
constexpr int64_t kLongLine = 256;

cuda::CUfunction ScanKernel(int device, const char* shape, bool prod, ScalarType t) {
  const std::string name = StrCat("kiln_scan_", shape, prod ? "_prod_" : "_sum_", cuda::KernelSuffix(t));
  return cuda::EmbeddedKernel(cuda::ScanKernels(), device, name.c_str(), prod ? "cumprod" : "cumsum");
}

// out = scan of in along the last dim; both contiguous [rows, n].
void ScanRows(bool prod, const Tensor& in, const Tensor& out, int64_t rows, int64_t n) {
  const int device = out.device().index;
  int64_t threads = 32;
  while (threads < 512 && threads * 4 < n) threads *= 2;
  const int64_t most = int64_t(cuda::GetDeviceProperties(device).multi_processor_count) * (2048 / threads);
  const void* ip = in.raw_data();
  void* op = out.raw_data();
  std::vector<void*> args = {&ip, &op, &rows, &n};
  cuda::Launch(ScanKernel(device, "rows", prod, out.dtype()), static_cast<unsigned>(std::min(rows, most)),
               static_cast<unsigned>(threads), 0, cuda::CurrentStream(device), args);
}

}  // namespace

void ScanCUDA(bool prod, const Tensor& input, int64_t dim, const Tensor& out) {
  if (out.numel() == 0) return;
  const char* op = prod ? "cumprod" : "cumsum";
  KILN_CHECK_NOT_IMPLEMENTED(out.dtype() != ScalarType::Bool && !IsComplex(out.dtype()), "\"", op,
                             "_cuda\" not implemented for '", ScalarTypeDisplayName(out.dtype()), "'");
  const Tensor in = ops::contiguous(input);
  Tensor dst = out.is_contiguous() ? out : EmptyTensor(out.sizes(), out.dtype(), out.device());
  int64_t outer = 1, n = 1, inner = 1;
  for (int64_t d = 0; d < in.dim(); ++d) (d < dim ? outer : d == dim ? n : inner) *= in.size(d);
  if (inner == 1 && n >= kRowScanFrom) {
    ScanRows(prod, in, dst, outer, n);
  } else if (inner > 1 && outer * inner < kFewLines && n >= kLongLine) {
    const Tensor moved = ops::contiguous(ops::transpose(in, dim, in.dim() - 1));
    Tensor scanned = EmptyTensor(moved.sizes(), moved.dtype(), moved.device());
    ScanRows(prod, moved, scanned, outer * inner, n);
    ops::copy_(dst, ops::transpose(scanned, dim, in.dim() - 1));
  } else {
    const int device = out.device().index;
    const void* ip = in.raw_data();
    void* outp = dst.raw_data();
    std::vector<void*> args = {&ip, &outp, &outer, &n, &inner};
    cuda::LaunchGrid(ScanKernel(device, "lines", prod, out.dtype()), device, outer * inner, args);
  }
  if (Tensor o = out; !dst.is_same(o)) ops::copy_(o, dst);
}

}  // namespace kiln
