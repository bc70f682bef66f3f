// tensor/ops/core_ops.h: the core ATen op set, the ops every decomposition bottoms out in.
//
// Tag::core on a registry entry is decided here, not at the r.Def site: Registry::Def sets the
// bit exactly for the overloads listed in core_ops.cc (PyTorch 2.13's `core`-tagged overloads
// that kiln registers, plus the few kiln primitives no core op expresses). Everything else that
// is functional has a decomposition in python/kiln/_decomp (tests/test_decomp.py checks both).
#pragma once

#include <string>
#include <vector>

namespace kiln {

// Whether "aten::add.Tensor" (the default overload spelled "aten::empty_like") is a core op.
bool IsCoreAtenOp(const std::string& full_name);
// Every listed core op, by full name; used to check that each is registered.
const std::vector<std::string>& CoreAtenOps();

}  // namespace kiln
