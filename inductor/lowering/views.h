// inductor/lowering/views.h: view ops as affine maps of indices (Note [Views as index maps]).
//
// Note [Views as index maps]: a view op (permute, t, transpose, expand, unsqueeze, squeeze, slice,
// select) maps each index of its output to an index of its input, affinely. Of a Buffer it is a
// strided Buffer over the same memory -- the map's image of the output's indices gives its strides
// and storage offset -- so it costs no kernel and no copy (an extern op receives it as a strided
// tensor); of a lazy value it is a Pointwise reading the value at the mapped indices, so a kernel
// that realizes it reads through the view. view/reshape, whose map depends on the input's strides,
// is a strided view of a buffer whose layout allows it (view()'s rule) and nothing else: of a lazy
// or a non-viewable value the graph realizes the value contiguously and lowers the node again.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "inductor/ir/affine.h"
#include "inductor/ir/values.h"

namespace kiln::inductor::lowering {

using IndexMap = std::function<std::vector<ir::Affine>(const std::vector<ir::Affine>&)>;

// x seen through `map` (output indices -> x's) with the output's dtype and shape.
std::shared_ptr<ir::Value> ViewOf(const std::shared_ptr<ir::Value>& x, ScalarType dtype, std::vector<int64_t> shape,
                                  const IndexMap& map);

// The aten view ops, each given the output's dtype and shape (the node's meta value) and the
// op's arguments; dimensions may be negative, as in aten.
std::shared_ptr<ir::Value> Permute(const std::shared_ptr<ir::Value>& x, ScalarType dtype, std::vector<int64_t> shape,
                                   const std::vector<int64_t>& dims);
std::shared_ptr<ir::Value> Transpose(const std::shared_ptr<ir::Value>& x, ScalarType dtype, std::vector<int64_t> shape,
                                     int64_t a, int64_t b);
std::shared_ptr<ir::Value> Expand(const std::shared_ptr<ir::Value>& x, ScalarType dtype, std::vector<int64_t> shape);
std::shared_ptr<ir::Value> Unsqueeze(const std::shared_ptr<ir::Value>& x, ScalarType dtype, std::vector<int64_t> shape,
                                     int64_t dim);
// `dims` unset: every size-1 dimension; a listed dimension of another size stays.
std::shared_ptr<ir::Value> Squeeze(const std::shared_ptr<ir::Value>& x, ScalarType dtype, std::vector<int64_t> shape,
                                   const std::optional<std::vector<int64_t>>& dims);
std::shared_ptr<ir::Value> Slice(const std::shared_ptr<ir::Value>& x, ScalarType dtype, std::vector<int64_t> shape,
                                 int64_t dim, std::optional<int64_t> start, int64_t step);
// view, _unsafe_view and reshape: x itself for the same shape, a strided Buffer over x's memory
// where x is a Buffer view() could view so (ViewOfUnrealized otherwise).
std::shared_ptr<ir::Value> View(const std::shared_ptr<ir::Value>& x, ScalarType dtype, std::vector<int64_t> shape);
std::shared_ptr<ir::Value> Select(const std::shared_ptr<ir::Value>& x, ScalarType dtype, std::vector<int64_t> shape,
                                  int64_t dim, int64_t index);

}  // namespace kiln::inductor::lowering
