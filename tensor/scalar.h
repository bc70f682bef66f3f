// tensor/scalar.h: Scalar, a Python number (bool, int, float or complex) passed to an op.
#pragma once

#include <cstdint>
#include <string>

#include "tensor/scalar_type.h"

namespace kiln {

class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, Double, Complex };
  Scalar() : Scalar(int64_t(0)) {}
  Scalar(bool v) : kind_(Kind::Bool) { i_ = v; }              // NOLINT
  Scalar(int v) : kind_(Kind::Int) { i_ = v; }                // NOLINT
  Scalar(int64_t v) : kind_(Kind::Int) { i_ = v; }            // NOLINT
  Scalar(double v) : kind_(Kind::Double) { d_ = v; }          // NOLINT
  Scalar(std::complex<double> v) : kind_(Kind::Complex), imag_(v.imag()) { d_ = v.real(); }  // NOLINT

  Kind kind() const { return kind_; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_integral() const { return kind_ == Kind::Int; }  // PyTorch: bool is not integral here
  bool is_floating() const { return kind_ == Kind::Double; }
  bool is_complex() const { return kind_ == Kind::Complex; }
  // A complex value's real part (PyTorch casts complex to real by dropping the imaginary part).
  double to_double() const { return has_double() ? d_ : static_cast<double>(i_); }
  int64_t to_int() const { return has_double() ? static_cast<int64_t>(d_) : i_; }
  bool to_bool() const { return kind_ == Kind::Complex ? (d_ != 0 || imag_ != 0) : has_double() ? d_ != 0 : i_ != 0; }
  std::complex<double> to_complex() const { return {to_double(), kind_ == Kind::Complex ? imag_ : 0.0}; }
  // A float into an integer type converts as PyTorch's c10::convert does: straight to the type
  // (on x86 a NaN or an out-of-range value becomes the type's 32- or 64-bit minimum, truncated
  // for 8- and 16-bit types), except uint8, which goes through int64 so negative values wrap. Through
  // int64 for every type, `int32.fill_(tensor(nan))` gave 0 where PyTorch gives -2147483648
  // (fuzz seed 831, program 447).
  template <typename T> T to() const {
    if constexpr (std::is_same_v<T, bool>) return to_bool();
    else if constexpr (is_complex_v<T>) return T(to_complex());
    else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, uint8_t>) return has_double() ? static_cast<T>(d_) : static_cast<T>(i_);
    else if constexpr (std::is_integral_v<T>) return static_cast<T>(to_int());
    else return static_cast<T>(static_cast<float>(to_double()));
  }
  // The dtype a tensor made from this number would get (bool, int64, or the default float).
  ScalarType dtype() const {
    return kind_ == Kind::Bool ? ScalarType::Bool
           : kind_ == Kind::Int ? ScalarType::Int64
           : kind_ == Kind::Complex ? ToComplexType(GetDefaultDtype()) : GetDefaultDtype();
  }
  std::string str() const;

 private:
  bool has_double() const { return kind_ == Kind::Double || kind_ == Kind::Complex; }

  Kind kind_;
  union { int64_t i_; double d_; };
  double imag_ = 0;  // a complex value's imaginary part (d_ holds the real part)
};

template <> inline double Scalar::to<double>() const { return to_double(); }

// The Scalar holding one element of type T (a template, so each type compiles only its branch).
template <typename T>
Scalar ScalarFromElement(T v) {
  if constexpr (std::is_same_v<T, bool>) return Scalar(v);
  else if constexpr (std::is_integral_v<T>) return Scalar(static_cast<int64_t>(v));
  else if constexpr (is_complex_v<T>) return Scalar(std::complex<double>(v));
  else return Scalar(static_cast<double>(static_cast<opmath_t<T>>(v)));
}
template <> inline float Scalar::to<float>() const { return static_cast<float>(to_double()); }

}  // namespace kiln
