// tensor/ops/index.cc: joining, splitting and indexing ops (cat, stack, split, chunk, gather,
// scatter, index_add, index_select, masked_fill, masked_select, where, nonzero); advanced
// indexing (index.Tensor, index_put_) is in index_advanced.cc, with the helpers of index_util.h.
//
// Kernels walk strided operands with ForEachStrided (common.h) instead of copying inputs to
// contiguous ones, so in-place ops on views (x.t().index_put_(...)) write through to the base,
// and the serial walk keeps accumulating ops deterministic. Index values are checked as they are
// read: out-of-range indices raise IndexError naming the index, the dim and its size (RuntimeError
// for gather/scatter/scatter_add, as in PyTorch). Ops whose
// output size depends on data (nonzero, masked_select) carry Tag::dynamic_output_shape and have
// no meta function; advanced indexing with boolean masks raises on meta tensors.
#include "tensor/cuda/pointwise.h"
#include "tensor/ops/checked_convert.h"
#include "tensor/ops/common.h"
#include "tensor/ops/complex_cuda.h"
#include "tensor/cuda/indexed.h"
#include "tensor/deterministic.h"
#include "tensor/ops/index_cuda.h"
#include "tensor/ops/index_util.h"

namespace kiln {
namespace {

using TensorList = std::vector<Tensor>;
using SymList = std::vector<SymInt>;

// Element strides of `t`, or [0] for a 0-dim tensor walked as if it had shape [1].
DimVector StridesAtLeast1d(const Tensor& t) { return t.dim() == 0 ? DimVector{0} : t.strides(); }
DimVector SizesAtLeast1d(const Tensor& t) { return t.dim() == 0 ? DimVector{1} : t.sizes(); }


// --- cat / stack / split -------------------------------------------------------------------

// PyTorch's legacy rule: 1-D tensors of size 0 are skipped by cat, whatever their other sizes.
bool SkippedByCat(const Tensor& t) { return t.dim() == 1 && t->sym_sizes()[0] == 0; }

TensorMeta CatMeta(const TensorList& tensors, int64_t dim) {
  KILN_CHECK_VALUE(!tensors.empty(), "torch.cat(): expected a non-empty list of Tensors");  // ValueError, as in PyTorch
  ResultTypeState rt;
  const Tensor* ref = nullptr;
  for (size_t i = 0; i < tensors.size(); ++i) {
    KILN_CHECK(tensors[i].dim() > 0, "zero-dimensional tensor (at position ", i, ") cannot be concatenated");
    if (i) CheckSameDevice("cat", tensors[0], tensors[i]);
    rt.Update(tensors[i]);
    if (!ref && !SkippedByCat(tensors[i])) ref = &tensors[i];
  }
  TensorMeta m;
  m.dtype = rt.Result();
  m.device = tensors[0].device();
  if (!ref) {
    m.sizes = {SymInt(0)};
    return m;
  }
  const int64_t nd = ref->dim();
  dim = WrapDim(dim, nd);
  SymDimVector sizes = (*ref)->sym_sizes();
  SymInt total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (SkippedByCat(t)) continue;
    KILN_CHECK(t.dim() == nd, "Tensors must have same number of dimensions: got ", nd, " and ", t.dim());
    for (int64_t d = 0; d < nd; ++d) {
      if (d == dim) continue;
      KILN_CHECK(t->sym_sizes()[d] == sizes[d], "Sizes of tensors must match except in dimension ", dim,
                 ". Expected size ", sizes[d].str(), " but got size ", t->sym_sizes()[d].str(), " for tensor number ",
                 i, " in the list.");
    }
    total = total + t->sym_sizes()[dim];
  }
  sizes[dim] = total;
  m.sizes = sizes;
  return m;
}

Tensor CatCPU(const TensorList& tensors, int64_t dim) {
  Tensor out = EmptyFromMeta(CatMeta(tensors, dim));
  const Tensor* ref = nullptr;
  for (const Tensor& t : tensors) if (!ref && !SkippedByCat(t)) ref = &t;
  if (!ref) return out;
  dim = WrapDim(dim, ref->dim());
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    if (SkippedByCat(t) || t.size(dim) == 0) continue;
    Tensor dst = ops::slice(out, dim, SymInt(offset), SymInt(offset + t.size(dim)));
    ops::copy_(dst, t);
    offset += t.size(dim);
  }
  return out;
}

Tensor StackOp(const TensorList& tensors, int64_t dim) {
  KILN_CHECK(!tensors.empty(), "stack expects a non-empty TensorList");
  for (size_t i = 1; i < tensors.size(); ++i)
    KILN_CHECK(tensors[i]->sym_sizes() == tensors[0]->sym_sizes(), "stack expects each tensor to be equal size, but got ",
               ShapeStr(tensors[0]), " at entry 0 and ", ShapeStr(tensors[i]), " at entry ", i);
  dim = WrapDim(dim, tensors[0].dim() + 1);
  TensorList parts;
  for (const Tensor& t : tensors) parts.push_back(ops::unsqueeze(t, dim));
  return CallOp<Tensor>(KILN_OP("aten::cat"), parts, dim);
}

TensorList SplitWithSizes(const Tensor& self, const SymList& split_sizes, int64_t dim) {
  KILN_CHECK(self.dim() != 0, "split expects at least a 1-dimensional tensor");
  dim = WrapDim(dim, self.dim());
  const SymInt size = self->sym_sizes()[dim];
  SymInt sum = 0;
  for (const SymInt& s : split_sizes) {
    KILN_CHECK(s >= 0, "split_with_sizes expects split_sizes have only non-negative entries, but got split_sizes=",
               SizesToString(SymDimVector(split_sizes.begin(), split_sizes.end())));
    sum = sum + s;
  }
  KILN_CHECK(sum == size, "split_with_sizes expects split_sizes to sum exactly to ", size.str(),
             " (input tensor's size at dimension ", dim, "), but got split_sizes=",
             SizesToString(SymDimVector(split_sizes.begin(), split_sizes.end())));
  TensorList out;
  SymInt start = 0;
  for (const SymInt& s : split_sizes) {
    out.push_back(ops::slice(self, dim, start, start + s));
    start = start + s;
  }
  MarkMultiOutputViews(out);
  return out;
}

