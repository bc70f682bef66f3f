// tensor/ops/shape_ops.cc: ops that rearrange or combine values along dims (tril/triu, sort,
// topk, argsort, one_hot, padding, repeat, flip, roll, cumsum/cumprod) and the factories eye
// and linspace.
//
// Row-wise kernels (sort, topk, cumsum) walk every line along `dim` with ForEachStrided over the
// other dims, reading strided inputs in place; on CUDA, sort_cuda.cc and scan_cuda.cc (Notes [CUDA
// sort] and [CUDA scans]), topk there being the first k of a sort. Sorting is always stable, and NaN sorts as the
// largest value (last ascending, first descending), as in PyTorch. Padding other than
// "constant" is index_select with a computed index per padded dim, so it works for any rank.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "tensor/cuda/pointwise.h"
#include "tensor/ops/sort_scan_cuda.h"
#include "tensor/ops/common.h"

namespace kiln {
namespace {

using SymList = std::vector<SymInt>;
using OptDtype = std::optional<ScalarType>;
using OptLayout = std::optional<Layout>;
using OptDevice = std::optional<Device>;
using OptBool = std::optional<bool>;

SymList ToSymList(const SymDimVector& v) { return SymList(v.begin(), v.end()); }
DimVector StridesAtLeast1d(const Tensor& t) { return t.dim() == 0 ? DimVector{0} : t.strides(); }
DimVector SizesAtLeast1d(const Tensor& t) { return t.dim() == 0 ? DimVector{1} : t.sizes(); }
TensorMeta SameAs(const Tensor& t, ScalarType dtype) { return TensorMeta{t->sym_sizes(), {}, dtype, t.device()}; }
TensorMeta SameAs(const Tensor& t) { return SameAs(t, t.dtype()); }

// Walks every line of `shape` along `dim`: fn(offsets) gets each operand's offset of the line's
// first element; the line has shape[dim] elements at strides[k][dim].
template <typename F>
void ForEachLine(DimVector shape, std::vector<DimVector> strides, int64_t dim, const F& fn) {
  if (shape[dim] == 0) return;
  shape[dim] = 1;
  ForEachStrided(shape, strides, [&](const int64_t* off, const int64_t*) { fn(off); });
}

// --- tril / triu ---------------------------------------------------------------------------

template <bool kUpper>
TensorMeta TriMeta(const Tensor& self, int64_t) {
  KILN_CHECK(self.dim() >= 2, kUpper ? "triu" : "tril", ": input tensor must have at least 2 dimensions");
  return SameAs(self);
}
// Zeroes out[i, j] outside the band (tril keeps j - i <= k, triu keeps j - i >= k).
// CUDA: out = where(j - i <= k (tril; >= k triu), src, 0) in one pointwise kernel over the row and
// column indices (two aranges, broadcast).
template <bool kUpper>
void TriIntoCUDA(const Tensor& out, const Tensor& src, int64_t k) {
  if (IsComplex(out.dtype())) {  // each half on its own (Note [Complex on CUDA])
    const Tensor out_pairs = CallOp<Tensor>(KILN_OP("aten::view_as_real"), out);
    const Tensor src_pairs = CallOp<Tensor>(KILN_OP("aten::view_as_real"), src);
    for (int64_t half = 0; half < 2; ++half)
      TriIntoCUDA<kUpper>(ops::select(out_pairs, -1, SymInt(half)), ops::select(src_pairs, -1, SymInt(half)), k);
    return;
  }
  const int64_t nd = out.dim();
  auto arange = [&](int64_t n) {
    return CallOp<Tensor>(KILN_OP("aten::arange.start_step"), Scalar(int64_t{0}), Scalar(n), Scalar(int64_t{1}),
                          std::optional<ScalarType>(ScalarType::Int64), std::optional<Layout>(),
                          std::optional<Device>(out.device()), std::optional<bool>());
  };
  const Tensor rows = ops::reshape(arange(out.size(nd - 2)), {SymInt(out.size(nd - 2)), SymInt(1)});
  const Tensor cols = arange(out.size(nd - 1));
  using codegen::Expr;
  using codegen::OpCode;
  const codegen::DType t = cuda::CodegenDType(out.dtype(), kUpper ? "triu" : "tril");
  const auto diff = Expr::Op(OpCode::kSub, {cuda::Input(1), cuda::Input(0)});
  const auto keep = Expr::Op(kUpper ? OpCode::kGe : OpCode::kLe, {diff, cuda::Input(2)});
  cuda::LaunchPointwise(kUpper ? "triu" : "tril", out,
                        {cuda::PointwiseInput::Of(rows), cuda::PointwiseInput::Of(cols),
                         cuda::PointwiseInput::Number(Scalar(k), ScalarType::Int64), cuda::PointwiseInput::Of(src)},
                        Expr::Op(OpCode::kWhere, {keep, Expr::Cast(cuda::Input(3), t), Expr::Cast(Expr::ConstInt(0, codegen::DType::I64), t)}));
}

template <bool kUpper>
void TriInto(const Tensor& out, const Tensor& src, int64_t k) {
  if (out.device().is_cuda()) return TriIntoCUDA<kUpper>(out, src, k);
  const int64_t nd = out.dim();
  KILN_DISPATCH_ALL_AND_COMPLEX(out.dtype(), kUpper ? "triu" : "tril", [&] {
    scalar_t* o = out.data_ptr<scalar_t>();
    const scalar_t* s = src.data_ptr<scalar_t>();
    ParallelForEachStrided(out.sizes(), {out.strides(), src.strides()}, [&](const int64_t* off, const int64_t* idx) {
      const int64_t diff = idx[nd - 1] - idx[nd - 2];
      const bool keep = kUpper ? diff >= k : diff <= k;
      o[off[0]] = keep ? s[off[1]] : scalar_t(0);
    });
  });
}
template <bool kUpper>
Tensor Tri(const Tensor& self, int64_t k) {
  Tensor out = EmptyFromMeta(TriMeta<kUpper>(self, k));
  TriInto<kUpper>(out, self, k);
  return out;
}
template <bool kUpper>
Tensor Tri_(Tensor self, int64_t k) {
  TriMeta<kUpper>(self, k);
  TriInto<kUpper>(self, self, k);
  return self;
}
template <bool kUpper>
Tensor TriMeta_(Tensor self, int64_t k) {
  TriMeta<kUpper>(self, k);
  return self;
}

// --- sort / topk / argsort -----------------------------------------------------------------

// Strict weak order with NaN largest.
template <typename M>
inline bool LessNanLast(M a, M b) {
  if constexpr (std::is_floating_point_v<M>) {
    if (std::isnan(b)) return !std::isnan(a);
    return a < b;
  } else {
    return a < b;
  }
}

// Writes the first `k` elements of each line along `dim`, ordered (stably) ascending or
// descending, into values and indices (both shaped like self with size k at `dim`).
void SortLines(const Tensor& self, int64_t dim, bool descending, int64_t k, const Tensor& values,
               const Tensor& indices) {
  if (values.numel() == 0) return;
  const int64_t n = SizesAtLeast1d(self)[dim];
  KILN_DISPATCH_ALL(self.dtype(), "sort", [&] {
    using M = opmath_t<scalar_t>;
    const scalar_t* s = self.data_ptr<scalar_t>();
    scalar_t* v = values.data_ptr<scalar_t>();
    int64_t* ix = indices.data_ptr<int64_t>();
    const DimVector ss = StridesAtLeast1d(self), vs = StridesAtLeast1d(values), is = StridesAtLeast1d(indices);
    std::vector<int64_t> order(n);
    std::vector<M> keys(n);
    ForEachLine(SizesAtLeast1d(self), {ss, vs, is}, dim, [&](const int64_t* off) {
      for (int64_t i = 0; i < n; ++i) keys[i] = static_cast<M>(s[off[0] + i * ss[dim]]);
      std::iota(order.begin(), order.end(), 0);
      if (descending)
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return LessNanLast(keys[b], keys[a]); });
      else
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return LessNanLast(keys[a], keys[b]); });
      for (int64_t i = 0; i < k; ++i) {
        v[off[1] + i * vs[dim]] = s[off[0] + order[i] * ss[dim]];
        ix[off[2] + i * is[dim]] = order[i];
      }
    });
  });
}

