// inductor/lowering/nn.h: lowerings of library-kernel ops -- the matmul template (max-autotune's
// generated alternative to the BLAS call) and 2-d max pooling with indices, with its backward.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "inductor/ir/values.h"
#include "inductor/lowering/reductions.h"

namespace kiln::inductor::lowering {

// out[i, j] = alpha * sum_k a[i, k] * b[k, j] (+ beta * bias, broadcast): a Reduction over
// [M, N] x K (its inner loop walks k: vectorised when a's rows and b's columns are contiguous, as
// x @ w.t() has them) and its value, whose epilogue the bias and any pointwise op after it join,
// in one kernel. float32 and float64 only (Fallback otherwise).
std::shared_ptr<ir::Pointwise> MatmulTemplate(ScalarType dtype, const ValuePtr& a, const ValuePtr& b,
                                              const ValuePtr& bias, double beta, double alpha);

// max_pool2d_with_indices with windows `kernel` and `stride` (2 each; padding or dilation fall
// back): each output the maximum of its window, unrolled,
// and the flat index (h * W + w) of the first maximum; NaN wins, as in PyTorch's kernel. ceil_mode's
// windows past the input fall back. A costly lazy x is realized first (read k*k times per output).
// The values and the indices are one group (one kernel).
std::pair<std::shared_ptr<ir::Pointwise>, std::shared_ptr<ir::Pointwise>> MaxPool2dWithIndices(
    GraphContext* graph, ScalarType values_dtype, std::vector<int64_t> values_shape, ScalarType indices_dtype,
    std::vector<int64_t> indices_shape, ValuePtr x, const std::vector<int64_t>& kernel,
    const std::vector<int64_t>& stride, const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation,
    bool ceil_mode);

// Its backward for windows that tile the input exactly (stride = kernel, no padding or dilation;
// Fallback otherwise): every input element lies in one window, so the gradient is computed over
// [..., OH, kh, OW, kw] (element (oh, i, ow, j) is input row oh * kh + i, column ow * kw + j): the
// window's gradient where its index names this element, else 0. That buffer, realized
// contiguously, is the [..., H, W] result.
std::shared_ptr<ir::Buffer> MaxPool2dWithIndicesBackward(GraphContext* graph, ScalarType dtype,
                                                         std::vector<int64_t> shape, const ValuePtr& grad,
                                                         const ValuePtr& x, const std::vector<int64_t>& kernel,
                                                         const std::vector<int64_t>& stride,
                                                         const std::vector<int64_t>& padding,
                                                         const std::vector<int64_t>& dilation, const ValuePtr& indices);

}  // namespace kiln::inductor::lowering
