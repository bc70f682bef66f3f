// tensor/ops/view_scatter.cc: the functional inverses of views (slice_scatter, select_scatter,
// diagonal_scatter, as_strided_scatter) and the functional forms of copy_ and fill_.
//
// `x.slice(...).copy_(src)` mutates x through a view; `slice_scatter(x, src, ...)` returns a new
// tensor equal to x with that region replaced. Functionalization (aot/functionalize.h) writes a
// mutated view back into its base with these. Results keep self's layout, as PyTorch's do
// (clone_preserve_strides); an expanded self gives a contiguous result. Built from copy_ and fill_,
// they run on either device.
#include <algorithm>

#include "tensor/ops/common.h"

namespace kiln {
namespace {

using SymList = std::vector<SymInt>;

// Checks the region of self that `src` replaces has src's shape.
void CheckRegion(const char* op, const char* what, const Tensor& region, const Tensor& src) {
  KILN_CHECK(region->sym_sizes() == src->sym_sizes(), "[", op, "] expected src to have a size equal to the ", what,
             " of self. src size = ", ShapeStr(src), ", ", what, " size = ", ShapeStr(region));
}

// src written into region. A region that repeats an element (as_strided with a stride-0 dim, the
// write-back of an expanded input functionalization made) takes each memory location once, from
// the first element that reaches it: copy_ refuses such a destination (Note [Overlapping writes]).
void WriteRegion(Tensor region, Tensor src) {
  for (int64_t d = 0; d < region.dim(); ++d) {
    if (region->sym_strides()[d].maybe_as_int() == 0 && region->sym_sizes()[d].maybe_as_int().value_or(0) > 1) {
      region = ops::slice(region, d, SymInt(0), SymInt(1));
      src = ops::slice(src, d, SymInt(0), SymInt(1));
    }
  }
  ops::copy_(region, src);
}

bool PreservesLayout(const Tensor& self, bool dense_only = false);
TensorMeta PreservedLayout(const Tensor& self, bool dense_only = false);

// self cloned in self's layout (PyTorch's clone_preserve_strides: the slice_scatter that writes a
// mutated `x.t()[::2]` back is transposed like x.t(), and so are the graph outputs viewed from
// it; contiguous, they came back with other strides than eager's: fuzz seed 191, program 48),
// with region_of(result) overwritten by src.
template <typename RegionFn>
Tensor ScatterInto(const char* op, const char* what, const Tensor& self, const Tensor& src, RegionFn region_of) {
  Tensor out = EmptyFromMeta(PreservedLayout(self));
  ops::copy_(out, self);
  Tensor region = region_of(out);
  CheckRegion(op, what, region, src);
  WriteRegion(region, src);
  return out;
}

// The same checks on metadata only (Meta and Fake keys): the region is a view of a meta tensor.
template <typename RegionFn>
TensorMeta ScatterMeta(const char* op, const char* what, const Tensor& self, const Tensor& src, RegionFn region_of) {
  Tensor probe = EmptyTensor(self->sym_sizes(), self.dtype(), Device(DeviceType::Meta));
  CheckRegion(op, what, region_of(probe), src);
  return PreservedLayout(self);
}

auto SliceOf(int64_t dim, std::optional<SymInt> start, std::optional<SymInt> end, SymInt step) {
  return [=](const Tensor& t) { return ops::slice(t, dim, start, end, step); };
}
Tensor SliceScatter(const Tensor& self, const Tensor& src, int64_t dim, std::optional<SymInt> start,
                    std::optional<SymInt> end, const SymInt& step) {
  return ScatterInto("slice_scatter", "slice", self, src, SliceOf(dim, start, end, step));
}
TensorMeta SliceScatterMeta(const Tensor& self, const Tensor& src, int64_t dim, std::optional<SymInt> start,
                            std::optional<SymInt> end, const SymInt& step) {
  return ScatterMeta("slice_scatter", "slice", self, src, SliceOf(dim, start, end, step));
}

auto SelectOf(int64_t dim, SymInt index) {
  return [=](const Tensor& t) { return ops::select(t, dim, index); };
}
Tensor SelectScatter(const Tensor& self, const Tensor& src, int64_t dim, const SymInt& index) {
  return ScatterInto("select_scatter", "selected slice", self, src, SelectOf(dim, index));
}
TensorMeta SelectScatterMeta(const Tensor& self, const Tensor& src, int64_t dim, const SymInt& index) {
  return ScatterMeta("select_scatter", "selected slice", self, src, SelectOf(dim, index));
}

auto DiagonalOf(int64_t offset, int64_t dim1, int64_t dim2) {
  return [=](const Tensor& t) { return CallOp<Tensor>(KILN_OP("aten::diagonal"), t, offset, dim1, dim2); };
}
Tensor DiagonalScatter(const Tensor& self, const Tensor& src, int64_t offset, int64_t dim1, int64_t dim2) {
  return ScatterInto("diagonal_scatter", "diagonal", self, src, DiagonalOf(offset, dim1, dim2));
}
TensorMeta DiagonalScatterMeta(const Tensor& self, const Tensor& src, int64_t offset, int64_t dim1, int64_t dim2) {
  return ScatterMeta("diagonal_scatter", "diagonal", self, src, DiagonalOf(offset, dim1, dim2));
}

// as_strided_scatter's view addresses storage positions, so the result keeps self's strides (as
// PyTorch's clone_preserve_strides does): the view then picks the same elements of the result
// that it picks of self. A result made contiguous moved them: for a transposed self (the
// functionalized write-back of a mutated transposed input) the values landed transposed and the
// gradient came out with the wrong signs. The result starts at offset 0, so the view's offset is
// taken relative to self's. A self whose elements may share memory (expanded), or whose layout
// is not concrete, is cloned contiguous instead, as PyTorch clones an overlapping self.
bool PreservesLayout(const Tensor& self, bool dense_only) {
  for (const SymInt& st : self->sym_strides())
    if (!st.maybe_as_int() || *st.maybe_as_int() < 0) return false;
  bool dense = false;
  if (self->sym_numel() == 0 || MayOverlapItself(self->sym_sizes(), self->sym_strides(), &dense)) return false;
  return !dense_only || dense;
}

TensorMeta PreservedLayout(const Tensor& self, bool dense_only) {
  return TensorMeta{self->sym_sizes(), PreservesLayout(self, dense_only) ? self->sym_strides() : SymDimVector{},
                    self.dtype(), self.device()};
}

Tensor AsStridedScatter(const Tensor& self, const Tensor& src, const SymList& size, const SymList& stride,
                        std::optional<SymInt> offset) {
  const bool preserve = PreservesLayout(self);
  Tensor out = EmptyFromMeta(PreservedLayout(self));
  ops::copy_(out, self);
  if (preserve && offset) offset = *offset - self->sym_storage_offset();
  Tensor region = ops::as_strided(out, size, stride, offset);
  CheckRegion("as_strided_scatter", "view", region, src);
  WriteRegion(region, src);
  return out;
}
TensorMeta AsStridedScatterMeta(const Tensor& self, const Tensor& src, const SymList& size, const SymList& stride,
                                std::optional<SymInt> offset) {
  KILN_CHECK(size.size() == stride.size(), "[as_strided_scatter] mismatch in length of strides and shape: ",
             size.size(), " vs ", stride.size());
  SymDimVector region(size.begin(), size.end());
  KILN_CHECK(region == src->sym_sizes(), "[as_strided_scatter] expected src to have a size equal to the view of "
             "self. src size = ", ShapeStr(src), ", view size = ", SizesToString(region));
  return PreservedLayout(self);
}

// copy(self, src): src broadcast to self's shape, in self's dtype (copy_ without the mutation).
// copy and fill keep self's layout too (PyTorch: clone_preserve_strides, and empty_like, which
// keeps it only for a dense self): the functionalized write-back reads their results through
// as_strided views.
Tensor Copy(const Tensor& self, const Tensor& src, bool non_blocking) {
  (void)non_blocking;
  Tensor out = EmptyFromMeta(PreservedLayout(self));
  return ops::copy_(out, src);
}
TensorMeta CopyMeta(const Tensor& self, const Tensor& src, bool) {
  SymDimVector joined = BroadcastShapes("copy", self->sym_sizes(), src->sym_sizes());
  KILN_CHECK(joined == self->sym_sizes(), "output with shape ", ShapeStr(self), " doesn't match the broadcast shape ",
             SizesToString(joined));
  return PreservedLayout(self);
}

Tensor FillScalar(const Tensor& self, const Scalar& value) {
  Tensor out = EmptyFromMeta(PreservedLayout(self, /*dense_only=*/true));
  return ops::fill_(out, value);
}
TensorMeta FillScalarMeta(const Tensor& self, const Scalar&) {
  return PreservedLayout(self, /*dense_only=*/true);
}
Tensor FillTensor(const Tensor& self, const Tensor& value) {
  KILN_CHECK(value.dim() == 0, "fill only supports 0-dimension value tensor but got tensor with ", value.dim(),
             " dimensions.");
  Tensor out = EmptyFromMeta(PreservedLayout(self, /*dense_only=*/true));
  return ops::copy_(out, value);
}
TensorMeta FillTensorMeta(const Tensor& self, const Tensor& value) {
  KILN_CHECK(value.dim() == 0, "fill only supports 0-dimension value tensor but got tensor with ", value.dim(),
             " dimensions.");
  return PreservedLayout(self, /*dense_only=*/true);
}

}  // namespace

void RegisterViewScatterOps(Registry& r) {
  const std::initializer_list<Tag> kCore = {Tag::core};
  r.Def("slice_scatter(Tensor self, Tensor src, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) "
        "-> Tensor", kCore, kFunction).Cost(CostClass::kMemoryBound)
      .CPUAndCUDA<&SliceScatter>().Meta<&SliceScatterMeta>();
  r.Def("select_scatter(Tensor self, Tensor src, int dim, SymInt index) -> Tensor", kCore, kFunction)
      .Cost(CostClass::kMemoryBound)
      .CPUAndCUDA<&SelectScatter>().Meta<&SelectScatterMeta>();
  r.Def("diagonal_scatter(Tensor self, Tensor src, int offset=0, int dim1=0, int dim2=1) -> Tensor", kCore, kFunction)
      .Cost(CostClass::kMemoryBound)
      .CPUAndCUDA<&DiagonalScatter>().Meta<&DiagonalScatterMeta>();
  r.Def("as_strided_scatter(Tensor self, Tensor src, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) "
        "-> Tensor", kCore, kFunction).Cost(CostClass::kMemoryBound)
      .CPUAndCUDA<&AsStridedScatter>().Meta<&AsStridedScatterMeta>();
  r.Def("copy(Tensor self, Tensor src, bool non_blocking=False) -> Tensor", kCore, kFunction)
      .Cost(CostClass::kMemoryBound)
      .CPUAndCUDA<&Copy>().Meta<&CopyMeta>();
  r.Def("fill.Scalar(Tensor self, Scalar value) -> Tensor", kCore, kFunction).Cost(CostClass::kMemoryBound)
      .CPUAndCUDA<&FillScalar>().Meta<&FillScalarMeta>();
  r.Def("fill.Tensor(Tensor self, Tensor value) -> Tensor", kCore, kFunction).Cost(CostClass::kMemoryBound)
      .CPUAndCUDA<&FillTensor>().Meta<&FillTensorMeta>();
}

}  // namespace kiln
