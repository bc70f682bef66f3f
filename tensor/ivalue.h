// tensor/ivalue.h: IValue, one argument or result of a boxed op call, and the Stack of them.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "runtime/error.h"
#include "tensor/generator.h"
#include "tensor/scalar.h"
#include "tensor/tensor_impl.h"

namespace kiln {

enum class Layout : int8_t { Strided = 0 };
enum class MemoryFormat : int8_t { Contiguous = 0, Preserve = 1, ChannelsLast = 2 };

using OptionalTensorList = std::vector<std::optional<Tensor>>;

class IValue {
 public:
  using Variant = std::variant<std::monostate, Tensor, int64_t, double, bool, SymInt, std::string,
                               std::vector<SymInt>, std::vector<double>, std::vector<bool>,
                               std::vector<Tensor>, OptionalTensorList, Device, ScalarType,
                               Generator, Layout, MemoryFormat, std::complex<double>>;
  IValue() = default;
  IValue(Tensor t) : v_(std::move(t)) {}                  // NOLINT
  IValue(int64_t i) : v_(i) {}                            // NOLINT
  IValue(int i) : v_(int64_t(i)) {}                       // NOLINT
  IValue(double d) : v_(d) {}                             // NOLINT
  IValue(bool b) : v_(b) {}                               // NOLINT
  IValue(SymInt s) : v_(std::move(s)) {}                  // NOLINT
  IValue(std::string s) : v_(std::move(s)) {}             // NOLINT
  IValue(std::vector<SymInt> v) : v_(std::move(v)) {}     // NOLINT
  IValue(const SymDimVector& v) : v_(std::vector<SymInt>(v.begin(), v.end())) {}  // NOLINT
  IValue(const std::vector<int64_t>& v) : v_(std::vector<SymInt>(v.begin(), v.end())) {}  // NOLINT
  IValue(const DimVector& v) : v_(std::vector<SymInt>(v.begin(), v.end())) {}  // NOLINT
  IValue(std::vector<double> v) : v_(std::move(v)) {}     // NOLINT
  IValue(std::vector<bool> v) : v_(std::move(v)) {}       // NOLINT
  IValue(std::vector<Tensor> v) : v_(std::move(v)) {}     // NOLINT
  IValue(OptionalTensorList v) : v_(std::move(v)) {}      // NOLINT
  IValue(Device d) : v_(d) {}                             // NOLINT
  IValue(ScalarType t) : v_(t) {}                         // NOLINT
  IValue(Generator g) : v_(std::move(g)) {}               // NOLINT
  IValue(Layout l) : v_(l) {}                             // NOLINT
  IValue(MemoryFormat m) : v_(m) {}                       // NOLINT
  IValue(const Scalar& s) {                               // NOLINT
    if (s.is_bool()) v_ = s.to_bool();
    else if (s.is_integral()) v_ = s.to_int();
    else if (s.is_complex()) v_ = s.to_complex();
    else v_ = s.to_double();
  }
  template <typename T>
  IValue(const std::optional<T>& o) { if (o) *this = IValue(*o); }  // NOLINT

  bool is_none() const { return v_.index() == 0; }
  bool is_tensor() const { return std::holds_alternative<Tensor>(v_); }
  bool is_int() const { return std::holds_alternative<int64_t>(v_); }
  bool is_double() const { return std::holds_alternative<double>(v_); }
  bool is_bool() const { return std::holds_alternative<bool>(v_); }
  bool is_symint() const { return std::holds_alternative<SymInt>(v_); }
  bool is_tensor_list() const { return std::holds_alternative<std::vector<Tensor>>(v_); }
  bool is_optional_tensor_list() const { return std::holds_alternative<OptionalTensorList>(v_); }

  const Tensor& to_tensor() const { return Get<Tensor>("Tensor"); }
  Tensor& to_tensor() { return std::get<Tensor>(v_); }
  int64_t to_int() const {
    if (auto* s = std::get_if<SymInt>(&v_)) return s->expect_int();
    if (auto* b = std::get_if<bool>(&v_)) return *b;
    return Get<int64_t>("int");
  }
  SymInt to_symint() const {
    if (auto* s = std::get_if<SymInt>(&v_)) return *s;
    return SymInt(Get<int64_t>("SymInt"));
  }
  double to_double() const {
    if (auto* i = std::get_if<int64_t>(&v_)) return static_cast<double>(*i);
    return Get<double>("float");
  }
  bool to_bool() const { return Get<bool>("bool"); }
  Scalar to_scalar() const {
    if (auto* b = std::get_if<bool>(&v_)) return Scalar(*b);
    if (auto* i = std::get_if<int64_t>(&v_)) return Scalar(*i);
    if (auto* s = std::get_if<SymInt>(&v_)) return Scalar(s->expect_int());
    if (auto* c = std::get_if<std::complex<double>>(&v_)) return Scalar(*c);
    return Scalar(Get<double>("Scalar"));
  }
  const std::string& to_string() const { return Get<std::string>("str"); }
  const std::vector<SymInt>& to_symint_list() const { return Get<std::vector<SymInt>>("SymInt[]"); }
  std::vector<int64_t> to_int_list() const {
    const auto& l = to_symint_list();
    std::vector<int64_t> out(l.size());
    for (size_t i = 0; i < l.size(); ++i) out[i] = l[i].expect_int();
    return out;
  }
  const std::vector<double>& to_double_list() const { return Get<std::vector<double>>("float[]"); }
  const std::vector<bool>& to_bool_list() const { return Get<std::vector<bool>>("bool[]"); }
  const std::vector<Tensor>& to_tensor_list() const { return Get<std::vector<Tensor>>("Tensor[]"); }
  const OptionalTensorList& to_optional_tensor_list() const { return Get<OptionalTensorList>("Tensor?[]"); }
  Device to_device() const { return Get<Device>("Device"); }
  ScalarType to_scalar_type() const { return Get<ScalarType>("ScalarType"); }
  const Generator& to_generator() const { return Get<Generator>("Generator"); }
  Layout to_layout() const { return Get<Layout>("Layout"); }
  MemoryFormat to_memory_format() const { return Get<MemoryFormat>("MemoryFormat"); }

  const Variant& variant() const { return v_; }
  std::string type_name() const;

 private:
  template <typename T>
  const T& Get(const char* what) const {
    const T* p = std::get_if<T>(&v_);
    KILN_INTERNAL_ASSERT(p != nullptr, "IValue holds ", type_name(), ", expected ", what);
    return *p;
  }
  Variant v_;
};

using Stack = std::vector<IValue>;

}  // namespace kiln
