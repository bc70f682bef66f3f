// tensor/ops/copy.cc: copy_ (with broadcasting and dtype conversion), clone, _to_copy and to().
#include <immintrin.h>

#include "tensor/memory_format.h"
#include "tensor/ops/common.h"

namespace kiln {

// Value conversion between element types (bool is "!= 0"; 16-bit floats go through float; a
// complex value cast to a real type keeps its real part, as PyTorch's casts do).
template <typename To, typename From>
inline To ConvertValue(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (is_complex_v<From>) {
    if constexpr (std::is_same_v<To, bool>) return v != From(0);
    else if constexpr (is_complex_v<To>) return To(v);
    else return ConvertValue<To>(v.real());
  } else if constexpr (is_complex_v<To>) {
    return To(static_cast<typename To::value_type>(static_cast<opmath_t<From>>(v)), 0);
  } else if constexpr (std::is_same_v<To, bool>) {
    return static_cast<opmath_t<From>>(v) != 0;
  } else if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>) {
    return ConvertValue<To>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
    return To(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

namespace {

// Note [Tiled transpose copy]: `x.t().contiguous()` walks a contiguous 2-D dst row by row while
// src strides by its leading dimension, one element per cache line: 2.2x PyTorch's time on
// 1024x1024 (6.5x at one thread). A same-dtype copy of a transposed 2-D src (strides (1, ld)) into a
// contiguous dst goes tile by tile instead, 8 x 8 elements: with a power-of-two ld every line of a
// tile falls in one L1 set, and 32 x 32 tiles (32 lines a set, 8 ways) made it 14x slower still.
// 4-byte tiles transpose in AVX2 registers (Transpose8x8): 1024x1024 float32 from 1.35-1.64x to
// 0.64x PyTorch's time at one thread (tools/bench/hot_ops_bench.py).
bool IsTransposedCopy(const Tensor& dst, const Tensor& src) {
  return dst.dim() == 2 && src.dim() == 2 && dst.dtype() == src.dtype() && dst.is_contiguous() &&
         src.size(0) > 1 && src.size(1) > 1 && src.stride(0) == 1 && src.stride(1) >= src.size(0) &&
         dst.numel() >= 4096;
}

// A whole 8 x 8 tile of 4-byte values in AVX2 registers: the 8 source columns loaded as rows,
// transposed by unpack/shuffle/permute (bit moves only: NaN payloads and integers pass unchanged),
// stored as 8 destination rows. dst[j * C + i] = src[j + i * ld] for i, j < 8.
inline void Transpose8x8(uint32_t* dst, const uint32_t* src, int64_t C, int64_t ld) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(reinterpret_cast<const float*>(src + i * ld));
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int h = 0; h < 8; h += 4) {  // rows 0-3, then 4-7
    r[h] = _mm256_shuffle_ps(t[h], t[h + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[h + 1] = _mm256_shuffle_ps(t[h], t[h + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[h + 2] = _mm256_shuffle_ps(t[h + 1], t[h + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[h + 3] = _mm256_shuffle_ps(t[h + 1], t[h + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int j = 0; j < 4; ++j) {
    _mm256_storeu_ps(reinterpret_cast<float*>(dst + j * C), _mm256_permute2f128_ps(r[j], r[j + 4], 0x20));
    _mm256_storeu_ps(reinterpret_cast<float*>(dst + (j + 4) * C), _mm256_permute2f128_ps(r[j], r[j + 4], 0x31));
  }
}

template <typename T>
void TransposedCopy(T* dst, const T* src, int64_t R, int64_t C, int64_t ld) {
  constexpr int64_t kTile = 8;
  const int64_t row_tiles = (R + kTile - 1) / kTile;
  ParallelFor(0, row_tiles, std::max<int64_t>(1, kGrainSize / (kTile * std::max<int64_t>(C, 1))),
              [&](int64_t b, int64_t e) {
    for (int64_t rt = b; rt < e; ++rt) {
      const int64_t r0 = rt * kTile, r1 = std::min(R, r0 + kTile);
      for (int64_t c0 = 0; c0 < C; c0 += kTile) {
        const int64_t c1 = std::min(C, c0 + kTile);
        if constexpr (sizeof(T) == 4) {
          if (r1 - r0 == kTile && c1 - c0 == kTile) {
            Transpose8x8(reinterpret_cast<uint32_t*>(dst + r0 * C + c0),
                         reinterpret_cast<const uint32_t*>(src + r0 + c0 * ld), C, ld);
            continue;
          }
        }
        for (int64_t c = c0; c < c1; ++c)
          for (int64_t r = r0; r < r1; ++r) dst[r * C + c] = src[r + c * ld];
      }
    }
  });
}

// A same-dtype copy between the planar and channels-last layouts of a dense 4-D tensor is a batch of
// 2-D transposes, [C, H*W] <-> [H*W, C] per sample, tiled as above (16x64x32x32 float32 either
// way: 2.0 ms elementwise, where the inner loop strides by C, against 0.3 ms tiled). Returns
// {rows, cols, ld} of each sample's transpose (dst [rows, cols] row-major, src [rows, cols] with
// strides (1, ld)), or rows = 0 when the copy is not one.
struct LayoutTranspose {
  int64_t rows = 0, cols = 0, ld = 0;
};
LayoutTranspose ChannelsLastTranspose(const Tensor& dst, const Tensor& src) {
  if (dst.dim() != 4 || src.dim() != 4 || dst.dtype() != src.dtype() || dst.numel() < 4096) return {};
  const int64_t C = dst.size(1), HW = dst.size(2) * dst.size(3);
  if (C == 1 || HW == 1) return {};  // then both layouts are one
  if (dst.is_contiguous() && IsChannelsLastContiguous(src)) return {C, HW, C};
  if (IsChannelsLastContiguous(dst) && src.is_contiguous()) return {HW, C, HW};
  return {};
}

template <typename T>
void TransposedCopies(char* d, const char* sp, int64_t batch, int64_t R, int64_t C, int64_t ld) {
  for (int64_t b = 0; b < batch; ++b)
    TransposedCopy(reinterpret_cast<T*>(d) + b * R * C, reinterpret_cast<const T*>(sp) + b * R * C, R, C, ld);
}

void CopyKernel(const Tensor& dst, const Tensor& src) {
  int64_t batch = 1;
  LayoutTranspose t;
  if (IsTransposedCopy(dst, src)) {  // Note [Tiled transpose copy]
    t = {dst.size(0), dst.size(1), src.stride(1)};
  } else {
    t = ChannelsLastTranspose(dst, src);
    if (t.rows > 0) batch = dst.size(0);
  }
  if (t.rows > 0) {
    char* d = static_cast<char*>(dst.raw_data());
    const char* sp = static_cast<const char*>(src.raw_data());
    switch (ElementSize(dst.dtype())) {
      case 1: return TransposedCopies<uint8_t>(d, sp, batch, t.rows, t.cols, t.ld);
      case 2: return TransposedCopies<uint16_t>(d, sp, batch, t.rows, t.cols, t.ld);
      case 4: return TransposedCopies<uint32_t>(d, sp, batch, t.rows, t.cols, t.ld);
      case 8: return TransposedCopies<uint64_t>(d, sp, batch, t.rows, t.cols, t.ld);
      default: break;  // complex128: the general loop
    }
  }
  ElementwiseIter iter({dst, src});
  KILN_DISPATCH_ALL_AND_COMPLEX(dst.dtype(), "copy_", [&] {
    using dst_t = scalar_t;
    KILN_DISPATCH_ALL_AND_COMPLEX(src.dtype(), "copy_", [&] {
      using src_t = scalar_t;
      if constexpr (std::is_same_v<dst_t, src_t>) {
        iter.Run([&](char* const* ptrs, const int64_t* strides, int64_t n) {
          if (strides[0] == sizeof(dst_t) && strides[1] == sizeof(src_t)) {
            std::memcpy(ptrs[0], ptrs[1], n * sizeof(dst_t));
          } else if (strides[0] % sizeof(dst_t) == 0 && strides[1] % sizeof(dst_t) == 0 &&
                     reinterpret_cast<uintptr_t>(ptrs[0]) % alignof(dst_t) == 0 &&
                     reinterpret_cast<uintptr_t>(ptrs[1]) % alignof(dst_t) == 0) {
            // element strides: a typed loop (x[:, ::2].contiguous()), not a memcpy per element
            dst_t* d = reinterpret_cast<dst_t*>(ptrs[0]);
            const dst_t* sp = reinterpret_cast<const dst_t*>(ptrs[1]);
            const int64_t ds = strides[0] / static_cast<int64_t>(sizeof(dst_t));
            const int64_t ss = strides[1] / static_cast<int64_t>(sizeof(dst_t));
            if (ds == 1) {
              for (int64_t i = 0; i < n; ++i) d[i] = sp[i * ss];
            } else {
              for (int64_t i = 0; i < n; ++i) d[i * ds] = sp[i * ss];
            }
          } else {
            for (int64_t i = 0; i < n; ++i)
              std::memcpy(ptrs[0] + i * strides[0], ptrs[1] + i * strides[1], sizeof(dst_t));
          }
        });
      } else {
        CpuKernel<dst_t, src_t>(iter, [](src_t v) { return ConvertValue<dst_t>(v); });
      }
    });
  });
}

// Whether writing src into dst elementwise could read an element already overwritten.
bool PartiallyOverlaps(const Tensor& dst, const Tensor& src) {
  if (!dst->has_storage() || dst->storage() != src->storage()) return false;
  if (dst->storage_offset() == src->storage_offset() && dst.sizes() == src.sizes() &&
      dst.strides() == src.strides() && dst.dtype() == src.dtype())
    return false;  // the same view: elementwise copy is a no-op
  return true;
}

// Two views of the same elements in the same dtype: copying one onto the other changes nothing.
// Fake and meta tensors count too (their storages hold no data but are shared by views): a fake
// `x[0] = x` on an expanded x was refused as an overlapping write where eager's passes (fuzz seed
// 1401, program 1985: a static-shape trace of it).
bool IsSameData(const Tensor& self, const Tensor& src) {
  return self->storage() != nullptr && self->storage() == src->storage() &&
         self->sym_storage_offset() == src->sym_storage_offset() && self->sym_sizes() == src->sym_sizes() &&
         self->sym_strides() == src->sym_strides() && self.dtype() == src.dtype();
}

}  // namespace

// copy_'s checks in PyTorch's order: x.copy_(x), or a copy between two views of the same data
// (`x[0] = x` on an expanded x), returns first; then the overlap checks (Note [Overlapping
// writes]), then the shapes. Returns whether there is anything to copy.
bool CheckCopy(const Tensor& self, const Tensor& src) {
  if (self.is_same(src) || IsSameData(self, src)) return false;
  CheckNoInternalOverlap(self);
  CheckNoPartialOverlap(self, src);
  BroadcastShapes("copy_", self->sym_sizes(), src->sym_sizes());
  KILN_CHECK(src.dim() <= self.dim(), "[copy_] source of shape ", ShapeStr(src),
             " cannot be broadcast to destination of shape ", ShapeStr(self));
  SymDimVector joined = BroadcastShapes("copy_", self->sym_sizes(), src->sym_sizes());
  KILN_CHECK(joined == self->sym_sizes(), "output with shape ", ShapeStr(self),
             " doesn't match the broadcast shape ", SizesToString(joined));
  return true;
}

namespace {

Tensor CopyCPU(Tensor self, const Tensor& src, bool non_blocking) {
  (void)non_blocking;
  if (!CheckCopy(self, src) || self.numel() == 0) return self;
  KILN_CHECK(src.device().is_cpu() && self.device().is_cpu(), "[copy_] copies between ", src.device().str(),
             " and ", self.device().str(), " need CUDA support, which this build does not have");
  if (PartiallyOverlaps(self, src)) {
    Tensor tmp = EmptyLike(src);
    CopyKernel(tmp, src);
    CopyKernel(self, tmp);
  } else {
    CopyKernel(self, src);
  }
  return self;
}

Tensor CopyMeta(Tensor self, const Tensor& src, bool) {
  CheckCopy(self, src);
  return self;
}

// Whether t's strides are the row-major ones, size-1 dims' included: what a preserve_format copy
// keeps anyway, so it needs no trip through empty_like.
static bool RowMajorStrides(const Tensor& t) {
  return t.is_contiguous() && !t->is_symbolic() && t->sym_strides() == ContiguousStrides(t->sym_sizes());
}

// A copy of self in memory format `mf`: row-major, channels-last, or (preserve, the default) self's
// own layout as empty_like keeps it (a dense self's strides exactly, as PyTorch's clone and
// _to_copy: a (2, 1, 1) tensor with strides (1, 4, 1) copies to (1, 4, 1), not (1, 1, 1)).
Tensor EmptyIn(const Tensor& self, ScalarType dtype, Device device, std::optional<MemoryFormat> mf) {
  if (mf && *mf == MemoryFormat::ChannelsLast)
    return EmptyTensor(self->sym_sizes(), dtype, device, ChannelsLastStrides(self->sym_sizes()));
  if ((mf && *mf == MemoryFormat::Contiguous) || RowMajorStrides(self))
    return EmptyTensor(self->sym_sizes(), dtype, device);
  return CallOp<Tensor>(KILN_OP("aten::empty_like"), self, std::optional<ScalarType>(dtype), std::optional<Layout>(),
                        std::optional<Device>(device), std::optional<bool>(), std::optional<MemoryFormat>());
}

Tensor Clone(const Tensor& self, std::optional<MemoryFormat> mf) {
  Tensor out = EmptyIn(self, self.dtype(), self.device(), mf);
  return ops::copy_(out, self);
}

// In self's layout unless asked for contiguous, as PyTorch's (empty_like, preserve_format):
// `x.t().double()` is transposed too.
Tensor ToCopy(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Layout>,
              std::optional<Device> device, std::optional<bool>, bool, std::optional<MemoryFormat> mf) {
  Device dev = device.value_or(self.device());
  Tensor out = EmptyIn(self, dtype.value_or(self.dtype()), dev, mf);
  return ops::copy_(out, self);
}

Tensor ToImpl(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Device> device, bool copy,
              std::optional<MemoryFormat> mf) {
  ScalarType dt = dtype.value_or(self.dtype());
  Device dev = device.value_or(self.device());
  if (dev.is_cpu() && dev.index > 0) dev.index = -1;
  bool same_device = dev.type == self.device().type && (dev.index < 0 || dev.index == self.device().index ||
                                                        self.device().index < 0);
  const bool in_format = !mf || *mf == MemoryFormat::Preserve ||
                         (*mf == MemoryFormat::ChannelsLast ? SuggestsChannelsLast(self)
                                                             : self.is_contiguous() && !SuggestsChannelsLast(self));
  if (!copy && dt == self.dtype() && same_device && in_format) return self;
  return CallOp<Tensor>(KILN_OP("aten::_to_copy"), self, std::optional<ScalarType>(dt), std::optional<Layout>(),
                        std::optional<Device>(dev), std::optional<bool>(), false, mf);
}

Tensor ToDtype(const Tensor& self, ScalarType dtype, bool, bool copy, std::optional<MemoryFormat> mf) {
  return ToImpl(self, dtype, std::nullopt, copy, mf);
}
Tensor ToDevice(const Tensor& self, Device device, std::optional<ScalarType> dtype, bool, bool copy,
                std::optional<MemoryFormat> mf) {
  return ToImpl(self, dtype, device, copy, mf);
}
Tensor ToDtypeLayout(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Layout>,
                     std::optional<Device> device, std::optional<bool>, bool, bool copy,
                     std::optional<MemoryFormat> mf) {
  return ToImpl(self, dtype, device, copy, mf);
}
Tensor ToOther(const Tensor& self, const Tensor& other, bool, bool copy, std::optional<MemoryFormat> mf) {
  return ToImpl(self, other.dtype(), other.device(), copy, mf);
}
Tensor TypeAs(const Tensor& self, const Tensor& other) { return ToImpl(self, other.dtype(), std::nullopt, false, {}); }

Tensor LiftFreshCopy(const Tensor& self) { return ops::clone(self, std::nullopt); }

Tensor Contiguous(const Tensor& self, MemoryFormat mf) {
  // (PyTorch returns an already contiguous tensor before it looks at the format)
  KILN_CHECK(mf != MemoryFormat::Preserve || self.is_contiguous(),
             "preserve memory format is unsupported by the contiguous operator");
  if (mf == MemoryFormat::ChannelsLast) {
    KILN_CHECK(self.dim() == 4, "required rank 4 tensor to use channels_last format");
    return IsChannelsLastContiguous(self) ? self : ops::clone(self, MemoryFormat::ChannelsLast);
  }
  return self.is_contiguous() ? self : ops::clone(self, MemoryFormat::Contiguous);
}

}  // namespace

void RegisterCopyOps(Registry& r) {
  r.Def("copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)", {Tag::core}, kMethod)
      .Impl<&CopyCPU>(DispatchKey::CPU)
      .Impl<&CopyMeta>(DispatchKey::Meta)
      .Impl<&CopyMeta>(DispatchKey::Fake)
      .AllowsOverlappingWrites();  // checked by the kernels, once x.copy_(x) has returned
  r.Def("clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor", {Tag::core}, kFunctionAndMethod)
      .Cost(CostClass::kMemoryBound)
      .CompositeExplicit<&Clone>();
  // kiln.tensor(data) under make_fx: the constant's copy, recorded after its get_attr as PyTorch
  // records it (torch.tensor calls lift_fresh, which proxy tracing turns into this)
  r.Def("lift_fresh_copy(Tensor self) -> Tensor").Cost(CostClass::kMemoryBound).CompositeExplicit<&LiftFreshCopy>();
  r.Def("_to_copy(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
        "bool? pin_memory=None, bool non_blocking=False, MemoryFormat? memory_format=None) -> Tensor",
        {Tag::core}).Cost(CostClass::kMemoryBound)
      .CompositeExplicit<&ToCopy>();
  r.Def("to.dtype(Tensor(a) self, ScalarType dtype, bool non_blocking=False, bool copy=False, "
        "MemoryFormat? memory_format=None) -> Tensor(a)", {}, kMethod).Cost(CostClass::kMemoryBound)
      .Composite<&ToDtype>();
  r.Def("to.device(Tensor(a) self, Device device, ScalarType? dtype=None, bool non_blocking=False, "
        "bool copy=False, MemoryFormat? memory_format=None) -> Tensor(a)", {}, kMethod).Cost(CostClass::kMemoryBound)
      .Composite<&ToDevice>();
  r.Def("to.dtype_layout(Tensor(a) self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
        "bool? pin_memory=None, bool non_blocking=False, bool copy=False, MemoryFormat? memory_format=None) -> Tensor(a)",
        {}, kMethod).Cost(CostClass::kMemoryBound)
      .Composite<&ToDtypeLayout>();
  r.Def("to.other(Tensor(a) self, Tensor other, bool non_blocking=False, bool copy=False, "
        "MemoryFormat? memory_format=None) -> Tensor(a)", {}, kMethod).Cost(CostClass::kMemoryBound)
      .Composite<&ToOther>();
  r.Def("type_as(Tensor self, Tensor other) -> Tensor", {}, kMethod).Cost(CostClass::kMemoryBound).Composite<&TypeAs>();
  r.Def("contiguous(Tensor(a) self, *, MemoryFormat memory_format=contiguous_format) -> Tensor(a)", {}, kMethod)
      .Cost(CostClass::kMemoryBound)
      .Composite<&Contiguous>();
}

}  // namespace kiln
