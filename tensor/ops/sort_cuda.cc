// tensor/ops/sort_cuda.cc: sort on CUDA (sort_scan_cuda.h); topk is its first k.
//
// Note [CUDA sort]: the sorted dim is moved innermost and made contiguous, [rows, n]. Rows of up to
// 2048 elements are sorted whole in shared memory (kernels/sort.cu's tile kernel, several short
// rows to a block); longer rows are sorted in 2048-element pieces, then merged pairwise, pass after
// pass, one thread per element (each finds its place by a binary search in the other run), the
// keys and positions going back and forth between two scratch buffers and the last pass writing
// the op's outputs. Ties keep their order (stable) and NaN sorts largest, as on the CPU, so both
// devices return the same indices.
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

constexpr int64_t kTile = 2048;  // sort.cu's kSortTile

cuda::CUfunction SortKernel(int device, const char* what, ScalarType t) {
  const std::string name = StrCat("kiln_sort_", what, "_", cuda::KernelSuffix(t));
  return cuda::EmbeddedKernel(cuda::SortKernels(), device, name.c_str(), "sort");
}

// The dtype sort.cu compares keys in (SortKey).
ScalarType KeyType(ScalarType t) {
  if (t == ScalarType::Float64) return ScalarType::Float64;
  return IsFloating(t) ? ScalarType::Float32 : ScalarType::Int64;
}

// values / indices (contiguous [rows, n]) = each row of in (contiguous [rows, n]) sorted.
void SortRows(const Tensor& in, int64_t rows, int64_t n, bool descending, const Tensor& values,
              const Tensor& indices) {
  const int device = in.device().index;
  int chunk = 1;
  while (chunk < n && chunk < kTile) chunk *= 2;
  int64_t pieces = (n + chunk - 1) / chunk;
  int desc = descending ? 1 : 0;
  // every pass but the last writes keys into scratch; the last writes values
  int passes = 0;
  for (int64_t run = chunk; run < n; run *= 2) ++passes;
  Tensor keys[2], pos[2];
  for (int b = 0; b < (passes > 0 ? 2 : 0); ++b) {
    keys[b] = EmptyTensor(DimVector{rows, n}, KeyType(in.dtype()), in.device());
    pos[b] = EmptyTensor(DimVector{rows, n}, ScalarType::Int64, in.device());
  }
  auto out_of = [&](int pass, void** k, void** v, void** i) {  // pass `passes` is the last
    const bool last = pass == passes;
    *k = last ? nullptr : keys[pass % 2].raw_data();
    *v = last ? values.raw_data() : nullptr;
    *i = last ? indices.raw_data() : pos[pass % 2].raw_data();
  };
  {
    const void* ip = in.raw_data();
    void *k, *v, *i;
    out_of(0, &k, &v, &i);
    std::vector<void*> args = {&ip, &rows, &n, &chunk, &pieces, &desc, &k, &v, &i};
    const int64_t tiles = (rows * pieces + kTile / chunk - 1) / (kTile / chunk);
    const int64_t most = int64_t(cuda::GetDeviceProperties(device).multi_processor_count) * 2;
    cuda::Launch(SortKernel(device, "tile", in.dtype()), static_cast<unsigned>(std::min(tiles, most)), 1024, 0,
                 cuda::CurrentStream(device), args);
  }
  int64_t run = chunk;
  for (int pass = 1; pass <= passes; ++pass, run *= 2) {
    const void* kin = keys[(pass - 1) % 2].raw_data();
    const void* iin = pos[(pass - 1) % 2].raw_data();
    void *k, *v, *i;
    out_of(pass, &k, &v, &i);
    std::vector<void*> args = {&kin, &iin, &rows, &n, &run, &desc, &k, &v, &i};
    cuda::LaunchGrid(SortKernel(device, "merge", in.dtype()), device, rows * n, args);
  }
}

}  // namespace

void SortCUDA(const Tensor& self, int64_t dim, bool descending, const Tensor& values, const Tensor& indices) {
  if (values.numel() == 0) return;
  KILN_CHECK_NOT_IMPLEMENTED(!IsComplex(self.dtype()), "\"sort_cuda\" not implemented for '",
                             ScalarTypeDisplayName(self.dtype()), "'");
  const int64_t last = std::max<int64_t>(self.dim() - 1, 0);
  auto innermost = [&](const Tensor& t) { return t.dim() == 0 ? t : ops::transpose(t, dim, last); };
  const Tensor in = ops::contiguous(innermost(self));
  const int64_t n = self.dim() == 0 ? 1 : self.size(dim), rows = self.numel() / n;
  // the outputs themselves when they are already [rows, n] contiguous
  const bool direct = (self.dim() == 0 || dim == last) && values.is_contiguous() && indices.is_contiguous();
  Tensor v = direct ? values : EmptyTensor(in.sizes(), values.dtype(), values.device());
  Tensor i = direct ? indices : EmptyTensor(in.sizes(), indices.dtype(), indices.device());
  SortRows(in, rows, n, descending, v, i);
  if (direct) return;
  Tensor vo = innermost(values), io = innermost(indices);
  ops::copy_(vo, v);
  ops::copy_(io, i);
}

}  // namespace kiln
