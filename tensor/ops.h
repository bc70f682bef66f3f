// tensor/ops.h: the typed C++ API over the dispatcher (kiln::ops::add(a, b), ...).
//
// Each function calls its op through the dispatcher, so autograd, tracing and fake tensors see
// calls made from C++ kernels and composites exactly as calls made from Python.
#pragma once

#include <optional>
#include <tuple>
#include <vector>

#include "tensor/dispatcher.h"

namespace kiln::ops {

using OptTensor = std::optional<Tensor>;
using IntList = std::vector<int64_t>;

#define KILN_CALL(RET, NAME, ...) return CallOp<RET>(KILN_OP(NAME), __VA_ARGS__)

// Creation.
inline Tensor empty(const std::vector<SymInt>& size, ScalarType dtype, Device device = Device()) {
  KILN_CALL(Tensor, "aten::empty.memory_format", size, std::optional<ScalarType>(dtype),
            std::optional<Layout>(), std::optional<Device>(device), std::optional<bool>(),
            std::optional<MemoryFormat>());
}
inline Tensor full(const std::vector<SymInt>& size, const Scalar& v, ScalarType dtype, Device device = Device()) {
  KILN_CALL(Tensor, "aten::full", size, v, std::optional<ScalarType>(dtype), std::optional<Layout>(),
            std::optional<Device>(device), std::optional<bool>());
}
inline Tensor zeros_like(const Tensor& t) {
  KILN_CALL(Tensor, "aten::zeros_like", t, std::optional<ScalarType>(), std::optional<Layout>(),
            std::optional<Device>(), std::optional<bool>(), std::optional<MemoryFormat>());
}
inline Tensor scalar_tensor(const Scalar& s, ScalarType dtype, Device device = Device()) {
  KILN_CALL(Tensor, "aten::scalar_tensor", s, std::optional<ScalarType>(dtype), std::optional<Layout>(),
            std::optional<Device>(device), std::optional<bool>());
}

// Copies and conversions.
inline Tensor& copy_(Tensor& self, const Tensor& src, bool non_blocking = false) {
  CallOp<Tensor>(KILN_OP("aten::copy_"), self, src, non_blocking);
  return self;
}
inline Tensor clone(const Tensor& t, std::optional<MemoryFormat> mf = std::nullopt) {
  KILN_CALL(Tensor, "aten::clone", t, mf);
}
inline Tensor contiguous(const Tensor& t) { return t.is_contiguous() ? t : clone(t, MemoryFormat::Contiguous); }
inline Tensor to_dtype(const Tensor& t, ScalarType dtype) {
  if (t.dtype() == dtype) return t;
  KILN_CALL(Tensor, "aten::_to_copy", t, std::optional<ScalarType>(dtype), std::optional<Layout>(),
            std::optional<Device>(), std::optional<bool>(), false, std::optional<MemoryFormat>());
}
inline Tensor& fill_(Tensor& self, const Scalar& v) {
  CallOp<Tensor>(KILN_OP("aten::fill_.Scalar"), self, v);
  return self;
}

// Views.
inline Tensor view(const Tensor& t, const std::vector<SymInt>& size) { KILN_CALL(Tensor, "aten::view", t, size); }
inline Tensor reshape(const Tensor& t, const std::vector<SymInt>& size) { KILN_CALL(Tensor, "aten::reshape", t, size); }
inline Tensor expand(const Tensor& t, const std::vector<SymInt>& size) { KILN_CALL(Tensor, "aten::expand", t, size, false); }
inline Tensor permute(const Tensor& t, const IntList& dims) { KILN_CALL(Tensor, "aten::permute", t, dims); }
inline Tensor transpose(const Tensor& t, int64_t a, int64_t b) { KILN_CALL(Tensor, "aten::transpose.int", t, a, b); }
inline Tensor unsqueeze(const Tensor& t, int64_t d) { KILN_CALL(Tensor, "aten::unsqueeze", t, d); }
inline Tensor squeeze(const Tensor& t, int64_t d) { KILN_CALL(Tensor, "aten::squeeze.dim", t, d); }
inline Tensor select(const Tensor& t, int64_t d, const SymInt& i) { KILN_CALL(Tensor, "aten::select.int", t, d, i); }
inline Tensor slice(const Tensor& t, int64_t d, std::optional<SymInt> start, std::optional<SymInt> end, const SymInt& step = 1) {
  KILN_CALL(Tensor, "aten::slice.Tensor", t, d, start, end, step);
}
inline Tensor as_strided(const Tensor& t, const std::vector<SymInt>& size, const std::vector<SymInt>& stride,
                         std::optional<SymInt> offset = std::nullopt) {
  KILN_CALL(Tensor, "aten::as_strided", t, size, stride, offset);
}

// Pointwise.
inline Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = 1) { KILN_CALL(Tensor, "aten::add.Tensor", a, b, alpha); }
inline Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha = 1) { KILN_CALL(Tensor, "aten::add.Scalar", a, b, alpha); }
inline Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1) { KILN_CALL(Tensor, "aten::sub.Tensor", a, b, alpha); }
inline Tensor mul(const Tensor& a, const Tensor& b) { KILN_CALL(Tensor, "aten::mul.Tensor", a, b); }
inline Tensor mul(const Tensor& a, const Scalar& b) { KILN_CALL(Tensor, "aten::mul.Scalar", a, b); }
inline Tensor div(const Tensor& a, const Tensor& b) { KILN_CALL(Tensor, "aten::div.Tensor", a, b); }
inline Tensor div(const Tensor& a, const Scalar& b) { KILN_CALL(Tensor, "aten::div.Scalar", a, b); }
inline Tensor& add_(Tensor& a, const Tensor& b, const Scalar& alpha = 1) {
  CallOp<Tensor>(KILN_OP("aten::add_.Tensor"), a, b, alpha);
  return a;
}

