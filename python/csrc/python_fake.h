// python/csrc/python_fake.h: fake-tensor bindings (python_fake.cc).
#pragma once

#include <pybind11/pybind11.h>

#include "python/csrc/python_tensor.h"

namespace kiln::python {

// The Python class fake tensors are created as (kiln._subclasses.fake_tensor.FakeTensor).
extern PyTypeObject* g_fake_tensor_class;

void InitFakeBindings(pybind11::module_& m);

}  // namespace kiln::python
