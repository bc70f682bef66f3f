// fx/repr.h: Python's repr of the constants a graph holds, and their equality.
//
// Graph printing and generated code must read as Python: `1.0` not `1`, `1e-05`, `'a'`, `True`,
// `kiln.float32`, `device(type='cpu')`. These follow CPython's rules (float repr switches to
// exponent form below 1e-4 and from 1e16).
#pragma once

#include <string>

#include "tensor/ivalue.h"

namespace kiln::fx {

std::string PyFloatRepr(double v);
std::string PyStringRepr(const std::string& s);
std::string ConstRepr(const IValue& v);
bool ConstEqual(const IValue& a, const IValue& b);

}  // namespace kiln::fx
