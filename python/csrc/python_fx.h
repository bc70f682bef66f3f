// python/csrc/python_fx.h: kiln._C._fx — Python bindings of fx/graph.h (Graph, Node).
//
// kiln.fx.Node is the bound C++ Node itself; kiln.fx.Graph is a Python subclass of the bound
// GraphBase (python/kiln/fx/graph.py adds code generation and context managers). Python values
// in args, targets and meta become fx::Arguments: nodes, constants (IValues), containers, and
// opaque PyValues for everything else (same object back, identity kept).
#pragma once

#include <pybind11/pybind11.h>

#include "fx/graph.h"

namespace kiln::python {

// A Python kiln.fx.Graph over an existing C++ graph (e.g. one make_fx built).
pybind11::object WrapGraph(std::shared_ptr<fx::Graph> graph);
// The C++ graph behind a Python kiln.fx.Graph (TypeError otherwise).
std::shared_ptr<fx::Graph> UnwrapGraph(pybind11::handle graph);
// The Python object for a node (one per node).
pybind11::object NodeObject(fx::Node* node);
// Holds a Python object inside a graph.
fx::PyValuePtr MakePyValue(pybind11::handle obj);
// Python value <-> Argument (args/kwargs/meta).
fx::Argument ToArgument(pybind11::handle obj);
pybind11::object FromArgument(const fx::Argument& arg);
// A boxed value as the Python value an OpOverload takes or returns for it (tensors, tensor lists,
// SymInts as ints where concrete, the rest through FromArgument).
pybind11::object IValueToPython(const IValue& v);
// Python target <-> Target (OpOverloads keep both the Op and the Python object).
fx::Target ToTarget(fx::Opcode op, pybind11::handle target);
pybind11::object FromTarget(const fx::Target& target);

void InitFxBindings(pybind11::module_& m);
// Adds _interpret and _why_not_interpretable to kiln._C._fx (python_interpreter.cc).
void InitInterpreterBindings(pybind11::module_& fx);

}  // namespace kiln::python