// Over SymInt: on symbolic sizes the number of pieces is guarded (guard_int), their sizes stay symbolic.
TensorList SplitTensor(const Tensor& self, const SymInt& split_size, int64_t dim) {
  KILN_CHECK(self.dim() != 0, "split expects at least a 1-dimensional tensor");
  dim = WrapDim(dim, self.dim());
  const SymInt size = self->sym_sizes()[dim], ss = split_size;
  KILN_CHECK(ss >= 0, "split expects split_size be non-negative, but got split_size=", ss.str());
  KILN_CHECK(ss != 0 || size == 0, "split_size can only be 0 if dimension size is 0, but got dimension size of ",
             size.str());
  const int64_t n = ss == 0 ? 1 : sym_max((size + ss - 1).floordiv(ss), 1).guard_int(__FILE__, __LINE__);
  SymList sizes;
  for (int64_t i = 0; i < n; ++i) sizes.push_back(sym_min(ss, size - ss * i));
  return SplitWithSizes(self, sizes, dim);
}

TensorList Chunk(const Tensor& self, int64_t chunks, int64_t dim) {
  KILN_CHECK(self.dim() > 0, "chunk expects at least a 1-dimensional tensor");
  KILN_CHECK(chunks > 0, "chunk expects `chunks` to be greater than 0, got: ", chunks);
  dim = WrapDim(dim, self.dim());
  const SymInt size = self->sym_sizes()[dim], split = (size + chunks - 1).floordiv(chunks);
  // Through the dispatcher, as PyTorch's chunk calls split: the pieces are one split's outputs
  // (SplitBackward0, multi-output views that refuse in-place changes), not separate slices.
  if (split == 0 && size == 0)
    return CallOp<TensorList>(KILN_OP("aten::split_with_sizes"), self, SymList(chunks, SymInt(0)), dim);
  return CallOp<TensorList>(KILN_OP("aten::split.Tensor"), self, split, dim);
}

// The slices of self along dim, as one op's outputs (PyTorch's unbind.int: UnbindBackward0, and
// multi-output views that refuse in-place changes, where separate selects let them through).
TensorList Unbind(const Tensor& self, int64_t dim) {
  KILN_CHECK_INDEX(self.dim() > 0, "Dimension specified as 0 but tensor has no dimensions");
  dim = WrapDim(dim, self.dim());
  const int64_t n = self->sym_sizes()[dim].guard_int(__FILE__, __LINE__);
  TensorList out;
  for (int64_t i = 0; i < n; ++i) out.push_back(ops::select(self, dim, i));
  MarkMultiOutputViews(out);
  return out;
}

// --- gather / scatter ----------------------------------------------------------------------

enum class ScatterMode { Gather, Scatter, ScatterValue, ScatterAdd };

void CheckLongIndex(const char* op, const Tensor& index) {
  KILN_CHECK(index.dtype() == ScalarType::Int64, op, "(): Expected dtype int64 for index");
}

// a 0-d tensor counts as one of size 1 (PyTorch's ensure_nonempty_size): `scatter_add(0, i, T.tensor(5.))`
SymInt NonemptySize(const Tensor& t, int64_t d) { return t.dim() == 0 ? SymInt(1) : t->sym_sizes()[WrapDim(d, t.dim())]; }

void GatherShapeCheck(const Tensor& self, int64_t dim, const Tensor& index) {
  KILN_CHECK(std::max<int64_t>(self.dim(), 1) == std::max<int64_t>(index.dim(), 1),
             "Index tensor must have the same number of dimensions as input tensor");
  for (int64_t d = 0; d < index.dim(); ++d) {
    if (d == dim) continue;
    KILN_CHECK(index->sym_sizes()[d] <= self->sym_sizes()[d], "Size does not match at dimension ", d,
               " expected index ", ShapeStr(index), " to be no larger than self ", ShapeStr(self),
               " apart from dimension ", dim);
  }
}

// PyTorch's scatter_shape_check, in its order: index against self, then against src dimension by
// dimension over self's dims (a src with fewer dims raises IndexError there, as src.size(d)
// does: fuzz seed 311, program 8534), then src's number of dims, then the sizes.
void ScatterShapeCheck(const Tensor& self, int64_t dim, const Tensor& index, const Tensor* src) {
  KILN_CHECK(std::max<int64_t>(self.dim(), 1) == std::max<int64_t>(index.dim(), 1),
             "Index tensor must have the same number of dimensions as self tensor");
  const int64_t dims = std::max<int64_t>(self.dim(), 1);
  bool wrong_shape = false;
  for (int64_t d = 0; d < dims && !wrong_shape; ++d)
    wrong_shape = d != dim && NonemptySize(index, d) > NonemptySize(self, d);
  for (int64_t d = 0; src && d < dims && !wrong_shape; ++d) wrong_shape = NonemptySize(index, d) > NonemptySize(*src, d);
  if (src)
    KILN_CHECK(std::max<int64_t>(src->dim(), 1) == std::max<int64_t>(index.dim(), 1),
               "Index tensor must have the same number of dimensions as src tensor");
  KILN_CHECK(!wrong_shape, "Expected index ", ShapeStr(index), " to be no larger than self ", ShapeStr(self),
             " apart from dimension ", dim, src ? StrCat(" and to be no larger size than src ", ShapeStr(*src)) : "");
}

}  // namespace

// Checks every value of an int64 `index` lies in [-size, size) (or [0, size) without
// `negative_ok`) before an in-place op writes anything, so a bad index leaves self unchanged
// (PyTorch checks while writing and can leave a partial update behind).
void CheckIndexValues(const Tensor& index, int64_t size, int64_t dim, bool negative_ok, bool index_error) {
  if (index.numel() == 0) return;
  const Tensor c = ops::contiguous(index);
  const int64_t* p = c.data_ptr<int64_t>();
  for (int64_t j = 0, n = c.numel(); j < n; ++j) {
    const int64_t i = p[j];
    if (i >= (negative_ok ? -size : 0) && i < size) continue;
    if (index_error) KILN_CHECK_INDEX(false, "index ", i, " is out of bounds for dimension ", dim, " with size ", size);
    KILN_CHECK(false, "index ", i, " is out of bounds for dimension ", dim, " with size ", size);
  }
}

