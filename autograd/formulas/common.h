// autograd/formulas/common.h: what the formula files share: short names for the ops formulas
// call (always through the dispatcher, so double backward records them) and reduction helpers.
#pragma once

#include <cmath>
#include <optional>
#include <vector>

#include "autograd/derivatives.h"
#include "tensor/ops.h"

namespace kiln::autograd::formulas {

using ops::OptTensor;
using IntList = std::vector<int64_t>;
using SymList = std::vector<SymInt>;

#define KILN_F(RET, NAME, ...) return CallOp<RET>(KILN_OP(NAME), __VA_ARGS__)

inline Tensor mul(const Tensor& a, const Tensor& b) { return ops::mul(a, b); }
inline Tensor mul(const Tensor& a, const Scalar& b) { return ops::mul(a, b); }
inline Tensor div(const Tensor& a, const Tensor& b) { return ops::div(a, b); }
inline Tensor div(const Tensor& a, const Scalar& b) { return ops::div(a, b); }
inline Tensor add(const Tensor& a, const Tensor& b) { return ops::add(a, b); }
inline Tensor add(const Tensor& a, const Scalar& b) { return ops::add(a, b); }
inline Tensor sub(const Tensor& a, const Tensor& b) { return ops::sub(a, b); }
inline Tensor neg(const Tensor& a) { KILN_F(Tensor, "aten::neg", a); }
inline Tensor rsub(const Tensor& a, const Scalar& b) { KILN_F(Tensor, "aten::rsub.Scalar", a, b, Scalar(1)); }  // b - a
inline Tensor pow(const Tensor& a, const Scalar& e) { KILN_F(Tensor, "aten::pow.Tensor_Scalar", a, e); }
inline Tensor pow(const Tensor& a, const Tensor& e) { KILN_F(Tensor, "aten::pow.Tensor_Tensor", a, e); }
inline Tensor exp(const Tensor& a) { KILN_F(Tensor, "aten::exp", a); }
inline Tensor log(const Tensor& a) { KILN_F(Tensor, "aten::log", a); }
inline Tensor sqrt(const Tensor& a) { KILN_F(Tensor, "aten::sqrt", a); }
inline Tensor sin(const Tensor& a) { KILN_F(Tensor, "aten::sin", a); }
inline Tensor cos(const Tensor& a) { KILN_F(Tensor, "aten::cos", a); }
inline Tensor cosh(const Tensor& a) { KILN_F(Tensor, "aten::cosh", a); }
inline Tensor sinh(const Tensor& a) { KILN_F(Tensor, "aten::sinh", a); }
inline Tensor sign(const Tensor& a) { KILN_F(Tensor, "aten::sign", a); }
inline Tensor abs(const Tensor& a) { KILN_F(Tensor, "aten::abs", a); }
inline Tensor sigmoid(const Tensor& a) { KILN_F(Tensor, "aten::sigmoid", a); }
inline Tensor square(const Tensor& a) { return mul(a, a); }
inline Tensor reciprocal(const Tensor& a) { KILN_F(Tensor, "aten::reciprocal", a); }
inline Tensor digamma(const Tensor& a) { KILN_F(Tensor, "aten::digamma", a); }
inline Tensor floor_(const Tensor& a) { KILN_F(Tensor, "aten::floor", a); }
inline Tensor trunc_(const Tensor& a) { KILN_F(Tensor, "aten::trunc", a); }
inline Tensor isnan(const Tensor& a) { KILN_F(Tensor, "aten::isnan", a); }
inline Tensor isfinite(const Tensor& a) { KILN_F(Tensor, "aten::isfinite", a); }
inline Tensor eq(const Tensor& a, const Tensor& b) { KILN_F(Tensor, "aten::eq.Tensor", a, b); }
inline Tensor eq(const Tensor& a, const Scalar& b) { KILN_F(Tensor, "aten::eq.Scalar", a, b); }
inline Tensor ne(const Tensor& a, const Scalar& b) { KILN_F(Tensor, "aten::ne.Scalar", a, b); }
inline Tensor lt(const Tensor& a, const Tensor& b) { KILN_F(Tensor, "aten::lt.Tensor", a, b); }
inline Tensor gt(const Tensor& a, const Tensor& b) { KILN_F(Tensor, "aten::gt.Tensor", a, b); }
inline Tensor ge(const Tensor& a, const Tensor& b) { KILN_F(Tensor, "aten::ge.Tensor", a, b); }
inline Tensor le(const Tensor& a, const Tensor& b) { KILN_F(Tensor, "aten::le.Tensor", a, b); }
inline Tensor lt(const Tensor& a, const Scalar& b) { KILN_F(Tensor, "aten::lt.Scalar", a, b); }
inline Tensor gt(const Tensor& a, const Scalar& b) { KILN_F(Tensor, "aten::gt.Scalar", a, b); }
inline Tensor ge(const Tensor& a, const Scalar& b) { KILN_F(Tensor, "aten::ge.Scalar", a, b); }
inline Tensor le(const Tensor& a, const Scalar& b) { KILN_F(Tensor, "aten::le.Scalar", a, b); }
inline Tensor logical_and(const Tensor& a, const Tensor& b) { KILN_F(Tensor, "aten::logical_and", a, b); }
inline Tensor logical_or(const Tensor& a, const Tensor& b) { KILN_F(Tensor, "aten::logical_or", a, b); }
inline Tensor logical_not(const Tensor& a) { KILN_F(Tensor, "aten::logical_not", a); }
inline Tensor where(const Tensor& c, const Tensor& a, const Tensor& b) { return ops::where(c, a, b); }
inline Tensor where(const Tensor& c, const Tensor& a, const Scalar& b) {
  KILN_F(Tensor, "aten::where.ScalarOther", c, a, b);
}
inline Tensor where(const Tensor& c, const Scalar& a, const Tensor& b) {
  KILN_F(Tensor, "aten::where.ScalarSelf", c, a, b);
}
inline Tensor masked_fill(const Tensor& t, const Tensor& m, const Scalar& v) { return ops::masked_fill(t, m, v); }
inline Tensor to(const Tensor& t, ScalarType d) { return ops::to_dtype(t, d); }
inline Tensor zeros(const SymDimVector& sizes, ScalarType dtype, Device device = Device()) {
  return ops::full(SymList(sizes.begin(), sizes.end()), 0, dtype, device);
}
inline Tensor zeros_like(const Tensor& t) { return ops::zeros_like(t); }
inline Tensor sum(const Tensor& t, const IntList& dims, bool keepdim = false) { return ops::sum(t, dims, keepdim); }
inline Tensor sum_all(const Tensor& t) { return ops::sum(t, std::nullopt); }
inline Tensor expand(const Tensor& t, const SymDimVector& sizes) { return ops::expand(t, SymList(sizes.begin(), sizes.end())); }
inline Tensor reshape(const Tensor& t, const SymDimVector& sizes) { return ops::reshape(t, SymList(sizes.begin(), sizes.end())); }
inline Tensor mm(const Tensor& a, const Tensor& b) { return ops::mm(a, b); }
inline Tensor narrow(const Tensor& a, int64_t dim, int64_t start, int64_t length) {
  KILN_F(Tensor, "aten::narrow", a, dim, SymInt(start), SymInt(length));
}
inline Tensor ones_like(const Tensor& a) { return ops::full(SymList(a->sym_sizes().begin(), a->sym_sizes().end()), 1, a.dtype(), a.device()); }
inline Tensor cumprod(const Tensor& a, int64_t dim) { KILN_F(Tensor, "aten::cumprod", a, dim, std::optional<ScalarType>()); }
inline Tensor t(const Tensor& a) { return ops::transpose(a, 0, 1); }

// Normalises `dims` against `ndim` (empty or None: all dims), sorted.
IntList NormalizeDims(const std::optional<IntList>& dims, int64_t ndim);
// A reduction's gradient brought back to the input's shape: re-insert reduced dims, expand.
Tensor ExpandReduced(const Tensor& grad, const SymDimVector& input_sizes, const IntList& dims, bool keepdim);
// Number of elements a reduction over `dims` combined.
SymInt ReducedCount(const SymDimVector& sizes, const IntList& dims);
// grad placed at the positions a max/min/sort selected: zeros with grad scattered at indices.
Tensor ValueSelectingBackward(const Tensor& grad, int64_t dim, const Tensor& indices, const SymDimVector& sizes,
                              bool keepdim);

}  // namespace kiln::autograd::formulas
