// fx/testing/calls.h: a call_function node of a registered aten op, by its name, for C++ tests that
// build graphs by hand. Include from test files only.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "fx/graph.h"

namespace kiln::fx::testing {

inline Node* Call(Graph& g, const std::string& op, std::vector<Argument> args) {
  return g.CallFunction(Target(&Registry::Get().FindOrThrow(op)), std::move(args));
}

}  // namespace kiln::fx::testing
