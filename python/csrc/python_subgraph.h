// python/csrc/python_subgraph.h: kiln._C._fx._subgraph_match (fx/subgraph_matcher.h for Python).
#pragma once

#include <pybind11/pybind11.h>

namespace kiln::python {

// Adds _subgraph_match to the kiln._C._fx submodule (InitFxBindings must run first).
void InitSubgraphBindings(pybind11::module_& m);

}  // namespace kiln::python
