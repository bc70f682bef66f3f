// autograd/derivatives.h: derivative formulas and the autograd kernel that records them.
//
// A formula is declared once per op, beside the op family it differentiates
// (autograd/formulas/<family>.cc), like PyTorch's derivatives.yaml:
//
//   d.Def("mul.Tensor", {"self", "other"}, [](Ctx& c, Grads& g) {
//     if (c.needs("self")) g["self"] = mul(c.grad(), c.input("other"));
//     if (c.needs("other")) g["other"] = mul(c.grad(), c.input("self"));
//   });
//
// The second argument lists the tensors the backward reads: inputs by name, "result" / "result1"
// for outputs. Only those are saved (and version-checked); every non-tensor argument and every
// input's sizes and dtype are kept for free. The formula returns one gradient per differentiable
// input; the engine reduces broadcast gradients and casts dtypes (engine.cc, Validate), so
// formulas need not. In-place variants (`mul_.Tensor`) use their functional op's formula.
// Formulas call ops through the dispatcher, so with create_graph they are differentiated too.
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "autograd/saved_variable.h"
#include "tensor/dispatcher.h"

namespace kiln::autograd {

class OpBackward;

// What a formula reads: output gradients, saved tensors, arguments.
class Ctx {
 public:
  Ctx(const OpBackward& node, TensorList& grads) : node_(node), grads_(grads) {}
  // Gradient of output i (zeros when none flowed into it).
  const Tensor& grad(size_t i = 0);
  bool has_grad(size_t i = 0) const { return i < grads_.size() && grads_[i].defined(); }
  Tensor input(const char* name) const;       // a saved input
  // A saved list of optional tensors (index's `indices`), each checked as a saved input is.
  OptionalTensorList input_list(const char* name) const;
  Tensor result(size_t i = 0) const;          // a saved output
  const IValue& arg(const char* name) const;  // a non-tensor argument
  Scalar scalar(const char* name) const;
  int64_t i64(const char* name) const { return arg(name).to_int(); }
  double f64(const char* name) const { return arg(name).to_double(); }
  bool flag(const char* name) const { return arg(name).to_bool(); }
  std::vector<int64_t> ints(const char* name) const { return arg(name).to_int_list(); }
  std::vector<SymInt> symints(const char* name) const { return arg(name).to_symint_list(); }
  bool is_none(const char* name) const { return arg(name).is_none(); }
  const SymDimVector& sizes(const char* name) const;  // sizes of any tensor input
  std::vector<SymInt> sizes_list(const char* name) const {
    const SymDimVector& s = sizes(name);
    return std::vector<SymInt>(s.begin(), s.end());
  }
  ScalarType dtype(const char* name) const;
  Device device(const char* name) const;
  int64_t dim(const char* name) const { return static_cast<int64_t>(sizes(name).size()); }
  // self's strides and storage offset, for formulas that save "self.geometry" (as_strided):
  // the layout without the data, so an in-place write to self after the op is no error.
  const SymDimVector& self_strides() const;
  // A tensor input's strides, for formulas that save "<name>.strides" (mm's layout choice).
  const SymDimVector& strides(const char* name) const;
  SymInt self_storage_offset() const;
  bool needs(const char* name) const;  // whether the input's gradient is wanted
  size_t list_size(const char* name) const;  // length of a Tensor[] input
  const OpBackward& node() const { return node_; }

 private:
  const OpBackward& node_;
  TensorList& grads_;
};

// Gradients by input name; Tensor[] inputs take one gradient per element.
class Grads {
 public:
  explicit Grads(const FunctionSchema& schema) : schema_(schema), single_(schema.arguments.size()),
                                                 lists_(schema.arguments.size()) {}
  Tensor& operator[](const char* name) { return single_[Index(name)]; }
  TensorList& list(const char* name) { return lists_[Index(name)]; }
  const Tensor& at(size_t i) const { return single_[i]; }
  const TensorList& list_at(size_t i) const { return lists_[i]; }

