// tensor/scalar_type.h: the element types of tensors, their C++ types, and type promotion.
//
// Promotion follows PyTorch: categories bool < integer < floating < complex; within a category the
// wider type wins; int8/uint8 promote to int16; float16/bfloat16 promote to float32; a float64
// meeting complex64 gives complex128. Python numbers are weak (ResultTypeState in
// type_promotion.h): they lift the category but never the width.
#pragma once

#include <complex>
#include <cstdint>
#include <string>

#include "runtime/error.h"
#include "tensor/half.h"

namespace kiln {

enum class ScalarType : int8_t {
  Bool = 0, UInt8, Int8, Int16, Int32, Int64, Float16, BFloat16, Float32, Float64,
  ComplexFloat, ComplexDouble,  // complex64 and complex128: std::complex<float> and <double>
  Undefined,
};
constexpr int kNumScalarTypes = static_cast<int>(ScalarType::Undefined);

int64_t ElementSize(ScalarType t);
const char* ScalarTypeName(ScalarType t);  // "float32", "int64", ... (the Python attribute name)
bool IsFloating(ScalarType t);
bool IsIntegral(ScalarType t, bool include_bool);
inline bool IsComplex(ScalarType t) { return t == ScalarType::ComplexFloat || t == ScalarType::ComplexDouble; }
// complex64 -> float32, complex128 -> float64; any other type is its own real type.
ScalarType ToRealValueType(ScalarType t);
// The complex type with t's precision: float32 -> complex64, float64 -> complex128 (complex ones
// map to themselves). float16's complex32 and bfloat16's none are not kiln dtypes: RuntimeError.
ScalarType ToComplexType(ScalarType t);
inline bool IsReducedFloat(ScalarType t) { return t == ScalarType::Float16 || t == ScalarType::BFloat16; }
ScalarType PromoteTypes(ScalarType a, ScalarType b);
// Whether a value of type `from` may be written into a tensor of type `to` by an in-place op
// (PyTorch's canCast: no float into integer, no non-bool into bool).
bool CanCast(ScalarType from, ScalarType to);
// The type an op computes in for reduced floats (float for float16/bfloat16), else itself.
inline ScalarType OpMathType(ScalarType t) { return IsReducedFloat(t) ? ScalarType::Float32 : t; }

ScalarType GetDefaultDtype();
void SetDefaultDtype(ScalarType t);  // float32 or float64 (TypeError otherwise)

template <typename T> struct CppTypeToScalarType;
#define KILN_FORALL_SCALAR_TYPES(_) \
  _(bool, Bool) _(uint8_t, UInt8) _(int8_t, Int8) _(int16_t, Int16) _(int32_t, Int32) \
  _(int64_t, Int64) _(Half, Float16) _(BFloat16, BFloat16) _(float, Float32) _(double, Float64)
#define KILN_DEFINE_CPP_TO_ST(cpp, st) \
  template <> struct CppTypeToScalarType<cpp> { static constexpr ScalarType value = ScalarType::st; };
KILN_FORALL_SCALAR_TYPES(KILN_DEFINE_CPP_TO_ST)
KILN_DEFINE_CPP_TO_ST(std::complex<float>, ComplexFloat)
KILN_DEFINE_CPP_TO_ST(std::complex<double>, ComplexDouble)
#undef KILN_DEFINE_CPP_TO_ST

template <typename T> struct IsComplexCpp : std::false_type {};
template <typename T> struct IsComplexCpp<std::complex<T>> : std::true_type {};
template <typename T> inline constexpr bool is_complex_v = IsComplexCpp<T>::value;

// Accumulation type for reductions: double for float32 (exact sums on 16M elements), float for
// the 16-bit floats, int64 for integers and bool.
template <typename T> struct AccType { using type = int64_t; };
template <> struct AccType<float> { using type = double; };
template <> struct AccType<double> { using type = double; };
template <> struct AccType<Half> { using type = float; };
template <> struct AccType<BFloat16> { using type = float; };
template <> struct AccType<std::complex<float>> { using type = std::complex<double>; };
template <> struct AccType<std::complex<double>> { using type = std::complex<double>; };
template <typename T> using acc_t = typename AccType<T>::type;

// What arithmetic on T computes in: float for the 16-bit floats.
template <typename T> struct OpMath { using type = T; };
template <> struct OpMath<Half> { using type = float; };
template <> struct OpMath<BFloat16> { using type = float; };
template <typename T> using opmath_t = typename OpMath<T>::type;

}  // namespace kiln

