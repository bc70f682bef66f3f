// python/csrc/python_dynamo.cc: kiln._C._dynamo, the frame hook's Python surface.
#include "python/csrc/python_dynamo.h"

#include "dynamo/bytecode.h"
#include "dynamo/eval_frame.h"

namespace py = pybind11;

namespace kiln::python {

namespace {
PyCodeObject* CodeArg(py::handle code) {
  if (!PyCode_Check(code.ptr())) throw py::type_error("expected a code object");
  return reinterpret_cast<PyCodeObject*>(code.ptr());
}
}  // namespace

void InitDynamoBindings(py::module_& parent) {
  py::module_ m = parent.def_submodule("_dynamo", "the PEP 523 frame hook (dynamo/eval_frame.h)");
  m.def("set_eval_frame", [](py::object callback) {
    if (!callback.is_none() && !PyCallable_Check(callback.ptr()))
      throw py::type_error("set_eval_frame expects a callable or None");
    return py::reinterpret_steal<py::object>(dynamo::SetEvalFrameCallback(callback.ptr()));
  }, "Sets this thread's frame callback (None: off); returns the previous one.");
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
