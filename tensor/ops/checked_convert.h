// tensor/ops/checked_convert.h: whether a Scalar fits an integer dtype, as PyTorch's
// checked_convert decides it (c10::overflows), for the ops that refuse rather than wrap.
#pragma once

#include "tensor/scalar.h"
#include "tensor/scalar_type.h"

namespace kiln {

// Whether `value` converts to the integer dtype `dtype` without overflow (always true for other
// dtypes): a float value must lie in [lowest, max] (NaN and infinities never do); an integer one
// too, except that an unsigned dtype also takes negatives down to -max, which wrap (PyTorch lets
// `uint8.fill_(-1)` give 255 and refuses -256).
bool FitsIntegerDtype(const Scalar& value, ScalarType dtype);

// PyTorch's name for dtype's C type in those errors: "uint8_t", "int8_t", "int16_t", "int" (int32),
// "int64_t"; the dtype's name for other dtypes.
const char* CTypeName(ScalarType dtype);

}  // namespace kiln
