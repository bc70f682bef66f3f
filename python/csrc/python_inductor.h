// python/csrc/python_inductor.h: kiln._C._inductor's pieces shared between its binding files.
#pragma once

#include <pybind11/pybind11.h>

#include "codegen/kernel_ir.h"

namespace kiln::python {

// A new kernel_ir.Expr holding e (a new reference; nullptr with a Python error when out of memory).
PyObject* WrapExpr(codegen::ExprPtr e);

// The expression a kernel_ir.Expr holds; throws a Python TypeError naming `what` for anything else.
codegen::ExprPtr UnwrapExpr(PyObject* o, const char* what);

// Adds the kernel_ir submodule: Expr, Stmt, Loop, Kernel and their constructors (python_kernel_ir.cc).
void InitKernelIrBindings(pybind11::module_& inductor);

// Adds the ir submodule: Affine, Indices, Body, Tracer, instantiate (python_inductor_ir.cc).
void InitInductorIrBindings(pybind11::module_& inductor);

// Adds MemoryPlanner and MemoryPlan to kiln._C._inductor (python_memory_plan.cc).
void InitMemoryPlanBindings(pybind11::module_& inductor);

}  // namespace kiln::python
