// python/csrc/python_dynamo.h: kiln._C._dynamo, the Python surface of dynamo/ (the frame hook).
#pragma once

#include <pybind11/pybind11.h>

namespace kiln::python {

void InitDynamoBindings(pybind11::module_& m);

}  // namespace kiln::python
