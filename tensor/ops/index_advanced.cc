// tensor/ops/index_advanced.cc: advanced indexing, x[indices] (index.Tensor) and
// x[indices] = values (index_put_, index_put), with numpy's rules: int64/int32 index tensors
// broadcast together, boolean masks expand to the coordinates of their nonzero elements, indexed
// dims that are not adjacent move to the front. The result is a gather over a layout planned once
// (IndexLayout, IndexPlan): whole runs of the untouched dims per index lookup; index_put_ checks
// every index before it writes (a bad one leaves self unchanged) and with accumulate=True adds in
// index order (deterministic on the CPU; CUDA's atomics are refused under
// use_deterministic_algorithms for floating types); CUDA tensors go through index_cuda.h.
#include "tensor/cuda/indexed.h"
#include "tensor/cuda/pointwise.h"
#include "tensor/deterministic.h"
#include "tensor/ops/common.h"
#include "tensor/ops/complex_cuda.h"
#include "tensor/ops/index_cuda.h"
#include "tensor/ops/index_util.h"
#include "tensor/ops/view_strides.h"

namespace kiln {
namespace {

// --- advanced indexing (index.Tensor, index_put_) ------------------------------------------

// One int64 index per dim of self (nullopt: the dim is taken whole). Boolean masks become one
// index per dim they cover, from nonzero, as in PyTorch's expandTensors.
OptTensorVec ExpandIndices(const char* op, const Tensor& self, const OptionalTensorList& indices, bool meta) {
  OptTensorVec out;
  int64_t consumed = 0;
  for (const auto& idx : indices) {
    if (!idx || !idx->defined()) {
      out.push_back(std::nullopt);
      ++consumed;
      continue;
    }
    const ScalarType t = idx->dtype();
    KILN_CHECK_INDEX(t == ScalarType::Int64 || t == ScalarType::Int32 || t == ScalarType::Bool || t == ScalarType::UInt8,
                     "tensors used as indices must be long, int, byte or bool tensors");
    if (t == ScalarType::Int64 || t == ScalarType::Int32) {
      Tensor i = CastTo(*idx, ScalarType::Int64);
      // a CPU index into a CUDA tensor moves there, as in PyTorch
      out.push_back(!meta && i.device() != self.device() && self.device().is_cuda() ? CopyToDevice(i, self.device()) : i);
      ++consumed;
      continue;
    }
    KILN_CHECK_NOT_IMPLEMENTED(!meta, "[", op, "] boolean mask indices give a data-dependent output shape, which "
                               "meta and fake tensors cannot represent");
    KILN_CHECK_NOT_IMPLEMENTED(idx->dim() > 0, "[", op, "] 0-dimensional boolean indices are not supported");
    for (int64_t d = 0; d < idx->dim(); ++d) {
      KILN_CHECK_INDEX(consumed + d < self.dim(), "too many indices for tensor of dimension ", self.dim(), " (got ",
                       consumed + idx->dim(), ")");
      KILN_CHECK_INDEX(idx->size(d) == self.size(consumed + d), "The shape of the mask ", ShapeStr(*idx), " at index ",
                       d, " does not match the shape of the indexed tensor ", ShapeStr(self), " at index ", consumed + d);
    }
    // a mask on the GPU: its nonzero positions found on the host (one synchronisation, as PyTorch's)
    const bool on_device = idx->device().is_cuda() || self.device().is_cuda();
    Tensor nz = NonzeroCPU(idx->device().is_cuda() ? CopyToDevice(*idx, Device(DeviceType::CPU)) : *idx);
    if (on_device) nz = CopyToDevice(nz, self.device());
    for (int64_t d = 0; d < idx->dim(); ++d) out.push_back(ops::select(nz, 1, d));
    consumed += idx->dim();
  }
  KILN_CHECK_INDEX(consumed <= self.dim(), "too many indices for tensor of dimension ", self.dim(), " (got ", consumed,
                   ")");
  while (static_cast<int64_t>(out.size()) < self.dim()) out.push_back(std::nullopt);
  // PyTorch's AdvancedIndex refuses indices into an empty dim, even when the result is empty
  // anyway (x[:, i] of a [0, 0] tensor): no index value can be in bounds there.
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (!out[d] || self->sym_sizes()[d].maybe_as_int() != 0) continue;
    const std::optional<int64_t> count = (*out[d])->sym_numel().maybe_as_int();
    KILN_CHECK_INDEX(!count || *count == 0, "index is out of bounds for dimension with size 0");
  }
  return out;
}

// Where the indexed dims go: `order` permutes self so the indexed dims are adjacent, starting at
// `first` (numpy: when they are not adjacent in self, they move to the front).
struct IndexLayout {
  std::vector<int64_t> order;
  int64_t first = 0, count = 0;
  SymDimVector index_shape, result;
};

IndexLayout LayoutIndices(const Tensor& self, const OptTensorVec& idx) {
  IndexLayout L;
  const int64_t nd = self.dim();
  int64_t lo = -1, hi = -1;
  bool ok = true;
  for (int64_t d = 0; d < nd; ++d) {
    if (!idx[d]) continue;
    if (L.count == 0) {
      L.index_shape = (*idx[d])->sym_sizes();
      lo = d;
    } else {
      const SymDimVector& b = (*idx[d])->sym_sizes();
      SymDimVector& a = L.index_shape;
      const size_t n = std::max(a.size(), b.size());
      SymDimVector r(n);
      for (size_t i = 0; i < n; ++i) {
        SymInt x = i < n - a.size() ? SymInt(1) : a[i - (n - a.size())];
        SymInt y = i < n - b.size() ? SymInt(1) : b[i - (n - b.size())];
        if (x == y || y == 1) r[i] = x;
        else if (x == 1) r[i] = y;
        else ok = false;
      }
      a = r;
    }
    hi = d;
    ++L.count;
  }
  if (!ok) {  // the message is made only here: it cost a tenth of a small x[i] = v
    std::string shapes;
    for (int64_t d = 0; d < nd; ++d)
      if (idx[d]) shapes += (shapes.empty() ? "" : ", ") + ShapeStr(*idx[d]);
    KILN_CHECK_INDEX(false, "shape mismatch: indexing tensors could not be broadcast together with shapes ", shapes);
  }
  const bool adjacent = L.count == 0 || hi - lo + 1 == L.count;
  for (int64_t d = 0; d < nd; ++d) if (adjacent || idx[d]) L.order.push_back(d);
  if (!adjacent) for (int64_t d = 0; d < nd; ++d) if (!idx[d]) L.order.push_back(d);
  L.first = adjacent ? std::max<int64_t>(lo, 0) : 0;
  const SymDimVector& sizes = self->sym_sizes();
  for (int64_t i = 0; i < L.first; ++i) L.result.push_back(sizes[L.order[i]]);
  L.result.insert(L.result.end(), L.index_shape.begin(), L.index_shape.end());
  for (int64_t i = L.first + L.count; i < nd; ++i) L.result.push_back(sizes[L.order[i]]);
  return L;
}

// An index expanded to the index shape: the index itself when it has that shape already (expand
// would return a view with its sizes and strides), so a plain x[i] makes no view.
Tensor ExpandedIndex(const Tensor& index, const SymDimVector& index_shape) {
  const SymDimVector& sizes = index->sym_sizes();
  bool same = !index->is_symbolic() && sizes.size() == index_shape.size();
  for (size_t d = 0; same && d < sizes.size(); ++d)
    same = !index_shape[d].is_symbolic() && index_shape[d].expect_int() == sizes[d].expect_int();
  return same ? index : ops::expand(index, ToSymList(index_shape));
}

// The strides, over the result's shape, of the operands of PyTorch's TensorIterator for index and
// index_put_: self restrided (0 along the indexed dims), then each index tensor viewed at the
// result's rank. They decide index_put_'s walk and index's output layout.
std::vector<SymDimVector> IndexOperandStrides(const Tensor& self, const OptTensorVec& idx, const IndexLayout& L) {
  const int64_t nr = static_cast<int64_t>(L.result.size()), nb = static_cast<int64_t>(L.index_shape.size());
  SymDimVector src(nr, SymInt(0));
  for (int64_t r = 0; r < nr; ++r) {
    if (r < L.first) src[r] = self->sym_strides()[L.order[r]];
    else if (r >= L.first + nb) src[r] = self->sym_strides()[L.order[r - nb + L.count]];
  }
  std::vector<SymDimVector> out{src};
  for (int64_t j = 0; j < L.count; ++j) {
    const Tensor e = ExpandedIndex(*idx[L.order[L.first + j]], L.index_shape);
    SymDimVector at_rank(nr, SymInt(1));
    for (int64_t b = 0; b < nb; ++b) at_rank[L.first + b] = e->sym_sizes()[b];
    if (e->is_symbolic()) {  // through the op, which records what its size comparisons assume
      out.push_back(BroadcastStrides(ops::view(e, ToSymList(at_rank)), L.result));
      continue;
    }
    // view()'s strides without making the view (a dispatched op per index, per call)
    const std::optional<SymDimVector> viewed = ComputeViewStrides(e, at_rank);
    KILN_INTERNAL_ASSERT(viewed, "an index viewed with size-1 dims inserted");
    out.push_back(BroadcastStrides(at_rank, *viewed, L.result));
  }
  return out;
}

// The walks over the elements of self[indices] (`other_strides` are the strides, over the result
// shape, of the tensor read or written alongside: output or values). Index reads visit elements in
// parallel (WalkIndexedRead). index_put_ (WalkIndexed) may write an element twice,
// and the last write wins: it walks in the order of PyTorch's TensorIterator over [self
// restrided, values, indices...] (x.index_put((i,), v) with repeated rows in i and a transposed
// v kept the value of another column than PyTorch: fuzz seed 221, program 3436).
// The walk over the indexing result: its shape; the strides over it of [self restrided (0 along
// the indexed dims), the other operand, each index]; each index (expanded to the index shape) and
// its dim of self, with that dim's size and stride.
struct IndexPlan {
  DimVector shape;
  std::vector<DimVector> st;
  std::vector<Tensor> holders;
  DimVector sizes, strides, dims;
};
IndexPlan PlanIndexed(const Tensor& self, const OptTensorVec& idx, const IndexLayout& L, const DimVector& other_strides) {
  IndexPlan p;
  // self permuted by L.order: its dim r is self's dim L.order[r]
  auto src_stride = [&](int64_t r) { return self.stride(L.order[r]); };
  for (const SymInt& s : L.result) p.shape.push_back(s.expect_int());
  const int64_t nb = static_cast<int64_t>(L.index_shape.size()), nr = static_cast<int64_t>(p.shape.size());
  p.st.assign(2 + L.count, DimVector(nr, 0));
  p.st[1] = other_strides;
  for (int64_t r = 0; r < nr; ++r) {
    if (r < L.first) p.st[0][r] = src_stride(r);
    else if (r >= L.first + nb) p.st[0][r] = src_stride(r - nb + L.count);
  }
  for (int64_t j = 0; j < L.count; ++j) {
    const int64_t d = L.order[L.first + j];
    Tensor e = ExpandedIndex(*idx[d], L.index_shape);
    for (int64_t b = 0; b < nb; ++b) p.st[2 + j][L.first + b] = e.stride(b);
    p.holders.push_back(e);
    p.sizes.push_back(self.size(d));
    p.strides.push_back(self.stride(d));
    p.dims.push_back(d);
  }
  return p;
}

// The same walk on CUDA (tensor/cuda/indexed.h): out = self[indices] (kRead) or self[indices] =
// (or +=) values; indices checked on the device.
void WalkIndexedCUDA(cuda::IndexedMode mode, const Tensor& self, const OptTensorVec& idx, const IndexLayout& L,
                     const Tensor& other, const DimVector& other_strides, const char* op) {
  IndexPlan p = PlanIndexed(self, idx, L, other_strides);
  cuda::IndexedWalk w;
  w.shape = p.shape;
  w.self_strides = p.st[0];
  w.other_strides = p.st[1];
  w.indices = p.holders;
  w.index_strides.assign(p.st.begin() + 2, p.st.end());
  w.indexed_sizes = p.sizes;
  w.indexed_strides = p.strides;
  w.wrap_negative = true;
  cuda::LaunchIndexed(mode, self, other, w, op, true, "index {} is out of bounds for the indexed dimension");
}

// Self's offset for a position of the walk: the base offset plus each index's value (checked,
// negative ones wrapped) times its dim's stride.
struct IndexedOffset {
  const IndexPlan& p;
  std::vector<const int64_t*> ptrs;
  explicit IndexedOffset(const IndexPlan& plan) : p(plan) {
    for (const Tensor& e : p.holders) ptrs.push_back(e.data_ptr<int64_t>());
  }
  int64_t operator()(const int64_t* off) const {
    int64_t so = off[0];
    for (size_t j = 0; j < ptrs.size(); ++j) {
      int64_t i = ptrs[j][off[2 + j]];
      KILN_CHECK_INDEX(i >= -p.sizes[j] && i < p.sizes[j], "index ", i, " is out of bounds for dimension ", p.dims[j],
                       " with size ", p.sizes[j]);
      if (i < 0) i += p.sizes[j];
      so += i * p.strides[j];
    }
    return so;
  }
};

// The read walk (out = self[indices]) in parallel runs: fn(self_offset, out_offset, n,
// self_step, out_step) copies n elements along the result's innermost dim when no index varies
// along it (x[i] gathers whole rows: one index lookup per row, not per element); n = 1 otherwise.
template <typename F>
void WalkIndexedRead(const Tensor& self, const OptTensorVec& idx, const IndexLayout& L, const DimVector& out_strides,
                     const F& fn) {
  IndexPlan p = PlanIndexed(self, idx, L, out_strides);
  const IndexedOffset self_offset(p);
  DimVector shape = p.shape;
  std::vector<DimVector> st = p.st;
  bool rows = !shape.empty();
  for (size_t k = 2; rows && k < st.size(); ++k) rows = st[k].back() == 0;
  int64_t run = 1, self_step = 0, out_step = 0;
  if (rows) {
    run = shape.back(), self_step = st[0].back(), out_step = st[1].back();
    shape.pop_back();
    for (DimVector& v : st) v.pop_back();
  }
  auto visit = [&](const int64_t* off, const int64_t*) { fn(self_offset(off), off[1], run, self_step, out_step); };
  ParallelFor(0, NumelOf(shape), std::max<int64_t>(1, kGrainSize / run),
              [&](int64_t b, int64_t e) { ForEachStridedRange(shape, st, b, e, visit); });
}

// The write walk of index_put_: fn(self_offset, values_offset) for each element.
template <typename F>
void WalkIndexed(const Tensor& self, const OptTensorVec& idx, const IndexLayout& L, const DimVector& other_strides,
                 const Tensor& values, const F& fn) {
  IndexPlan p = PlanIndexed(self, idx, L, other_strides);
  const IndexedOffset self_offset(p);
  const DimVector& shape = p.shape;
  std::vector<DimVector>& st = p.st;
  const int64_t nr = static_cast<int64_t>(shape.size());
  auto visit = [&](const int64_t* off, const int64_t*) { fn(self_offset(off), off[1]); };
  // the operands' strides as PyTorch's iterator sees them: [self restrided, values broadcast (not
  // expanded), indices...]
  std::vector<SymDimVector> operands = IndexOperandStrides(self, idx, L);
  operands.insert(operands.begin() + 1, BroadcastStrides(values, L.result));
  const std::vector<int64_t> perm = IterationOrder(L.result, operands);  // fastest first
  DimVector walk_shape(nr);
  std::vector<DimVector> walk_strides(st.size(), DimVector(nr));
  for (int64_t r = 0; r < nr; ++r) {
    const int64_t d = perm[nr - 1 - r];
    walk_shape[r] = shape[d];
    for (size_t k = 0; k < st.size(); ++k) walk_strides[k][r] = st[k][d];
  }
  ForEachStrided(walk_shape, walk_strides, visit);
}

// The result is laid out in the memory order of [self restrided, indices] as PyTorch's
// TensorIterator allocates it: `v[i, i]` with a transposed index i is transposed too, so its
// `.int().flatten()` copies as in PyTorch (kiln's row-major result was viewed: fuzz seed 281,
// program 1325).
// A size with no example value (a mask's nonzero count) cannot be compared: row-major then.
TensorMeta IndexResultMeta(const Tensor& self, const OptTensorVec& idx, const IndexLayout& L) {
  SymDimVector strides;
  try {
    strides = LayoutOfOperands(L.result, IndexOperandStrides(self, idx, L));
  } catch (const NamedError& e) {
    if (e.python_class() != "GuardOnDataDependentSymNode") throw;
  }
  return TensorMeta{L.result, strides, self.dtype(), self.device()};
}

TensorMeta IndexMeta(const Tensor& self, const OptionalTensorList& indices) {
  OptTensorVec idx = ExpandIndices("index", self, indices, /*meta=*/true);
  return IndexResultMeta(self, idx, LayoutIndices(self, idx));
}

Tensor IndexCPU(const Tensor& self, const OptionalTensorList& indices) {
  OptTensorVec idx = ExpandIndices("index", self, indices, /*meta=*/false);
  IndexLayout L = LayoutIndices(self, idx);
  Tensor out = EmptyFromMeta(IndexResultMeta(self, idx, L));
  if (out.numel() == 0) return out;
  if (out.device().is_cuda()) {
    WalkIndexedCUDA(cuda::IndexedMode::kRead, self, idx, L, out, out.strides(), "index");
    return out;
  }
  KILN_DISPATCH_ALL_AND_COMPLEX(self.dtype(), "index", [&] {
    const scalar_t* s = self.data_ptr<scalar_t>();
    scalar_t* o = out.data_ptr<scalar_t>();
    WalkIndexedRead(self, idx, L, out.strides(), [&](int64_t so, int64_t oo, int64_t n, int64_t ss, int64_t os) {
      if (ss == 1 && os == 1) {
        std::copy(s + so, s + so + n, o + oo);
      } else {
        for (int64_t k = 0; k < n; ++k) o[oo + k * os] = s[so + k * ss];
      }
    });
  });
  return out;
}

Tensor IndexPutImpl(Tensor self, const OptionalTensorList& indices, const Tensor& values, bool accumulate, bool run) {
  // The index count first, as PyTorch (a 0-d self takes none: fuzz seed 91, program 63).
  KILN_CHECK_INDEX(static_cast<int64_t>(indices.size()) <= self.dim(), "too many indices for tensor of dimension ",
                   self.dim(), " (got ", indices.size(), ")");
  // a CPU self takes CPU indices and values only (a CUDA self may take CPU indices, as PyTorch's)
  if (self.device().is_cpu()) {
    CheckOnSelfDevice("index_put_", self, {&values});
    for (const auto& i : indices)
      if (i && i->defined()) KILN_CHECK(i->device().is_cpu(), "indices should be either on cpu or on the same device as the indexed tensor (cpu)");
  }
  // The dtypes after the indices, as PyTorch's index_put_ checks them after building its
  // AdvancedIndex: an index into an empty dim raises IndexError first (fuzz seed 881, program 5170).
  auto check_dtypes = [&] {
    KILN_CHECK(values.dtype() == self.dtype(), "Index put requires the source and destination dtypes match, got ",
               ScalarTypeDisplayName(self.dtype()), " for the destination and ", ScalarTypeDisplayName(values.dtype()),
               " for the source.");
  };
  // A boolean mask's result shape depends on its values: meta and fake tensors check the value's
  // shape only against integer indices (then compiled code refuses what eager refuses, even
  // when the result goes unused: fuzz seed 101, program 1831).
  bool masked = false;
  for (const auto& i : indices)
    masked = masked || (i && i->defined() && (i->dtype() == ScalarType::Bool || i->dtype() == ScalarType::UInt8));
  if (!run && masked) {
    check_dtypes();
    return self;
  }
  OptTensorVec idx = ExpandIndices("index_put_", self, indices, /*meta=*/!run);
  check_dtypes();
  IndexLayout L = LayoutIndices(self, idx);
  // The value broadcasts to the indexing result as it is: the op drops no leading 1s (only
  // `x[i] = v` does, in Tensor.__setitem__), so index_put_((0-d index,), a [1] value) raises as
  // PyTorch's does, before any index is read (fuzz seed 321, program 1234).
  Tensor v = values;
  bool fits = v.dim() <= static_cast<int64_t>(L.result.size());
  for (int64_t d = 0; fits && d < v.dim(); ++d) {
    const SymInt& n = v->sym_sizes()[v.dim() - 1 - d];
    fits = n == 1 || n == L.result[L.result.size() - 1 - d];
  }
  KILN_CHECK(fits, "shape mismatch: value tensor of shape ", ShapeStr(values),
             " cannot be broadcast to indexing result of shape ", SizesToString(L.result));
  if (!run) return self;
  // Nothing is written when the indexing result is empty (x[i] of a [1, 0] tensor), and PyTorch
  // then reads no index value: an out-of-range one is not an error (fuzz seed 81, program 3594).
  bool writes = true;
  for (const SymInt& n : L.result) writes = writes && n.maybe_as_int() != 0;
  for (size_t d = 0; writes && d < idx.size() && !self.device().is_cuda(); ++d)  // CUDA: checked on the device
    if (idx[d])
      CheckIndexValues(*idx[d], self.dim() == 0 ? 1 : self.size(d), d, /*negative_ok=*/true, /*index_error=*/true);
  if (!writes) return self;
  if (v->has_storage() && v->storage() == self->storage()) v = ops::clone(v);
  const Tensor unexpanded = v;
  if (self.device().is_cuda()) {
    v = ops::expand(v, ToSymList(L.result));
    if (v.device() != self.device()) v = ops::expand(CopyToDevice(unexpanded, self.device()), ToSymList(L.result));
    if (accumulate && IsFloating(self.dtype())) AlertNotDeterministic("index_put_ with accumulate=True on CUDA");
    WalkIndexedCUDA(accumulate ? cuda::IndexedMode::kAdd : cuda::IndexedMode::kWrite, self, idx, L, v, v.strides(),
                    "index_put_");
    return self;
  }
  // The value read through its strides broadcast over the result: expand's, without making the
  // view (they differ only on size-1 dims, where no offset reads a stride)
  DimVector v_strides;
  for (const SymInt& st : BroadcastStrides(v, L.result)) v_strides.push_back(st.expect_int());
  KILN_DISPATCH_ALL_AND_COMPLEX(self.dtype(), "index_put_", [&] {
    scalar_t* s = self.data_ptr<scalar_t>();
    const scalar_t* vp = v.data_ptr<scalar_t>();
    if (accumulate)
      WalkIndexed(self, idx, L, v_strides, unexpanded,
                  [&](int64_t so, int64_t vo) { s[so] = AddValues(s[so], vp[vo]); });
    else
      WalkIndexed(self, idx, L, v_strides, unexpanded, [&](int64_t so, int64_t vo) { s[so] = vp[vo]; });
  });
  return self;
}
Tensor IndexPut_(Tensor self, const OptionalTensorList& indices, const Tensor& values, bool accumulate) {
  return IndexPutImpl(self, indices, values, accumulate, true);
}
Tensor IndexPutMeta_(Tensor self, const OptionalTensorList& indices, const Tensor& values, bool accumulate) {
  return IndexPutImpl(self, indices, values, accumulate, false);
}
Tensor IndexPut(const Tensor& self, const OptionalTensorList& indices, const Tensor& values, bool accumulate) {
  Tensor out = ops::clone(self);
  return CallOp<Tensor>(KILN_OP("aten::index_put_"), out, indices, values, accumulate);
}

}  // namespace

void RegisterAdvancedIndexOps(Registry& r) {
  const std::initializer_list<Tag> kCore = {Tag::core};
  r.Def("index.Tensor(Tensor self, Tensor?[] indices) -> Tensor", kCore, kFunction).Cost(CostClass::kMemoryBound)
      .CPUAndCUDA<&IndexCPU>().Meta<&IndexMeta>();
  r.Def("index_put_(Tensor(a!) self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor(a!)", {},
        kFunctionAndMethod)
      .CPUAndCUDA<&IndexPut_>().Impl<&IndexPutMeta_>(DispatchKey::Meta)
      .Impl<&IndexPutMeta_>(DispatchKey::Fake)
      .AllowsOverlappingWrites();  // PyTorch only warns (deprecated) for index_put_ and masked_fill_
  r.Def("index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor", kCore,
        kFunctionAndMethod)
      .CompositeExplicit<&IndexPut>();
}

}  // namespace kiln
