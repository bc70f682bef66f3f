// tensor/scalar_type.h: the element types of tensors, their C++ types, and type promotion.
//
// Promotion follows PyTorch: categories bool < integer < floating; within a category the wider
// type wins; int8/uint8 promote to int16; float16/bfloat16 promote to float32. Python numbers are
// weak (ResultTypeState below): they lift the category but never the width.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/error.h"
#include "tensor/half.h"

namespace kiln {

enum class ScalarType : int8_t {
  Bool = 0, UInt8, Int8, Int16, Int32, Int64, Float16, BFloat16, Float32, Float64,
  Undefined,
};
constexpr int kNumScalarTypes = static_cast<int>(ScalarType::Undefined);

int64_t ElementSize(ScalarType t);
const char* ScalarTypeName(ScalarType t);  // "float32", "int64", ... (the Python attribute name)
bool IsFloating(ScalarType t);
bool IsIntegral(ScalarType t, bool include_bool);
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
#undef KILN_DEFINE_CPP_TO_ST

// Accumulation type for reductions: double for float32 (exact sums on 16M elements), float for
// the 16-bit floats, int64 for integers and bool.
template <typename T> struct AccType { using type = int64_t; };
template <> struct AccType<float> { using type = double; };
template <> struct AccType<double> { using type = double; };
template <> struct AccType<Half> { using type = float; };
template <> struct AccType<BFloat16> { using type = float; };
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

#define KILN_DISPATCH_FLOATING(dtype, name, ...) KILN_DISPATCH_SWITCH(dtype, name, KILN_CASES_FLOATING, __VA_ARGS__)
#define KILN_DISPATCH_NUMERIC(dtype, name, ...) KILN_DISPATCH_SWITCH(dtype, name, KILN_CASES_NUMERIC, __VA_ARGS__)
#define KILN_DISPATCH_ALL(dtype, name, ...) KILN_DISPATCH_SWITCH(dtype, name, KILN_CASES_ALL, __VA_ARGS__)
#define KILN_DISPATCH_INTEGRAL(dtype, name, ...) KILN_DISPATCH_SWITCH(dtype, name, KILN_CASES_INTEGRAL, __VA_ARGS__)

namespace kiln {
// PyTorch's display names in error messages: 'Float', 'Long', 'Bool', 'Half', 'BFloat16', ...
const char* ScalarTypeDisplayName(ScalarType t);
}  // namespace kiln