std::tuple<TensorMeta, TensorMeta> SortMeta(const Tensor& self, int64_t dim, bool) {
  WrapDim(dim, self.dim());
  return {SameAs(self), SameAs(self, ScalarType::Int64)};
}
std::tuple<TensorMeta, TensorMeta> SortStableMeta(const Tensor& self, OptBool, int64_t dim, bool descending) {
  return SortMeta(self, dim, descending);
}
std::tuple<Tensor, Tensor> SortCPU(const Tensor& self, int64_t dim, bool descending) {
  auto [vm, im] = SortMeta(self, dim, descending);
  Tensor values = EmptyFromMeta(vm), indices = EmptyFromMeta(im);
  dim = WrapDim(dim, self.dim());
  if (self.device().is_cuda()) {
    SortCUDA(self, dim, descending, values, indices);
    return {values, indices};
  }
  SortLines(self, dim, descending, SizesAtLeast1d(self)[dim], values, indices);
  return {values, indices};
}
std::tuple<Tensor, Tensor> SortStableCPU(const Tensor& self, OptBool, int64_t dim, bool descending) {
  return SortCPU(self, dim, descending);
}
Tensor Argsort(const Tensor& self, int64_t dim, bool descending) {
  return std::get<1>(CallOp<std::tuple<Tensor, Tensor>>(KILN_OP("aten::sort"), self, dim, descending));
}
Tensor ArgsortStable(const Tensor& self, bool, int64_t dim, bool descending) { return Argsort(self, dim, descending); }

