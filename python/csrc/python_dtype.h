// python/csrc/python_dtype.h: kiln.dtype objects (kiln.float32, ...), one per ScalarType.
#pragma once

#include <Python.h>

#include "tensor/scalar_type.h"

namespace kiln::python {

struct PyDtype {
  PyObject_HEAD
  ScalarType scalar_type;
};

extern PyTypeObject g_dtype_type;
inline bool IsDtype(PyObject* o) { return Py_TYPE(o) == &g_dtype_type; }
// Borrowed reference to the dtype object of `t`.
PyObject* DtypeObject(ScalarType t);
void InitDtypes(PyObject* module);

}  // namespace kiln::python
