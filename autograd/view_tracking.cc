// autograd/view_tracking.cc: CopySlices and the strided-view backward of a rebased view.
#include "autograd/view_tracking.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <string_view>
#include <unordered_map>

#include "autograd/derivatives.h"
#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "tensor/empty.h"
#include "tensor/ops.h"

namespace kiln::autograd {
namespace {

struct Geometry {
  SymDimVector sizes, strides;
  SymInt offset;
  static Geometry Of(const Tensor& t) { return {t->sym_sizes(), t->sym_strides(), t->sym_storage_offset()}; }
};

std::vector<SymInt> Vec(const SymDimVector& v) { return std::vector<SymInt>(v.begin(), v.end()); }

// The number of storage elements a geometry spans from its first one (0 when it has no elements).
SymInt Extent(const Geometry& g) {
  SymInt extent = 1;
  for (size_t d = 0; d < g.sizes.size(); ++d) {
    if (!g.sizes[d].is_symbolic() && g.sizes[d].expect_int() == 0) return SymInt(0);
    extent = extent + (g.sizes[d] - 1) * g.strides[d];
  }
  return extent;
}

// A tensor laid out like `base` holding `grad` (zeros when undefined), and the region of it the
// view covers. `like` gives dtype and device (it must be defined: `grad` may not be).
// Both are strided views of one 1-D buffer spanning the base's elements, as PyTorch's
// as_strided_backward builds them: the views' strides then hold whatever layout the buffer's
// writes produce. Allocating the base by empty_strided and viewing that went wrong under
// functionalization, whose functional fill/copy of a base with gaps returns a contiguous
// tensor, too small for the base's strides (fuzz program 141-0903: a view with a step of a
// strided, mutated input).
std::pair<Tensor, Tensor> BaseShapedGrad(const Tensor& grad, const Geometry& base, const Geometry& view,
                                         const Tensor& like) {
  Tensor buffer = ops::full({Extent(base)}, 0, like.dtype(), like.device());
  Tensor result = ops::as_strided(buffer, Vec(base.sizes), Vec(base.strides), std::optional<SymInt>(SymInt(0)));
  if (grad.defined()) ops::copy_(result, grad);
  Tensor region = ops::as_strided(buffer, Vec(view.sizes), Vec(view.strides),
                                  std::optional<SymInt>(view.offset - base.offset));
  return {result, region};
}

// Note [Functional CopySlices]: for each element of the view (row-major), the row-major index of
// the base element sharing its memory; empty when the geometry is symbolic or the base overlaps
// itself. With it, the base's gradient is read and rewritten by index_select / index_put, out of
// place, so that a create_graph backward records no in-place op on a tensor another node saved
// (the strided-copy path below does, and double backward through it was wrong). It costs a walk
// over the base, so it is built lazily and only used when backward runs with create_graph.
Tensor ViewIndexInBase(const Geometry& base, const Geometry& view) {
  auto concrete = [](const SymDimVector& v, std::vector<int64_t>& out) {
    for (const SymInt& s : v) {
      if (s.is_symbolic()) return false;
      out.push_back(s.expect_int());
    }
    return true;
  };
  std::vector<int64_t> bs, bst, vs, vst;
  if (!concrete(base.sizes, bs) || !concrete(base.strides, bst) || !concrete(view.sizes, vs) ||
      !concrete(view.strides, vst) || base.offset.is_symbolic() || view.offset.is_symbolic())
    return Tensor();
  // Walks a layout in row-major order, calling fn(logical index, storage offset).
  auto walk = [](const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides, int64_t offset,
                 const auto& fn) {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    std::vector<int64_t> pos(sizes.size(), 0);
    for (int64_t i = 0; i < n; ++i) {
      int64_t off = offset;
      for (size_t d = 0; d < sizes.size(); ++d) off += pos[d] * strides[d];
      if (!fn(i, off)) return false;
      for (size_t d = sizes.size(); d-- > 0;) {
        if (++pos[d] < sizes[d]) break;
        pos[d] = 0;
      }
    }
    return true;
  };
  std::unordered_map<int64_t, int64_t> where;
  if (!walk(bs, bst, base.offset.expect_int(), [&](int64_t i, int64_t off) { return where.emplace(off, i).second; }))
    return Tensor();
  std::vector<int64_t> idx;
  if (!walk(vs, vst, view.offset.expect_int(), [&](int64_t, int64_t off) {
        auto it = where.find(off);
        if (it == where.end()) return false;
        idx.push_back(it->second);
        return true;
      }))
    return Tensor();
  Tensor t = EmptyTensor(DimVector{static_cast<int64_t>(idx.size())}, ScalarType::Int64, Device());
  if (!idx.empty() && t->has_storage()) std::memcpy(t.raw_data(), idx.data(), idx.size() * sizeof(int64_t));
  return t;
}

Tensor Flat(const Tensor& t) { return ops::reshape(t, {SymInt(-1)}); }

// The base's grad_fn after an in-place op on one of its views.
class CopySlices : public Node {
 public:
  CopySlices(const Tensor& base, const Tensor& view, std::shared_ptr<OpBackward> fn)
      : base_(Geometry::Of(base)), view_(Geometry::Of(view)), fn_(std::move(fn)) {
    add_input_meta(base);
    next_edges_.push_back(GradientEdge(base));
    for (size_t i = 1; i < fn_->next_edges().size(); ++i) next_edges_.push_back(fn_->next_edges()[i]);
  }
  std::string name() const override { return "torch::autograd::CopySlices"; }  // PyTorch's name
  void ReleaseVariables() override { fn_->ReleaseVariables(); }

