// autograd/below_autograd.h: what the autograd layer's kernels ask of a call, for other
// autograd-key kernels too (python/csrc/python_library.cc's, for operators defined in Python).
#pragma once

#include "tensor/dispatcher.h"

namespace kiln::autograd {

// Whether a tensor (or a tensor in a list) on the stack requires grad.
bool AnyRequiresGrad(const Stack& stack);

// Runs `op` below the autograd layer: Autograd excluded, views made there the op's own (Note
// [View creation]), not under no_grad.
void RunBelow(const Op& op, DispatchKeySet keys, Stack& stack);

}  // namespace kiln::autograd
