// tensor/ops/views.cc: ops whose result shares the input's storage (view, permute, select, ...).
//
// A view op only computes sizes, strides and an offset, so one function serves every backend
// (CPU, CUDA, meta, fake) and is its own meta function. Errors name the op and the shapes.
#include <limits>
#include <numeric>

#include "tensor/ops/common.h"
#include "tensor/ops/view_strides.h"

namespace kiln {
namespace {

using SymList = std::vector<SymInt>;

// Infers one -1 in `shape` from `numel`; checks the product matches.
SymDimVector InferSize(const char* op, const SymList& shape, const SymInt& numel) {
  SymDimVector out(shape.begin(), shape.end());
  int infer = -1;
  SymInt known = 1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out[i].is_symbolic() && out[i].expect_int() == -1) {
      KILN_CHECK(infer < 0, "[", op, "] only one dimension can be inferred");
      infer = static_cast<int>(i);
    } else {
      KILN_CHECK(out[i].is_symbolic() || out[i].expect_int() >= 0, "[", op, "] invalid shape dimension ",
                 out[i].expect_int());
      known = known * out[i];
    }
  }
  if (infer >= 0) {
    // As PyTorch's infer_size: with a zero in the known sizes, -1 is ambiguous for 0 elements and
    // impossible for any other count.
    KILN_CHECK(known != 0 || numel == 0, "shape '", SizesToString(SymDimVector(shape.begin(), shape.end())),
               "' is invalid for input of size ", numel.str());
    KILN_CHECK(known != 0, "cannot reshape tensor of ", numel.str(),
               " elements into shape ", SizesToString(SymDimVector(shape.begin(), shape.end())),
               " because the unspecified dimension size -1 can be any value and is ambiguous");
    KILN_CHECK(numel.mod(known) == 0, "shape '", SizesToString(SymDimVector(shape.begin(), shape.end())),
               "' is invalid for input of size ", numel.str());
    out[infer] = numel.floordiv(known);
  } else {
    KILN_CHECK(known == numel, "shape '", SizesToString(SymDimVector(shape.begin(), shape.end())),
               "' is invalid for input of size ", numel.str());
  }
  return out;
}

}  // namespace

std::optional<SymDimVector> ComputeViewStrides(const Tensor& self, const SymDimVector& new_sizes) {
  // A contiguous tensor's view is contiguous, except that the rule below carries the stride of a
  // size-1 dim over (x[::2] of 2 elements has stride 2, and so has its view(-1), as in PyTorch;
  // a stride of 1 there made `x.add_(x.view(-1))` a partial overlap). Symbolic tensors take the
  // shortcut: the comparisons below would record guards.
  if (self->is_contiguous()) {
    bool size_one = false;
    for (const SymInt& n : self->sym_sizes()) size_one |= !n.is_symbolic() && n.expect_int() == 1;
    bool symbolic = self->is_symbolic();
    for (const SymInt& st : self->sym_strides()) symbolic |= st.is_symbolic();
    if (!size_one || symbolic) return ContiguousStrides(new_sizes);
  }
  // Over SymInt: on symbolic sizes the comparisons record guards.
  if (self->sym_numel() == 0) return ContiguousStrides(new_sizes);
  return ChunkedViewStrides(self->sym_sizes(), self->sym_strides(), new_sizes);
}

