// python/csrc/python_interpreter.cc: kiln._C._fx._interpret, the C++ interpreter of aten graphs
// (fx/interpreter.h) for Python: AOTAutograd's replay of the raw joint graph
// (kiln/_functorch/_aot_autograd/functional_graph.py, Note [Interpreting aten graphs]).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "fx/interpreter.h"
#include "python/csrc/python_fx.h"
#include "python/csrc/python_symbolic.h"
#include "python/csrc/python_tensor.h"
#include "runtime/error.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

// A graph input as the interpreter takes it: tensors, None, numbers and SymInts.
IValue InputValue(py::handle o) {
  PyObject* p = o.ptr();
  if (IsTensor(p)) return IValue(UnpackTensor(p));
  if (p == Py_None) return IValue();
  if (PyBool_Check(p)) return IValue(p == Py_True);
  if (PyLong_Check(p)) return IValue(o.cast<int64_t>());
  if (PyFloat_Check(p)) return IValue(o.cast<double>());
  if (IsSymIntObject(p)) return IValue(UnpackSymInt(p));
  throw TypeError(StrCat("[fx.Interpreter] a graph input must be a tensor, a number or None, got ",
                         py::repr(o).cast<std::string>()));
}

// The output node's argument with each node's value put in (tuples stay tuples, lists lists).
py::object Rebuild(const fx::Argument& a, const std::vector<IValue>& values, size_t& next) {
  switch (a.kind) {
    case fx::Argument::Kind::kNode:
      return IValueToPython(values.at(next++));
    case fx::Argument::Kind::kTuple:
    case fx::Argument::Kind::kList: {
      py::list items;
      for (const fx::Argument& x : a.items) items.append(Rebuild(x, values, next));
      if (a.kind == fx::Argument::Kind::kList) return std::move(items);
      return py::tuple(items);
    }
    default:
      return FromArgument(a);
  }
}

}  // namespace

void InitInterpreterBindings(py::module_& fx) {
  fx.def(
      "_why_not_interpretable",
      [](py::handle graph) { return fx::WhyNotInterpretable(*UnwrapGraph(graph)); },
      "'' when kiln._C._fx._interpret can run the graph, else the first node it cannot run, named.");
  fx.def(
      "_interpret",
      [](py::handle graph, py::sequence args, py::handle annotate) {
        std::shared_ptr<fx::Graph> g = UnwrapGraph(graph);
        std::shared_ptr<fx::Graph> record = annotate.is_none() ? nullptr : UnwrapGraph(annotate);
        std::vector<IValue> inputs;
        for (py::handle a : args) inputs.push_back(InputValue(a));
        fx::InterpretOptions options;
        options.annotate = record.get();
        fx::InterpretedOutput out = fx::Interpret(*g, std::move(inputs), options);
        size_t next = 0;
        return Rebuild(out.structure, out.values, next);
      },
      py::arg("graph"), py::arg("args"), py::arg("annotate") = py::none(),
      "Runs an aten graph on args through the dispatcher and returns its output's values (fx/interpreter.h); "
      "`annotate`, the graph a make_fx trace is recording, gets each node's stack_trace on what it records.");
}

}  // namespace kiln::python