std::tuple<TensorMeta, TensorMeta> TopkMeta(const Tensor& self, const SymInt& k, int64_t dim, bool, bool) {
  dim = WrapDim(dim, self.dim());
  const SymInt n = self.dim() == 0 ? SymInt(1) : self->sym_sizes()[dim];
  KILN_CHECK(self.dtype() != ScalarType::Bool, "topk does not support bool dtypes on CPU");  // as PyTorch
  KILN_CHECK(k >= 0 && k <= n, "selected index k out of range");
  SymDimVector sizes = self->sym_sizes();
  if (self.dim() > 0) sizes[dim] = k;
  return {TensorMeta{sizes, {}, self.dtype(), self.device()}, TensorMeta{sizes, {}, ScalarType::Int64, self.device()}};
}
std::tuple<Tensor, Tensor> TopkCPU(const Tensor& self, const SymInt& k, int64_t dim, bool largest, bool sorted) {
  auto [vm, im] = TopkMeta(self, k, dim, largest, sorted);
  Tensor values = EmptyFromMeta(vm), indices = EmptyFromMeta(im);
  dim = WrapDim(dim, self.dim());
  if (self.device().is_cuda()) {  // the first k of the whole sorted line (Note [CUDA sort])
    if (values.numel() == 0) return {values, indices};
    Tensor sorted = EmptyTensor(self.sizes(), self.dtype(), self.device());
    Tensor order = EmptyTensor(self.sizes(), ScalarType::Int64, self.device());
    SortCUDA(self, dim, largest, sorted, order);
    const bool whole = self.dim() == 0;
    ops::copy_(values, whole ? sorted : ops::slice(sorted, dim, 0, k.expect_int()));
    ops::copy_(indices, whole ? order : ops::slice(order, dim, 0, k.expect_int()));
    return {values, indices};
  }
  SortLines(self, dim, largest, k.expect_int(), values, indices);
  return {values, indices};
}

// --- one_hot -------------------------------------------------------------------------------

TensorMeta OneHotMeta(const Tensor& self, int64_t num_classes) {
  KILN_CHECK(self.dtype() == ScalarType::Int64, "one_hot is only applicable to index tensor of type LongTensor.");
  KILN_CHECK_NOT_IMPLEMENTED(num_classes != -1, "[one_hot] num_classes=-1 infers the class count from the data, "
                             "which meta and fake tensors cannot do; pass num_classes");
  KILN_CHECK(num_classes >= 0, "Class values must be non-negative.");
  SymDimVector sizes = self->sym_sizes();
  sizes.push_back(num_classes);
  return TensorMeta{sizes, {}, ScalarType::Int64, self.device()};
}
// On CUDA, as PyTorch's: the bounds (and the class count when inferred) read back from the device,
// then zeros scattered with ones.
Tensor OneHotCUDA(const Tensor& self, int64_t num_classes) {
  if (self.numel() > 0) {
    const int64_t lo = ItemScalar("one_hot", CallOp<Tensor>(KILN_OP("aten::min"), self)).to_int();
    const int64_t hi = ItemScalar("one_hot", CallOp<Tensor>(KILN_OP("aten::max"), self)).to_int();
    KILN_CHECK(lo >= 0, "Class values must be non-negative.");
    if (num_classes == -1) num_classes = hi + 1;
    KILN_CHECK(hi < num_classes, "Class values must be smaller than num_classes.");
  }
  KILN_CHECK(num_classes != -1, "Can not infer total number of classes from empty tensor.");
  Tensor out = CallOp<Tensor>(KILN_OP("aten::zeros"), ToSymList(OneHotMeta(self, num_classes).sizes),
                              OptDtype(ScalarType::Int64), OptLayout(), OptDevice(self.device()), OptBool());
  if (self.numel() == 0) return out;
  return CallOp<Tensor>(KILN_OP("aten::scatter_.value"), out, int64_t(-1), ops::unsqueeze(self, -1), Scalar(int64_t(1)));
}