// KILN_DISPATCH_TYPES(dtype, "op", SET, [&] { ... scalar_t ... }) calls the lambda with
// scalar_t bound to the C++ type of `dtype`, for the dtypes in SET; others raise RuntimeError
// naming the op and the dtype (PyTorch's "not implemented for 'Bool'").
#define KILN_CASE_TYPE(cpp, st, ...) \
  case ::kiln::ScalarType::st: { using scalar_t = cpp; return __VA_ARGS__(); }

#define KILN_DISPATCH_SWITCH(dtype, name, CASES, ...)                                             \
  [&] {                                                                                           \
    const ::kiln::ScalarType _st = (dtype);                                                       \
    switch (_st) {                                                                                \
      CASES(__VA_ARGS__)                                                                          \
      default:                                                                                    \
        throw ::kiln::NotImplementedError(::kiln::StrCat("\"", name, "\" not implemented for '", \
                                           ::kiln::ScalarTypeDisplayName(_st), "'"));             \
    }                                                                                             \
  }()

#define KILN_CASES_FLOATING(...) \
  KILN_CASE_TYPE(float, Float32, __VA_ARGS__) KILN_CASE_TYPE(double, Float64, __VA_ARGS__) \
  KILN_CASE_TYPE(::kiln::Half, Float16, __VA_ARGS__) KILN_CASE_TYPE(::kiln::BFloat16, BFloat16, __VA_ARGS__)
#define KILN_CASES_INTEGRAL(...) \
  KILN_CASE_TYPE(uint8_t, UInt8, __VA_ARGS__) KILN_CASE_TYPE(int8_t, Int8, __VA_ARGS__)   \
  KILN_CASE_TYPE(int16_t, Int16, __VA_ARGS__) KILN_CASE_TYPE(int32_t, Int32, __VA_ARGS__) \
  KILN_CASE_TYPE(int64_t, Int64, __VA_ARGS__)
#define KILN_CASES_NUMERIC(...) KILN_CASES_FLOATING(__VA_ARGS__) KILN_CASES_INTEGRAL(__VA_ARGS__)
#define KILN_CASES_ALL(...) KILN_CASES_NUMERIC(__VA_ARGS__) KILN_CASE_TYPE(bool, Bool, __VA_ARGS__)
#define KILN_CASES_COMPLEX(...) \
  KILN_CASE_TYPE(std::complex<float>, ComplexFloat, __VA_ARGS__) \
  KILN_CASE_TYPE(std::complex<double>, ComplexDouble, __VA_ARGS__)
#define KILN_CASES_ALL_AND_COMPLEX(...) KILN_CASES_ALL(__VA_ARGS__) KILN_CASES_COMPLEX(__VA_ARGS__)

#define KILN_DISPATCH_FLOATING(dtype, name, ...) KILN_DISPATCH_SWITCH(dtype, name, KILN_CASES_FLOATING, __VA_ARGS__)
#define KILN_DISPATCH_NUMERIC(dtype, name, ...) KILN_DISPATCH_SWITCH(dtype, name, KILN_CASES_NUMERIC, __VA_ARGS__)
#define KILN_DISPATCH_ALL(dtype, name, ...) KILN_DISPATCH_SWITCH(dtype, name, KILN_CASES_ALL, __VA_ARGS__)
#define KILN_DISPATCH_INTEGRAL(dtype, name, ...) KILN_DISPATCH_SWITCH(dtype, name, KILN_CASES_INTEGRAL, __VA_ARGS__)
#define KILN_DISPATCH_COMPLEX(dtype, name, ...) KILN_DISPATCH_SWITCH(dtype, name, KILN_CASES_COMPLEX, __VA_ARGS__)
// Every dtype, complex ones included: for kernels that only move or compare elements.
#define KILN_DISPATCH_ALL_AND_COMPLEX(dtype, name, ...) \
  KILN_DISPATCH_SWITCH(dtype, name, KILN_CASES_ALL_AND_COMPLEX, __VA_ARGS__)

namespace kiln {
// PyTorch's display names in error messages: 'Float', 'Long', 'Bool', 'Half', 'BFloat16', ...
const char* ScalarTypeDisplayName(ScalarType t);
}  // namespace kiln
