// tensor/schema.cc: a small recursive-descent parser for schema strings, and their printing.
#include "tensor/schema.h"

#include <cctype>
#include <cstdlib>
#include <sstream>

namespace kiln {
namespace {

class SchemaParser {
 public:
  explicit SchemaParser(const std::string& text) : s_(text) {}

  FunctionSchema Parse() {
    FunctionSchema schema;
    std::string qualified = Identifier("::.");
    if (qualified.find("::") == std::string::npos) qualified = "aten::" + qualified;
    auto dot = qualified.find('.', qualified.find("::") + 2);
    schema.name = qualified.substr(0, dot);
    if (dot != std::string::npos) schema.overload = qualified.substr(dot + 1);
    Expect('(');
    bool kwarg_only = false;
    SkipSpace();
    if (Peek() != ')') {
      while (true) {
        SkipSpace();
        if (Peek() == '*') {
          ++pos_;
          kwarg_only = true;
        } else {
          Argument a = ParseArgument(/*is_return=*/false);
          a.kwarg_only = kwarg_only;
          schema.arguments.push_back(std::move(a));
        }
        SkipSpace();
        if (Peek() == ',') { ++pos_; continue; }
        break;
      }
    }
    Expect(')');
    SkipSpace();
    Expect('-');
    Expect('>');
    SkipSpace();
    if (Peek() == '(') {
      ++pos_;
      schema.returns_tuple = true;
      SkipSpace();
      while (Peek() != ')') {
        schema.returns.push_back(ParseArgument(/*is_return=*/true));
        SkipSpace();
        if (Peek() == ',') ++pos_;
        SkipSpace();
      }
      Expect(')');
    } else {
      schema.returns.push_back(ParseArgument(/*is_return=*/true));
    }
    SkipSpace();
    if (pos_ != s_.size()) Fail("trailing characters");
    return schema;
  }

 private:
  Argument ParseArgument(bool is_return) {
    Argument a;
    SkipSpace();
    size_t type_start = pos_;
    std::string base = Identifier("");
    // Alias annotation: Tensor(a), Tensor(a!), Tensor(a -> *)
    if (Peek() == '(') {
      ++pos_;
      size_t close = s_.find(')', pos_);
      if (close == std::string::npos) Fail("unclosed alias annotation");
      std::string ann = s_.substr(pos_, close - pos_);
      pos_ = close + 1;
      a.alias.is_write = ann.find('!') != std::string::npos;
      a.alias.set = ann.substr(0, ann.find_first_of("! -"));
    }
    bool is_list = false;
    if (Peek() == '[') {
      ++pos_;
      std::string n;
      while (std::isdigit(static_cast<unsigned char>(Peek()))) n += s_[pos_++];
      Expect(']');
      is_list = true;
      if (!n.empty()) a.list_size = std::atoi(n.c_str());
    }
    if (Peek() == '?') { ++pos_; a.optional = true; }
    // "Tensor?[]" : a list of optional tensors
    if (Peek() == '[' && base == "Tensor" && a.optional) {
      ++pos_;
      Expect(']');
      a.kind = TypeKind::OptionalTensorList;
      a.optional = false;
      if (Peek() == '?') { ++pos_; a.optional = true; }
    } else {
      a.kind = KindOf(base, is_list);
    }
    a.type_str = s_.substr(type_start, pos_ - type_start);
    SkipSpace();
    if (std::isalpha(static_cast<unsigned char>(Peek())) || Peek() == '_') a.name = Identifier("");
    else if (!is_return) Fail("argument without a name");
    SkipSpace();
    if (Peek() == '=') {
      ++pos_;
      SkipSpace();
      a.default_value = ParseDefault(a);
    }
    return a;
  }

  TypeKind KindOf(const std::string& base, bool list) {
    if (base == "Tensor") return list ? TypeKind::TensorList : TypeKind::Tensor;
    if (base == "int") return list ? TypeKind::IntList : TypeKind::Int;
    if (base == "SymInt") return list ? TypeKind::SymIntList : TypeKind::SymInt;
    if (base == "float") return list ? TypeKind::FloatList : TypeKind::Float;
    if (base == "bool") return list ? TypeKind::BoolList : TypeKind::Bool;
    if (list) Fail("lists of " + base + " are not supported");
    if (base == "str") return TypeKind::Str;
    if (base == "Scalar") return TypeKind::Scalar;
    if (base == "ScalarType") return TypeKind::ScalarType;
    if (base == "Layout") return TypeKind::Layout;
    if (base == "Device") return TypeKind::Device;
    if (base == "MemoryFormat") return TypeKind::MemoryFormat;
    if (base == "Generator") return TypeKind::Generator;
    Fail("unknown type '" + base + "'");
  }