Tensor OneHotCPU(const Tensor& self, int64_t num_classes) {
  KILN_CHECK(self.dtype() == ScalarType::Int64, "one_hot is only applicable to index tensor of type LongTensor.");
  if (self.device().is_cuda()) return OneHotCUDA(self, num_classes);
  const int64_t* p = self.data_ptr<int64_t>();
  std::vector<int64_t> vals;
  ForEachStrided(self.sizes(), {self.strides()}, [&](const int64_t* off, const int64_t*) { vals.push_back(p[off[0]]); });
  if (num_classes == -1) {
    KILN_CHECK(!vals.empty(), "Can not infer total number of classes from empty tensor.");
    num_classes = *std::max_element(vals.begin(), vals.end()) + 1;
  }
  Tensor out = CallOp<Tensor>(KILN_OP("aten::zeros"), ToSymList(OneHotMeta(self, num_classes).sizes),
                              OptDtype(ScalarType::Int64), OptLayout(), OptDevice(self.device()), OptBool());
  int64_t* o = out.data_ptr<int64_t>();
  for (size_t i = 0; i < vals.size(); ++i) {
    KILN_CHECK(vals[i] >= 0, "Class values must be non-negative.");
    KILN_CHECK(vals[i] < num_classes, "Class values must be smaller than num_classes.");
    o[i * num_classes + vals[i]] = 1;
  }
  return out;
}

// --- padding -------------------------------------------------------------------------------

void CheckPadLength(const Tensor& self, const SymList& pad) {
  KILN_CHECK(pad.size() % 2 == 0, "Length of pad must be even but instead it equals ", pad.size());
  KILN_CHECK(static_cast<int64_t>(pad.size() / 2) <= self.dim(), "Length of pad should be no more than twice the "
             "number of dimensions of the input. Pad length is ", pad.size(), " while the input has ", self.dim(),
             " dimensions.");
}

TensorMeta ConstantPadMeta(const Tensor& self, const SymList& pad, const Scalar&) {
  CheckPadLength(self, pad);
  SymDimVector sizes = self->sym_sizes();
  for (size_t i = 0; i < pad.size() / 2; ++i) {
    const int64_t d = self.dim() - 1 - static_cast<int64_t>(i);
    const SymInt& l = pad[2 * i];
    const SymInt& r = pad[2 * i + 1];
    SymInt size = sizes[d] + l + r;
    KILN_CHECK(size >= 0, "The input size ", sizes[d].str(), ", plus negative padding ", l.str(), " and ", r.str(),
               " resulted in a negative output size, which is invalid. Check dimension ", d, " of your input.");
    sizes[d] = size;
  }
  return TensorMeta{sizes, {}, self.dtype(), self.device()};
}

Tensor ConstantPad(const Tensor& self, const SymList& pad, const Scalar& value) {
  TensorMeta m = ConstantPadMeta(self, pad, value);
  Tensor out = ops::full(ToSymList(m.sizes), value, self.dtype(), self.device());
  Tensor src = self, dst = out;
  for (size_t i = 0; i < pad.size() / 2; ++i) {
    const int64_t d = self.dim() - 1 - static_cast<int64_t>(i);
    const int64_t l = pad[2 * i].expect_int(), r = pad[2 * i + 1].expect_int(), n = self.size(d);
    const int64_t len = n - std::max<int64_t>(-l, 0) - std::max<int64_t>(-r, 0);
    if (len <= 0) return out;
    src = ops::slice(src, d, SymInt(std::max<int64_t>(-l, 0)), SymInt(std::max<int64_t>(-l, 0) + len));
    dst = ops::slice(dst, d, SymInt(std::max<int64_t>(l, 0)), SymInt(std::max<int64_t>(l, 0) + len));
  }
  ops::copy_(dst, src);
  return out;
}

