// tensor/cuda/kernels/loss_args.h: the parameter block of nll_loss_forward's kernel (loss.cu), shared
// with the host code that fills it (tensor/ops/reduce_cuda.cc). Plain data, passed by value.
#pragma once

#include <stdint.h>

namespace kiln {

constexpr int kNllThreads = 256;  // the reducing block

struct NllArgs {
  const void* x;
  int64_t x_batch_stride, x_class_stride;
  const void* target;
  int64_t target_stride;
  const void* weight;  // null: every class weighs 1
  int64_t batch, classes, ignore_index;
  void* out;
  int64_t out_stride;  // unreduced
  void* total_weight;  // reduced (null: left alone)
  int32_t reduction;   // 0 none (per sample), 1 mean, 2 sum
  int32_t* error_word;
  int32_t error_code;
};

}  // namespace kiln
