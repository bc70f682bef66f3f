// python/csrc/python_autograd.h: autograd's Python surface: TensorBase's autograd attributes
// (requires_grad, grad, grad_fn, is_leaf, ...), grad_fn objects, grad modes, the backward entry
// point and custom Functions (kiln.autograd.Function).
#pragma once

#include <Python.h>
#include <pybind11/pybind11.h>

namespace kiln::python {

// Attribute getters/setters and methods added to TensorBase (python_tensor.cc lists them).
PyObject* GetRequiresGrad(PyObject* self, void*);
int SetRequiresGradAttr(PyObject* self, PyObject* value, void*);
PyObject* GetGrad(PyObject* self, void*);
int SetGradAttr(PyObject* self, PyObject* value, void*);
PyObject* GetGradFn(PyObject* self, void*);
PyObject* GetIsLeaf(PyObject* self, void*);
PyObject* GetBase(PyObject* self, void*);
PyObject* GetRetainsGrad(PyObject* self, void*);
PyObject* GetOutputNr(PyObject* self, void*);
PyObject* GetIsInference(PyObject* self, void*);
PyObject* MethodRequiresGrad_(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames);
PyObject* MethodDetach(PyObject* self, PyObject*);
PyObject* MethodDetach_(PyObject* self, PyObject*);
PyObject* MethodRetainGrad(PyObject* self, PyObject*);
PyObject* MethodIsInference(PyObject* self, PyObject*);

// Module functions and the grad_fn class.
void InitAutogradBindings(pybind11::module_& m);

}  // namespace kiln::python
