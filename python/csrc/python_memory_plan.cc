// python/csrc/python_memory_plan.cc: kiln._C._inductor.MemoryPlanner and MemoryPlan, the wrapper's
// memory plan (inductor/memory_plan/memory_plan.h) for python/kiln/_inductor/wrapper.py. Steps go
// in by name, one typed call each; the plan comes back as typed objects.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "inductor/memory_plan/memory_plan.h"
#include "python/csrc/python_inductor.h"

namespace py = pybind11;

namespace kiln::python {

void InitMemoryPlanBindings(py::module_& ind) {
  using inductor::AllocPlan;
  using inductor::MemoryPlan;
  using inductor::MemoryPlanner;
  using inductor::StepPlan;

  ind.def("read_through_store", &inductor::ReadThroughStore, py::arg("kernel"), py::arg("victim"), py::arg("store"),
          "The kernel reading its input at position `victim` through the buffer it stores at `store`, victim "
          "dropped from its arguments (an in-place plan: inductor/memory_plan's ReadThroughStore)");
  py::class_<AllocPlan>(ind, "AllocPlan", "Where an allocation's memory comes from.")
      .def_property_readonly("kind", [](const AllocPlan& a) { return inductor::AllocKindName(a.kind); },
                             "'fresh', 'reuse' (a dead buffer's), 'in place' (over an input of the next kernel) or "
                             "'static' (reduce-overhead: made by the first call)")
      .def_readonly("source", &AllocPlan::source, "the buffer reused or overwritten ('' otherwise)")
      .def_readonly("kernel_step", &AllocPlan::kernel_step, "in place: the step of the kernel that writes over source")
      .def_readonly("victim", &AllocPlan::victim, "in place: source's position among that kernel's buffers")
      .def_readonly("store", &AllocPlan::store, "in place: the new buffer's position among them");
  py::class_<StepPlan>(ind, "StepPlan", "One step's part of the plan.")
      .def_readonly("alloc", &StepPlan::alloc)
      .def_readonly("dies", &StepPlan::dies, "the names deleted after the step");
  py::class_<MemoryPlan>(ind, "MemoryPlan", "A wrapper's memory plan, one StepPlan per step.")
      .def_readonly("static_buffers", &MemoryPlan::static_buffers)
      .def("__len__", [](const MemoryPlan& p) { return p.steps.size(); })
      .def("__getitem__", [](const MemoryPlan& p, size_t i) -> const StepPlan& {
            if (i >= p.steps.size()) throw py::index_error("MemoryPlan index out of range");
            return p.steps[i];
          }, py::return_value_policy::reference_internal)
      .def("__str__", &MemoryPlan::ToString);
  py::class_<MemoryPlanner>(ind, "MemoryPlanner",
                            "The steps of a lowered graph, in order; plan() decides buffer reuse, in-place writes "
                            "and lifetimes (Note [Memory plan] in inductor/memory_plan/memory_plan.cc).")
      .def(py::init<bool>(), py::arg("static_memory") = false)
      .def("declare",
           [](MemoryPlanner& p, const std::string& name, const std::vector<int64_t>& shape,
              const std::vector<int64_t>& stride, int64_t itemsize, const std::string& dtype) {
             p.Declare(name, inductor::SpanBytes(shape, stride, itemsize), dtype);
           },
           py::arg("name"), py::arg("shape"), py::arg("stride"), py::arg("itemsize"), py::arg("dtype"),
           "A buffer the wrapper owns (allocated, or an extern's fresh result), by its layout")
      .def("alloc", &MemoryPlanner::Alloc, py::arg("name"))
      .def("kernel",
           [](MemoryPlanner& p, const std::vector<std::string>& buffers, const codegen::Kernel& ir) {
             p.Kernel(buffers, inductor::AnalyzeStoreAccess(ir));
           },
           py::arg("buffers"), py::arg("ir"), "A kernel call: its buffers' names in argument order, and its IR")
      .def("view", &MemoryPlanner::View, py::arg("view"), py::arg("base"))
      .def("extern", &MemoryPlanner::Extern, py::arg("inputs"), py::arg("results"), py::arg("fresh"))
      .def("ret", &MemoryPlanner::Return, py::arg("outputs"))
      .def("plan", &MemoryPlanner::Plan)
      .def("__str__", &MemoryPlanner::StepsToString);
}

}  // namespace kiln::python
