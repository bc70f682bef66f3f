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
// The meta of an elementwise op's result: broadcast sizes, contiguous, `dtype`, device of `a`.
TensorMeta ElementwiseMeta(const char* op, const Tensor& a, const Tensor& b, ScalarType dtype);
// `t` converted to `dtype` (no copy when it already has it).
Tensor CastTo(const Tensor& t, ScalarType dtype);
// Checks that tensors are on one device, naming the op.
void CheckSameDevice(const char* op, const Tensor& a, const Tensor& b);
// Reduction dims: wrapped, deduplicated, as a mask over `ndim` (all dims when `dims` is empty/none).
std::vector<bool> ReduceMask(const char* op, const std::optional<std::vector<int64_t>>& dims, int64_t ndim);
// Output sizes of a reduction over `mask`.
SymDimVector ReducedSizes(const Tensor& t, const std::vector<bool>& mask, bool keepdim);
// A 0-dim tensor holding a Python number (marked as wrapped: weak in promotion).
Tensor WrapScalar(const Scalar& s, Device device);
// Tensor metadata as "[2, 3]".
inline std::string ShapeStr(const Tensor& t) { return SizesToString(t->sym_sizes()); }

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
void RegisterReduceMoreOps(Registry& r);   // reduce_more.cc
void RegisterReduceStatsOps(Registry& r);  // reduce_stats.cc
void RegisterActivationOps(Registry& r);   // activation.cc
void RegisterLossOps(Registry& r);         // loss.cc
void RegisterLinalgOps(Registry& r);
void RegisterConvPoolOps(Registry& r);
void RegisterNormOps(Registry& r);

}  // namespace kiln