namespace {

Tensor View(const Tensor& self, const SymList& size) {
  SymDimVector sizes = InferSize("view", size, self->sym_numel());
  auto strides = ComputeViewStrides(self, sizes);
  KILN_CHECK(strides.has_value(),
             "view size is not compatible with input tensor's size and stride (at least one dimension spans "
             "across two contiguous subspaces). Use .reshape(...) instead.");
  return MakeView(self, sizes, *strides, self->sym_storage_offset());
}

Tensor Reshape(const Tensor& self, const SymList& size) {
  SymDimVector sizes = InferSize("reshape", size, self->sym_numel());
  if (ComputeViewStrides(self, sizes)) return ops::view(self, size);
  return ops::view(ops::clone(self, MemoryFormat::Contiguous), SymList(sizes.begin(), sizes.end()));
}

Tensor AsStrided(const Tensor& self, const SymList& size, const SymList& stride, std::optional<SymInt> offset) {
  KILN_CHECK(size.size() == stride.size(), "[as_strided] mismatch in length of strides and shape: ", size.size(),
             " vs ", stride.size());
  SymInt off = offset ? *offset : self->sym_storage_offset();
  for (auto& x : stride)
    KILN_CHECK(x.is_symbolic() || x.expect_int() >= 0, "as_strided: Negative strides are not supported at the moment, "
               "got strides: ", SizesToString(SymDimVector(stride.begin(), stride.end())));
  KILN_CHECK(off.is_symbolic() || off.expect_int() >= 0, "Tensor: invalid storage offset ", off.str());
  if (self->has_storage()) {
    // A view must stay inside its storage: the autograd formula of as_strided (and any caller
    // with a computed offset) would otherwise read or write outside the block.
    DimVector s, st;
    for (auto& x : size) { KILN_CHECK(x.expect_int() >= 0, "[as_strided] negative size ", x.expect_int()); s.push_back(x.expect_int()); }
    for (auto& x : stride) st.push_back(x.expect_int());
    int64_t need = StorageBytesFor(s, st, off.expect_int(), self->itemsize());
    KILN_CHECK(need <= static_cast<int64_t>(self->storage()->nbytes()),
               "setStorage: sizes ", SizesToString(s), ", strides ", SizesToString(st), ", storage offset ",
               off.expect_int(), ", and itemsize ", self->itemsize(), " requiring a storage size of ", need,
               " are out of bounds for storage of size ", self->storage()->nbytes());
  }
  return MakeView(self, SymDimVector(size.begin(), size.end()), SymDimVector(stride.begin(), stride.end()), off);
}

Tensor Permute(const Tensor& self, const std::vector<int64_t>& dims) {
  const int64_t nd = self.dim();
  KILN_CHECK(static_cast<int64_t>(dims.size()) == nd, "permute(sparse_coo): number of dimensions in the tensor input "
             "does not match the length of the desired ordering of dimensions i.e. input.dim() = ", nd,
             " is not equal to len(dims) = ", dims.size());
  SymDimVector sizes(nd), strides(nd);
  std::vector<bool> seen(nd, false);
  for (int64_t i = 0; i < nd; ++i) {
    int64_t d = WrapDim(dims[i], nd);
    KILN_CHECK(!seen[d], "permute(): duplicate dims are not allowed.");
    seen[d] = true;
    sizes[i] = self->sym_sizes()[d];
    strides[i] = self->sym_strides()[d];
  }
  return MakeView(self, sizes, strides, self->sym_storage_offset());
}

Tensor Transpose(const Tensor& self, int64_t d0, int64_t d1) {
  const int64_t nd = self.dim();
  if (nd == 0) { WrapDim(d0, 0); WrapDim(d1, 0); return MakeView(self, {}, {}, self->sym_storage_offset()); }
  d0 = WrapDim(d0, nd);
  d1 = WrapDim(d1, nd);
  SymDimVector sizes = self->sym_sizes(), strides = self->sym_strides();
  std::swap(sizes[d0], sizes[d1]);
  std::swap(strides[d0], strides[d1]);
  return MakeView(self, sizes, strides, self->sym_storage_offset());
}

Tensor T(const Tensor& self) {
  KILN_CHECK(self.dim() <= 2, "t() expects a tensor with <= 2 dimensions, but self is ", self.dim(), "D");
  return self.dim() < 2 ? ops::transpose(self, 0, 0) : ops::transpose(self, 0, 1);
}

// PyTorch's inplace_view ops: self takes the transposed sizes and strides; its values, storage
// and offset stay. The dispatcher bumps self's version, as PyTorch does.
Tensor Transpose_(Tensor self, int64_t d0, int64_t d1) {
  Tensor v = Transpose(self, d0, d1);
  self->set_sizes_and_strides(v->sym_sizes(), v->sym_strides(), self->sym_storage_offset());
  return self;
}
// as_strided_: self takes the given sizes, strides and offset over its storage (a compiled
// function replays an input's metadata mutation, `x.t_()`, with it, as PyTorch's AOT does).
Tensor AsStrided_(Tensor self, const SymList& size, const SymList& stride, std::optional<SymInt> offset) {
  Tensor v = AsStrided(self, size, stride, offset);
  self->set_sizes_and_strides(v->sym_sizes(), v->sym_strides(), v->sym_storage_offset());
  return self;
}
Tensor T_(Tensor self) {
  KILN_CHECK(self.dim() <= 2, "t_() expects a tensor with <= 2 dimensions, but self is ", self.dim(), "D");
  return Transpose_(self, 0, self.dim() < 2 ? 0 : 1);  // one op, so one version bump
}

Tensor Expand(const Tensor& self, const SymList& size, bool implicit) {
  (void)implicit;
  const int64_t nd = static_cast<int64_t>(size.size()), sd = self.dim();
  KILN_CHECK(nd >= sd, "expand(", "torch.FloatTensor{", SizesToString(self->sym_sizes()), "}, size=",
             SizesToString(SymDimVector(size.begin(), size.end())),
             "): the number of sizes provided (", nd, ") must be greater or equal to the number of dimensions in the tensor (", sd, ")");
  SymDimVector sizes(nd), strides(nd);
  for (int64_t i = nd - 1; i >= 0; --i) {
    int64_t si = i - (nd - sd);
    SymInt target = size[i];
    if (si < 0) {
      KILN_CHECK(target.is_symbolic() || target.expect_int() >= 0, "[expand] the expanded size ", target.str(),
                 " is not allowed in a leading, non-existing dimension ", i);
      sizes[i] = target;
      // PyTorch's convention for a new dim of size 1: the extent of the dims inside it (0 inside
      // none). Overlap checks compare these strides, so `y[0] = y[0:1]` for y of shape [3, 1]
      // is refused as PyTorch refuses it (fuzz seed 221, program 8805).
      const bool one = !target.is_symbolic() && target.expect_int() == 1;
      strides[i] = one && i + 1 < nd ? sizes[i + 1] * strides[i + 1] : SymInt(0);
      continue;
    }
    const SymInt& cur = self->sym_sizes()[si];
    if (!target.is_symbolic() && target.expect_int() == -1) target = cur;
    if (cur == target) {
      sizes[i] = cur;
      strides[i] = self->sym_strides()[si];
    } else {
      KILN_CHECK(cur == 1, "The expanded size of the tensor (", target.str(), ") must match the existing size (",
                 cur.str(), ") at non-singleton dimension ", i, ".  Target sizes: ",
                 SizesToString(SymDimVector(size.begin(), size.end())), ".  Tensor sizes: ",
                 SizesToString(self->sym_sizes()));
      sizes[i] = target;
      strides[i] = 0;
    }
  }
  return MakeView(self, sizes, strides, self->sym_storage_offset());
}

Tensor SqueezeDims(const Tensor& self, const std::vector<int64_t>& dims) {
  const int64_t nd = self.dim();
  std::vector<bool> mask(std::max<int64_t>(nd, 1), false);
  for (int64_t d : dims) mask[WrapDim(d, nd)] = true;
  SymDimVector sizes, strides;
  for (int64_t d = 0; d < nd; ++d) {
    if (mask[d] && self->sym_sizes()[d] == 1) continue;
    sizes.push_back(self->sym_sizes()[d]);
    strides.push_back(self->sym_strides()[d]);
  }
  return MakeView(self, sizes, strides, self->sym_storage_offset());
}
Tensor Squeeze(const Tensor& self) {
  std::vector<int64_t> all(self.dim());
  std::iota(all.begin(), all.end(), 0);
  return SqueezeDims(self, all);
}
Tensor SqueezeDim(const Tensor& self, int64_t dim) { return SqueezeDims(self, {dim}); }

Tensor Unsqueeze(const Tensor& self, int64_t dim) {
  const int64_t nd = self.dim();
  dim = WrapDim(dim, nd + 1);
  SymDimVector sizes = self->sym_sizes(), strides = self->sym_strides();
  SymInt stride = dim >= nd ? SymInt(1) : strides[dim] * sizes[dim];
  sizes.insert(sizes.begin() + dim, SymInt(1));
  strides.insert(strides.begin() + dim, stride);
  return MakeView(self, sizes, strides, self->sym_storage_offset());
}

Tensor Select(const Tensor& self, int64_t dim, const SymInt& index) {
  KILN_CHECK_INDEX(self.dim() > 0, "select() cannot be applied to a 0-dim tensor.");
  dim = WrapDim(dim, self.dim());
  const SymInt& size = self->sym_sizes()[dim];
  SymInt idx = index;
  if (!idx.is_symbolic() && !size.is_symbolic()) {
    int64_t i = idx.expect_int(), n = size.expect_int();
    KILN_CHECK_INDEX(i >= -n && i < n, "select(): index ", i, " out of range for tensor of size ",
                     SizesToString(self->sym_sizes()), " at dimension ", dim);
    if (i < 0) idx = i + n;
  }
  SymDimVector sizes = self->sym_sizes(), strides = self->sym_strides();
  SymInt offset = self->sym_storage_offset() + idx * strides[dim];
  sizes.erase(sizes.begin() + dim);
  strides.erase(strides.begin() + dim);
  return MakeView(self, sizes, strides, offset);
}

Tensor Slice(const Tensor& self, int64_t dim, std::optional<SymInt> start, std::optional<SymInt> end,
             const SymInt& step) {
  KILN_CHECK_INDEX(self.dim() > 0, "slice() cannot be applied to a 0-dim tensor.");
  dim = WrapDim(dim, self.dim());
  KILN_CHECK_VALUE(step > 0, "slice step must be positive");
  const SymInt size = self->sym_sizes()[dim];
  auto clampi = [&](std::optional<SymInt> v, int64_t dflt_is_end) -> SymInt {
    if (!v) return dflt_is_end ? size : SymInt(0);
    // INT64_MAX is "to the end", as Python indexing passes a left-out stop: past every size
    if (!v->is_symbolic() && v->expect_int() == std::numeric_limits<int64_t>::max()) return size;
    if (v->is_symbolic() || size.is_symbolic()) return *v;
    int64_t x = v->expect_int(), n = size.expect_int();
    if (x < 0) x += n;
    return std::min(std::max<int64_t>(x, 0), n);
  };
  SymInt s = clampi(start, 0), e = clampi(end, 1);
  if (!s.is_symbolic() && !e.is_symbolic() && e.expect_int() < s.expect_int()) e = s;
  SymDimVector sizes = self->sym_sizes(), strides = self->sym_strides();
  SymInt offset = self->sym_storage_offset() + s * strides[dim];
  sizes[dim] = (e - s + step - 1).floordiv(step);
  strides[dim] = strides[dim] * step;
  return MakeView(self, sizes, strides, offset);
}

Tensor Narrow(const Tensor& self, int64_t dim, const SymInt& start, const SymInt& length) {
  KILN_CHECK_INDEX(self.dim() > 0, "narrow() cannot be applied to a 0-dim tensor.");
  dim = WrapDim(dim, self.dim());
  SymInt size = self->sym_sizes()[dim];
  SymInt s = start;
  if (!s.is_symbolic() && s.expect_int() < 0) s = s + size;
  KILN_CHECK_INDEX(s >= 0 && s <= size, "start out of range (expected to be in range of [", (-size).str(), ", ",
                   size.str(), "], but got ", start.str(), ")");
  KILN_CHECK(length >= 0 && s + length <= size, "start (", s.str(), ") + length (", length.str(),
             ") exceeds dimension size (", size.str(), ").");
  return ops::slice(self, dim, s, s + length, 1);
}

Tensor Diagonal(const Tensor& self, int64_t offset, int64_t dim1, int64_t dim2) {
  const int64_t nd = self.dim();
  dim1 = WrapDim(dim1, nd);
  dim2 = WrapDim(dim2, nd);
  KILN_CHECK(dim1 != dim2, "diagonal dimensions cannot be identical ", dim1, ", ", dim2);
  // symbolic sizes stay symbolic (sym_min/sym_max); only the empty-diagonal test guards
  const SymDimVector& sizes = self->sym_sizes();
  const SymDimVector& strides = self->sym_strides();
  SymInt diag_size = offset >= 0 ? sym_max(sym_min(sizes[dim1], sizes[dim2] - offset), 0)
                                 : sym_max(sym_min(sizes[dim1] + offset, sizes[dim2]), 0);
  SymInt off = self->sym_storage_offset();
  if (diag_size != 0) off = off + (offset >= 0 ? strides[dim2] * offset : strides[dim1] * -offset);
  SymDimVector out_sizes, out_strides;
  for (int64_t d = 0; d < nd; ++d) {
    if (d == dim1 || d == dim2) continue;
    out_sizes.push_back(sizes[d]);
    out_strides.push_back(strides[d]);
  }
  out_sizes.push_back(diag_size);
  out_strides.push_back(strides[dim1] + strides[dim2]);
  return MakeView(self, out_sizes, out_strides, off);
}

Tensor Unfold(const Tensor& self, int64_t dimension, int64_t size, int64_t step) {
  const int64_t nd = self.dim();
  int64_t d = WrapDim(dimension, nd);
  int64_t max_size = nd == 0 ? 1 : self.size(d);
  KILN_CHECK(size <= max_size, "maximum size for tensor at dimension ", d, " is ", max_size, " but size is ", size);
  KILN_CHECK(step > 0, "step is ", step, " but must be > 0");
  SymDimVector sizes = self->sym_sizes(), strides = self->sym_strides();
  if (nd == 0) {
    sizes = {SymInt(size)};
    strides = {SymInt(1)};
  } else {
    sizes[d] = (max_size - size) / step + 1;
    SymInt st = strides[d];
    strides[d] = st * step;
    sizes.push_back(size);
    strides.push_back(st);
  }
  return MakeView(self, sizes, strides, self->sym_storage_offset());
}

Tensor Flatten(const Tensor& self, int64_t start_dim, int64_t end_dim) {
  const int64_t nd = self.dim();
  if (nd == 0) return ops::reshape(self, {SymInt(1)});
  start_dim = WrapDim(start_dim, nd);
  end_dim = WrapDim(end_dim, nd);
  KILN_CHECK(start_dim <= end_dim, "flatten() has invalid args: start_dim cannot come after end_dim");
  if (start_dim == end_dim) return self;
  SymList shape;
  SymInt merged = 1;
  for (int64_t d = 0; d < nd; ++d) {
    if (d < start_dim || d > end_dim) shape.push_back(self->sym_sizes()[d]);
    else {
      merged = merged * self->sym_sizes()[d];
      if (d == end_dim) shape.push_back(merged);
    }
  }
  return ops::reshape(self, shape);
}

Tensor Unflatten(const Tensor& self, int64_t dim, const SymList& sizes) {
  dim = WrapDim(dim, self.dim());
  KILN_CHECK(!sizes.empty(), "unflatten: sizes must be non-empty");
  SymDimVector inferred = InferSize("unflatten", sizes, self->sym_sizes()[dim]);
  SymList shape(self->sym_sizes().begin(), self->sym_sizes().end());
  shape.erase(shape.begin() + dim);
  shape.insert(shape.begin() + dim, inferred.begin(), inferred.end());
  return ops::view(self, shape);
}

Tensor Alias(const Tensor& self) {
  return MakeView(self, self->sym_sizes(), self->sym_strides(), self->sym_storage_offset());
}
Tensor ExpandAs(const Tensor& self, const Tensor& other) {
  return ops::expand(self, SymList(other->sym_sizes().begin(), other->sym_sizes().end()));
}
Tensor ViewAs(const Tensor& self, const Tensor& other) {
  return ops::view(self, SymList(other->sym_sizes().begin(), other->sym_sizes().end()));
}
Tensor ReshapeAs(const Tensor& self, const Tensor& other) {
  return ops::reshape(self, SymList(other->sym_sizes().begin(), other->sym_sizes().end()));
}
Tensor Movedim(const Tensor& self, int64_t src, int64_t dst) {
  const int64_t nd = self.dim();
  src = WrapDim(src, nd);
  dst = WrapDim(dst, nd);
  std::vector<int64_t> order;
  for (int64_t d = 0; d < nd; ++d) if (d != src) order.push_back(d);
  order.insert(order.begin() + dst, src);
  return ops::permute(self, order);
}

}  // namespace

