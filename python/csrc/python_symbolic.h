// python/csrc/python_symbolic.h: kiln.SymInt/SymFloat/SymBool <-> C++ SymInt, and the ShapeEnv bindings.
#pragma once

#include <Python.h>
#include <pybind11/pybind11.h>

#include "tensor/sym_int.h"

namespace kiln::python {

// A kiln.SymInt (or SymFloat/SymBool) Python object.
bool IsSymObject(PyObject* o);
bool IsSymIntObject(PyObject* o);
// The C++ SymInt of a kiln.SymInt (symbolic node kept, never guarded).
SymInt UnpackSymInt(PyObject* o);
// New reference: a Python int for a concrete SymInt, else kiln.SymInt / kiln.SymFloat
// (Note [SymFloat through SymInt slots]) wrapping the node.
PyObject* SymIntToPython(const SymInt& s);

void InitSymbolicBindings(pybind11::module& m);

}  // namespace kiln::python