namespace {

// Walks the positions of `index`: gather reads self at (position with `dim` replaced by the
// index value) into `other` (the output); the scatters write `other` (src) or `value` there.
// The same walk on CUDA (tensor/cuda/indexed.h): one index over `dim`, RuntimeError for a bad one
// at the next synchronisation; scatter's value is read from a one-element tensor.
void GatherScatterCUDA(ScatterMode mode, const Tensor& self, int64_t dim, const Tensor& index, const Tensor* other,
                       const Scalar* value) {
  if (index.numel() == 0) return;
  cuda::IndexedWalk w;
  w.shape = SizesAtLeast1d(index);
  w.self_strides = StridesAtLeast1d(self);
  w.indexed_sizes = {SizesAtLeast1d(self)[dim]};
  w.indexed_strides = {w.self_strides[dim]};
  w.self_strides[dim] = 0;
  w.indices = {index};
  w.index_strides = {StridesAtLeast1d(index)};
  Tensor from = other ? *other : ops::full({SymInt(1)}, *value, self.dtype(), self.device());
  w.other_strides = other ? StridesAtLeast1d(*other) : DimVector(w.shape.size(), 0);
  const cuda::IndexedMode m = mode == ScatterMode::Gather       ? cuda::IndexedMode::kRead
                              : mode == ScatterMode::ScatterAdd ? cuda::IndexedMode::kAdd
                                                                : cuda::IndexedMode::kWrite;
  const char* op = mode == ScatterMode::Gather ? "gather" : mode == ScatterMode::ScatterAdd ? "scatter_add" : "scatter";
  if (m == cuda::IndexedMode::kAdd && IsFloating(self.dtype())) AlertNotDeterministic("scatter_add_cuda_kernel");
  cuda::LaunchIndexed(m, self, from, w, op, false,
                      StrCat("index {} is out of bounds for dimension ", dim, " with size ", w.indexed_sizes[0]));
}

template <typename T>
void GatherScatterKernel(ScatterMode mode, const Tensor& self, int64_t dim, const Tensor& index, const Tensor* other,
                         T value) {
  if (index.numel() == 0) return;
  DimVector self_st = StridesAtLeast1d(self);
  const int64_t dim_size = SizesAtLeast1d(self)[dim], dim_stride = self_st[dim];
  self_st[dim] = 0;
  const DimVector shape = SizesAtLeast1d(index);
  std::vector<DimVector> st = {self_st, StridesAtLeast1d(index),
                               other ? StridesAtLeast1d(*other) : DimVector(shape.size(), 0)};
  T* s = self.data_ptr<T>();
  const int64_t* ix = index.data_ptr<int64_t>();
  T* o = other ? other->data_ptr<T>() : nullptr;
  auto visit = [&](const int64_t* off, const int64_t*) {
    const int64_t i = ix[off[1]];
    // PyTorch's gather/scatter kernels raise RuntimeError (not IndexError) for a bad index.
    KILN_CHECK(i >= 0 && i < dim_size, "index ", i, " is out of bounds for dimension ", dim, " with size ", dim_size);
    T* p = s + off[0] + i * dim_stride;
    switch (mode) {
      case ScatterMode::Gather: o[off[2]] = *p; break;
      case ScatterMode::Scatter: *p = o[off[2]]; break;
      case ScatterMode::ScatterValue: *p = value; break;
      case ScatterMode::ScatterAdd: *p = AddValues(*p, o[off[2]]); break;
    }
  };
  // Gather writes each output once; scatters may hit one element twice, so they run in order.
  if (mode == ScatterMode::Gather) ParallelForEachStrided(shape, st, visit);
  else ForEachStrided(shape, st, visit);
}

TensorMeta GatherMeta(const Tensor& self, int64_t dim, const Tensor& index, bool) {
  dim = WrapDim(dim, self.dim());
  CheckOnSelfDevice("gather", self, {&index});
  CheckLongIndex("gather", index);
  // (sym_numel: a symbolic index size under dynamic shapes, fuzz seed 171, program 26060)
  if (index->sym_numel() != 0) GatherShapeCheck(self, dim, index);
  return TensorMeta{index->sym_sizes(), {}, self.dtype(), self.device()};
}
Tensor GatherCPU(const Tensor& self, int64_t dim, const Tensor& index, bool sparse_grad) {
  Tensor out = EmptyFromMeta(GatherMeta(self, dim, index, sparse_grad));
  if (out.device().is_cuda()) {
    GatherScatterCUDA(ScatterMode::Gather, self, WrapDim(dim, self.dim()), index, &out, nullptr);
    return out;
  }
  KILN_DISPATCH_ALL_AND_COMPLEX(self.dtype(), "gather", [&] {
    GatherScatterKernel<scalar_t>(ScatterMode::Gather, self, WrapDim(dim, self.dim()), index, &out, scalar_t());
  });
  return out;
}

Tensor ScatterInplace(const char* op, ScatterMode mode, Tensor self, int64_t dim, const Tensor& index,
                      const Tensor* src, const Scalar* value, bool run) {
  dim = WrapDim(dim, self.dim());
  CheckOnSelfDevice(op, self, {&index, src});
  CheckLongIndex(op, index);
  if (src) KILN_CHECK(self.dtype() == src->dtype(), op, "(): Expected self.dtype to be equal to src.dtype");
  if (index->sym_numel() != 0) ScatterShapeCheck(self, dim, index, src);
  CheckNoOverlap(self, index);
  if (src) CheckNoOverlap(self, *src);
  if (!run) return self;
  Tensor src_c = src && (*src)->has_storage() && (*src)->storage() == self->storage() ? ops::clone(*src) : Tensor();
  if (self.device().is_cuda()) {  // indices checked on the device
    GatherScatterCUDA(mode, self, dim, index, src_c.defined() ? &src_c : src, value);
    return self;
  }
  CheckIndexValues(index, self.dim() == 0 ? 1 : self.size(dim), dim, /*negative_ok=*/false, /*index_error=*/false);
  KILN_DISPATCH_ALL_AND_COMPLEX(self.dtype(), op, [&] {
    GatherScatterKernel<scalar_t>(mode, self, dim, index, src_c.defined() ? &src_c : src,
                                  value ? value->to<scalar_t>() : scalar_t());
  });
  return self;
}
Tensor ScatterSrc_(Tensor self, int64_t dim, const Tensor& index, const Tensor& src) {
  return ScatterInplace("scatter", ScatterMode::Scatter, self, dim, index, &src, nullptr, true);
}
Tensor ScatterSrcMeta_(Tensor self, int64_t dim, const Tensor& index, const Tensor& src) {
  return ScatterInplace("scatter", ScatterMode::Scatter, self, dim, index, &src, nullptr, false);
}
Tensor ScatterValue_(Tensor self, int64_t dim, const Tensor& index, const Scalar& value) {
  return ScatterInplace("scatter", ScatterMode::ScatterValue, self, dim, index, nullptr, &value, true);
}
Tensor ScatterValueMeta_(Tensor self, int64_t dim, const Tensor& index, const Scalar& value) {
  return ScatterInplace("scatter", ScatterMode::ScatterValue, self, dim, index, nullptr, &value, false);
}
Tensor ScatterAdd_(Tensor self, int64_t dim, const Tensor& index, const Tensor& src) {
  return ScatterInplace("scatter_add", ScatterMode::ScatterAdd, self, dim, index, &src, nullptr, true);
}
Tensor ScatterAddMeta_(Tensor self, int64_t dim, const Tensor& index, const Tensor& src) {
  return ScatterInplace("scatter_add", ScatterMode::ScatterAdd, self, dim, index, &src, nullptr, false);
}
// Functional scatters: a contiguous clone of self (PyTorch's structured scatter kernels allocate
// their output row-major, whatever self's layout: a transposed self's result took its strides, and
// .view(-1) of it refused where PyTorch's works; fuzz seed 1141, program 4181), then the in-place
// op (so autograd sees both).
Tensor ScatterSrc(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out = ops::clone(self, MemoryFormat::Contiguous);
  return CallOp<Tensor>(KILN_OP("aten::scatter_.src"), out, dim, index, src);
}
Tensor ScatterValue(const Tensor& self, int64_t dim, const Tensor& index, const Scalar& value) {
  Tensor out = ops::clone(self, MemoryFormat::Contiguous);
  return CallOp<Tensor>(KILN_OP("aten::scatter_.value"), out, dim, index, value);
}
Tensor ScatterAdd(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out = ops::clone(self, MemoryFormat::Contiguous);
  return CallOp<Tensor>(KILN_OP("aten::scatter_add_"), out, dim, index, src);
}

// --- index_add -----------------------------------------------------------------------------

// PyTorch's index_func_meta_impl, in its order.
void IndexAddCheck(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source) {
  CheckOnSelfDevice("index_add_", self, {&index, &source});
  KILN_CHECK_INDEX(index.dim() <= 1, "index_add_(): Index is supposed to be a vector, but got dim: ", index.dim(),
                   " with type: ", ScalarTypeDisplayName(index.dtype()), " and size: ", ShapeStr(index));
  KILN_CHECK(index.dtype() == ScalarType::Int64 || index.dtype() == ScalarType::Int32,
             "index_add_(): Expected dtype int32/int64 for index but got: ", ScalarTypeDisplayName(index.dtype()));
  KILN_CHECK(self.dtype() == source.dtype(), "index_add_(): self (", ScalarTypeDisplayName(self.dtype()),
             ") and source (", ScalarTypeDisplayName(source.dtype()), ") must have the same scalar type");
  KILN_CHECK(dim == 0 || dim < source.dim(), "index_add_(): Indexing dim ", dim,
             " is out of bounds of the source tensor with dim ", source.dim());
  const SymInt slices = source.dim() == 0 ? SymInt(1) : source->sym_sizes()[dim];
  // PyTorch's message reads source.size(dim), which raises first for a 0-d source.
  KILN_CHECK_INDEX(source.dim() != 0 || index->sym_numel() == 1, "Dimension specified as 0 but tensor has no dimensions");
  KILN_CHECK(index->sym_numel() == slices, "index_add_(): Number of indices (", index->sym_numel().str(),
             ") should be equal to source.size(dim): (", slices.str(), "), for dim: ", dim);
  SymDimVector a = self->sym_sizes(), b = source->sym_sizes();
  if (self.dim() != 0 && source.dim() != 0) {
    a.erase(a.begin() + dim);
    b.erase(b.begin() + dim);
  }
  KILN_CHECK(a == b, "source tensor shape must match self tensor shape, excluding the specified dimension. Got "
             "self.shape = ", ShapeStr(self), " source.shape = ", ShapeStr(source));
}

// Checks every index before anything is written (PyTorch checks while adding and can leave a
// partial sum behind). Its error depends on the kernel it takes: tensors of 2 or more dims added
// along their first or last dim with alpha 1 and int64 indices go through scatter_add
// (RuntimeError naming the index), everything else through its slice loop (IndexError).
bool IndexAddTakesScatterPath(const Tensor& self, int64_t dim, const Scalar& alpha, bool int64_index) {
  return self.dim() > 1 && (dim == 0 || dim == self.dim() - 1) && alpha.to_double() == 1.0 && !alpha.is_bool() &&
         int64_index;
}

void CheckIndexAddIndices(const Tensor& self, int64_t dim, const Tensor& idx, bool scatter_path) {
  const int64_t size = self.dim() <= 1 ? self.numel() : self.size(dim);
  const int64_t* ix = idx.data_ptr<int64_t>();
  for (int64_t k = 0, n = idx.numel(); k < n; ++k) {
    if (ix[k] >= 0 && ix[k] < size) continue;
    if (scatter_path) KILN_CHECK(false, "index ", ix[k], " is out of bounds for dimension ", dim, " with size ", size);
    KILN_CHECK_INDEX(false, "index out of range in self");
  }
}

// self[..., index[i], ...] += alpha * source[..., i, ...] along dim, in index order. alpha and
// alpha * source are rounded to the dtype before adding, as PyTorch's loops compute in scalar_t
// (16-bit floats round each step). The walk follows PyTorch's kernel, which decides what a source
// that self's writes change reads: index position outermost (its slice loop), or innermost (its
// scatter_add path).
template <typename T>
void IndexAddKernel(const Tensor& self, int64_t dim, const Tensor& idx, const Tensor& source, const Scalar& alpha,
                    bool index_innermost) {
  DimVector shape = SizesAtLeast1d(source);
  DimVector self_st = StridesAtLeast1d(self), src_st = StridesAtLeast1d(source), idx_st(shape.size(), 0);
  const int64_t dim_stride = self_st[dim];
  self_st[dim] = 0;
  idx_st[dim] = 1;
  for (DimVector* v : {&shape, &self_st, &src_st, &idx_st}) {
    const int64_t moved = (*v)[dim];
    v->erase(v->begin() + dim);
    v->insert(index_innermost ? v->end() : v->begin(), moved);
  }
  T* s = self.data_ptr<T>();
  const T* src = source.data_ptr<T>();
  const int64_t* ix = idx.data_ptr<int64_t>();
  using O = opmath_t<T>;
  const O a = static_cast<O>(alpha.to<T>());
  ForEachStrided(shape, {self_st, src_st, idx_st}, [&](const int64_t* off, const int64_t*) {
    T* p = s + off[0] + ix[off[2]] * dim_stride;
    if constexpr (std::is_same_v<T, bool>) {
      *p = *p || (src[off[1]] && alpha.to<bool>());
    } else {
      const T product = static_cast<T>(static_cast<O>(src[off[1]]) * a);
      *p = static_cast<T>(static_cast<O>(*p) + static_cast<O>(product));
    }
  });
}

Tensor IndexAddInplace(Tensor self, int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha,
                       bool run) {
  dim = WrapDim(dim, self.dim());
  IndexAddCheck(self, dim, index, source);
  CheckNoOverlap(self, index);
  CheckNoOverlap(self, source);
  if (!run || index.numel() == 0 || self.numel() == 0) return self;
  dim = self.dim() == 0 ? 0 : dim;
  if (self.device().is_cuda()) {  // indices checked on the device (index_cuda.h)
    IndexAddCUDA(self, dim, index, source, alpha);
    return self;
  }
  const Tensor idx = ops::contiguous(CastTo(index, ScalarType::Int64));
  const bool scatter_path = IndexAddTakesScatterPath(self, dim, alpha, index.dtype() == ScalarType::Int64);
  CheckIndexAddIndices(self, dim, idx, scatter_path);
  KILN_DISPATCH_ALL_AND_COMPLEX(self.dtype(), "index_add_",
                    [&] { IndexAddKernel<scalar_t>(self, dim, idx, source, alpha, scatter_path); });
  return self;
}
Tensor IndexAdd_(Tensor self, int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha) {
  return IndexAddInplace(self, dim, index, source, alpha, true);
}
Tensor IndexAddMeta_(Tensor self, int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha) {
  return IndexAddInplace(self, dim, index, source, alpha, false);
}
// The functional op's result is contiguous, as PyTorch's structured kernel allocates it.
TensorMeta IndexAddMeta(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, const Scalar&) {
  IndexAddCheck(self, WrapDim(dim, self.dim()), index, source);
  return TensorMeta{self->sym_sizes(), {}, self.dtype(), self.device()};
}
Tensor IndexAddCPU(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha) {
  Tensor out = EmptyFromMeta(IndexAddMeta(self, dim, index, source, alpha));
  ops::copy_(out, self);
  return IndexAddInplace(out, dim, index, source, alpha, true);
}

// --- index_select --------------------------------------------------------------------------

TensorMeta IndexSelectMeta(const Tensor& self, int64_t dim, const Tensor& index) {
  dim = WrapDim(dim, self.dim());
  KILN_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  KILN_CHECK(index.dtype() == ScalarType::Int64 || index.dtype() == ScalarType::Int32,
             "index_select(): Expected dtype int32 or int64 for index");
  SymDimVector sizes = self->sym_sizes();
  if (self.dim() == 0) {
    KILN_CHECK(index->sym_numel() == 1, "index_select(): Index to scalar can have only 1 value, got ",
                     index->sym_numel().str(), " value(s)");
  } else {
    sizes[dim] = index->sym_numel();
  }
  return TensorMeta{sizes, {}, self.dtype(), self.device()};
}

Tensor IndexSelectCPU(const Tensor& self, int64_t dim, const Tensor& index) {
  Tensor out = EmptyFromMeta(IndexSelectMeta(self, dim, index));
  if (index.numel() == 0) return out;
  dim = WrapDim(dim, self.dim());
  if (out.device().is_cuda()) {
    KILN_CHECK(self.dim() == 0 || self.size(dim) > 0, "index_select(): self indexing axis dim should be positive");
    IndexSelectCUDA(self, dim, index, out, "index_select(): index out of range in self");
    return out;
  }
  Tensor idx = CastTo(index, ScalarType::Int64);
  const DimVector shape = SizesAtLeast1d(out);
  DimVector self_st = StridesAtLeast1d(self), idx_st(shape.size(), 0);
  const int64_t dim_size = SizesAtLeast1d(self)[dim], dim_stride = self_st[dim];
  self_st[dim] = 0;
  idx_st[dim] = StridesAtLeast1d(idx)[0];
  const int64_t* ix = idx.data_ptr<int64_t>();
  // Every index is checked before any is read. PyTorch raises IndexError, except on its
  // dim-1 kernel for tensors of 2 or more dims, which raises RuntimeError.
  // The indices are checked even when the result is empty (the backward of an index_add of an
  // empty source reads a [1, 0] gradient at index 1: PyTorch raises; fuzz program 151-0137), with
  // PyTorch's messages for those cases.
  const int64_t n_index = idx.numel(), index_stride = StridesAtLeast1d(idx)[0];
  KILN_CHECK(dim_size > 0, "index_select(): self indexing axis dim should be positive");
  for (int64_t k = 0; k < n_index; ++k) {
    const int64_t i = ix[k * index_stride];
    if (i >= 0 && i < dim_size) continue;
    KILN_CHECK(out.numel() > 0, "INDICES element is out of DATA bounds, id=", i, " axis_dim=", dim_size);
    if (dim == 1 && self.dim() > 1)
      KILN_CHECK(false, "index_select(): index ", i, " is out of bounds for dimension ", dim, " with size ", dim_size);
    KILN_CHECK_INDEX(false, "index_select(): index ", i, " is out of bounds for dimension ", dim, " with size ",
                     dim_size);
  }
  if (out.numel() == 0) return out;
  KILN_DISPATCH_ALL_AND_COMPLEX(self.dtype(), "index_select", [&] {
    const scalar_t* s = self.data_ptr<scalar_t>();
    scalar_t* o = out.data_ptr<scalar_t>();
    ParallelForEachStrided(shape, {ContiguousStrides(shape), self_st, idx_st}, [&](const int64_t* off, const int64_t*) {
      o[off[0]] = s[off[1] + ix[off[2]] * dim_stride];
    });
  });
  return out;
}

}  // namespace

