// autograd/engine.h: runs a backward pass.
//
// Execute() walks the graph from the roots once (an explicit stack, no recursion) to count, for
// each node, how many gradients will arrive; then it runs nodes from a ready queue, highest
// sequence number first (the reverse of the forward order), summing gradients per input in a
// buffer until a node's count reaches zero. A chain of 100,000 ops therefore uses no C++ stack
// depth. With `inputs` given (autograd.grad) it runs only the nodes on a path to them and
// returns their gradients instead of accumulating into `.grad`.
#pragma once

#include <functional>
#include <vector>

#include "autograd/node.h"

namespace kiln::autograd {

struct BackwardOptions {
  bool keep_graph = false;
  bool create_graph = false;
  bool allow_unused = false;
  bool accumulate_grad = true;  // false for autograd.grad
};

// roots/grads: outputs' gradient edges and their gradients. inputs: the edges whose gradient to
// return (autograd.grad); when accumulate_grad is true and inputs is non-empty, only those
// leaves accumulate (backward(inputs=...)).
TensorList RunBackward(const std::vector<Edge>& roots, const TensorList& grads, const std::vector<Edge>& inputs,
                       const BackwardOptions& options);

// Called as the engine starts (begin = true) and finishes (false) each node it runs, even when the
// node raises: kiln.profiler times backward nodes through it. Process-wide; returns the previous
// observer; empty: none (then the engine does not look further).
using NodeObserver = std::function<void(const Node& node, bool begin)>;
NodeObserver SetNodeObserver(NodeObserver observer);

}  // namespace kiln::autograd
