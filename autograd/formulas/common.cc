// autograd/formulas/common.cc: reduction helpers shared by the formula files.
#include "autograd/formulas/common.h"

#include <algorithm>

namespace kiln::autograd::formulas {

IntList NormalizeDims(const std::optional<IntList>& dims, int64_t ndim) {
  IntList out;
  if (!dims || dims->empty()) {
    for (int64_t d = 0; d < ndim; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : *dims) out.push_back(ndim == 0 ? 0 : WrapDim(d, ndim));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  if (ndim == 0) out.clear();
  return out;
}

Tensor ExpandReduced(const Tensor& grad, const SymDimVector& input_sizes, const IntList& dims, bool keepdim) {
  Tensor g = grad;
  if (!keepdim && !input_sizes.empty())
    for (int64_t d : dims) g = ops::unsqueeze(g, d);
  return expand(g, input_sizes);
}

SymInt ReducedCount(const SymDimVector& sizes, const IntList& dims) {
  SymInt n = 1;
  for (int64_t d : dims) n = n * sizes[d];
  return n;
}

Tensor ValueSelectingBackward(const Tensor& grad, int64_t dim, const Tensor& indices, const SymDimVector& sizes,
                              bool keepdim) {
  Tensor g = grad, idx = indices;
  if (!keepdim && !sizes.empty()) {
    g = ops::unsqueeze(g, dim);
    idx = ops::unsqueeze(idx, dim);
  }
  Tensor z = zeros(sizes, grad.dtype(), grad.device());
  if (sizes.empty()) return ops::reshape(g, {});
  return CallOp<Tensor>(KILN_OP("aten::scatter.src"), z, dim, idx, g);
}

}  // namespace kiln::autograd::formulas
