// tensor/ops.h: the typed C++ API over the dispatcher (kiln::ops::add(a, b), ...).
//
// Each function calls its op through the dispatcher, so autograd, tracing and fake tensors see
// calls made from C++ kernels and composites exactly as calls made from Python.
#pragma once

#include <optional>
#include <string>
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

// Joining, indexing, reordering and sampling (tensor/ops/index.cc, shape_ops.cc, ternary.cc, random.cc).
using TensorPair = std::tuple<Tensor, Tensor>;
inline Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0) { KILN_CALL(Tensor, "aten::cat", tensors, dim); }
inline Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0) {
  KILN_CALL(Tensor, "aten::stack", tensors, dim);
}
inline std::vector<Tensor> split(const Tensor& t, const SymInt& split_size, int64_t dim = 0) {
  KILN_CALL(std::vector<Tensor>, "aten::split.Tensor", t, split_size, dim);
}
inline std::vector<Tensor> chunk(const Tensor& t, int64_t chunks, int64_t dim = 0) {
  KILN_CALL(std::vector<Tensor>, "aten::chunk", t, chunks, dim);
}
inline Tensor gather(const Tensor& t, int64_t dim, const Tensor& index) {
  KILN_CALL(Tensor, "aten::gather", t, dim, index, false);
}
inline Tensor index_select(const Tensor& t, int64_t dim, const Tensor& index) {
  KILN_CALL(Tensor, "aten::index_select", t, dim, index);
}
inline Tensor index(const Tensor& t, const OptionalTensorList& indices) {
  KILN_CALL(Tensor, "aten::index.Tensor", t, indices);
}
inline Tensor& index_put_(Tensor& t, const OptionalTensorList& indices, const Tensor& values, bool accumulate = false) {
  CallOp<Tensor>(KILN_OP("aten::index_put_"), t, indices, values, accumulate);
  return t;
}
inline Tensor masked_fill(const Tensor& t, const Tensor& mask, const Scalar& value) {
  KILN_CALL(Tensor, "aten::masked_fill.Scalar", t, mask, value);
}
inline Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  KILN_CALL(Tensor, "aten::where.self", cond, a, b);
}
inline Tensor nonzero(const Tensor& t) { KILN_CALL(Tensor, "aten::nonzero", t); }
inline TensorPair sort(const Tensor& t, int64_t dim = -1, bool descending = false) {
  KILN_CALL(TensorPair, "aten::sort", t, dim, descending);
}
inline TensorPair topk(const Tensor& t, int64_t k, int64_t dim = -1, bool largest = true) {
  KILN_CALL(TensorPair, "aten::topk", t, SymInt(k), dim, largest, true);
}
inline Tensor clamp(const Tensor& t, std::optional<Scalar> min, std::optional<Scalar> max) {
  KILN_CALL(Tensor, "aten::clamp", t, min, max);
}
inline Tensor cumsum(const Tensor& t, int64_t dim, std::optional<ScalarType> dtype = std::nullopt) {
  KILN_CALL(Tensor, "aten::cumsum", t, dim, dtype);
}
inline Tensor tril(const Tensor& t, int64_t diagonal = 0) { KILN_CALL(Tensor, "aten::tril", t, diagonal); }
inline Tensor triu(const Tensor& t, int64_t diagonal = 0) { KILN_CALL(Tensor, "aten::triu", t, diagonal); }
inline Tensor flip(const Tensor& t, const IntList& dims) { KILN_CALL(Tensor, "aten::flip", t, dims); }
inline Tensor constant_pad_nd(const Tensor& t, const std::vector<SymInt>& pad, const Scalar& value = 0) {
  KILN_CALL(Tensor, "aten::constant_pad_nd", t, pad, value);
}
inline Tensor rand(const std::vector<SymInt>& size, ScalarType dtype, std::optional<Generator> gen = std::nullopt) {
  KILN_CALL(Tensor, "aten::rand.generator", size, gen, std::optional<ScalarType>(dtype), std::optional<Layout>(),
            std::optional<Device>(), std::optional<bool>());
}
inline Tensor randn(const std::vector<SymInt>& size, ScalarType dtype, std::optional<Generator> gen = std::nullopt) {
  KILN_CALL(Tensor, "aten::randn.generator", size, gen, std::optional<ScalarType>(dtype), std::optional<Layout>(),
            std::optional<Device>(), std::optional<bool>());
}
inline Tensor& uniform_(Tensor& t, double from = 0, double to = 1, std::optional<Generator> gen = std::nullopt) {
  CallOp<Tensor>(KILN_OP("aten::uniform_"), t, from, to, gen);
  return t;
}
inline Tensor& normal_(Tensor& t, double mean = 0, double std = 1, std::optional<Generator> gen = std::nullopt) {
  CallOp<Tensor>(KILN_OP("aten::normal_"), t, mean, std, gen);
  return t;
}
inline Tensor bernoulli(const Tensor& t, double p, std::optional<Generator> gen = std::nullopt) {
  KILN_CALL(Tensor, "aten::bernoulli.p", t, p, gen);
}

