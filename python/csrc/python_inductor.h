// python/csrc/python_inductor.h: kiln._C._inductor's pieces shared between its binding files.
#pragma once

#include <pybind11/pybind11.h>

#include "codegen/kernel_ir.h"

namespace kiln::python {

// The plain-Python kernel IR dict (codegen/README.md) as the C++ Kernel; TypeError/ValueError
// naming the part that is malformed.
codegen::Kernel ParseKernel(pybind11::handle kernel);

// Adds MemoryPlanner and MemoryPlan to kiln._C._inductor (python_memory_plan.cc).
void InitMemoryPlanBindings(pybind11::module_& inductor);

}  // namespace kiln::python
