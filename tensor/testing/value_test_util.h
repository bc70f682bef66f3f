// tensor/testing/value_test_util.h: helpers for the reduction, activation and loss tests: tensors
// from value lists (any dtype), values back, calling ops by full name, exact error messages,
// NaN-aware closeness, meta tensors.
#pragma once

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "tensor/ops/common.h"

namespace kiln::valuetest {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

inline std::vector<SymInt> Shape(std::vector<int64_t> s) { return std::vector<SymInt>(s.begin(), s.end()); }

template <typename T = float>
Tensor Make(std::vector<T> values, std::vector<int64_t> shape, ScalarType dtype = CppTypeToScalarType<T>::value) {
  Tensor t = ops::empty(Shape(shape), CppTypeToScalarType<T>::value);
  EXPECT_EQ(t.numel(), static_cast<int64_t>(values.size()));
  if (!values.empty()) std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(T));
  return CastTo(t, dtype);
}

template <typename T = float>
std::vector<T> Values(const Tensor& t) {
  EXPECT_EQ(t.dtype(), CppTypeToScalarType<T>::value);
  Tensor c = ops::contiguous(t);
  std::vector<T> out;
  for (int64_t i = 0; i < c.numel(); ++i) {
    T v;
    std::memcpy(&v, static_cast<const char*>(c.raw_data()) + i * sizeof(T), sizeof(T));
    out.push_back(v);
  }
  return out;
}

inline std::vector<int64_t> Sizes(const Tensor& t) {
  std::vector<int64_t> s;
  for (const SymInt& x : t->sym_sizes()) s.push_back(x.expect_int());
  return s;
}

inline const Op& OpNamed(const std::string& name) { return Registry::Get().FindOrThrow(name); }

template <typename... Args>
Tensor Call(const std::string& name, Args&&... args) {
  return CallOp<Tensor>(OpNamed(name), std::forward<Args>(args)...);
}
template <typename... Args>
std::tuple<Tensor, Tensor> Call2(const std::string& name, Args&&... args) {
  return CallOp<std::tuple<Tensor, Tensor>>(OpNamed(name), std::forward<Args>(args)...);
}

using Dims = std::optional<std::vector<int64_t>>;
using OptSt = std::optional<ScalarType>;
using IntList = std::vector<int64_t>;

// Expects `fn` to throw exactly error type E with message `msg`.
template <typename E, typename F>
void ExpectError(F fn, const std::string& msg) {
  try {
    fn();
    ADD_FAILURE() << "expected an error: " << msg;
  } catch (const E& e) {
    EXPECT_EQ(std::string(e.what()), msg);
  }
}

template <typename T>
void ExpectNear(const std::vector<T>& got, const std::vector<T>& want, double tol = 1e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) EXPECT_TRUE(std::isnan(got[i])) << "at " << i;
    else if (std::isinf(want[i])) EXPECT_EQ(got[i], want[i]) << "at " << i;
    else EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
  }
}

inline Tensor Meta(std::vector<int64_t> shape, ScalarType dtype = ScalarType::Float32) {
  return ops::empty(Shape(shape), dtype, Device(DeviceType::Meta));
}

}  // namespace kiln::valuetest