Tensor Pad(const Tensor& self, const SymList& pad, const std::string& mode, std::optional<double> value) {
  if (mode == "constant") {
    Scalar v = value ? Scalar(*value) : Scalar(int64_t(0));
    return CallOp<Tensor>(KILN_OP("aten::constant_pad_nd"), self, pad, v);
  }
  KILN_CHECK_NOT_IMPLEMENTED(mode == "reflect" || mode == "replicate" || mode == "circular",
                             "Unrecognised padding mode ", mode);
  KILN_CHECK(!value || *value == 0, "Padding mode \"", mode, "\" doesn't take in value argument.");
  // PyTorch's reflection/replication pad kernels have no bool version (circular is built from cat).
  KILN_CHECK_NOT_IMPLEMENTED(self.dtype() != ScalarType::Bool || mode == "circular", "\"",
                             mode == "reflect" ? "reflection_pad" : "replication_pad", pad.size() / 2,
                             "d\" not implemented for 'Bool'");
  CheckPadLength(self, pad);
  Tensor x = self;
  for (size_t i = 0; i < pad.size() / 2; ++i) {
    const int64_t d = self.dim() - 1 - static_cast<int64_t>(i);
    const int64_t l = pad[2 * i].expect_int(), r = pad[2 * i + 1].expect_int(), n = self.size(d);
    if (mode == "reflect")
      KILN_CHECK(l < n && r < n, "Argument #4: Padding size should be less than the corresponding input dimension, "
                 "but got: padding (", l, ", ", r, ") at dimension ", d, " of input ", ShapeStr(self));
    else if (mode == "circular")
      KILN_CHECK(l <= n && r <= n, "Padding value causes wrapping around more than once.");
    else
      KILN_CHECK(n > 0 || (l <= 0 && r <= 0), "[pad] replicate padding of an empty dimension ", d);
    const int64_t out_n = n + l + r;
    KILN_CHECK(out_n >= 0, "The input size ", n, ", plus negative padding ", l, " and ", r,
               " resulted in a negative output size, which is invalid. Check dimension ", d, " of your input.");
    // The source index of each output position, j - l folded back into [0, n), built by ops so that a
    // fake tensor (compiled code, the meta device) traces it too: filled on the host, it was written
    // through a fake tensor's null data pointer (a segfault under FakeTensorMode).
    auto minus = [](const Tensor& t, int64_t v) {
      return CallOp<Tensor>(KILN_OP("aten::sub.Scalar"), t, Scalar(v), Scalar(int64_t{1}));
    };
    auto abs = [](const Tensor& t) { return CallOp<Tensor>(KILN_OP("aten::abs"), t); };
    Tensor s = minus(CallOp<Tensor>(KILN_OP("aten::arange.start_step"), Scalar(int64_t{0}), Scalar(out_n),
                                    Scalar(int64_t{1}), std::optional<ScalarType>(ScalarType::Int64),
                                    std::optional<Layout>(), std::optional<Device>(self.device()),
                                    std::optional<bool>()),
                     l);
    Tensor it;
    if (mode == "replicate")
      it = ops::clamp(s, Scalar(int64_t{0}), Scalar(n - 1));
    else if (mode == "circular")  // n == 0 leaves nothing to index (the checks above: out_n == 0)
      it = n > 0 ? CallOp<Tensor>(KILN_OP("aten::remainder.Scalar"), s, Scalar(n)) : s;
    else  // reflect: (n - 1) - |(n - 1) - |s||
      it = CallOp<Tensor>(KILN_OP("aten::neg"), minus(abs(minus(abs(s), n - 1)), n - 1));
    x = CallOp<Tensor>(KILN_OP("aten::index_select"), x, d, it);
  }
  return x;
}

// --- repeat / flip / roll ------------------------------------------------------------------

Tensor Repeat(const Tensor& self, const SymList& repeats) {
  const int64_t nr = static_cast<int64_t>(repeats.size()), nd = self.dim();
  KILN_CHECK(nr >= nd, "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor");
  // [s0, s1] repeated [r0, r1]: view as [1, s0, 1, s1], expand to [r0, s0, r1, s1], copy, merge.
  SymList padded(nr - nd, SymInt(1)), interleaved, expanded, result;
  padded.insert(padded.end(), self->sym_sizes().begin(), self->sym_sizes().end());
  for (int64_t i = 0; i < nr; ++i) {
    KILN_CHECK(repeats[i] >= 0, "Trying to create tensor with negative dimension ", repeats[i].str(), ": ",
               SizesToString(SymDimVector(repeats.begin(), repeats.end())));
    interleaved.insert(interleaved.end(), {SymInt(1), padded[i]});
    expanded.insert(expanded.end(), {repeats[i], padded[i]});
    result.push_back(repeats[i] * padded[i]);
  }
  Tensor x = ops::reshape(self, interleaved);
  // clone, not contiguous: repeat always returns new memory, even when every repeat is 1 and
  // self is contiguous (contiguous() would return an alias of self).
  return ops::reshape(ops::clone(ops::expand(x, expanded), MemoryFormat::Contiguous), result);
}