void RegisterViewOps(Registry& r) {
  const std::initializer_list<Tag> kView = {Tag::view, Tag::core};
  r.Def("view(Tensor(a) self, SymInt[] size) -> Tensor(a)", kView, kMethod).AllBackends<&View>();
  r.Def("reshape(Tensor(a) self, SymInt[] shape) -> Tensor(a)", {}, kFunctionAndMethod)
      .Cost(CostClass::kMemoryBound).Composite<&Reshape>();
  r.Def("as_strided(Tensor(a) self, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) -> Tensor(a)",
        kView, kFunctionAndMethod).AllBackends<&AsStrided>();
  r.Def("permute(Tensor(a) self, int[] dims) -> Tensor(a)", kView, kFunctionAndMethod).AllBackends<&Permute>();
  r.Def("transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)", {Tag::view}, kFunctionAndMethod)
      .AllBackends<&Transpose>();
  r.Def("t(Tensor(a) self) -> Tensor(a)", {}, kFunctionAndMethod).Cost(CostClass::kFree).CompositeExplicit<&T>();
  r.Def("transpose_(Tensor(a!) self, int dim0, int dim1) -> Tensor(a!)", {Tag::inplace_view}, kMethod)
      .AllBackends<&Transpose_>();
  r.Def("t_(Tensor(a!) self) -> Tensor(a!)", {Tag::inplace_view}, kMethod).AllBackends<&T_>();
  r.Alias("swapaxes_", "transpose_", kMethod);  // Note [Op aliases] in dispatcher.h
  r.Alias("swapdims_", "transpose_", kMethod);
  r.Def("as_strided_(Tensor(a!) self, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) -> Tensor(a!)",
        {Tag::inplace_view}, kFunctionAndMethod).AllBackends<&AsStrided_>();
  r.Def("expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)", kView, kMethod)
      .AllBackends<&Expand>();
  r.Def("expand_as(Tensor(a) self, Tensor other) -> Tensor(a)", {}, kMethod).Composite<&ExpandAs>();
  r.Def("view_as(Tensor(a) self, Tensor other) -> Tensor(a)", {}, kMethod).Composite<&ViewAs>();
  r.Def("reshape_as(Tensor(a) self, Tensor other) -> Tensor(a)", {}, kMethod).Composite<&ReshapeAs>();
  r.Def("squeeze(Tensor(a) self) -> Tensor(a)", {Tag::view}, kFunctionAndMethod).AllBackends<&Squeeze>();
  r.Def("squeeze.dim(Tensor(a) self, int dim) -> Tensor(a)", {Tag::view}, kFunctionAndMethod)
      .AllBackends<&SqueezeDim>();
  r.Def("squeeze.dims(Tensor(a) self, int[] dim) -> Tensor(a)", kView, kFunctionAndMethod)
      .AllBackends<&SqueezeDims>();
  r.Def("unsqueeze(Tensor(a) self, int dim) -> Tensor(a)", kView, kFunctionAndMethod).AllBackends<&Unsqueeze>();
  r.Def("select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a)", kView, kFunctionAndMethod)
      .AllBackends<&Select>();
  r.Def("slice.Tensor(Tensor(a) self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor(a)",
        kView, kFunction).AllBackends<&Slice>();
  r.Def("narrow(Tensor(a) self, int dim, SymInt start, SymInt length) -> Tensor(a)", {}, kFunctionAndMethod)
      .Composite<&Narrow>();
  r.Def("diagonal(Tensor(a) self, int offset=0, int dim1=0, int dim2=1) -> Tensor(a)", kView, kFunctionAndMethod)
      .AllBackends<&Diagonal>();
  r.Def("unfold(Tensor(a) self, int dimension, int size, int step) -> Tensor(a)", {Tag::view}, kMethod)
      .AllBackends<&Unfold>();
  r.Def("flatten.using_ints(Tensor(a) self, int start_dim=0, int end_dim=-1) -> Tensor(a)", {}, kFunctionAndMethod)
      .Composite<&Flatten>();
  r.Def("unflatten.int(Tensor(a) self, int dim, SymInt[] sizes) -> Tensor(a)", {}, kFunctionAndMethod)
      .Composite<&Unflatten>();
  r.Def("alias(Tensor(a) self) -> Tensor(a)", kView, kFunction).AllBackends<&Alias>();
  r.Def("movedim.int(Tensor(a) self, int source, int destination) -> Tensor(a)", {}, kFunctionAndMethod)
      .Composite<&Movedim>();
}

}  // namespace kiln
