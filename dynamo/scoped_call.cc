// dynamo/scoped_call.cc: ScopedCall (scoped_call.h).
#include "dynamo/scoped_call.h"

#include <structmember.h>

#include <cstddef>

#include "dynamo/eval_frame.h"

namespace kiln::dynamo {
namespace {

struct ScopedCall {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* fn;
  PyObject* callback;  // None: capture off
  PyObject* dict;
  PyObject* weakrefs;
};

PyObject* Vectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* s = reinterpret_cast<ScopedCall*>(self);
  PyObject* previous = SetEvalFrameCallback(s->callback);
  PyObject* result = PyObject_Vectorcall(s->fn, args, nargsf, kwnames);
  PyObject* ours = SetEvalFrameCallback(previous);
  Py_XDECREF(ours);
  Py_DECREF(previous);
  return result;
}

PyObject* DescrGet(PyObject* self, PyObject* obj, PyObject* /*type*/) {
  if (obj == nullptr || obj == Py_None) {
    Py_INCREF(self);
    return self;
  }
  return PyMethod_New(self, obj);
}

int Traverse(PyObject* self, visitproc visit, void* arg) {
  auto* s = reinterpret_cast<ScopedCall*>(self);
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(s->fn);
  Py_VISIT(s->callback);
  Py_VISIT(s->dict);
  return 0;
}

int Clear(PyObject* self) {
  auto* s = reinterpret_cast<ScopedCall*>(self);
  Py_CLEAR(s->fn);
  Py_CLEAR(s->callback);
  Py_CLEAR(s->dict);
  return 0;
}

void Dealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  if (reinterpret_cast<ScopedCall*>(self)->weakrefs) PyObject_ClearWeakRefs(self);
  Clear(self);
  type->tp_free(self);
  Py_DECREF(type);
}

PyObject* Repr(PyObject* self) {
  auto* s = reinterpret_cast<ScopedCall*>(self);
  return PyUnicode_FromFormat("<kiln %s of %R>", s->callback == Py_None ? "disabled function" : "compiled function",
                              s->fn);
}

PyMemberDef kMembers[] = {
    {"__wrapped__", T_OBJECT, offsetof(ScopedCall, fn), READONLY, "the function called"},
    {"_kiln_callback", T_OBJECT, offsetof(ScopedCall, callback), READONLY, "the frame callback during calls"},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(ScopedCall, vectorcall), READONLY, nullptr},
    {"__dictoffset__", T_PYSSIZET, offsetof(ScopedCall, dict), READONLY, nullptr},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(ScopedCall, weakrefs), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

PyGetSetDef kGetSet[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyType_Slot kSlots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(Dealloc)},
    {Py_tp_traverse, reinterpret_cast<void*>(Traverse)},
    {Py_tp_clear, reinterpret_cast<void*>(Clear)},
    {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
    {Py_tp_descr_get, reinterpret_cast<void*>(DescrGet)},
    {Py_tp_repr, reinterpret_cast<void*>(Repr)},
    {Py_tp_members, kMembers},
    {Py_tp_getset, kGetSet},
    {0, nullptr}};

PyType_Spec kSpec = {"kiln._C._dynamo.ScopedCall", sizeof(ScopedCall), 0,
                     Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL, kSlots};

PyTypeObject* g_type = nullptr;

}  // namespace

PyTypeObject* ScopedCallType() {
  if (g_type == nullptr) g_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&kSpec));
  return g_type;
}

PyObject* MakeScopedCall(PyObject* fn, PyObject* callback) {
  if (!PyCallable_Check(fn)) {
    PyErr_Format(PyExc_TypeError, "expected a callable, got %s", Py_TYPE(fn)->tp_name);
    return nullptr;
  }
  if (callback != Py_None && !PyCallable_Check(callback)) {
    PyErr_Format(PyExc_TypeError, "the frame callback must be callable or None, got %s", Py_TYPE(callback)->tp_name);
    return nullptr;
  }
  PyTypeObject* type = ScopedCallType();
  if (type == nullptr) return nullptr;
  auto* s = PyObject_GC_New(ScopedCall, type);
  if (s == nullptr) return nullptr;
  s->vectorcall = Vectorcall;
  Py_INCREF(fn);
  s->fn = fn;
  Py_INCREF(callback);
  s->callback = callback;
  s->dict = nullptr;
  s->weakrefs = nullptr;
  PyObject_GC_Track(s);
  return reinterpret_cast<PyObject*>(s);
}

}  // namespace kiln::dynamo
