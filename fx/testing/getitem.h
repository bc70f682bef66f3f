// fx/testing/getitem.h: `operator.getitem` as the PyValue a C++ test's tracer records getitem nodes
// with (python/ gives the tracer the real one). Include from test files only.
#pragma once

#include <string>

#include "fx/graph.h"

namespace kiln::fx::testing {

class GetItem : public PyValue {
 public:
  std::string repr() const override { return "<built-in function getitem>"; }
  const void* identity() const override { return this; }
  std::string name_hint() const override { return "getitem"; }
  std::string target_str() const override { return "operator.getitem"; }
};

}  // namespace kiln::fx::testing
