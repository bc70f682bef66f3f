// autograd/formulas/views.cc: derivatives of views, copies and conversions.
#include <algorithm>

#include "autograd/formulas/common.h"
#include "autograd/view_tracking.h"
#include "tensor/ops/common.h"

namespace kiln::autograd {
using namespace formulas;

namespace {
// An optional SymInt argument (slice bounds, storage offsets): None stays nullopt.
std::optional<SymInt> OptionalSymInt(const IValue& v) {
  return v.is_none() ? std::nullopt : std::optional<SymInt>(v.to_symint());
}

// A zero tensor of `sizes` whose region picked by `view_of` receives grad.
template <typename ViewFn>
Tensor ScatterIntoZeros(const Tensor& grad, const SymDimVector& sizes, ViewFn view_of) {
  Tensor z = ZerosForViewWrites(sizes, grad);  // keeps double backward's graph (view_tracking.h)
  Tensor region = view_of(z);
  ops::copy_(region, grad);
  return z;
}

// Storage elements from a geometry's first position to its last, inclusive (0 if it is empty).
SymInt StorageSpan(const SymList& sizes, const SymList& strides) {
  SymInt span = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) return 0;
    span = span + (sizes[i] - 1) * strides[i];
  }
  return span;
}
// The storage position (within a buffer of `extent` elements) of each element of a geometry,
// flattened: an int64 index tensor for index_put.
Tensor StorageIndices(const SymInt& extent, const SymList& sizes, const SymList& strides, const SymInt& offset) {
  Tensor positions = ops::add(ops::cumsum(ops::full({extent}, 1, ScalarType::Int64), 0), Scalar(-1));  // 0..extent-1
  Tensor view = ops::as_strided(positions, sizes, strides, std::optional<SymInt>(offset));
  return ops::reshape(view, {SymInt(-1)});
}
}  // namespace

void DefineViewScatterFormulas(DerivativeTable& d);  // below