 private:
  size_t Index(const char* name) const;
  const FunctionSchema& schema_;
  TensorList single_;
  std::vector<TensorList> lists_;
};

using FormulaFn = void (*)(Ctx&, Grads&);

struct Derivative {
  const Op* op = nullptr;
  std::vector<int> saved_inputs;   // argument indices
  // Parallel to saved_inputs: the argument whose gradient alone reads that input ("self for
  // mat2"), which is saved only when that gradient is wanted, as PyTorch guards such saves with
  // should_compute_output; -1 where it is always saved.
  std::vector<int> saved_input_for;
  std::vector<int> saved_strides;  // "mat1.strides": argument indices whose strides alone are kept
  std::vector<int> saved_lists;    // argument indices of tensor lists saved element by element
  std::vector<int> saved_outputs;  // output indices
  bool saves_self_geometry = false; // "self.geometry": self's strides and offset (Ctx::self_strides)
  FormulaFn fn = nullptr;
  std::string node_name;           // "MulBackward0"
  bool non_differentiable = false; // outputs never require grad (argmax, comparisons, ...)
  std::vector<int> not_differentiable_args;  // inputs that must not require grad (loss weights)
  std::vector<int> not_differentiable_outputs;  // outputs that never require grad (logsumexp)
};

// The backward node of one recorded op call.
class OpBackward : public Node {
 public:
  OpBackward(const Derivative* d, Stack args);
  TensorList Apply(TensorList&& grads) override;
  std::string name() const override { return derivative_->node_name; }
  void ReleaseVariables() override;

  const Derivative& derivative() const { return *derivative_; }
  const Stack& args() const { return args_; }  // tensors replaced by None
  std::vector<SavedVariable>& saved_inputs() { return saved_inputs_; }   // by argument index
  std::vector<SavedVariable>& saved_outputs() { return saved_outputs_; }
  const std::vector<SavedVariable>& saved_inputs() const { return saved_inputs_; }
  const std::vector<SavedVariable>& saved_outputs() const { return saved_outputs_; }
  // By argument index: a saved tensor list's elements (undefined for None elements).
  std::vector<std::vector<SavedVariable>>& saved_lists() { return saved_lists_; }
  const std::vector<std::vector<SavedVariable>>& saved_lists() const { return saved_lists_; }
  // For each argument: the first edge index it owns and how many (0 for non-tensors).
  std::vector<std::pair<uint32_t, uint32_t>> arg_edges;
  std::vector<InputMeta> arg_meta;  // per edge: the forward input's metadata
  SymDimVector self_strides;        // with Derivative::saves_self_geometry
  std::vector<SymDimVector> arg_strides;  // by argument index, for Derivative::saved_strides
  SymInt self_storage_offset = 0;

 private:
  const Derivative* derivative_;
  Stack args_;
  std::vector<SavedVariable> saved_inputs_, saved_outputs_;
  std::vector<std::vector<SavedVariable>> saved_lists_;
  bool released_ = false;
};

// Declares formulas into the registry's ops.
class DerivativeTable {
 public:
  explicit DerivativeTable(Registry& r) : registry_(r) {}
  // `saves`: input names, "result"/"result1"/... for outputs, "self.geometry" for self's layout,
  // "<input>.strides" for an input's strides alone, "<input> for <other>" for an input only
  // other's gradient reads (saved only when that gradient is wanted, Derivative::saved_input_for).
  void Def(const std::string& op_name, std::initializer_list<const char*> saves, FormulaFn fn);
  // Ops whose outputs never require grad (integer results, comparisons, shape queries).
  void NonDifferentiable(std::initializer_list<const char*> op_names);
  // An in-place op whose functional twin has another overload name (pow_.Scalar <- pow.Tensor_Scalar).
  void InplaceOf(const std::string& inplace_name, const std::string& functional_name);
  // Inputs an op is not differentiable in: passing one that requires grad is an error, as in PyTorch.
  void NotDifferentiableIn(const std::string& op_name, std::initializer_list<const char*> args);
  // Outputs (by index) that never require grad: PyTorch's output_differentiability false.
  void NotDifferentiableOutputs(const std::string& op_name, std::initializer_list<int> outputs);

 private:
  void Attach(Op* op, std::shared_ptr<Derivative> d);
  Registry& registry_;
};

// Installs the autograd layer into the registry once: the Autograd-key kernel and every formula.
void InstallAutograd();

// Formula families (autograd/formulas/*.cc).
void DefinePointwiseFormulas(DerivativeTable& d);
void DefineReductionFormulas(DerivativeTable& d);
void DefineViewFormulas(DerivativeTable& d);
void DefineLinalgFormulas(DerivativeTable& d);
void DefineLapackFormulas(DerivativeTable& d);
void DefineNNFormulas(DerivativeTable& d);
void DefineIndexFormulas(DerivativeTable& d);
void DefineBackwardOpFormulas(DerivativeTable& d);
void DefineSpectralFormulas(DerivativeTable& d);

// Called by Ctx::input with each saved input a formula unpacks and its node's output gradients
// (undefined where none flowed), on this thread: AOT's joint trace learns which inputs eager's
// backward reads even where a formula's result does not use them. Returns the previous one.
using SavedInputObserver = std::function<void(const Tensor& saved, const TensorList& grads)>;
SavedInputObserver SetSavedInputObserver(SavedInputObserver observer);

}  // namespace kiln::autograd
