// tensor/ops/common.h: helpers shared by the op families (shape checks, broadcasting, casts).
#pragma once

#include <string>
#include <vector>

#include "tensor/dispatcher.h"
#include "tensor/empty.h"
#include "tensor/loops.h"
#include "tensor/ops.h"
#include "tensor/type_promotion.h"

namespace kiln {

// Broadcast shape of a and b; RuntimeError naming the op and both shapes when they do not.
SymDimVector BroadcastShapes(const char* op, const SymDimVector& a, const SymDimVector& b);
// The meta of an elementwise op's result: broadcast sizes, laid out as the inputs are
// (LayoutOfInputs), `dtype`, device of `a`.
// `common`: the dtype the inputs compute in; one of another dtype is cast first, as PyTorch's CPU
// TensorIterator does, and the cast's layout is what orders the result.
TensorMeta ElementwiseMeta(const char* op, const Tensor& a, const Tensor& b, ScalarType dtype,
                           std::optional<ScalarType> common = std::nullopt);
// The strides of a new elementwise result of `shape` in its inputs' memory order, as PyTorch's
// TensorIterator gives it (Note [Elementwise output layout]); empty: contiguous (also when a
// size or stride is symbolic).
// `cast_to`: the dtype the inputs compute in; one of another dtype is cast first, as PyTorch's
// CPU TensorIterator does, and the cast's layout counts. `scalar_operand`: the op has a Python
// number as an operand too (PyTorch wraps it as a 0-dim tensor, which turns off Note [Fast setup]).
SymDimVector LayoutOfInputs(const SymDimVector& shape, std::initializer_list<const Tensor*> inputs,
                            std::optional<ScalarType> cast_to = std::nullopt, bool scalar_operand = false);
// The strides of empty_like(t) in preserve_format (of `t.to(dtype)`, `t.clone()`, `flip(t)`): t's
// own, size-1 dims' included, when t is dense and free of overlap, else dense ones in t's memory
// order (PyTorch's infer_dense_strides); empty: row-major.
SymDimVector PreserveFormatStrides(const Tensor& t);
// `t`'s strides as an operand of a TensorIterator over `shape`: 0 where it broadcasts (a missing
// leading dim, or size 1 against a larger size).
SymDimVector BroadcastStrides(const Tensor& t, const SymDimVector& shape);
SymDimVector BroadcastStrides(const SymDimVector& sizes, const SymDimVector& strides, const SymDimVector& shape);
// The order PyTorch's TensorIterator walks `shape` in, fastest dim first, given each operand's
// strides over `shape` (0 where it broadcasts), the output's first.
std::vector<int64_t> IterationOrder(const SymDimVector& shape, const std::vector<SymDimVector>& strides);
// The strides of a new output of `shape` laid out in the memory order of operands with these
// strides (TensorIterator's output allocation); empty: contiguous (also when a size has no example
// value to compare).
SymDimVector LayoutOfOperands(const SymDimVector& shape, const std::vector<SymDimVector>& strides);
// `t` converted to `dtype` (no copy when it already has it).
Tensor CastTo(const Tensor& t, ScalarType dtype);
// Checks that tensors are on one device, naming the op.
void CheckSameDevice(const char* op, const Tensor& a, const Tensor& b);
// An op that writes `self` (in place, or a result placed on self's device) reading `other`: other
// must be on self's device or a 0-d CPU tensor; a CPU self is not let off as a 0-d CPU operand is.
void CheckOperandOnSelfDevice(const char* op, const Tensor& self, const Tensor& other);

// Factories whose values are computed on the host (arange, eye, linspace) build a host tensor and
// copy it to a CUDA device: their loops would write device memory through a host pointer.
inline bool OnCUDA(const std::optional<Device>& device) { return device && device->is_cuda(); }
Tensor CopyToDevice(const Tensor& host, Device device);
// copy_'s argument checks (self-copy, overlaps, broadcast shapes); false when nothing is to be
// copied. Every backend's copy_ runs them first (tensor/ops/copy.cc).
bool CheckCopy(const Tensor& self, const Tensor& src);
// mm's and bmm's argument checks and result (tensor/ops/linalg.cc), shared by every backend.
TensorMeta MmMeta(const Tensor& self, const Tensor& mat2);
TensorMeta BmmMeta(const Tensor& self, const Tensor& mat2);
// Reduction dims: wrapped, deduplicated, as a mask over `ndim` (all dims when `dims` is empty/none).
std::vector<bool> ReduceMask(const char* op, const std::optional<std::vector<int64_t>>& dims, int64_t ndim);
// Output sizes of a reduction over `mask`.
SymDimVector ReducedSizes(const Tensor& t, const std::vector<bool>& mask, bool keepdim);
// A 0-dim tensor holding a Python number (marked as wrapped: weak in promotion).
Tensor WrapScalar(const Scalar& s, Device device);
// Tensor metadata as "[2, 3]".
// A factory's freshly filled result: filling went through an in-place op, which bumped the
// version counter; a new tensor starts at version 0, as in PyTorch.
inline Tensor Fresh(Tensor t) {
  t->version_counter()->version.store(0, std::memory_order_relaxed);
  return t;
}
inline std::string ShapeStr(const Tensor& t) { return SizesToString(t->sym_sizes()); }

// The value of a one-element tensor as a Scalar of its category (bool, int or float); a CUDA
// tensor's is copied to the host first (a synchronisation, as Tensor.item()).
Scalar ItemScalar(const char* op, const Tensor& t);

// Calls fn(offsets, coords) for the coordinates of `shape` at row-major positions [begin, end),
// in order, where offsets[k] = sum over d of coords[d] * strides[k][d] (element strides; negative
// and zero strides are fine, so one walk can read a flipped or broadcast operand).
template <typename F>
void ForEachStridedRange(const DimVector& shape, const std::vector<DimVector>& strides, int64_t begin, int64_t end,
                         const F& fn) {
  // An empty range visits nothing; returning first also keeps a 0-size dim out of the divisions
  // below (x[empty_index], index_put_ with no indices: SIGFPE otherwise).
  if (begin >= end) return;
  const int nd = static_cast<int>(shape.size());
  const size_t k = strides.size();
  DimVector idx(nd, 0), off(k, 0);
  int64_t rem = begin;
  for (int d = nd - 1; d >= 0; --d) {
    idx[d] = rem % shape[d];
    rem /= shape[d];
    for (size_t t = 0; t < k; ++t) off[t] += idx[d] * strides[t][d];
  }
  for (int64_t i = begin; i < end; ++i) {
    fn(static_cast<const int64_t*>(off.data()), static_cast<const int64_t*>(idx.data()));
    for (int d = nd - 1; d >= 0; --d) {
      for (size_t t = 0; t < k; ++t) off[t] += strides[t][d];
      if (++idx[d] < shape[d]) break;
      for (size_t t = 0; t < k; ++t) off[t] -= strides[t][d] * shape[d];
      idx[d] = 0;
    }
  }
}
inline int64_t NumelOf(const DimVector& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}
// The whole of `shape`, serially: kernels that accumulate or may write one element twice
// (scatter_add, index_put_) stay deterministic.
template <typename F>
void ForEachStrided(const DimVector& shape, const std::vector<DimVector>& strides, const F& fn) {
  ForEachStridedRange(shape, strides, 0, NumelOf(shape), fn);
}
// The whole of `shape` in parallel chunks, for kernels whose elements are independent (each
// writes only its own output element).
template <typename F>
void ParallelForEachStrided(const DimVector& shape, const std::vector<DimVector>& strides, const F& fn) {
  ParallelFor(0, NumelOf(shape), kGrainSize, [&](int64_t b, int64_t e) { ForEachStridedRange(shape, strides, b, e, fn); });
}

// For out= variants: checks `out` can hold the result `m` describes and resizes it when its
// shape differs (PyTorch's resize_ of out arguments). Returns `out`.
Tensor ResizeOut(const char* op, Tensor out, const TensorMeta& m);

// Family registration functions, called from tensor/ops/register.cc.
void RegisterCreationOps(Registry& r);
void RegisterViewOps(Registry& r);
void RegisterCopyOps(Registry& r);
void RegisterBinaryOps(Registry& r);
void RegisterUnaryOps(Registry& r);
void RegisterReduceOps(Registry& r);
void RegisterLinalgOps(Registry& r);
void RegisterLapackOps(Registry& r);
void RegisterLapackFunctions(Registry& r);
void RegisterReinterpretOps(Registry& r);
void RegisterComplexOps(Registry& r);      // complex.cc: view_as_real/complex, real, imag, conj, polar  // reinterpret.cc: view(dtype), resize_
void RegisterConvPoolOps(Registry& r);
void RegisterNormOps(Registry& r);
void RegisterAttentionOps(Registry& r);
void RegisterReduceMoreOps(Registry& r);   // reduce_more.cc
void RegisterReduceStatsOps(Registry& r);  // reduce_stats.cc
void RegisterActivationOps(Registry& r);   // activation.cc
void RegisterLossOps(Registry& r);         // loss.cc
void RegisterIndexOps(Registry& r);
void RegisterAdvancedIndexOps(Registry& r);
void RegisterShapeOps(Registry& r);
void RegisterTernaryOps(Registry& r);
void RegisterRandomOps(Registry& r);
void RegisterActivationBackwardOps(Registry& r);  // activation_backward.cc
void RegisterNormBackwardOps(Registry& r);        // norm_backward.cc
void RegisterConvPoolBackwardOps(Registry& r);    // conv_pool_backward.cc
void RegisterLossBackwardOps(Registry& r);        // loss_backward.cc
void RegisterViewScatterOps(Registry& r);         // view_scatter.cc
void RegisterOutVariants(Registry& r);  // last: derives out= overloads from the others

}  // namespace kiln
