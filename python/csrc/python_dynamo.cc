// python/csrc/python_dynamo.cc: kiln._C._dynamo, the frame hook's Python surface.
#include "python/csrc/python_dynamo.h"

#include "dynamo/bytecode.h"
#include "dynamo/bytecode_analysis.h"
#include "dynamo/eval_frame.h"
#include "dynamo/resume.h"
#include "dynamo/scoped_call.h"

namespace py = pybind11;

namespace kiln::python {

namespace {
PyCodeObject* CodeArg(py::handle code) {
  if (!PyCode_Check(code.ptr())) throw py::type_error("expected a code object");
  return reinterpret_cast<PyCodeObject*>(code.ptr());
}

// Resume functions (dynamo/resume.h) and the liveness they rely on (dynamo/bytecode_analysis.h).
PyCodeObject* CodeArg(const char* fn, py::handle code) {
  if (!PyCode_Check(code.ptr()))
    throw py::type_error(std::string(fn) + ": code must be a code object, got " + Py_TYPE(code.ptr())->tp_name);
  return reinterpret_cast<PyCodeObject*>(code.ptr());
}

int OffsetArg(const char* fn, const char* arg, py::handle offset) {
  if (!PyLong_Check(offset.ptr()) || PyBool_Check(offset.ptr()))
    throw py::type_error(std::string(fn) + ": " + arg + " must be an int, got " + Py_TYPE(offset.ptr())->tp_name);
  long value = PyLong_AsLong(offset.ptr());
  if (value == -1 && PyErr_Occurred()) throw py::error_already_set();
  if (value < 0 || value > (1L << 30))
    throw py::value_error(std::string(fn) + ": " + arg + " must be a byte offset, got " + std::to_string(value));
  return static_cast<int>(value);
}

void InitResumeBindings(py::module_& m) {
  m.def("_live_locals", [](py::handle code, py::handle offset) {
    std::vector<std::string> names;
    if (!dynamo::LiveLocalNamesAt(CodeArg("_live_locals", code), OffsetArg("_live_locals", "offset", offset), &names))
      throw py::error_already_set();
    py::list out;
    for (const std::string& n : names) out.append(py::str(n));
    return out;
  }, py::arg("code"), py::arg("offset"),
     "The co_varnames that some path from the instruction at `offset` may read before writing.");
  m.def("_in_try_block", [](py::handle code, py::handle offset) {
    bool in_try = false;
    if (!dynamo::InTryBlock(CodeArg("_in_try_block", code), OffsetArg("_in_try_block", "offset", offset), &in_try))
      throw py::error_already_set();
    return in_try;
  }, py::arg("code"), py::arg("offset"),
     "Whether the instruction at `offset` lies in a try block (a handler other than a with statement's cleanup).");
  m.def("_make_resume_code", [](py::handle code, py::handle target_offset, py::handle null_mask,
                                py::handle dead_locals, py::handle name) {
    constexpr const char* fn = "_make_resume_code";
    PyCodeObject* c = CodeArg(fn, code);
    int target = OffsetArg(fn, "target_offset", target_offset);
    if (!py::isinstance<py::sequence>(null_mask) || py::isinstance<py::str>(null_mask))
      throw py::type_error(std::string(fn) + ": null_mask must be a sequence of bool");
    std::vector<bool> mask;
    for (py::handle b : null_mask) {
      if (!PyBool_Check(b.ptr()))
        throw py::type_error(std::string(fn) + ": null_mask must hold bools, got " + Py_TYPE(b.ptr())->tp_name);
      mask.push_back(b.ptr() == Py_True);
    }
    if (!py::isinstance<py::sequence>(dead_locals) || py::isinstance<py::str>(dead_locals))
      throw py::type_error(std::string(fn) + ": dead_locals must be a sequence of str");
    std::vector<std::string> dead;
    for (py::handle d : dead_locals) {
      if (!py::isinstance<py::str>(d))
        throw py::type_error(std::string(fn) + ": dead_locals must hold str, got " + Py_TYPE(d.ptr())->tp_name);
      dead.push_back(d.cast<std::string>());
    }
    if (!py::isinstance<py::str>(name))
      throw py::type_error(std::string(fn) + ": name must be a str, got " + Py_TYPE(name.ptr())->tp_name);
    PyObject* out = dynamo::MakeResumeCode(c, target, mask, dead, name.cast<std::string>());
    if (!out) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(out);
  }, py::arg("code"), py::arg("target_offset"), py::arg("null_mask"), py::arg("dead_locals"), py::arg("name"),
     "A resume function's code: `code` continued at `target_offset` (see Note [Resume code]).");
}
}  // namespace

void InitDynamoBindings(py::module_& parent) {
  py::module_ m = parent.def_submodule("_dynamo", "the PEP 523 frame hook (dynamo/eval_frame.h)");
  InitResumeBindings(m);
  m.def("set_eval_frame", [](py::object callback) {
    if (!callback.is_none() && !PyCallable_Check(callback.ptr()))
      throw py::type_error("set_eval_frame expects a callable or None");
    return py::reinterpret_steal<py::object>(dynamo::SetEvalFrameCallback(callback.ptr()));
  }, "Sets this thread's frame callback (None: off); returns the previous one.");
  m.def("_scoped_call", [](py::handle fn, py::handle callback) {
    PyObject* out = dynamo::MakeScopedCall(fn.ptr(), callback.ptr());
    if (!out) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(out);
  }, "A callable running fn with this thread's frame callback set to callback (None: off) (dynamo/scoped_call.h).");
  m.add_object("ScopedCall", [] {
    PyTypeObject* type = dynamo::ScopedCallType();
    if (!type) throw py::error_already_set();
    return py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(type));
  }());
  m.def("skip_code", [](py::handle code) { dynamo::SkipCode(CodeArg(code)); });
  m.def("reset_code", [](py::handle code) { dynamo::ResetCode(CodeArg(code)); });
  m.def("_decode", [](py::handle code) {
    std::vector<dynamo::Instruction> instructions;
    if (!dynamo::Decode(CodeArg(code), &instructions)) throw py::error_already_set();
    py::list out;
    for (const auto& i : instructions)
      out.append(py::make_tuple(i.opcode, i.arg, i.offset, i.start_offset, i.line, i.jump_target, i.is_jump_target));
    return out;
  }, "The decoded instructions of a code object: (opcode, arg, offset, start_offset, line, jump_target index, is_jump_target).");
  m.def("_debug_get_cache_entry_list", [](py::handle code) {
    PyObject* l = dynamo::CacheEntries(CodeArg(code));
    if (!l) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(l);
  });
  InitGuardBindings(m);
}

}  // namespace kiln::python