void DefineViewFormulas(DerivativeTable& d) {
  DefineViewScatterFormulas(d);
  d.Def("view", {}, [](Ctx& c, Grads& g) { g["self"] = reshape(c.grad(), c.sizes("self")); });
  d.Def("alias", {}, [](Ctx& c, Grads& g) { g["self"] = c.grad(); });
  d.Def("view_as_real", {}, [](Ctx& c, Grads& g) {
    g["self"] = CallOp<Tensor>(KILN_OP("aten::view_as_complex"), ops::contiguous(c.grad()));
  });
  d.Def("view_as_complex", {}, [](Ctx& c, Grads& g) {
    g["self"] = CallOp<Tensor>(KILN_OP("aten::view_as_real"), ops::contiguous(c.grad()));
  });
  d.Def("conj_physical", {}, [](Ctx& c, Grads& g) {
    g["self"] = CallOp<Tensor>(KILN_OP("aten::conj_physical"), c.grad());
  });
  d.Def("permute", {}, [](Ctx& c, Grads& g) {
    IntList dims = c.ints("dims");
    int64_t n = static_cast<int64_t>(dims.size());
    IntList inverse(n);
    for (int64_t i = 0; i < n; ++i) inverse[WrapDim(dims[i], n)] = i;
    g["self"] = ops::permute(c.grad(), inverse);
  });
  d.Def("transpose.int", {}, [](Ctx& c, Grads& g) {
    if (c.dim("self") == 0) { g["self"] = c.grad(); return; }
    g["self"] = ops::transpose(c.grad(), c.i64("dim0"), c.i64("dim1"));
  });
  d.Def("expand", {}, [](Ctx& c, Grads& g) { g["self"] = c.grad(); });  // the engine sums to size
  for (const char* name : {"squeeze", "squeeze.dim", "squeeze.dims"})
    d.Def(name, {}, [](Ctx& c, Grads& g) { g["self"] = reshape(c.grad(), c.sizes("self")); });
  d.Def("unsqueeze", {}, [](Ctx& c, Grads& g) { g["self"] = reshape(c.grad(), c.sizes("self")); });
  d.Def("select.int", {}, [](Ctx& c, Grads& g) {
    int64_t dim = c.i64("dim");
    SymInt index = c.arg("index").to_symint();
    g["self"] = ScatterIntoZeros(c.grad(), c.sizes("self"), [&](const Tensor& z) { return ops::select(z, dim, index); });
  });
  d.Def("slice.Tensor", {}, [](Ctx& c, Grads& g) {
    int64_t dim = c.i64("dim");
    const IValue& s = c.arg("start");
    const IValue& e = c.arg("end");
    std::optional<SymInt> start = OptionalSymInt(s), end = OptionalSymInt(e);
    SymInt step = c.arg("step").to_symint();
    g["self"] = ScatterIntoZeros(c.grad(), c.sizes("self"),
                                 [&](const Tensor& z) { return ops::slice(z, dim, start, end, step); });
  });
  d.Def("diagonal", {}, [](Ctx& c, Grads& g) {
    int64_t off = c.i64("offset"), d1 = c.i64("dim1"), d2 = c.i64("dim2");
    g["self"] = ScatterIntoZeros(c.grad(), c.sizes("self"), [&](const Tensor& z) {
      return CallOp<Tensor>(KILN_OP("aten::diagonal"), z, off, d1, d2);
    });
  });
  d.Def("as_strided", {"self.geometry"}, [](Ctx& c, Grads& g) {
    // as_strided addresses self's whole storage, not just self's elements: the view may start
    // before self (a smaller storage_offset) or reach past self's last element. As in PyTorch's
    // as_strided_backward, the gradient goes into a flat zero buffer spanning both geometries and
    // is read back through self's. Only self's layout is saved, not self: a later in-place write
    // to self (or its base) does not change this gradient, and eager PyTorch allows it.
    const IValue& off = c.arg("storage_offset");
    SymList in_sizes = c.sizes_list("self");
    SymList in_strides(c.self_strides().begin(), c.self_strides().end());
    SymList out_sizes = c.symints("size"), out_strides = c.symints("stride");
    SymInt in_offset = c.self_storage_offset();
    SymInt out_offset = off.is_none() ? in_offset : off.to_symint();
    Tensor grad = c.grad();
    // An expanded view (stride 0) reads one element many times: its gradient is the sum.
    std::vector<int64_t> repeated;
    for (size_t i = 0; i < out_sizes.size(); ++i)
      if (out_strides[i] == 0 && out_sizes[i] != 1) {
        repeated.push_back(static_cast<int64_t>(i));
        out_sizes[i] = 1;
      }
    if (!repeated.empty()) grad = sum(grad, repeated, /*keepdim=*/true);
    SymInt in_end = in_offset + StorageSpan(in_sizes, in_strides);
    SymInt out_end = out_offset + StorageSpan(out_sizes, out_strides);
    SymInt base = in_offset + out_offset - sym_max(in_offset, out_offset);  // the smaller offset
    SymInt extent = sym_max(in_end, out_end) - base;
    Tensor flat = ZerosForViewWrites(SymDimVector{extent}, grad);  // keeps double backward's graph
    if (MayOverlapItself(SymDimVector(out_sizes.begin(), out_sizes.end()),
                         SymDimVector(out_strides.begin(), out_strides.end()))) {
      // Overlapping windows (as_strided((3, 2), (1, 1))): every window's gradient adds up.
      Tensor where = StorageIndices(extent, out_sizes, out_strides, out_offset - base);
      flat = CallOp<Tensor>(KILN_OP("aten::index_put"), flat, OptionalTensorList{where},
                            ops::reshape(grad, {SymInt(-1)}), true);
    } else {
      Tensor region = ops::as_strided(flat, out_sizes, out_strides, std::optional<SymInt>(out_offset - base));
      ops::copy_(region, grad);
    }
    if (MayOverlapItself(c.sizes("self"), c.self_strides())) {
      // self reads some storage element through several of its own elements (an expanded
      // self): each gets an equal share, so the gradient reaching the storage is not counted
      // once per alias (PyTorch's as_strided_backward does the same).
      Tensor where = StorageIndices(extent, in_sizes, in_strides, in_offset - base);
      Tensor ones = ops::full({where->sym_sizes()[0]}, 1, grad.dtype(), grad.device());
      Tensor count = ops::full({extent}, 0, grad.dtype(), grad.device());
      ops::index_put_(count, OptionalTensorList{where}, ones, true);
      flat = ops::div(flat, ops::clamp(count, Scalar(1), std::nullopt));
    }
    g["self"] = ops::as_strided(flat, in_sizes, in_strides, std::optional<SymInt>(in_offset - base));
  });
  // unfold: each window position k of the last dim reads x[start + k], so the gradient adds back
  // slice by slice.
  d.Def("unfold", {}, [](Ctx& c, Grads& g) {
    const SymDimVector& sizes = c.sizes("self");
    int64_t ndim = static_cast<int64_t>(sizes.size());
    int64_t dim = ndim == 0 ? 0 : WrapDim(c.i64("dimension"), ndim);
    int64_t size = c.i64("size"), step = c.i64("step");
    Tensor grad = c.grad();
    Tensor out = ZerosForViewWrites(sizes, grad);  // keeps double backward's graph (view_tracking.h)
    if (ndim == 0) { g["self"] = reshape(grad, sizes); return; }
    int64_t windows = grad.size(dim);
    for (int64_t k = 0; k < size; ++k) {
      Tensor piece = ops::select(grad, grad.dim() - 1, k);  // [..., windows, ...]
      Tensor region = ops::slice(out, dim, SymInt(k), SymInt(k + step * (windows - 1) + 1), SymInt(step));
      ops::add_(region, piece);
    }
    g["self"] = out;
  });
  d.Def("copy_", {}, [](Ctx& c, Grads& g) {
    if (c.needs("self")) g["self"] = zeros_like(c.grad());
    if (c.needs("src")) g["src"] = c.grad();  // cast and reduced to src by the engine
  });
  d.Def("clone", {}, [](Ctx& c, Grads& g) { g["self"] = c.grad(); });
  d.Def("lift_fresh_copy", {}, [](Ctx& c, Grads& g) { g["self"] = c.grad(); });
  d.Def("t", {}, [](Ctx& c, Grads& g) { g["self"] = c.dim("self") < 2 ? c.grad() : ops::transpose(c.grad(), 0, 1); });
  d.InplaceOf("transpose_", "transpose.int");  // inplace_view: self takes the transposed layout
  d.InplaceOf("t_", "t");
  // the gradient goes back to the input's device (the engine casts it to the input's dtype), as
  // PyTorch's _to_copy_backward: x.cuda()'s gradient reaches a CPU leaf on the CPU
  d.Def("_to_copy", {}, [](Ctx& c, Grads& g) {
    const Device device = c.device("self");
    g["self"] = c.grad().device() == device ? c.grad() : CopyToDevice(c.grad(), device);
  });
  d.Def("fill_.Scalar", {}, [](Ctx& c, Grads& g) { g["self"] = zeros_like(c.grad()); });
  d.Def("fill_.Tensor", {}, [](Ctx& c, Grads& g) {
    if (c.needs("self")) g["self"] = zeros_like(c.grad());
    if (c.needs("value")) g["value"] = sum_all(c.grad());
  });
  // Random fills overwrite their input: no gradient flows back through them.
  for (const char* name : {"uniform_", "normal_", "bernoulli_.float", "random_", "random_.from", "random_.to"})
    d.Def(name, {}, [](Ctx& c, Grads& g) { g["self"] = zeros_like(c.grad()); });
  d.Def("bernoulli_.Tensor", {}, [](Ctx& c, Grads& g) {
    if (c.needs("self")) g["self"] = zeros_like(c.grad());
    if (c.needs("p")) g["p"] = zeros(c.sizes("p"), c.grad().dtype());
  });
  d.NonDifferentiable({"view.dtype", "resize_", "resize_as_", "empty_like", "rand_like", "rand_like.generator", "randn_like", "randn_like.generator",
                       "randint_like", "randint_like.generator", "randint_like.low_dtype",
                       "randint_like.low_generator_dtype", "bernoulli", "bernoulli.p", "multinomial", "one_hot", "isnan",
                       "isinf", "isfinite", "signbit", "empty.memory_format", "empty_strided",
                       "arange.start_step", "eye", "eye.m", "linspace", "randperm", "randperm.generator", "nonzero"});
  // Factories reading only self's metadata: declared, so they are recorded as one op when self
  // requires grad too, as PyTorch's CompositeExplicitAutograd ones are.
  d.NonDifferentiable({"zeros_like", "ones_like", "full_like", "new_empty", "new_full", "new_zeros", "new_ones"});
}


