// tensor/ops/reinterpret.cc: ops that reinterpret a tensor's memory rather than compute: view(dtype),
// the same bytes read as another dtype, and resize_, which changes a tensor's size in place
// (growing its storage, keeping the existing elements).
#include "tensor/ops/common.h"

namespace kiln {
namespace {

using SymList = std::vector<SymInt>;

// PyTorch's view(dtype): the same element size keeps the geometry; another one rescales the last
// dim (which must have stride 1) and every other stride and the offset (which must divide evenly).
TensorMeta ViewDtypeGeometry(const Tensor& self, ScalarType dtype, SymInt* offset) {
  const int64_t from = ElementSize(self.dtype()), to = ElementSize(dtype);
  SymDimVector sizes = self->sym_sizes(), strides = self->sym_strides();
  *offset = self->sym_storage_offset();
  if (from != to) {
    const std::string what = StrCat(" to view ", ScalarTypeDisplayName(self.dtype()), " as ",
                                    ScalarTypeDisplayName(dtype), " (different element sizes)");
    KILN_CHECK(self.dim() > 0, "self.dim() cannot be 0", what);
    const int64_t last = self.dim() - 1;
    KILN_CHECK(strides[last] == 1, "self.stride(-1) must be 1", what, ", but got ", strides[last]);
    if (to > from) {
      const int64_t ratio = to / from;
      KILN_CHECK(sizes[last].mod(ratio) == 0, "self.size(-1) must be divisible by ", ratio, what, ", but got ",
                 sizes[last]);
      KILN_CHECK(offset->mod(ratio) == 0, "self.storage_offset() must be divisible by ", ratio, what,
                 ", but got ", *offset);
      for (int64_t d = 0; d < last; ++d)
        KILN_CHECK(strides[d].mod(ratio) == 0, "self.stride(", d, ") must be divisible by ", ratio, what,
                   ", but got ", strides[d]);
      sizes[last] = sizes[last].floordiv(ratio);
      for (int64_t d = 0; d < last; ++d) strides[d] = strides[d].floordiv(ratio);
      *offset = offset->floordiv(ratio);
    } else {
      const int64_t ratio = from / to;
      sizes[last] = sizes[last] * ratio;
      for (int64_t d = 0; d < last; ++d) strides[d] = strides[d] * ratio;
      *offset = *offset * ratio;
    }
  }
  return TensorMeta{sizes, strides, dtype, self.device()};
}

Tensor ViewDtype(const Tensor& self, ScalarType dtype) {
  SymInt offset;
  TensorMeta m = ViewDtypeGeometry(self, dtype, &offset);
  auto impl = std::make_shared<TensorImpl>(self->storage(), dtype, self.device(), self->keys());
  impl->set_sizes_and_strides(std::move(m.sizes), std::move(m.strides), std::move(offset));
  impl->share_version_counter(self->version_counter());
  return Tensor(std::move(impl));
}

// resize_: row-major strides for the new size; a storage too small for it grows, keeping its bytes
// (PyTorch's resize_ keeps the elements it had; new ones are uninitialized).
Tensor Resize_(Tensor self, const SymList& size, std::optional<MemoryFormat> memory_format) {
  KILN_CHECK(!self->requires_grad(), "cannot resize variables that require grad");
  KILN_CHECK(!memory_format || *memory_format == MemoryFormat::Contiguous ||
             *memory_format == MemoryFormat::Preserve, "resize_: only memory_format=kiln.contiguous_format is "
             "supported (kiln has no channels_last layouts yet)");
  for (const SymInt& s : size)
    KILN_CHECK(s >= 0, "Trying to create tensor with negative dimension ", s, ": ",
               SizesToString(SymDimVector(size.begin(), size.end())));
  // the storage grows as an out= argument's does (ResizeOut), keeping its bytes
  return ResizeOut("resize_", self, TensorMeta{SymDimVector(size.begin(), size.end()), {}, self.dtype(),
                                               self.device()});
}

Tensor ResizeAs_(Tensor self, const Tensor& other, std::optional<MemoryFormat> memory_format) {
  return Resize_(self, SymList(other->sym_sizes().begin(), other->sym_sizes().end()), memory_format);
}

}  // namespace

void RegisterReinterpretOps(Registry& r) {
  r.Def("view.dtype(Tensor(a) self, ScalarType dtype) -> Tensor(a)", {Tag::view}, kMethod)
      .AllBackends<&ViewDtype>();
  r.Def("resize_(Tensor(a!) self, SymInt[] size, *, MemoryFormat? memory_format=None) -> Tensor(a!)", {}, kMethod)
      .AllBackends<&Resize_>();
  r.Def("resize_as_(Tensor(a!) self, Tensor the_template, *, MemoryFormat? memory_format=None) -> Tensor(a!)", {},
        kFunctionAndMethod)
      .AllBackends<&ResizeAs_>();
}

}  // namespace kiln