  TensorList Apply(TensorList&& grads) override {
    // PyTorch writes the op's gradient into the view's region of the base's gradient, and copy_
    // refuses a destination that repeats an element (a stride-0 dimension: x.expand(...)[m] = 1).
    CheckNoInternalOverlap(view_.sizes, view_.strides);
    TensorList out(next_edges_.size());
    // Only a create_graph backward needs the out-of-place path; the index is built on first use.
    if (GradMode::is_enabled() && grads[0].device().is_cpu() && Index().defined()) {  // Note [Functional CopySlices]
      const Tensor& g = grads[0];
      Tensor region = ops::view(ops::index_select(Flat(g), 0, index_), Vec(view_.sizes));
      TensorList fn_grads = fn_->Apply({region});
      Tensor inner = fn_grads[0].defined() ? Flat(fn_grads[0]) : ops::full({SymInt(index_.numel())}, 0, g.dtype());
      out[0] = ops::view(CallOp<Tensor>(KILN_OP("aten::index_put"), Flat(g), OptionalTensorList{index_}, inner, false),
                         Vec(g->sym_sizes()));
      for (size_t i = 1; i < fn_grads.size() && i < out.size(); ++i) out[i] = fn_grads[i];
      return out;
    }
    auto [result, region] = BaseShapedGrad(grads[0], base_, view_, grads[0]);
    TensorList fn_grads = fn_->Apply({ops::clone(region)});
    if (fn_grads[0].defined()) ops::copy_(region, fn_grads[0]);
    else ops::fill_(region, 0);
    out[0] = result;
    for (size_t i = 1; i < fn_grads.size() && i < out.size(); ++i) out[i] = fn_grads[i];
    return out;
  }

