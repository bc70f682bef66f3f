// python/csrc/python_functionalize.cc: kiln._C's functionalization helpers, used by
// kiln.func.functionalize (aot/functionalize.h).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "aot/functionalize.h"
#include "aot/joint.h"
#include "python/csrc/python_fx.h"
#include "python/csrc/tensor_caster.h"

namespace py = pybind11;

namespace kiln::python {

void InitFunctionalizeBindings(py::module_& m, py::module_& aot_module) {
  m.def("_to_functional_tensor", [](const Tensor& t) { return aot::ToFunctional(t); });
  aot_module.def("mutations_to_outputs", [](py::handle graph) { return aot::MutationsToOutputs(*UnwrapGraph(graph)); },
        "make_fx(functionalize(f))'s copy_ epilogue as leading outputs; the positions of the inputs written "
        "(aot/joint.h, Note [Input mutations as outputs])");
  m.def("_from_functional_tensor", [](const Tensor& t) { return aot::FromFunctional(t); });
  m.def("_from_functional_output", [](const Tensor& t) { return aot::FromFunctionalOutput(t); });
  m.def("_is_functional_tensor", [](const Tensor& t) { return aot::IsFunctional(t); });
  m.def("_functionalize_has_data_mutation", [](const Tensor& t) {
    aot::FunctionalTensorImpl* f = aot::AsFunctional(t);
    if (!f) throw TypeError("_functionalize_has_data_mutation expects a functional tensor");
    return f->has_data_mutation();
  });
  // The in-place view ops applied to a functional tensor, as (method name, args) pairs that
  // kiln.func.functionalize replays on the real input: [("t_", ()), ("transpose_", (0, 1))].
  m.def("_functionalize_metadata_mutations", [](const Tensor& t) {
    aot::FunctionalTensorImpl* f = aot::AsFunctional(t);
    if (!f) throw TypeError("_functionalize_metadata_mutations expects a functional tensor");
    auto to_python = [](const IValue& v) -> py::object {
      if (v.is_none()) return py::none();
      if (v.is_bool()) return py::bool_(v.to_bool());
      if (v.is_int()) return py::int_(v.to_int());
      if (v.is_symint()) return py::int_(v.to_symint().expect_int());
      if (v.is_double()) return py::float_(v.to_double());
      py::list l;
      for (int64_t i : v.to_int_list()) l.append(i);
      return l;
    };
    py::list out;
    for (const aot::ViewMeta& m : f->metadata_mutations()) {
      py::tuple args(m.args.size());
      for (size_t i = 0; i < m.args.size(); ++i) args[i] = to_python(m.args[i]);
      out.append(py::make_tuple(m.op->base_name(), args));
    }
    return out;
  });
  m.def("_functionalize_is_view", [](const Tensor& t) {
    aot::FunctionalTensorImpl* f = aot::AsFunctional(t);
    return f != nullptr && f->is_view();
  });
  // Whether new tensors made inside the functionalized function (factories) become functional:
  // the Functionalize key in the thread's included set. Returns the previous setting.
  m.def("_enable_functionalization", [](bool on) {
    LocalDispatchKeySet& tls = TlsLocalDispatchKeySet();
    bool was = tls.included.has(DispatchKey::Functionalize);
    tls.included = on ? tls.included.add(DispatchKey::Functionalize) : tls.included.remove(DispatchKey::Functionalize);
    return was;
  });
}

}  // namespace kiln::python