// Backward ops (tensor/ops/activation_backward.cc, norm_backward.cc, conv_pool_backward.cc,
// loss_backward.cc): what autograd's derivative formulas call. A three-output op returns an
// undefined tensor where output_mask is false.
using TensorTriple = std::tuple<Tensor, Tensor, Tensor>;
using Mask3 = std::vector<bool>;
inline Tensor threshold_backward(const Tensor& grad_output, const Tensor& self, const Scalar& threshold) {
  KILN_CALL(Tensor, "aten::threshold_backward", grad_output, self, threshold);
}
inline Tensor gelu_backward(const Tensor& grad_output, const Tensor& self, const std::string& approximate = "none") {
  KILN_CALL(Tensor, "aten::gelu_backward", grad_output, self, approximate);
}
inline Tensor sigmoid_backward(const Tensor& grad_output, const Tensor& output) {
  KILN_CALL(Tensor, "aten::sigmoid_backward", grad_output, output);
}
inline Tensor tanh_backward(const Tensor& grad_output, const Tensor& output) {
  KILN_CALL(Tensor, "aten::tanh_backward", grad_output, output);
}
inline Tensor silu_backward(const Tensor& grad_output, const Tensor& self) {
  KILN_CALL(Tensor, "aten::silu_backward", grad_output, self);
}
inline Tensor leaky_relu_backward(const Tensor& grad_output, const Tensor& self, const Scalar& negative_slope,
                                  bool self_is_result) {
  KILN_CALL(Tensor, "aten::leaky_relu_backward", grad_output, self, negative_slope, self_is_result);
}
inline Tensor hardtanh_backward(const Tensor& grad_output, const Tensor& self, const Scalar& min_val,
                                const Scalar& max_val) {
  KILN_CALL(Tensor, "aten::hardtanh_backward", grad_output, self, min_val, max_val);
}
inline Tensor elu_backward(const Tensor& grad_output, const Scalar& alpha, const Scalar& scale,
                           const Scalar& input_scale, bool is_result, const Tensor& self_or_result) {
  KILN_CALL(Tensor, "aten::elu_backward", grad_output, alpha, scale, input_scale, is_result, self_or_result);
}
inline Tensor softplus_backward(const Tensor& grad_output, const Tensor& self, const Scalar& beta,
                                const Scalar& threshold) {
  KILN_CALL(Tensor, "aten::softplus_backward", grad_output, self, beta, threshold);
}
inline Tensor hardsigmoid_backward(const Tensor& grad_output, const Tensor& self) {
  KILN_CALL(Tensor, "aten::hardsigmoid_backward", grad_output, self);
}
inline Tensor hardswish_backward(const Tensor& grad_output, const Tensor& self) {
  KILN_CALL(Tensor, "aten::hardswish_backward", grad_output, self);
}
inline Tensor mish_backward(const Tensor& grad_output, const Tensor& self) {
  KILN_CALL(Tensor, "aten::mish_backward", grad_output, self);
}
inline Tensor logit_backward(const Tensor& grad_output, const Tensor& self, std::optional<double> eps = std::nullopt) {
  KILN_CALL(Tensor, "aten::logit_backward", grad_output, self, eps);
}
inline Tensor _softmax_backward_data(const Tensor& grad_output, const Tensor& output, int64_t dim,
                                     ScalarType input_dtype) {
  KILN_CALL(Tensor, "aten::_softmax_backward_data", grad_output, output, dim, input_dtype);
}
inline Tensor _log_softmax_backward_data(const Tensor& grad_output, const Tensor& output, int64_t dim,
                                         ScalarType input_dtype) {
  KILN_CALL(Tensor, "aten::_log_softmax_backward_data", grad_output, output, dim, input_dtype);
}
inline TensorTriple native_batch_norm_backward(const Tensor& grad_out, const Tensor& input, const OptTensor& weight,
                                               const OptTensor& running_mean, const OptTensor& running_var,
                                               const OptTensor& save_mean, const OptTensor& save_invstd, bool train,
                                               double eps, const Mask3& output_mask) {
  KILN_CALL(TensorTriple, "aten::native_batch_norm_backward", grad_out, input, weight, running_mean, running_var,
            save_mean, save_invstd, train, eps, output_mask);
}
inline TensorTriple native_layer_norm_backward(const Tensor& grad_out, const Tensor& input,
                                               const std::vector<SymInt>& normalized_shape, const Tensor& mean,
                                               const Tensor& rstd, const OptTensor& weight, const OptTensor& bias,
                                               const Mask3& output_mask) {
  KILN_CALL(TensorTriple, "aten::native_layer_norm_backward", grad_out, input, normalized_shape, mean, rstd, weight,
            bias, output_mask);
}
inline TensorTriple native_group_norm_backward(const Tensor& grad_out, const Tensor& input, const Tensor& mean,
                                               const Tensor& rstd, const OptTensor& weight, const SymInt& N,
                                               const SymInt& C, const SymInt& HxW, int64_t group,
                                               const Mask3& output_mask) {
  KILN_CALL(TensorTriple, "aten::native_group_norm_backward", grad_out, input, mean, rstd, weight, N, C, HxW, group,
            output_mask);
}
inline TensorTriple convolution_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                                         const std::optional<std::vector<SymInt>>& bias_sizes,
                                         const std::vector<SymInt>& stride, const std::vector<SymInt>& padding,
                                         const std::vector<SymInt>& dilation, bool transposed,
                                         const std::vector<SymInt>& output_padding, const SymInt& groups,
                                         const Mask3& output_mask) {
  KILN_CALL(TensorTriple, "aten::convolution_backward", grad_output, input, weight, bias_sizes, stride, padding,
            dilation, transposed, output_padding, groups, output_mask);
}
inline Tensor embedding_dense_backward(const Tensor& grad_output, const Tensor& indices, const SymInt& num_weights,
                                       const SymInt& padding_idx, bool scale_grad_by_freq) {
  KILN_CALL(Tensor, "aten::embedding_dense_backward", grad_output, indices, num_weights, padding_idx,
            scale_grad_by_freq);
}
inline Tensor nll_loss_backward(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                                const OptTensor& weight, int64_t reduction, const SymInt& ignore_index,
                                const Tensor& total_weight) {
  KILN_CALL(Tensor, "aten::nll_loss_backward", grad_output, self, target, weight, reduction, ignore_index,
            total_weight);
}
inline Tensor nll_loss2d_backward(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                                  const OptTensor& weight, int64_t reduction, const SymInt& ignore_index,
                                  const Tensor& total_weight) {
  KILN_CALL(Tensor, "aten::nll_loss2d_backward", grad_output, self, target, weight, reduction, ignore_index,
            total_weight);
}
inline Tensor max_pool2d_with_indices_backward(const Tensor& grad_output, const Tensor& self,
                                               const IntList& kernel_size, const IntList& stride,
                                               const IntList& padding, const IntList& dilation, bool ceil_mode,
                                               const Tensor& indices) {
  KILN_CALL(Tensor, "aten::max_pool2d_with_indices_backward", grad_output, self, kernel_size, stride, padding,
            dilation, ceil_mode, indices);
}
inline Tensor avg_pool2d_backward(const Tensor& grad_output, const Tensor& self, const IntList& kernel_size,
                                  const IntList& stride, const IntList& padding, bool ceil_mode,
                                  bool count_include_pad, std::optional<int64_t> divisor_override) {
  KILN_CALL(Tensor, "aten::avg_pool2d_backward", grad_output, self, kernel_size, stride, padding, ceil_mode,
            count_include_pad, divisor_override);
}
inline Tensor _adaptive_avg_pool2d_backward(const Tensor& grad_output, const Tensor& self) {
  KILN_CALL(Tensor, "aten::_adaptive_avg_pool2d_backward", grad_output, self);
}
inline Tensor mse_loss_backward(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                                int64_t reduction) {
  KILN_CALL(Tensor, "aten::mse_loss_backward", grad_output, self, target, reduction);
}
inline Tensor smooth_l1_loss_backward(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                                      int64_t reduction, double beta) {
  KILN_CALL(Tensor, "aten::smooth_l1_loss_backward", grad_output, self, target, reduction, beta);
}
inline Tensor huber_loss_backward(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                                  int64_t reduction, double delta) {
  KILN_CALL(Tensor, "aten::huber_loss_backward", grad_output, self, target, reduction, delta);
}
inline Tensor binary_cross_entropy_backward(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                                            const OptTensor& weight = std::nullopt, int64_t reduction = 1) {
  KILN_CALL(Tensor, "aten::binary_cross_entropy_backward", grad_output, self, target, weight, reduction);
}
inline Tensor native_dropout_backward(const Tensor& grad_output, const Tensor& mask, double scale) {
  KILN_CALL(Tensor, "aten::native_dropout_backward", grad_output, mask, scale);
}

#undef KILN_CALL

}  // namespace kiln::ops
