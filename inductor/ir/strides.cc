// inductor/ir/strides.cc: dense, gapped and expanded layouts (strides.h).
#include "inductor/ir/strides.h"

#include <algorithm>

#include "runtime/error.h"

namespace kiln::inductor::ir {

std::optional<std::vector<int>> DenseOrder(const std::vector<int64_t>& shape, const std::vector<int64_t>& stride) {
  if (stride.size() != shape.size()) return std::nullopt;
  const int n = static_cast<int>(shape.size());
  std::vector<int> order;
  for (int d = 0; d < n; ++d)
    if (shape[d] != 1) order.push_back(d);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return stride[a] > stride[b]; });
  for (int d = 0; d < n; ++d)
    if (shape[d] == 1) order.push_back(d);
  int64_t expected = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (shape[*it] != 1 && stride[*it] != expected) return std::nullopt;
    expected *= shape[*it];
  }
  return order;
}

std::optional<std::vector<int>> GappedOrder(const std::vector<int64_t>& shape, const std::vector<int64_t>& stride) {
  if (stride.size() != shape.size()) return std::nullopt;
  const int n = static_cast<int>(shape.size());
  for (int d = 0; d < n; ++d)
    if (shape[d] == 0) return std::nullopt;
  std::vector<int> order;
  for (int d = 0; d < n; ++d)
    if (shape[d] != 1) order.push_back(d);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return stride[a] > stride[b]; });
  int64_t extent = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (stride[*it] < extent) return std::nullopt;
    extent = stride[*it] * (shape[*it] - 1) + extent;
  }
  for (int d = 0; d < n; ++d)
    if (shape[d] == 1) order.push_back(d);
  return order;
}

std::set<int> ExpandedDims(const std::vector<int64_t>& shape, const std::vector<int64_t>& stride) {
  std::set<int> out;
  for (size_t d = 0; d < shape.size() && d < stride.size(); ++d)
    if (stride[d] == 0 && shape[d] != 1) out.insert(static_cast<int>(d));
  return out;
}

bool SameLayout(const std::vector<int64_t>& shape, const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return true;
  for (size_t d = 0; d < shape.size() && d < a.size() && d < b.size(); ++d)
    if (shape[d] != 1 && a[d] != b[d]) return false;
  return true;
}

std::vector<int64_t> SqueezedStrides(const std::vector<int64_t>& from_shape, const std::vector<int64_t>& from_stride,
                                     const std::vector<int64_t>& shape) {
  std::vector<int64_t> kept;
  for (size_t d = 0; d < from_shape.size(); ++d)
    if (from_shape[d] != 1) kept.push_back(from_stride[d]);
  std::vector<int64_t> out;
  size_t k = 0;
  for (int64_t size : shape) {
    if (size == 1) {
      out.push_back(1);
    } else {
      KILN_CHECK_VALUE(k < kept.size(), "squeezed strides: shape ", size, " has more dimensions above 1 than its source");
      out.push_back(kept[k++]);
    }
  }
  return out;
}

}  // namespace kiln::inductor::ir
