// tensor/ops/conv_cudnn.h: CUDA convolutions through cuDNN (runtime/cuda/cudnn.h), forward and
// backward, for conv_pool.cc and conv_pool_backward.cc; Note [cuDNN convolutions].
//
// Each call returns false, having written nothing, when cuDNN does not apply (not loaded,
// kiln.backends.cudnn.enabled is False, a dtype cuDNN lacks, a 3-D convolution, or no algorithm for
// the problem); the caller then runs kiln's own im2col kernels (tensor/ops/conv_pool_cuda.cc).
#pragma once

#include "tensor/ops/conv_pool.h"

namespace kiln {

// torch.backends.cudnn.enabled / deterministic, as Python sets them.
void SetCudnnEnabled(bool enabled);
void SetCudnnDeterministic(bool deterministic);

// out = conv(x, w) + bias for a 1-D or 2-D convolution, plain or transposed: CUDA tensors of the
// convolution's shapes, any strides, x, w and out of one dtype.
bool ConvolutionCudnn(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& out, const ConvParams& p);

// The input and weight gradients of the same convolution given dy: gi and gw (either may be null)
// tensors of x's and w's shapes, any strides.
bool ConvolutionBackwardCudnn(const Tensor& dy, const Tensor& x, const Tensor& w, const ConvParams& p, const Tensor* gi,
                              const Tensor* gw);

}  // namespace kiln
