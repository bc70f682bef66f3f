// python/csrc/python_inductor.h: kiln._C._inductor's pieces shared between its binding files.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <optional>
#include <vector>

#include "codegen/kernel_ir.h"
#include "codegen/llvm_codegen.h"
#include "tensor/dispatcher.h"
#include "tensor/ops/pointwise_ir.h"
#include "tensor/tensor_impl.h"

namespace kiln::python {

// A new kernel_ir.Expr holding e (a new reference; nullptr with a Python error when out of memory).
PyObject* WrapExpr(codegen::ExprPtr e);

// The expression a kernel_ir.Expr holds; throws a Python TypeError naming `what` for anything else.
codegen::ExprPtr UnwrapExpr(PyObject* o, const char* what);

// The ScalarType of a kiln.dtype argument; a Python TypeError naming `what` for anything else.
ScalarType ScalarTypeArg(const pybind11::handle& dtype, const char* what);

// The values of a pointwise op's number arguments (PointwiseIr::num_params, in schema order) as a
// call gives them: positional after its operands, by name in `kwargs`, else the schema's default;
// kiln::TypeError for one that is not a number (a symbolic one).
std::vector<std::optional<double>> PointwiseParams(const Op& op, const PointwiseIr& ir, const pybind11::tuple& params,
                                                   const pybind11::dict& kwargs);

// Adds the kernel_ir submodule: Expr, Stmt, Loop, Kernel and their constructors (python_kernel_ir.cc).
void InitKernelIrBindings(pybind11::module_& inductor);

// Adds the ir submodule: Affine, Indices, Body, Tracer, instantiate, the values (Buffer,
// Pointwise, Reduction, LoopSpace) and TraceCtx (python_inductor_ir.cc).
void InitInductorIrBindings(pybind11::module_& inductor);

// Adds the scheduler submodule: Scheduler, Realized, Realization, probe, cheap_to_recompute
// (python_inductor_scheduler.cc).
void InitInductorSchedulerBindings(pybind11::module_& inductor);

// Adds the lowering submodule: the pointwise families (lower_elementwise, lower_with_params,
// make_pointwise, ...), the other pointwise ops, the views, the reductions with their
// GraphContext, the matmul template and max pooling (python_inductor_lowering.cc).
void InitInductorLoweringBindings(pybind11::module_& inductor);

// Adds the graph submodule: GraphLowering, its records and hooks (python_inductor_graph.cc).
void InitInductorGraphBindings(pybind11::module_& inductor);

// kiln._C._inductor.CompiledKernel: a compiled kernel, called with its buffers in order.
struct PyCompiledKernel {
  std::shared_ptr<codegen::CompiledKernel> k;
};

// Runs `k` over `args` (kiln tensors, or raw int addresses the caller vouches for), in buffer
// order: checks their count, dtypes, CPU memory, and that each storage holds every element the
// kernel's IR can touch; the GIL is released while the kernel runs.
void RunCompiledKernel(const codegen::CompiledKernel& k, PyObject* const* args, size_t nargs);

// A tensor over base's storage with these sizes and strides, at `offset` (base's own when unset):
// the wrapper's views and reused buffers. Raises Error when the layout does not fit the storage.
Tensor ReinterpretTensor(const Tensor& base, const DimVector& sizes, const DimVector& strides,
                         std::optional<int64_t> offset);

// Adds WrapperProgram and Slot to kiln._C._inductor (python_wrapper_program.cc).
void InitWrapperProgramBindings(pybind11::module_& inductor);

// Adds MemoryPlanner and MemoryPlan to kiln._C._inductor (python_memory_plan.cc).
void InitMemoryPlanBindings(pybind11::module_& inductor);

}  // namespace kiln::python
