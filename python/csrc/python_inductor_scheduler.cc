// python/csrc/python_inductor_scheduler.cc: kiln._C._inductor.scheduler (inductor/scheduler):
// the Scheduler that forms kernels from a lowered graph's values (Note [Kernels formed at
// realization]), its realized values, probes, and the fusion decisions (Note [Recompute or
// realize], Note [Sibling reductions]). The graph walk calls it in C++ (inductor/graph, Note
// [Lowering a graph]); from Python, tests and max-autotune's generated matmul (graph.py) form
// kernels with it directly.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "inductor/ir/values.h"
#include "inductor/scheduler/fusion.h"
#include "inductor/scheduler/probe.h"
#include "inductor/scheduler/realization.h"
#include "inductor/scheduler/scheduler.h"
#include "python/csrc/python_inductor.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

using inductor::ir::Affine;
using inductor::ir::Buffer;
using inductor::ir::Reduction;
using inductor::ir::Value;
using inductor::scheduler::Realization;
using inductor::scheduler::Realized;
using inductor::scheduler::Scheduler;
using inductor::scheduler::Step;
using inductor::ir::Pointwise;

py::object BufferObject(const Buffer* b) {
  return py::cast(std::static_pointer_cast<Buffer>(std::const_pointer_cast<Value>(b->shared_from_this())));
}

// The Realization a `with graph.state.lowering():` block makes current on this thread.
class ActiveScope {
 public:
  explicit ActiveScope(Realization* r) : r_(r) {}
  void Enter() { scope_ = std::make_unique<Realization::Scope>(r_); }
  void Exit(const py::args&) { scope_.reset(); }

 private:
  Realization* r_;
  std::unique_ptr<Realization::Scope> scope_;
};

}  // namespace

