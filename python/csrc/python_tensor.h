// python/csrc/python_tensor.h: the Python type kiln._C.TensorBase and conversions to and from it.
//
// TensorBase is a hand-written CPython type (not pybind11) because every eager op goes through
// it: `x + 1` runs nb_add -> the argument parser -> the dispatcher with no pybind11 layers in
// between. kiln.Tensor (python/kiln/_tensor.py) subclasses it in Python.
#pragma once

#include <Python.h>

#include <optional>

#include "tensor/tensor_impl.h"

namespace kiln::python {

struct PyTensor {
  PyObject_HEAD
  Tensor tensor;
};

extern PyTypeObject* g_tensor_base_type;
// The Python class new tensors are created as (kiln.Tensor once the package set it).
extern PyTypeObject* g_tensor_class;

inline bool IsTensor(PyObject* o) { return PyObject_TypeCheck(o, g_tensor_base_type); }
inline const Tensor& UnpackTensor(PyObject* o) { return reinterpret_cast<PyTensor*>(o)->tensor; }
// New reference to the Python object for `t` (the same object every time for one impl).
PyObject* WrapTensor(Tensor t);

// kiln.tensor(data)'s C++ half: a new CPU tensor holding nested sequences of numbers (or one
// number, or a 0-dim tensor), of `dtype` or the dtype the data implies (module.cc).
Tensor TensorFromData(PyObject* data, std::optional<ScalarType> dtype);

void InitTensorType(PyObject* module);

}  // namespace kiln::python
