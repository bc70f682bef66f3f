// python/csrc/python_functionalize.cc: kiln._C's functionalization helpers, used by
// kiln.func.functionalize (aot/functionalize.h).
#include <pybind11/pybind11.h>

#include "aot/functionalize.h"
#include "python/csrc/tensor_caster.h"

namespace py = pybind11;

namespace kiln::python {

void InitFunctionalizeBindings(py::module_& m) {
  aot::InstallFunctionalize();
  m.def("_to_functional_tensor", [](const Tensor& t) { return aot::ToFunctional(t); });
  m.def("_from_functional_tensor", [](const Tensor& t) { return aot::FromFunctional(t); });
  m.def("_is_functional_tensor", [](const Tensor& t) { return aot::IsFunctional(t); });
  m.def("_functionalize_has_data_mutation", [](const Tensor& t) {
    aot::FunctionalTensorImpl* f = aot::AsFunctional(t);
    if (!f) throw TypeError("_functionalize_has_data_mutation expects a functional tensor");
    return f->has_data_mutation();
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
