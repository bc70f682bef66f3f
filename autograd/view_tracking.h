// autograd/view_tracking.h: views under autograd, and in-place ops that rewrite history.
//
// A view made by a recorded op remembers its base (the non-view tensor owning the storage). An
// in-place op on a plain tensor makes the op's node the tensor's new grad_fn (RebaseHistory). An
// in-place op on a view also changes its base, so the base's grad_fn becomes a CopySlices node:
// the base's gradient passes through unchanged except in the view's region, which goes through
// the op's backward; the view's grad_fn becomes a strided view of that new base history.
#pragma once

#include <memory>
#include <string>

#include "autograd/node.h"

namespace kiln::autograd {

class OpBackward;

// Records that `view` (an output of a view op) views `source`'s storage.
void MarkView(const Tensor& view, const Tensor& source);
// After an in-place op recorded in `node` on `self` (output 0 of the node).
void RebaseHistory(const Tensor& self, const std::shared_ptr<OpBackward>& node);
// A zero tensor that a backward formula fills through views of it (slice/select backward). Views
// of a tensor that does not require grad are not tracked, so under create_graph writing a
// requires-grad `grad` into one would not reach the tensor: the result had no history and double
// backward through slicing was wrong. Here the zeros get an empty history first.
Tensor ZerosForViewWrites(const SymDimVector& sizes, const Tensor& grad);
// A grad_fn for `view` as a strided view of `base`'s current history (AsStridedBackward0).
std::shared_ptr<Node> MakeViewOfBaseFn(const Tensor& base, const Tensor& view);
// The op a view's node stands for, as PyTorch's view errors name it: "Split" for SplitBackward0.
std::string ViewOpName(const Node& grad_fn);
// PyTorch's refusal to rebase a marked view's history (handle_view_on_rebase): for an in-place op
// on the view itself, or (`indirect`) for a use of it after its base or a sibling changed.
std::string ViewRebaseMessage(const Tensor& view, bool indirect);

}  // namespace kiln::autograd
