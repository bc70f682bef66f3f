// inductor/ir/strides.h: questions about strided layouts that kernel formation and the graph's
// outputs ask (Note [Output strides], Note [Expanded layouts] in python/kiln/_inductor/graph.py).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <vector>

namespace kiln::inductor::ir {

// The dimensions of a dense, non-overlapping layout from outermost to innermost in memory (size-1
// dimensions last, in order); nullopt when `stride` is none (expanded, gapped or overlapping).
std::optional<std::vector<int>> DenseOrder(const std::vector<int64_t>& shape, const std::vector<int64_t>& stride);

// The dimensions of a layout that keeps its elements apart with gaps between some (a view
// `v[:, ::2]`: each dimension's stride at least the extent of those inside it), outermost first;
// nullopt when it is not one (expanded, overlapping, or an empty tensor).
std::optional<std::vector<int>> GappedOrder(const std::vector<int64_t>& shape, const std::vector<int64_t>& stride);

// The dimensions along which a layout repeats elements (stride 0, size above 1).
std::set<int> ExpandedDims(const std::vector<int64_t>& shape, const std::vector<int64_t>& stride);

// Whether two stride lists address a tensor of this shape alike (size-1 dimensions' strides, and
// all strides of an empty tensor, never matter).
bool SameLayout(const std::vector<int64_t>& shape, const std::vector<int64_t>& a, const std::vector<int64_t>& b);

// The strides of a layout seen with `shape`, which differs from `from_shape` only in size-1
// dimensions (kept dimensions keep their strides; size-1 ones get 1).
std::vector<int64_t> SqueezedStrides(const std::vector<int64_t>& from_shape, const std::vector<int64_t>& from_stride,
                                     const std::vector<int64_t>& shape);

}  // namespace kiln::inductor::ir