void InitInductorSchedulerBindings(py::module_& inductor) {
  py::module_ m = inductor.def_submodule(
      "scheduler", "Realized values, probes and fusion decisions (inductor/scheduler).");

  py::class_<Realized>(m, "Realized", "lazy value -> the Buffer a kernel computed it into.")
      .def(py::init<>())
      .def("get", [](const Realized& r, const Value& v, const py::object& fallback) -> py::object {
             auto b = r.Get(v);
             return b ? py::cast(b) : fallback;
           }, py::arg("value"), py::arg("default") = py::none())
      .def("__getitem__", [](const Realized& r, const Value& v) {
        auto b = r.Get(v);
        if (!b) throw py::key_error(v.ToString());
        return b;
      })
      .def("__setitem__", &Realized::Set)
      .def("__contains__", [](const Realized& r, const py::handle& v) {
        return py::isinstance<Value>(v) && r.Contains(v.cast<const Value&>());
      })
      .def("pop", [](Realized& r, const Value& v, const py::object& fallback) -> py::object {
             auto b = r.Pop(v);
             return b ? py::cast(b) : fallback;
           }, py::arg("value"), py::arg("default") = py::none())
      .def("copy", [](const Realized& r) { return Realized(r); })
      .def("__len__", &Realized::size);

  py::class_<Realization>(m, "Realization", "The realized values of a graph being lowered, its snapshots and its reductions.")
      .def(py::init<>())
      .def_property_readonly("now", [](Realization& r) -> Realized& { return r.now; }, py::return_value_policy::reference_internal)
      .def("snapshot", [](Realization& r, const Realized& copy) { return r.Snapshot(copy); }, py::arg("realized"),
           "Keeps a copy of `realized`; returns its number, a read's as_of (Note [Realized as of]).")
      .def("lowering", [](Realization& r) { return std::make_unique<ActiveScope>(&r); }, py::keep_alive<0, 1>(),
           "A context manager: while in it, Reductions made on this thread join `reductions`.");

  py::class_<ActiveScope>(m, "_ActiveScope")
      .def("__enter__", &ActiveScope::Enter)
      .def("__exit__", &ActiveScope::Exit);

  py::class_<inductor::scheduler::ProbeResult>(m, "ProbeResult", "What a body reads where a kernel would place it.")
      .def_property_readonly("expr", [](const inductor::scheduler::ProbeResult& p) {
        PyObject* o = WrapExpr(p.expr);
        if (o == nullptr) throw py::error_already_set();
        return py::reinterpret_steal<py::object>(o);
      })
      .def_property_readonly("coeffs", [](const inductor::scheduler::ProbeResult& p) {
        py::list out;
        for (const Affine& a : p.loads) {
          py::dict d;
          for (const auto& [v, c] : a.terms()) d[py::int_(v)] = c;
          out.append(d);
        }
        return out;
      }, "Per load: its element offset's coefficient for each loop variable ({variable: coefficient}).")
      .def_property_readonly("buffers", [](const inductor::scheduler::ProbeResult& p) {
        py::list out;
        for (const Buffer* b : p.buffers) out.append(BufferObject(b));
        return out;
      }, "The buffers it loads (a view by the buffer whose memory it is), in the order first loaded.")
      .def_readonly("reads_reduction", &inductor::scheduler::ProbeResult::reads_reduction);

  py::class_<inductor::scheduler::FormedKernel, std::shared_ptr<inductor::scheduler::FormedKernel>>(
      m, "FormedKernel", "A kernel formed from values: its IR, its buffers in order, its ops and the user's lines.")
      .def_readonly("ir", &inductor::scheduler::FormedKernel::ir)
      .def_readonly("buffers", &inductor::scheduler::FormedKernel::buffers)
      .def_property_readonly("ops", [](const inductor::scheduler::FormedKernel& k) {
        py::set out;
        for (const std::string& op : k.ops) out.add(py::str(op));
        return out;
      })
      .def_readonly("stack_traces", &inductor::scheduler::FormedKernel::stack_traces);

  py::class_<Step>(m, "Step", "One of the wrapper's steps kernel formation made: alloc, kernel or view.")
      .def_property_readonly("kind", [](const Step& s) {
        switch (s.kind) {
          case Step::Kind::kAlloc: return "alloc";
          case Step::Kind::kKernel: return "kernel";
          case Step::Kind::kView: return "view";
        }
        return "";
      })
      .def_readonly("buf", &Step::buf)
      .def_readonly("base", &Step::base)
      .def_readonly("kernel", &Step::kernel);

  py::class_<Scheduler>(m, "Scheduler", "Forms kernels from a lowered graph's values as they are realized.")
      .def(py::init<>())
      .def_property_readonly("state", [](Scheduler& s) -> Realization& { return s.state; })
      .def("new_buffer", [](Scheduler& s, const py::handle& dtype, std::vector<int64_t> shape,
                            std::optional<std::vector<int64_t>> stride, int64_t offset) {
             return s.NewBuffer(ScalarTypeArg(dtype, "Scheduler.new_buffer's dtype"), std::move(shape), std::move(stride),
                                offset);
           }, py::arg("dtype"), py::arg("shape"), py::arg("stride") = py::none(), py::arg("offset") = 0,
           "A buffer kernels or extern ops will write, named buf<n>.")
      .def("mark_defined", &Scheduler::MarkDefined, py::arg("name"))
      .def("define", &Scheduler::Define, py::arg("buf"))
      .def("realize", &Scheduler::Realize, py::arg("value"))
      .def("kernel_for_pointwise", &Scheduler::KernelForPointwise, py::arg("value"), py::arg("stride") = py::none())
      .def("defer", &Scheduler::Defer, py::arg("red"))
      .def("squeezed_view", &Scheduler::SqueezedView, py::arg("buf"), py::arg("shape"))
      .def("take_steps", &Scheduler::TakeSteps, "The steps made since the last call, in program order.");

  m.def("probe", [](const Value& value, const Realization* state, std::optional<std::vector<Affine>> at) {
          return inductor::scheduler::Probe(value, state, at);
        }, py::arg("value"), py::arg("state") = nullptr, py::arg("at") = py::none(),
        "value's body placed at `at` (its own indices by default; a Reduction: its source over its kept dims and r), "
        "lazy values it reads inlined unless `state` has them realized.");
  m.def("cheap_to_recompute", &inductor::scheduler::CheapToRecompute, py::arg("value"), py::arg("state") = nullptr,
        "Whether a value several nodes read is recomputed by each (Note [Recompute or realize]).");
}

}  // namespace kiln::python