TensorMeta FlipMeta(const Tensor& self, const std::vector<int64_t>& dims) {
  std::vector<bool> seen(std::max<int64_t>(self.dim(), 1), false);
  for (int64_t d : dims) {
    int64_t w = WrapDim(d, self.dim());
    KILN_CHECK(!seen[w], "dim ", w, " appears multiple times in the list of dims");
    seen[w] = true;
  }
  // laid out as self is (PyTorch's flip allocates empty_like(self)): flip of a transposed x is
  // transposed, so its .contiguous() copies; a contiguous result was returned by it, and an
  // in-place op on that changed the flip too (fuzz seed 281, program 19137)
  return TensorMeta{self->sym_sizes(), PreserveFormatStrides(self), self.dtype(), self.device()};
}
Tensor FlipCPU(const Tensor& self, const std::vector<int64_t>& dims) {
  Tensor out = EmptyFromMeta(FlipMeta(self, dims));
  if (out.numel() == 0) return out;
  if (self.device().is_cuda()) {  // each flipped dim gathered in reverse (index_select's kernel)
    Tensor src = self;
    for (int64_t d : dims) {
      if (self.dim() == 0) continue;
      const int64_t w = WrapDim(d, self.dim()), n = self.size(w);
      Tensor reversed = CallOp<Tensor>(KILN_OP("aten::arange.start_step"), Scalar(n - 1), Scalar(int64_t(-1)),
                                       Scalar(int64_t(-1)), OptDtype(ScalarType::Int64), OptLayout(),
                                       OptDevice(self.device()), OptBool());
      src = CallOp<Tensor>(KILN_OP("aten::index_select"), src, w, reversed);
    }
    return ops::copy_(out, src);
  }
  DimVector st = self.strides();
  int64_t base = 0;
  for (int64_t d : dims) {
    if (self.dim() == 0) continue;
    int64_t w = WrapDim(d, self.dim());
    base += (self.size(w) - 1) * st[w];
    st[w] = -st[w];
  }
  KILN_DISPATCH_ALL_AND_COMPLEX(self.dtype(), "flip", [&] {
    const scalar_t* s = self.data_ptr<scalar_t>() + base;
    scalar_t* o = out.data_ptr<scalar_t>();
    ParallelForEachStrided(out.sizes(), {out.strides(), st},
                           [&](const int64_t* off, const int64_t*) { o[off[0]] = s[off[1]]; });
  });
  return out;
}

Tensor Roll(const Tensor& self, const SymList& shifts, const SymList& dims) {
  if (dims.empty()) {
    KILN_CHECK(shifts.size() == 1, "shifts and dimensions must align. shifts: ", shifts.size(), ", dims:", dims.size());
    Tensor flat = ops::reshape(self, {SymInt(-1)});
    return ops::view(CallOp<Tensor>(KILN_OP("aten::roll"), flat, shifts, SymList{SymInt(0)}),
                     ToSymList(self->sym_sizes()));
  }
  KILN_CHECK(shifts.size() == dims.size(), "shifts and dimensions must align. shifts: ", shifts.size(), ", dims:",
             dims.size());
  Tensor x = self;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = WrapDim(dims[i].expect_int(), self.dim());
    const int64_t n = self.size(d);
    if (n == 0) continue;
    const int64_t s = ((shifts[i].expect_int() % n) + n) % n;
    if (s == 0) continue;
    x = CallOp<Tensor>(KILN_OP("aten::cat"),
                       std::vector<Tensor>{ops::slice(x, d, SymInt(n - s), SymInt(n)), ops::slice(x, d, SymInt(0), SymInt(n - s))},
                       d);
  }
  return x.is_same(self) ? ops::clone(self) : x;
}

// --- cumsum / cumprod ----------------------------------------------------------------------

ScalarType CumType(const Tensor& self, OptDtype dtype) {
  if (dtype) return *dtype;
  return IsIntegral(self.dtype(), true) ? ScalarType::Int64 : self.dtype();
}
template <bool kProd>
TensorMeta CumMeta(const Tensor& self, int64_t dim, OptDtype dtype) {
  WrapDim(dim, self.dim());
  return SameAs(self, CumType(self, dtype));
}
template <bool kProd>
Tensor Cum(const Tensor& self, int64_t dim, OptDtype dtype) {
  Tensor out = EmptyFromMeta(CumMeta<kProd>(self, dim, dtype));
  if (out.numel() == 0) return out;
  dim = WrapDim(dim, self.dim());
  Tensor in = CastTo(self, out.dtype());
  if (out.device().is_cuda()) {
    ScanCUDA(kProd, in, dim, out);
    return out;
  }
  KILN_DISPATCH_NUMERIC(out.dtype(), kProd ? "cumprod" : "cumsum", [&] {
    using Acc = acc_t<scalar_t>;
    const scalar_t* s = in.data_ptr<scalar_t>();
    scalar_t* o = out.data_ptr<scalar_t>();
    const DimVector is = StridesAtLeast1d(in), os = StridesAtLeast1d(out);
    const int64_t n = SizesAtLeast1d(in)[dim];
    ForEachLine(SizesAtLeast1d(in), {is, os}, dim, [&](const int64_t* off) {
      Acc acc = kProd ? Acc(1) : Acc(0);
      for (int64_t i = 0; i < n; ++i) {
        const Acc x = static_cast<Acc>(static_cast<opmath_t<scalar_t>>(s[off[0] + i * is[dim]]));
        acc = kProd ? acc * x : acc + x;
        o[off[1] + i * os[dim]] = static_cast<scalar_t>(static_cast<opmath_t<scalar_t>>(acc));
      }
    });
  });
  return out;
}
// In place, PyTorch accumulates in self's dtype, which for bool has no kernel (out of place, bool
// promotes to int64).
template <bool kProd>
void CheckCumInplace(const Tensor& self, OptDtype dtype) {
  KILN_CHECK_NOT_IMPLEMENTED(dtype.value_or(self.dtype()) != ScalarType::Bool, "\"", kProd ? "cumprod" : "cumsum",
                             "_out_cpu\" not implemented for 'Bool'");
}
template <bool kProd>
Tensor Cum_(Tensor self, int64_t dim, OptDtype dtype) {
  CheckCumInplace<kProd>(self, dtype);
  Tensor r = Cum<kProd>(self, dim, dtype);
  return ops::copy_(self, r);
}
template <bool kProd>
Tensor CumMeta_(Tensor self, int64_t dim, OptDtype dtype) {
  CheckCumInplace<kProd>(self, dtype);
  CumMeta<kProd>(self, dim, dtype);
  return self;
}