  IValue ParseDefault(const Argument& a) {
    size_t start = pos_;
    int depth = 0;
    bool in_string = false;
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c == '"' || c == '\'') in_string = !in_string;
      if (!in_string) {
        if (c == '[') ++depth;
        if (c == ']') --depth;
        if ((c == ',' || c == ')') && depth == 0) break;
      }
      ++pos_;
    }
    std::string text = s_.substr(start, pos_ - start);
    while (!text.empty() && text.back() == ' ') text.pop_back();
    if (text == "None") return IValue();
    switch (a.kind) {
      case TypeKind::Int:
      case TypeKind::SymInt:
        if (text == "Mean") return IValue(int64_t(1));
        if (text == "Sum") return IValue(int64_t(2));
        if (text == "None_") return IValue(int64_t(0));
        return a.kind == TypeKind::Int ? IValue(int64_t(std::stoll(text))) : IValue(SymInt(std::stoll(text)));
      case TypeKind::Float: return IValue(std::stod(text));
      case TypeKind::Bool: return IValue(text == "True");
      case TypeKind::Str: return IValue(text.substr(1, text.size() - 2));
      case TypeKind::Scalar:
        if (text == "True" || text == "False") return IValue(text == "True");
        if (text.find_first_of(".eE") != std::string::npos && text.find("inf") == std::string::npos)
          return IValue(std::stod(text));
        if (text == "inf" || text == "-inf") return IValue(std::stod(text));
        return IValue(int64_t(std::stoll(text)));
      case TypeKind::IntList:
      case TypeKind::SymIntList: {
        std::vector<SymInt> v;
        if (text.front() == '[') {
          std::string inner = text.substr(1, text.size() - 2);
          std::stringstream ss(inner);
          std::string item;
          while (std::getline(ss, item, ',')) if (!item.empty()) v.emplace_back(std::stoll(item));
        } else {
          int64_t x = std::stoll(text);  // int[2] stride=1 -> [1, 1]
          v.assign(a.list_size > 0 ? a.list_size : 1, SymInt(x));
        }
        return IValue(std::move(v));
      }
      case TypeKind::BoolList: {
        std::vector<bool> v;
        std::string inner = text.substr(1, text.size() - 2);
        std::stringstream ss(inner);
        std::string item;
        while (std::getline(ss, item, ',')) {
          while (!item.empty() && item[0] == ' ') item.erase(0, 1);
          if (!item.empty()) v.push_back(item == "True");
        }
        return IValue(std::move(v));
      }
      case TypeKind::FloatList: return IValue(std::vector<double>{});
      case TypeKind::MemoryFormat:
        return IValue(text == "channels_last" ? MemoryFormat::ChannelsLast
                      : text == "preserve_format" ? MemoryFormat::Preserve : MemoryFormat::Contiguous);
      case TypeKind::Layout: return IValue(Layout::Strided);
      case TypeKind::ScalarType: {
        // "dtype=long" (randint, randperm): PyTorch's short names for dtypes.
        static const std::pair<const char*, ScalarType> kNames[] = {
            {"bool", ScalarType::Bool}, {"uint8", ScalarType::UInt8}, {"int8", ScalarType::Int8},
            {"int16", ScalarType::Int16}, {"int", ScalarType::Int32}, {"long", ScalarType::Int64},
            {"half", ScalarType::Float16}, {"bfloat16", ScalarType::BFloat16}, {"float", ScalarType::Float32},
            {"double", ScalarType::Float64}};
        for (const auto& [name, t] : kNames) if (text == name) return IValue(t);
        Fail("unsupported dtype default '" + text + "'");
      }
      default: Fail("unsupported default '" + text + "'");
    }
  }

  std::string Identifier(const std::string& extra) {
    SkipSpace();
    size_t start = pos_;
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || extra.find(c) != std::string::npos) ++pos_;
      else break;
    }
    if (start == pos_) Fail("expected an identifier");
    return s_.substr(start, pos_ - start);
  }
  char Peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void SkipSpace() { while (pos_ < s_.size() && s_[pos_] == ' ') ++pos_; }
  void Expect(char c) {
    SkipSpace();
    if (Peek() != c) Fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  [[noreturn]] void Fail(const std::string& what) {
    throw Error(StrCat("invalid schema '", s_, "': ", what, " at position ", pos_));
  }

  const std::string& s_;
  size_t pos_ = 0;
};

