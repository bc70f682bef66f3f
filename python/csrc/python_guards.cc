// python/csrc/python_guards.cc: kiln._C._dynamo.guards, the Python surface of the guard tree
// (dynamo/guards.h, Note [Guard tree]).
//
// Python builds the tree once per compiled frame; the frame hook then checks it in C++ on every
// call (eval_frame.cc recognises a RootGuardManager through the unwrapper installed here). Nodes
// are owned by the tree: a GuardManager handed to Python keeps its parent, and so the root, alive.
// Bad arguments raise TypeError (wrong kind of object) or ValueError (wrong value).
#include <pybind11/pybind11.h>

#include "dynamo/guards.h"
#include "python/csrc/python_dynamo.h"
#include "python/csrc/python_tensor.h"
#include "runtime/error.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

using dynamo::GuardManager;
using dynamo::RootGuardManager;

PyTypeObject* g_root_type = nullptr;  // kiln._C._dynamo.guards.RootGuardManager

const Tensor* UnwrapTensor(PyObject* o) { return IsTensor(o) ? &UnpackTensor(o) : nullptr; }

// Only the exact class: a Python subclass may override __call__, so the hook must call it.
RootGuardManager* UnwrapRoot(PyObject* o) {
  if (g_root_type == nullptr || Py_TYPE(o) != g_root_type) return nullptr;
  return py::handle(o).cast<RootGuardManager*>();
}

const char* TypeName(py::handle h) { return Py_TYPE(h.ptr())->tp_name; }

Py_ssize_t IntArg(py::handle h, const char* what) {
  if (!PyLong_Check(h.ptr())) throw TypeError(StrCat(what, " must be an int, got ", TypeName(h)));
  Py_ssize_t v = PyLong_AsSsize_t(h.ptr());
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
  return v;
}

void CheckLocals(py::handle f_locals) {
  if (!PyDict_Check(f_locals.ptr()))
    throw TypeError(StrCat("RootGuardManager expects a dict of locals, got ", TypeName(f_locals)));
}

}  // namespace

