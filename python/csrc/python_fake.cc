// python/csrc/python_fake.cc: bindings for fake tensors (tensor/fake_tensor.h), used by
// kiln/_subclasses/fake_tensor.py: the C++ mode object, conversion, mode entry/exit, queries.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "python/csrc/arg_parser.h"
#include "python/csrc/python_dtype.h"
#include "python/csrc/python_fake.h"
#include "python/csrc/python_symbolic.h"
#include "python/csrc/tensor_caster.h"
#include "tensor/fake_tensor.h"

namespace py = pybind11;

namespace kiln::python {

PyTypeObject* g_fake_tensor_class = nullptr;

namespace {

// Python ints (or kiln.SymInt objects, through their `node` once the ShapeEnv bindings exist)
// as a SymDimVector.
SymDimVector SymInts(py::handle seq) {
  SymDimVector out;
  for (py::handle h : seq) {
    if (PyLong_Check(h.ptr())) {
      out.emplace_back(static_cast<int64_t>(PyLong_AsLongLong(h.ptr())));
    } else if (IsSymIntObject(h.ptr())) {  // kiln.SymInt from a ShapeEnv
      out.push_back(UnpackSymInt(h.ptr()));
    } else {
      throw TypeError(StrCat("expected a sequence of ints (sizes/strides), got an element of type ",
                             Py_TYPE(h.ptr())->tp_name));
    }
  }
  return out;
}

ScalarType FakeDtypeArg(py::handle h) {
  if (!IsDtype(h.ptr())) throw TypeError("expected a kiln.dtype");
  return reinterpret_cast<PyDtype*>(h.ptr())->scalar_type;
}

SymInt OneSymInt(py::handle h) {
  if (PyLong_Check(h.ptr())) return SymInt(static_cast<int64_t>(PyLong_AsLongLong(h.ptr())));
  if (IsSymIntObject(h.ptr())) return UnpackSymInt(h.ptr());
  py::list l;
  l.append(h);
  return SymInts(l)[0];
}

}  // namespace

void InitFakeBindings(py::module_& m) {
  py::class_<FakeTensorMode, std::shared_ptr<FakeTensorMode>>(m, "_FakeTensorMode")
      .def(py::init([](bool allow_non_fake_inputs) { return std::make_shared<FakeTensorMode>(allow_non_fake_inputs); }),
           py::arg("allow_non_fake_inputs") = false)
      .def_property("allow_non_fake_inputs", &FakeTensorMode::allow_non_fake_inputs,
                    &FakeTensorMode::set_allow_non_fake_inputs)
      // The Python FakeTensorMode wrapping this one (borrowed; cleared by its finaliser).
      .def_readwrite("_crossref", &FakeTensorMode::crossref)
      .def_readwrite("_crossref_mismatches", &FakeTensorMode::crossref_mismatches)
      .def_readwrite("_crossref_seen", &FakeTensorMode::crossref_seen)
      .def("_set_pyobj", [](FakeTensorMode& mode, py::handle obj) { mode.py_object = obj.is_none() ? nullptr : obj.ptr(); })
      .def("_pyobj", [](FakeTensorMode& mode) -> py::object {
        if (!mode.py_object) return py::none();
        return py::reinterpret_borrow<py::object>(static_cast<PyObject*>(mode.py_object));
      });

  m.def("_set_fake_tensor_class", [](py::object cls) {
    if (!PyType_Check(cls.ptr()) || !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cls.ptr()), g_tensor_base_type))
      throw TypeError("_set_fake_tensor_class expects a subclass of TensorBase");
    cls.inc_ref();
    g_fake_tensor_class = reinterpret_cast<PyTypeObject*>(cls.ptr());
  });
  // mode.from_tensor's C++ half: a fake of `t` (memoised), optionally with other (symbolic) sizes.
  m.def("_fake_from_tensor", [](const std::shared_ptr<FakeTensorMode>& mode, const Tensor& t, py::handle sizes,
                                py::handle strides, py::handle offset) {
    if (sizes.is_none()) return mode->FromReal(t);
    SymDimVector sz = SymInts(sizes);
    SymDimVector st = strides.is_none() ? t->sym_strides() : SymInts(strides);
    SymInt off = offset.is_none() ? t->sym_storage_offset() : OneSymInt(offset);
    return mode->FromReal(t, &sz, &st, &off);
  }, py::arg("mode"), py::arg("t"), py::arg("sizes") = py::none(), py::arg("strides") = py::none(),
     py::arg("storage_offset") = py::none());
  // A fresh fake tensor of `mode` with the given layout.
  m.def("_fake_empty_strided", [](const std::shared_ptr<FakeTensorMode>& mode, py::handle sizes, py::handle strides,
                                  py::handle offset, py::handle dtype, const std::string& device) {
    return mode->Empty(SymInts(sizes), strides.is_none() ? SymDimVector{} : SymInts(strides),
                       offset.is_none() ? SymInt(0) : OneSymInt(offset), FakeDtypeArg(dtype), Device::Parse(device));
  });
  // Whether fake/meta tensors can run the op: a meta function, a composite, or an out= overload
  // whose functional sibling has one (FakeKernel's rule).
  m.def("_has_fake_impl", [](const std::string& full_name) {
    Op* op = Registry::Get().Find(full_name);
    if (!op) throw py::attribute_error("no op named " + full_name);
    return static_cast<bool>(op->fake_inner());
  });
  m.def("_is_fake", [](const Tensor& t) { return IsFake(t); });
  // The C++ mode of a fake tensor (None for other tensors).
  m.def("_fake_mode_of", [](const Tensor& t) { return FakeModePtrOf(t); });
  m.def("_push_fake_mode", [](std::shared_ptr<FakeTensorMode> mode) { PushFakeMode(std::move(mode)); },
        py::arg("mode").none(true));
  m.def("_pop_fake_mode", [] { PopFakeMode(); });
  m.def("_active_fake_mode", []() -> py::object {
    FakeTensorMode* mode = ActiveFakeMode();
    if (!mode || mode->crossref) return py::none();  // a cross-checking mode keeps tensors real
    return py::cast(mode->shared_from_this());
  });
  // Storage identity and size (data-less storages of meta/fake tensors included).
  m.def("_storage_key", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t->storage().get()); });
  m.def("_storage_nbytes", [](const Tensor& t) -> py::object {
    if (!t->storage()) return py::int_(0);
    const SymInt& n = t->storage()->sym_nbytes();
    if (!n.is_symbolic()) return py::int_(n.expect_int());
    return py::str(n.str());
  });
}

}  // namespace kiln::python
