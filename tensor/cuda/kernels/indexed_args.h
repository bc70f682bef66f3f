// tensor/cuda/kernels/indexed_args.h: the parameter block of the indexed-walk kernels (indexed.cu),
// shared with the host code that fills it (tensor/ops/index.cc). Plain data, passed by value.
//
// The walk is PyTorch's TensorIterator for index/index_put_/gather/scatter: over `shape`, element e
// at coordinates c has self's offset sum(c * self_stride) + sum_j index_j[c . index_stride[j]] *
// indexed_stride[j] and the other operand's (the result read into, or the values written from)
// sum(c * other_stride), all in elements.
#pragma once

#include <stdint.h>

namespace kiln {

constexpr int kIndexedMaxDims = 12;
constexpr int kIndexedMaxIndices = 6;

struct IndexedLaunch {
  int32_t ndim, nindices;
  int32_t wrap_negative;  // advanced indexing counts from the end; gather/scatter do not
  int32_t error_code;
  int32_t* error_word;
  int64_t numel;
  int64_t shape[kIndexedMaxDims];
  int64_t self_stride[kIndexedMaxDims];
  int64_t other_stride[kIndexedMaxDims];
  int64_t index_stride[kIndexedMaxIndices][kIndexedMaxDims];
  const int64_t* index[kIndexedMaxIndices];
  int64_t indexed_size[kIndexedMaxIndices];
  int64_t indexed_stride[kIndexedMaxIndices];
  void* self;
  void* other;
};
static_assert(sizeof(IndexedLaunch) <= 4096, "a kernel's parameters must fit in 4 KB");

}  // namespace kiln
