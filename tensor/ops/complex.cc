// tensor/ops/complex.cc: the ops that build, view and take apart complex tensors.
//
// view_as_real and view_as_complex are the two primitive views between complex64/128 and pairs of
// float32/64 (the same bytes: a complex element is its real part followed by its imaginary
// part); real and imag are selects of view_as_real, as PyTorch composes them, so writes through
// them and their gradients come from the views'. complex and polar stack their parts and view the
// pairs as complex. conj_physical computes; conj is it for complex input (kiln has no lazy
// conjugate bit: the result is a new tensor, not a view) and the input itself otherwise.
#include <cmath>

#include "tensor/ops/common.h"

namespace kiln {
namespace {

Tensor ViewWithGeometry(const Tensor& self, ScalarType dtype, SymDimVector sizes, SymDimVector strides,
                        SymInt offset) {
  auto impl = std::make_shared<TensorImpl>(self->storage(), dtype, self.device(), self->keys());
  impl->set_sizes_and_strides(std::move(sizes), std::move(strides), std::move(offset));
  impl->share_version_counter(self->version_counter());
  return Tensor(std::move(impl));
}

// [..., n] complex -> [..., n, 2] real: each stride doubles (counted in real elements), and the
// new last dimension steps from a real part to its imaginary part.
Tensor ViewAsReal(const Tensor& self) {
  KILN_CHECK(IsComplex(self.dtype()), "view_as_real is only supported for complex tensors");
  SymDimVector sizes = self->sym_sizes(), strides = self->sym_strides();
  for (SymInt& s : strides) s = s * 2;
  sizes.push_back(SymInt(2));
  strides.push_back(SymInt(1));
  return ViewWithGeometry(self, ToRealValueType(self.dtype()), std::move(sizes), std::move(strides),
                          self->sym_storage_offset() * 2);
}

// [..., 2] real pairs (adjacent in memory) -> [...] complex.
Tensor ViewAsComplex(const Tensor& self) {
  const ScalarType t = self.dtype();
  KILN_CHECK(t == ScalarType::Float32 || t == ScalarType::Float64 || t == ScalarType::Float16,
             "view_as_complex is only supported for half, float and double tensors, but got a tensor of scalar type: ",
             ScalarTypeDisplayName(t));
  KILN_CHECK(self.dim() != 0, "Input tensor must have one or more dimensions");
  SymDimVector sizes = self->sym_sizes(), strides = self->sym_strides();
  KILN_CHECK(sizes.back() == 2, "Tensor must have a last dimension of size 2");
  KILN_CHECK(strides.back() == 1, "Tensor must have a last dimension with stride 1");
  sizes.pop_back();
  strides.pop_back();
  for (SymInt& s : strides) {
    KILN_CHECK(s.mod(2) == 0, "Tensor must have a stride divisible by 2 for all but last dimension");
    s = s.floordiv(2);
  }
  const SymInt offset = self->sym_storage_offset();
  KILN_CHECK(offset.mod(2) == 0, "Tensor must have a storage_offset divisible by 2");
  return ViewWithGeometry(self, ToComplexType(t), std::move(sizes), std::move(strides), offset.floordiv(2));
}

Tensor Real(const Tensor& self) {
  if (!IsComplex(self.dtype())) return self;
  return CallOp<Tensor>(KILN_OP("aten::select.int"), CallOp<Tensor>(KILN_OP("aten::view_as_real"), self),
                        int64_t(-1), SymInt(0));
}

Tensor Imag(const Tensor& self) {
  KILN_CHECK(IsComplex(self.dtype()), "imag is not implemented for tensors with non-complex dtypes.");
  return CallOp<Tensor>(KILN_OP("aten::select.int"), CallOp<Tensor>(KILN_OP("aten::view_as_real"), self),
                        int64_t(-1), SymInt(1));
}

TensorMeta ConjPhysicalMeta(const Tensor& self) {
  return TensorMeta{self->sym_sizes(), LayoutOfInputs(self->sym_sizes(), {&self}), self.dtype(), self.device()};
}

Tensor ConjPhysicalCPU(const Tensor& self) {
  Tensor out = EmptyFromMeta(ConjPhysicalMeta(self));
  if (!IsComplex(self.dtype())) return ops::copy_(out, self);
  if (self.device().is_cuda()) {  // the (real, imag) pairs copied as floats, then the imaginary parts negated
    Tensor pairs = CallOp<Tensor>(KILN_OP("aten::view_as_real"), out);
    ops::copy_(pairs, CallOp<Tensor>(KILN_OP("aten::view_as_real"), self));
    CallOp<Tensor>(KILN_OP("aten::neg_"), ops::select(pairs, -1, 1));
    return out;
  }
  ElementwiseIter iter({out, self});
  KILN_DISPATCH_COMPLEX(self.dtype(), "conj_physical", [&] {
    CpuKernel<scalar_t, scalar_t>(iter, [](scalar_t x) { return std::conj(x); });
  });
  return out;
}

Tensor Conj(const Tensor& self) {
  if (!IsComplex(self.dtype())) return self;
  return CallOp<Tensor>(KILN_OP("aten::conj_physical"), self);
}

Tensor ResolveConj(const Tensor& self) { return self; }

// PyTorch's angle: atan2(imag, real) for complex input; for real input pi where x < 0, 0 where
// x >= 0, and NaN kept (integers compute in the default float type).
Tensor Angle(const Tensor& self) {
  if (IsComplex(self.dtype()))
    return CallOp<Tensor>(KILN_OP("aten::atan2"), Imag(self), Real(self));
  Tensor x = IsIntegral(self.dtype(), true) ? ops::to_dtype(self, GetDefaultDtype()) : self;
  Tensor negative = CallOp<Tensor>(KILN_OP("aten::lt.Scalar"), x, Scalar(int64_t(0)));
  Tensor pi = CallOp<Tensor>(KILN_OP("aten::where.ScalarSelf"), negative, Scalar(M_PI), CallOp<Tensor>(
      KILN_OP("aten::mul.Scalar"), x, Scalar(int64_t(0))));
  Tensor nan = CallOp<Tensor>(KILN_OP("aten::isnan"), x);
  return CallOp<Tensor>(KILN_OP("aten::where.self"), nan, x, pi);
}

void CheckParts(const Tensor& a, const Tensor& b) {
  auto ok = [](ScalarType t) {
    return t == ScalarType::Float32 || t == ScalarType::Float64 || t == ScalarType::Float16;
  };
  KILN_CHECK(ok(a.dtype()) && ok(b.dtype()), "Expected both inputs to be Half, Float or Double tensors but got ",
             ScalarTypeDisplayName(a.dtype()), " and ", ScalarTypeDisplayName(b.dtype()));
  KILN_CHECK(a.dtype() == b.dtype(), "Expected object of scalar type ", ScalarTypeDisplayName(a.dtype()),
             " but got scalar type ", ScalarTypeDisplayName(b.dtype()), " for second argument");
}

// real + imag * 1j: the parts, broadcast, stacked as pairs and viewed as complex.
Tensor ComplexFromParts(const Tensor& real, const Tensor& imag) {
  SymDimVector shape = BroadcastShapes("complex", real->sym_sizes(), imag->sym_sizes());
  std::vector<SymInt> size(shape.begin(), shape.end());
  Tensor re = CallOp<Tensor>(KILN_OP("aten::expand"), real, size, false);
  Tensor im = CallOp<Tensor>(KILN_OP("aten::expand"), imag, size, false);
  Tensor pairs = CallOp<Tensor>(KILN_OP("aten::stack"), std::vector<Tensor>{re, im}, int64_t(-1));
  return CallOp<Tensor>(KILN_OP("aten::view_as_complex"), pairs);
}

Tensor Complex(const Tensor& real, const Tensor& imag) {
  CheckParts(real, imag);
  return ComplexFromParts(real, imag);
}

Tensor Polar(const Tensor& abs, const Tensor& angle) {
  CheckParts(abs, angle);
  return ComplexFromParts(ops::mul(abs, CallOp<Tensor>(KILN_OP("aten::cos"), angle)),
                          ops::mul(abs, CallOp<Tensor>(KILN_OP("aten::sin"), angle)));
}

}  // namespace

void RegisterComplexOps(Registry& r) {
  r.Def("view_as_real(Tensor(a) self) -> Tensor(a)", {Tag::view}, kFunction).AllBackends<&ViewAsReal>();
  r.Def("view_as_complex(Tensor(a) self) -> Tensor(a)", {Tag::view}, kFunction)
      .AllBackends<&ViewAsComplex>();
  r.Def("real(Tensor(a) self) -> Tensor(a)", {}, kFunction).Composite<&Real>();
  r.Def("imag(Tensor(a) self) -> Tensor(a)", {}, kFunction).Composite<&Imag>();
  r.Def("conj_physical(Tensor self) -> Tensor", {Tag::pointwise}, kFunctionAndMethod)
      .CPUAndCUDA<&ConjPhysicalCPU>().Meta<&ConjPhysicalMeta>();
  r.Def("conj(Tensor(a) self) -> Tensor(a)", {}, kFunctionAndMethod).Composite<&Conj>();
  r.Def("resolve_conj(Tensor(a) self) -> Tensor(a)", {}, kFunctionAndMethod).Composite<&ResolveConj>();
  r.Def("resolve_neg(Tensor(a) self) -> Tensor(a)", {}, kFunctionAndMethod).Composite<&ResolveConj>();
  r.Def("angle(Tensor self) -> Tensor", {}, kFunctionAndMethod).Composite<&Angle>();
  r.Def("complex(Tensor real, Tensor imag) -> Tensor", {}, kFunction).Composite<&Complex>();
  r.Def("polar(Tensor abs, Tensor angle) -> Tensor", {}, kFunction).Composite<&Polar>();
}

}  // namespace kiln