// --- eye / linspace ------------------------------------------------------------------------

Tensor EyeM(const SymInt& n, const SymInt& m, OptDtype dtype, OptLayout layout, OptDevice device, OptBool pin) {
  KILN_CHECK(n >= 0, "n must be greater or equal to 0, got ", n.str());
  KILN_CHECK(m >= 0, "m must be greater or equal to 0, got ", m.str());
  if (OnCUDA(device)) return CopyToDevice(EyeM(n, m, dtype, layout, Device(), pin), *device);
  Tensor out = EmptyTensor(SymDimVector{n, m}, dtype.value_or(GetDefaultDtype()), device.value_or(Device()));
  (void)layout;
  (void)pin;
  if (!out->has_storage()) return out;
  ops::fill_(out, Scalar(int64_t(0)));
  const int64_t k = std::min(n.expect_int(), m.expect_int()), cols = m.expect_int();
  KILN_DISPATCH_ALL(out.dtype(), "eye", [&] {
    scalar_t* p = out.data_ptr<scalar_t>();
    for (int64_t i = 0; i < k; ++i) p[i * cols + i] = scalar_t(1);
  });
  return out;
}
Tensor Eye(const SymInt& n, OptDtype dtype, OptLayout layout, OptDevice device, OptBool pin) {
  return EyeM(n, n, dtype, layout, device, pin);
}

Tensor Linspace(const Scalar& start, const Scalar& end, int64_t steps, OptDtype dtype, OptLayout, OptDevice device,
                OptBool) {
  KILN_CHECK(steps >= 0, "number of steps must be non-negative");
  if (OnCUDA(device)) return CopyToDevice(Linspace(start, end, steps, dtype, {}, Device(), {}), *device);
  Tensor out = EmptyTensor(DimVector{steps}, dtype.value_or(GetDefaultDtype()), device.value_or(Device()));
  if (!out->has_storage() || steps == 0) return out;
  const int64_t half = steps == 1 ? 1 : steps / 2;  // one step gives [start], as in PyTorch
  KILN_DISPATCH_NUMERIC(out.dtype(), "linspace", [&] {
    // Integer outputs interpolate between start and end cast to the dtype first, as PyTorch does
    // (linspace(-2, 3, 7, dtype=uint8) runs from 254 down to 3).
    constexpr bool kInt = std::is_integral_v<scalar_t>;
    const double a = kInt ? double(start.to<scalar_t>()) : start.to_double();
    const double b = kInt ? double(end.to<scalar_t>()) : end.to_double();
    const double step = steps > 1 ? (b - a) / (steps - 1) : 0.0;
    scalar_t* p = out.data_ptr<scalar_t>();
    for (int64_t i = 0; i < steps; ++i) {
      const double v = i < half ? a + step * i : b - step * (steps - i - 1);
      p[i] = static_cast<scalar_t>(static_cast<opmath_t<scalar_t>>(v));
    }
  });
  return out;
}

}  // namespace

#define KILN_FACTORY_KWARGS "ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None"