// The functional inverses of views (tensor/ops/view_scatter.cc): self's gradient is grad with the
// replaced region zeroed; src's is that region of grad.
void DefineViewScatterFormulas(DerivativeTable& d) {
  d.Def("slice_scatter", {}, [](Ctx& c, Grads& g) {
    int64_t dim = c.i64("dim");
    const IValue& s = c.arg("start");
    const IValue& e = c.arg("end");
    std::optional<SymInt> start = OptionalSymInt(s), end = OptionalSymInt(e);
    SymInt step = c.arg("step").to_symint();
    if (c.needs("self"))
      g["self"] = CallOp<Tensor>(KILN_OP("aten::slice_scatter"), c.grad(), zeros(c.sizes("src"), c.grad().dtype()),
                                 dim, start, end, step);
    if (c.needs("src")) g["src"] = ops::slice(c.grad(), dim, start, end, step);
  });
  d.Def("select_scatter", {}, [](Ctx& c, Grads& g) {
    int64_t dim = c.i64("dim");
    SymInt index = c.arg("index").to_symint();
    if (c.needs("self"))
      g["self"] = CallOp<Tensor>(KILN_OP("aten::select_scatter"), c.grad(), zeros(c.sizes("src"), c.grad().dtype()),
                                 dim, index);
    if (c.needs("src")) g["src"] = ops::select(c.grad(), dim, index);
  });
  d.Def("diagonal_scatter", {}, [](Ctx& c, Grads& g) {
    int64_t off = c.i64("offset"), d1 = c.i64("dim1"), d2 = c.i64("dim2");
    if (c.needs("self"))
      g["self"] = CallOp<Tensor>(KILN_OP("aten::diagonal_scatter"), c.grad(), zeros(c.sizes("src"), c.grad().dtype()),
                                 off, d1, d2);
    if (c.needs("src")) g["src"] = CallOp<Tensor>(KILN_OP("aten::diagonal"), c.grad(), off, d1, d2);
  });
  d.Def("as_strided_scatter", {}, [](Ctx& c, Grads& g) {
    // The result is contiguous, so grad's positions are the ones the view addressed.
    Tensor grad = ops::contiguous(c.grad());
    const IValue& o = c.arg("storage_offset");
    std::optional<SymInt> off = OptionalSymInt(o);
    if (c.needs("self"))
      g["self"] = CallOp<Tensor>(KILN_OP("aten::as_strided_scatter"), grad, zeros(c.sizes("src"), grad.dtype()),
                                 c.symints("size"), c.symints("stride"), off);
    if (c.needs("src")) g["src"] = ops::as_strided(grad, c.symints("size"), c.symints("stride"), off);
  });
  d.Def("copy", {}, [](Ctx& c, Grads& g) {
    if (c.needs("self")) g["self"] = zeros_like(c.grad());
    if (c.needs("src")) g["src"] = c.grad();  // cast and reduced to src by the engine
  });
  d.Def("fill.Scalar", {}, [](Ctx& c, Grads& g) { g["self"] = zeros_like(c.grad()); });
  d.Def("fill.Tensor", {}, [](Ctx& c, Grads& g) {
    if (c.needs("self")) g["self"] = zeros_like(c.grad());
    if (c.needs("value")) g["value"] = sum_all(c.grad());
  });
}

}  // namespace kiln::autograd
