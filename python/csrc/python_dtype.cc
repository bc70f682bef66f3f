// python/csrc/python_dtype.cc: kiln.dtype, with PyTorch's attributes and printing ("kiln.float32").
#include "python/csrc/python_dtype.h"

#include <string>

namespace kiln::python {

namespace {

PyObject* g_dtypes[kNumScalarTypes] = {};

PyObject* DtypeRepr(PyObject* self) {
  return PyUnicode_FromFormat("kiln.%s", ScalarTypeName(reinterpret_cast<PyDtype*>(self)->scalar_type));
}

PyObject* DtypeIsFloatingPoint(PyObject* self, void*) {
  return PyBool_FromLong(IsFloating(reinterpret_cast<PyDtype*>(self)->scalar_type));
}
PyObject* DtypeIsSigned(PyObject* self, void*) {
  ScalarType t = reinterpret_cast<PyDtype*>(self)->scalar_type;
  return PyBool_FromLong(t != ScalarType::Bool && t != ScalarType::UInt8);
}
PyObject* DtypeIsComplex(PyObject* self, void*) {
  return PyBool_FromLong(IsComplex(reinterpret_cast<PyDtype*>(self)->scalar_type));
}
PyObject* DtypeToReal(PyObject* self, PyObject*) {
  PyObject* d = DtypeObject(ToRealValueType(reinterpret_cast<PyDtype*>(self)->scalar_type));
  Py_INCREF(d);
  return d;
}
PyObject* DtypeToComplex(PyObject* self, PyObject*) {
  try {
    PyObject* d = DtypeObject(ToComplexType(reinterpret_cast<PyDtype*>(self)->scalar_type));
    Py_INCREF(d);
    return d;
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}
PyObject* DtypeItemsize(PyObject* self, void*) {
  return PyLong_FromLongLong(ElementSize(reinterpret_cast<PyDtype*>(self)->scalar_type));
}
PyObject* DtypeReduce(PyObject* self, PyObject*) {
  return PyUnicode_FromString(ScalarTypeName(reinterpret_cast<PyDtype*>(self)->scalar_type));
}

PyGetSetDef kDtypeGetSet[] = {
    {"is_floating_point", DtypeIsFloatingPoint, nullptr, nullptr, nullptr},
    {"is_signed", DtypeIsSigned, nullptr, nullptr, nullptr},
    {"is_complex", DtypeIsComplex, nullptr, nullptr, nullptr},
    {"itemsize", DtypeItemsize, nullptr, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};
PyMethodDef kDtypeMethods[] = {
    {"__reduce__", DtypeReduce, METH_NOARGS, nullptr},
    {"to_real", DtypeToReal, METH_NOARGS, nullptr},
    {"to_complex", DtypeToComplex, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

PyTypeObject g_dtype_type = {PyVarObject_HEAD_INIT(nullptr, 0)};

PyObject* DtypeObject(ScalarType t) { return g_dtypes[static_cast<int>(t)]; }

void InitDtypes(PyObject* module) {
  g_dtype_type.tp_name = "kiln.dtype";
  g_dtype_type.tp_basicsize = sizeof(PyDtype);
  g_dtype_type.tp_flags = Py_TPFLAGS_DEFAULT;
  g_dtype_type.tp_repr = DtypeRepr;
  g_dtype_type.tp_getset = kDtypeGetSet;
  g_dtype_type.tp_methods = kDtypeMethods;
  if (PyType_Ready(&g_dtype_type) < 0) throw std::runtime_error("dtype type");
  Py_INCREF(&g_dtype_type);
  PyModule_AddObject(module, "dtype", reinterpret_cast<PyObject*>(&g_dtype_type));
  for (int i = 0; i < kNumScalarTypes; ++i) {
    auto* d = PyObject_New(PyDtype, &g_dtype_type);
    d->scalar_type = static_cast<ScalarType>(i);
    g_dtypes[i] = reinterpret_cast<PyObject*>(d);
    Py_INCREF(g_dtypes[i]);
    PyModule_AddObject(module, ScalarTypeName(d->scalar_type), g_dtypes[i]);
  }
}

}  // namespace kiln::python
