// tensor/cuda/indexed.h: the indexed walk on CUDA (tensor/cuda/kernels/indexed.cu) behind advanced
// indexing (index, index_put_), gather and scatter: the op describes the walk as PyTorch's
// TensorIterator sees it (tensor/ops/index.cc builds it as for its CPU loops) and one launch runs it.
#pragma once

#include <string>
#include <vector>

#include "tensor/tensor_impl.h"

namespace kiln::cuda {

struct IndexedWalk {
  DimVector shape;                        // the walk's (the result's, or the index's)
  DimVector self_strides, other_strides;  // over `shape`, in elements (self's 0 along indexed dims)
  std::vector<Tensor> indices;            // int64 on the device, each viewed over `shape` by:
  std::vector<DimVector> index_strides;
  DimVector indexed_sizes, indexed_strides;  // each index's dim of self: its size and stride
  bool wrap_negative = false;                // index -1 is the last (advanced indexing)
};

enum class IndexedMode {
  kRead,   // other = self[indices] (index, gather): a bad index reads 0
  kWrite,  // self[indices] = other (index_put_, scatter): with repeats, one write wins
  kAdd,    // self[indices] += other with atomics (index_put_ accumulate, scatter_add): float32/64,
           // 16-bit floats, int32, int64; NotImplementedError naming `op` for other dtypes
};

// Runs the walk on self's device; `other` (same dtype) is the result or the values. An index out
// of range raises at the next synchronisation (runtime/cuda/device_errors.h) with `message`, an
// IndexError or (index_error false) a RuntimeError, "{}" standing for the index.
void LaunchIndexed(IndexedMode mode, const Tensor& self, const Tensor& other, const IndexedWalk& walk, const char* op,
                   bool index_error, const std::string& message);

}  // namespace kiln::cuda