std::string DefaultToString(const Argument& a, const IValue& v) {
  if (v.is_none()) return "None";
  switch (a.kind) {
    case TypeKind::Bool: return v.to_bool() ? "True" : "False";
    case TypeKind::Str: return "\"" + v.to_string() + "\"";
    case TypeKind::Float: {
      std::ostringstream os;
      os << v.to_double();
      std::string s = os.str();
      if (s.find_first_of(".en") == std::string::npos) s += ".";
      return s;
    }
    case TypeKind::Scalar: {
      Scalar s = v.to_scalar();
      if (s.is_bool()) return s.to_bool() ? "True" : "False";
      if (s.is_integral()) return std::to_string(s.to_int());
      std::ostringstream os;
      os << s.to_double();
      std::string str = os.str();
      if (str.find_first_of(".en") == std::string::npos) str += ".";
      return str;
    }
    case TypeKind::IntList:
    case TypeKind::SymIntList: {
      const auto& l = v.to_symint_list();
      if (a.list_size > 0 && !l.empty()) {
        bool same = true;
        for (auto& x : l) same = same && x.expect_int() == l[0].expect_int();
        if (same && static_cast<int>(l.size()) == a.list_size) return l[0].str();
      }
      std::string s = "[";
      for (size_t i = 0; i < l.size(); ++i) s += (i ? ", " : "") + l[i].str();
      return s + "]";
    }
    case TypeKind::BoolList: {
      std::string s = "[";
      const auto& l = v.to_bool_list();
      for (size_t i = 0; i < l.size(); ++i) s += std::string(i ? ", " : "") + (l[i] ? "True" : "False");
      return s + "]";
    }
    case TypeKind::MemoryFormat: {
      auto m = v.to_memory_format();
      return m == MemoryFormat::ChannelsLast ? "channels_last" : m == MemoryFormat::Preserve ? "preserve_format" : "contiguous_format";
    }
    case TypeKind::Int:
    case TypeKind::SymInt:
      return std::to_string(v.to_int());
    case TypeKind::ScalarType: {
      switch (v.to_scalar_type()) {
        case ScalarType::Int64: return "long";
        case ScalarType::Int32: return "int";
        case ScalarType::Float32: return "float";
        case ScalarType::Float64: return "double";
        case ScalarType::Float16: return "half";
        default: return ScalarTypeName(v.to_scalar_type());
      }
    }
    default: return "?";
  }
}

}  // namespace

FunctionSchema ParseSchema(const std::string& text) { return SchemaParser(text).Parse(); }

bool FunctionSchema::is_mutable() const {
  for (const auto& a : arguments) if (a.alias.is_write) return true;
  return false;
}

std::string FunctionSchema::str() const {
  std::ostringstream os;
  os << full_name() << "(";
  bool kw = false;
  for (size_t i = 0; i < arguments.size(); ++i) {
    const Argument& a = arguments[i];
    if (i) os << ", ";
    if (a.kwarg_only && !kw) { os << "*, "; kw = true; }
    os << a.type_str << " " << a.name;
    if (a.default_value) os << "=" << DefaultToString(a, *a.default_value);
  }
  os << ") -> ";
  if (returns_tuple) os << "(";
  for (size_t i = 0; i < returns.size(); ++i) {
    if (i) os << ", ";
    os << returns[i].type_str;
    if (!returns[i].name.empty()) os << " " << returns[i].name;
  }
  if (returns_tuple) os << ")";
  return os.str();
}

const char* TypeKindName(TypeKind k) {
  static const char* kNames[] = {"Tensor", "List[Tensor]", "List[Optional[Tensor]]", "int", "SymInt",
                                 "float", "bool", "str", "Number", "tuple of ints", "tuple of ints",
                                 "tuple of floats", "tuple of bools", "dtype", "layout", "device",
                                 "memory_format", "Generator"};
  return kNames[static_cast<int>(k)];
}

std::string IValue::type_name() const {
  static const char* kNames[] = {"None", "Tensor", "int", "float", "bool", "SymInt", "str",
                                 "SymInt[]", "float[]", "bool[]", "Tensor[]", "Tensor?[]",
                                 "Device", "ScalarType", "Generator", "Layout", "MemoryFormat", "complex"};
  return kNames[v_.index()];
}

}  // namespace kiln
