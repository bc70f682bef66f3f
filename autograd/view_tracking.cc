// autograd/view_tracking.cc: CopySlices and the strided-view backward of a rebased view.
#include "autograd/view_tracking.h"

#include "autograd/derivatives.h"
#include "autograd/variable.h"
#include "tensor/ops.h"

namespace kiln::autograd {
namespace {

struct Geometry {
  SymDimVector sizes, strides;
  SymInt offset;
  static Geometry Of(const Tensor& t) { return {t->sym_sizes(), t->sym_strides(), t->sym_storage_offset()}; }
};

std::vector<SymInt> Vec(const SymDimVector& v) { return std::vector<SymInt>(v.begin(), v.end()); }

// A tensor laid out like `base` holding `grad` (zeros when undefined), and the region of it the
// view covers. `like` gives dtype and device (it must be defined: `grad` may not be).
std::pair<Tensor, Tensor> BaseShapedGrad(const Tensor& grad, const Geometry& base, const Geometry& view,
                                         const Tensor& like) {
  Tensor result = CallOp<Tensor>(KILN_OP("aten::empty_strided"), Vec(base.sizes), Vec(base.strides),
                                 std::optional<ScalarType>(like.dtype()), std::optional<Layout>(),
                                 std::optional<Device>(like.device()), std::optional<bool>());
  if (grad.defined()) ops::copy_(result, grad);
  else ops::fill_(result, 0);
  Tensor region = ops::as_strided(result, Vec(view.sizes), Vec(view.strides),
                                  std::optional<SymInt>(view.offset - base.offset));
  return {result, region};
}

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
    auto [result, region] = BaseShapedGrad(grads[0], base_, view_, grads[0]);
    TensorList fn_grads = fn_->Apply({ops::clone(region)});
    TensorList out(next_edges_.size());
    if (fn_grads[0].defined()) ops::copy_(region, fn_grads[0]);
    else ops::fill_(region, 0);
    out[0] = result;
    for (size_t i = 1; i < fn_grads.size() && i < out.size(); ++i) out[i] = fn_grads[i];
    return out;
  }

 private:
  Geometry base_, view_;
  std::shared_ptr<OpBackward> fn_;
};

// grad_fn of a view whose base was rebased: the view's region of the base's gradient.
class AsStridedBackward : public Node {
 public:
  AsStridedBackward(const Tensor& base, const Tensor& view) : base_(Geometry::Of(base)), view_(Geometry::Of(view)) {
    add_input_meta(view);
    next_edges_.push_back(GradientEdge(base));
  }
  std::string name() const override { return "AsStridedBackward0"; }
  TensorList Apply(TensorList&& grads) override {
    auto [result, region] = BaseShapedGrad(Tensor(), base_, view_, grads[0]);  // was dtype() of an undefined tensor: a crash
    ops::copy_(region, grads[0]);
    return {result};
  }

 private:
  Geometry base_, view_;
};

}  // namespace

std::shared_ptr<Node> MakeViewOfBaseFn(const Tensor& base, const Tensor& view) {
  return std::make_shared<AsStridedBackward>(base, view);
}

void MarkView(const Tensor& view, const Tensor& source) {
  AutogradMeta& meta = MaterializeMeta(view);
  AutogradMeta* src = GetMeta(source);
  meta.is_view_ = true;
  meta.base_ = src && src->is_view_ ? src->base_ : source;
}

void RebaseHistory(const Tensor& self, const std::shared_ptr<OpBackward>& node) {
  AutogradMeta* meta = GetMeta(self);
  if (!meta || !meta->is_view_) {
    SetHistory(self, node, 0);
    return;
  }
  Tensor base = meta->base_;
  auto copy_slices = std::make_shared<CopySlices>(base, self, node);
  SetHistory(base, copy_slices, 0);
  SetHistory(self, std::make_shared<AsStridedBackward>(base, self), 0);
}

}  // namespace kiln::autograd
