// tensor/ops/conv_onednn.h: float32 convolutions through oneDNN (runtime/onednn/), forward and
// backward, for conv_pool.cc and conv_pool_backward.cc.
//
// Each call returns false, having written nothing, when oneDNN does not apply (not loaded or
// disabled, not float32 on the CPU, transposed, weights used at too few output positions to pay
// for their reorder, or oneDNN offers only its reference kernel for the shape); the caller then runs kiln's own im2col kernel. See Note [oneDNN convolutions].
#pragma once

#include "tensor/ops/conv_pool.h"

namespace kiln {

// out = conv(x, w) + bias for a plain 1-D or 2-D convolution: x, w, out (and bias, or null) float32
// CPU tensors of the convolution's shapes, any strides.
bool ConvolutionOneDnn(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& out, const ConvParams& p);

// The input and weight gradients of the same convolution given dy (its output's gradient): gi
// and gw (either may be null) float32 tensors of x's and w's shapes, any strides.
bool ConvolutionBackwardOneDnn(const Tensor& dy, const Tensor& x, const Tensor& w, const ConvParams& p,
                               const Tensor* gi, const Tensor* gw);

// How many convolution calls (forward, or backward with its gradients) oneDNN has run: tests check
// with it that the path they mean to cover is the one taken.
int64_t OneDnnConvolutionCalls();

}  // namespace kiln