void RegisterShapeOps(Registry& r) {
  const std::initializer_list<Tag> kCore = {Tag::core};
  r.Def("tril(Tensor self, int diagonal=0) -> Tensor", kCore, kFunctionAndMethod).Cost(CostClass::kMemoryBound)
      .CPUAndCUDA<&Tri<false>>().Meta<&TriMeta<false>>();
  r.Def("triu(Tensor self, int diagonal=0) -> Tensor", kCore, kFunctionAndMethod).Cost(CostClass::kMemoryBound)
      .CPUAndCUDA<&Tri<true>>().Meta<&TriMeta<true>>();
  r.Def("tril_(Tensor(a!) self, int diagonal=0) -> Tensor(a!)", {}, kMethod)
      .CPUAndCUDA<&Tri_<false>>().Impl<&TriMeta_<false>>(DispatchKey::Meta)
      .Impl<&TriMeta_<false>>(DispatchKey::Fake)
      .AllowsOverlappingWrites();  // as PyTorch's tril_/triu_
  r.Def("triu_(Tensor(a!) self, int diagonal=0) -> Tensor(a!)", {}, kMethod)
      .CPUAndCUDA<&Tri_<true>>().Impl<&TriMeta_<true>>(DispatchKey::Meta)
      .Impl<&TriMeta_<true>>(DispatchKey::Fake)
      .AllowsOverlappingWrites();
  r.Def("sort(Tensor self, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)", kCore,
        kFunctionAndMethod)
      .CPUAndCUDA<&SortCPU>().Meta<&SortMeta>();
  r.Def("sort.stable(Tensor self, *, bool? stable, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)",
        {}, kFunctionAndMethod)
      .CPUAndCUDA<&SortStableCPU>().Meta<&SortStableMeta>();
  r.Def("argsort(Tensor self, int dim=-1, bool descending=False) -> Tensor", {}, kFunctionAndMethod)
      .Composite<&Argsort>();
  r.Def("argsort.stable(Tensor self, *, bool stable, int dim=-1, bool descending=False) -> Tensor", {},
        kFunctionAndMethod)
      .Composite<&ArgsortStable>();
  r.Def("topk(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor values, Tensor indices)",
        kCore, kFunctionAndMethod)
      .CPUAndCUDA<&TopkCPU>().Meta<&TopkMeta>();
  r.Def("one_hot(Tensor self, int num_classes=-1) -> Tensor").CPUAndCUDA<&OneHotCPU>().Meta<&OneHotMeta>();
  r.Def("constant_pad_nd(Tensor self, SymInt[] pad, Scalar value=0) -> Tensor", kCore)
      .CPUAndCUDA<&ConstantPad>().Meta<&ConstantPadMeta>();
  r.Def("pad(Tensor self, SymInt[] pad, str mode=\"constant\", float? value=None) -> Tensor").Composite<&Pad>();
  r.Def("repeat(Tensor self, SymInt[] repeats) -> Tensor", {}, kMethod).CompositeExplicit<&Repeat>();
  r.Def("flip(Tensor self, int[] dims) -> Tensor", kCore, kFunctionAndMethod)
      .CPUAndCUDA<&FlipCPU>().Meta<&FlipMeta>();
  r.Def("roll(Tensor self, SymInt[1] shifts, SymInt[1] dims=[]) -> Tensor", {}, kFunctionAndMethod)
      .CompositeExplicit<&Roll>();
  r.Def("cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor", kCore, kFunctionAndMethod)
      .Cost(CostClass::kMemoryBound)
      .CPUAndCUDA<&Cum<false>>().Meta<&CumMeta<false>>();
  r.Def("cumprod(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor", kCore, kFunctionAndMethod)
      .CPUAndCUDA<&Cum<true>>().Meta<&CumMeta<true>>();
  r.Def("cumsum_(Tensor(a!) self, int dim, *, ScalarType? dtype=None) -> Tensor(a!)", {}, kMethod)
      .CPUAndCUDA<&Cum_<false>>().Impl<&CumMeta_<false>>(DispatchKey::Meta)
      .Impl<&CumMeta_<false>>(DispatchKey::Fake);
  r.Def("cumprod_(Tensor(a!) self, int dim, *, ScalarType? dtype=None) -> Tensor(a!)", {}, kMethod)
      .CPUAndCUDA<&Cum_<true>>().Impl<&CumMeta_<true>>(DispatchKey::Meta)
      .Impl<&CumMeta_<true>>(DispatchKey::Fake);
  r.Def("eye(SymInt n, *, " KILN_FACTORY_KWARGS ") -> Tensor", kCore).AllBackends<&Eye>();
  r.Def("eye.m(SymInt n, SymInt m, *, " KILN_FACTORY_KWARGS ") -> Tensor", kCore).AllBackends<&EyeM>();
  r.Def("linspace(Scalar start, Scalar end, int steps, *, " KILN_FACTORY_KWARGS ") -> Tensor", kCore)
      .AllBackends<&Linspace>();
}

#undef KILN_FACTORY_KWARGS

}  // namespace kiln
