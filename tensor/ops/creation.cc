// tensor/ops/creation.cc: factory ops (empty, full, zeros, ones, arange, *_like, new_*, scalar_tensor).
//
// Factories take their device from the `device=` argument (see Op::ComputeKeys), so
// kiln.zeros(2, device="meta") runs the meta kernel and allocates nothing.
#include <cmath>

#include "tensor/memory_format.h"
#include "tensor/ops/checked_convert.h"
#include "tensor/ops/common.h"

namespace kiln {
namespace {

using OptDtype = std::optional<ScalarType>;
using OptLayout = std::optional<Layout>;
using OptDevice = std::optional<Device>;
using OptBool = std::optional<bool>;
using OptMemoryFormat = std::optional<MemoryFormat>;

Device DeviceOr(const OptDevice& d) {
  Device dev = d.value_or(Device(DeviceType::CPU));
  return dev;
}

void CheckLayout(const char* op, const OptLayout& layout) {
  KILN_CHECK_NOT_IMPLEMENTED(!layout || *layout == Layout::Strided, "[", op, "] only torch.strided layout is supported");
}

Tensor Empty(const std::vector<SymInt>& size, OptDtype dtype, OptLayout layout, OptDevice device, OptBool,
             OptMemoryFormat mf) {
  CheckLayout("empty", layout);
  SymDimVector sizes(size.begin(), size.end());
  KILN_CHECK(mf != MemoryFormat::Preserve, "unsupported memory format Preserve");
  SymDimVector strides = mf == MemoryFormat::ChannelsLast ? ChannelsLastStrides(sizes) : SymDimVector();
  return EmptyTensor(sizes, dtype.value_or(GetDefaultDtype()), DeviceOr(device), strides);
}

Tensor EmptyStrided(const std::vector<SymInt>& size, const std::vector<SymInt>& stride, OptDtype dtype,
                    OptLayout layout, OptDevice device, OptBool) {
  CheckLayout("empty_strided", layout);
  KILN_CHECK(size.size() == stride.size(), "[empty_strided] mismatch in length of strides and shape: ",
             size.size(), " sizes and ", stride.size(), " strides");
  return EmptyTensor(SymDimVector(size.begin(), size.end()), dtype.value_or(GetDefaultDtype()), DeviceOr(device),
                     SymDimVector(stride.begin(), stride.end()));
}

Tensor Full(const std::vector<SymInt>& size, const Scalar& value, OptDtype dtype, OptLayout layout,
            OptDevice device, OptBool pin) {
  Tensor t = Empty(size, dtype ? dtype : OptDtype(value.dtype()), layout, device, pin, std::nullopt);
  return Fresh(ops::fill_(t, value));
}

Tensor Zeros(const std::vector<SymInt>& size, OptDtype dtype, OptLayout layout, OptDevice device, OptBool pin) {
  Tensor t = Empty(size, dtype, layout, device, pin, std::nullopt);
  return Fresh(ops::fill_(t, Scalar(int64_t(0))));
}

Tensor Ones(const std::vector<SymInt>& size, OptDtype dtype, OptLayout layout, OptDevice device, OptBool pin) {
  Tensor t = Empty(size, dtype, layout, device, pin, std::nullopt);
  return Fresh(ops::fill_(t, Scalar(int64_t(1))));
}

Tensor ScalarTensor(const Scalar& s, OptDtype dtype, OptLayout layout, OptDevice device, OptBool pin) {
  return Full({}, s, dtype ? dtype : OptDtype(s.dtype()), layout, device, pin);
}

Tensor EmptyLikeOp(const Tensor& self, OptDtype dtype, OptLayout layout, OptDevice device, OptBool,
                 OptMemoryFormat mf) {
  CheckLayout("empty_like", layout);
  // preserve_format (the default): PyTorch's empty_like keeps a dense non-overlapping input's
  // strides exactly (size-1 dims' too, and a channels-last input's), else dense strides in the
  // input's memory order (expanded dimensions say nothing: `x.expand(3, 4)` gives row-major);
  // contiguous_format: row-major.
  SymDimVector strides;
  if (mf == MemoryFormat::ChannelsLast) strides = ChannelsLastStrides(self->sym_sizes());
  else if (mf != MemoryFormat::Contiguous) strides = PreserveFormatStrides(self);
  Device dev = device ? *device : self.device();
  return EmptyTensor(self->sym_sizes(), dtype.value_or(self.dtype()), dev, strides);
}

Tensor FullLike(const Tensor& self, const Scalar& value, OptDtype dtype, OptLayout layout, OptDevice device,
                OptBool pin, OptMemoryFormat mf) {
  // Through the dispatcher: a composite kernel must let fake and meta inputs pick their kernel
  // (calling EmptyLikeOp directly allocated real memory for a fake tensor under autograd).
  Tensor t = CallOp<Tensor>(KILN_OP("aten::empty_like"), self, dtype, layout, device, pin, mf);
  return Fresh(ops::fill_(t, value));
}
Tensor ZerosLike(const Tensor& self, OptDtype dtype, OptLayout layout, OptDevice device, OptBool pin,
                 OptMemoryFormat mf) {
  return FullLike(self, Scalar(int64_t(0)), dtype, layout, device, pin, mf);
}
Tensor OnesLike(const Tensor& self, OptDtype dtype, OptLayout layout, OptDevice device, OptBool pin,
                OptMemoryFormat mf) {
  return FullLike(self, Scalar(int64_t(1)), dtype, layout, device, pin, mf);
}

// x.new_empty/new_full/new_zeros/new_ones(size): a factory taking dtype and device from x unless
// given, as PyTorch's composites; through the dispatcher, so a fake x gets a fake result.
Tensor NewEmpty(const Tensor& self, const std::vector<SymInt>& size, OptDtype dtype, OptLayout layout,
                OptDevice device, OptBool pin) {
  return CallOp<Tensor>(KILN_OP("aten::empty.memory_format"), size, OptDtype(dtype.value_or(self.dtype())), layout,
                        OptDevice(device.value_or(self.device())), pin, OptMemoryFormat());
}
Tensor NewFull(const Tensor& self, const std::vector<SymInt>& size, const Scalar& value, OptDtype dtype,
               OptLayout layout, OptDevice device, OptBool pin) {
  return CallOp<Tensor>(KILN_OP("aten::full"), size, value, OptDtype(dtype.value_or(self.dtype())), layout,
                        OptDevice(device.value_or(self.device())), pin);
}
Tensor NewZeros(const Tensor& self, const std::vector<SymInt>& size, OptDtype dtype, OptLayout layout,
                OptDevice device, OptBool pin) {
  return NewFull(self, size, Scalar(int64_t(0)), dtype, layout, device, pin);
}
Tensor NewOnes(const Tensor& self, const std::vector<SymInt>& size, OptDtype dtype, OptLayout layout,
               OptDevice device, OptBool pin) {
  return NewFull(self, size, Scalar(int64_t(1)), dtype, layout, device, pin);
}

template <typename T>
void FillTyped(Tensor& self, const Scalar& value) {
  const T v = value.to<T>();
  ElementwiseIter iter({self});
  iter.Run([&](char* const* ptrs, const int64_t* strides, int64_t n) {
    if (strides[0] == sizeof(T)) {
      T* out = reinterpret_cast<T*>(ptrs[0]);
      for (int64_t i = 0; i < n; ++i) out[i] = v;
    } else {
      for (int64_t i = 0; i < n; ++i) std::memcpy(ptrs[0] + i * strides[0], &v, sizeof(T));
    }
  });
}

Tensor FillValues(Tensor self, const Scalar& value) {
  KILN_DISPATCH_ALL_AND_COMPLEX(self.dtype(), "fill_", [&] { FillTyped<scalar_t>(self, value); });
  return self;
}
// fill_.Scalar (and full, zeros, ones through it) refuses a value the integer dtype cannot hold,
// as PyTorch's checked_convert does: `int8.fill_(300)` wrapped to 44. fill_.Tensor wraps, as there.
Tensor FillCPU(Tensor self, const Scalar& value) {
  CheckFitsDtype(value, self.dtype());
  return FillValues(self, value);
}
Tensor FillMeta(Tensor self, const Scalar&) { return self; }
// fill_ with a tensor value: a 0-d value, and (unlike fill_.Scalar's fast path) a destination with
// no element repeated, as PyTorch's fill_out checks; `x[..., 0] = -1` of an expanded x fills
// through here and is refused (fuzz seed 331, program 10861).
void CheckFillTensor(const Tensor& self, const Tensor& value) {
  KILN_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ",
             value.dim(), " dimensions.");
  CheckNoInternalOverlap(self);
}
Tensor FillTensorCPU(Tensor self, const Tensor& value) {
  CheckFillTensor(self, value);
  return FillValues(self, ItemScalar("fill_", value));  // the value in its own category (x[i] = 1+2j keeps 2j)
}
Tensor FillTensorMeta(Tensor self, const Tensor& value) {
  CheckFillTensor(self, value);
  return self;
}
Tensor Zero(Tensor self) { return ops::fill_(self, Scalar(int64_t(0))); }

// arange: length ceil((end - start) / step), computed in double like PyTorch.
int64_t ArangeLength(const Scalar& start, const Scalar& end, const Scalar& step) {
  double s = start.to_double(), e = end.to_double(), st = step.to_double();
  KILN_CHECK(st != 0, "[arange] step must be nonzero");
  KILN_CHECK(std::isfinite(s) && std::isfinite(e), "[arange] unsupported range: ", s, " -> ", e);
  KILN_CHECK((st > 0 && e >= s) || (st < 0 && e <= s),
             "[arange] upper bound and larger bound inconsistent with step sign");
  return static_cast<int64_t>(std::ceil((e - s) / st));
}

Tensor ArangeStartStep(const Scalar& start, const Scalar& end, const Scalar& step, OptDtype dtype,
                       OptLayout layout, OptDevice device, OptBool pin) {
  if (OnCUDA(device)) return CopyToDevice(ArangeStartStep(start, end, step, dtype, layout, Device(), pin), *device);
  ScalarType out_dtype = dtype ? *dtype
                         : (start.is_floating() || end.is_floating() || step.is_floating()) ? GetDefaultDtype()
                                                                                             : ScalarType::Int64;
  int64_t n = ArangeLength(start, end, step);
  Tensor t = Empty({SymInt(n)}, out_dtype, layout, device, pin, std::nullopt);
  if (!t->has_storage()) return t;
  KILN_DISPATCH_NUMERIC(out_dtype, "arange", [&] {
    scalar_t* p = t.data_ptr<scalar_t>();
    if constexpr (std::is_integral_v<scalar_t>) {
      if (!start.is_floating() && !step.is_floating()) {
        int64_t s = start.to_int(), st = step.to_int();
        for (int64_t i = 0; i < n; ++i) p[i] = static_cast<scalar_t>(s + i * st);
        return;
      }
    }
    double s = start.to_double(), st = step.to_double();
    for (int64_t i = 0; i < n; ++i) p[i] = scalar_t(static_cast<opmath_t<scalar_t>>(s + i * st));
  });
  return t;
}
Tensor Arange(const Scalar& end, OptDtype dtype, OptLayout layout, OptDevice device, OptBool pin) {
  return ArangeStartStep(Scalar(int64_t(0)), end, Scalar(int64_t(1)), dtype, layout, device, pin);
}
Tensor ArangeStart(const Scalar& start, const Scalar& end, OptDtype dtype, OptLayout layout, OptDevice device,
                   OptBool pin) {
  return ArangeStartStep(start, end, Scalar(int64_t(1)), dtype, layout, device, pin);
}

}  // namespace