void InitGuardBindings(py::module_& dynamo_module) {
  py::module_ m = dynamo_module.def_submodule("guards", "the guard tree checked by the frame hook (dynamo/guards.h)");
  dynamo::SetTensorUnwrapper(&UnwrapTensor);
  dynamo::SetGuardManagerUnwrapper(&UnwrapRoot);
  constexpr auto kChild = py::return_value_policy::reference_internal;

  py::class_<GuardManager>(m, "GuardManager", "One node of the guard tree: a value named by its source.")
      .def("dict_getitem_manager",
           [](GuardManager& g, py::handle key, const std::string& source) { return g.DictGetItemManager(key.ptr(), source); },
           py::arg("key"), py::arg("source"), kChild, "The child for value[key] (value a dict); a missing key fails.")
      .def("getattr_manager",
           [](GuardManager& g, py::handle name, const std::string& source) { return g.GetAttrManager(name.ptr(), source); },
           py::arg("name"), py::arg("source"), kChild, "The child for getattr(value, name); a missing attribute fails.")
      .def("getitem_manager",
           [](GuardManager& g, py::handle index, const std::string& source) {
             return g.GetItemManager(IntArg(index, "getitem_manager: the index"), source);
           },
           py::arg("index"), py::arg("source"), kChild, "The child for value[index] (a tuple or list); out of range fails.")
      .def("add_type_match_guard",
           [](GuardManager& g, py::handle type, const std::string& origin) { g.AddTypeMatchGuard(type.ptr(), origin); },
           py::arg("type"), py::arg("origin"))
      .def("add_id_match_guard",
           [](GuardManager& g, py::handle obj, const std::string& origin) { g.AddIdMatchGuard(obj.ptr(), origin); },
           py::arg("obj"), py::arg("origin"))
      .def("add_equals_match_guard",
           [](GuardManager& g, py::handle value, const std::string& origin) { g.AddEqualsMatchGuard(value.ptr(), origin); },
           py::arg("value"), py::arg("origin"))
      .def("add_length_check_guard",
           [](GuardManager& g, py::handle n, const std::string& origin) {
             g.AddLengthCheckGuard(IntArg(n, "add_length_check_guard: the length"), origin);
           },
           py::arg("n"), py::arg("origin"))
      .def("add_dict_keys_guard",
           [](GuardManager& g, py::handle keys, const std::string& origin) { g.AddDictKeysGuard(keys.ptr(), origin); },
           py::arg("keys"), py::arg("origin"))
      .def("add_tensor_match_guard",
           [](GuardManager& g, py::handle example, py::handle sizes, py::handle strides, const std::string& origin) {
             if (!IsTensor(example.ptr()))
               throw TypeError(StrCat("add_tensor_match_guard: expected a kiln.Tensor example, got ", TypeName(example)));
             if (!PyList_Check(sizes.ptr()) && !PyTuple_Check(sizes.ptr()))
               throw TypeError(StrCat("add_tensor_match_guard: sizes must be a list, got ", TypeName(sizes)));
             if (!PyList_Check(strides.ptr()) && !PyTuple_Check(strides.ptr()))
               throw TypeError(StrCat("add_tensor_match_guard: strides must be a list, got ", TypeName(strides)));
             std::vector<GuardManager::SizeSpec> size_specs;
             for (py::handle s : sizes) {
               if (PyUnicode_Check(s.ptr())) {
                 size_specs.emplace_back(s.cast<std::string>());
               } else if (PyLong_Check(s.ptr())) {
                 size_specs.emplace_back(static_cast<int64_t>(IntArg(s, "a size")));
               } else {
                 throw TypeError(StrCat("add_tensor_match_guard: a size must be an int or a symbol name (str), got ",
                                        TypeName(s)));
               }
             }
             std::vector<GuardManager::StrideSpec> stride_specs;
             for (py::handle s : strides) {
               if (s.is_none()) {
                 stride_specs.emplace_back(GuardManager::ContiguousStride{});
               } else if (PyLong_Check(s.ptr())) {
                 stride_specs.emplace_back(static_cast<int64_t>(IntArg(s, "a stride")));
               } else if (PyUnicode_Check(s.ptr())) {
                 stride_specs.emplace_back(s.cast<std::string>());
               } else if (PyTuple_Check(s.ptr()) && PyTuple_GET_SIZE(s.ptr()) == 2 &&
                          PyUnicode_Check(PyTuple_GET_ITEM(s.ptr(), 0)) &&
                          py::cast<std::string>(PyTuple_GET_ITEM(s.ptr(), 0)) == "stride*size" &&
                          PyLong_Check(PyTuple_GET_ITEM(s.ptr(), 1))) {
                 stride_specs.emplace_back(GuardManager::StrideTimesSize{
                     static_cast<int>(IntArg(PyTuple_GET_ITEM(s.ptr(), 1), "a stride's dim"))});
               } else {
                 throw TypeError(StrCat("add_tensor_match_guard: a stride must be an int, a symbol name (str), None "
                                        "(contiguous) or ('stride*size', dim), got ", py::repr(s).cast<std::string>()));
               }
             }
             g.AddTensorMatchGuard(example.ptr(), size_specs, stride_specs, origin);
           },
           py::arg("example"), py::arg("sizes"), py::arg("strides"), py::arg("origin"),
           "sizes: int (exact) or str (a symbol, bound at check time); strides: int, str, None (the contiguous "
           "stride) or ('stride*size', j) (dim j's stride times its size).")
      .def("add_lambda_guard",
           [](GuardManager& g, py::handle fn, const std::string& origin) { g.AddLambdaGuard(fn.ptr(), origin); },
           py::arg("callable"), py::arg("origin"));

  py::class_<RootGuardManager, GuardManager> root(m, "RootGuardManager",
                                                  "The guard tree of one cache entry: callable(f_locals) -> bool.");
  root.def(py::init([](py::handle f_globals) {
         if (!PyDict_Check(f_globals.ptr()))
           throw TypeError(StrCat("RootGuardManager: f_globals must be a dict, got ", TypeName(f_globals)));
         return std::make_unique<RootGuardManager>(f_globals.ptr());
       }),
       py::arg("f_globals"))
      .def("__call__",
           [](const RootGuardManager& r, py::handle f_locals) {
             CheckLocals(f_locals);
             return r.Check(f_locals.ptr());
           },
           py::arg("f_locals"))
      .def("check_verbose",
           [](const RootGuardManager& r, py::handle f_locals) {
             CheckLocals(f_locals);
             auto [ok, why] = r.CheckVerbose(f_locals.ptr());
             return py::make_tuple(ok, why);
           },
           py::arg("f_locals"), "(True, '') or (False, the failed guard's text and origin).")
      .def("add_global_state_guard", &RootGuardManager::AddGlobalStateGuard, py::arg("origin"),
           "Grad mode and the default dtype must be as they are now.")
      .def("set_shape_env",
           [](RootGuardManager& r, py::handle env, const std::string& origin) {
             std::shared_ptr<fx::ShapeEnv> shape_env;
             if (!env.is_none()) {
               try {
                 shape_env = env.cast<std::shared_ptr<fx::ShapeEnv>>();
               } catch (const py::cast_error&) {
                 throw TypeError(StrCat("set_shape_env: expected a ShapeEnv, got ", TypeName(env)));
               }
             }
             r.SetShapeEnv(std::move(shape_env), origin);
           },
           py::arg("shape_env"), py::arg("origin"),
           "The ShapeEnv whose guards run after the tree, over the symbols bound by tensor-match guards.")
      .def("globals_dict_manager", &RootGuardManager::GlobalsDictManager, kChild, "The captured f_globals (source G).")
      .def("__str__", &RootGuardManager::Str);
  g_root_type = reinterpret_cast<PyTypeObject*>(root.ptr());
}

}  // namespace kiln::python
