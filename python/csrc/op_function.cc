// python/csrc/op_function.cc: the _OpFunction type.
#include "python/csrc/op_function.h"

#include <unordered_map>

#include "python/csrc/arg_parser.h"

namespace kiln::python {

PyTypeObject g_op_function_type = {PyVarObject_HEAD_INIT(nullptr, 0)};

namespace {

PyObject* OpFunctionVectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* f = reinterpret_cast<PyOpFunction*>(self);
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  return CallOverloads(*f->name, f->overloads->data(), f->overloads->size(), args, nargs, kwnames);
}

void OpFunctionDealloc(PyObject* self) {
  auto* f = reinterpret_cast<PyOpFunction*>(self);
  delete f->overloads;
  delete f->name;
  Py_TYPE(self)->tp_free(self);
}

PyObject* OpFunctionRepr(PyObject* self) {
  return PyUnicode_FromFormat("<kiln op %s>", reinterpret_cast<PyOpFunction*>(self)->name->c_str());
}

// Accessed through a class (Tensor.add) it is itself; through an instance, a bound method.
PyObject* OpFunctionDescrGet(PyObject* self, PyObject* obj, PyObject*) {
  if (obj == nullptr || obj == Py_None) {
    Py_INCREF(self);
    return self;
  }
  return PyMethod_New(self, obj);
}

PyObject* OpFunctionGetName(PyObject* self, void*) {
  return PyUnicode_FromString(reinterpret_cast<PyOpFunction*>(self)->name->c_str());
}

// "aten", or the namespace of operators defined in Python (kiln.library): their kernels may run
// the user's Python code, which the compiler then must not skip (kiln/_dynamo/output_graph.py)
PyObject* OpFunctionGetNamespace(PyObject* self, void*) {
  const auto& overloads = *reinterpret_cast<PyOpFunction*>(self)->overloads;
  if (overloads.empty()) Py_RETURN_NONE;
  const std::string& q = overloads[0]->schema().name;
  return PyUnicode_FromString(q.substr(0, q.find("::")).c_str());
}

PyGetSetDef kGetSet[] = {
    {"__name__", OpFunctionGetName, nullptr, nullptr, nullptr},
    {"_namespace", OpFunctionGetNamespace, nullptr, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

}  // namespace

PyObject* MakeOpFunction(std::string name, std::vector<Op*> overloads) {
  auto* f = PyObject_New(PyOpFunction, &g_op_function_type);
  f->vectorcall = OpFunctionVectorcall;
  f->overloads = new std::vector<Op*>(std::move(overloads));
  f->name = new std::string(std::move(name));
  return reinterpret_cast<PyObject*>(f);
}

void InitOpFunctionType(PyObject* module) {
  PyTypeObject& t = g_op_function_type;
  t.tp_name = "kiln._C._OpFunction";
  t.tp_basicsize = sizeof(PyOpFunction);
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR;
  t.tp_vectorcall_offset = offsetof(PyOpFunction, vectorcall);
  t.tp_call = PyVectorcall_Call;
  t.tp_dealloc = OpFunctionDealloc;
  t.tp_repr = OpFunctionRepr;
  t.tp_descr_get = OpFunctionDescrGet;
  t.tp_getset = kGetSet;
  if (PyType_Ready(&t) < 0) throw std::runtime_error("_OpFunction type");
  Py_INCREF(&t);
  PyModule_AddObject(module, "_OpFunction", reinterpret_cast<PyObject*>(&t));
}

PyObject* CallPacketByName(const char* name, PyObject* const* args, Py_ssize_t nargs) {
  // keyed by the literal's address (callers pass literals; one name at two addresses is two
  // entries): `x * y` made and hashed a std::string per call
  static std::unordered_map<const char*, OpPacket*> cache;
  OpPacket*& packet = cache[name];
  if (packet == nullptr) packet = Registry::Get().FindPacket(std::string("aten::") + name);
  if (packet == nullptr) {
    PyErr_Format(PyExc_RuntimeError, "kiln: no op named %s", name);
    return nullptr;
  }
  return CallOverloads(packet->name, packet->overloads.data(), packet->overloads.size(), args, nargs, nullptr);
}

}  // namespace kiln::python
