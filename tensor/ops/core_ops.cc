// tensor/ops/core_ops.cc: the list of core ATen ops (see core_ops.h and python/kiln/_decomp/README.md).
//
// The rule: an overload is core when PyTorch 2.13 tags it `core` in native_functions.yaml.
// Kiln adds the primitives below "kiln additions" that PyTorch leaves untagged but has no
// decomposition for into core aten ops either (special functions, bit-level ops and the random
// samplers that take a Generator). In-place and out= overloads are never core: functionalization
// maps them onto their functional op.
#include "tensor/ops/core_ops.h"

#include <unordered_set>

namespace kiln {
namespace {

const char* const kCoreOps[] = {
    // creation and copies
    "empty.memory_format", "empty_strided", "full", "scalar_tensor", "full_like", "arange.start_step", "clone",
    "_to_copy",
    // views
    "view", "as_strided", "permute", "expand", "squeeze.dim", "squeeze.dims", "unsqueeze", "select.int", "slice.Tensor",
    "diagonal", "alias", "split_with_sizes", "slice_scatter", "select_scatter", "copy", "fill.Scalar",
    // pointwise binary
    "add.Tensor", "add.Scalar", "sub.Tensor", "sub.Scalar", "mul.Tensor", "mul.Scalar", "div.Tensor", "div.Scalar",
    "div.Tensor_mode", "div.Scalar_mode", "remainder.Tensor", "remainder.Scalar", "fmod.Tensor", "fmod.Scalar",
    "eq.Tensor", "eq.Scalar", "ne.Tensor", "ne.Scalar", "lt.Tensor", "lt.Scalar", "le.Tensor", "le.Scalar",
    "gt.Tensor", "gt.Scalar", "ge.Tensor", "ge.Scalar", "bitwise_and.Tensor", "bitwise_and.Scalar",
    "bitwise_or.Tensor", "bitwise_or.Scalar", "bitwise_xor.Tensor", "bitwise_xor.Scalar", "maximum", "minimum",
    "logical_and", "logical_or", "logical_xor", "atan2", "pow.Tensor_Tensor", "pow.Tensor_Scalar", "pow.Scalar",
    "where.self", "clamp", "clamp.Tensor",
    // pointwise unary
    "exp", "log", "log2", "log10", "log1p", "expm1", "sqrt", "rsqrt", "sigmoid", "tanh", "sin", "cos", "tan", "asin",
    "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "neg", "abs", "sign", "reciprocal", "floor",
    "ceil", "round", "trunc", "relu", "logical_not", "bitwise_not", "isnan", "isinf",
    // activations
    "gelu", "leaky_relu", "hardtanh", "elu", "_softmax", "_log_softmax",
    // reductions
    "sum.dim_IntList", "mean", "mean.dim", "prod", "prod.dim_int", "amax", "amin", "max.dim", "min.dim", "argmax",
    "argmin", "any", "any.dim", "any.dims", "var.dim", "var.correction", "cumsum",
    // linear algebra, convolution, pooling, normalization
    "mm", "bmm", "addmm", "convolution", "max_pool2d_with_indices", "avg_pool2d", "_adaptive_avg_pool2d",
    "_native_batch_norm_legit", "_native_batch_norm_legit.no_stats", "_native_batch_norm_legit_no_training",
    "native_layer_norm", "native_group_norm", "embedding", "native_dropout",
    // indexing, shapes
    "cat", "gather", "scatter.src", "scatter.value", "scatter_add", "index_select", "index.Tensor", "index_put",
    "nonzero", "sort", "topk", "constant_pad_nd", "flip", "repeat",
    // random
    "rand", "randn", "randperm",
    // discrete Fourier transforms of real signals and back (tensor/ops/fft.cc)
    "_fft_r2c", "_fft_c2r",
    // backward ops
    "native_layer_norm_backward", "native_group_norm_backward", "convolution_backward",
    "max_pool2d_with_indices_backward", "avg_pool2d_backward", "_adaptive_avg_pool2d_backward",
    "embedding_dense_backward",
    // kiln additions (no decomposition into the ops above exists):
    //   special functions with no closed form over core ops (erfc: 1 - erf loses every digit of the tail)
    "erfc", "erfinv", "lgamma", "digamma",
    //   bit-level ops (the sign bit of -0.0 and NaN; shifts)
    "signbit", "bitwise_left_shift.Tensor", "bitwise_right_shift.Tensor",
    //   samplers that draw from an explicit Generator (the core rand/randn/randperm use the default one)
    "rand.generator", "randn.generator", "randperm.generator", "randint.low_generator",
    //   samplers whose draws a decomposition would change: compiled code calls the eager kernel,
    //   so one seed gives the same samples compiled and eager
    "multinomial",
    //   the LAPACK factorizations (tensor/ops/lapack.cc): no composition of core ops computes them
    "linalg_lu_factor_ex", "linalg_inv_ex", "_linalg_det", "_linalg_slogdet", "_linalg_solve_ex", "linalg_cholesky_ex",
    "linalg_qr", "_linalg_svd", "_linalg_eigh",
    //   reading the same bytes as another dtype: no composition of core ops reinterprets bits
    "view.dtype",
    //   complex numbers as pairs of reals and back, and conjugation (tensor/ops/complex.cc)
    "view_as_real", "view_as_complex", "conj_physical",
    //   fused attention (tensor/ops/attention.cc): its decomposition is the math path it replaces
    "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention_for_cpu_backward",
    //   the complex-to-complex Fourier transform (no composition of core ops computes it)
    "_fft_c2c",
};

// Core graph primitives that fx/ registers (symbolic-size reads and item()); the startup check of
// tensor/ops/register.cc cannot see them, so they are listed apart.
const char* const kCoreOpsOfLaterLayers[] = {
    "sym_size.int", "sym_stride.int", "sym_numel", "sym_storage_offset", "_local_scalar_dense",
};

}  // namespace

const std::vector<std::string>& CoreAtenOps() {
  static const std::vector<std::string>* ops = [] {
    auto* v = new std::vector<std::string>;
    for (const char* name : kCoreOps) v->push_back(std::string("aten::") + name);
    return v;
  }();
  return *ops;
}

bool IsCoreAtenOp(const std::string& full_name) {
  static const std::unordered_set<std::string>* set = [] {
    auto* s = new std::unordered_set<std::string>(CoreAtenOps().begin(), CoreAtenOps().end());
    for (const char* name : kCoreOpsOfLaterLayers) s->insert(std::string("aten::") + name);
    return s;
  }();
  return set->count(full_name) > 0;
}

}  // namespace kiln
