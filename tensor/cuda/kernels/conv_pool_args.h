// tensor/cuda/kernels/conv_pool_args.h: the parameter blocks of the convolution and pooling kernels
// (conv_pool.cu), shared with the host code that fills them (tensor/ops/conv_pool_cuda.cc). Plain
// data, passed by value.
#pragma once

#include <stdint.h>

namespace kiln {

// One 2-D convolution's unfolding over `batch` images (tensor/ops/conv_pool.h's Geom): image
// [batch, C, H, W] and its column matrix [C * kh * kw, batch * oh * ow] (row (c * kh + i) * kw + j,
// column n * oh * ow + y * ow + x), both contiguous. im2col reads `src` = image and writes `dst` =
// columns; col2im reads the columns and writes the image, each pixel the sum of its columns.
struct ConvColsArgs {
  const void* src;
  void* dst;
  int64_t batch, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
};

// A 2-D pooling over `planes` contiguous [H, W] planes into [oh, ow] ones. Forward: src = input, dst
// = output (and `indices`, max pooling: each output's position h * W + w in its plane). Backward:
// src = grad_output, dst = grad_input (and `indices` read). divisor > 0 overrides average pooling's.
struct PoolArgs {
  const void* src;
  void* dst;
  int64_t* indices;
  int64_t planes, H, W, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
  int64_t divisor;
  int32_t count_include_pad;
  int32_t* error_word;  // max pooling's backward: an index outside its plane
  int32_t error_code;
};

}  // namespace kiln
