// inductor/lowering/views.cc: view ops as affine maps of indices (Note [Views as index maps]).
#include "inductor/lowering/views.h"

#include <algorithm>
#include <set>
#include <utility>

#include "inductor/lowering/lazy.h"
#include "inductor/lowering/pointwise.h"
#include "runtime/error.h"
#include "tensor/ops/view_strides.h"

namespace kiln::inductor::lowering {
namespace {

using ir::Affine;

}  // namespace

std::shared_ptr<ir::Value> ViewOf(const std::shared_ptr<ir::Value>& x, ScalarType dtype, std::vector<int64_t> shape,
                                  const IndexMap& map) {
  std::vector<Affine> idx;
  for (size_t k = 0; k < shape.size(); ++k) idx.push_back(Affine::Var(static_cast<int>(k)));
  const std::vector<Affine> src = map(idx);
  if (x->kind() == ir::Value::Kind::kBuffer) {
    auto buf = std::static_pointer_cast<ir::Buffer>(x);
    Affine total(buf->offset());
    for (size_t d = 0; d < src.size() && d < buf->stride().size(); ++d) total += src[d].Scaled(buf->stride()[d]);
    std::vector<int64_t> strides;
    for (size_t k = 0; k < shape.size(); ++k) strides.push_back(total.Coeff(static_cast<int>(k)));
    return std::make_shared<ir::Buffer>(std::nullopt, dtype, std::move(shape), std::move(strides), total.offset(), buf);
  }
  ir::KernelDType(x->dtype());  // a lazy value of a dtype kernels cannot hold: its reader falls back
  ir::Tracer tracer;
  auto traced = std::make_shared<ir::Traced>();
  traced->inputs = {x};
  traced->body = std::make_shared<ir::Body>(tracer.Finish(tracer.Read(x->handle(), src)));
  auto out = std::make_shared<ir::Pointwise>(dtype, std::move(shape), std::move(traced));
  out->ops = x->ops;
  return out;
}

std::shared_ptr<ir::Value> Permute(const std::shared_ptr<ir::Value>& x, ScalarType dtype, std::vector<int64_t> shape,
                                   const std::vector<int64_t>& dims) {
  const size_t n = x->shape().size();
  std::vector<int64_t> wrapped;
  for (int64_t d : dims) wrapped.push_back(WrapDim(d, n));
  return ViewOf(x, dtype, std::move(shape), [&](const std::vector<Affine>& idx) {
    std::vector<Affine> src(n);
    for (size_t o = 0; o < wrapped.size(); ++o) src[wrapped[o]] = idx[o];
    return src;
  });
}

std::shared_ptr<ir::Value> Transpose(const std::shared_ptr<ir::Value>& x, ScalarType dtype, std::vector<int64_t> shape,
                                     int64_t a, int64_t b) {
  const size_t n = x->shape().size();
  a = WrapDim(a, n), b = WrapDim(b, n);
  return ViewOf(x, dtype, std::move(shape), [&](std::vector<Affine> idx) {
    if (!idx.empty()) std::swap(idx[a], idx[b]);
    return idx;
  });
}

std::shared_ptr<ir::Value> Expand(const std::shared_ptr<ir::Value>& x, ScalarType dtype, std::vector<int64_t> shape) {
  const std::vector<int64_t> in = x->shape(), out = shape;
  KILN_CHECK_VALUE(in.size() <= out.size(), "inductor: expand of ", in.size(), " dimensions to ", out.size());
  return ViewOf(x, dtype, std::move(shape), [&](const std::vector<Affine>& idx) {
    const size_t lead = out.size() - in.size();
    std::vector<Affine> src;
    for (size_t d = 0; d < in.size(); ++d) src.push_back(in[d] == 1 && out[lead + d] != 1 ? Affine(0) : idx[lead + d]);
    return src;
  });
}

std::shared_ptr<ir::Value> Unsqueeze(const std::shared_ptr<ir::Value>& x, ScalarType dtype, std::vector<int64_t> shape,
                                     int64_t dim) {
  dim = WrapDim(dim, shape.size());
  return ViewOf(x, dtype, std::move(shape), [&](std::vector<Affine> idx) {
    idx.erase(idx.begin() + dim);
    return idx;
  });
}

std::shared_ptr<ir::Value> Squeeze(const std::shared_ptr<ir::Value>& x, ScalarType dtype, std::vector<int64_t> shape,
                                   const std::optional<std::vector<int64_t>>& dims) {
  const std::vector<int64_t> in = x->shape();
  std::set<int64_t> gone;
  if (!dims) {
    for (size_t d = 0; d < in.size(); ++d)
      if (in[d] == 1) gone.insert(static_cast<int64_t>(d));
  } else {
    for (int64_t d : *dims) {
      const int64_t w = WrapDim(d, in.size());
      if (!in.empty() && in[w] == 1) gone.insert(w);
    }
  }
  return ViewOf(x, dtype, std::move(shape), [&](const std::vector<Affine>& idx) {
    std::vector<Affine> src;
    size_t k = 0;
    for (size_t d = 0; d < in.size(); ++d) src.push_back(gone.count(static_cast<int64_t>(d)) ? Affine(0) : idx.at(k++));
    return src;
  });
}

std::shared_ptr<ir::Value> Slice(const std::shared_ptr<ir::Value>& x, ScalarType dtype, std::vector<int64_t> shape,
                                 int64_t dim, std::optional<int64_t> start, int64_t step) {
  dim = WrapDim(dim, x->shape().size());
  const int64_t size = x->shape()[dim];
  int64_t first = start.value_or(0);
  if (first < 0) first += size;
  first = std::max<int64_t>(0, std::min(first, size));
  return ViewOf(x, dtype, std::move(shape), [&](std::vector<Affine> idx) {
    idx[dim] = idx[dim].Scaled(step) + Affine(first);
    return idx;
  });
}

std::shared_ptr<ir::Value> Select(const std::shared_ptr<ir::Value>& x, ScalarType dtype, std::vector<int64_t> shape,
                                  int64_t dim, int64_t index) {
  dim = WrapDim(dim, x->shape().size());
  if (index < 0) index += x->shape()[dim];
  return ViewOf(x, dtype, std::move(shape), [&](std::vector<Affine> idx) {
    idx.insert(idx.begin() + dim, Affine(index));
    return idx;
  });
}

std::shared_ptr<ir::Value> View(const std::shared_ptr<ir::Value>& x, ScalarType dtype, std::vector<int64_t> shape) {
  if (shape == x->shape()) return x;
  if (x->kind() == ir::Value::Kind::kBuffer) {
    auto buf = std::static_pointer_cast<ir::Buffer>(x);
    std::optional<std::vector<int64_t>> strides;
    if (buf->numel() == 0 || buf->shape().empty())
      strides = ir::ContiguousStrides(shape);
    else
      strides = ChunkedViewStrides(buf->shape(), buf->stride(), shape);
    if (strides) return std::make_shared<ir::Buffer>(std::nullopt, dtype, std::move(shape), *strides, buf->offset(), buf);
  }
  throw ViewOfUnrealized("view of a non-contiguous or unrealized value");
}

}  // namespace kiln::inductor::lowering
