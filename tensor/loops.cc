// tensor/loops.cc: operand alignment and dimension coalescing for the iterators.
#include "tensor/loops.h"

#include <immintrin.h>

#include "tensor/dim_order.h"

namespace kiln {

namespace detail {
void StreamStore(char* dst, const char* src, int64_t bytes) {
  const int64_t head = std::min<int64_t>(bytes, (32 - reinterpret_cast<uintptr_t>(dst) % 32) % 32);
  std::memcpy(dst, src, head);
  int64_t i = head;
  for (; i + 32 <= bytes; i += 32)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
  std::memcpy(dst + i, src + i, bytes - i);
}
void StoreFence() { _mm_sfence(); }
}  // namespace detail

namespace {

// Note [Dims in memory order]: an elementwise loop runs fastest along memory, so its dims are
// ordered as the operands lie in memory before adjacent ones merge: a channels-last (N, C, H, W)
// tensor, whose strides are (HWC, 1, WC, C), becomes one run of N*H*W*C elements instead of runs
// of W elements C apart. The output decides (then the inputs, in order); a pair of dims is left
// alone where every operand is broadcast along one of them or has equal strides for both, so
// row-major operands keep the order they have (as PyTorch's TensorIterator::reorder_dimensions).
// Returns the permutation, outermost dim first. The rule is IterationOrder's (ops/common.cc, which
// lays out new outputs over symbolic strides); this one runs on every eager op, over plain byte
// strides, with no allocation beyond the permutation.
using OperandStrides = std::array<DimVector, ElementwiseIter::kMaxOperands>;
std::vector<int> MemoryOrder(const DimVector& shape, const OperandStrides& strides, int n) {
  const int nd = static_cast<int>(shape.size());
  std::vector<int> perm(nd);
  for (int d = 0; d < nd; ++d) perm[d] = d;
  // > 0: `inner` belongs outside `outer`; < 0: keep them; 0: no operand says.
  auto compare = [&](int outer, int inner) {
    if (shape[outer] == 1 || shape[inner] == 1) return 0;  // dropped below: no say in the order
    for (int k = 0; k < n; ++k) {
      const int64_t so = strides[k][outer], si = strides[k][inner];
      if (so == 0 || si == 0) continue;
      if (si > so) return 1;
      if (si < so) return -1;
    }
    return 0;
  };
  InsertionSortDims(perm, compare);  // stable where no operand orders two dims
  return perm;
}

// The common case, every tensor contiguous with the output's element count (so, broadcasting to
// it, its shape less leading 1s) and values: one dim of all the elements, as the general path
// of ElementwiseIter's constructor would coalesce it (no dim when there is one element), without
// its per-dim work (a tenth of `y * z`'s time on 8x16).
bool ContiguousAlike(std::initializer_list<Operand> operands, int64_t& numel_out, DimVector& shape,
                     std::array<DimVector, ElementwiseIter::kMaxOperands>& strides,
                     std::array<char*, ElementwiseIter::kMaxOperands>& base) {
  const Tensor& out = *operands.begin()->tensor;
  const int64_t numel = out.numel();
  if (numel == 0) return false;
  for (const Operand& op : operands) {
    if (op.value != nullptr) continue;
    const Tensor& x = *op.tensor;
    if (!x->is_contiguous() || x.numel() != numel || x.dim() > out.dim()) return false;
  }
  numel_out = numel;
  if (numel > 1) shape.assign(1, numel);
  int t = 0;
  for (const Operand& op : operands) {
    if (op.value != nullptr) {
      base[t] = const_cast<char*>(static_cast<const char*>(op.value));
      if (numel > 1) strides[t].assign(1, 0);
    } else {
      base[t] = static_cast<char*>(op.tensor->raw_data());
      if (numel > 1) strides[t].assign(1, (*op.tensor)->itemsize());
    }
    ++t;
  }
  return true;
}

}  // namespace

ElementwiseIter::ElementwiseIter(std::initializer_list<Operand> operands) : n_(static_cast<int>(operands.size())) {
  KILN_INTERNAL_ASSERT(n_ <= kMaxOperands);
  const Tensor& out = *operands.begin()->tensor;
  if (ContiguousAlike(operands, numel_, shape_, strides_, base_)) return;
  DimVector shape = out.sizes();
  const int nd = static_cast<int>(shape.size());
  numel_ = out.numel();
  int t = 0;
  for (const Operand& op : operands) {
    if (op.value != nullptr) {
      strides_[t] = DimVector(nd, 0);
      base_[t] = const_cast<char*>(static_cast<const char*>(op.value));
      ++t;
      continue;
    }
    const Tensor& x = *op.tensor;
    DimVector st(nd, 0);
    const int xd = static_cast<int>(x.dim());
    KILN_INTERNAL_ASSERT(xd <= nd, "operand has more dims than the output");
    DimVector xs = x.sizes(), xst = x.strides();
    const int64_t item = x->itemsize();
    for (int d = 0; d < xd; ++d) {
      int od = nd - xd + d;
      KILN_INTERNAL_ASSERT(xs[d] == shape[od] || xs[d] == 1, "operand does not broadcast");
      st[od] = xs[d] == 1 && shape[od] != 1 ? 0 : xst[d] * item;
    }
    strides_[t] = std::move(st);
    base_[t] = static_cast<char*>(x.raw_data());
    ++t;
  }
  // Order the dims by memory (Note [Dims in memory order]), drop size-1 dims, then merge dim d
  // into d+1 when contiguous for every operand.
  const std::vector<int> perm = MemoryOrder(shape, strides_, n_);
  {
    DimVector permuted(nd);
    for (int d = 0; d < nd; ++d) permuted[d] = shape[perm[d]];
    shape = std::move(permuted);
    for (int k = 0; k < n_; ++k) {
      DimVector st(nd);
      for (int d = 0; d < nd; ++d) st[d] = strides_[k][perm[d]];
      strides_[k] = std::move(st);
    }
  }
  DimVector new_shape;
  std::array<DimVector, kMaxOperands> new_strides;
  for (int d = 0; d < nd; ++d) {
    if (shape[d] == 1) continue;
    if (!new_shape.empty()) {
      bool mergeable = true;
      for (int k = 0; k < n_; ++k)
        mergeable = mergeable && new_strides[k].back() == strides_[k][d] * shape[d];
      if (mergeable) {
        new_shape.back() *= shape[d];
        for (int k = 0; k < n_; ++k) new_strides[k].back() = strides_[k][d];
        continue;
      }
    }
    new_shape.push_back(shape[d]);
    for (int k = 0; k < n_; ++k) new_strides[k].push_back(strides_[k][d]);
  }
  shape_ = std::move(new_shape);
  for (int k = 0; k < n_; ++k) strides_[k] = std::move(new_strides[k]);
}

// Note [One ElementwiseIter::Run]: Run was a template over the inner loop, so each kernel (an op
// for a dtype, some 1,500 of them) carried its own copy of this driver, its two ParallelFor
// bodies and their std::function handlers: a third of a kernel file's code and 40% of its compile
// time (binary_kernels_arith.cc: 34.6 s with them, 20.0 s without; issue 20). One driver calls
// the kernel's loop through a FunctionRef: one indirect call per inner run of elements, and the
// loop itself (CpuKernel's fast paths) is compiled as before.
void ElementwiseIter::Run(InnerLoop loop, int64_t grain) const {
  if (numel_ == 0) return;
  const int nd = ndim();
  if (nd == 0) {
    int64_t zero[kMaxOperands] = {0};
    char* ptrs[kMaxOperands];
    for (int t = 0; t < n_; ++t) ptrs[t] = base_[t];
    loop(ptrs, zero, 1);
    return;
  }
  const int64_t inner = shape_[nd - 1];
  const int64_t outer = numel_ / inner;
  int64_t inner_strides[kMaxOperands];
  for (int t = 0; t < n_; ++t) inner_strides[t] = strides_[t][nd - 1];
  // Work unit: one inner run; split large inner runs when there is a single outer index.
  if (outer == 1) {
    ParallelFor(0, inner, grain, [&](int64_t b, int64_t e) {
      char* ptrs[kMaxOperands];
      for (int t = 0; t < n_; ++t) ptrs[t] = base_[t] + b * inner_strides[t];
      loop(ptrs, inner_strides, e - b);
    });
    return;
  }
  const int64_t rows_grain = std::max<int64_t>(1, grain / std::max<int64_t>(inner, 1));
  ParallelFor(0, outer, rows_grain, [&](int64_t b, int64_t e) {
    DimVector idx(nd - 1, 0);
    int64_t rem = b;
    for (int d = nd - 2; d >= 0; --d) {
      idx[d] = rem % shape_[d];
      rem /= shape_[d];
    }
    char* ptrs[kMaxOperands];
    for (int64_t row = b; row < e; ++row) {
      for (int t = 0; t < n_; ++t) {
        char* p = base_[t];
        for (int d = 0; d < nd - 1; ++d) p += idx[d] * strides_[t][d];
        ptrs[t] = p;
      }
      loop(ptrs, inner_strides, inner);
      for (int d = nd - 2; d >= 0; --d) {
        if (++idx[d] < shape_[d]) break;
        idx[d] = 0;
      }
    }
  });
}

ReduceIter::ReduceIter(const Tensor& input, const std::vector<bool>& reduce_mask) {
  base_ = static_cast<const char*>(input.raw_data());
  DimVector sizes = input.sizes(), strides = input.strides();
  const int64_t item = input->itemsize();
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (reduce_mask[d]) {
      reduce_size_ *= sizes[d];
      if (sizes[d] == 1) continue;
      if (!red_shape_.empty() && red_strides_.back() == strides[d] * item * sizes[d]) {
        red_shape_.back() *= sizes[d];
        red_strides_.back() = strides[d] * item;
      } else {
        red_shape_.push_back(sizes[d]);
        red_strides_.push_back(strides[d] * item);
      }
    } else {
      num_outputs_ *= sizes[d];
      out_shape_.push_back(sizes[d]);
      out_strides_.push_back(strides[d] * item);
    }
  }
  inner_contiguous_ = red_shape_.size() <= 1 && (red_shape_.empty() || red_strides_[0] == item);
}

}  // namespace kiln
