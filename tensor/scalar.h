// tensor/scalar.h: Scalar, a Python number (bool, int or float) passed to an op.
#pragma once

#include <cstdint>
#include <string>

#include "tensor/scalar_type.h"

namespace kiln {

class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, Double };
  Scalar() : Scalar(int64_t(0)) {}
  Scalar(bool v) : kind_(Kind::Bool) { i_ = v; }              // NOLINT
  Scalar(int v) : kind_(Kind::Int) { i_ = v; }                // NOLINT
  Scalar(int64_t v) : kind_(Kind::Int) { i_ = v; }            // NOLINT
  Scalar(double v) : kind_(Kind::Double) { d_ = v; }          // NOLINT

  Kind kind() const { return kind_; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_integral() const { return kind_ == Kind::Int; }  // PyTorch: bool is not integral here
  bool is_floating() const { return kind_ == Kind::Double; }
  double to_double() const { return kind_ == Kind::Double ? d_ : static_cast<double>(i_); }
  int64_t to_int() const { return kind_ == Kind::Double ? static_cast<int64_t>(d_) : i_; }
  bool to_bool() const { return kind_ == Kind::Double ? d_ != 0 : i_ != 0; }
  template <typename T> T to() const {
    if constexpr (std::is_same_v<T, bool>) return to_bool();
    else if constexpr (std::is_integral_v<T>) return static_cast<T>(to_int());
    else return static_cast<T>(static_cast<float>(to_double()));
  }
  // The dtype a tensor made from this number would get (bool, int64, or the default float).
  ScalarType dtype() const {
    return kind_ == Kind::Bool ? ScalarType::Bool
           : kind_ == Kind::Int ? ScalarType::Int64 : GetDefaultDtype();
  }
  std::string str() const;

 private:
  Kind kind_;
  union { int64_t i_; double d_; };
};

template <> inline double Scalar::to<double>() const { return to_double(); }
template <> inline float Scalar::to<float>() const { return static_cast<float>(to_double()); }

}  // namespace kiln
