// tensor/dim_order.h: the insertion sort that orders dims by their operands' strides.
//
// Three places order dims as they lie in memory: ElementwiseIter's loop order (loops.cc), a new
// elementwise output's layout (ops/common.cc) and a reduction's reduced dims (ops/reduce_more.cc).
// Each compares two dims by the strides it has, and a comparison may not decide (a broadcast dim
// tells nothing), so the order is not a strict weak ordering and std::sort does not apply. PyTorch's
// TensorIterator::reorder_dimensions sorts by insertion, so that undecided pairs keep the order
// they came in; kiln matches its layouts by sorting the same way.
#pragma once

#include <cstddef>
#include <utility>

namespace kiln {

// Sorts `dims` in place. Each dim, in turn, is compared with the dims before it, nearest first:
// compare(earlier, dim) > 0 swaps the two (the dim goes on from the earlier one's place), < 0
// stops (the dim stays), 0 does not say and asks the next earlier dim, so a dim may swap past
// dims it is undecided with, as in PyTorch.
template <typename Dims, typename Compare>
void InsertionSortDims(Dims& dims, const Compare& compare) {
  for (size_t i = 1; i < dims.size(); ++i) {
    size_t at = i;  // where the dim that started at i is now
    for (size_t j = i; j-- > 0;) {
      const int c = compare(dims[j], dims[at]);
      if (c > 0) {
        std::swap(dims[j], dims[at]);
        at = j;
      } else if (c < 0) {
        break;
      }
    }
  }
}

}  // namespace kiln