#define KILN_FACTORY_KWARGS "ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None"

void RegisterCreationOps(Registry& r) {
  r.Def("empty.memory_format(SymInt[] size, *, " KILN_FACTORY_KWARGS ", MemoryFormat? memory_format=None) -> Tensor",
        {Tag::core}).Cost(CostClass::kMemoryBound)
      .AllBackends<&Empty>();
  r.Def("empty_strided(SymInt[] size, SymInt[] stride, *, " KILN_FACTORY_KWARGS ") -> Tensor", {Tag::core})
      .AllBackends<&EmptyStrided>();
  r.Def("full(SymInt[] size, Scalar fill_value, *, " KILN_FACTORY_KWARGS ") -> Tensor", {Tag::core})
      .Cost(CostClass::kMemoryBound)
      .CompositeExplicit<&Full>();
  r.Def("zeros(SymInt[] size, *, " KILN_FACTORY_KWARGS ") -> Tensor").Cost(CostClass::kMemoryBound).CompositeExplicit<&Zeros>();
  r.Def("ones(SymInt[] size, *, " KILN_FACTORY_KWARGS ") -> Tensor").Cost(CostClass::kMemoryBound).CompositeExplicit<&Ones>();
  r.Def("scalar_tensor(Scalar s, *, " KILN_FACTORY_KWARGS ") -> Tensor", {Tag::core})
      .Cost(CostClass::kMemoryBound).CompositeExplicit<&ScalarTensor>();
  r.Def("empty_like(Tensor self, *, " KILN_FACTORY_KWARGS ", MemoryFormat? memory_format=None) -> Tensor", {Tag::core})
      .Cost(CostClass::kMemoryBound)
      .AllBackends<&EmptyLikeOp>();
  r.Def("full_like(Tensor self, Scalar fill_value, *, " KILN_FACTORY_KWARGS ", MemoryFormat? memory_format=None) -> Tensor",
        {Tag::core}).Cost(CostClass::kMemoryBound)
      .CompositeExplicit<&FullLike>();
  r.Def("zeros_like(Tensor self, *, " KILN_FACTORY_KWARGS ", MemoryFormat? memory_format=None) -> Tensor")
      .Cost(CostClass::kMemoryBound)
      .CompositeExplicit<&ZerosLike>();
  r.Def("ones_like(Tensor self, *, " KILN_FACTORY_KWARGS ", MemoryFormat? memory_format=None) -> Tensor")
      .Cost(CostClass::kMemoryBound)
      .CompositeExplicit<&OnesLike>();
  r.Def("new_empty(Tensor self, SymInt[] size, *, " KILN_FACTORY_KWARGS ") -> Tensor", {}, kMethod)
      .Cost(CostClass::kMemoryBound)
      .CompositeExplicit<&NewEmpty>();
  r.Def("new_full(Tensor self, SymInt[] size, Scalar fill_value, *, " KILN_FACTORY_KWARGS ") -> Tensor", {}, kMethod)
      .Cost(CostClass::kMemoryBound)
      .CompositeExplicit<&NewFull>();
  r.Def("new_zeros(Tensor self, SymInt[] size, *, " KILN_FACTORY_KWARGS ") -> Tensor", {}, kMethod)
      .Cost(CostClass::kMemoryBound)
      .CompositeExplicit<&NewZeros>();
  r.Def("new_ones(Tensor self, SymInt[] size, *, " KILN_FACTORY_KWARGS ") -> Tensor", {}, kMethod)
      .Cost(CostClass::kMemoryBound)
      .CompositeExplicit<&NewOnes>();
  r.Def("arange(Scalar end, *, " KILN_FACTORY_KWARGS ") -> Tensor").Cost(CostClass::kMemoryBound).CompositeExplicit<&Arange>();
  r.Def("arange.start(Scalar start, Scalar end, *, " KILN_FACTORY_KWARGS ") -> Tensor")
      .Cost(CostClass::kMemoryBound).CompositeExplicit<&ArangeStart>();
  r.Def("arange.start_step(Scalar start, Scalar end, Scalar step=1, *, " KILN_FACTORY_KWARGS ") -> Tensor",
        {Tag::core}).Cost(CostClass::kMemoryBound)
      .AllBackends<&ArangeStartStep>();
  r.Def("fill_.Scalar(Tensor(a!) self, Scalar value) -> Tensor(a!)", {}, kFunctionAndMethod)
      .Impl<&FillCPU>(DispatchKey::CPU)
      .Impl<&FillMeta>(DispatchKey::Meta)
      .Impl<&FillMeta>(DispatchKey::Fake)
      .AllowsOverlappingWrites();  // every element gets the same value: order does not matter
  r.Def("zero_(Tensor(a!) self) -> Tensor(a!)", {}, kFunctionAndMethod).Composite<&Zero>().AllowsOverlappingWrites();
  r.Def("fill_.Tensor(Tensor(a!) self, Tensor value) -> Tensor(a!)", {}, kFunctionAndMethod)
      .Impl<&FillTensorCPU>(DispatchKey::CPU)
      .Impl<&FillTensorMeta>(DispatchKey::Meta)
      .Impl<&FillTensorMeta>(DispatchKey::Fake)
      .AllowsOverlappingWrites();
}

}  // namespace kiln
