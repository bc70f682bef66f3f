// tensor/scalar_type.cc: sizes, names and the promotion table.
#include "tensor/scalar_type.h"

#include "runtime/error.h"

namespace kiln {

int64_t ElementSize(ScalarType t) {
  static constexpr int64_t kSizes[] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8, 8, 16};
  KILN_INTERNAL_ASSERT(t != ScalarType::Undefined);
  return kSizes[static_cast<int>(t)];
}

const char* ScalarTypeName(ScalarType t) {
  static const char* kNames[] = {"bool", "uint8", "int8", "int16", "int32", "int64",
                                 "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
                                 "undefined"};
  return kNames[static_cast<int>(t)];
}

const char* ScalarTypeDisplayName(ScalarType t) {
  static const char* kNames[] = {"Bool", "Byte", "Char", "Short", "Int", "Long",
                                 "Half", "BFloat16", "Float", "Double", "ComplexFloat", "ComplexDouble",
                                 "Undefined"};
  return kNames[static_cast<int>(t)];
}

bool IsFloating(ScalarType t) {
  return t == ScalarType::Float16 || t == ScalarType::BFloat16 || t == ScalarType::Float32 ||
         t == ScalarType::Float64;
}

bool IsIntegral(ScalarType t, bool include_bool) {
  return (include_bool && t == ScalarType::Bool) ||
         (t >= ScalarType::UInt8 && t <= ScalarType::Int64);
}

ScalarType ToRealValueType(ScalarType t) {
  if (t == ScalarType::ComplexFloat) return ScalarType::Float32;
  if (t == ScalarType::ComplexDouble) return ScalarType::Float64;
  return t;
}

ScalarType ToComplexType(ScalarType t) {
  switch (t) {
    case ScalarType::Float32: case ScalarType::ComplexFloat: return ScalarType::ComplexFloat;
    case ScalarType::Float64: case ScalarType::ComplexDouble: return ScalarType::ComplexDouble;
    case ScalarType::Float16:
      throw NotImplementedError("complex32 (ComplexHalf), the complex type of float16, is not supported by kiln");
    default:
      throw Error(StrCat("Unknown Complex ScalarType for ", ScalarTypeDisplayName(t)));
  }
}

ScalarType PromoteTypes(ScalarType a, ScalarType b) {
  if (a == b) return a;
  KILN_CHECK(a != ScalarType::Undefined && b != ScalarType::Undefined, "promote_types: undefined dtype");
  // complex wins; its width is the wider of the complex one's and the other's (float64 makes complex128)
  if (IsComplex(a) || IsComplex(b)) {
    bool wide = a == ScalarType::ComplexDouble || b == ScalarType::ComplexDouble || a == ScalarType::Float64 ||
                b == ScalarType::Float64;
    return wide ? ScalarType::ComplexDouble : ScalarType::ComplexFloat;
  }
  // Rows and columns in enum order: b1 u1 i1 i2 i4 i8 f2 bf f4 f8
  using S = ScalarType;
  constexpr S b1 = S::Bool, u1 = S::UInt8, i1 = S::Int8, i2 = S::Int16, i4 = S::Int32, i8 = S::Int64,
              f2 = S::Float16, bf = S::BFloat16, f4 = S::Float32, f8 = S::Float64;
  static constexpr S kTable[10][10] = {
      /* b1 */ {b1, u1, i1, i2, i4, i8, f2, bf, f4, f8},
      /* u1 */ {u1, u1, i2, i2, i4, i8, f2, bf, f4, f8},
      /* i1 */ {i1, i2, i1, i2, i4, i8, f2, bf, f4, f8},
      /* i2 */ {i2, i2, i2, i2, i4, i8, f2, bf, f4, f8},
      /* i4 */ {i4, i4, i4, i4, i4, i8, f2, bf, f4, f8},
      /* i8 */ {i8, i8, i8, i8, i8, i8, f2, bf, f4, f8},
      /* f2 */ {f2, f2, f2, f2, f2, f2, f2, f4, f4, f8},
      /* bf */ {bf, bf, bf, bf, bf, bf, f4, bf, f4, f8},
      /* f4 */ {f4, f4, f4, f4, f4, f4, f4, f4, f4, f8},
      /* f8 */ {f8, f8, f8, f8, f8, f8, f8, f8, f8, f8},
  };
  return kTable[static_cast<int>(a)][static_cast<int>(b)];
}

bool CanCast(ScalarType from, ScalarType to) {
  if (IsComplex(from) && !IsComplex(to)) return false;
  if (IsFloating(from) && IsIntegral(to, /*include_bool=*/true)) return false;
  if (from != ScalarType::Bool && to == ScalarType::Bool) return false;
  return true;
}

namespace {
ScalarType g_default_dtype = ScalarType::Float32;
}

ScalarType GetDefaultDtype() { return g_default_dtype; }

void SetDefaultDtype(ScalarType t) {
  KILN_CHECK_TYPE(t == ScalarType::Float32 || t == ScalarType::Float64 ||
                      t == ScalarType::Float16 || t == ScalarType::BFloat16,
                  "only floating-point types are supported as the default type, got ",
                  ScalarTypeName(t));
  g_default_dtype = t;
}

}  // namespace kiln
