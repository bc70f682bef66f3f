// fx/dynamic_shape_ops.cc: meta functions of data-dependent ops (nonzero, masked_select) and
// _local_scalar_dense (item()), and the sym_size/sym_stride/sym_numel/sym_storage_offset ops. See Note [Unbacked symbols through a thread-local context] in
// symbolic_context.h: under a ShapeEnv their sizes/values are fresh unbacked symbols; without one, fake
// tensors raise PyTorch's DynamicOutputShapeException / DataDependentOutputException and meta
// tensors raise as PyTorch's meta device does.
#include <limits>
#include <mutex>

#include "fx/symbolic_context.h"
#include "tensor/ops/common.h"

namespace kiln {
namespace {

constexpr const char* kFakeExceptions = "kiln._subclasses._exceptions";

[[noreturn]] void NoContext(const Op& op, DispatchKeySet keys) {
  std::string overload = op.schema().overload.empty() ? "default" : op.schema().overload;
  std::string name = "aten." + op.base_name() + "." + overload;
  if (keys.has(DispatchKey::Fake)) {
    bool value = op.base_name() == "_local_scalar_dense";
    throw NamedError(kFakeExceptions, value ? "DataDependentOutputException" : "DynamicOutputShapeException", name);
  }
  if (op.base_name() == "_local_scalar_dense") throw Error("Tensor.item() cannot be called on meta tensors");
  throw NotImplementedError(StrCat(op.name(), ": attempted to run this operator with Meta tensors, but its output "
                                   "size depends on the data; run it under a FakeTensorMode with a ShapeEnv to get "
                                   "an unbacked symbolic size"));
}

// The row count of nonzero/masked_select: an unbacked size in [0, numel].
SymInt UnbackedCount(const Op& op, DispatchKeySet keys, const SymInt& numel) {
  const SymbolicContextPtr& ctx = TlsSymbolicContext();
  if (!ctx) NoContext(op, keys);
  return SymInt(ctx->NewUnbackedSymInt(0, numel.maybe_as_int(), /*size_like=*/true));
}

void NonzeroMeta(const Op& op, DispatchKeySet keys, Stack& s, void*) {
  Tensor self = s[0].to_tensor();
  SymInt n = UnbackedCount(op, keys, self->sym_numel());
  s.clear();
  s.emplace_back(EmptyTensor(SymDimVector{n, SymInt(self.dim())}, ScalarType::Int64, Device(DeviceType::Meta)));
}

void MaskedSelectMeta(const Op& op, DispatchKeySet keys, Stack& s, void*) {
  Tensor self = s[0].to_tensor(), mask = s[1].to_tensor();
  KILN_CHECK(mask.dtype() == ScalarType::Bool, "masked_select: expected BoolTensor for mask");
  SymDimVector b = BroadcastShapes("masked_select", self->sym_sizes(), mask->sym_sizes());
  SymInt numel = 1;
  for (const SymInt& d : b) numel = numel * d;
  SymInt n = UnbackedCount(op, keys, numel);
  s.clear();
  s.emplace_back(EmptyTensor(SymDimVector{n}, self.dtype(), Device(DeviceType::Meta)));
}

Scalar LocalScalarDenseCPU(const Tensor& self) {
  KILN_CHECK(self.numel() == 1, "a Tensor with ", self.numel(), " elements cannot be converted to Scalar");
  return KILN_DISPATCH_ALL_AND_COMPLEX(self.dtype(), "_local_scalar_dense", [&]() -> Scalar {
    return ScalarFromElement(*self.data_ptr<scalar_t>());
  });
}

void LocalScalarDenseMeta(const Op& op, DispatchKeySet keys, Stack& s, void*) {
  Tensor self = s[0].to_tensor();
  const SymbolicContextPtr& ctx = TlsSymbolicContext();
  if (!ctx) NoContext(op, keys);
  SymNodePtr node;
  if (IsFloating(self.dtype())) node = ctx->NewUnbackedSymFloat();  // Note [SymFloat through SymInt slots]
  else if (self.dtype() == ScalarType::Bool) node = ctx->NewUnbackedSymInt(0, 1, false);
  else node = ctx->NewUnbackedSymInt(std::numeric_limits<int64_t>::min(), std::nullopt, false);
  s.clear();
  s.emplace_back(SymInt(node));
}

// aten::sym_size.int and friends: a tensor's (possibly symbolic) metadata as values, the nodes
// make_fx records when a traced program reads a symbolic size.
SymInt SymSize(const Tensor& self, int64_t dim) { return self->sym_sizes()[WrapDim(dim, self.dim())]; }
SymInt SymStride(const Tensor& self, int64_t dim) { return self->sym_strides()[WrapDim(dim, self.dim())]; }
SymInt SymNumel(const Tensor& self) { return self->sym_numel(); }
SymInt SymStorageOffset(const Tensor& self) { return self->sym_storage_offset(); }

}  // namespace

SymbolicContextPtr& TlsSymbolicContext() {
  thread_local SymbolicContextPtr ctx;
  return ctx;
}

void InstallDynamicShapeKernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    Registry& r = Registry::Get();
    r.Def("_local_scalar_dense(Tensor self) -> Scalar", {Tag::data_dependent_output})
        .Impl<&LocalScalarDenseCPU>(DispatchKey::CPU);
    r.Def("sym_size.int(Tensor self, int dim) -> SymInt").AllBackends<&SymSize>();
    r.Def("sym_stride.int(Tensor self, int dim) -> SymInt").AllBackends<&SymStride>();
    r.Def("sym_numel(Tensor self) -> SymInt").AllBackends<&SymNumel>();
    r.Def("sym_storage_offset(Tensor self) -> SymInt").AllBackends<&SymStorageOffset>();
    struct Entry {
      const char* name;
      BoxedKernelFn fn;
    };
    for (const Entry& e : {Entry{"aten::nonzero", &NonzeroMeta}, Entry{"aten::masked_select", &MaskedSelectMeta},
                           Entry{"aten::_local_scalar_dense", &LocalScalarDenseMeta}}) {
      Op* op = r.Find(e.name);
      KILN_INTERNAL_ASSERT(op != nullptr, e.name, " is registered before its meta function");
      op->SetKernel(DispatchKey::Meta, Kernel{e.fn, nullptr});
      op->SetKernel(DispatchKey::Fake, Kernel{e.fn, nullptr});
    }
  });
}

}  // namespace kiln