// Reductions.
inline Tensor sum(const Tensor& t, std::optional<IntList> dim, bool keepdim = false,
                  std::optional<ScalarType> dtype = std::nullopt) {
  KILN_CALL(Tensor, "aten::sum.dim_IntList", t, dim, keepdim, dtype);
}

// Linear algebra (tensor/ops/linalg.cc).
inline Tensor mm(const Tensor& a, const Tensor& b) { KILN_CALL(Tensor, "aten::mm", a, b); }
inline Tensor bmm(const Tensor& a, const Tensor& b) { KILN_CALL(Tensor, "aten::bmm", a, b); }
inline Tensor matmul(const Tensor& a, const Tensor& b) { KILN_CALL(Tensor, "aten::matmul", a, b); }
inline Tensor addmm(const Tensor& self, const Tensor& m1, const Tensor& m2, const Scalar& beta = 1,
                    const Scalar& alpha = 1) {
  KILN_CALL(Tensor, "aten::addmm", self, m1, m2, beta, alpha);
}
inline Tensor linear(const Tensor& input, const Tensor& weight, const OptTensor& bias = std::nullopt) {
  KILN_CALL(Tensor, "aten::linear", input, weight, bias);
}

// Convolution, pooling and normalization (tensor/ops/conv_pool.cc, norm.cc).
inline Tensor conv2d(const Tensor& input, const Tensor& weight, const OptTensor& bias = std::nullopt,
                     const IntList& stride = {1}, const IntList& padding = {0}, const IntList& dilation = {1},
                     int64_t groups = 1) {
  KILN_CALL(Tensor, "aten::conv2d", input, weight, bias, stride, padding, dilation, SymInt(groups));
}
inline Tensor max_pool2d(const Tensor& self, const IntList& kernel_size, const IntList& stride = {},
                         const IntList& padding = {0}, const IntList& dilation = {1}, bool ceil_mode = false) {
  KILN_CALL(Tensor, "aten::max_pool2d", self, kernel_size, stride, padding, dilation, ceil_mode);
}
inline Tensor avg_pool2d(const Tensor& self, const IntList& kernel_size, const IntList& stride = {},
                         const IntList& padding = {0}, bool ceil_mode = false, bool count_include_pad = true,
                         std::optional<int64_t> divisor_override = std::nullopt) {
  KILN_CALL(Tensor, "aten::avg_pool2d", self, kernel_size, stride, padding, ceil_mode, count_include_pad,
            divisor_override);
}
inline Tensor adaptive_avg_pool2d(const Tensor& self, const IntList& output_size) {
  KILN_CALL(Tensor, "aten::adaptive_avg_pool2d", self, output_size);
}
inline Tensor batch_norm(const Tensor& input, const OptTensor& weight, const OptTensor& bias,
                         const OptTensor& running_mean, const OptTensor& running_var, bool training,
                         double momentum = 0.1, double eps = 1e-5) {
  KILN_CALL(Tensor, "aten::batch_norm", input, weight, bias, running_mean, running_var, training, momentum, eps,
            true);
}
inline Tensor layer_norm(const Tensor& input, const IntList& normalized_shape, const OptTensor& weight = std::nullopt,
                         const OptTensor& bias = std::nullopt, double eps = 1e-5) {
  KILN_CALL(Tensor, "aten::layer_norm", input, normalized_shape, weight, bias, eps, true);
}
inline Tensor group_norm(const Tensor& input, int64_t num_groups, const OptTensor& weight = std::nullopt,
                         const OptTensor& bias = std::nullopt, double eps = 1e-5) {
  KILN_CALL(Tensor, "aten::group_norm", input, num_groups, weight, bias, eps, true);
}

#undef KILN_CALL

}  // namespace kiln::ops
