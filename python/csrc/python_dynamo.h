// python/csrc/python_dynamo.h: kiln._C._dynamo, the Python surface of dynamo/ (the frame hook).
#pragma once

#include <pybind11/pybind11.h>

namespace kiln::python {

void InitDynamoBindings(pybind11::module_& m);
// kiln._C._dynamo.guards (python_guards.cc), under the _dynamo module.
void InitGuardBindings(pybind11::module_& dynamo_module);

}  // namespace kiln::python
