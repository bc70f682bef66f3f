// autograd/saved_variable.cc: saving tensors for backward and checking them on the way out.
#include "autograd/saved_variable.h"

#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "runtime/error.h"

namespace kiln::autograd {

SavedVariable::SavedVariable(const Tensor& t, bool is_output) {
  if (!t.defined()) return;
  defined_ = true;
  is_output_ = is_output;
  version_ = t->version();
  requires_grad_ = RequiresGrad(t);
  if (AutogradMeta* meta = GetMeta(t)) {
    output_nr_ = meta->output_nr_;
    if (meta->grad_fn_) grad_fn_name_ = meta->grad_fn_->name();
    if (meta->is_inference_)
      throw Error("Inference tensors cannot be saved for backward. To work around you can make a clone "
                  "to get a normal tensor and use it in autograd.");
  }
  data_ = is_output ? ShallowAlias(t) : t;
}

static std::string TypeString(const Tensor& t) {
  const char* name = "FloatTensor";
  switch (t.dtype()) {
    case ScalarType::Float64: name = "DoubleTensor"; break;
    case ScalarType::Float16: name = "HalfTensor"; break;
    case ScalarType::BFloat16: name = "BFloat16Tensor"; break;
    case ScalarType::Int64: name = "LongTensor"; break;
    case ScalarType::Int32: name = "IntTensor"; break;
    case ScalarType::Bool: name = "BoolTensor"; break;
    default: break;
  }
  return StrCat("kiln.", name, " ", SizesToString(t->sym_sizes()));
}

Tensor SavedVariable::Unpack(const std::shared_ptr<Node>& saved_for) const {
  if (!defined_) return Tensor();
  if (was_freed_)
    throw Error(
        "Trying to backward through the graph a second time (or directly access saved tensors after "
        "they have already been freed). Saved intermediate values of the graph are freed when you call "
        ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
        "graph a second time or if you need to access saved tensors after calling backward.");
  if (data_->version() != version_) {
    std::string producer = is_output_ && saved_for ? saved_for->name() : grad_fn_name_;
    throw Error(StrCat(
        "one of the variables needed for gradient computation has been modified by an inplace operation: [",
        TypeString(data_), "]",
        // No comma before "is at version" when no producer is named (PyTorch's wording).
        producer.empty() ? "" : StrCat(", which is output ", output_nr_, " of ", producer, ","), " is at version ",
        data_->version(), "; expected version ", version_,
        " instead. Hint: the backtrace further above can show the operation that failed to compute its "
        "gradient. The variable in question was changed in there or anywhere later. Good luck!"));
  }
  if (!is_output_ || !requires_grad_ || !GradMode::is_enabled() || !saved_for) return data_;
  // Double backward: the output is re-linked to the node that produced it.
  Tensor out = ShallowAlias(data_);
  SetHistory(out, saved_for, output_nr_);
  return out;
}

}  // namespace kiln::autograd