 private:
  const Tensor& Index() {
    if (!index_built_) index_ = ViewIndexInBase(base_, view_), index_built_ = true;
    return index_;
  }
  Geometry base_, view_;
  std::shared_ptr<OpBackward> fn_;
  Tensor index_;  // Note [Functional CopySlices]; undefined: the strided-copy path
  bool index_built_ = false;
};

// grad_fn of a view whose base was rebased: the view's region of the base's gradient.
// The gradient of a view that reads some base elements through several of its own (expanded),
// added up into a tensor laid out like the base. Dispatcher ops only (no index built by hand), so
// a fake tensor traces it too (the joint graph of a compiled function).
Tensor AccumulateIntoBase(const Geometry& base, const Geometry& view, const Tensor& grad) {
  auto end = [](const Geometry& g) {
    SymInt e = g.offset + 1;
    for (size_t i = 0; i < g.sizes.size(); ++i) e = e + (g.sizes[i] - 1) * g.strides[i];
    return e;
  };
  SymInt lo = base.offset + view.offset - sym_max(base.offset, view.offset);  // the smaller offset
  SymInt extent = sym_max(end(base), end(view)) - lo;
  Tensor positions = ops::add(ops::cumsum(ops::full({extent}, 1, ScalarType::Int64, grad.device()), 0), Scalar(-1));
  Tensor where = ops::reshape(ops::as_strided(positions, Vec(view.sizes), Vec(view.strides),
                                              std::optional<SymInt>(view.offset - lo)), {SymInt(-1)});
  Tensor flat = ops::full({extent}, 0, grad.dtype(), grad.device());
  flat = CallOp<Tensor>(KILN_OP("aten::index_put"), flat, OptionalTensorList{where}, ops::reshape(grad, {SymInt(-1)}),
                        true);
  return ops::as_strided(flat, Vec(base.sizes), Vec(base.strides), std::optional<SymInt>(base.offset - lo));
}

class AsStridedBackward : public Node {
 public:
  AsStridedBackward(const Tensor& base, const Tensor& view)
      : base_(Geometry::Of(base)), view_(Geometry::Of(view)) {
    add_input_meta(view);
    next_edges_.push_back(GradientEdge(base));
  }
  std::string name() const override { return "AsStridedBackward0"; }
  TensorList Apply(TensorList&& grads) override {
    // A view reading one base element through several of its own (an expanded view after
    // x.t_()): their gradients add up, which the strided copy below would not do. With
    // create_graph (Note [Functional CopySlices]) the index path adds them up too.
    if (MayOverlapItself(view_.sizes, view_.strides) && !GradMode::is_enabled()) return {AccumulateIntoBase(base_, view_, grads[0])};
    if (GradMode::is_enabled() && grads[0].device().is_cpu() && Index().defined()) {
      const Tensor& g = grads[0];
      Tensor z = ops::full(Vec(base_.sizes), 0, g.dtype());
      return {ops::view(CallOp<Tensor>(KILN_OP("aten::index_put"), Flat(z), OptionalTensorList{index_}, Flat(g), true),
                        Vec(base_.sizes))};
    }
    auto [result, region] = BaseShapedGrad(Tensor(), base_, view_, grads[0]);  // was dtype() of an undefined tensor: a crash
    ops::copy_(region, grads[0]);
    return {result};
  }

