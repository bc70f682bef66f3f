// tensor/ops/checked_convert.h: whether a Scalar fits an integer dtype, as PyTorch's
// checked_convert decides it (c10::overflows), for the ops that refuse rather than wrap.
#pragma once

#include "tensor/scalar.h"
#include "tensor/scalar_type.h"

namespace kiln {

// Raises PyTorch's RuntimeError ("value cannot be converted to type int8_t without overflow")
// unless `value` converts to the integer dtype `dtype` without overflow (other dtypes take any):
// a float value must lie in [lowest, max] (NaN and infinities never do); an integer one too,
// except that an unsigned dtype also takes negatives down to -max, which wrap (PyTorch lets
// `uint8.fill_(-1)` give 255 and refuses -256). The message names the C type as PyTorch's ops do
// ("int" for int32), or `type_name` (torch.tensor names the dtype: "int8").
//
// Floating dtypes, as c10::overflows: a finite value beyond the dtype's range is refused ("value
// cannot be converted to type float without overflow"); infinities and NaN convert. PyTorch checks
// them in fill_ and masked_fill_ (`floats` kAll), float32 alone in `x[k] = v`, and none in
// torch.tensor, which rounds 1e39 to inf.
enum class FloatRange { kUnchecked, kFloat32Only, kAll };
void CheckFitsDtype(const Scalar& value, ScalarType dtype, const char* type_name = nullptr,
                    FloatRange floats = FloatRange::kAll);

}  // namespace kiln