// --- nonzero -------------------------------------------------------------------------------

namespace {

// A contiguous tensor in up to one chunk per thread: each chunk counts its nonzero elements, then
// writes its rows of the result at the offset the counts before it give, walking the coordinates
// with a counter (no division per element, no growing buffer).
Tensor NonzeroContiguous(const Tensor& self) {
  const int64_t nd = self.dim(), numel = self.numel();
  if (numel == 0) return EmptyTensor(DimVector{0, nd}, ScalarType::Int64, self.device());
  const DimVector sizes = self.sizes();
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(GetNumThreads(), numel / kGrainSize));
  auto start = [&](int64_t c) { return numel * c / chunks; };
  std::vector<int64_t> rows_before(chunks + 1, 0);
  Tensor out;
  KILN_DISPATCH_ALL_AND_COMPLEX(self.dtype(), "nonzero", [&] {
    const scalar_t* p = self.data_ptr<scalar_t>();
    ParallelFor(0, chunks, 1, [&](int64_t cb, int64_t ce) {
      for (int64_t c = cb; c < ce; ++c) {
        int64_t n = 0;
        for (int64_t i = start(c), e = start(c + 1); i < e; ++i) n += IsNonzero(p[i]) ? 1 : 0;
        rows_before[c + 1] = n;
      }
    });
    for (int64_t c = 0; c < chunks; ++c) rows_before[c + 1] += rows_before[c];
    out = EmptyTensor(DimVector{rows_before[chunks], nd}, ScalarType::Int64, self.device());
    int64_t* o = out.data_ptr<int64_t>();
    ParallelFor(0, chunks, 1, [&](int64_t cb, int64_t ce) {
      for (int64_t c = cb; c < ce; ++c) {
        int64_t* row = o + rows_before[c] * nd;
        DimVector at(nd);
        for (int64_t d = nd - 1, rest = start(c); d >= 0; --d) at[d] = rest % sizes[d], rest /= sizes[d];
        for (int64_t i = start(c), e = start(c + 1); i < e; ++i) {
          if (IsNonzero(p[i])) {
            std::copy(at.begin(), at.end(), row);
            row += nd;
          }
          for (int64_t d = nd - 1; d >= 0 && ++at[d] == sizes[d]; --d) at[d] = 0;
        }
      }
    });
  });
  return out;
}

}  // namespace

