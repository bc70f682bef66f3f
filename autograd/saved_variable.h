// autograd/saved_variable.h: a tensor a backward function keeps from its forward call.
//
// Saving records the tensor's version; unpacking checks it, so a saved tensor modified in place
// before backward raises PyTorch's "modified by an inplace operation" error instead of giving a
// wrong gradient. A saved *output* of the node that saves it is kept as an alias without
// autograd state (else tensor -> grad_fn -> saved tensor would be a cycle) and gets its grad_fn
// back on unpacking, so double backward through it works.
#pragma once

#include <memory>

#include "autograd/node.h"

namespace kiln::autograd {

class SavedVariable {
 public:
  SavedVariable() = default;
  SavedVariable(const Tensor& t, bool is_output);

  // `saved_for`: the node unpacking (needed to re-link an output). Raises if freed or modified.
  Tensor Unpack(const std::shared_ptr<Node>& saved_for) const;
  void Reset() { data_ = Tensor(); was_freed_ = true; }
  bool defined() const { return defined_; }

 private:
  Tensor data_;
  uint32_t version_ = 0;
  uint32_t output_nr_ = 0;
  bool is_output_ = false;
  bool requires_grad_ = false;
  bool defined_ = false;
  bool was_freed_ = false;
  std::string grad_fn_name_;  // of the tensor when saved, for the error message
};

}  // namespace kiln::autograd
