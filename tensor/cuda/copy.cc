// tensor/cuda/copy.cc: copy_ to, from and between CUDA tensors, and fill_ on them, through the
// driver's copy and memset engines.
//
// Note [Staged copies]: a copy whose two sides are dense in the same layout and dtype is one
// cuMemcpyAsync on the current stream. On one device, anything else (a dtype change,
// broadcasting, a strided side) is one generated pointwise kernel (pointwise.h), as is a fill of a
// strided tensor. Between the host and the device (and for complex dtypes, which the generated
// kernels lack), the device side's storage span is staged through a host buffer: the CPU copy
// kernel does the conversion and the layout, and the span goes back. Copies to pageable host
// memory synchronize the stream, as PyTorch's do; to pinned memory with non_blocking=True they do not.
#include <cstring>

#include "runtime/cuda/cuda_allocator.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/stream.h"
#include "tensor/cuda/cuda_ops.h"
#include "tensor/cuda/pointwise.h"
#include "tensor/empty.h"
#include "tensor/ops.h"
#include "tensor/ops/common.h"

namespace kiln::cuda {
namespace {

CUdeviceptr Address(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

// Element offsets [first, last] of the storage `t` reads (strides are never negative in kiln).
std::pair<int64_t, int64_t> Span(const Tensor& t) {
  int64_t first = t->storage_offset(), last = first;
  for (int64_t d = 0; d < t.dim(); ++d) last += (t->sizes()[d] - 1) * t->strides()[d];
  return {first, last};
}

bool DenseRowMajor(const Tensor& t) { return t.is_contiguous(); }

void Memcpy(void* dst, const void* src, size_t bytes, const Stream& stream) {
  if (bytes == 0) return;
  KILN_CUDA_CHECK(Api().cuMemcpyAsync(Address(dst), Address(src), bytes, stream.handle));
}

// A host tensor with t's sizes and strides over a copy of the device storage t reads.
Tensor StageToHost(const Tensor& t, const Stream& stream) {
  auto [first, last] = Span(t);
  int64_t itemsize = t->itemsize();
  Tensor buf = EmptyTensor(DimVector{last - first + 1}, t.dtype(), Device(DeviceType::CPU));
  const char* base = static_cast<const char*>(t->storage()->data()) + first * itemsize;
  Memcpy(buf->data(), base, (last - first + 1) * itemsize, stream);
  stream.Synchronize();
  std::vector<SymInt> sizes(t->sym_sizes().begin(), t->sym_sizes().end());
  std::vector<SymInt> strides(t->sym_strides().begin(), t->sym_strides().end());
  return ops::as_strided(buf, sizes, strides, SymInt(int64_t(0)));
}

// `src` (any device) as a dense row-major host tensor of dst's dtype and shape.
Tensor HostDense(const Tensor& src, const Tensor& dst, const Stream& stream) {
  Tensor host = src.device().is_cuda() ? StageToHost(src, stream) : src;
  host = ops::to_dtype(host, dst.dtype());
  std::vector<SymInt> shape(dst->sym_sizes().begin(), dst->sym_sizes().end());
  if (host->sym_sizes() != dst->sym_sizes()) host = ops::expand(host, shape);
  return ops::contiguous(host);
}

int DeviceOf(const Tensor& self, const Tensor& src) {
  return self.device().is_cuda() ? self.device().index : src.device().index;
}

Tensor CopyCUDA(Tensor self, const Tensor& src, bool non_blocking) {
  if (!CheckCopy(self, src) || self.numel() == 0) return self;
  KILN_CHECK(!self.device().is_meta() && !src.device().is_meta(), "[copy_] cannot copy between ",
             src.device().str(), " and ", self.device().str());
  int device = DeviceOf(self, src);
  EnsureContext(device);
  Stream stream = CurrentStream(device);
  // A copy between two devices runs on the destination's stream after the source's work.
  if (self.device().is_cuda() && src.device().is_cuda() && self.device() != src.device())
    CurrentStream(src.device().index).Synchronize();
  size_t bytes = static_cast<size_t>(self.numel()) * self->itemsize();
  bool direct = self.dtype() == src.dtype() && self->sym_sizes() == src->sym_sizes() && DenseRowMajor(self) &&
                DenseRowMajor(src);
  const bool real = !IsComplex(self.dtype()) && !IsComplex(src.dtype());
  const bool same_device = src.device() == self.device() || (src.device().is_cpu() && src.dim() == 0);
  if (direct) {
    Memcpy(self->data(), src->data(), bytes, stream);
  } else if (self.device().is_cuda() && same_device && real) {
    // a conversion, a broadcast or a strided side on one device: one generated kernel
    LaunchPointwise("copy", self, {PointwiseInput::Of(src)}, Input(0));
    return self;
  } else if (self.device().is_cpu()) {
    ops::copy_(self, HostDense(src, self, stream));  // the CPU kernel writes self's layout
    return self;
  } else if (DenseRowMajor(self)) {
    Tensor host = HostDense(src, self, stream);
    Memcpy(self->data(), host->data(), bytes, stream);
    stream.Synchronize();  // `host` is freed on return; the driver may still be reading it
    return self;
  } else {
    Tensor host_self = StageToHost(self, stream);
    ops::copy_(host_self, HostDense(src, self, stream));
    auto [first, last] = Span(self);
    char* base = static_cast<char*>(self->storage()->data()) + first * self->itemsize();
    Memcpy(base, host_self->storage()->data(), (last - first + 1) * self->itemsize(), stream);
    stream.Synchronize();
    return self;
  }
  // Device to host: the host reads the result next, unless it asked not to wait and can (pinned).
  if (self.device().is_cpu() && !(non_blocking && IsPinned(self->data()))) stream.Synchronize();
  return self;
}

// fill_: a memset of the value's bit pattern where the element is 1, 2 or 4 bytes (or 8 bytes
// whose two halves agree, zero among them) and self is dense; otherwise staged.
Tensor FillCUDA(Tensor self, const Scalar& value) {
  if (self.numel() == 0) return self;
  EnsureContext(self.device().index);
  Stream stream = CurrentStream(self.device().index);
  Tensor one = EmptyTensor(DimVector{}, self.dtype(), Device(DeviceType::CPU));
  ops::fill_(one, value);
  size_t itemsize = self->itemsize();
  unsigned char bits[16] = {0};
  std::memcpy(bits, one->data(), itemsize);
  size_t n = static_cast<size_t>(self.numel());
  CUdeviceptr dst = Address(self->data());
  if (DenseRowMajor(self) && itemsize <= 8) {
    uint32_t lo = 0, hi = 0;
    std::memcpy(&lo, bits, std::min<size_t>(itemsize, 4));
    if (itemsize == 8) std::memcpy(&hi, bits + 4, 4);
    if (itemsize == 1) {
      KILN_CUDA_CHECK(Api().cuMemsetD8Async(dst, bits[0], n, stream.handle));
      return self;
    }
    if (itemsize == 2) {
      KILN_CUDA_CHECK(Api().cuMemsetD16Async(dst, static_cast<unsigned short>(lo), n, stream.handle));
      return self;
    }
    if (itemsize == 4 || (itemsize == 8 && lo == hi)) {
      KILN_CUDA_CHECK(Api().cuMemsetD32Async(dst, lo, n * itemsize / 4, stream.handle));
      return self;
    }
  }
  if (!IsComplex(self.dtype())) {
    LaunchPointwise("fill", self, {PointwiseInput::Number(value, self.dtype())}, Input(0));
    return self;
  }
  Tensor host = StageToHost(self, stream);
  ops::fill_(host, value);
  auto [first, last] = Span(self);
  char* base = static_cast<char*>(self->storage()->data()) + first * itemsize;
  Memcpy(base, host->storage()->data(), (last - first + 1) * itemsize, stream);
  stream.Synchronize();
  return self;
}

// fill_ with a 0-d tensor (on the host or the device): its value read once, then fill_.Scalar. A
// host tensor filled with a device value lands here too (the value's key): it fills on the host,
// as PyTorch's fill_ does.
Tensor FillTensorCUDA(Tensor self, const Tensor& value) {
  KILN_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ", value.dim(),
             " dimensions.");
  if (!self.device().is_cuda()) return ops::fill_(self, ItemScalar("fill_", value));
  CheckNoInternalOverlap(self);
  return FillCUDA(self, ItemScalar("fill_", value));
}

}  // namespace

void CopyDeviceBytes(void* dst, const void* src, size_t bytes, int device) {
  EnsureContext(device);
  Memcpy(dst, src, bytes, CurrentStream(device));
}

Tensor PinMemory(const Tensor& t) {
  KILN_CHECK(t.device().is_cpu(), "cannot pin '", t.device().str(), "' memory: only dense CPU tensors can be pinned");
  Allocator* alloc = GetPinnedHostAllocator();
  size_t nbytes = static_cast<size_t>(t.numel()) * t->itemsize();
  auto storage = std::make_shared<StorageImpl>(alloc->Allocate(nbytes), nbytes, alloc);
  auto impl = std::make_shared<TensorImpl>(std::move(storage), t.dtype(), Device(DeviceType::CPU),
                                           DispatchKeySet(DispatchKey::CPU));
  impl->set_sizes_and_strides(t->sym_sizes(), ContiguousStrides(t->sym_sizes()), 0);
  Tensor out(std::move(impl));
  ops::copy_(out, t);
  return out;
}

void RegisterCopyKernels(Registry& r) {
  SetCUDAKernel(r, "aten::copy_", boxing::WrapKernel<&CopyCUDA>());
  SetCUDAKernel(r, "aten::fill_.Scalar", boxing::WrapKernel<&FillCUDA>());
  SetCUDAKernel(r, "aten::fill_.Tensor", boxing::WrapKernel<&FillTensorCUDA>());
}

}  // namespace kiln::cuda
