// tensor/schema.h: op schemas, parsed from PyTorch's schema strings.
//
//   "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"
//   "max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"
//   "add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)"
// The schema drives Python argument parsing, boxed calls, printing (`op._schema`) and alias
// analysis (which arguments an op writes, which outputs alias which inputs).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tensor/ivalue.h"

namespace kiln {

enum class TypeKind : uint8_t {
  Tensor, TensorList, OptionalTensorList, Int, SymInt, Float, Bool, Str, Scalar, IntList,
  SymIntList, FloatList, BoolList, ScalarType, Layout, Device, MemoryFormat, Generator,
};

struct AliasInfo {
  std::string set;      // "a" in Tensor(a!); empty when the argument aliases nothing
  bool is_write = false;
};

struct Argument {
  std::string name;
  TypeKind kind = TypeKind::Tensor;
  bool optional = false;  // T? : accepts None
  int list_size = -1;     // int[2] -> 2 (a single int broadcasts to it); -1 otherwise
  std::optional<IValue> default_value;
  bool kwarg_only = false;
  AliasInfo alias;
  std::string type_str;   // as written, for printing

  bool is_tensor_like() const {
    return kind == TypeKind::Tensor || kind == TypeKind::TensorList || kind == TypeKind::OptionalTensorList;
  }
};

struct FunctionSchema {
  std::string name;      // "aten::add"
  std::string overload;  // "Tensor" ("" for the default overload)
  std::vector<Argument> arguments;
  std::vector<Argument> returns;
  bool returns_tuple = false;  // "-> (Tensor, Tensor)" (also "-> ()")

  std::string full_name() const { return overload.empty() ? name : name + "." + overload; }
  bool is_mutable() const;
  std::string str() const;  // round-trips through Parse
};

// Parses a schema; names without a namespace get "aten::". Throws Error naming the schema.
FunctionSchema ParseSchema(const std::string& text);

const char* TypeKindName(TypeKind k);

}  // namespace kiln