Tensor NonzeroCPU(const Tensor& self) {
  if (self.is_contiguous()) return NonzeroContiguous(self);
  const int64_t nd = self.dim();
  std::vector<int64_t> coords;
  int64_t n = 0;
  KILN_DISPATCH_ALL_AND_COMPLEX(self.dtype(), "nonzero", [&] {
    const scalar_t* p = self.data_ptr<scalar_t>();
    ForEachStrided(self.sizes(), {self.strides()}, [&](const int64_t* off, const int64_t* idx) {
      if (!IsNonzero(p[off[0]])) return;
      coords.insert(coords.end(), idx, idx + nd);
      ++n;
    });
  });
  Tensor out = EmptyTensor(DimVector{n, nd}, ScalarType::Int64, self.device());
  if (!coords.empty()) std::memcpy(out.raw_data(), coords.data(), coords.size() * sizeof(int64_t));
  return out;
}

namespace {

// CUDA: the tensor copied to the host and searched there, the positions copied back. The result's
// size depends on the values, so PyTorch synchronises here too; kiln also moves the values.
Tensor NonzeroCUDA(const Tensor& self) {
  return CopyToDevice(NonzeroCPU(CopyToDevice(self, Device(DeviceType::CPU))), self.device());
}

TensorList WhereCondition(const Tensor& condition) {
  // A 0-dim condition counts as 1-D (PyTorch's nonzero(as_tuple=True)): one index tensor, not none.
  const Tensor c = condition.dim() == 0 ? ops::unsqueeze(condition, 0) : condition;
  Tensor nz = CallOp<Tensor>(KILN_OP("aten::nonzero"), c);
  TensorList out;
  for (int64_t d = 0; d < c.dim(); ++d) out.push_back(ops::select(nz, 1, d));
  return out;
}

// --- masked_fill / masked_select / where ----------------------------------------------------

void CheckMask(const char* op, const Tensor& mask) {
  KILN_CHECK(mask.dtype() == ScalarType::Bool, op, " only supports boolean masks, but got mask with dtype ",
             ScalarTypeDisplayName(mask.dtype()));
}


Tensor MaskedFillImpl(Tensor self, const Tensor& mask, const Scalar& value, bool run) {
  CheckMask("masked_fill_", mask);
  CheckSameDevice("masked_fill_", self, mask);
  SymDimVector b = BroadcastShapes("masked_fill_", self->sym_sizes(), mask->sym_sizes());
  KILN_CHECK(b == self->sym_sizes(), "[masked_fill_] mask of shape ", ShapeStr(mask),
             " cannot be broadcast to self of shape ", ShapeStr(self));
  if (!run || self.numel() == 0) return self;
  CheckFitsDtype(value, self.dtype());  // PyTorch's checked_convert: refused, not wrapped
  if (self.device().is_cuda()) {  // self = where(mask, value, self), element by element in place
    if (IsComplex(self.dtype())) {  // Note [Complex on CUDA]
      ComplexWhereCUDA(self, mask, ComplexOperand{nullptr, value}, ComplexOperand{&self, Scalar()}, "masked_fill");
      return self;
    }
    const codegen::DType t = cuda::CodegenDType(self.dtype(), "masked_fill_");
    cuda::LaunchPointwise("masked_fill", self, {cuda::PointwiseInput::Of(mask), cuda::PointwiseInput::Of(self),
                                                cuda::PointwiseInput::Number(value, self.dtype())},
                          codegen::Expr::Op(codegen::OpCode::kWhere, {cuda::Input(0), codegen::Expr::Cast(cuda::Input(2), t),
                                                                      cuda::Input(1)}));
    return self;
  }
  ElementwiseIter iter({self, mask});
  KILN_DISPATCH_ALL_AND_COMPLEX(self.dtype(), "masked_fill_", [&] {
    const scalar_t v = value.to<scalar_t>();
    iter.Run([&](char* const* ptrs, const int64_t* strides, int64_t n) {
      for (int64_t j = 0; j < n; ++j)
        if (*reinterpret_cast<const bool*>(ptrs[1] + j * strides[1]))
          std::memcpy(ptrs[0] + j * strides[0], &v, sizeof(v));
    });
  });
  return self;
}
Scalar MaskedFillValue(const Tensor& value) {
  KILN_CHECK(value.dim() == 0, "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
             value.dim(), " dimension(s).");
  return value->has_storage() ? ItemScalar("masked_fill_", value) : Scalar(int64_t(0));
}
Tensor MaskedFillScalar_(Tensor self, const Tensor& mask, const Scalar& v) { return MaskedFillImpl(self, mask, v, true); }
Tensor MaskedFillScalarMeta_(Tensor self, const Tensor& mask, const Scalar& v) {
  return MaskedFillImpl(self, mask, v, false);
}
Tensor MaskedFillTensor_(Tensor self, const Tensor& mask, const Tensor& v) {
  return MaskedFillImpl(self, mask, MaskedFillValue(v), true);
}
Tensor MaskedFillTensorMeta_(Tensor self, const Tensor& mask, const Tensor& v) {
  MaskedFillValue(v);
  return MaskedFillImpl(self, mask, 0, false);
}
// Functional: self broadcast against the mask, copied, then filled in place.
Tensor MaskedFillOut(const Tensor& self, const Tensor& mask) {
  CheckMask("masked_fill_", mask);
  SymDimVector b = BroadcastShapes("masked_fill", self->sym_sizes(), mask->sym_sizes());
  return ops::clone(ops::expand(self, ToSymList(b)), MemoryFormat::Contiguous);  // row-major, as PyTorch's
}
Tensor MaskedFillScalar(const Tensor& self, const Tensor& mask, const Scalar& value) {
  Tensor out = MaskedFillOut(self, mask);
  return CallOp<Tensor>(KILN_OP("aten::masked_fill_.Scalar"), out, mask, value);
}
Tensor MaskedFillTensor(const Tensor& self, const Tensor& mask, const Tensor& value) {
  Tensor out = MaskedFillOut(self, mask);
  return CallOp<Tensor>(KILN_OP("aten::masked_fill_.Tensor"), out, mask, value);
}

Tensor MaskedSelectCPU(const Tensor& self, const Tensor& mask) {
  CheckMask("masked_select:", mask);
  CheckSameDevice("masked_select", self, mask);
  SymList b = ToSymList(BroadcastShapes("masked_select", self->sym_sizes(), mask->sym_sizes()));
  Tensor s = ops::expand(self, b), m = ops::expand(mask, b);
  if (self.device().is_cuda()) {  // self[mask] (advanced indexing's kernels)
    return CallOp<Tensor>(KILN_OP("aten::index.Tensor"), s, std::vector<std::optional<Tensor>>{m});
  }
  const bool* mp = m.data_ptr<bool>();
  int64_t n = 0;
  ForEachStrided(m.sizes(), {m.strides()}, [&](const int64_t* off, const int64_t*) { n += mp[off[0]]; });
  Tensor out = EmptyTensor(DimVector{n}, self.dtype(), self.device());
  KILN_DISPATCH_ALL_AND_COMPLEX(self.dtype(), "masked_select", [&] {
    const scalar_t* sp = s.data_ptr<scalar_t>();
    scalar_t* o = out.data_ptr<scalar_t>();
    ForEachStrided(s.sizes(), {s.strides(), m.strides()}, [&](const int64_t* off, const int64_t*) {
      if (mp[off[1]]) *o++ = sp[off[0]];
    });
  });
  return out;
}

TensorMeta WhereMeta(const Tensor& cond, const Tensor& self, const Tensor& other) {
  KILN_CHECK(cond.dtype() == ScalarType::Bool, "where expected condition to be a boolean tensor, but got a tensor "
             "with dtype ", ScalarTypeDisplayName(cond.dtype()));
  CheckSameDevice("where", cond, self);
  CheckSameDevice("where", self, other);
  TensorMeta m = ElementwiseMeta("where", self, other, ResultType(self, other));
  m.sizes = BroadcastShapes("where", cond->sym_sizes(), m.sizes);
  m.strides = LayoutOfInputs(m.sizes, {&cond, &self, &other});
  if (m.device.is_cpu() && !cond.device().is_cpu()) m.device = cond.device();
  return m;
}
Tensor WhereCPU(const Tensor& cond, const Tensor& self, const Tensor& other) {
  TensorMeta m = WhereMeta(cond, self, other);
  Tensor out = EmptyFromMeta(m);
  if (out.numel() == 0) return out;
  if (out.device().is_cuda() && IsComplex(m.dtype)) {  // Note [Complex on CUDA]
    ComplexWhereCUDA(out, cond, ComplexOperand{&self, Scalar()}, ComplexOperand{&other, Scalar()}, "where");
    return out;
  }
  if (out.device().is_cuda()) {  // the values are read in their own dtypes and converted
    const codegen::DType t = cuda::CodegenDType(m.dtype, "where");
    cuda::LaunchPointwise("where", out, {cuda::PointwiseInput::Of(cond), cuda::PointwiseInput::Of(self),
                                         cuda::PointwiseInput::Of(other)},
                          codegen::Expr::Op(codegen::OpCode::kWhere, {cuda::Input(0), codegen::Expr::Cast(cuda::Input(1), t),
                                                                      codegen::Expr::Cast(cuda::Input(2), t)}));
    return out;
  }
  Tensor a = CastTo(self, m.dtype), b = CastTo(other, m.dtype);
  ElementwiseIter iter({out, cond, a, b});
  KILN_DISPATCH_ALL_AND_COMPLEX(m.dtype, "where", [&] {
    CpuKernel<scalar_t, bool, scalar_t, scalar_t>(iter, [](bool c, scalar_t x, scalar_t y) { return c ? x : y; });
  });
  return out;
}
// where with a number is PyTorch's composite (TensorCompare.cpp): the number becomes a
// scalar_tensor of the result dtype, the tensor is converted to it, then where.self, so a traced
// graph records those ops as PyTorch's does (and Inductor needs no lowering of its own for them).
Tensor WhereScalarOther(const Tensor& cond, const Tensor& self, const Scalar& other) {
  const ScalarType dtype = ResultType(self, other);
  Tensor other_t = ops::scalar_tensor(other, dtype, self.device());
  return CallOp<Tensor>(KILN_OP("aten::where.self"), cond, CastTo(self, dtype), other_t);
}
Tensor WhereScalarSelf(const Tensor& cond, const Scalar& self, const Tensor& other) {
  const ScalarType dtype = ResultType(other, self);
  Tensor self_t = ops::scalar_tensor(self, dtype, other.device());
  return CallOp<Tensor>(KILN_OP("aten::where.self"), cond, self_t, CastTo(other, dtype));
}
Tensor WhereScalar(const Tensor& cond, const Scalar& self, const Scalar& other) {
  ResultTypeState state;
  state.Update(self);
  state.Update(other);
  const ScalarType dtype = state.Result();
  Tensor other_t = ops::scalar_tensor(other, dtype, cond.device());
  Tensor self_t = ops::scalar_tensor(self, dtype, cond.device());
  return CallOp<Tensor>(KILN_OP("aten::where.self"), cond, self_t, other_t);
}

}  // namespace

