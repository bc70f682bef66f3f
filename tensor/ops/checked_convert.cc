// tensor/ops/checked_convert.cc: PyTorch's overflow rule for Scalars stored into integer and
// floating dtypes (c10::overflows).
#include "tensor/ops/checked_convert.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "runtime/error.h"

namespace kiln {
namespace {

template <typename T>
bool Fits(const Scalar& value) {
  using L = std::numeric_limits<T>;
  if (value.is_complex()) return false;  // never an integer dtype's
  if (value.is_floating()) {
    const double v = value.to<double>();
    // int64's max is no double: 2^63, which it rounds to, is already out of range (PyTorch lets
    // it through, and the conversion is undefined)
    const bool below_max = sizeof(T) == 8 ? v < 9223372036854775808.0 : v <= static_cast<double>(L::max());
    return !std::isnan(v) && v >= static_cast<double>(L::lowest()) && below_max;
  }
  const int64_t v = value.to<int64_t>();
  if constexpr (!L::is_signed) {
    if (v < 0) return static_cast<uint64_t>(-(v + 1)) + 1 <= static_cast<uint64_t>(L::max());
    return static_cast<uint64_t>(v) <= static_cast<uint64_t>(L::max());
  } else {
    return v >= static_cast<int64_t>(L::lowest()) && v <= static_cast<int64_t>(L::max());
  }
}

bool FitsIntegerDtype(const Scalar& value, ScalarType dtype) {
  switch (dtype) {
    case ScalarType::UInt8: return Fits<uint8_t>(value);
    case ScalarType::Int8: return Fits<int8_t>(value);
    case ScalarType::Int16: return Fits<int16_t>(value);
    case ScalarType::Int32: return Fits<int32_t>(value);
    case ScalarType::Int64: return Fits<int64_t>(value);
    default: return true;
  }
}

// c10::overflows for a floating dtype: finite values beyond [lowest, max] (compared as doubles)
bool FitsFloatDtype(const Scalar& value, ScalarType dtype) {
  if (value.is_complex()) return true;
  double max;
  switch (dtype) {
    case ScalarType::Float32: max = std::numeric_limits<float>::max(); break;
    case ScalarType::Float16: max = 65504.0; break;
    case ScalarType::BFloat16: max = 3.38953138925153547590470800371487866880e38; break;
    default: return true;
  }
  const double v = value.to<double>();
  return std::isinf(v) || std::isnan(v) || (v >= -max && v <= max);
}

// PyTorch's name for dtype's C type in those errors
const char* CTypeName(ScalarType dtype) {
  switch (dtype) {
    case ScalarType::UInt8: return "uint8_t";
    case ScalarType::Int8: return "int8_t";
    case ScalarType::Int16: return "int16_t";
    case ScalarType::Int32: return "int";
    case ScalarType::Int64: return "int64_t";
    case ScalarType::Float32: return "float";
    case ScalarType::Float16: return "c10::Half";
    case ScalarType::BFloat16: return "c10::BFloat16";
    default: return ScalarTypeName(dtype);
  }
}

}  // namespace

void CheckFitsDtype(const Scalar& value, ScalarType dtype, const char* type_name, FloatRange floats) {
  const bool float_checked =
      floats == FloatRange::kAll || (floats == FloatRange::kFloat32Only && dtype == ScalarType::Float32);
  KILN_CHECK(FitsIntegerDtype(value, dtype) && (!float_checked || FitsFloatDtype(value, dtype)),
             "value cannot be converted to type ", type_name != nullptr ? type_name : CTypeName(dtype),
             " without overflow");
}

}  // namespace kiln