 private:
  const Tensor& Index() {
    if (!index_built_) index_ = ViewIndexInBase(base_, view_), index_built_ = true;
    return index_;
  }
  Geometry base_, view_;
  Tensor index_;
  bool index_built_ = false;
};

// Has no inputs: the history of a zero tensor a backward formula writes into through views.
class ZerosHistory : public Node {
 public:
  explicit ZerosHistory(const Tensor& z) { add_input_meta(z); }
  std::string name() const override { return "ZerosBackward"; }
  TensorList Apply(TensorList&&) override { return {}; }
};

}  // namespace

Tensor ZerosForViewWrites(const SymDimVector& sizes, const Tensor& grad) {
  Tensor z = ops::full(Vec(sizes), 0, grad.dtype(), grad.device());
  if (RequiresGrad(grad) && GradMode::is_enabled()) SetHistory(z, std::make_shared<ZerosHistory>(z), 0);
  return z;
}

std::shared_ptr<Node> MakeViewOfBaseFn(const Tensor& base, const Tensor& view) {
  return std::make_shared<AsStridedBackward>(base, view);
}

void MarkView(const Tensor& view, const Tensor& source) {
  AutogradMeta& meta = MaterializeMeta(view);
  AutogradMeta* src = GetMeta(source);
  meta.is_view_ = true;
  if (src && src->is_view_) {
    meta.base_ = src->base_;
  } else if (source->view_root() && !(src && (src->grad_fn_ || src->requires_grad_))) {
    // a view of an untracked view (`x.reshape(-1).squeeze()[0] = v`): the base is their root, so
    // the write reaches x's history (it reached only the middle view's: fuzz seed 281, program
    // 15366)
    meta.base_ = Tensor(source->view_root());
  } else {
    meta.base_ = source;
  }
}

// The views of `root` that have no history of their own (made while root required no grad, or
// under no_grad) become views of root whose history is stale: as PyTorch does, a view's grad_fn is
// regenerated from its base's history when next asked for (RefreshViewGradFn in variable.cc), so
// `v = b[::2]; b.copy_(x)` makes v require grad, and v's part of a loss reaches x (kiln's v kept no
// history, and x's gradient missed it: fuzz seed 191, program 10812). Until then the view is a leaf
// for an in-place op on it, as PyTorch's check_inplace reads the raw field (fuzz seed 321, program
// 9173). A marked view (Note [View creation] in tensor/empty.cc) raises when next used instead.
static void GiveViewsHistory(const Tensor& root, const Tensor& changed) {
  for (const std::shared_ptr<TensorImpl>& impl : root->live_views()) {
    Tensor view(impl);
    if (view.is_same(changed) || !(IsFloating(view.dtype()) || IsComplex(view.dtype()))) continue;
    AutogradMeta* meta = GetMeta(view);
    if (meta && (meta->grad_fn_ || meta->requires_grad_)) continue;
    MarkView(view, root);
    GetMeta(view)->attr_version_ = view->version() - 1;  // versions only grow: stale from now on
    view->set_keys(view->keys().add(DispatchKey::Autograd));  // so that its next use reaches autograd
  }
}

void RebaseHistory(const Tensor& self, const std::shared_ptr<OpBackward>& node) {
  AutogradMeta* meta = GetMeta(self);
  // a view made while its base required no grad was not recorded as one: it is one now (not a
  // tensor with a history of its own, such as a compiled function's output viewing its buffer)
  if ((!meta || (!meta->is_view_ && !meta->grad_fn_ && !meta->requires_grad_)) && self->view_root()) {
    MarkView(self, Tensor(self->view_root()));
    meta = GetMeta(self);
  }
  if (!meta || !meta->is_view_) {
    SetHistory(self, node, 0);
    GiveViewsHistory(self, self);
    return;
  }
  Tensor base = meta->base_;
  auto copy_slices = std::make_shared<CopySlices>(base, self, node);
  SetHistory(base, copy_slices, 0);
  SetHistory(self, std::make_shared<AsStridedBackward>(base, self), 0);
  GiveViewsHistory(base, self);
}

std::string ViewOpName(const Node& grad_fn) {
  std::string name = grad_fn.name();
  size_t end = name.size();
  while (end > 0 && std::isdigit(static_cast<unsigned char>(name[end - 1]))) --end;
  constexpr std::string_view kSuffix = "Backward";
  if (end >= kSuffix.size() && name.compare(end - kSuffix.size(), kSuffix.size(), kSuffix) == 0)
    return name.substr(0, end - kSuffix.size());
  return name;
}

std::string ViewRebaseMessage(const Tensor& view, bool indirect) {
  const ViewCreation creation = view->view_creation();
  AutogradMeta* meta = GetMeta(view);
  const Node* grad_fn = meta ? meta->grad_fn_.get() : nullptr;
  const char* modified = indirect ? "its base or another view of its base has been" : "is being";
  std::string msg;
  if (creation == ViewCreation::kNoGrad || !grad_fn) {
    std::string prefix = grad_fn ? StrCat("Output ", meta->output_nr_, " of ", ViewOpName(*grad_fn),
                                          " is a view of a view which was created in")
                                 : std::string("A view was created in");
    msg = StrCat(prefix, " no_grad mode and ", modified, " modified inplace with grad mode enabled.");
  } else {
    msg = StrCat("Output ", meta->output_nr_, " of ", ViewOpName(*grad_fn), " is a view and ", modified,
                 " modified inplace.");
  }
  if (creation == ViewCreation::kMultiOutput)
    return StrCat(msg, " This view is the output of a function that returns multiple views. Such functions do not "
                  "allow the output views to be modified inplace. You should replace the inplace operation by an "
                  "out-of-place one.");
  return StrCat(msg, " Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your "
                "code by moving both the view and the inplace either both inside the no_grad block (if you don't "
                "want the inplace to be tracked) or both outside (if you want the inplace to be tracked).");
}

}  // namespace kiln::autograd