void RegisterIndexOps(Registry& r) {
  const std::initializer_list<Tag> kCore = {Tag::core};
  const std::initializer_list<Tag> kDynamic = {Tag::dynamic_output_shape, Tag::core};
  r.Def("cat(Tensor[] tensors, int dim=0) -> Tensor", kCore)
      .Cost(CostClass::kMemoryBound).CPUAndCUDA<&CatCPU>().Meta<&CatMeta>();
  r.Def("stack(Tensor[] tensors, int dim=0) -> Tensor").CompositeExplicit<&StackOp>();
  r.Def("split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]", {}, kFunctionAndMethod)
      .Cost(CostClass::kFree)
      .CompositeExplicit<&SplitTensor>();
  // split with a list of sizes (PyTorch's Tensor.split/torch.split accept both forms).
  r.Def("split.sizes(Tensor(a -> *) self, SymInt[] split_size, int dim=0) -> Tensor(a)[]", {}, kFunctionAndMethod)
      .Cost(CostClass::kFree)
      .Composite<&SplitWithSizes>();
  r.Def("split_with_sizes(Tensor(a -> *) self, SymInt[] split_sizes, int dim=0) -> Tensor(a)[]", {},
        kFunctionAndMethod).Cost(CostClass::kFree)
      .CompositeExplicit<&SplitWithSizes>();
  r.Def("chunk(Tensor(a -> *) self, int chunks, int dim=0) -> Tensor(a)[]", {}, kFunctionAndMethod)
      .Composite<&Chunk>();
  // bound by kiln/_composites.py's unbind (its checks and tuple result), not as a generated method
  r.Def("unbind.int(Tensor(a -> *) self, int dim=0) -> Tensor(a)[]").Cost(CostClass::kFree).CompositeExplicit<&Unbind>();
  r.Def("gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor", kCore, kFunctionAndMethod)
      .Cost(CostClass::kMemoryBound)
      .CPUAndCUDA<&GatherCPU>().Meta<&GatherMeta>();
  r.Def("scatter_.src(Tensor(a!) self, int dim, Tensor index, Tensor src) -> Tensor(a!)", {}, kMethod)
      .CPUAndCUDA<&ScatterSrc_>().Impl<&ScatterSrcMeta_>(DispatchKey::Meta)
      .Impl<&ScatterSrcMeta_>(DispatchKey::Fake);
  r.Def("scatter_.value(Tensor(a!) self, int dim, Tensor index, Scalar value) -> Tensor(a!)", {}, kMethod)
      .CPUAndCUDA<&ScatterValue_>().Impl<&ScatterValueMeta_>(DispatchKey::Meta)
      .Impl<&ScatterValueMeta_>(DispatchKey::Fake);
  r.Def("scatter_add_(Tensor(a!) self, int dim, Tensor index, Tensor src) -> Tensor(a!)", {}, kMethod)
      .CPUAndCUDA<&ScatterAdd_>().Impl<&ScatterAddMeta_>(DispatchKey::Meta)
      .Impl<&ScatterAddMeta_>(DispatchKey::Fake);
  r.Def("scatter.src(Tensor self, int dim, Tensor index, Tensor src) -> Tensor", kCore, kFunctionAndMethod)
      .CompositeExplicit<&ScatterSrc>();
  r.Def("scatter.value(Tensor self, int dim, Tensor index, Scalar value) -> Tensor", kCore, kFunctionAndMethod)
      .CompositeExplicit<&ScatterValue>();
  r.Def("scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor", kCore, kFunctionAndMethod)
      .CompositeExplicit<&ScatterAdd>();
  r.Def("index_add_(Tensor(a!) self, int dim, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor(a!)", {},
        kMethod)
      .CPUAndCUDA<&IndexAdd_>().Impl<&IndexAddMeta_>(DispatchKey::Meta)
      .Impl<&IndexAddMeta_>(DispatchKey::Fake);
  r.Def("index_add(Tensor self, int dim, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor", {},
        kFunctionAndMethod)
      .CPUAndCUDA<&IndexAddCPU>().Meta<&IndexAddMeta>();
  r.Def("index_select(Tensor self, int dim, Tensor index) -> Tensor", kCore, kFunctionAndMethod)
      .CPUAndCUDA<&IndexSelectCPU>().Meta<&IndexSelectMeta>();
  r.Def("masked_fill_.Scalar(Tensor(a!) self, Tensor mask, Scalar value) -> Tensor(a!)", {}, kMethod)
      .CPUAndCUDA<&MaskedFillScalar_>().Impl<&MaskedFillScalarMeta_>(DispatchKey::Meta)
      .Impl<&MaskedFillScalarMeta_>(DispatchKey::Fake)
      .AllowsOverlappingWrites();
  r.Def("masked_fill_.Tensor(Tensor(a!) self, Tensor mask, Tensor value) -> Tensor(a!)", {}, kMethod)
      .CPUAndCUDA<&MaskedFillTensor_>().Impl<&MaskedFillTensorMeta_>(DispatchKey::Meta)
      .Impl<&MaskedFillTensorMeta_>(DispatchKey::Fake)
      .AllowsOverlappingWrites();
  r.Def("masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor", {Tag::pointwise}, kFunctionAndMethod)
      .CompositeExplicit<&MaskedFillScalar>();
  r.Def("masked_fill.Tensor(Tensor self, Tensor mask, Tensor value) -> Tensor", {Tag::pointwise}, kFunctionAndMethod)
      .CompositeExplicit<&MaskedFillTensor>();
  r.Def("masked_select(Tensor self, Tensor mask) -> Tensor", kDynamic, kFunctionAndMethod)
      .CPUAndCUDA<&MaskedSelectCPU>();
  r.Def("where.self(Tensor condition, Tensor self, Tensor other) -> Tensor", {Tag::pointwise, Tag::core},
        kFunctionAndMethod)
      .CPUAndCUDA<&WhereCPU>().Meta<&WhereMeta>();
  r.Def("where.ScalarOther(Tensor condition, Tensor self, Scalar other) -> Tensor", {Tag::pointwise})
      .Composite<&WhereScalarOther>();
  r.Def("where.ScalarSelf(Tensor condition, Scalar self, Tensor other) -> Tensor", {Tag::pointwise})
      .Composite<&WhereScalarSelf>();
  r.Def("where.Scalar(Tensor condition, Scalar self, Scalar other) -> Tensor", {Tag::pointwise})
      .Composite<&WhereScalar>();
  r.Def("where(Tensor condition) -> Tensor[]", kDynamic).Composite<&WhereCondition>();
  r.Def("nonzero(Tensor self) -> Tensor", kDynamic, kFunctionAndMethod)
      .Impl<&NonzeroCPU>(DispatchKey::CPU).Impl<&NonzeroCUDA>(DispatchKey::CUDA);
}

}  // namespace kiln
