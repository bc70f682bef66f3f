// tensor/testing/op_test_util.h: helpers for the op-family tests (*_ops_test.cc): building small
// tensors from values, reading them back, calling ops by name, and checking error messages.
#pragma once

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "tensor/ops/common.h"

namespace kiln::optest {

using TL = std::vector<Tensor>;
using SL = std::vector<SymInt>;

template <typename T>
Tensor Make(const std::vector<T>& v, DimVector shape) {
  Tensor t = EmptyTensor(shape, CppTypeToScalarType<T>::value, Device());
  EXPECT_EQ(t.numel(), static_cast<int64_t>(v.size()));
  if (!v.empty()) std::memcpy(t.raw_data(), v.data(), v.size() * sizeof(T));
  return t;
}
inline Tensor F(const std::vector<float>& v, DimVector shape) { return Make<float>(v, shape); }
inline Tensor F(const std::vector<float>& v) { return Make<float>(v, {static_cast<int64_t>(v.size())}); }
inline Tensor L(const std::vector<int64_t>& v, DimVector shape) { return Make<int64_t>(v, shape); }
inline Tensor L(const std::vector<int64_t>& v) { return Make<int64_t>(v, {static_cast<int64_t>(v.size())}); }
inline Tensor B(const std::vector<uint8_t>& v, DimVector shape) {
  Tensor t = EmptyTensor(shape, ScalarType::Bool, Device());
  for (size_t i = 0; i < v.size(); ++i) t.data_ptr<bool>()[i] = v[i] != 0;
  return t;
}
inline Tensor B(const std::vector<uint8_t>& v) { return B(v, {static_cast<int64_t>(v.size())}); }

template <typename T>
std::vector<T> Vec(const Tensor& t) {
  Tensor c = ops::contiguous(ops::to_dtype(t, CppTypeToScalarType<T>::value));
  const T* p = c.data_ptr<T>();
  return std::vector<T>(p, p + c.numel());
}
inline std::vector<float> FV(const Tensor& t) { return Vec<float>(t); }
inline std::vector<int64_t> LV(const Tensor& t) { return Vec<int64_t>(t); }
inline DimVector Shape(std::initializer_list<int64_t> s) { return DimVector(s); }
inline Tensor Arange(int64_t n, ScalarType dtype = ScalarType::Float32) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.f);
  return ops::to_dtype(F(v), dtype);
}

template <typename R = Tensor, typename... A>
R Call(const char* name, A&&... args) {
  return CallOp<R>(Registry::Get().FindOrThrow(name), std::forward<A>(args)...);
}

// Runs `fn`, expecting exception type E whose message contains `needle`.
template <typename E, typename Fn>
void ExpectError(Fn fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing '" << needle << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

using OptDtype = std::optional<ScalarType>;
using OptScalar = std::optional<Scalar>;
using OptT = std::optional<Tensor>;
using TT = std::tuple<Tensor, Tensor>;
inline const float kNan = std::numeric_limits<float>::quiet_NaN();
using OptGen = std::optional<Generator>;
using OptLayout = std::optional<Layout>;
using OptDevice = std::optional<Device>;
using OptBool = std::optional<bool>;
using OptMF = std::optional<MemoryFormat>;

}  // namespace kiln::optest
