// python/csrc/op_function.h: kiln._C._OpFunction, the callable behind kiln.add, Tensor.add and
// kiln.ops.aten.add.Tensor.
//
// It holds either a whole packet (overload resolution on every call) or one overload. It is a
// method descriptor (Py_TPFLAGS_METHOD_DESCRIPTOR), so `x.add(y)` calls it with (x, y) through
// vectorcall without creating a bound method.
#pragma once

#include <Python.h>

#include <string>
#include <vector>

#include "tensor/dispatcher.h"

namespace kiln::python {

struct PyOpFunction {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  std::vector<Op*>* overloads;
  std::string* name;  // "add" or "add.Tensor"
};

extern PyTypeObject g_op_function_type;
PyObject* MakeOpFunction(std::string name, std::vector<Op*> overloads);
void InitOpFunctionType(PyObject* module);

// Calls the packet `name` (e.g. "add") with positional args; used by the number and mapping
// slots. `name` must be a string literal: the packet found is cached by the name's address.
PyObject* CallPacketByName(const char* name, PyObject* const* args, Py_ssize_t nargs);

}  // namespace kiln::python
