// autograd/node_names.h: the class name of an op's backward node, as PyTorch spells it.
//
// Note [Backward node names]: PyTorch generates one node class per derivatives.yaml entry, named
// after the op in CamelCase (each '_'-separated part title-cased as Python's str.title does, so a
// letter after a digit is upper case: max_pool2d -> MaxPool2D, log1p -> Log1P), "Forward" dropped
// from `<op>_forward` ops (nll_loss_forward -> NllLossBackward), then numbered in file order among
// the entries of one name: pow.Tensor_Scalar is PowBackward0, pow.Tensor_Tensor PowBackward1,
// pow.Scalar PowBackward2. `grad_fn.name()` and printing show it, so kiln names nodes the same.
#pragma once

#include <string>

#include "tensor/dispatcher.h"

namespace kiln::autograd {

// "PowBackward1" for aten::pow.Tensor_Tensor. An in-place op PyTorch gives no entry of its own
// takes its functional twin's name: `functional` when given (pow_.Scalar's is pow.Tensor_Scalar),
// else the same overload without the '_' (add_.Tensor is AddBackward0).
std::string BackwardNodeName(const Op& op, const Op* functional = nullptr);

}  // namespace kiln::autograd
